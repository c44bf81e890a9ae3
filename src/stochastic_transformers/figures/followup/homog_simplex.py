r"""The simplex regime (the follow-up's Theorem 2): one scalar carries the whole Gram matrix.

N tokens start from the simplex Gram matrix :math:`R(0) = (1-\gamma_0)I + \gamma_0\mathbf 1\mathbf 1^\top`
(:math:`x_i = \sqrt{\gamma_0}\,e_0 + \sqrt{1-\gamma_0}\,e_i`) in the random-attention model,
one head, :math:`\beta = b/(\sigma_{qk}^2\sqrt d)` so that the scores have standard deviation
about b.  By symmetry the expected drift keeps the simplex form; the follow-up's Theorem 2
says the Gram matrix stays close to it, with :math:`\gamma(t)` following a scalar ODE, and
that attention concentrating on one token (large :math:`\beta`) slows it (their Figure 2).
Our derivation of that ODE (:mod:`stochastic_transformers.random_attention.homogenized`) gives, on the
clock :math:`t = d\tau`,

.. math::

    \frac{d\gamma}{dt} = \frac1d\Bigl([\gamma + (1-\gamma)g](d - 2 + \gamma^2)
        - (d-1)\gamma[\gamma + (1-\gamma)f]\Bigr),\qquad
    f = E\sum_k\pi_{ik}^2,\ g = E\sum_k\pi_{ik}\pi_{jk},

with f, g Monte Carlo averages over the random keys and queries at the simplex
(:func:`stochastic_transformers.random_attention.homogenized.simplex_path`; its band is two standard errors
of f and g).  The figure draws the simulated :math:`\gamma(t)` (mean off-diagonal overlap)
over it, and the spread of the off-diagonal overlaps inside a trajectory (how far the
Gram matrix strays from the simplex).
"""

from __future__ import annotations

import math

import numpy as np

from ... import simulate
from ..._validation import check_real
from ...config import ModelConfig, RunConfig
from ...random_attention.homogenized import simplex_path, simplex_tokens
from ..base import cell_threads, laid_out
from ..knobs import all_of, integer, integers
from ..spec import Figure
from .clock import (CLOCK_SCHEMA, clock_sweeps, decay_exponent, gap_table, label_gap_axes,
                    measured_work, on_schedule, plot_refinement, refinement_summary, schedule,
                    with_refinement, work)
from ..words import listed, signed

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
#: The verdict on the approach to the scalar dynamics: the largest gap must shrink with d,
#: its fitted exponent below GAP_SLOPE_MAX (a finite-d correction; the theorem is asymptotic).
GAP_SLOPE_MAX = -0.5
_OUTPUTS = ("gamma_mean", "gamma_se", "gamma_q10", "gamma_q90", "pair_spread")


