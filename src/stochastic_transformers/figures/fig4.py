r"""Figure 4: the noise-induced clustering threshold of Proposition 1.

Hybrid model (paper eq. 7): the value matrix is the identity, shared by all layers,
and a scalar common noise scales the residual,
:math:`w_{n+1} = 1/L + \varepsilon\,\xi_{n+1}/\sqrt L`.  With unnormalised attention
and two tokens the limit overlap obeys Proposition 1's SDE, whose scale function is
integrable at exactly one end: the pair merges almost surely when
:math:`\varepsilon < \varepsilon_c(\beta) = \sqrt{2e^{-\beta}}` and ends antipodal
almost surely when :math:`\varepsilon > \varepsilon_c(\beta)`, whatever d.

The figure is the paper's phase diagram (colour = dominant outcome, intensity = its
fraction, dashed :math:`\varepsilon_c`) at the paper's depth scale L = 100 and, on the
same grid, at a deeper L (1000, with ``deep_n_traj`` trajectories a cell, since each costs
ten times the layers): Proposition 1 is a statement about L -> infinity, and
at fixed L it holds only where the random part of a step,
:math:`\varepsilon e^\beta/\sqrt L`, is small.  Two panels the paper does not have:
the antipodal fraction against :math:`\varepsilon/\varepsilon_c(\beta)` at both
depths, where the limit predicts a step at 1 for every beta, and a depth check at one
point of the plane with L up to 10,000.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .. import simulate, theory
from .._validation import check_real
from ..classification import outcome_counts
from ..config import ModelConfig, RunConfig
from ..sweep import summed_attrs
from .base import (add_outcome_fractions, all_of, cell_threads, cost_function, figure_sweep,
                   integer, integers, laid_out, real, reals, resolve_scale, sweep_seconds,
                   whole_layers)

ID = "fig4"
#: Version of this module's cell outputs, folded into the sweep cache key; bump it whenever
#: :func:`cell` returns different outputs or numbers for the same arguments.
CELL_VERSION = "1"
DESCRIPTION = ("hybrid model: dominant outcome in the (beta, eps) plane with eps_c(beta) "
               "(Prop. 1), at L = 100 and L = 1000")

SCALES = {
    "smoke": dict(betas=tuple(np.linspace(0.0, 4.0, 5)), epsilons=tuple(np.linspace(0.0, 2.0, 5)),
                  n_traj=100, deep_n_traj=50, Ls=(20, 60), T=20.0, d=3, tol=1e-3, seed=0,
                  check_point=(3.0, 1.0), check_L=(20, 50), check_n_traj=50, check_T=10.0),
    "quick": dict(betas=tuple(np.linspace(0.0, 5.0, 21)), epsilons=tuple(np.linspace(0.0, 2.0, 21)),
                  n_traj=1000, deep_n_traj=250, Ls=(100, 1000), T=50.0, d=3, tol=1e-3, seed=0,
                  check_point=(3.0, 1.0), check_L=(30, 100, 300, 1000, 3000), check_n_traj=400, check_T=50.0),
    "paper": dict(betas=tuple(np.linspace(0.0, 5.0, 41)), epsilons=tuple(np.linspace(0.0, 2.0, 41)),
                  n_traj=1000, deep_n_traj=250, Ls=(100, 1000), T=50.0, d=3, tol=1e-3, seed=0,
                  check_point=(3.0, 1.0), check_L=(30, 100, 300, 1000, 3000, 10000), check_n_traj=1000, check_T=50.0),
}



def _beta_epsilon(name, value, knobs):
    """The check of ``check_point``: two numbers (beta, epsilon) in the ranges of the map."""
    point = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(point) != 2:
        raise ValueError(f"{name} must be two numbers (beta, epsilon); got {value}")
    return check_real(name, point[0], 0.0, 50.0), check_real(name, point[1], 0.0, 100.0)


#: The knobs of this figure beyond the shared ones (:data:`.base.KNOB_CHECKS`), and the
#: ranges it allows of these: every depth scale in ``Ls`` and ``check_L`` must put T (and
#: check_T) on a whole number of layers.
KNOB_SCHEMA = {
    "betas": reals(0.0, 50.0),
    "epsilons": reals(0.0, 100.0),
    "Ls": all_of(integers(1, distinct=True, sort=True), whole_layers("T", "Ls")),
    "d": integer(2),
    "deep_n_traj": integer(1),
    "check_point": _beta_epsilon,
    "check_L": integers(1),
    "check_n_traj": integer(1),
    "check_T": all_of(real(0.0, strict_min=True), whole_layers("check_T", "check_L")),
}

#: Cells with |log(eps / eps_c)| below this are "on the threshold" and left out of the
#: agreement count: there the limit dynamics is a time-changed Brownian motion that
#: needs far longer than T to settle.
BAND = 0.2

#: A step's random part eps |A| / sqrt(L) counts as small below this (|A| = e^beta / 2,
#: the unnormalised attention output of a token of an antipodal pair, the largest it gets).
SMALL_STEP = 0.5

#: beta ranges over which the summary averages the antipodal fraction above the curve.
LOW_BETA, HIGH_BETA = 1.5, 3.0

#: The depth check reaches the limit (antipodal almost surely above the curve) when the
#: antipodal fraction at its largest L exceeds this.
LIMIT_REACHED = 0.9

#: Proposition 1 holds at a depth scale where steps are small when at least this share of
#: the small-step cells away from the threshold has the predicted dominant outcome.
SMALL_STEP_AGREE = 0.95


def step_size(beta, epsilon, L):
    r"""Random part of one step near the antipodal pole, :math:`\varepsilon e^\beta / (2\sqrt L)`.

    With unnormalised attention and two tokens at overlap -1 the attention output of a
    token is :math:`(e^\beta x_i + e^{-\beta} x_j)/2`, of norm about :math:`e^\beta/2`,
    and the random factor of the residual is :math:`\varepsilon\xi/\sqrt L`.
    Broadcasts over its arguments.
    """
    return np.asarray(epsilon) * np.exp(np.asarray(beta)) / (2.0 * np.sqrt(np.asarray(L)))


def cell(*, beta, epsilon, n_traj, L, T, d, tol, seed):
    """One (L, beta, eps) point: outcome counts of the hybrid two-token model at T (USA)."""
    ds = simulate(ModelConfig(d=d, beta=beta, kind="hybrid", epsilon=epsilon,
                              attention="unnormalized"),
                  RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=T, seed=seed,
                            n_threads=cell_threads()))
    counts = outcome_counts(ds, tol=tol)
    return {"n_single": counts["single"], "n_antipodal": counts["antipodal"],
            "n_unclustered": counts["unclustered"], "n_traj": n_traj}


def depth_cell(*, L, beta, epsilon, n_traj, T, d, tol, seed):
    """Outcome counts at one (beta, eps) point for depth scale ``L``: the depth check."""
    return cell(beta=beta, epsilon=epsilon, n_traj=n_traj, L=L, T=T, d=d, tol=tol, seed=seed)


def compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides):
    """Run the (L, beta, eps) sweep; returns ``p_single(L, beta, epsilon)``, ``p_antipodal``, ...

    Also runs the *depth check*: at ``check_point`` = (beta, eps) the outcome fractions
    for each depth scale in ``check_L`` (variables ``depth_p_*(check_L)``), which tells a
    discretisation effect of the depth scale from a disagreement with the limit.
    """
    knobs = resolve_scale(SCALES, scale, overrides, KNOB_SCHEMA)
    run = dict(seed=knobs["seed"], scheduler=scheduler, cache_dir=cache_dir, progress=progress)
    # One sweep per depth scale: the first (the paper's L) with n_traj trajectories a
    # cell, the deeper ones, ten times the layers each, with deep_n_traj.
    maps = []
    for k, L in enumerate(knobs["Ls"]):
        fixed = {"n_traj": knobs["n_traj"] if k == 0 else knobs["deep_n_traj"],
                 "T": knobs["T"], "d": knobs["d"], "tol": knobs["tol"]}
        maps.append(figure_sweep(__name__, scale, {"L": [L], "beta": list(knobs["betas"]),
                                                   "epsilon": list(knobs["epsilons"])},
                                 fixed=fixed, **run))
    ds = xr.concat(maps, dim="L", combine_attrs="override")
    # the first map's attributes, but every count and time summed over the maps
    ds.attrs.update(fixed_n_traj=knobs["n_traj"], deep_n_traj=knobs["deep_n_traj"],
                    **summed_attrs(maps))
    outcomes = ("single", "antipodal", "unclustered")
    ds = add_outcome_fractions(ds, outcomes)
    # Depth check: at one point where L = 100 departs from the limit, let L grow.
    beta_chk, eps_chk = knobs["check_point"]
    chk = figure_sweep(__name__, scale, {"L": list(knobs["check_L"])}, cell=depth_cell,
                       name=f"{ID}-depth-{scale}",
                       fixed={"beta": beta_chk, "epsilon": eps_chk,
                              "n_traj": knobs["check_n_traj"], "T": knobs["check_T"],
                              "d": knobs["d"], "tol": knobs["tol"]}, **run)
    chk = add_outcome_fractions(chk, outcomes)
    for name in ("p_single", "p_antipodal", "p_unclustered", "p_antipodal_low", "p_antipodal_high",
                 "p_single_low", "p_single_high"):
        ds[f"depth_{name}"] = chk[name].rename(L="check_L")
    ds.attrs.update(check_beta=beta_chk, check_epsilon=eps_chk,
                    check_n_traj=knobs["check_n_traj"], check_T=knobs["check_T"],
                    **{f"check_{k}": v for k, v in summed_attrs([chk]).items()})
    ds["epsilon_c"] = (("beta",), np.asarray(theory.critical_epsilon(ds.beta.values), dtype=float))
    ratio = ds.epsilon / ds.epsilon_c
    ds["p_antipodal_theory"] = (ratio > 1).astype(float)
    ds["dominant_antipodal"] = ds.p_antipodal > ds.p_single
    ds["step_size"] = (("L", "beta", "epsilon"),
                       step_size(ds.beta.values[None, :, None], ds.epsilon.values[None, None, :],
                                 ds.L.values[:, None, None]))
    ds.attrs.update(scale=scale, figure=ID, band=BAND, small_step=SMALL_STEP)
    return ds


#: Seconds of simulation per trajectory-layer of the hybrid model (the unit of
#: :func:`work`), measured on the committed paper run (results/fig4_paper.nc: 3,296 s of
#: cell time for the two maps, 2.9e10 trajectory-layers, on the project's 2-core machine).
SECONDS_PER_WORK = 1.1e-7


def work(knobs) -> float:
    """Trajectory-layers of a run with these knobs: both maps (n_traj at the first L,
    deep_n_traj at the others, T each) and the depth check (check_n_traj, check_T)."""
    cells = len(knobs["betas"]) * len(knobs["epsilons"])
    Ls = sorted(knobs["Ls"])
    maps = cells * knobs["T"] * (knobs["n_traj"] * Ls[0] + knobs["deep_n_traj"] * sum(Ls[1:]))
    return float(maps + knobs["check_n_traj"] * knobs["check_T"] * sum(knobs["check_L"]))


def measured_work(ds) -> tuple[float, float]:
    """(seconds of simulation, trajectory-layers) of a computed dataset; the depth check
    counts when its cell time is recorded (results computed before it was are measured
    on the maps alone)."""
    seconds = sweep_seconds(ds)
    layers = float((ds.n_traj * ds.L).sum()) * float(ds.attrs["fixed_T"])
    if "check_cell_time_s" in ds.attrs:
        seconds += float(ds.attrs["check_cell_time_s"])
        layers += (float(ds.attrs["check_n_traj"]) * float(ds.attrs["check_T"])
                   * float(ds.check_L.sum()))
    return seconds, layers


cost = cost_function(__name__)


def _log_ratio(ds) -> np.ndarray:
    """log(eps / eps_c(beta)) over (beta, epsilon); -inf at eps = 0 (deep in the merging side)."""
    with np.errstate(divide="ignore"):
        return np.log(ds.epsilon.values[None, :] / ds.epsilon_c.values[:, None])


def summary_at(ds, L) -> dict:
    """Agreement of the dominant outcome with Proposition 1 at one depth scale ``L``.

    Cells within :data:`BAND` of the threshold (in log eps / eps_c) are left out.
    ``small`` cells are those whose step's random part is below :data:`SMALL_STEP`.
    ``n_wrong_above`` counts the disagreeing cells above the curve (the pair merges where
    the limit ends antipodal), ``n_wrong_large_step_above`` those of them with large steps;
    ``small_step_agree`` says whether at least :data:`SMALL_STEP_AGREE` of the small-step
    cells agree (True when there are none); ``large_step_merges`` whether any large-step
    cell above the curve is on the wrong side.
    """
    sub = ds.sel(L=L)
    log_ratio = _log_ratio(sub)
    away = np.abs(log_ratio) > BAND
    predicted_anti = log_ratio > 0
    agree = (predicted_anti == sub.dominant_antipodal.values) & away
    wrong = away & ~agree
    small = away & (sub.step_size.values < SMALL_STEP)
    large = away & ~small
    above = log_ratio > BAND
    p_a = sub.p_antipodal.values
    low = above & (sub.beta.values[:, None] <= LOW_BETA)
    high = above & (sub.beta.values[:, None] >= HIGH_BETA)
    out = {"L": int(L), "n_cells": int(away.size), "n_away": int(away.sum()),
           "n_agree": int(agree.sum()),
           "share_agree": float(agree.sum() / max(away.sum(), 1)),
           "n_small_step": int(small.sum()), "n_agree_small_step": int((agree & small).sum()),
           "share_agree_small_step": float((agree & small).sum() / max(small.sum(), 1)),
           "n_large_step": int(large.sum()), "n_agree_large_step": int((agree & large).sum()),
           "share_agree_large_step": float((agree & large).sum() / max(large.sum(), 1)),
           "n_wrong": int(wrong.sum()),
           "n_wrong_small_step": int((wrong & small).sum()),
           "n_wrong_above": int((wrong & predicted_anti).sum()),
           "n_wrong_large_step_above": int((wrong & large & predicted_anti).sum()),
           "n_traj": int(sub.n_traj.max()) if "n_traj" in sub else None,
           "mean_antipodal_above_low_beta": float(p_a[low].mean()) if low.any() else float("nan"),
           "mean_antipodal_above_high_beta": float(p_a[high].mean()) if high.any() else float("nan"),
           "max_unclustered": float(sub.p_unclustered.max())}
    out["small_step_agree"] = bool(out["share_agree_small_step"] >= SMALL_STEP_AGREE
                                   or not small.any())
    out["large_step_merges"] = out["n_wrong_large_step_above"] > 0
    bi, ei = np.nonzero(wrong)
    out["wrong_cells"] = [(float(sub.beta.values[i]), float(sub.epsilon.values[j]))
                          for i, j in zip(bi, ei)]
    return out


def summary(ds) -> dict:
    """Every number the notebook quotes: per depth scale and for the depth check.

    ``by_L[L]`` is :func:`summary_at`; ``fixed_by_depth`` counts the cells that disagree
    with the limit at the smallest L and agree at the largest, ``still_wrong`` those
    that disagree at both; ``depth_check_limit_reached`` says whether the antipodal
    fraction at the check point exceeds :data:`LIMIT_REACHED` at the largest L of the
    depth check (theory: 1).  The top-level ``share_agree`` etc. are those of the smallest L;
    ``L_first`` and ``L_last`` are the smallest and largest L, ``last`` the numbers of
    :func:`summary_at` at ``L_last`` (without the list of cells).

    ``depth_reading`` says what the deeper map does to the cells on the wrong side at the
    smallest L: ``"none_wrong"`` (there are none), ``"single_depth"`` (one L only),
    ``"all_fixed"`` (all of them move to the predicted side), ``"part_fixed"`` (some do),
    ``"none_fixed"`` (none does).  Also the run's grid (``n_beta``, ``n_epsilon``, ``T``),
    the thresholds of the module (``band``, ``small_step``, ``low_beta``, ``high_beta``),
    and the depth check's point, trajectories, horizon and single-cluster fractions at
    its smallest and largest L.
    """
    Ls = [int(L) for L in ds.L.values]
    by_L = {L: summary_at(ds, L) for L in Ls}
    first, last = by_L[Ls[0]], by_L[Ls[-1]]
    wrong_first = set(first["wrong_cells"])
    wrong_last = set(last["wrong_cells"])
    pa = ds.depth_p_antipodal.values
    out = {**{k: v for k, v in first.items() if k != "L"}, "Ls": Ls, "by_L": by_L,
           "fixed_by_depth": len(wrong_first - wrong_last),
           "still_wrong": len(wrong_first & wrong_last),
           "new_wrong": len(wrong_last - wrong_first),
           "depth_check_antipodal": [float(p) for p in pa],
           "depth_check_L": [int(L) for L in ds.check_L.values],
           "depth_check_limit_reached": bool(pa[-1] > LIMIT_REACHED)}
    if not first["n_wrong"]:
        reading = "none_wrong"
    elif len(Ls) == 1:
        reading = "single_depth"
    elif not wrong_first & wrong_last:
        reading = "all_fixed"
    elif wrong_first - wrong_last:
        reading = "part_fixed"
    else:
        reading = "none_fixed"
    ps = ds.depth_p_single.values if "depth_p_single" in ds else np.full(pa.shape, np.nan)
    attrs = ds.attrs
    out.update(
        L_first=Ls[0], L_last=Ls[-1], depth_reading=reading,
        last={k: v for k, v in last.items() if k != "wrong_cells"},
        n_beta=int(ds.beta.size), n_epsilon=int(ds.epsilon.size),
        T=float(attrs.get("fixed_T", np.nan)), band=BAND, small_step=SMALL_STEP,
        low_beta=LOW_BETA, high_beta=HIGH_BETA,
        check_beta=float(attrs.get("check_beta", np.nan)),
        check_epsilon=float(attrs.get("check_epsilon", np.nan)),
        check_n_traj=int(attrs.get("check_n_traj", 0)),
        check_T=float(attrs.get("check_T", np.nan)),
        depth_check_single_first=float(ps[0]), depth_check_single_last=float(ps[-1]))
    return out


def _plot_depth_check(ax, ds, single_c, anti_c, letter):
    """The depth check's panel: the outcome fractions at the check point against L."""
    check_L = ds.check_L.values
    for name, colour, label in (("single", single_c, "single cluster"),
                                ("antipodal", anti_c, "antipodal pair")):
        p = ds[f"depth_p_{name}"].values
        lo, hi = ds[f"depth_p_{name}_low"].values, ds[f"depth_p_{name}_high"].values
        ax.fill_between(check_L, lo, hi, color=colour, alpha=0.25, lw=0)
        ax.plot(check_L, p, "o-", color=colour, ms=4, label=label)
    ax.plot(check_L, ds.depth_p_unclustered.values, "s:", color="0.4", ms=3, label="unclustered")
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("depth scale L")
    ax.set_ylabel("fraction at T")
    ax.set_title(rf"({letter}) depth check at $\beta$ = {ds.attrs['check_beta']:g}, "
                 rf"$\varepsilon$ = {ds.attrs['check_epsilon']:g} (theory: antipodal)", fontsize=10)
    ax.legend(fontsize=8, loc="center right")


