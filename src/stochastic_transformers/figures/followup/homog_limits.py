r"""The map of limits of the non-centred random-attention model (the follow-up's Figure 1), measured.

With :math:`\eta = L^{-\gamma}` and noise :math:`t_L\alpha = L^{\nu}` the follow-up's
corollaries put the limit at ODE I, ODE II, the SDE or noise domination
(``limits.expected_limit``: our reading of its map).  The turning group accumulates the
:math:`O(\eta)` corrections that separate ODE I from ODE II, and its phase :math:`\varphi`
sees them.  A candidate's weak distance is :math:`\sup_t |E\varphi(X^\eta_t) - E\varphi(Y_t)|`
over the recorded times of :math:`[0, t_L]`; a cell's label is the first candidate that fits.
"""

from __future__ import annotations

import math

import numpy as np

from ... import simulate
from ...config import RunConfig
from ...random_attention.limits import (expected_limit, ode_path, phase, sde_paths,
                                        turning_group, upper_hemisphere_tokens)
from ...stats import log_log_slope, t_equivalent
from ...style import palette
from ..base import cell_threads, laid_out
from ..knobs import integer, integers, real, reals
from ..spec import Figure
from ..words import markdown_table, signed

#: The candidates, in the order a label is chosen, and with the follow-up's printed ODE II.
CANDIDATES = ("ode1", "ode2", "sde")
SCORED = (*CANDIDATES, "ode2_printed")
LABELS = {"ode1": "ODE I", "ode2": "ODE II", "sde": "SDE", "none": "none", "noise": "noise",
          "open": "no definite prediction"}

_BASE = dict(d=3, n_tokens=4, beta=1.0, attract=0.5, turn=1.0, n_times=16, substeps=4,
             gammas=(0.3, 0.4, 0.5, 0.6, 0.75), nus=(-1.0, -0.5, 0.0, 0.5), seed=0)
SCALES = {
    "smoke": dict(_BASE, gammas=(0.4, 0.75), nus=(-1.0, 0.0), Ls=(16, 64), n_traj=40),
    "quick": dict(_BASE, Ls=(64, 256), n_traj=300),
    "paper": dict(_BASE, Ls=(64, 256, 1024), n_traj=2000),
}

#: A candidate fits when its distance at the deepest L is within Z_FIT s.e., or when the slope of
#: its log distance in log L is below -SLOPE_MIN by Z_SLOPE s.e.: Bonferroni at 5% over the paper
#: grid's N_TESTS (cell, candidate) pairs, two-sided over 16 times for the distances, one-sided
#: for the slopes.  A slope whose s.e. is inflated by the misfit has that s.e. estimated from
#: len(Ls) - 2 residual degrees of freedom, so it meets Student's t quantile at that level.
N_TESTS, Z_FIT, Z_SLOPE, SLOPE_MIN = 60, 4.05, 3.14, 0.1
#: Seconds per trajectory-layer (the SDE's substeps and the ODEs riding along), measured on the
#: committed paper run.
SECONDS_PER_WORK = 2.82e-5


def _check_segments(knobs):
    bad = [L for L in knobs["Ls"] if L % knobs["n_times"]]
    if bad:
        raise ValueError(f"Ls must be multiples of n_times = {knobs['n_times']} (the chain runs "
                         f"in n_times equal segments); got {bad}")


