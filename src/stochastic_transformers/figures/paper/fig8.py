r"""Figure 8 (appendix D.1): the two-token outcome against the time horizon.

The setting of Figure 3 for one beta in each regime of Theorem 2 over d = 4..10 (I: -1
attracts for no d, II: for the small d only, III: for every d) and every d.  One run per
(beta, d) records the overlap on a log-spaced time grid, so it gives the fractions of pairs
not yet clustered, in one cluster and antipodal (tolerance :math:`10^{-3}`, no early
stopping) at every horizon :math:`t \le T` at once.
"""

from __future__ import annotations

import numpy as np

from ... import simulate, theory
from ..._validation import check_real
from ...classification import ANTIPODAL, SINGLE, UNCLUSTERED, two_token_outcome
from ...config import ModelConfig, RunConfig
from ...stats import agreement_z, z_digest
from ...style import palette
from ..base import (add_outcome_fractions, cell_threads, laid_out, log_time_grid, on_time_axis,
                    trajectory_layer_work)
from ..knobs import integers
from ..spec import Figure
from ..words import verdict
from .fig3 import NEAR

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
#: The paper's claim (proportions stabilise well below the largest horizon) holds where every
#: point has settled by this fraction of T (``settled_early``), the antipodal fraction moves
#: by at most FLAT_LATE_CHANGE between T/10 and T (``flat``), and at T at least
#: AGREE_SHARE_2SE of the points lie within 2 standard errors of the long-time limit, none
#: beyond AGREE_MAX_Z (``agrees_with_theory``).
SETTLED_EARLY_FRACTION, FLAT_LATE_CHANGE, AGREE_SHARE_2SE, AGREE_MAX_Z = 0.5, 0.02, 0.85, 4.0
#: Antipodal visits where -1 repels are transient when the fraction at T is at most this
#: share of its peak over time (``transient_antipodal["reading"]``).
TRANSIENT_DROP = 0.5


def settle_time(p_unclustered, times, level=SETTLE_LEVEL):
    """First recorded time from which the unclustered fraction (time its last axis) stays at
    or below ``level``; ``inf`` where it is above ``level`` at the last time."""
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
            "n_unclustered": np.sum(codes == UNCLUSTERED, axis=0), "n_traj": n_traj}


def run(knobs, sweeps):
    """The (beta, d) sweep with recorded times (:func:`cell`), then :func:`finish`."""
    outputs = ("n_single", "n_antipodal", "n_unclustered")
    raw = sweeps({"beta": list(knobs["betas"]), "d": list(knobs["d"])},
                 fixed={k: knobs[k] for k in ("n_traj", "L", "T", "n_times", "attention", "tol")},
                 seed=knobs["seed"], output_dims={k: ("time",) for k in outputs},
                 output_coords={"time": log_time_grid(knobs["T"], knobs["L"], knobs["n_times"])})
    return finish(raw)


def finish(ds):
    """The sweep's counts with the fractions ``p_*(beta, d, time)`` and their Wilson bands;
    over ``(beta, d)``: ``p_antipodal_limit`` (the exact long-time probability),
    ``antipodal_attracting``, ``settle_time``, ``t_half`` (at most half unclustered),
    ``z_final`` (deviation at T from the limit, in standard errors) and ``late_change``
    (``p_antipodal`` at T minus at the recorded time nearest T/10); ``beta_c(d)`` and
    ``n_attracting(beta)``."""
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
    """Per beta: which d's have an attracting antipodal pair, settling, deviations at T."""
    per_beta, n_d = {}, ds.sizes["d"]
    for b in ds.beta.values:
        sub = ds.sel(beta=b)
        settle, n_att = sub.settle_time.values, int(sub.n_attracting)
        per_beta[float(b)] = {
            "attracting": "none" if n_att == 0 else "all" if n_att == n_d else "some",
            "attracting_d": [int(d) for d in sub.d.values[sub.antipodal_attracting.values]],
            "max_settle": float(np.max(settle)), "settled": bool(np.all(np.isfinite(settle))),
            "max_abs_z": z_digest(sub.z_final)["max_abs_z"],
            "max_abs_late_change": float(np.max(np.abs(sub.late_change.values)))}
    return per_beta