def _below_one(name, value, knobs):
    """The check of ``gamma0``: in [0, 1) (gamma0 = 1 is one point, which never moves)."""
    gamma0 = check_real(name, value, 0.0, 1.0)
    if gamma0 >= 1.0:
        raise ValueError(f"{name} must be < 1 ({name} = 1 is one point, which never moves)")
    return gamma0


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
    """The (d, b) sweep on the clock t = d tau, the scalar dynamics of every cell on the
    record times and a fine grid (``gamma_theory``, ``theory_band`` and their ``_fine``
    curves), ``z_gamma``, ``max_abs_gap``, and the depth refinement at the largest d and b
    (the largest gap there: the step's share)."""
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
    """Per (d, b): largest gap to the scalar dynamics and its z; the gap's decay in d; the
    slowing with b at the largest d; how far the Gram matrix strays from the simplex.

    Also: ``gap_range_small_d`` and ``gap_range_large_d``, the smallest and largest (over b)
    of the largest gap at the smallest and the largest d; ``below_ode``: at every (d, b) the simulated mean is below
    the ODE where the two are farthest apart; ``step_t``: the step on the clock t,
    ``t_max / n_layers``.
    """
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
    small = ds.max_abs_gap.isel(d=0).values
    large = ds.max_abs_gap.isel(d=-1).values
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
    """The page's words (Markdown): the verdict (does gamma follow the scalar dynamics ever
    more closely as d grows, and does sharper attention slow it?), the largest distances in
    standard errors at the largest d (one per b) and the spread of the off-diagonal overlaps
    within a run (one per d)."""
    shrinks, slows = stats["gap_shrinks_with_d"], stats["slows_with_b"]
    word = ("Reproduced" if shrinks and slows else "Partly reproduced" if shrinks or slows
            else "Not reproduced")
    slopes = [signed(v) for v in sorted(stats["gap_slope"].values())]
    gap = (f"at $d$ = {stats['d_max']} the simulated $\\gamma(t)$ stays within "
           f"{stats['gap_range_large_d'][1]:.3f} of our scalar dynamics for every $b$, and the "
           + ("gap shrinks" if shrinks else "gap does **not** shrink at every $b$")
           + f" as $d$ grows (fitted exponents from {slopes[0]} to {slopes[-1]})")
    final = stats["final_gamma"]
    slowing = (f"sharper attention slows the collapse, as in the follow-up's Figure 2: "
               f"$\\gamma({stats['final_t']:g})$ falls from {final[0]:.3f} at $b$ = "
               f"{stats['b_min']:g} to {final[-1]:.3f} at $b$ = {stats['b_max']:g}" if slows else
               "in this run sharper attention does **not** slow the collapse at every step "
               "of $b$")
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

    from ...style import palette

    fig, (ax, axs) = plt.subplots(2, 1, figsize=(7.0, 7.4))
    big = ds.isel(d=-1)
    for colour, b in zip(palette(ds.sizes["b"]), ds.b.values):
        sub = big.sel(b=b)
        ax.fill_between(ds.t, sub.gamma_q10, sub.gamma_q90, color=colour, alpha=0.12, lw=0)
        ax.errorbar(ds.t, sub.gamma_mean, yerr=2 * sub.gamma_se, fmt="o", ms=3, color=colour,
                    capsize=1.5, lw=0.8, label=f"b = {b:g}")
        ax.plot(ds.t_fine, sub.gamma_theory_fine, color=colour, lw=1.2)
        ax.fill_between(ds.t_fine, sub.gamma_theory_fine - sub.theory_band_fine,
                        sub.gamma_theory_fine + sub.theory_band_fine, color=colour, alpha=0.3, lw=0)
        axs.plot(ds.d, ds.max_abs_gap.sel(b=b), "o-", ms=4, color=colour, label=f"b = {b:g}")
    plot_refinement(axs, ds, palette(ds.sizes["b"])[list(ds.b.values).index(ds.attrs["refine_b"])])
    ax.plot([], [], color="0.3", lw=1.2, label="scalar dynamics (ours)")
    ax.set(xlabel=r"$t = d\,\tau$", ylabel=r"$\gamma(t)$, mean off-diagonal overlap",
           title=f"simplex start, N = {ds.attrs['fixed_n_tokens']}, d = {int(big.d)}, "
                 r"$\beta = b/\sqrt{d}$ (bands: 10-90%)")
    ax.legend(loc="upper left", ncol=2)
    label_gap_axes(axs, ds, ylabel=r"$\max_t|E\gamma(t) - \gamma_{ODE}(t)|$",
                   title=f"gap to the scalar dynamics ({int(ds.n_traj.max()):,} runs a point)")
    axs.legend(ncol=2, loc="lower left")
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_simplex", source="followup",
    description="random keys and queries from a simplex: gamma(t) against the scalar "
                "dynamics, slowing as attention sharpens (follow-up's Theorem 2)",
    # those of the clock t, the start gamma0, the Monte Carlo samples of the theory and the
    # dimensions, each above n_tokens (the simplex needs n_tokens + 1 directions) and each
    # giving a schedule
    schema={**CLOCK_SCHEMA, "gamma0": _below_one, "theory_samples": integer(100),
            "d": all_of(integers(lambda knobs: knobs["n_tokens"] + 1), on_schedule)})
compute, cost = FIGURE.compute, FIGURE.cost