def cell(*, gamma, nu, L, n_traj, d, n_tokens, beta, attract, turn, n_times, substeps, seed):
    """One (gamma, nu, L): E phi along the chain and along each candidate limit."""
    # eta = L^-gamma and sigma^2 = L^(nu - 1 + 2 gamma), so that t_L alpha = L^nu
    eta = float(L) ** (-gamma)
    model = turning_group(d, beta, attract, turn, eta=eta,
                          sigma=float(L) ** (0.5 * (nu - 1.0 + 2.0 * gamma)))
    x0 = upper_hemisphere_tokens(n_tokens, d)
    # phi needs the tokens, not only their Gram matrix: the chain runs in n_times segments
    # of L / n_times layers, each from where the last stopped, on its own seed.
    x = np.broadcast_to(x0, (n_traj, n_tokens, d)).copy()
    phi = np.empty((n_traj, n_times + 1))
    phi[:, 0] = phase(x)
    for k in range(n_times):
        ds = simulate(model, RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L // n_times, T=1.0,
                                       seed=seed + 1000 * (k + 1), x0=x,
                                       n_threads=cell_threads()))
        x = ds.tokens.values
        phi[:, k + 1] = phase(x)
    t = np.linspace(0.0, 1.0, n_times + 1) * eta * L
    sde = phase(sde_paths(x0, model, eta, t, n_traj, substeps=substeps, seed=seed + 1))
    return {"chain": phi.mean(axis=0), "chain_se": phi.std(axis=0, ddof=1) / math.sqrt(n_traj),
            "sde": sde.mean(axis=1), "sde_se": sde.std(axis=1, ddof=1) / math.sqrt(n_traj),
            "ode1": phase(ode_path(x0, model, t)),
            "ode2": phase(ode_path(x0, model, t, eta=eta)),
            "ode2_printed": phase(ode_path(x0, model, t, eta=eta, form="printed")),
            "eta": eta, "t_L": eta * L, "sigma": model.sigma,
            "noise_clock": eta * L * eta * model.sigma ** 2, "n_traj": n_traj}


def run(knobs, sweeps):
    """The (gamma, nu, L) sweep, every candidate scored in every (gamma, nu) cell."""
    series = ("chain", "chain_se", "sde", "sde_se", "ode1", "ode2", "ode2_printed")
    ds = sweeps({"gamma": list(knobs["gammas"]), "nu": list(knobs["nus"]), "L": list(knobs["Ls"])},
                fixed={k: knobs[k] for k in ("n_traj", "d", "n_tokens", "beta", "attract",
                                             "turn", "n_times", "substeps")},
                seed=knobs["seed"], output_dims={k: ("fraction",) for k in series},
                output_coords={"fraction": np.linspace(0.0, 1.0, knobs["n_times"] + 1)})
    return _scored(ds)


def _scored(ds):
    """Per candidate the distance (sup over the recorded times of |E phi(chain) - E phi(it)|,
    with its s.e. there), the slope of log distance in log L (0 read as 1e-300) with its s.e.
    and whether it fits; then the labels."""
    gammas, nus = ds.gamma.values, ds.nu.values
    for c in SCORED:
        gap = np.abs(ds.chain - ds[c])
        se = np.sqrt(ds.chain_se ** 2 + (ds.sde_se ** 2 if c == "sde" else 0.0))
        at = gap.fillna(-1.0).argmax("fraction")
        ds[f"dist_{c}"], ds[f"dist_{c}_se"] = gap.isel(fraction=at), se.isel(fraction=at)
        trend = np.empty((3, gammas.size, nus.size))      # slope, s.e., fits
        for a, b in np.ndindex(gammas.size, nus.size):
            sub = ds.sel(gamma=gammas[a], nu=nus[b])
            dist, dse = sub[f"dist_{c}"].values, sub[f"dist_{c}_se"].values
            slope, slope_se, chi2 = log_log_slope(sub.L.values, np.maximum(dist, 1e-300),
                                                  np.maximum(dse, 1e-300), inflate=True)
            crit = t_equivalent(Z_SLOPE, sub.L.size - 2) if chi2 > 1.0 else Z_SLOPE
            trend[:, a, b] = (slope, slope_se, dist[-1] <= Z_FIT * dse[-1]
                              or slope + crit * slope_se < -SLOPE_MIN)
        for name, values in zip((f"slope_{c}", f"slope_{c}_se", f"fits_{c}"), trend):
            ds[name] = (("gamma", "nu"), values.astype(bool) if name[0] == "f" else values)
    fits = np.stack([ds[f"fits_{c}"].values for c in CANDIDATES])
    ds["label"] = (("gamma", "nu"), np.where(fits.any(axis=0),
                                             np.array(CANDIDATES)[fits.argmax(axis=0)], "none"))
    ds["expected"] = (("gamma", "nu"), np.array([[expected_limit(float(g), float(nu))
                                                  for nu in nus] for g in gammas]))
    ds.attrs.update(z_fit=Z_FIT, z_slope=Z_SLOPE, slope_min=SLOPE_MIN)
    return ds


