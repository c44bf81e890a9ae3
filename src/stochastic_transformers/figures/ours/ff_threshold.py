r"""Feedforward blocks: the antipodal threshold :math:`\beta_c(d, r)` of an odd block, measured (ours).

With an odd activation (erf) the point :math:`Z = -1` stays a fixed point of the two-token
overlap, and near it :math:`\log(1 + Z)` moves like a Brownian motion with drift
:math:`\lambda(\beta, d, r)` (:func:`stochastic_transformers.feedforward.boundary_at_minus_one`):
-1 attracts iff :math:`\lambda < 0`, and :math:`\beta_c(d, r)` is the root of
:math:`\lambda` (:func:`stochastic_transformers.feedforward.critical_beta`; r = 0 is Theorem 2).
The discrete chain measures :math:`\lambda` directly: start two tokens at
:math:`1 + Z_0 = ` ``gap0`` (far inside the linear regime; the chain keeps its relative
precision there) and average :math:`[\log(1 + Z_t) - \log(1 + Z_0)]/t` over trajectories.
A layer's noise is symmetric (:math:`(V, W_2) \to (-V, -W_2)` leaves its law unchanged), so
its odd moments vanish and the measured exponent differs from the limit's by :math:`O(1/L)`:
it is measured at two depth scales ``Ls`` :math:`= (L, 4L)` and extrapolated,
:math:`\hat\lambda = (4\hat\lambda_{4L} - \hat\lambda_L)/3` (Richardson), with the
standard errors propagated.  The simulated threshold is the root of a straight line fitted to
the extrapolated exponents around their change of sign, with its standard error by the delta
method.
"""

from __future__ import annotations

import math

import numpy as np

from .. import feedforward, simulate
from ..activations import ODD_ACTIVATIONS
from ..config import ModelConfig, RunConfig
from .base import (all_of, cell_threads, choice, cost_function, figure_sweep, integer, integers,
                   knob_attr, laid_out, real, reals, resolve_scale)

def _coarse_and_fine(name, value, knobs):
    """Two depth scales, the second four times the first (the extrapolation's ratio), each
    making T * L whole."""
    if len(value) != 2 or value[1] != 4 * value[0]:
        raise ValueError(f"{name} must be two depth scales (L, 4L); got {value!r}")
    for L in value:
        if abs(knobs["T"] * L - round(knobs["T"] * L)) > 1e-9:
            raise ValueError(f"{name}: T * L must be whole; got T = {knobs['T']}, L = {L}")
    return tuple(int(v) for v in value)


ID = "ff_threshold"
CELL_VERSION = "1"
DESCRIPTION = ("feedforward blocks: the antipodal threshold beta_c(d, r) of an erf block, "
               "measured from the exponent at -1 (ours)")

_COMMON = dict(activation="erf", attention="softmax", ff_width=8, gap0=1e-12, seed=0)
SCALES = {
    "smoke": dict(_COMMON, d=(4,), rs=(0.0, 1.0), betas=(0.2, 0.6, 1.0), n_traj=200, Ls=(20, 80),
                  T=0.5),
    "quick": dict(_COMMON, d=(4, 6), rs=(0.0, 0.5, 1.0, 4.0),
                  betas=tuple(np.round(np.linspace(0.0, 1.6, 9), 2)), n_traj=2000, Ls=(100, 400),
                  T=1.0),
    "paper": dict(_COMMON, d=(4, 6), rs=(0.0, 0.1, 0.5, 1.0, 4.0),
                  betas=tuple(np.round(np.linspace(0.0, 1.6, 17), 2)), n_traj=10_000,
                  Ls=(100, 400), T=1.0),
}
KNOB_SCHEMA = {
    "d": integers(3),
    "activation": choice(ODD_ACTIVATIONS),
    "rs": reals(0.0, distinct=True, increasing=True),
    "ff_width": integer(1, 4096),
    "gap0": real(0.0, 1e-6, strict_min=True),
    "Ls": all_of(integers(1, distinct=True, increasing=True), _coarse_and_fine),
}
#: Points on each side of the change of sign used by the straight-line fit of the root.
FIT_POINTS = 2
#: |z| of the measured threshold against the theory below which a (d, r) agrees.
AGREE_Z = 3.0