def _transient(ds) -> dict:
    """Antipodal pairs counted where -1 does not attract: the largest fraction over time
    (where and when), the largest at T, and the reading (``none``, or ``transient`` when
    the fraction at T is at most :data:`TRANSIENT_DROP` of that peak, else ``persistent``)."""
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
    out["reading"] = "none" if not out["visited"] else "transient" if \
        out["at_T"] <= TRANSIENT_DROP * out["max"] else "persistent"
    return out


def _figure3_grid() -> dict:
    """The thresholds over the dimensions of Figure 3 (the paper's d = 4..10, whatever the
    run's grid): beta_c by d, and for the middle beta of :data:`BETAS` the last d whose
    antipodal pair attracts, with beta_c there and at the next d."""
    dims = SCALES["paper"]["d"]
    beta_c = {int(d): float(theory.critical_beta(int(d))) for d in dims}
    beta_ii = BETAS[1]
    last = max(d for d in dims if theory.antipodal_attracting(beta_ii, int(d)))
    return {"d_min": min(dims), "d_max": max(dims), "beta_c": beta_c, "regime_ii_beta": beta_ii,
            "regime_ii_last_d": last, "regime_ii_next_d": last + 1, "beta_c_last": beta_c[last],
            "beta_c_next": float(theory.critical_beta(last + 1))}


def _thresholds(ds) -> dict:
    """``closest_threshold``: the point (beta, d) of the run nearest to its threshold, with
    ``distance`` = beta - beta_c(d); ``near_thresholds``: the points within Figure 3's band
    :data:`~.fig3.NEAR` around beta_c(d) and their largest late change."""
    gap = ds.beta.values[:, None] - ds.beta_c.values[None, :]
    ib, idd = np.unravel_index(int(np.argmin(np.abs(gap))), gap.shape)
    idx = np.argwhere(np.abs(gap) < NEAR)
    late = [abs(float(ds.late_change.values[i, j])) for i, j in idx]
    return {"closest_threshold": {"beta": float(ds.beta.values[ib]), "d": int(ds.d.values[idd]),
                                  "distance": float(gap[ib, idd])},
            "near_thresholds": {"window": NEAR, "n": int(len(idx)), "points": [
                (float(ds.beta.values[i]), int(ds.d.values[j])) for i, j in idx],
                "max_abs_late_change": max(late, default=0.0)}}


def _t_half(ds) -> dict:
    """When half of the pairs have clustered: the range over the points, the largest
    relative step of the recorded times over that range (the resolution of ``t_half``),
    and for how many betas it does not increase with d."""
    t_half = ds.t_half.values
    n_faster = sum(bool(np.all(np.diff(row) <= 0)) for row in t_half)
    lo, hi = float(np.min(t_half)), float(np.max(t_half))
    t = ds.time.values[ds.time.values > 0]
    ks = np.nonzero((t[1:] >= lo) & (t[:-1] <= hi))[0]   # the step into lo counts
    step = float(np.max(t[ks + 1] / t[ks] - 1.0)) if ks.size else float("nan")
    return {"n_t_half_decreasing": n_faster, "t_half_range": (lo, hi), "t_half_grid_step": step,
            "t_half_trend": "all" if n_faster == len(t_half) else "some" if n_faster else "none"}


