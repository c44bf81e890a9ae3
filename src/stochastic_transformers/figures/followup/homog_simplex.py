r"""The simplex regime (the follow-up's Theorem 2): one scalar carries the whole Gram matrix.

N tokens start from :math:`R(0) = (1-\gamma_0)I + \gamma_0\mathbf 1\mathbf 1^\top`, random
attention, one head, :math:`\beta = b/\sqrt d`.  Theorem 2: the Gram matrix stays close to
the simplex form, :math:`\gamma(t)` following a scalar ODE that concentrated attention slows
(their Figure 2).  Our derivation, on the clock :math:`t = d\tau`:

.. math::

    \frac{d\gamma}{dt} = \frac1d\Bigl([\gamma + (1-\gamma)g](d - 2 + \gamma^2)
        - (d-1)\gamma[\gamma + (1-\gamma)f]\Bigr),\qquad
    f = E\sum_k\pi_{ik}^2,\ g = E\sum_k\pi_{ik}\pi_{jk},

f and g by Monte Carlo over the keys and queries (:func:`simplex_path`; band: 2 s.e.).
"""

from __future__ import annotations

import math

import numpy as np

from ... import simulate
from ..._validation import check_real
from ...config import ModelConfig, RunConfig
from ...random_attention.homogenized import simplex_path, simplex_tokens
from ...style import palette
from ..base import cell_threads, laid_out
from ..knobs import all_of, integer, integers
from ..spec import Figure
from ..words import listed
from .clock import (CLOCK_SCHEMA, clock_sweeps, decay_exponent, gap_panel, gap_table,
                    on_schedule, refinement_summary, schedule, with_refinement, work)

_BASE = dict(n_tokens=8, d=(32, 64, 128), gamma0=0.1, bs=(0.0, 1.0, 2.0, 4.0, 8.0), t_max=4.0,
             n_layers=400, n_times=21, theory_samples=8000, seed=0)
SCALES = {
    "smoke": dict(_BASE, d=(16, 32), bs=(0.0, 4.0), n_traj=40, n_layers=80, n_times=5,
                  theory_samples=500),
    "quick": dict(_BASE, n_traj=400),
    "paper": dict(_BASE, n_traj=4000, theory_samples=40_000),
}
#: Seconds of simulation per token-dimension-trajectory-layer, measured on the committed
#: paper run (472 s of cell time with its refinement, one thread a worker).
SECONDS_PER_WORK = 2.09e-8
#: The largest gap must shrink with d, its fitted exponent below GAP_SLOPE_MAX (a finite-d
#: correction; the theorem is asymptotic).
GAP_SLOPE_MAX = -0.5
_OUTPUTS = ("gamma_mean", "gamma_se", "gamma_q10", "gamma_q90", "pair_spread")


def cell(*, d, b, n_tokens, gamma0, n_traj, t_max, n_layers, n_times, seed):
    """One b: gamma(t) and the within-trajectory spread of the off-diagonal overlaps."""
    T, L, times = schedule(d, t_max, n_layers, n_times)
    beta = b / math.sqrt(d)
    ds = simulate(ModelConfig(d=d, beta=beta, kind="random_attention"),
                  RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=T, times=times,
                            x0=simplex_tokens(n_tokens, d, gamma0), seed=seed,
                            n_threads=cell_threads()))
    off = ~np.eye(n_tokens, dtype=bool)
    r = ds.gram_t.values[:, :, off]                      # (trajectory, time, pairs)
    gam = r.mean(axis=2)
    return {"gamma_mean": gam.mean(axis=0),
            "gamma_se": gam.std(axis=0, ddof=1) / math.sqrt(n_traj),
            "gamma_q10": np.quantile(gam, 0.1, axis=0), "gamma_q90": np.quantile(gam, 0.9, axis=0),
            "pair_spread": r.std(axis=2).mean(axis=0), "n_traj": n_traj}