def cell(*, d, r, beta, activation, n_traj, L, T, attention, ff_width, gap0, seed):
    """One (d, r, beta) point: mean and standard error of the exponent
    :math:`[\\log(1+Z_T) - \\log(1+Z_0)]/T` from :math:`1 + Z_0 = ` ``gap0``."""
    c, s = math.sqrt(gap0 / 2.0), math.sqrt(1.0 - gap0 / 2.0)
    x0 = np.zeros((2, d))
    x0[0, :2] = (c, -s)
    x0[1, :2] = (c, s)
    model = ModelConfig(d=d, beta=beta, attention=attention, ff_strength=r, ff_width=ff_width,
                        ff_activation=activation)
    ds = simulate(model, RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=T, seed=seed, x0=x0,
                                   stop_level=0.0, n_threads=cell_threads()))
    rate = (np.log(ds.one_plus_overlap.values) - math.log(gap0)) / T
    return {"exponent": float(rate.mean()), "exponent_se": float(rate.std(ddof=1) / math.sqrt(n_traj)),
            "gap_max": float(ds.one_plus_overlap.values.max()), "n_traj": n_traj}


def compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides):
    """Run the (d, r, beta) sweep; attach the exact exponent, the thresholds and the fits.

    Returns ``exponent``, ``exponent_se``, ``exponent_theory`` (d, r, beta), ``z_score``,
    and per (d, r) the theory ``beta_c`` (nan when -1 attracts at every beta), the measured
    ``beta_c_sim`` with ``beta_c_sim_se`` (nan when the exponents never change sign) and
    ``beta_c_z``.
    """
    knobs = resolve_scale(SCALES, scale, overrides, KNOB_SCHEMA)
    ds = figure_sweep(__name__, scale, {"d": list(knobs["d"]), "r": list(knobs["rs"]),
                                        "beta": list(knobs["betas"]), "L": list(knobs["Ls"])},
                      fixed={k: knobs[k] for k in ("activation", "n_traj", "T", "attention",
                                                   "ff_width", "gap0")},
                      seed=knobs["seed"], scheduler=scheduler, cache_dir=cache_dir,
                      progress=progress)
    return _finish(ds, scale)


def fitted_root(betas, rate, se, points=FIT_POINTS):
    """Root of a weighted straight line through the ``points`` measurements on each side of
    the first change of sign of ``rate`` (from negative to positive or back), and its
    standard error by the delta method; ``(nan, nan)`` without a change of sign."""
    sign = np.sign(rate)
    change = np.flatnonzero(sign[:-1] * sign[1:] < 0)
    if change.size == 0:
        return float("nan"), float("nan")
    k = int(change[0])
    lo, hi = max(0, k - points + 1), min(len(betas), k + points + 1)
    x, y, w = betas[lo:hi], rate[lo:hi], 1.0 / np.maximum(se[lo:hi], 1e-300) ** 2
    X = np.stack([np.ones_like(x), x], axis=1)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    a, b = cov @ (X.T @ (w * y))
    root = -a / b
    grad = np.array([-1.0 / b, a / b**2])
    return float(root), float(math.sqrt(grad @ cov @ grad))


def extrapolated(ds):
    """(exponent, se) extrapolated from the two depth scales: (4 x_{4L} - x_L) / 3, which
    removes an O(1/L) bias, with the standard errors combined."""
    coarse, fine = ds.sel(L=ds.L.values[0]), ds.sel(L=ds.L.values[1])
    value = (4.0 * fine.exponent - coarse.exponent) / 3.0
    se = np.sqrt(16.0 * fine.exponent_se**2 + coarse.exponent_se**2) / 3.0
    return value, se


