r"""A few two-token trajectories: the overlap and its distance to the nearer pole.

Two tokens start independent and uniform on :math:`S^{d-1}` and pass through the
stochastic model (paper eq. 4) with softmax attention (``_BASE``; no knob changes it) on
the exact overlap chain; the overlap
:math:`Z_t = \langle X^1_t, X^2_t\rangle` is recorded at every layer.  The chain keeps
:math:`1 - Z` and :math:`1 + Z` to full relative precision, so the distance to the nearer
pole can be drawn on a log scale down to any depth.  No sweep: one call of
:func:`stochastic_transformers.simulate`, a few seconds at most.
"""

from __future__ import annotations

import numpy as np

from ... import simulate, theory
from ...config import ModelConfig, RunConfig
from ..base import laid_out
from ..knobs import integer, real
from ..spec import Figure

_BASE = dict(d=4, beta=1.0, L=100, attention="softmax", seed=1)
SCALES = {
    "smoke": dict(_BASE, n_traj=4, T=3.0),
    "quick": dict(_BASE, n_traj=12, T=30.0),
    "paper": dict(_BASE, n_traj=12, T=30.0),   # an illustration: the quick scale is the whole
}
#: The tolerance the right-hand panel marks (the paper's classification tolerance).
TOL = 1e-3


def run(knobs, sweeps):
    """Run the trajectories (one call of :func:`simulate`, no sweep: ``sweeps`` is unused);
    return ``overlap(trajectory, time)`` at every layer and the two gaps
    ``one_minus_overlap`` and ``one_plus_overlap``, which keep their relative precision near
    the poles."""
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


def summary(ds) -> dict:
    """Outcomes at T (the side of 0 each overlap ends on: ``n_single`` with Z_T >= 0,
    ``n_antipodal`` with Z_T < 0, and how many end within the tolerance :data:`TOL` of
    their pole), the smallest gap reached, the attention, and the limit theory for the
    same (beta, d) (the long-time law is the same for both attentions)."""
    final = ds.overlap.values[:, -1]
    gaps = np.minimum(ds.one_minus_overlap.values, ds.one_plus_overlap.values)
    beta, d = float(ds.attrs["beta"]), int(ds.attrs["d"])
    tol = float(ds.attrs.get("tol", TOL))
    return {"n_traj": int(ds.sizes["trajectory"]), "T": float(ds.time.values[-1]),
            "n_single": int(np.sum(final >= 0)), "n_antipodal": int(np.sum(final < 0)),
            "n_within_tol": int(np.sum(gaps[:, -1] <= tol)), "tol": tol,
            "min_gap": float(gaps.min()), "beta": beta, "d": d,
            "attention": str(ds.attrs.get("attention", _BASE["attention"])),
            "beta_c": float(theory.critical_beta(d)),
            "p_antipodal_theory": float(theory.antipodal_probability(beta, d))}


def plot(ds):
    """(left) the overlap against time; (right) the distance to the nearer pole, log scale."""
    import matplotlib.pyplot as plt

    from ...style import palette

    times = ds.time.values
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for colour, z, g1, g2 in zip(palette(ds.sizes["trajectory"]), ds.overlap.values,
                                 ds.one_minus_overlap.values, ds.one_plus_overlap.values):
        ax.plot(times, z, color=colour, lw=0.9)
        ax2.semilogy(times, np.minimum(g1, g2), color=colour, lw=0.9)
    ax.set(xlabel="time $t = n/L$", ylabel=r"overlap $Z_t$", ylim=(-1.05, 1.05),
           title=f"d = {ds.attrs['d']}, $\\beta$ = {ds.attrs['beta']:g}, L = {ds.attrs['L']}")
    ax2.axhline(ds.attrs["tol"], color="0.3", ls=":", lw=1)
    ax2.set(xlabel="time $t = n/L$", ylabel=r"$\min(1 - Z_t,\ 1 + Z_t)$",
            title=f"distance to the nearer pole (dotted: tolerance {ds.attrs['tol']:g})")
    return laid_out(fig)


FIGURE = Figure(
    "overlap", source="paper",
    description="a few two-token trajectories: the overlap and its distance to the nearer pole",
    scales=SCALES, schema={"d": integer(2), "beta": real(0.0)},  # one dimension, one beta
    run=run, summary=summary, plot=plot)
compute, cost = FIGURE.compute, FIGURE.cost
