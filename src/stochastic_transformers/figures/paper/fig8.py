r"""Figure 8 (appendix D.1): the two-token transition against the time horizon.

Two tokens, Gaussian values, :math:`B = I`, the setting of Figure 3.  Theorem 2 says
where the overlap :math:`Z_t = \langle Y^1_t, Y^2_t\rangle` of the limit diffusion can
end: +1 (one cluster) always attracts, and -1 (an antipodal pair) attracts iff
:math:`d - 2 < \cosh 2\beta`, i.e. :math:`\beta > \beta_c(d) = \tfrac12\operatorname{arccosh}(d-2)`.
Over the dimensions :math:`d = 4, \dots, 10` of Figure 3 this gives three regimes:

I.   :math:`\beta < \beta_c(4)`: only the single cluster attracts, for every d;
II.  :math:`\beta_c(4) < \beta < \beta_c(10)`: the antipodal pair attracts for some d only;
III. :math:`\beta > \beta_c(10)`: the antipodal pair attracts for every d.

(The paper words them "two-token clustering possible for all d / for some d / for all d
again"; for the antipodal outcome the first regime is "for no d".)  For one beta in each
regime and every d, one run that records the overlap on a log-spaced time grid gives the
fraction of trajectories not yet clustered, ending in one cluster, and ending antipodal,
at every horizon :math:`t \le T` at once.  The long-time limit of the antipodal fraction
is the exact scale-function probability
:func:`stochastic_transformers.theory.antipodal_probability`.

A pair is classified at each recorded time with the tolerance of the paper
(:math:`10^{-3}`, see :mod:`stochastic_transformers.classification`), from the gaps
:math:`1 \mp Z` that the exact overlap chain keeps at full precision.  Early stopping
is off (it is always off when times are recorded), so every trajectory runs the full
:math:`LT` layers.
"""

from __future__ import annotations

import numpy as np

from ... import simulate, theory
from ..._validation import check_real
from ...classification import ANTIPODAL, SINGLE, UNCLUSTERED, two_token_outcome
from ...config import ModelConfig, RunConfig
from ...stats import agreement_z, z_digest
from ..base import (add_outcome_fractions, cell_threads, laid_out, log_time_grid, on_time_axis,
                    trajectory_layer_work)
from ..knobs import integers
from ..spec import Figure
from ._fig8_page import phrases, texts  # noqa: F401 - the page's words, reached from here

#: beta of each regime for d = 4..10: 0.25 < beta_c(4) = 0.658; beta_c(7) = 1.146 < 1.2 <
#: beta_c(8) = 1.239 (antipodal attracting for d = 4..7 only); 3.0 > beta_c(10) = 1.384.
BETAS = (0.25, 1.2, 3.0)

_BASE = dict(betas=BETAS, attention="softmax", tol=1e-3, seed=0)
SCALES = {
    "smoke": dict(_BASE, d=(4, 8), n_traj=100, L=20, T=20.0, n_times=25),
    "quick": dict(_BASE, d=tuple(range(4, 11)), n_traj=1000, L=100, T=100.0, n_times=60),
    "paper": dict(_BASE, d=tuple(range(4, 11)), n_traj=2000, L=100, T=200.0, n_times=80),
}

#: A (beta, d) point counts as settled once the unclustered fraction stays at or below this.
SETTLE_LEVEL = 0.01

#: The paper's claim (proportions stabilise well below the largest horizon) holds in a run
#: where every point has settled by this fraction of T (``settled_early`` in :func:`summary`),
SETTLED_EARLY_FRACTION = 0.5
#: the antipodal fraction moves by at most this much between T/10 and T (``flat``),
FLAT_LATE_CHANGE = 0.02
#: and at T at least this share of the points lies within 2 standard errors of the
#: long-time limit, none beyond :data:`AGREE_MAX_Z` standard errors (``agrees_with_theory``).
AGREE_SHARE_2SE = 0.85
AGREE_MAX_Z = 4.0
#: Antipodal visits where -1 repels are transient when the fraction at T is at most this
#: share of its peak over time (``transient_antipodal["reading"]``).
TRANSIENT_DROP = 0.5


