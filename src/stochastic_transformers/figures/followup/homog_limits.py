r"""The map of limits of the non-centred random-attention model (the follow-up's Figure 1), measured.

Weights with a mean give the chain a drift: with :math:`E V = \bar V`, :math:`E A = \bar A`
the mean attention field :math:`F` (:mod:`stochastic_transformers.limits`) moves the tokens
at speed one on the clock :math:`t = \eta\ell`, while the fluctuations add a common noise of
variance :math:`\alpha = \eta\sigma^2/H` per unit time.  With :math:`\eta = L^{-\gamma}` and
the noise scaled so that :math:`t_L\alpha = L^{\nu}` (:math:`t_L = \eta L`, so
:math:`\sigma^2 = L^{\nu - 1 + 2\gamma}`), the follow-up's corollaries put the limit of the
chain at the ballistic ODE I for :math:`\gamma > 1/2, \nu < 0`, at the modified ODE II for
:math:`1/3 < \gamma \le 1/2, \nu < 0`, at the SDE for :math:`\nu = 0` and in noise domination
for :math:`\nu > 0` (:func:`expected_label`; the map in these coordinates is our reading of
their scalings).

The model here: d = 3, four tokens from a fixed seed in the upper hemisphere, one head,
:math:`\bar A = I` exactly (:math:`\sigma_{qk} = 0`, so F is exact), and
:math:`\bar V = vI + wJ` with J the rotation generator of the first two coordinates: the
tokens gather (v) while the group turns about the third axis (w).  The turning makes the
:math:`O(\eta)` corrections accumulate along the orbit, which is what separates ODE I from
ODE II.  The observable is :math:`\varphi(X) = \frac1N\sum_i\langle x_i, e_1\rangle`, which
sees that phase; the weak distance of a candidate is :math:`\sup_t |E\varphi(X^\eta_t) -
E\varphi(Y_t)|` over the recorded times of :math:`[0, t_L]` (the follow-up's Theorem 1
bounds this sup), with the standard error at the maximising time.

A candidate *fits* a cell when its distance at the deepest L is within :data:`Z_FIT`
standard errors of 0 or falls with L (the slope of log distance against log L below
-:data:`SLOPE_MIN` by :data:`Z_SLOPE` standard errors); the cell's label is the first fitting one of ODE I,
ODE II (our form), SDE.  The follow-up's printed ODE II, :math:`b - \frac\eta2\nabla_b b`, is
measured beside ours.
"""

from __future__ import annotations

import math

import numpy as np

from .. import simulate
from ..config import ModelConfig, RunConfig
from ..limits import ode_path, sde_paths
from ..stats import log_log_slope
from .base import (cell_threads, cost_function, figure_sweep, integer, integers, laid_out, real,
                   reals, resolve_scale)

ID = "homog_limits"
CELL_VERSION = "1"
DESCRIPTION = ("non-centred random attention: the map of limits (ODE I, ODE II, SDE) as eta = "
               "L^-gamma and the noise t_L alpha = L^nu vary, measured against each candidate")

#: The candidates, in the order a label is chosen (the simplest first).
CANDIDATES = ("ode1", "ode2", "sde")
LABELS = {"ode1": "ODE I", "ode2": "ODE II", "sde": "SDE", "none": "none"}

_BASE = dict(d=3, n_tokens=4, beta=1.0, attract=0.5, turn=1.0, n_times=16, substeps=4,
             gammas=(0.3, 0.4, 0.5, 0.6, 0.75), nus=(-1.0, -0.5, 0.0, 0.5), seed=0)
SCALES = {
    "smoke": dict(_BASE, gammas=(0.4, 0.75), nus=(-1.0, 0.0), Ls=(16, 64), n_traj=40),
    "quick": dict(_BASE, Ls=(64, 256), n_traj=300),
    "paper": dict(_BASE, Ls=(64, 256, 1024), n_traj=2000),
}
KNOB_SCHEMA = {"gammas": reals(0.25, 1.0), "nus": reals(-2.0, 1.0), "d": integer(3, 16),
               "n_tokens": integer(2, 16), "beta": real(0.0, 20.0), "attract": real(-5.0, 5.0),
               "turn": real(-5.0, 5.0), "n_times": integer(2, 64), "substeps": integer(1, 64),
               "Ls": integers(4, 1 << 14), "n_traj": integer(2)}