def work(knobs) -> float:
    """Trajectory-layers of the chain scheduled (the SDE's substeps ride along)."""
    return float(knobs["n_traj"] * sum(knobs["Ls"]) * len(knobs["gammas"]) * len(knobs["nus"]))


def _agrees(label, expected):
    """Whether a label is the expected one (noise: when nothing simpler than the SDE fits; a
    cell with no definite prediction has nothing to disagree with)."""
    return label == expected or expected == "open" or (expected == "noise"
                                                       and label in ("sde", "none"))


def summary(ds) -> dict:
    """The measured map against the follow-up's: ``cells`` (per (gamma, nu) the labels and
    per candidate the distance at the deepest L, its s.e. and slope in L), the diffusive cell
    farthest from the SDE in s.e., and ``printed_vs_ours``: over the cells with nu < 0 where
    ODE II (ours) fits, the largest distance of each form and where the printed one fits;
    ``sde_within_bias``: SDE fits lost at k/(k - 1) times the distance (see the page)."""
    ds = _scored(ds.copy())
    deep, cells, k = ds.isel(L=-1), [], int(ds.attrs["fixed_substeps"])
    for a, g in enumerate(ds.gamma.values):
        for b, nu in enumerate(ds.nu.values):
            lab, exp = str(ds.label.values[a, b]), str(ds.expected.values[a, b])
            cells.append(dict(gamma=float(g), nu=float(nu), label=lab, expected=exp,
                              agree=_agrees(lab, exp), **{
                                  k: float(deep[k].values[a, b]) for c in SCORED
                                  for k in (f"dist_{c}", f"dist_{c}_se", f"slope_{c}")}))
    definite = [r for r in cells if r["expected"] not in ("noise", "open")]
    noise = [r for r in cells if r["expected"] == "noise"]
    worst = max((r for r in cells if r["expected"] == "sde"),
                key=lambda r: r["dist_sde"] / r["dist_sde_se"], default=None)

    def fits(candidate, row):
        return bool(ds[f"fits_{candidate}"].sel(gamma=row["gamma"], nu=row["nu"]))

    drift = [r for r in cells if r["nu"] < 0 and fits("ode2", r)]
    printed = [r for r in drift if fits("ode2_printed", r)]
    return {"n_cells": len(cells), "n_agree": sum(r["agree"] for r in cells),
            "n_definite": len(definite), "n_definite_agree": sum(r["agree"] for r in definite),
            "open": [r for r in cells if r["expected"] == "open"], "n_noise": len(noise),
            "n_noise_sde": sum(r["label"] == "sde" for r in noise),
            "t_L_min": float(ds.t_L.min()), "t_L_max": float(ds.t_L.max()),
            "diffusive_worst": None if worst is None else dict(
                gamma=worst["gamma"], z=worst["dist_sde"] / worst["dist_sde_se"],
                slope=worst["slope_sde"], label=worst["label"]),
            "disagree": [r for r in cells if not r["agree"]], "cells": cells,
            "by_elimination": [r for r in definite if r["agree"] and r["label"] == "none"],
            "sde_within_bias": [r for r in cells if r["label"] == "sde" and r["dist_sde"] * (
                k / (k - 1) if k > 1 else math.inf) > Z_FIT * r["dist_sde_se"]],
            "printed_vs_ours": {
                "n_cells": len(drift), "n_printed_fits": len(printed),
                "printed_fits_where_ode1_fits": all(fits("ode1", r) for r in printed),
                "max_dist_ours": max((r["dist_ode2"] for r in drift), default=float("nan")),
                "max_dist_printed": max((r["dist_ode2_printed"] for r in drift),
                                        default=float("nan"))},
            "L_max": int(ds.L.max()), "L_min": int(ds.L.min()), "n_traj": int(ds.n_traj.max()),
            "z_fit": Z_FIT, "z_slope": Z_SLOPE, "t_slope": t_equivalent(Z_SLOPE, ds.L.size - 2),
            "slope_min": SLOPE_MIN, "substeps": k, "n_tests": N_TESTS}