def settle_time(p_unclustered, times, level=SETTLE_LEVEL):
    """First recorded time from which the unclustered fraction stays at or below ``level``.

    ``p_unclustered`` has time as its last axis; the result has the leading shape, with
    ``inf`` where the fraction is above ``level`` at the last recorded time.
    """
    level = check_real("level", level, 0.0, 1.0)
    p, times = on_time_axis("p_unclustered", p_unclustered, times)
    # from each time on, never above the level again
    stays = np.flip(np.logical_and.accumulate(np.flip(~(p > level), -1), axis=-1), -1)
    out = np.where(stays.any(axis=-1), times[np.argmax(stays, axis=-1)], np.inf)
    return out if out.ndim else float(out)


def cell(*, beta, d, n_traj, L, T, n_times, attention, tol, seed):
    """One (beta, d) point: counts of each two-token outcome at every recorded time."""
    times = log_time_grid(T, L, n_times)
    ds = simulate(ModelConfig(d=d, beta=beta, attention=attention),
                  RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=T, seed=seed, times=times, tol=tol,
                            n_threads=cell_threads()))
    codes = two_token_outcome(ds.one_minus_overlap_t.values, ds.one_plus_overlap_t.values,
                              tol=tol)  # (trajectory, time)
    return {"n_single": np.sum(codes == SINGLE, axis=0),
            "n_antipodal": np.sum(codes == ANTIPODAL, axis=0),
            "n_unclustered": np.sum(codes == UNCLUSTERED, axis=0),
            "n_traj": n_traj}


def run(knobs, sweeps):
    """The (beta, d) sweep with recorded times (:func:`cell`), then :func:`finish`."""
    outputs = ("n_single", "n_antipodal", "n_unclustered")
    raw = sweeps({"beta": list(knobs["betas"]), "d": list(knobs["d"])},
                 fixed={k: knobs[k] for k in ("n_traj", "L", "T", "n_times", "attention", "tol")},
                 seed=knobs["seed"], output_dims={k: ("time",) for k in outputs},
                 output_coords={"time": log_time_grid(knobs["T"], knobs["L"], knobs["n_times"])})
    return finish(raw)


def finish(ds):
    """The sweep's counts with, over ``(beta, d, time)``, ``p_unclustered``, ``p_single`` and
    ``p_antipodal`` and their Wilson 95% bands (``*_low``, ``*_high``);
    ``p_antipodal_limit(beta, d)`` (the exact long-time probability), ``beta_c(d)``,
    ``antipodal_attracting(beta, d)``, ``n_attracting(beta)`` (how many of the d's have an
    attracting antipodal pair), ``settle_time(beta, d)`` (:func:`settle_time`),
    ``t_half(beta, d)`` (from when at most half the pairs are unclustered), ``z_final(beta,
    d)`` (deviation of ``p_antipodal`` at T from the limit, in standard errors) and
    ``late_change(beta, d)`` (``p_antipodal`` at T minus at the recorded time nearest T/10).
    """
    ds = add_outcome_fractions(ds, ("unclustered", "single", "antipodal"))
    betas, d_vals, times = ds.beta.values, ds.d.values, ds.time.values
    ds["p_antipodal_limit"] = (("beta", "d"), np.array(
        [[float(theory.antipodal_probability(b, int(d))) for d in d_vals] for b in betas]))
    ds["beta_c"] = (("d",), np.array([theory.critical_beta(int(d)) for d in d_vals], dtype=float))
    ds["antipodal_attracting"] = (("beta", "d"), np.array(
        [[bool(theory.antipodal_attracting(b, int(d))) for d in d_vals] for b in betas]))
    ds["n_attracting"] = ds.antipodal_attracting.sum("d")
    ds["settle_time"] = (("beta", "d"), settle_time(ds.p_unclustered.values, times))
    ds["t_half"] = (("beta", "d"), settle_time(ds.p_unclustered.values, times, 0.5))
    final = ds.isel(time=-1)
    ds["z_final"] = agreement_z(final.n_antipodal, final.n_traj, ds.p_antipodal_limit)
    i_ref = int(np.argmin(np.abs(times - times[-1] / 10.0)))
    ds["late_change"] = final.p_antipodal - ds.p_antipodal.isel(time=i_ref)
    ds.attrs.update(settle_level=SETTLE_LEVEL, late_change_from=float(times[i_ref]))
    return ds