def run(knobs, sweeps):
    """The (d, b) sweep with the scalar dynamics of every cell (``gamma_theory``,
    ``theory_band`` and their ``_fine`` curves), ``z_gamma``, ``max_abs_gap``, and the depth
    refinement at the largest d and b."""
    fixed = {k: knobs[k] for k in ("n_tokens", "gamma0", "n_traj", "t_max", "n_layers",
                                   "n_times")}
    ds, refine = clock_sweeps(sweeps, knobs, fixed, _OUTPUTS, refine_b=max(knobs["bs"]))
    n, g0, samples = knobs["n_tokens"], knobs["gamma0"], knobs["theory_samples"]
    t, t_fine = ds.t.values, np.linspace(0.0, float(ds.t.max()), 81)
    ds = ds.assign_coords(t_fine=t_fine)
    grid = np.unique(np.concatenate([t, t_fine]))
    curves = np.array([[simplex_path(grid, g0, n, float(b) / math.sqrt(d), int(d),
                                     n_samples=samples) for b in ds.b.values]
                       for d in ds.d.values])          # (d, b, path or band, time of grid)
    for times, dim, suffix in ((t, "t", ""), (t_fine, "t_fine", "_fine")):
        on = np.apply_along_axis(lambda c: np.interp(times, grid, c), -1, curves)
        ds[f"gamma_theory{suffix}"] = (("d", "b", dim), on[:, :, 0])
        ds[f"theory_band{suffix}"] = (("d", "b", dim), on[:, :, 1])
    se = np.sqrt(ds.gamma_se**2 + (ds.theory_band / 2) ** 2)
    ds["z_gamma"] = ((ds.gamma_mean - ds.gamma_theory) / se).where(ds.t > 0, 0.0)
    ds["max_abs_gap"] = np.abs(ds.gamma_mean - ds.gamma_theory).max("t")
    theory = ds.gamma_theory.sel(d=refine.attrs["fixed_d"], b=refine.attrs["fixed_b"]).values
    ds.attrs.update(theory_samples=samples)
    return with_refinement(ds, refine,
                           np.abs(refine.gamma_mean.values - theory[None, :]).max(axis=1))


def summary(ds) -> dict:
    """The largest gap to the ODE per (d, b), its exponent in d and range over b; at the
    largest d the largest |z| and the last gamma per b (``slows_with_b``: it falls with b);
    the largest spread of the off-diagonal overlaps per d; ``below_ode``: the mean is below
    the ODE where they differ most, at every (d, b); the refinement."""
    big = ds.isel(d=-1)
    final = big.gamma_mean.isel(t=-1).values
    out = {"d": [int(v) for v in ds.d.values], "b": [float(v) for v in ds.b.values],
           "n_traj": int(ds.n_traj.max()),
           "max_abs_gap": {float(b): [float(v) for v in ds.max_abs_gap.sel(b=b).values]
                           for b in ds.b.values},
           "max_abs_z_large_d": {float(b): float(np.abs(big.z_gamma.sel(b=b)).max())
                                 for b in ds.b.values},
           "gap_slope": {float(b): decay_exponent(ds.d.values, ds.max_abs_gap.sel(b=b).values)
                         for b in ds.b.values},
           "final_gamma": [float(v) for v in final],
           "max_pair_spread": [float(v) for v in ds.pair_spread.max(("b", "t")).values],
           "slows_with_b": bool(np.all(np.diff(final) < 0))}
    out["gap_shrinks_with_d"] = bool(all(v < GAP_SLOPE_MAX for v in out["gap_slope"].values()))
    small, large = ds.max_abs_gap.isel(d=0).values, ds.max_abs_gap.isel(d=-1).values
    gap = (ds.gamma_mean - ds.gamma_theory).transpose("d", "b", "t").values
    at = np.abs(gap).argmax(axis=-1)
    out.update(d_min=out["d"][0], d_max=out["d"][-1], b_min=out["b"][0], b_max=out["b"][-1],
               final_t=float(ds.t.max()),
               step_t=float(ds.attrs["fixed_t_max"]) / float(ds.attrs["fixed_n_layers"]),
               gap_range_small_d=[float(small.min()), float(small.max())],
               gap_range_large_d=[float(large.min()), float(large.max())],
               below_ode=bool(np.all(np.take_along_axis(gap, at[..., None], -1) < 0)))
    out["refine"] = refinement_summary(ds)
    return out