def _check_segments(knobs):
    bad = [L for L in knobs["Ls"] if L % knobs["n_times"]]
    if bad:
        raise ValueError(f"Ls must be multiples of n_times = {knobs['n_times']} (the chain runs "
                         f"in n_times equal segments); got {bad}")
#: A candidate fits when its distance at the deepest L is within this many standard errors.
#: The distance is a sup over the 16 recorded times, compared with the s.e. at the maximising
#: time: 3.8 is the Sidak level of a two-sided 3-sigma test (p = 0.0027) for 16 looks.
Z_FIT = 3.8
#: ... or when the slope of its log distance against log L is below -SLOPE_MIN by this many
#: s.e. (a distance that falls slower than L^-0.1 is not read as tending to 0: near the
#: boundaries the predicted rates, e.g. L^(1 - 2 gamma) for ODE I, go to 0 too).
Z_SLOPE = 2.0
SLOPE_MIN = 0.1


def start_tokens(n_tokens, d, seed=12345):
    """The fixed initial tokens: Gaussian directions with a positive last coordinate."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_tokens, d))
    x[:, -1] = np.abs(x[:, -1]) + 0.5
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def mean_value_matrix(d, attract, turn):
    r""":math:`\bar V = vI + wJ`, J turning the first two coordinates (as a tuple of tuples)."""
    m = attract * np.eye(d)
    m[0, 1], m[1, 0] = -turn, turn
    return tuple(tuple(float(v) for v in row) for row in m)


def cell_model(*, gamma, nu, L, d, beta, attract, turn):
    """The cell's model: eta = L^-gamma and sigma^2 = L^(nu - 1 + 2 gamma) (t_L alpha = L^nu)."""
    eta = float(L) ** (-gamma)
    sigma = float(L) ** (0.5 * (nu - 1.0 + 2.0 * gamma))
    return ModelConfig(d=d, beta=beta, kind="random_attention", eta=eta, sigma=sigma,
                       sigma_qk=0.0, mean_qk=1.0, mean_v=mean_value_matrix(d, attract, turn))


def _phi(x):
    return x[..., 0].mean(axis=-1)


def cell(*, gamma, nu, L, n_traj, d, n_tokens, beta, attract, turn, n_times, substeps, seed):
    """One (gamma, nu, L): E phi along the chain and along each candidate limit."""
    model = cell_model(gamma=gamma, nu=nu, L=L, d=d, beta=beta, attract=attract, turn=turn)
    eta = model.eta
    x0 = start_tokens(n_tokens, d)
    frac = np.linspace(0.0, 1.0, n_times + 1)
    # phi needs the tokens, not only their Gram matrix: the chain runs in n_times segments
    # of L / n_times layers, each from where the last stopped, on its own seed.
    x = np.broadcast_to(x0, (n_traj, n_tokens, d)).copy()
    phi = np.empty((n_traj, n_times + 1))
    phi[:, 0] = _phi(x)
    for k in range(n_times):
        ds = simulate(model, RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L // n_times, T=1.0,
                                       seed=seed + 1000 * (k + 1), x0=x,
                                       n_threads=cell_threads()))
        x = ds.tokens.values
        phi[:, k + 1] = _phi(x)
    t = frac * eta * L
    sde = _phi(sde_paths(x0, model, eta, t, n_traj, substeps=substeps, seed=seed + 1))
    out = {"chain": phi.mean(axis=0), "chain_se": phi.std(axis=0, ddof=1) / math.sqrt(n_traj),
           "sde": sde.mean(axis=1), "sde_se": sde.std(axis=1, ddof=1) / math.sqrt(n_traj),
           "ode1": _phi(ode_path(x0, model, t)),
           "ode2": _phi(ode_path(x0, model, t, eta=eta)),
           "ode2_printed": _phi(ode_path(x0, model, t, eta=eta, form="printed")),
           "eta": eta, "t_L": eta * L, "sigma": model.sigma,
           "noise_clock": eta * L * eta * model.sigma ** 2, "n_traj": n_traj}
    return out



def expected_label(gamma, nu):
    """The limit the follow-up's corollaries give for eta = L^-gamma and t_L alpha = L^nu (our
    reading of their map): ODE I, ODE II, SDE, noise (nu > 0) or none (gamma <= 1/3, nu < 0:
    beyond the modified equation)."""
    if nu > 0:
        return "noise"
    if nu == 0:
        return "sde"
    if gamma > 0.5:
        return "ode1"
    return "ode2" if gamma > 1.0 / 3.0 else "none"


def compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides):
    """Run the (gamma, nu, L) sweep and score every candidate in every cell."""
    knobs = resolve_scale(SCALES, scale, overrides, KNOB_SCHEMA)
    _check_segments(knobs)
    grid = {"gamma": list(knobs["gammas"]), "nu": list(knobs["nus"]), "L": list(knobs["Ls"])}
    fixed = {k: knobs[k] for k in ("n_traj", "d", "n_tokens", "beta", "attract", "turn",
                                   "n_times", "substeps")}
    series = ("chain", "chain_se", "sde", "sde_se", "ode1", "ode2", "ode2_printed")
    frac = np.linspace(0.0, 1.0, knobs["n_times"] + 1)
    ds = figure_sweep(__name__, scale, grid, fixed=fixed, seed=knobs["seed"],
                      scheduler=scheduler, cache_dir=cache_dir, progress=progress,
                      output_dims={k: ("fraction",) for k in series},
                      output_coords={"fraction": frac})
    return _finish(ds, scale)


def _distance(ds, candidate):
    """sup over the recorded times of |E phi(chain) - E phi(candidate)| and its s.e. there."""
    gap = np.abs(ds.chain - ds[candidate])
    se = ds.chain_se ** 2
    if candidate == "sde":
        se = se + ds.sde_se ** 2
    se = np.sqrt(se)
    at = gap.fillna(-1.0).argmax("fraction")
    return gap.isel(fraction=at), se.isel(fraction=at)


def _log_slope(L, dist, se):
    """Weighted slope of log distance against log L, and its s.e. (:func:`.stats.log_log_slope`;
    a zero distance is floored at 1e-300)."""
    slope, slope_se, _ = log_log_slope(L, np.maximum(dist, 1e-300), np.maximum(se, 1e-300))
    return slope, slope_se


def _finish(ds, scale):
    """Distances to each candidate, their trends in L, the fits and the labels."""
    for c in (*CANDIDATES, "ode2_printed"):
        dist, se = _distance(ds, c)
        ds[f"dist_{c}"], ds[f"dist_{c}_se"] = dist, se
    gammas, nus = ds.gamma.values, ds.nu.values
    shape = (gammas.size, nus.size)
    slope = {c: np.empty(shape) for c in (*CANDIDATES, "ode2_printed")}
    slope_se = {c: np.empty(shape) for c in slope}
    fits = {c: np.zeros(shape, bool) for c in slope}
    label = np.empty(shape, dtype=object)
    expected = np.empty(shape, dtype=object)
    for a, g in enumerate(gammas):
        for b, nu in enumerate(nus):
            sub = ds.sel(gamma=g, nu=nu)
            for c in slope:
                dist, se = sub[f"dist_{c}"].values, sub[f"dist_{c}_se"].values
                s, sse = _log_slope(sub.L.values, dist, se)
                slope[c][a, b], slope_se[c][a, b] = s, sse
                fits[c][a, b] = bool(dist[-1] <= Z_FIT * se[-1] or s + Z_SLOPE * sse < -SLOPE_MIN)
            label[a, b] = next((c for c in CANDIDATES if fits[c][a, b]), "none")
            expected[a, b] = expected_label(float(g), float(nu))
    for c in slope:
        ds[f"slope_{c}"] = (("gamma", "nu"), slope[c])
        ds[f"slope_{c}_se"] = (("gamma", "nu"), slope_se[c])
        ds[f"fits_{c}"] = (("gamma", "nu"), fits[c])
    ds["label"] = (("gamma", "nu"), label.astype(str))
    ds["expected"] = (("gamma", "nu"), expected.astype(str))
    ds.attrs.update(scale=scale, figure=ID, z_fit=Z_FIT, z_slope=Z_SLOPE, slope_min=SLOPE_MIN)
    return ds


#: Seconds per trajectory-layer of the chain, the SDE's substeps and the ODEs riding along
#: (four tokens, d = 3), measured on the committed paper run (1,513 s of cell time; the
#: numpy SDE scheme dominates).
SECONDS_PER_WORK = 2.82e-5


def work(knobs) -> float:
    """Trajectory-layers of the chain scheduled (the SDE's substeps ride along)."""
    return float(knobs["n_traj"] * sum(knobs["Ls"]) * len(knobs["gammas"]) * len(knobs["nus"]))