def _per_beta(ds) -> dict:
    """Per beta: which d's have an attracting antipodal pair, settling, fractions at T."""
    per_beta = {}
    n_d = ds.sizes["d"]
    for b in ds.beta.values:
        sub = ds.sel(beta=b)
        settle = sub.settle_time.values
        n_att = int(sub.n_attracting)
        per_beta[float(b)] = {
            "n_attracting": n_att,
            "attracting": "none" if n_att == 0 else "all" if n_att == n_d else "some",
            "attracting_d": [int(d) for d in sub.d.values[sub.antipodal_attracting.values]],
            "max_settle": float(np.max(settle)),
            "settled": bool(np.all(np.isfinite(settle))),
            "max_settle_d": int(sub.d.values[int(np.argmax(settle))]),
            "p_antipodal_T": {int(d): float(v) for d, v in zip(sub.d.values,
                                                               sub.p_antipodal.values[:, -1])},
            "p_limit": {int(d): float(v) for d, v in zip(sub.d.values,
                                                         sub.p_antipodal_limit.values)},
            "max_abs_z": z_digest(sub.z_final)["max_abs_z"],
            "max_abs_late_change": float(np.max(np.abs(sub.late_change.values))),
        }
    return per_beta


def _transient(ds) -> dict:
    """Antipodal pairs counted where -1 does not attract: the largest fraction over time
    (where and when), the largest at T, and the reading (``transient`` when the fraction
    at T is at most :data:`TRANSIENT_DROP` of that peak, ``persistent`` otherwise,
    ``none`` when no such pair was ever counted)."""
    repelling = ~ds.antipodal_attracting.values
    p_a = ds.p_antipodal.values
    out = {"max": 0.0, "beta": float("nan"), "d": -1, "time": float("nan"),
           "at_T": 0.0, "n_points": int(repelling.sum())}
    if repelling.any():
        peak = np.where(repelling[..., None], p_a, -1.0)
        ib, idd, it = np.unravel_index(int(np.argmax(peak)), peak.shape)
        out.update(max=float(p_a[ib, idd, it]), beta=float(ds.beta.values[ib]),
                   d=int(ds.d.values[idd]), time=float(ds.time.values[it]),
                   at_T=float(np.max(np.where(repelling, p_a[..., -1], 0.0))))
    out["visited"] = out["max"] > 0
    out["reading"] = ("none" if not out["visited"] else
                      "transient" if out["at_T"] <= TRANSIENT_DROP * out["max"] else
                      "persistent")
    return out


def _figure3_grid() -> dict:
    """The thresholds over the dimensions of Figure 3 (the paper's d = 4..10, whatever the
    run's grid): beta_c by d, and for the middle beta of :data:`BETAS` the last d whose
    antipodal pair attracts, with beta_c there and at the next d."""
    dims = SCALES["paper"]["d"]
    beta_c = {int(d): float(theory.critical_beta(int(d))) for d in dims}
    beta_ii = BETAS[1]
    last = max(d for d in dims if theory.antipodal_attracting(beta_ii, int(d)))
    return {"d_min": min(dims), "d_max": max(dims), "beta_c": beta_c,
            "regime_ii_beta": beta_ii, "regime_ii_last_d": last,
            "regime_ii_next_d": last + 1, "beta_c_last": beta_c[last],
            "beta_c_next": float(theory.critical_beta(last + 1))}


def _closest_threshold(ds) -> dict:
    """The point (beta, d) of the run nearest to its threshold beta_c(d), and
    ``distance`` = beta - beta_c(d) there (negative: below the threshold)."""
    gap = ds.beta.values[:, None] - ds.beta_c.values[None, :]
    ib, idd = np.unravel_index(int(np.argmin(np.abs(gap))), gap.shape)
    return {"beta": float(ds.beta.values[ib]), "d": int(ds.d.values[idd]),
            "distance": float(gap[ib, idd])}


def _grid_step(times, lo, hi) -> float:
    """Largest relative step t[k+1]/t[k] - 1 of the recorded times between ``lo`` and
    ``hi`` (both included; the step into ``lo`` counts): the resolution of a time read
    off that grid, such as ``t_half``."""
    t = times[times > 0]
    ks = np.nonzero((t[1:] >= lo) & (t[:-1] <= hi))[0]
    return float(np.max(t[ks + 1] / t[ks] - 1.0)) if ks.size else float("nan")


