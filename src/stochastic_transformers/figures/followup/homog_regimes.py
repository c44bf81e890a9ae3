r"""The three regimes of the homogenised transformer: when does the noise vanish, persist or dominate?

Two tokens, :math:`\eta = L^{-\gamma}`, :math:`H` heads, centred Gaussian values (no drift):
the three regimes are ranges of one noise clock :math:`\tau = L^{1-2\gamma}\sigma^2/H`, which
:math:`\gamma > 1/2` sends to 0 (the ODE :math:`\dot x = 0`), :math:`\gamma = 1/2` keeps fixed
(the SDE) and :math:`\gamma < 1/2` sends to infinity (one cluster).  :math:`E[(R_L - R_0)^2]`
is set against the exact limit at the cell's :math:`\tau` (``overlap_moments``, ours); as the
follow-up bounds the distance by :math:`C e^{C\tau}` times the step, agreement is scored on
the cells with :math:`\eta \le` :data:`ETA_SCORED`.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from ... import simulate
from ...config import ModelConfig, RunConfig
from ...random_attention.homogenized import overlap_moments
from ...random_attention import noise_clock
from ...stats import log_log_slope, z_digest
from ...style import palette
from ..base import cell_threads, laid_out
from ..knobs import integer, integers, real, reals
from ..spec import Figure
from ..words import markdown_table, signed, verdict

_BASE = dict(d=4, beta=1.0, gammas=(0.25, 0.375, 0.5, 0.625, 0.75), heads=(1, 4), seed=0)
SCALES = {
    "smoke": dict(_BASE, gammas=(0.25, 0.5, 0.75), heads=(1, 2), Ls=(128, 256), n_traj=200),
    "quick": dict(_BASE, Ls=(4, 16, 64, 256, 1024), n_traj=4000),
    "paper": dict(_BASE, Ls=(4, 16, 64, 256, 1024), n_traj=40_000),
}
#: Cells with a larger step are shown but not scored.  A regime verdict needs the trend to be
#: VERDICT_Z s.e. from the other regimes' prediction; a cell is off the limit curve (beyond
#: chance among a few dozen cells) when a statistic is more than OFF_CURVE_Z s.e. from it.
ETA_SCORED, VERDICT_Z, OFF_CURVE_Z = 0.1, 3.0, 4.0
#: The plot's shaded regimes, a convention: below TAU_FROZEN the pair has hardly moved; above
#: TAU_SATURATED the MSD is within about 10% (not 2%) of its long-time value 1 + 1/d.
TAU_FROZEN, TAU_SATURATED = 0.05, 8.0
#: A per-layer clock increment tau / L above this is a coarse step (a reading, not a bound).
INC_COARSE = 0.04
#: Seconds of simulation per trajectory-layer-head, measured on the committed paper run.
SECONDS_PER_WORK = 2.16e-7


def cell(*, gamma, n_heads, L, n_traj, d, beta, seed):
    """One (gamma, H, L): the overlap before and after L layers with eta = L^-gamma."""
    eta = float(L) ** (-gamma)
    ds = simulate(ModelConfig(d=d, beta=beta, kind="random_attention", n_heads=n_heads, eta=eta),
                  RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=1.0, times=[0.0, 1.0], seed=seed,
                            n_threads=cell_threads()))
    r = ds.gram_t.values[:, :, 0, 1]
    disp2 = (r[:, 1] - r[:, 0]) ** 2
    return {"msd": float(disp2.mean()), "msd_se": float(disp2.std(ddof=1) / math.sqrt(n_traj)),
            "mean_overlap": float(r[:, 1].mean()),
            "mean_se": float(r[:, 1].std(ddof=1) / math.sqrt(n_traj)),
            "eta": eta, "tau": noise_clock(L, eta, 1.0, n_heads), "n_traj": n_traj}


def finish(ds, knobs):
    """The sweep with the limit at every cell's tau, the z-scores ``z_msd`` and ``z_mean``,
    and the limit on a fine grid of tau."""
    d, beta = int(knobs["d"]), float(knobs["beta"])
    mean, _, msd, err = overlap_moments(ds.tau.values.ravel(), beta, d)
    for name, values in (("msd_theory", msd), ("mean_theory", mean), ("theory_error", err)):
        ds[name] = (ds.tau.dims, values.reshape(ds.tau.shape))
    ds["z_msd"] = (ds.msd - ds.msd_theory) / ds.msd_se
    ds["z_mean"] = (ds.mean_overlap - ds.mean_theory) / ds.mean_se
    fine = np.geomspace(1e-3, 100.0, 61)
    m_f, _, msd_f, _ = overlap_moments(fine, beta, d)
    ds = ds.assign_coords(tau_fine=fine)
    ds["msd_theory_fine"] = (("tau_fine",), msd_f)
    ds["mean_theory_fine"] = (("tau_fine",), m_f)
    ds.attrs.update(msd_limit=1.0 + 1.0 / d)
    return ds


def work(knobs) -> float:
    """Trajectory-layer-heads scheduled: n_traj * sum(Ls) * sum(heads) * len(gammas)."""
    return float(knobs["n_traj"] * sum(knobs["Ls"]) * sum(knobs["heads"]) * len(knobs["gammas"]))


def _verdicts(ds, n_heads) -> dict:
    """The regime verdicts at ``n_heads`` heads (see :func:`summary`): the weighted slope of
    log MSD in log L (:func:`~stochastic_transformers.stats.log_log_slope`) and whether it holds."""
    gammas, out = ds.gamma.values, {}
    g_hi, g_lo = float(gammas.max()), float(gammas.min())
    for key, g, present, scored, holds in (
            ("frozen", g_hi, g_hi > 0.5, True, lambda s, se: s < -VERDICT_Z * se),
            ("diffusive", 0.5, np.any(np.isclose(gammas, 0.5)), True,
             lambda s, se: abs(s) < VERDICT_Z * se),
            ("noise_dominates", g_lo, g_lo < 0.5, False, lambda s, se: s > VERDICT_Z * se)):
        if present:
            sub = ds.sel(gamma=g, n_heads=n_heads)
            keep = (sub.eta.values <= ETA_SCORED) if scored else np.ones(sub.sizes["L"], bool)
            s, se = (log_log_slope(sub.L.values[keep], sub.msd.values[keep],
                                   sub.msd_se.values[keep])[:2]
                     if keep.sum() >= 2 else (float("nan"), float("nan")))
            out[key] = dict(gamma=g, slope=s, slope_se=se, holds=bool(holds(s, se)))
    return out


def summary(ds) -> dict:
    """Agreement with the limit, the regime verdicts and what orders the misses (:func:`_misses`).

    Verdicts per number of heads: the slope of log MSD in log L must be negative by VERDICT_Z
    s.e. for the largest gamma (> 1/2: tau -> 0) and within VERDICT_Z s.e. of 0 for gamma =
    1/2, both on the scored cells; positive by VERDICT_Z s.e. on all cells for the smallest
    gamma (< 1/2: tau -> infinity).  ``scored_on_curve``: every scored cell within
    :data:`OFF_CURVE_Z` s.e. of the limit on both statistics; ``unscored_off_curve``: some
    unscored cell beyond it on one of them (the larger steps' O(eta) distance is resolved).
    """
    scored = (ds.eta <= ETA_SCORED).values
    z, zm = ds.z_msd.values[scored], ds.z_mean.values[scored]
    uz, uzm = np.abs(ds.z_msd.values[~scored]), np.abs(ds.z_mean.values[~scored])
    out = {"n_cells": int(ds.msd.size), "n_scored": int(scored.sum()),
           "max_abs_z_msd": z_digest(z)["max_abs_z"], "max_abs_z_mean": z_digest(zm)["max_abs_z"],
           "max_abs_z_unscored": float(uz.max()) if uz.size else 0.0,
           "max_abs_z_mean_unscored": float(uzm.max()) if uzm.size else 0.0,
           "theory_error": float(ds.theory_error.max()), "n_traj": int(ds.n_traj.values.max()),
           "heads": [int(v) for v in ds.n_heads.values],
           "verdicts": {int(h): _verdicts(ds, int(h)) for h in ds.n_heads.values}, **_misses(ds)}
    out["scored_on_curve"] = bool(z.size and max(out["max_abs_z_msd"], out["max_abs_z_mean"])
                                  <= OFF_CURVE_Z)
    out["unscored_off_curve"] = bool(max(out["max_abs_z_unscored"],
                                         out["max_abs_z_mean_unscored"]) > OFF_CURVE_Z)
    out["all_verdicts_hold"] = all(x["holds"] for v in out["verdicts"].values() for x in v.values())
    return out


def _misses(ds) -> dict:
    """What orders the misses of the limit curve (all cells, scored or not).

    ``shallowest``: the cells with the fewest layers, their displacement's relative miss
    (``rel_min``, ``rel_max``), |z| range and ``all_off`` (every one beyond OFF_CURVE_Z);
    ``max_abs_z_msd_deeper``: the largest |z| of the others.  ``same_eta``: a cell beyond
    OFF_CURVE_Z and one within 2 s.e. with the same step (``found``: eta alone does not order
    the misses).  ``deeper_mean``: on the mean overlap of the deeper cells, whether every cell
    with a per-layer increment tau/L above :data:`INC_COARSE` misses, and the finer cells that
    miss anyway (their number and largest tau: the bound grows like e^{C tau}).
    ``n_unscored_within_2``: unscored cells within 2 s.e. on both statistics.
    """
    eta, tau, L = (np.asarray(a.transpose(*ds.z_msd.dims).values, float).ravel()
                   for a in xr.broadcast(ds.eta, ds.tau, ds.L))
    zs, zm = ds.z_msd.values.ravel(), ds.z_mean.values.ravel()
    rel = (ds.msd / ds.msd_theory - 1.0).values.ravel()
    shallow = L == L.min()
    deep = ~shallow
    out = {"shallowest": {"L": int(L.min()), "n": int(shallow.sum()),
                          "rel_min": float(rel[shallow].min()), "rel_max": float(rel[shallow].max()),
                          "min_abs_z": float(np.abs(zs[shallow]).min()),
                          "max_abs_z": float(np.abs(zs[shallow]).max()),
                          "all_off": bool(np.all(np.abs(zs[shallow]) > OFF_CURVE_Z))},
           "max_abs_z_msd_deeper": float(np.abs(zs[deep]).max()) if deep.any() else float("nan")}

    def at(k):
        return dict(z=float(zs[k]), rel=float(rel[k]), L=int(L[k]), tau=float(tau[k]))

    nan = float("nan")
    out["same_eta"] = {"found": False, "eta": nan, "off": dict(z=nan, rel=nan, L=0, tau=nan),
                       "on": dict(z=nan, rel=nan, L=0, tau=nan)}
    for i in sorted(np.flatnonzero(np.abs(zs) > OFF_CURVE_Z), key=lambda k: -abs(zs[k])):
        on = np.flatnonzero(np.isclose(eta, eta[i]) & (np.abs(zs) <= 2))
        if on.size:
            out["same_eta"] = {"found": True, "eta": float(eta[i]), "off": at(i), "on": at(on[0])}
            break
    coarse = deep & (tau / L > INC_COARSE)
    fine_off = deep & (tau / L <= INC_COARSE) & (np.abs(zm) > OFF_CURVE_Z)
    out["deeper_mean"] = {
        "n_coarse": int(coarse.sum()), "n_fine_off": int(fine_off.sum()),
        "coarse_all_off": bool(coarse.any() and np.all(np.abs(zm[coarse]) > OFF_CURVE_Z)),
        "fine_off_max_tau": float(tau[fine_off].max()) if fine_off.any() else 0.0}
    out["n_unscored_within_2"] = int(np.sum((eta > ETA_SCORED) & (np.abs(zs) <= 2)
                                            & (np.abs(zm) <= 2)))
    return out


def phrases(stats) -> dict[str, str]:
    """The ``verdict`` (three regimes? on the limit curve?) and ``misses`` (:func:`_misses`)."""
    worst = max(stats["max_abs_z_unscored"], stats["max_abs_z_mean_unscored"])
    coarse = (f", and cells with few layers (a large clock step $\\tau/L$) miss it, by up to "
              f"{worst:.0f} standard errors, as the follow-up's error bound allows"
              if stats["unscored_off_curve"] else
              ", and at this resolution the cells with coarser steps lie on it too")
    z_on = max(stats["max_abs_z_msd"], stats["max_abs_z_mean"])
    sh, pair, deep = stats["shallowest"], stats["same_eta"], stats["deeper_mean"]
    misses = (f"The {sh['n']} cells with the fewest layers ($L$ = {sh['L']}) are off the limit "
              f"displacement by {signed(100 * sh['rel_min'], 0)}% to "
              f"{signed(100 * sh['rel_max'], 0)}% ({sh['min_abs_z']:.1f} to "
              f"{sh['max_abs_z']:.1f} standard errors), whatever their step; every deeper cell "
              f"is within {stats['max_abs_z_msd_deeper']:.1f} standard errors.")
    if pair["found"]:
        misses += (f" At one step, $\\eta$ = {pair['eta']:.2g}, $L$ = {pair['off']['L']} is "
                   f"{signed(pair['off']['z'], 1)} standard errors off and $L$ = "
                   f"{pair['on']['L']} {signed(pair['on']['z'], 1)}: the step alone does not "
                   "order the misses.")
    if deep["n_coarse"]:
        misses += (f" On the mean overlap, {'all' if deep['coarse_all_off'] else 'not all'} "
                   f"{deep['n_coarse']} deeper cells whose per-layer clock increment $\\tau/L$ "
                   f"exceeds {INC_COARSE:g} miss by more than {OFF_CURVE_Z:g} standard errors.")
    n = deep["n_fine_off"]
    if n:
        misses += (f" So {'do' if n > 1 else 'does'} {n} finer cell{'s' * (n > 1)} with a long "
                   f"clock (up to $\\tau$ = {deep['fine_off_max_tau']:g}), as the bound "
                   "$Ce^{C\\tau}$ times the step allows.")
    return {"misses": misses, "verdict": verdict(
        [(stats["all_verdicts_hold"],
          f"with {' and '.join(map(str, stats['heads']))} heads the overlap moves less the "
          "deeper the network for $\\gamma > 1/2$, as much at every depth for $\\gamma = 1/2$, "
          "and more, up to its long-time value, for $\\gamma < 1/2$",
          "the trend with depth does not follow the three regimes for every $\\gamma$ and $H$ "
          "(see the table)"),
         (stats["scored_on_curve"], f"the {stats['n_scored']} cells with a small step lie on "
          f"the limit curve of $\\tau$ (within {z_on:.1f} standard errors){coarse}",
          f"some cells with a small step miss the limit curve of $\\tau${coarse}")],
        ("**Reproduced**", "**Partly reproduced**", "**Not reproduced**"))}


def table(stats) -> str:
    """The verdicts as a Markdown table: heads, regime, gamma, fitted slope, verdict."""
    names = {"frozen": "noise vanishes", "diffusive": "noise persists",
             "noise_dominates": "noise dominates"}
    return markdown_table(
        ["H", "regime", "$\\gamma$", "slope of log MSD in log L", "verdict"],
        [[h, names[key], f"{x['gamma']:g}", f"{signed(x['slope'], 3)} ± {x['slope_se']:.3f}",
          "holds" if x["holds"] else "**fails**"]
         for h, v in stats["verdicts"].items() for key, x in v.items()])


def plot(ds):
    """(top) MSD against depth for each gamma and H, with the limit; (bottom) every cell
    against its clock tau, on the one limit curve, with the regimes shaded."""
    import matplotlib.pyplot as plt

    colours = palette(ds.sizes["gamma"])
    heads = [int(h) for h in ds.n_heads.values]
    markers = dict(zip(heads, ("o", "s", "^", "D")))
    fig, (ax, axb) = plt.subplots(2, 1, figsize=(7.0, 7.6))
    Lf = np.geomspace(float(ds.L.min()), float(ds.L.max()), 60)
    for colour, g in zip(colours, ds.gamma.values):
        for h in heads:
            sub, filled = ds.sel(gamma=g, n_heads=h), h == heads[0]
            style = dict(yerr=2 * sub.msd_se, fmt=markers[h], ms=4, color=colour,
                         mfc=colour if filled else "white", capsize=2, lw=0.8)
            ax.errorbar(sub.L, sub.msd, **style)
            axb.errorbar(sub.tau, sub.msd, **style)
            tau_f = Lf ** (1 - 2 * g) / h
            ax.plot(Lf, np.interp(np.log(tau_f), np.log(ds.tau_fine.values),
                                  ds.msd_theory_fine.values), color=colour, lw=1,
                    ls="-" if filled else "--")
        ax.plot([], [], "o", color=colour, label=fr"$\gamma$ = {g:g}")
    for h in heads:
        ax.plot([], [], markers[h], color="0.4", mfc="0.4" if h == heads[0] else "white",
                label=f"H = {h}")
    ax.set(xscale="log", yscale="log", xlabel=r"layers L (step $\eta = L^{-\gamma}$)",
           ylabel=r"$E[(R_L - R_0)^2]$",
           title=f"two tokens, d = {ds.attrs['fixed_d']}, $\\beta$ = {ds.attrs['fixed_beta']:g};"
                 r" lines: the limit at $\tau = L^{1-2\gamma}/H$")
    ax.legend(ncol=4, loc="lower left")
    axb.plot(ds.tau_fine, ds.msd_theory_fine, color="0.2", lw=1.4, label="limit SDE (ours)")
    axb.axhline(float(ds.attrs["msd_limit"]), color="0.5", ls=":", lw=1,
                label="long-time value 1 + 1/d")
    axb.axvspan(float(ds.tau_fine.min()), TAU_FROZEN, color="#dde8f5", zorder=0)
    axb.axvspan(TAU_SATURATED, float(ds.tau_fine.max()), color="#f5e6dd", zorder=0)
    axb.text(1.3e-3, 0.3, "noise vanishes\n(ODE: frozen)", va="top")
    axb.text(0.25, 0.02, "SDE with\ncommon noise", va="top")
    axb.text(10, 0.3, "noise\ndominates", va="top")
    axb.set(xscale="log", yscale="log", xlabel=r"noise clock $\tau = L\eta^2/H$",
            ylabel=r"$E[(R_L - R_0)^2]$", ylim=(None, 2.0),
            title=f"every cell against its clock ({int(ds.n_traj.max()):,} pairs a cell; "
                  "bars: 2 s.e.)")
    axb.legend(loc="lower right")
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_regimes", source="followup",
    description="random keys and queries: the overlap's displacement as eta = L^-gamma and "
                "the heads vary, against the one noise clock (follow-up's scaling table)",
    schema={"gammas": reals(0.0, 2.0), "heads": integers(1, 4096), "d": integer(3),
            "beta": real(0.0, 20.0), "n_traj": integer(2)},
    grid={"gamma": "gammas", "n_heads": "heads", "L": "Ls"},
    fixed=("n_traj", "d", "beta"))
compute, cost = FIGURE.compute, FIGURE.cost