def summary(ds) -> dict:
    """Numbers the page quotes (per beta and overall), and the verdicts its wording follows:
    ``settled_early``, ``flat``, ``agrees_with_theory`` (see :data:`SETTLED_EARLY_FRACTION`),
    ``agrees_with_paper`` (all three), ``t_half_trend`` (whether the half-clustering time
    does not increase with d for ``all``, ``some`` or ``none`` of the betas) and
    ``transient_antipodal["reading"]`` (:func:`_transient`)."""
    T = float(ds.time.values[-1])
    z = z_digest(ds.z_final.values)
    settle = ds.settle_time.values
    n_settled, max_settle = int(np.sum(np.isfinite(settle))), float(np.max(settle))
    max_late = float(np.max(np.abs(ds.late_change.values)))
    settled_early = n_settled == settle.size and max_settle <= SETTLED_EARLY_FRACTION * T
    flat = max_late <= FLAT_LATE_CHANGE
    agree = z["share_within"] >= AGREE_SHARE_2SE and z["max_abs_z"] <= AGREE_MAX_Z
    return {"transient_antipodal": _transient(ds), **_t_half(ds), **_thresholds(ds),
            "T": T, "n_traj": int(ds.n_traj.values.max()), "n_points": int(settle.size),
            "n_betas": int(ds.sizes["beta"]), "per_beta": _per_beta(ds),
            "max_abs_z": z["max_abs_z"], "share_within_2se": z["share_within"],
            "max_abs_late_change": max_late,
            "late_change_from": float(ds.attrs["late_change_from"]),
            "settle_level": SETTLE_LEVEL, "n_settled": n_settled,
            "all_settled": n_settled == settle.size, "max_settle": max_settle,
            "max_settle_fraction": max_settle / T, "settled_early": bool(settled_early),
            "flat": bool(flat), "agrees_with_theory": bool(agree),
            "agrees_with_paper": bool(settled_early and flat and agree),
            "figure3_grid": _figure3_grid()}


#: Seconds of simulation per trajectory-layer with recorded times, measured on the committed
#: paper run (results/fig8_paper.nc: 159 s of cell time for 8.4e8 trajectory-layers).
SECONDS_PER_WORK = 1.9e-7


def _regime(per_beta: dict) -> str:
    """For which d the antipodal pair attracts, from one beta's entry of ``per_beta``."""
    return {"none": "no d", "all": "every d"}.get(
        per_beta["attracting"], "d = " + ", ".join(map(str, per_beta["attracting_d"])))


def phrases(stats) -> dict:
    """The page's words: ``verdict``; per beta, ``regime`` and ``settle`` (from when at most
    :data:`SETTLE_LEVEL` of the pairs are unclustered); ``transient``, what the pairs counted
    antipodal where -1 repels do; ``nearest`` and ``near_points``, the points of the run
    nearest to a threshold and within Figure 3's band around one."""
    s, tr, near = stats, stats["transient_antipodal"], stats["closest_threshold"]
    late = f"{s['max_abs_late_change']:.3f}"
    checks = [(s["settled_early"], f"at every (β, d) the fraction not yet clustered stays at or "
               f"below {s['settle_level']:.0%} from t = {s['max_settle']:.3g} on, "
               f"{s['max_settle_fraction']:.0%} of the horizon T = {s['T']:g}",
               "not every point settles well before the horizon"),
              (s["flat"], f"after t = {s['late_change_from']:g} the antipodal fraction moves by "
               f"at most {late}", f"the antipodal fraction still moves by up to {late} late"),
              (s["agrees_with_theory"], "at T it lies within 2 standard errors of the long-time "
               f"limit at {s['share_within_2se']:.0%} of the points", "at T the fractions "
               f"deviate from their limit by up to {s['max_abs_z']:.1f} standard errors")]
    transient = "No pair comes within the tolerance of -1 where -1 repels." if not tr["visited"] \
        else (f"Where -1 repels, a few pairs still pass within the tolerance of it: at most "
              f"{tr['max']:.2%} of them (β = {tr['beta']:g}, d = {tr['d']}, at t = "
              f"{tr['time']:.2g}), and at most {tr['at_T']:.2%} at T. " + (
                  "These visits are transient: a horizon of a few time units would count such "
                  "pairs as antipodal, a long one does not." if tr["reading"] == "transient" else
                  "Many of them are still there at T, so a longer horizon would count fewer "
                  "pairs as antipodal."))
    points = s["near_thresholds"]["points"]
    return {"verdict": verdict(checks, ("Reproduced", "Partly reproduced", "Not reproduced")),
            "transient": transient,
            "nearest": f"β = {near['beta']:g} at d = {near['d']}, {abs(near['distance']):.3f} "
                       f"{'below' if near['distance'] < 0 else 'above'} β_c({near['d']})",
            "near_points": "; ".join(f"β = {b:g} at d = " + ", ".join(
                str(d) for bb, d in points if bb == b) for b in sorted({b for b, _ in points}))
            or "none",
            "regime": {b: _regime(p) for b, p in s["per_beta"].items()},
            "settle": {b: f"t = {p['max_settle']:.3g}" if p["settled"] else "not within T"
                       for b, p in s["per_beta"].items()}}