def measured_work(ds):
    """(seconds of simulation, trajectory-layers) of a computed dataset."""
    knobs = {"n_traj": int(ds.n_traj.max()), "Ls": [int(v) for v in ds.L.values],
             "gammas": list(ds.gamma.values), "nus": list(ds.nu.values)}
    return float(ds.attrs["cell_time_s"]), work(knobs)


cost = cost_function(__name__)


def summary(ds) -> dict:
    """The measured map against the follow-up's, and the two forms of ODE II.

    ``agree``: cells whose measured label is the expected one (a noise-dominated cell,
    expected ``noise``, agrees when nothing simpler than the SDE fits it: ``sde`` or
    ``none``); ``disagree``: the others, each with its distances.  ``printed_vs_ours``:
    over the cells where ODE II (ours) fits and nu < 0, the largest distance of each form at
    the deepest L, and how many cells the printed form fits.
    """
    gammas, nus = ds.gamma.values, ds.nu.values
    deep = ds.isel(L=-1)
    cells, disagree = [], []
    for a, g in enumerate(gammas):
        for b, nu in enumerate(nus):
            lab, exp = str(ds.label.values[a, b]), str(ds.expected.values[a, b])
            ok = lab == exp or (exp == "noise" and lab in ("sde", "none"))
            row = dict(gamma=float(g), nu=float(nu), label=lab, expected=exp, agree=ok,
                       **{f"dist_{c}": float(deep[f"dist_{c}"].values[a, b])
                          for c in (*CANDIDATES, "ode2_printed")},
                       **{f"dist_{c}_se": float(deep[f"dist_{c}_se"].values[a, b])
                          for c in (*CANDIDATES, "ode2_printed")},
                       **{f"slope_{c}": float(ds[f"slope_{c}"].values[a, b])
                          for c in (*CANDIDATES, "ode2_printed")})
            cells.append(row)
            if not ok:
                disagree.append(row)
    drift_cells = [r for r in cells if r["nu"] < 0 and
                   bool(ds.fits_ode2.sel(gamma=r["gamma"], nu=r["nu"]))]
    printed_fit_cells = [r for r in drift_cells
                         if bool(ds.fits_ode2_printed.sel(gamma=r["gamma"], nu=r["nu"]))]
    printed = {"n_cells": len(drift_cells),
               "printed_fits_where_ode1_fits": all(
                   bool(ds.fits_ode1.sel(gamma=r["gamma"], nu=r["nu"])) for r in printed_fit_cells),
               "max_dist_ours": max((r["dist_ode2"] for r in drift_cells), default=float("nan")),
               "max_dist_printed": max((r["dist_ode2_printed"] for r in drift_cells),
                                       default=float("nan")),
               "n_printed_fits": int(sum(bool(ds.fits_ode2_printed.sel(gamma=r["gamma"], nu=r["nu"]))
                                         for r in drift_cells))}
    definite = [r for r in cells if r["expected"] != "noise"]
    diffusive = [r for r in cells if r["expected"] == "sde"]
    worst = max(diffusive, key=lambda r: r["dist_sde"] / r["dist_sde_se"], default=None)
    return {"n_cells": len(cells), "n_agree": sum(r["agree"] for r in cells),
            "n_definite": len(definite), "n_definite_agree": sum(r["agree"] for r in definite),
            "n_noise": len(cells) - len(definite),
            "n_noise_sde": sum(r["label"] == "sde" for r in cells if r["expected"] == "noise"),
            "t_L_min": float(ds.t_L.min()), "t_L_max": float(ds.t_L.max()),
            "diffusive_worst": None if worst is None else dict(
                gamma=worst["gamma"], z=worst["dist_sde"] / worst["dist_sde_se"],
                slope=worst["slope_sde"], label=worst["label"]),
            "all_agree": not disagree, "disagree": disagree, "cells": cells,
            "printed_vs_ours": printed, "L_max": int(ds.L.max()), "L_min": int(ds.L.min()),
            "n_traj": int(ds.n_traj.max()), "z_fit": Z_FIT, "z_slope": Z_SLOPE,
            "slope_min": SLOPE_MIN}


_COLOURS = {"ode1": "#4c78a8", "ode2": "#72b7b2", "sde": "#f58518", "none": "#bab0ac"}


