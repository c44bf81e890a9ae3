r"""The three regimes of the homogenised transformer: when does the noise vanish, persist or dominate?

Two tokens in the random-attention model (:mod:`stochastic_transformers.random_attention`)
run through :math:`L` layers with step :math:`\eta = L^{-\gamma}` and :math:`H` heads.  The
follow-up's scaling table puts the limit at an ODE (noise vanishes), an SDE with common
noise (noise persists) or noise domination according to how :math:`\eta^2 L/H` behaves.
With centred Gaussian values there is no attention drift, so everything runs on the one
noise clock :math:`\tau = L\eta^2\sigma^2/H = L^{1-2\gamma}\sigma^2/H`
(:func:`stochastic_transformers.random_attention.noise_clock`): :math:`\gamma > 1/2` sends
:math:`\tau \to 0` (the tokens do not move: the ODE is :math:`\dot x = 0`), :math:`\gamma = 1/2`
keeps it fixed (the SDE), :math:`\gamma < 1/2` sends it to infinity (the pair reaches its
long-time state, here one cluster).  More heads slow the clock by :math:`1/H`.

The measured statistic is the mean squared displacement of the overlap,
:math:`E[(R_1 - R_0)^2]` after the :math:`L` layers, against the exact limit
:func:`stochastic_transformers.random_attention.homogenized.overlap_moments` at the cell's :math:`\tau` (our
derivation of the limit; the follow-up states the regimes, not this curve).  The
follow-up's Corollary 1 (the centred Gaussian case, Section 2.3.1) bounds the discrete
chain's distance from the limit by :math:`C e^{C\tau}` times the step, so the agreement is
scored on the cells with :math:`\eta \le` :data:`ETA_SCORED`; ``summary`` also reports
what orders the misses of the other cells (the number of layers and the per-layer clock
increment :math:`\eta^2\sigma^2/H = \tau/L`, not :math:`\eta` alone).
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
from ..base import cell_threads, laid_out
from ..knobs import integer, integers, real, reals
from ..spec import Figure
from ..words import signed

_BASE = dict(d=4, beta=1.0, gammas=(0.25, 0.375, 0.5, 0.625, 0.75), heads=(1, 4), seed=0)
SCALES = {
    "smoke": dict(_BASE, gammas=(0.25, 0.5, 0.75), heads=(1, 2), Ls=(128, 256), n_traj=200),
    "quick": dict(_BASE, Ls=(4, 16, 64, 256, 1024), n_traj=4000),
    "paper": dict(_BASE, Ls=(4, 16, 64, 256, 1024), n_traj=40_000),
}
#: Cells with a larger step are shown but not scored (the discretisation; Corollary 1 of the
#: follow-up bounds it by C e^{C tau} times the step).
ETA_SCORED = 0.1
#: A regime verdict needs the measured trend to be this many standard errors from the other
#: regimes' prediction (slopes of log MSD against log L: 1 - 2 gamma for small tau).
VERDICT_Z = 3.0
#: A cell is off the limit curve, beyond chance among a few dozen cells, when its
#: displacement or its mean overlap is more than this many standard errors from the limit.
OFF_CURVE_Z = 4.0
#: tau below which the pair has hardly moved (MSD linear in tau) and above which the noise
#: dominates (the MSD within about 10% of its long-time value 1 + 1/d: 8% at tau = 8 in d = 4;
#: within 2% only from tau of about 50): the shaded regime boundaries of the plot, a convention.
TAU_FROZEN, TAU_SATURATED = 0.05, 8.0
#: A per-layer clock increment eta^2 sigma^2 / H = tau / L above this is a coarse step: used
#: to read which deeper cells miss the limit on the mean overlap (a reading, not a bound).
INC_COARSE = 0.04
#: Seconds of simulation per trajectory-layer-head (two tokens, d = 4), measured on the
#: committed paper run (294 s of cell time; its Dask workers ran one thread each).
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
    """The (gamma, H, L) sweep with the limit at every cell's tau (``msd_theory``,
    ``mean_theory``, ``theory_error``), the z-scores ``z_msd`` and ``z_mean``, and the limit
    on a fine grid of tau (``msd_theory_fine``, ``mean_theory_fine``)."""
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


def measured_work(ds):
    """(seconds of simulation, trajectory-layer-heads) of a computed dataset."""
    knobs = {"n_traj": int(ds.n_traj.max()), "Ls": [int(v) for v in ds.L.values],
             "heads": [int(v) for v in ds.n_heads.values], "gammas": list(ds.gamma.values)}
    return float(ds.attrs["cell_time_s"]), work(knobs)


def _slope(ds, gamma, n_heads, scored_only):
    """Weighted least-squares slope of log MSD against log L and its standard error
    (:func:`~stochastic_transformers.stats.log_log_slope`, weights from the standard errors;
    ``scored_only``: the cells with eta <= ETA_SCORED)."""
    sub = ds.sel(gamma=gamma, n_heads=n_heads)
    keep = (sub.eta.values <= ETA_SCORED) if scored_only else np.ones(sub.sizes["L"], bool)
    if keep.sum() < 2:
        return float("nan"), float("nan")
    return log_log_slope(sub.L.values[keep], sub.msd.values[keep], sub.msd_se.values[keep])[:2]


def _verdicts(ds, n_heads, msd_limit) -> dict:
    """The regime verdicts at ``n_heads`` heads (see :func:`summary`)."""
    gammas = ds.gamma.values
    g_hi, g_lo = float(gammas.max()), float(gammas.min())
    v = {}
    if g_hi > 0.5:
        s, se = _slope(ds, g_hi, n_heads, True)
        v["frozen"] = dict(gamma=g_hi, slope=s, slope_se=se, small_tau_slope=1 - 2 * g_hi,
                           holds=bool(s < -VERDICT_Z * se))
    if np.any(np.isclose(gammas, 0.5)):
        s, se = _slope(ds, 0.5, n_heads, True)
        v["diffusive"] = dict(gamma=0.5, slope=s, slope_se=se, holds=bool(abs(s) < VERDICT_Z * se))
    if g_lo < 0.5:
        s, se = _slope(ds, g_lo, n_heads, False)
        last = ds.sel(gamma=g_lo, n_heads=n_heads).isel(L=-1)
        v["noise_dominates"] = dict(gamma=g_lo, slope=s, slope_se=se, msd=float(last.msd),
                                    limit=msd_limit, tau=float(last.tau),
                                    holds=bool(s > VERDICT_Z * se))
    return v


def summary(ds) -> dict:
    """Agreement with the limit on the scored cells, and the three regime verdicts.

    Verdicts, per number of heads, from the slope of log MSD against log L: for the
    largest gamma (> 1/2) it must be negative by VERDICT_Z standard errors (the pair
    freezes: tau -> 0); for gamma = 1/2 within VERDICT_Z standard errors of 0 (tau fixed);
    both on the scored cells.  For the smallest gamma (< 1/2) it must be positive by
    VERDICT_Z standard errors on all cells (tau -> infinity: the displacement grows to its
    long-time value 1 + 1/d, reported with the gap left at the largest L).

    Agreement: ``scored_on_curve``, every scored cell within :data:`OFF_CURVE_Z` standard
    errors of the limit on both statistics; ``unscored_off_curve``, some unscored cell
    beyond it on one of them (the larger steps' O(eta) distance is resolved).
    """
    scored = (ds.eta <= ETA_SCORED).values
    z, zm = ds.z_msd.values[scored], ds.z_mean.values[scored]
    uz, uzm = np.abs(ds.z_msd.values[~scored]), np.abs(ds.z_mean.values[~scored])
    msd_limit = float(ds.attrs["msd_limit"])
    out = {"n_cells": int(ds.msd.size), "n_scored": int(scored.sum()),
           "n_unscored": int((~scored).sum()),
           "max_abs_z_msd": z_digest(z)["max_abs_z"], "max_abs_z_mean": z_digest(zm)["max_abs_z"],
           "share_within_2se": z_digest(np.r_[z, zm])["share_within"],
           "max_abs_z_unscored": float(uz.max()) if uz.size else 0.0,
           "max_abs_z_mean_unscored": float(uzm.max()) if uzm.size else 0.0,
           "max_eta": float(ds.eta.max()),
           "theory_error": float(ds.theory_error.max()), "msd_limit": msd_limit,
           "n_traj": int(ds.n_traj.values.max()),
           "gammas": [float(v) for v in ds.gamma.values],
           "heads": [int(v) for v in ds.n_heads.values],
           "verdicts": {int(h): _verdicts(ds, int(h), msd_limit) for h in ds.n_heads.values}}
    out["scored_on_curve"] = bool(z.size and max(out["max_abs_z_msd"], out["max_abs_z_mean"])
                                  <= OFF_CURVE_Z)
    out["unscored_off_curve"] = bool(max(out["max_abs_z_unscored"],
                                         out["max_abs_z_mean_unscored"]) > OFF_CURVE_Z)
    out.update(_misses(ds))
    out["all_verdicts_hold"] = all(x["holds"] for v in out["verdicts"].values() for x in v.values())
    return out


def _misses(ds) -> dict:
    """What orders the misses of the limit curve (all cells, scored or not).

    ``shallowest``: the cells with the fewest layers, their relative displacement miss
    (``rel_min``/``rel_max``, fractions of the limit, negative: below it), their |z| range and
    ``all_off`` (every one beyond :data:`OFF_CURVE_Z` on the displacement);
    ``max_abs_z_msd_deeper``: the largest displacement |z| of all other cells.
    ``same_eta``: two cells with the same step, one beyond OFF_CURVE_Z on the displacement and
    one within 2 standard errors (``found``: such a pair exists, so eta alone does not order
    the misses).  ``deeper_mean``: among the deeper cells, ``coarse_all_off`` (every cell with
    a per-layer increment tau/L above :data:`INC_COARSE` misses on the mean overlap by more
    than OFF_CURVE_Z), ``n_coarse``, ``n_fine_off`` (finer cells that miss anyway) and
    ``fine_off_max_tau`` (their largest tau; the follow-up's bound grows like e^{C tau}).
    ``n_unscored_within_2``: unscored cells within 2 standard errors on both statistics.
    """
    # eta, tau and L of every cell, flattened in the order of the z-scores
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
    out["deeper_mean"] = {"n_coarse": int(coarse.sum()),
                          "coarse_all_off": bool(coarse.any() and np.all(np.abs(zm[coarse]) > OFF_CURVE_Z)),
                          "n_fine_off": int(fine_off.sum()),
                          "fine_off_max_tau": float(tau[fine_off].max()) if fine_off.any() else 0.0,
                          "fine_off_max_abs_z": float(np.abs(zm[fine_off]).max()) if fine_off.any() else 0.0}
    unscored = eta > ETA_SCORED
    out["n_unscored_within_2"] = int(np.sum(unscored & (np.abs(zs) <= 2) & (np.abs(zm) <= 2)))
    out["inc_coarse"] = INC_COARSE
    return out


def phrases(stats) -> dict[str, str]:
    """The page's verdict (Markdown): do the three regimes appear, and do the cells lie on
    the limit curve of tau?"""
    regimes, on, off = (stats["all_verdicts_hold"], stats["scored_on_curve"],
                        stats["unscored_off_curve"])
    word = ("Reproduced" if regimes and on else "Partly reproduced" if regimes or on
            else "Not reproduced")
    heads = " and ".join(str(h) for h in stats["heads"])
    trend = (f"with {heads} heads the overlap moves less the deeper the network for "
             "$\\gamma > 1/2$, as much at every depth for $\\gamma = 1/2$, and more, up to "
             "its long-time value, for $\\gamma < 1/2$" if regimes else
             "the trend with depth does not follow the three regimes for every $\\gamma$ "
             "and $H$ (see the table)")
    curve = (f"the {stats['n_scored']} cells with a small step lie on the limit curve of "
             f"$\\tau$ (within {max(stats['max_abs_z_msd'], stats['max_abs_z_mean']):.1f} "
             "standard errors)" if on else
             "some cells with a small step miss the limit curve of $\\tau$")
    worst = max(stats["max_abs_z_unscored"], stats["max_abs_z_mean_unscored"])
    coarse = (f", and cells with few layers (a large clock step $\\tau/L$) miss it, by up to "
              f"{worst:.0f} standard errors, "
              "as the follow-up's error bound allows" if off else
              ", and at this resolution the cells with coarser steps lie on it too")
    return {"verdict": f"**{word}:** {trend}; {curve}{coarse}.", "misses": _misses_text(stats)}


def _misses_text(stats) -> str:
    """What orders the misses of the limit curve (:func:`_misses`), in words."""
    sh, pair, deep = stats["shallowest"], stats["same_eta"], stats["deeper_mean"]
    text = (f"The {sh['n']} cells with the fewest layers ($L$ = {sh['L']}) are off the limit "
            f"displacement by {signed(100 * sh['rel_min'], 0)}% to "
            f"{signed(100 * sh['rel_max'], 0)}% ({sh['min_abs_z']:.1f} to "
            f"{sh['max_abs_z']:.1f} standard errors), whatever their step; every deeper cell "
            f"is within {stats['max_abs_z_msd_deeper']:.1f} standard errors.")
    if pair["found"]:
        text += (f" At one step, $\\eta$ = {pair['eta']:.2g}, and one clock, $L$ = "
                 f"{pair['off']['L']} is {signed(pair['off']['z'], 1)} standard errors off and "
                 f"$L$ = {pair['on']['L']} {signed(pair['on']['z'], 1)}: the step alone does "
                 "not order the misses.")
    if deep["n_coarse"]:
        text += (f" On the mean overlap, {'all' if deep['coarse_all_off'] else 'not all'} "
                 f"{deep['n_coarse']} deeper cells whose per-layer clock increment $\\tau/L$ "
                 f"exceeds {stats['inc_coarse']:g} miss by more than {OFF_CURVE_Z:g} standard "
                 "errors.")
    n = deep["n_fine_off"]
    return text + (f" So {'do' if n > 1 else 'does'} {n} finer cell{'s' * (n > 1)} with a long "
                   f"clock (up to $\\tau$ = {deep['fine_off_max_tau']:g}), as the bound "
                   "$Ce^{C\\tau}$ times the step allows." if n else "")


def table(stats) -> str:
    """The verdicts as a Markdown table: heads, regime, gamma, fitted slope, verdict."""
    names = {"frozen": "noise vanishes", "diffusive": "noise persists",
             "noise_dominates": "noise dominates"}
    rows = ["| H | regime | $\\gamma$ | slope of log MSD in log L | verdict |",
            "|---|---|---|---|---|"]
    rows += [f"| {h} | {names[key]} | {x['gamma']:g} | {signed(x['slope'], 3)} ± "
             f"{x['slope_se']:.3f} | {'holds' if x['holds'] else '**fails**'} |"
             for h, v in stats["verdicts"].items() for key, x in v.items()]
    return "\n".join(rows)


def plot(ds):
    """(top) MSD against depth for each gamma and H, with the limit; (bottom) every cell
    against its clock tau, on the one limit curve, with the regimes shaded."""
    import matplotlib.pyplot as plt

    from ...style import palette

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
    # the step exponents gamma (eta = L^-gamma), the numbers of heads, one dimension of at
    # least 3, a beta up to 20 and at least two trajectories (a standard error)
    schema={"gammas": reals(0.0, 2.0), "heads": integers(1, 4096), "d": integer(3),
            "beta": real(0.0, 20.0), "n_traj": integer(2)},
    grid={"gamma": "gammas", "n_heads": "heads", "L": "Ls"},
    fixed=("n_traj", "d", "beta"))
compute, cost = FIGURE.compute, FIGURE.cost