def plot(ds):
    """Three rows (not yet clustered, single cluster, antipodal) x one column per beta."""
    import matplotlib.pyplot as plt

    betas, d_vals, t = ds.beta.values, ds.d.values, ds.time.values
    shown = t > 0  # log time axis
    per_beta = _per_beta(ds)
    fig, axes = plt.subplots(3, len(betas), figsize=(8.0, 7.8), sharex=True, sharey="row",
                             squeeze=False)
    for col, b in enumerate(betas):
        axes[0, col].set_title(f"$\\beta$ = {b:g}\n$-1$ attracts for {_regime(per_beta[float(b)])}")
        for row, name in enumerate(("unclustered", "single", "antipodal")):
            ax = axes[row, col]
            for colour, d in zip(palette(len(d_vals)), d_vals):
                s = ds.sel(beta=b, d=d)
                ax.fill_between(t[shown], s[f"p_{name}_low"].values[shown],
                                s[f"p_{name}_high"].values[shown], color=colour, alpha=0.2, lw=0)
                ax.plot(t[shown], s[f"p_{name}"].values[shown], color=colour, lw=1.3,
                        label=f"d = {int(d)}")
                p_limit = float(s.p_antipodal_limit)
                if name != "unclustered":   # the long-time limits
                    ax.axhline(p_limit if name == "antipodal" else 1.0 - p_limit, color=colour,
                               ls=":", lw=1.1)
            ax.set_xscale("log")
    for ax, label in zip(axes[:, 0], ("not yet clustered", "single cluster", "antipodal pair")):
        ax.set_ylabel(label)
    axes[2, 0].plot([], [], color="0.3", ls=":", lw=1.1, label="long-time limit")
    handles, labels = axes[2, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=(len(handles) + 1) // 2)
    fig.supxlabel("time $t$ = layers / $L$ (log scale); bands: Wilson 95%", y=0.07)
    fig.supylabel("fraction of pairs")
    # nothing happens in the first tenth of a time unit (every pair is still unclustered)
    axes[2, 0].set_xlim(max(0.1, float(t[shown][0])), float(t[-1]) * 1.15)
    top = max(0.05, float(ds.p_antipodal_high.max()), float(ds.p_antipodal_limit.max()))
    for ax in axes[:2].ravel():
        ax.set_ylim(-0.02, 1.02)
    for ax in axes[2]:
        ax.set_ylim(-0.01, min(1.0, 1.1 * top + 0.01))
    return laid_out(fig, rect=(0, 0.08, 1, 1))


FIGURE = Figure.declared(
    globals(), "fig8", source="paper",
    description="two tokens: fractions unclustered / single / antipodal vs the time horizon, "
                "one beta per regime (App. D.1)",
    schema={"d": integers(2)},  # d is always a list here
    work=trajectory_layer_work("betas", "d"))
compute, cost = FIGURE.compute, FIGURE.cost
