r"""A few two-token trajectories: the overlap and its distance to the nearer pole.

Two tokens start independent and uniform on :math:`S^{d-1}` and pass through the stochastic
model (paper eq. 4) with softmax attention (``_BASE``; no knob changes it) on the exact
overlap chain, which keeps :math:`1 \mp Z` to full relative precision, so the distance to
the nearer pole can be drawn on a log scale to any depth.  One call of
:func:`stochastic_transformers.simulate`, no sweep.
"""

from __future__ import annotations

import math

import numpy as np

from ... import simulate, theory
from ...config import ModelConfig, RunConfig
from ...style import palette
from ..base import laid_out
from ..knobs import integer, real
from ..spec import Figure
from ..words import verdict

_BASE = dict(d=4, beta=1.0, L=100, attention="softmax", seed=1)
SCALES = {
    "smoke": dict(_BASE, n_traj=4, T=3.0),
    "quick": dict(_BASE, n_traj=12, T=30.0),
    "paper": dict(_BASE, n_traj=12, T=30.0),   # an illustration: the quick scale is the whole
}
#: The tolerance the right-hand panel marks (the paper's classification tolerance).
TOL = 1e-3


def run(knobs, sweeps):
    """One call of :func:`simulate` (no sweep): ``overlap(trajectory, time)`` at every layer
    and the gaps ``one_minus_overlap``, ``one_plus_overlap`` (precise near the poles)."""
    L, T = knobs["L"], knobs["T"]
    times = np.arange(round(T * L) + 1) / L   # every layer (T * L is whole: checked)
    sim = simulate(ModelConfig(d=knobs["d"], beta=knobs["beta"], attention=knobs["attention"]),
                   RunConfig(n_tokens=2, n_traj=knobs["n_traj"], L=L, T=T, times=times,
                             seed=knobs["seed"]))
    ds = sim[["one_minus_overlap_t", "one_plus_overlap_t"]].rename(
        one_minus_overlap_t="one_minus_overlap", one_plus_overlap_t="one_plus_overlap")
    ds["overlap"] = sim.gram_t.isel(i=0, j=1).drop_vars(["i", "j"], errors="ignore")
    ds.attrs.update(sim.attrs, tol=TOL)
    return ds


def log_gap_rates(beta, d, sigma=1.0) -> dict:
    r"""Mean exponential rates at which the gap to each pole closes, softmax attention.

    Near a pole the overlap diffusion of Lemma 4 is linear in the gap, so the log-gap is a
    Brownian motion with drift: :math:`\log(1 - Z_t)` falls at rate :math:`\sigma^2(d-1)`
    near +1, and :math:`\log(1 + Z_t)` at rate
    :math:`\sigma^2(\cosh 2\beta - (d-2))/\cosh^2\beta` near -1 (negative where -1 repels).
    """
    beta, d = float(beta), int(d)
    return {"single": sigma**2 * (d - 1),
            "antipodal": sigma**2 * (math.cosh(2 * beta) - (d - 2)) / math.cosh(beta) ** 2}


def _gaps(ds):
    """The distance to the nearer pole, the times, the index of T/2 and the paths by side."""
    times, final = ds.time.values, ds.overlap.values[:, -1]
    return (np.minimum(ds.one_minus_overlap.values, ds.one_plus_overlap.values), times,
            int(np.searchsorted(times, times[-1] / 2)),
            {"single": final >= 0, "antipodal": final < 0})


def summary(ds) -> dict:
    """Outcomes at T (``n_single``: Z_T >= 0, ``n_antipodal``: Z_T < 0, ``n_within_tol`` of
    their pole), the smallest gap, the limit theory for this (beta, d), and ``rate``: how
    fast the log-gap falls over the second half of the run, averaged over the paths at each
    pole, with its prediction ``rate_theory`` (:func:`log_gap_rates`)."""
    gaps, times, half, sides = _gaps(ds)
    beta, d = float(ds.attrs["beta"]), int(ds.attrs["d"])
    tol = float(ds.attrs.get("tol", TOL))
    slope = np.log(gaps[:, half] / gaps[:, -1]) / (times[-1] - times[half])
    return {"n_traj": int(ds.sizes["trajectory"]), "T": float(times[-1]),
            "n_single": int(np.sum(sides["single"])),
            "n_antipodal": int(np.sum(sides["antipodal"])),
            "n_within_tol": int(np.sum(gaps[:, -1] <= tol)), "tol": tol,
            "min_gap": float(gaps.min()), "beta": beta, "d": d,
            "attention": str(ds.attrs.get("attention", _BASE["attention"])),
            "beta_c": float(theory.critical_beta(d)),
            "p_antipodal_theory": float(theory.antipodal_probability(beta, d)),
            "rate": {k: float(slope[m].mean()) if m.any() else None for k, m in sides.items()},
            "rate_theory": log_gap_rates(beta, d, float(ds.attrs.get("sigma", 1.0)))}