def _finish(ds, scale):
    act = str(knob_attr(ds, "activation"))
    betas = ds.beta.values
    value, se = extrapolated(ds)
    ds["exponent_limit"], ds["exponent_limit_se"] = value, se
    theory = np.array([[[feedforward.boundary_at_minus_one(float(b), int(d), float(r), act)["exponent"]
                         for b in betas] for r in ds.r.values] for d in ds.d.values])
    ds["exponent_theory"] = (("d", "r", "beta"), theory)
    # Deviation of each depth scale's exponent, and of the extrapolated one.
    ds["z_score"] = (ds.exponent - ds.exponent_theory) / ds.exponent_se
    ds["z_score_limit"] = (ds.exponent_limit - ds.exponent_theory) / ds.exponent_limit_se
    crit = np.array([[feedforward.critical_beta(int(d), float(r), act) for r in ds.r.values]
                     for d in ds.d.values], dtype=float)
    roots = np.array([[fitted_root(betas, ds.exponent_limit.sel(d=d, r=r).values,
                                   ds.exponent_limit_se.sel(d=d, r=r).values)
                       for r in ds.r.values] for d in ds.d.values])
    ds["beta_c"] = (("d", "r"), crit)
    ds["beta_c_sim"] = (("d", "r"), roots[..., 0])
    ds["beta_c_sim_se"] = (("d", "r"), roots[..., 1])
    ds["beta_c_z"] = (ds.beta_c_sim - ds.beta_c) / ds.beta_c_sim_se
    r_fine = np.linspace(0.0, float(ds.r.max()), 81)
    ds = ds.assign_coords(r_fine=r_fine)
    ds["beta_c_fine"] = (("d", "r_fine"), np.array(
        [[feedforward.critical_beta(int(d), float(r), act) for r in r_fine] for d in ds.d.values],
        dtype=float))
    ds.attrs.update(scale=scale, figure=ID)
    return ds


#: Seconds of simulation per trajectory-layer, measured on the committed paper run
#: (results/ff_threshold_paper.nc, :func:`measured_work`; the chain starts near -1, where the
#: stable forms of :func:`stochastic_transformers.activations.phi_pair` cost more).
SECONDS_PER_WORK = 1.55e-6


def work(knobs) -> float:
    """Trajectory-layers a run with these knobs schedules: n_traj * L * T per (d, r, beta)
    cell, summed over the depth scales."""
    cells = len(knobs["d"]) * len(knobs["rs"]) * len(knobs["betas"])
    return float(knobs["n_traj"] * knobs["T"] * sum(knobs["Ls"]) * cells)


def measured_work(ds) -> tuple[float, float]:
    """(cell seconds, trajectory-layers) of a computed run: L is a grid dimension here."""
    from .base import sweep_seconds

    layers = float((ds.n_traj * ds.L).sum()) * float(knob_attr(ds, "T"))
    return sweep_seconds(ds), layers


cost = cost_function(__name__)


def summary(ds) -> dict:
    """Numbers the notebook quotes: for every (d, r) the theory and measured thresholds with
    the measurement's standard error and z; the deviations of the exponents from the limit's
    at each depth scale (their mean shows the O(1/L) bias) and after extrapolation; whether
    every threshold agrees within :data:`AGREE_Z` and a (d, r) without a theory threshold
    has no measured one either (``thresholds_agree``); and the verdict
    ``threshold_falls_with_r`` (for each d the measured thresholds never rise with r beyond
    2 standard errors of a step, and the last lies 3 standard errors below the first)."""
    rows = {}
    for d in ds.d.values:
        for r in ds.r.values:
            sub = ds.sel(d=d, r=r)
            rows[f"{int(d)}_{float(r):g}"] = {
                "theory": float(sub.beta_c), "measured": float(sub.beta_c_sim),
                "se": float(sub.beta_c_sim_se), "z": float(sub.beta_c_z)}
    z_thr = np.array([v["z"] for v in rows.values() if np.isfinite(v["z"])])
    none_match = all(np.isfinite(v["theory"]) == np.isfinite(v["measured"]) for v in rows.values())
    falls = True
    for d in ds.d.values:
        sim = ds.beta_c_sim.sel(d=d).values
        se = ds.beta_c_sim_se.sel(d=d).values
        ok = np.isfinite(sim)
        if ok.sum() < 2:
            falls = False
            continue
        steps = np.diff(sim[ok])
        step_se = np.sqrt(se[ok][1:] ** 2 + se[ok][:-1] ** 2)
        falls &= bool(np.all(steps < 2 * step_se))
        falls &= bool(sim[ok][-1] < sim[ok][0] - 3 * step_se.max())
    by_l = {int(L): {"mean_bias": float((ds.exponent - ds.exponent_theory).sel(L=L).mean()),
                     "max_abs_z": float(np.abs(ds.z_score.sel(L=L)).max()),
                     "share_within_2se": float((np.abs(ds.z_score.sel(L=L)) <= 2).mean())}
            for L in ds.L.values}
    zl = ds.z_score_limit
    return {
        "thresholds": rows,
        "max_abs_threshold_z": float(np.abs(z_thr).max()) if z_thr.size else float("nan"),
        "by_L": by_l,
        "coarse_L": int(ds.L.values[0]),
        "fine_L": int(ds.L.values[1]),
        "max_abs_limit_z": float(np.abs(zl).max()),
        "share_limit_within_2se": float((np.abs(zl) <= 2).mean()),
        "mean_limit_z": float(zl.mean()),
        "thresholds_agree": bool(z_thr.size and np.all(np.abs(z_thr) < AGREE_Z) and none_match),
        "threshold_falls_with_r": bool(falls),
        "n_traj": int(ds.n_traj.values.max()),
        "T": float(knob_attr(ds, "T")),
        "gap0": float(knob_attr(ds, "gap0")),
        "largest_gap": float(ds.gap_max.max()),
        "activation": str(knob_attr(ds, "activation")),
    }