def _t_half(ds) -> dict:
    """When half of the pairs have clustered: the range over the points, its resolution on
    the recorded grid, and for how many betas it does not increase with d."""
    t_half = ds.t_half.values
    faster_with_d = [bool(np.all(np.diff(row) <= 0)) for row in t_half]
    n_faster = sum(faster_with_d)
    lo, hi = float(np.min(t_half)), float(np.max(t_half))
    return {"t_half_decreasing_in_d": faster_with_d, "n_t_half_decreasing": n_faster,
            "t_half_trend": ("all" if n_faster == len(faster_with_d) else
                             "some" if n_faster else "none"),
            "t_half_range": (lo, hi), "t_half_grid_step": _grid_step(ds.time.values, lo, hi)}


def summary(ds) -> dict:
    """Numbers the notebook quotes (per beta and overall), and the verdicts its wording
    follows: ``settled_early`` (every point settled by :data:`SETTLED_EARLY_FRACTION` of T),
    ``flat`` (late change at most :data:`FLAT_LATE_CHANGE`), ``agrees_with_theory`` (at
    least :data:`AGREE_SHARE_2SE` of the points within 2 standard errors, none beyond
    :data:`AGREE_MAX_Z`), ``agrees_with_paper`` (all three), ``t_half_trend`` (``all``,
    ``some`` or ``none`` of the betas with a half-clustering time that does not increase
    with d, on the recorded grid, whose relative step over the range of ``t_half`` is
    ``t_half_grid_step``) and ``transient_antipodal["reading"]`` (see :func:`_transient`).
    ``closest_threshold`` is the point of the run nearest to beta_c(d)."""
    T = float(ds.time.values[-1])
    z = z_digest(ds.z_final.values)
    shape = ds.z_final.shape
    worst = np.unravel_index(int(np.argmax(np.abs(ds.z_final.values))), shape)
    settle = ds.settle_time.values
    slowest = np.unravel_index(int(np.argmax(settle)), shape)
    n_settled, max_settle = int(np.sum(np.isfinite(settle))), float(np.max(settle))
    max_late = float(np.max(np.abs(ds.late_change.values)))
    settled_early = n_settled == settle.size and max_settle <= SETTLED_EARLY_FRACTION * T
    flat = max_late <= FLAT_LATE_CHANGE
    agree = z["share_within"] >= AGREE_SHARE_2SE and z["max_abs_z"] <= AGREE_MAX_Z
    return {
        "transient_antipodal": _transient(ds), **_t_half(ds),
        "closest_threshold": _closest_threshold(ds),
        "slowest_beta": float(ds.beta.values[slowest[0]]),
        "slowest_d": int(ds.d.values[slowest[1]]),
        "T": T, "n_traj": int(ds.n_traj.values.max()), "n_points": int(settle.size),
        "n_betas": int(ds.sizes["beta"]), "per_beta": _per_beta(ds),
        "max_abs_z": z["max_abs_z"], "max_z_beta": float(ds.beta.values[worst[0]]),
        "max_z_d": int(ds.d.values[worst[1]]), "share_within_2se": z["share_within"],
        "max_abs_late_change": max_late, "late_change_from": float(ds.attrs["late_change_from"]),
        "settle_level": SETTLE_LEVEL, "n_settled": n_settled,
        "all_settled": n_settled == settle.size, "max_settle": max_settle,
        "max_settle_fraction": max_settle / T, "settled_early": bool(settled_early),
        "flat": bool(flat), "agrees_with_theory": bool(agree),
        "agrees_with_paper": bool(settled_early and flat and agree),
        "figure3_grid": _figure3_grid(),
        "cell_time_s": float(ds.attrs.get("cell_time_s", float("nan"))),
        "wall_time_s": float(ds.attrs.get("wall_time_s", float("nan"))),
    }


#: Seconds of simulation per trajectory-layer (the figure's unit of work) of the overlap
#: chain with recorded times, measured on the committed paper run (results/fig8_paper.nc:
#: 159 s of cell time for 8.4e8 trajectory-layers, on the project's 2-core machine).
SECONDS_PER_WORK = 1.9e-7