_CAVEATS = {"by_elimination": "At $(\\gamma, \\nu)$ = {} a cell agrees by elimination.",
            "sde_within_bias": "The SDE fits at {} within the possible bias of its reference.",
            "open": "The map makes no definite prediction at {}."}


def phrases(stats) -> dict:
    """The page's Markdown: the ``verdict`` (does the measured map match the follow-up's, and
    in which form of ODE II), the ``caveats`` on the cells that agree and the ``table`` of every
    cell (the distance at the deepest L with its slope in log L)."""
    agree, pv, cells = stats["n_agree"], stats["printed_vs_ours"], stats["cells"]
    word = ("Reproduced" if agree == stats["n_cells"] else "Partly reproduced" if agree
            else "Not reproduced")
    verdict = (f"**{word}**: the measured limit is the predicted one in "
               f"{stats['n_definite_agree']} of the {stats['n_definite']} cells with a definite "
               "prediction" + "".join(f"; at $(\\gamma, \\nu)$ = ({r['gamma']:g}, {r['nu']:g}) "
                                      f"we measure {LABELS[r['label']]}, not "
                                      f"{LABELS[r['expected']]}" for r in stats["disagree"]) + ".")
    if pv["n_cells"] and pv["n_printed_fits"] < pv["n_cells"]:
        verdict += (f" ODE II holds in our corrected form only: the follow-up's printed form "
                    f"fits {pv['n_printed_fits']} of the {pv['n_cells']} cells where ours does"
                    + (", each a cell where ODE I fits as well." if
                       pv["printed_fits_where_ode1_fits"] else "."))
    caveats = [text.format(", ".join(f"({r['gamma']:g}, {r['nu']:g})" for r in stats[key]))
               for key, text in _CAVEATS.items() if stats[key]]
    if stats["n_noise"]:
        caveats.append(f"In {stats['n_noise_sde']} of the {stats['n_noise']} noise-dominated "
                       "cells the SDE fits, which this run cannot tell from noise domination.")
    rows = [[f"{r['gamma']:g}", f"{r['nu']:g}", LABELS[r["label"]] + (
        "" if r["label"] == r["expected"] else f" / {LABELS[r['expected']]}")]
            + [f"{r[f'dist_{c}']:.3f} ({signed(r[f'slope_{c}'])})"
               for c in ("ode1", "ode2", "ode2_printed", "sde")] for r in cells]
    head = ("$\\gamma$", "$\\nu$", "measured / expected", "ODE I", "ODE II", "ODE II printed",
            "SDE")
    return {"verdict": verdict, "caveats": " ".join(caveats), "table": markdown_table(
        head, rows, caption=f"Distance at $L$ = {stats['L_max']} (slope in $\\log L$):")}


_COLOURS = {"ode1": "#4c78a8", "ode2": "#72b7b2", "sde": "#f58518", "none": "#bab0ac"}
_FORMS = (("ode1", "o", "-", "ODE I"), ("ode2", "s", "--", "ODE II (ours)"),
          ("ode2_printed", "x", ":", "ODE II (printed)"))