def plot(ds):
    """(a) the measured map over the follow-up's boundaries; (b) distances against depth."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from ..style import palette

    from matplotlib.transforms import blended_transform_factory

    gammas, nus = ds.gamma.values, ds.nu.values
    fig, (ax, axb) = plt.subplots(1, 2, figsize=(12, 4.8))
    # cells at equal spacing; the boundaries are placed by interpolating between columns
    col = np.arange(gammas.size, dtype=float)
    row = np.arange(nus.size, dtype=float)
    for a, g in enumerate(gammas):
        for b, nu in enumerate(nus):
            lab, exp = str(ds.label.values[a, b]), str(ds.expected.values[a, b])
            ax.add_patch(plt.Rectangle((a - 0.45, b - 0.45), 0.9, 0.9, color=_COLOURS[lab],
                                       alpha=0.9, lw=0, zorder=1))
            ok = lab == exp or (exp == "noise" and lab in ("sde", "none"))
            name = {"ode1": "ODE I", "ode2": "ODE II", "sde": "SDE"}.get(exp, exp)
            ax.text(a, b, LABELS[lab] + ("" if ok else f"\n(expected {name})"), ha="center",
                    va="center", fontsize=7, zorder=2)
    below = row[nus < 0]
    top_ode = float(below.max()) + 0.5 if below.size else -0.5
    for gx in (1 / 3, 0.5):
        if gammas.min() <= gx <= gammas.max():
            # a boundary on a grid value is drawn on that column's right edge (the regimes
            # are (1/3, 1/2] and (1/2, 1])
            on_grid = np.isclose(gammas, gx)
            x = float(col[on_grid][0] + 0.5) if on_grid.any() else float(np.interp(gx, gammas, col))
            ax.plot([x, x], [-0.5, top_ode], color="k", lw=1.2, ls=":", zorder=3)
    if np.any(nus == 0):
        b0 = float(row[nus == 0][0])
        ax.add_patch(plt.Rectangle((-0.5, b0 - 0.5), gammas.size, 1.0, fill=False, ec="k",
                                   lw=1.2, ls="--", zorder=3))
    side = blended_transform_factory(ax.transAxes, ax.transData)
    for b, nu in enumerate(nus):
        regime = ("ODE" if nu < 0 else "diffusive" if nu == 0 else "noise\ndominates")
        ax.text(1.01, b, regime, transform=side, fontsize=7, va="center")
    ax.set(xlim=(-0.5, gammas.size - 0.5), ylim=(-0.5, nus.size - 0.5),
           xticks=col, xticklabels=[f"{g:g}" for g in gammas], yticks=row,
           yticklabels=[f"{n:g}" for n in nus],
           xlabel=r"step exponent $\gamma$  ($\eta = L^{-\gamma}$)",
           ylabel=r"noise exponent $\nu$  ($t_L\alpha = L^{\nu}$)",
           title=f"measured limit, L = {int(ds.L.min())} to {int(ds.L.max())}\n"
                 r"(dotted: $\gamma$ = 1/3 and 1/2; dashed: $t_L\alpha = \Theta(1)$)")
    ax.legend(handles=[Patch(color=_COLOURS[c], label=LABELS[c]) for c in _COLOURS],
              fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4,
              title="first fitting candidate", title_fontsize=7)
    colours = palette(gammas.size)
    nu0 = float(nus.min())
    for colour, g in zip(colours, gammas):
        sub = ds.sel(gamma=g, nu=nu0)
        for c, mk, ls in (("ode1", "o", "-"), ("ode2", "s", "--"), ("ode2_printed", "x", ":")):
            axb.errorbar(sub.L, sub[f"dist_{c}"], yerr=2 * sub[f"dist_{c}_se"], fmt=mk, ls=ls,
                         color=colour, ms=4, lw=0.9, capsize=2,
                         mfc="white" if c == "ode2" else colour)
        axb.plot([], [], color=colour, lw=3, label=fr"$\gamma$ = {g:g}")
    for c, mk, ls, name in (("ode1", "o", "-", "ODE I"), ("ode2", "s", "--", "ODE II (ours)"),
                            ("ode2_printed", "x", ":", "ODE II (printed)")):
        axb.plot([], [], marker=mk, ls=ls, color="0.3", mfc="white" if c == "ode2" else "0.3",
                 label=name)
    axb.set(xscale="log", yscale="log", xlabel="layers L",
            ylabel=r"weak distance $\sup_t|E\varphi(X^\eta_t) - \varphi(Y_t)|$",
            title=fr"the drift's limits at $\nu$ = {nu0:g} ({int(ds.n_traj.max()):,} "
                  "trajectories; bars 2 s.e.)")
    axb.legend(fontsize=7, ncol=2, loc="lower left")
    return laid_out(fig)
