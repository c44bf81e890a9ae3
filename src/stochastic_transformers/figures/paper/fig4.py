r"""Figure 4: the noise-induced clustering threshold of Proposition 1.

Hybrid model (paper eq. 7): value matrix the identity, a scalar common noise in the
residual, :math:`w_{n+1} = 1/L + \varepsilon\,\xi_{n+1}/\sqrt L`.  With unnormalised attention
two tokens merge almost surely in the limit when :math:`\varepsilon < \varepsilon_c(\beta) =
\sqrt{2e^{-\beta}}` and end antipodal above it, whatever d (Proposition 1).

The paper's phase diagram at L = 100 and at a deeper L; the antipodal fraction against
:math:`\varepsilon/\varepsilon_c` (the limit: a step at 1); a depth check at one point with L
up to 10,000.  Ours, in :func:`summary`: the limit's own outcome at T at a few *reference
cells* just above the curve (:func:`limit_outcome`), and the approach rates to -1 of the limit
and the chain (:func:`stochastic_transformers.theory.hybrid_antipodal_rate`), which differ
where the step (:func:`stochastic_transformers.theory.hybrid_step_size`) is not small.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import xarray as xr

from ... import sde, simulate, theory
from ..._validation import check_real
from ...classification import outcome_counts
from ...config import ModelConfig, RunConfig
from ...style import palette
from ...sweep import summed_attrs
from ..base import add_outcome_fractions, cell_threads, laid_out, sweep_seconds
from ..knobs import all_of, integer, integers, real, reals, whole_layers
from ..spec import Figure
from ._fig4_page import map_legend, phrases, plot_collapse, plot_depth_check, plot_map  # noqa: F401

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


#: Cells with |log(eps / eps_c)| below this are on the threshold, left out of the agreement
#: count: there the limit is a time-changed Brownian motion that needs far longer than T.
BAND = 0.2
#: A step's random part eps e^beta / (2 sqrt L) counts as small below this (a loose gauge:
#: the approach rate to -1 measures what the step does).
SMALL_STEP = 0.5
#: A cell whose unclustered fraction at T exceeds this is *undecided*, on neither side.
UNDECIDED = 0.5
#: Reference cells: from this beta on, in these steps (:func:`reference_cells`); Euler-Maruyama
#: of the limit there (:func:`limit_outcome`): paths (standard error <= 0.008), step, seed.
REFERENCE_BETA_MIN, REFERENCE_BETA_STEP = 2.5, 0.5
LIMIT_PATHS, LIMIT_DT, LIMIT_SEED = 4000, 0.005, 0
#: The depth check (or the limit at its point) reaches the antipodal outcome when its
#: antipodal fraction at the largest L (at check_T) exceeds this.
LIMIT_REACHED = 0.9
#: Proposition 1 holds where steps are small when this share of the decided cells agrees.
SMALL_STEP_AGREE = 0.95
OUTCOMES = ("single", "antipodal", "unclustered")


@functools.lru_cache(maxsize=64)
def limit_outcome(beta, epsilon, T, d=3, tol=1e-3, n_paths=LIMIT_PATHS, dt=LIMIT_DT,
                  seed=LIMIT_SEED) -> dict:
    r"""Outcome fractions ``{"single", "antipodal", "unclustered"}`` at T of the *limit*
    (Proposition 1's SDE) from two uniform tokens of :math:`S^{d-1}`: Euler-Maruyama in
    :math:`x = \operatorname{atanh} z` (:func:`stochastic_transformers.sde.simulate_overlap_sde`),
    exact near -1, where the SDE is a Brownian motion with drift
    :math:`e^{-\beta} - \varepsilon^2/2`."""
    z = sde.simulate_overlap_sde(float(beta), int(d), z0=None, n_paths=int(n_paths), T=float(T),
                                 dt=float(dt), attention="unnormalized", model="hybrid",
                                 epsilon=float(epsilon), seed=int(seed))[-1]
    single = float(np.mean(1.0 - z <= tol))
    antipodal = float(np.mean(1.0 + z <= tol))
    return {"single": single, "antipodal": antipodal, "unclustered": 1.0 - single - antipodal}


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


def run(knobs, sweeps):
    """The maps ``p_single(L, beta, epsilon)``, ... (sweep ``fig4-SCALE`` per depth scale),
    ``epsilon_c``, ``step_size`` and the *depth check* (sweep ``fig4-depth-SCALE``): the
    fractions ``depth_p_*(check_L)`` at ``check_point``, to tell a discretisation effect
    from a disagreement with the limit."""
    # n_traj a cell at the first L (the paper's), deep_n_traj at the deeper (costlier) ones
    maps = [sweeps({"L": [L], "beta": list(knobs["betas"]), "epsilon": list(knobs["epsilons"])},
                   fixed={"n_traj": knobs["n_traj"] if k == 0 else knobs["deep_n_traj"],
                          "T": knobs["T"], "d": knobs["d"], "tol": knobs["tol"]},
                   seed=knobs["seed"])
            for k, L in enumerate(knobs["Ls"])]
    ds = xr.concat(maps, dim="L", combine_attrs="override")
    # the first map's attributes, but every count and time summed, and grid_L and parameters
    params = [json.loads(m.attrs.get("parameters", "{}")) for m in maps]
    ds.attrs.update(fixed_n_traj=knobs["n_traj"], deep_n_traj=knobs["deep_n_traj"],
                    grid_L=[int(L) for L in knobs["Ls"]], parameters=json.dumps(params),
                    **summed_attrs(maps))
    ds = add_outcome_fractions(ds, OUTCOMES)
    beta_chk, eps_chk = knobs["check_point"]
    chk = sweeps({"L": list(knobs["check_L"])}, cell=depth_cell, name=f"fig4-depth-{sweeps.scale}",
                 fixed={"beta": beta_chk, "epsilon": eps_chk, "n_traj": knobs["check_n_traj"],
                        "T": knobs["check_T"], "d": knobs["d"], "tol": knobs["tol"]},
                 seed=knobs["seed"])
    chk = add_outcome_fractions(chk, OUTCOMES)
    for name in ("p_single", "p_antipodal", "p_unclustered", "p_antipodal_low", "p_antipodal_high",
                 "p_single_low", "p_single_high"):
        ds[f"depth_{name}"] = chk[name].rename(L="check_L")
    ds.attrs.update(check_beta=beta_chk, check_epsilon=eps_chk,
                    check_n_traj=knobs["check_n_traj"], check_T=knobs["check_T"],
                    **{f"check_{k}": v for k, v in summed_attrs([chk]).items()})
    ds["epsilon_c"] = (("beta",), np.asarray(theory.critical_epsilon(ds.beta.values), dtype=float))
    ds["p_antipodal_theory"] = (ds.epsilon / ds.epsilon_c > 1).astype(float)
    ds["dominant_antipodal"] = ds.p_antipodal > ds.p_single
    ds["step_size"] = (("L", "beta", "epsilon"), theory.hybrid_step_size(
        ds.beta.values[None, :, None], ds.epsilon.values[None, None, :], ds.L.values[:, None, None]))
    ds.attrs.update(band=BAND, small_step=SMALL_STEP)
    return ds


#: Seconds of simulation per trajectory-layer (:func:`work`), measured on the committed paper
#: run (results/fig4_paper.nc: 3,296 s of cell time for 2.9e10 trajectory-layers, 2 cores).
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
    counts when its cell time is recorded (older results are measured on the maps alone)."""
    seconds = sweep_seconds(ds)
    layers = float((ds.n_traj * ds.L).sum()) * float(ds.attrs["fixed_T"])
    if "check_cell_time_s" in ds.attrs:
        seconds += float(ds.attrs["check_cell_time_s"])
        layers += (float(ds.attrs["check_n_traj"]) * float(ds.attrs["check_T"])
                   * float(ds.check_L.sum()))
    return seconds, layers


def _log_ratio(ds) -> np.ndarray:
    """log(eps / eps_c(beta)) over (beta, epsilon); -inf at eps = 0 (deep in the merging side)."""
    with np.errstate(divide="ignore"):
        return np.log(ds.epsilon.values[None, :] / ds.epsilon_c.values[:, None])


def reference_cells(ds) -> list[tuple[float, float]]:
    """The cells (beta, eps) where :func:`summary` computes the limit at T: for every beta
    from :data:`REFERENCE_BETA_MIN` on in steps of :data:`REFERENCE_BETA_STEP`, the
    smallest eps above the band around the curve (none where no eps is)."""
    log_ratio, out = _log_ratio(ds), []
    for i, b in enumerate(ds.beta.values):
        k = (b - REFERENCE_BETA_MIN) / REFERENCE_BETA_STEP
        above = np.nonzero(log_ratio[i] > BAND)[0]
        if b >= REFERENCE_BETA_MIN - 1e-9 and abs(k - round(k)) <= 1e-6 and above.size:
            out.append((float(b), float(ds.epsilon.values[above[0]])))
    return out


def summary_at(ds, L) -> dict:
    """Agreement of the dominant outcome with Proposition 1 at depth scale ``L``, over the
    ``n_away`` cells off the :data:`BAND`: ``n_undecided`` (on neither side), and over the
    decided ones ``n_agree``, ``n_decided``, ``share_agree``, also for ``_small_step`` and
    ``_large_step`` cells (:data:`SMALL_STEP`); ``n_wrong_large_step_above`` (wrong above
    the curve with large steps: ``large_step_merges``); ``small_step_agree``
    (:data:`SMALL_STEP_AGREE`, True without such cells); ``wrong_cells`` and
    ``undecided_cells`` as (beta, eps)."""
    sub = ds.sel(L=L)
    log_ratio = _log_ratio(sub)
    away = np.abs(log_ratio) > BAND
    undecided = away & (sub.p_unclustered.values > UNDECIDED)
    decided = away & ~undecided
    predicted_anti = log_ratio > 0
    agree = (predicted_anti == sub.dominant_antipodal.values) & decided
    wrong = decided & ~agree
    small = away & (sub.step_size.values < SMALL_STEP)
    large = away & ~small
    out = {"L": int(L), "n_cells": int(away.size), "n_away": int(away.sum()),
           "n_undecided": int(undecided.sum()),
           "n_small_step": int(small.sum()), "n_large_step": int(large.sum()),
           "n_wrong": int(wrong.sum()), "n_wrong_small_step": int((wrong & small).sum()),
           "n_wrong_large_step_above": int((wrong & large & predicted_anti).sum()),
           "n_traj": int(sub.n_traj.max()) if "n_traj" in sub else None}
    for suffix, mask in (("", away), ("_small_step", small), ("_large_step", large)):
        n_decided = int((decided & mask).sum())
        out[f"n_agree{suffix}"] = int((agree & mask).sum())
        out[f"n_decided{suffix}"] = n_decided
        out[f"share_agree{suffix}"] = float((agree & mask).sum() / max(n_decided, 1))
    out["small_step_agree"] = bool(out["share_agree_small_step"] >= SMALL_STEP_AGREE
                                   or not (decided & small).any())
    out["large_step_merges"] = out["n_wrong_large_step_above"] > 0
    for key, mask in (("wrong_cells", wrong), ("undecided_cells", undecided)):
        out[key] = [(float(sub.beta.values[i]), float(sub.epsilon.values[j]))
                    for i, j in np.argwhere(mask)]
    return out


def _span(values):
    values = list(values)
    return (min(values), max(values)) if values else (float("nan"), float("nan"))


def _reference(ds, Ls, T, d, tol) -> dict:
    """The limit at T (:func:`limit_outcome`), the maps and the approach rates to -1 at the
    :func:`reference_cells` (``cells``; none where ``T`` is not finite).  Counts: ``n``;
    ``n_limit_undecided`` (the limit undecided at T); of these ``n_ahead_small_step`` (at
    the smallest L, small steps and the antipodal pair dominant: the chain has clustered
    before its limit) and ``n_undecided_last`` (undecided at the largest L); ranges over
    each (NaN if empty)."""
    cells = []
    for beta, eps in (reference_cells(ds) if np.isfinite(T) else []):
        lim = limit_outcome(beta, eps, T, d, tol)
        entry = {"beta": beta, "epsilon": eps, **{f"limit_{k}": v for k, v in lim.items()},
                 "limit_rate": theory.hybrid_antipodal_rate(beta, eps), "by_L": {}}
        for L in Ls:
            sub = ds.sel(L=L, beta=beta, epsilon=eps)
            rate = theory.hybrid_antipodal_rate(beta, eps, L)
            entry["by_L"][L] = {**{f"p_{k}": float(sub[f"p_{k}"]) for k in OUTCOMES},
                                "step": float(sub.step_size), "rate": rate,
                                "rate_ratio": rate / entry["limit_rate"]}
        cells.append(entry)
    first, last = (lambda c: c["by_L"][Ls[0]]), (lambda c: c["by_L"][Ls[-1]])
    undecided = [c for c in cells if c["limit_unclustered"] > UNDECIDED]
    ahead = [c for c in undecided if first(c)["step"] < SMALL_STEP
             and first(c)["p_unclustered"] <= UNDECIDED
             and first(c)["p_antipodal"] > first(c)["p_single"]]
    out = {"cells": cells, "n": len(cells), "n_limit_undecided": len(undecided),
           "n_ahead_small_step": len(ahead),
           "n_undecided_last": sum(last(c)["p_unclustered"] > UNDECIDED for c in undecided)}
    out["limit_unclustered_min"], out["limit_unclustered_max"] = _span(
        c["limit_unclustered"] for c in cells)
    out["ahead_antipodal_min"], out["ahead_antipodal_max"] = _span(
        first(c)["p_antipodal"] for c in ahead)
    out["ahead_limit_antipodal_max"] = _span(c["limit_antipodal"] for c in ahead)[1]
    return out


def summary(ds) -> dict:
    """Every number the page quotes.  ``by_L[L]`` is :func:`summary_at`, at top level for
    ``L_first`` (the smallest L) and in ``last`` for ``L_last`` (without the cells).  Of the
    cells wrong at ``L_first``: ``fixed_by_depth`` (right at ``L_last``),
    ``undecided_by_depth``, ``still_wrong``; ``new_wrong`` (wrong at ``L_last`` only);
    ``depth_reading``: ``"none_wrong"``, ``"single_depth"`` (one L), or ``"all_fixed"``,
    ``"part_fixed"``, ``"none_fixed"`` (all, some, none of them leave the wrong side).  The
    depth check: ``depth_check_limit_reached`` (antipodal fraction above
    :data:`LIMIT_REACHED` at its largest L), ``check_limit`` (the limit there at
    ``check_T``) and ``check_limit_reached``.  ``reference`` is :func:`_reference`.
    ``verdict`` on the paper's map at ``L_first``: ``"reproduced"`` where at least
    :data:`SMALL_STEP_AGREE` of the decided cells agree, ``"partly reproduced"`` where fewer
    do but the small-step cells agree, else ``"not reproduced"``."""
    Ls = [int(L) for L in ds.L.values]
    by_L = {L: summary_at(ds, L) for L in Ls}
    first, last = by_L[Ls[0]], by_L[Ls[-1]]
    wrong_first, wrong_last = set(first["wrong_cells"]), set(last["wrong_cells"])
    undecided_last = set(last["undecided_cells"])
    pa = ds.depth_p_antipodal.values
    ps = ds.depth_p_single.values if "depth_p_single" in ds else np.full(pa.shape, np.nan)
    attrs = ds.attrs
    T = float(attrs.get("fixed_T", np.nan))
    d, tol = int(attrs.get("fixed_d", 3)), float(attrs.get("fixed_tol", 1e-3))
    reference = _reference(ds, Ls, T, d, tol)
    check = [float(attrs.get(f"check_{k}", np.nan)) for k in ("beta", "epsilon", "T")]
    check_limit = (limit_outcome(*check, d, tol) if np.isfinite(check).all()
                   else dict.fromkeys(OUTCOMES, float("nan")))
    return {
        **{k: v for k, v in first.items() if k != "L"}, "Ls": Ls, "by_L": by_L,
        "fixed_by_depth": len(wrong_first - wrong_last - undecided_last),
        "undecided_by_depth": len(wrong_first & undecided_last),
        "still_wrong": len(wrong_first & wrong_last), "new_wrong": len(wrong_last - wrong_first),
        "depth_check_antipodal": [float(p) for p in pa],
        "depth_check_L": [int(L) for L in ds.check_L.values],
        "depth_check_limit_reached": bool(pa[-1] > LIMIT_REACHED),
        "L_first": Ls[0], "L_last": Ls[-1],
        "depth_reading": ("none_wrong" if not first["n_wrong"] else "single_depth"
                          if len(Ls) == 1 else "all_fixed" if not wrong_first & wrong_last
                          else "part_fixed" if wrong_first - wrong_last else "none_fixed"),
        "last": {k: v for k, v in last.items() if k not in ("wrong_cells", "undecided_cells")},
        "n_beta": int(ds.beta.size), "n_epsilon": int(ds.epsilon.size),
        "T": T, "band": BAND, "small_step": SMALL_STEP, "undecided": UNDECIDED,
        "limit_paths": LIMIT_PATHS, "reference": reference,
        "reference_beta_min": REFERENCE_BETA_MIN, "reference_beta_step": REFERENCE_BETA_STEP,
        "limit_undecided_near_curve": reference["n_limit_undecided"] > 0,
        "ahead_small_step": reference["n_ahead_small_step"] > 0,
        "check_beta": check[0], "check_epsilon": check[1],
        "check_n_traj": int(attrs.get("check_n_traj", 0)), "check_T": check[2],
        "check_limit": check_limit,
        "check_limit_reached": bool(check_limit["antipodal"] > LIMIT_REACHED),
        "depth_check_single_first": float(ps[0]), "depth_check_single_last": float(ps[-1]),
        "verdict": ("reproduced" if first["share_agree"] >= SMALL_STEP_AGREE else
                    "partly reproduced" if first["small_step_agree"] and first["n_agree"]
                    else "not reproduced")}


def page_values(stats) -> dict:
    """The summary as the page glues it: without its lists of cells (thousands of keys that
    no sentence quotes; the maps and the tables show them)."""
    drop = ("wrong_cells", "undecided_cells", "cells")
    return {k: page_values(v) if isinstance(v, dict) else v for k, v in stats.items()
            if k not in drop}


def plot(ds):
    """Phase diagrams at every L in rows of two (circled: the :func:`reference_cells`) with
    their legend, then the collapse onto eps / eps_c and the depth check."""
    import matplotlib.pyplot as plt

    colours = palette(10)[3], palette(10)[0]   # single cluster, antipodal pair
    Ls, letters = ds.L.values, "abcdefgh"
    rows = (len(Ls) + 1) // 2
    fig = plt.figure(figsize=(7.0, 3.2 * rows + 4.6))
    grid = fig.add_gridspec(rows + 3, 2, height_ratios=[1.15] * rows + [0.22, 1, 0.24])
    refs = reference_cells(ds)
    for k, L in enumerate(Ls):
        plot_map(fig.add_subplot(grid[k // 2, k % 2]), ds, L, colours, refs, SMALL_STEP,
                 f"({letters[k]}) L = {int(L)}: dominant outcome")
    map_legend(fig.add_subplot(grid[rows, :]), colours, SMALL_STEP)
    handles, labels = plot_collapse(fig.add_subplot(grid[rows + 1, 0]), ds,
                                    f"({letters[len(Ls)]}) against the threshold")
    plot_depth_check(fig.add_subplot(grid[rows + 1, 1]), ds, colours,
                     rf"({letters[len(Ls) + 1]}) $\beta$ = {ds.attrs['check_beta']:g}, "
                     rf"$\varepsilon$ = {ds.attrs['check_epsilon']:g} (limit: antipodal)")
    legend = fig.add_subplot(grid[rows + 2, :])
    legend.axis("off")
    legend.legend(handles, labels, loc="center", ncol=4, frameon=False)
    per_L = ", ".join(f"{int(ds.n_traj.sel(L=L).max()):,} at L = {int(L)}" for L in Ls)
    return laid_out(fig, f"Hybrid model, N = 2, d = {int(ds.attrs.get('fixed_d', 3))}, "
                    f"T = {float(ds.attrs.get('fixed_T', float('nan'))):g}\n"
                    f"trajectories a cell: {per_L}")


FIGURE = Figure.declared(
    globals(), "fig4", source="paper",
    description="hybrid model: dominant outcome in the (beta, eps) plane with eps_c(beta) "
                "(Prop. 1), at L = 100 and L = 1000",
    # every depth scale in Ls and check_L must put T (and check_T) on a whole number of layers
    schema={"betas": reals(0.0, 50.0), "epsilons": reals(0.0, 100.0),
            "Ls": all_of(integers(1, distinct=True, sort=True), whole_layers("T", "Ls")),
            "d": integer(2), "deep_n_traj": integer(1), "check_point": _beta_epsilon,
            "check_L": integers(1), "check_n_traj": integer(1),
            "check_T": all_of(real(0.0, strict_min=True), whole_layers("check_T", "check_L"))})
compute, cost = FIGURE.compute, FIGURE.cost