def _draw_map(ax, ds):
    """Each (gamma, nu) cell coloured and named by its label, over the follow-up's boundaries."""
    import matplotlib.pyplot as plt
    from matplotlib.transforms import blended_transform_factory

    gammas, nus = ds.gamma.values, ds.nu.values
    for (a, b), lab in np.ndenumerate(ds.label.values.astype(str)):
        exp = str(ds.expected.values[a, b])
        ax.add_patch(plt.Rectangle((a - 0.45, b - 0.45), 0.9, 0.9, color=_COLOURS[lab],
                                   alpha=0.9, lw=0, zorder=1))
        note = "" if _agrees(lab, exp) else f"\n(expected\n{LABELS[exp]})"
        ax.text(a, b, LABELS[lab] + note, ha="center", va="center", zorder=2)
    top_ode = float(np.flatnonzero(nus < 0).max()) + 0.5 if np.any(nus < 0) else -0.5
    for gx in (1 / 3, 0.5):
        # a boundary on a grid value is drawn on that column's right edge (the regimes are
        # (1/3, 1/2] and (1/2, 1])
        on_grid = np.flatnonzero(np.isclose(gammas, gx))
        x = on_grid[0] + 0.5 if on_grid.size else np.interp(gx, gammas, np.arange(gammas.size))
        if gammas.min() <= gx <= gammas.max():
            ax.plot([x, x], [-0.5, top_ode], color="k", lw=1.2, ls=":", zorder=3)
    if np.any(nus == 0):
        ax.add_patch(plt.Rectangle((-0.5, np.flatnonzero(nus == 0)[0] - 0.5), gammas.size, 1.0,
                                   fill=False, ec="k", lw=1.2, ls="--", zorder=3))
    side = blended_transform_factory(ax.transAxes, ax.transData)
    for b, nu in enumerate(nus):
        ax.text(1.01, b, "ODE" if nu < 0 else "diffusive" if nu == 0 else "noise\ndominates",
                transform=side, va="center")
    ax.set(xlim=(-0.5, gammas.size - 0.5), ylim=(-0.5, nus.size - 0.5),
           xticks=np.arange(gammas.size), xticklabels=[f"{g:g}" for g in gammas],
           yticks=np.arange(nus.size), yticklabels=[f"{n:g}" for n in nus],
           xlabel=r"step exponent $\gamma$  ($\eta = L^{-\gamma}$)",
           ylabel=r"noise exponent $\nu$  ($t_L\alpha = L^{\nu}$)",
           title="(a) first candidate that fits\n"
                 r"dotted: $\gamma$ = 1/3 and 1/2; dashed: $t_L\alpha = \Theta(1)$")


def plot(ds):
    """(a) the measured map over the follow-up's boundaries; (b) at the quietest noise, the
    distance to each ODE against depth, one colour per gamma."""
    import matplotlib.pyplot as plt

    fig, (ax, axb) = plt.subplots(2, 1, figsize=(7.2, 8.6), height_ratios=(1, 1.1))
    ds = _scored(ds.copy())
    _draw_map(ax, ds)
    nu0 = float(ds.nu.min())
    for colour, g in zip(palette(ds.gamma.size), ds.gamma.values):
        sub = ds.sel(gamma=g, nu=nu0)
        for c, mk, ls, _ in _FORMS:
            axb.errorbar(sub.L, sub[f"dist_{c}"], yerr=2 * sub[f"dist_{c}_se"], fmt=mk, ls=ls,
                         color=colour, ms=4, lw=0.9, capsize=2,
                         mfc="white" if c == "ode2" else colour)
        axb.plot([], [], color=colour, lw=3, label=fr"$\gamma$ = {g:g}")
    for c, mk, ls, name in _FORMS:
        axb.plot([], [], marker=mk, ls=ls, color="0.3", mfc="white" if c == "ode2" else "0.3",
                 label=name)
    axb.set(xscale="log", yscale="log", xlabel="layers L",
            ylabel=r"$\sup_t|E\varphi(X^\eta_t) - \varphi(Y_t)|$",
            title=fr"(b) distance to the ODEs at $\nu$ = {nu0:g} (bars 2 s.e.)")
    axb.legend(ncol=2, loc="lower left")
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_limits", source="followup",
    description="non-centred random attention: the map of limits (ODE I, ODE II, SDE) as eta = "
                "L^-gamma and the noise t_L alpha = L^nu vary, measured against each candidate",
    schema={"gammas": reals(0.25, 1.0), "nus": reals(-2.0, 1.0), "d": integer(3, 16),
            "n_tokens": integer(2, 16), "beta": real(0.0, 20.0), "attract": real(-5.0, 5.0),
            "turn": real(-5.0, 5.0), "n_times": integer(2, 64), "substeps": integer(1, 64),
            "Ls": integers(4, 1 << 14), "n_traj": integer(2)},
    plan=_check_segments)
compute, cost = FIGURE.compute, FIGURE.cost