def plot(ds):
    """Left: for the smallest d, the exponents at -1 against beta, measured at both depth
    scales (open and filled markers) and extrapolated (with 2-standard-error bars), over the
    exact ones, one colour per r.  Right: beta_c(d, r) against r, theory curves and the
    thresholds measured from the extrapolated exponents."""
    import matplotlib.pyplot as plt

    from ..style import palette

    colours = palette(ds.r.size)
    fig, (ax, axb) = plt.subplots(1, 2, figsize=(9.6, 4.4))
    d_show = int(ds.d.values[0])
    coarse, fine = (int(v) for v in ds.L.values)
    for colour, r in zip(colours, ds.r.values):
        sub = ds.sel(d=d_show, r=r)
        ax.plot(sub.beta, sub.exponent.sel(L=coarse), "o", ms=3, mfc="none", color=colour)
        ax.errorbar(sub.beta, sub.exponent_limit, yerr=2 * sub.exponent_limit_se, fmt="o", ms=3,
                    color=colour, capsize=2, lw=1, label=f"r = {r:g}")
        ax.plot(sub.beta, sub.exponent_theory, color=colour, lw=1.2)
    ax.plot([], [], "o", ms=3, mfc="none", color="0.4", label=f"measured at L = {coarse}")
    ax.plot([], [], "o", ms=3, color="0.4", label=f"extrapolated from L = {coarse}, {fine}")
    ax.axhline(0.0, color="0.4", lw=0.8)
    ax.set_xlabel(r"$\beta$")
    ax.set_ylabel(r"exponent $\lambda_-$ of $\log(1 + Z)$ at $-1$")
    ax.set_title(f"d = {d_show}: -1 attracts where the exponent is negative", fontsize=10)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.24))
    for marker, d in zip("os^v", ds.d.values):
        axb.plot(ds.r_fine, ds.beta_c_fine.sel(d=d), color="0.3", lw=1.2)
        sub = ds.sel(d=d)
        axb.errorbar(sub.r, sub.beta_c_sim, yerr=2 * sub.beta_c_sim_se, fmt=marker, ms=5,
                     capsize=2, label=f"d = {int(d)}, measured")
    axb.plot([], [], color="0.3", lw=1.2, label=r"theory $\beta_c(d, r)$")
    axb.set_xlabel("block strength r")
    axb.set_ylabel(r"$\beta_c$")
    axb.set_title("antipodal threshold of an erf block", fontsize=10)
    axb.legend(fontsize=8)
    n = int(ds.n_traj.values.max())
    return laid_out(fig, f"Odd feedforward block: the threshold (t = {float(knob_attr(ds, 'T')):g} "
                         f"from 1 + Z = {float(knob_attr(ds, 'gap0')):g}, {n:,} trajectories "
                         f"per point)")