def phrases(stats) -> dict[str, str]:
    """The page's verdict (does gamma approach the scalar dynamics as d grows, and does
    sharper attention slow it?), the |z| per b and the spread per d, in Markdown."""
    shrinks, slows = stats["gap_shrinks_with_d"], stats["slows_with_b"]
    word = ("Reproduced" if shrinks and slows else "Partly reproduced" if shrinks or slows
            else "Not reproduced")
    gap = ("the gap of the simulated $\\gamma(t)$ to our scalar dynamics "
           + ("shrinks" if shrinks else "does **not** shrink at every $b$") + " as $d$ grows")
    final = stats["final_gamma"]
    slowing = (f"sharper attention slows the collapse, as in the follow-up's Figure 2: "
               f"$\\gamma({stats['final_t']:g})$ falls from {final[0]:.3f} at $b$ = "
               f"{stats['b_min']:g} to {final[-1]:.3f} at $b$ = {stats['b_max']:g}" if slows else
               "in this run sharper attention does **not** slow the collapse at every step of $b$")
    return {"verdict": f"**{word}:** {gap}; {slowing}.",
            "z": listed(stats["max_abs_z_large_d"].values(), ".1f"),
            "spread": listed(stats["max_pair_spread"], ".2f")}


def table(stats) -> str:
    """The largest gap per (b, d) and its exponent in d, as Markdown."""
    return gap_table(stats, "b", "gap_slope")


def plot(ds):
    """(top) gamma(t) at the largest d for each b: simulated mean with 10-90% band, the
    scalar ODE with its MC band; (bottom) the largest gap to the ODE against d."""
    import matplotlib.pyplot as plt

    fig, (ax, axs) = plt.subplots(2, 1, figsize=(7.0, 7.4))
    big = ds.isel(d=-1)
    for colour, b in zip(palette(ds.sizes["b"]), ds.b.values):
        sub = big.sel(b=b)
        theory, band = sub.gamma_theory_fine, sub.theory_band_fine
        ax.fill_between(ds.t, sub.gamma_q10, sub.gamma_q90, color=colour, alpha=0.12, lw=0)
        ax.errorbar(ds.t, sub.gamma_mean, yerr=2 * sub.gamma_se, fmt="o", ms=3, color=colour,
                    capsize=1.5, lw=0.8, label=f"b = {b:g}")
        ax.plot(ds.t_fine, theory, color=colour, lw=1.2)
        ax.fill_between(ds.t_fine, theory - band, theory + band, color=colour, alpha=0.3, lw=0)
    ax.plot([], [], color="0.3", lw=1.2, label="scalar dynamics (ours)")
    ax.set(xlabel=r"$t = d\,\tau$", ylabel=r"$\gamma(t)$, mean off-diagonal overlap",
           title=f"simplex start, N = {ds.attrs['fixed_n_tokens']}, d = {int(big.d)}, "
                 r"$\beta = b/\sqrt{d}$ (bands: 10-90%)")
    ax.legend(loc="upper left", ncol=2)
    gap_panel(axs, ds, "b = {:g}", r"$\max_t|E\gamma(t) - \gamma_{ODE}(t)|$",
              f"gap to the scalar dynamics ({int(ds.n_traj.max()):,} runs a point)")
    axs.legend(ncol=2, loc="lower left")
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_simplex", source="followup",
    description="random keys and queries from a simplex: gamma(t) against the scalar "
                "dynamics, slowing as attention sharpens (follow-up's Theorem 2)",
    # gamma0 = 1 is one point, which never moves; the simplex needs n_tokens + 1 directions
    schema={**CLOCK_SCHEMA, "theory_samples": integer(100),
            "gamma0": lambda name, v, knobs: check_real(name, v, 0.0, 1.0, strict_max=True),
            "d": all_of(integers(lambda knobs: knobs["n_tokens"] + 1), on_schedule)})
compute, cost = FIGURE.compute, FIGURE.cost