def plot(ds):
    """Phase diagrams at every L (top), the collapse onto eps / eps_c and the depth check."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    from ..style import palette

    single_c, anti_c = palette(10)[3], palette(10)[0]
    betas, eps = ds.beta.values, ds.epsilon.values
    Ls = ds.L.values
    n_maps = len(Ls)
    fig = plt.figure(figsize=(5.2 * max(n_maps, 2), 9.0))
    grid = fig.add_gridspec(2, max(n_maps, 2), height_ratios=[1, 0.9])
    db = np.diff(betas).mean() if betas.size > 1 else 1
    de = np.diff(eps).mean() if eps.size > 1 else 1
    bf = np.linspace(betas[0], betas[-1], 300)
    letters = "abcdefgh"
    for k, L in enumerate(Ls):
        ax = fig.add_subplot(grid[0, k])
        sub = ds.sel(L=L)
        p_s, p_a = sub.p_single.values, sub.p_antipodal.values
        dominant = np.where(p_a > p_s, 1, 0)
        strength = np.maximum(p_s, p_a)
        rgb = np.where(dominant[..., None] == 1, np.array(to_rgb(anti_c)),
                       np.array(to_rgb(single_c)))
        image = 1.0 - strength[..., None] * (1.0 - rgb)  # fainter as the dominant share drops
        ax.imshow(np.transpose(image, (1, 0, 2)), origin="lower", aspect="auto",
                  interpolation="nearest",
                  extent=(betas[0] - db / 2, betas[-1] + db / 2, eps[0] - de / 2, eps[-1] + de / 2))
        ax.plot(bf, theory.critical_epsilon(bf), "k--", lw=1.5)
        # Where the step's random part reaches SMALL_STEP: right of this line it is large.
        eps_small = SMALL_STEP * 2.0 * np.sqrt(L) * np.exp(-bf)
        ax.plot(bf, eps_small, color="0.25", ls=":", lw=1.4)
        ax.set_ylim(eps[0] - de / 2, eps[-1] + de / 2)
        ax.set_xlim(betas[0] - db / 2, betas[-1] + db / 2)
        ax.set_xlabel(r"$\beta$")
        ax.set_ylabel(r"$\varepsilon$")
        ax.set_title(f"({letters[k]}) L = {int(L)}: dominant outcome at T", fontsize=10)
        if k == 0:
            ax.legend(handles=[Patch(color=single_c, label="single cluster"),
                               Patch(color=anti_c, label="antipodal pair"),
                               plt.Line2D([], [], color="k", ls="--",
                                          label=r"$\varepsilon_c=\sqrt{2e^{-\beta}}$"),
                               plt.Line2D([], [], color="0.25", ls=":",
                                          label=rf"step $\varepsilon e^\beta/2\sqrt{{L}}$ = {SMALL_STEP:g}")],
                      loc="upper right", fontsize=8, frameon=True)
    # (next) collapse onto eps / eps_c, every depth scale: solid the deepest, dashed the others
    ax2 = fig.add_subplot(grid[1, 0])
    ratio = ds.epsilon.values[None, :] / ds.epsilon_c.values[:, None]
    shown = np.linspace(0, betas.size - 1, min(5, betas.size)).astype(int)
    colours = palette(len(shown))
    styles = ["--", "-"] if n_maps == 2 else ["-"] * n_maps
    for L, style in zip(Ls, styles if n_maps == 2 else ["-"] * n_maps):
        sub = ds.sel(L=L)
        for colour, i in zip(colours, shown):
            if L == Ls[-1]:
                ax2.fill_between(ratio[i], sub.p_antipodal_low.values[i],
                                 sub.p_antipodal_high.values[i], color=colour, alpha=0.2, lw=0)
            label = rf"$\beta$ = {betas[i]:.2g}" if L == Ls[-1] else None
            ax2.plot(ratio[i], sub.p_antipodal.values[i], style, marker="o", ms=2.5, lw=1,
                     color=colour, label=label)
    x = np.linspace(0, max(3.0, float(np.nanmax(ratio[shown]))), 400)
    ax2.plot(x, (x > 1).astype(float), "k-", lw=1.2, label="limit theory (step)")
    if n_maps == 2:
        ax2.plot([], [], "--", color="0.4", lw=1, label=f"L = {int(Ls[0])}")
        ax2.plot([], [], "-", color="0.4", lw=1, label=f"L = {int(Ls[1])} (band: 95%)")
    ax2.set_xlim(0, min(4.0, float(np.nanmax(ratio[shown]))))
    ax2.set_xlabel(r"$\varepsilon / \varepsilon_c(\beta)$")
    ax2.set_ylabel(r"$P(\mathrm{antipodal\ at\ } T)$")
    ax2.set_title(f"({letters[n_maps]}) antipodal fraction against the predicted threshold",
                  fontsize=10)
    # below the panel: inside it every corner holds data
    ax2.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4,
               frameon=False)
    _plot_depth_check(fig.add_subplot(grid[1, 1]), ds, single_c, anti_c, letters[n_maps + 1])
    per_L = ", ".join(f"{int(ds.n_traj.sel(L=L).max()):,} at L = {int(L)}" for L in Ls)
    return laid_out(fig, f"Hybrid model, USA, N = 2, d = {int(ds.attrs.get('fixed_d', 3))}, "
                    f"T = {float(ds.attrs.get('fixed_T', float('nan'))):g}; trajectories per cell: "
                    f"{per_L}", fontsize=11)