def costs(ds) -> dict:
    """``{"cost": ...}``: the quick and the paper scale projected at the rate of ``ds``
    (core-minutes), and the paper scale's cells and settings."""
    paper = SCALES["paper"]
    cells = len(paper["betas"]) * len(paper["d"])
    paper_s = FIGURE.cost("paper", ds)
    return {"cost": {"quick_min": FIGURE.cost("quick", ds) / 60, "paper_min": paper_s / 60,
                     "paper_per_cell_min": paper_s / cells / 60, "paper_cells": cells,
                     "paper_n_traj": paper["n_traj"], "paper_T": paper["T"]}}


def plot(ds):
    """Three rows (not yet clustered, single cluster, antipodal) x one column per beta."""
    import matplotlib.pyplot as plt

    from ...style import palette

    betas, d_vals = ds.beta.values, ds.d.values
    t = ds.time.values
    shown = t > 0  # log time axis
    colours = palette(len(d_vals))
    rows = (("unclustered", "not yet clustered"), ("single", "single cluster"),
            ("antipodal", "antipodal pair"))
    fig, axes = plt.subplots(3, len(betas), figsize=(3.9 * len(betas) + 1.0, 8.6),
                             sharex=True, sharey="row", squeeze=False)
    for col, b in enumerate(betas):
        sub = ds.sel(beta=b)
        n_att = int(sub.n_attracting)
        regime = ("-1 attracts for no d" if n_att == 0 else
                  "-1 attracts for every d" if n_att == len(d_vals) else
                  f"-1 attracts for d = {', '.join(str(int(x)) for x in d_vals[sub.antipodal_attracting.values])}")
        axes[0, col].set_title(rf"$\beta$ = {b:g}: {regime}")
        for row, (name, label) in enumerate(rows):
            ax = axes[row, col]
            for colour, d in zip(colours, d_vals):
                s = sub.sel(d=d)
                ax.fill_between(t[shown], s[f"p_{name}_low"].values[shown],
                                s[f"p_{name}_high"].values[shown], color=colour, alpha=0.2, lw=0)
                ax.plot(t[shown], s[f"p_{name}"].values[shown], color=colour, lw=1.3,
                        label=f"d = {int(d)}")
                p_limit = float(s.p_antipodal_limit)
                limit = {"antipodal": p_limit, "single": 1.0 - p_limit}.get(name)
                if limit is not None:
                    ax.axhline(limit, color=colour, ls=":", lw=1.1)
            ax.set_xscale("log")
            if col == 0:
                ax.set_ylabel(f"fraction {label}")
            if row == 2:
                ax.set_xlabel("time horizon t (= layers / L)")
    axes[2, 0].plot([], [], color="0.3", ls=":", lw=1.1, label="long-time limit (theory)")
    handles, labels = axes[2, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(handles), frameon=False)
    # nothing happens in the first tenth of a time unit (every pair is still unclustered)
    axes[2, 0].set_xlim(max(0.1, float(t[shown][0])), float(t[-1]) * 1.15)
    for ax in axes[:2].ravel():
        ax.set_ylim(-0.02, 1.02)
    top = max(0.05, float(ds.p_antipodal_high.max()), float(ds.p_antipodal_limit.max()))
    for ax in axes[2]:
        ax.set_ylim(-0.01, min(1.0, 1.1 * top + 0.01))
    attrs = ds.attrs
    return laid_out(fig, f"Two tokens across time horizons (N = 2, {attrs.get('fixed_attention', '')} "
                    f"attention, L = {attrs.get('fixed_L', '?')}, T = {attrs.get('fixed_T', '?')}, "
                    f"{int(ds.n_traj.values.max()):,} trajectories per point; bands: Wilson 95%)",
                    rect=(0, 0.04, 1, 1))


FIGURE = Figure(
    "fig8", source="paper",
    description="two tokens: fractions unclustered / single / antipodal vs the time horizon, "
                "one beta per regime (App. D.1)",
    scales=SCALES, schema={"d": integers(2)},  # d is always a list here
    cell=cell, run=run, work=trajectory_layer_work("betas", "d"),
    seconds_per_work=SECONDS_PER_WORK, summary=summary, plot=plot)
compute, cost = FIGURE.compute, FIGURE.cost