def phrases(stats) -> dict[str, str]:
    """The page's words: ``verdict`` (does every path end within the tolerance of a pole
    without reaching it, as Lemmas 4 to 6 predict) and ``rates`` (measured against predicted,
    a rate from a single path flagged as such)."""
    n, within, up, down = (stats[k] for k in ("n_traj", "n_within_tol", "n_single", "n_antipodal"))
    checks = [(within == n, f"all {n} paths end within the tolerance of a pole by t = "
               f"{stats['T']:g} ({up} at +1, {down} at -1)", f"by t = {stats['T']:g}, {within} "
               f"of the {n} paths are within the tolerance of a pole and the others still wander "
               f"({up} end on the side of +1, {down} on the side of -1)"),
              (stats["min_gap"] > 0, f"the gaps keep shrinking, down to {stats['min_gap']:.0e}, "
               "without reaching zero", "a gap reaches zero in floating point")]
    poles = [(k, pole, stats[f"n_{k}"]) for k, pole in (("single", "+1"), ("antipodal", "-1"))
             if stats["rate"][k] is not None]
    measured = [f"{stats['rate'][k]:.2f} near {pole} over {m} path{'s' if m != 1 else ''} "
                f"(predicted {stats['rate_theory'][k]:.2f})" for k, pole, m in poles]
    caveat = "".join(f" The rate near {pole} rests on a single path, so how close it comes to "
                     "its prediction is chance." for _, pole, m in poles if m == 1)
    return {"verdict": verdict(checks, ("As predicted", "Partly as predicted", "Not as predicted")),
            "rates": f"Over the second half of the run the gaps close at mean rates "
                     f"{' and '.join(measured)}.{caveat}"}


def plot(ds):
    """(left) the overlap against time; (right) the distance to the nearer pole, log scale."""
    import matplotlib.pyplot as plt

    gaps, times, half, sides = _gaps(ds)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(8.0, 3.4))
    for colour, z, gap in zip(palette(ds.sizes["trajectory"]), ds.overlap.values, gaps):
        ax.plot(times, z, color=colour, lw=0.9)
        ax2.semilogy(times, gap, color=colour, lw=0.9)
    ax.set(xlabel="time $t = n/L$", ylabel=r"overlap $Z_t$", ylim=(-1.05, 1.05),
           title=f"d = {ds.attrs['d']}, $\\beta$ = {ds.attrs['beta']:g}, L = {ds.attrs['L']}")
    ax2.axhline(ds.attrs["tol"], color="0.3", ls=":", lw=1, label=f"tolerance {ds.attrs['tol']:g}")
    # The predicted mean rates, drawn over the second half from the paths' geometric mean.
    rates = log_gap_rates(ds.attrs["beta"], ds.attrs["d"], float(ds.attrs.get("sigma", 1.0)))
    for side, paths in sides.items():
        if paths.any() and rates[side] > 0:
            g0 = np.exp(np.log(gaps[paths, half]).mean())
            ax2.semilogy(times[half:], g0 * np.exp(-rates[side] * (times[half:] - times[half])),
                         "k--", lw=1.2)
    ax2.plot([], [], "k--", lw=1.2, label="predicted mean rate")
    ax2.legend(loc="lower left")
    ax2.set(xlabel="time $t = n/L$", ylabel=r"$\min(1 - Z_t,\ 1 + Z_t)$",
            title="distance to the nearer pole")
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "overlap", source="paper",
    description="a few two-token trajectories: the overlap and its distance to the nearer pole",
    # one dimension, one beta (the rates' cosh(2 beta) overflows beyond about 355)
    schema={"d": integer(2), "beta": real(0.0, 350.0)})
compute, cost = FIGURE.compute, FIGURE.cost
