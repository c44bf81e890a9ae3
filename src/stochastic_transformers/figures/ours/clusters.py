r"""Two clusters, exactly (ours, not the paper's): antipodal splits of N tokens against the
two-cluster diffusion of :mod:`stochastic_transformers.two_clusters`.

Exact two-point configurations (:math:`m_1` tokens at :math:`y_1`, :math:`m_2` at :math:`y_2`,
:math:`1 + \langle y_1, y_2\rangle = v_0` inside the tolerance) run on the weighted two-cluster
chain (``simulate(..., split=(m1, m2))``, exact for them).  Measured against the limit: the
fraction still antipodal over time (the Kolmogorov solution of the reduced diffusion) and the
median depth :math:`1 + Z_T` of the unbalanced splits still antipodal (the speed-measure median
of :func:`two_clusters.hovering_depth`).  The limit neglects the discretisation, whose step
:math:`|A|\sigma\sqrt{d/L}` grows like :math:`e^\beta` with unnormalised attention: where an
attention misses, :func:`explain_worst` reruns its farthest cell at finer steps.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np

from ... import simulate, theory, two_clusters
from ..._validation import ATTENTIONS
from ...config import ModelConfig, RunConfig
from ...stats import add_fraction_where, binomial_z, log_log_slope
from ...style import palette
from ...sweep import summed_attrs
from ..base import cell_threads, laid_out, log_time_grid
from ..knobs import integer, real, reals, sequence_of
from ..spec import Figure
from ..words import listed, markdown_table

SPLITS = ("1,1", "2,2", "1,2", "1,3", "2,3")
#: Smallest starting gap 1 + Z of the hovering pair: below it the Kolmogorov solver's grid
#: in the log-gap grows until a cell takes minutes (1e-150: 45 s at the smoke scale).
ONE_PLUS_Z0_MIN = 1e-12
_COMMON = dict(t_min=0.01, n_times=30, one_plus_z0=1e-4, d=4, tol=1e-3, seed=0)
_FULL = dict(_COMMON, splits=SPLITS, betas_softmax=(1.0, 2.0, 3.0, 4.0, 5.0),
             betas_unnormalized=(0.5, 1.0, 2.0), L=100, T=50.0)
SCALES = {
    "smoke": dict(_COMMON, splits=("1,1", "1,2", "1,3"), betas_softmax=(2.0, 4.0),
                  betas_unnormalized=(1.0,), n_traj=200, L=20, T=5.0, t_min=0.05, n_times=8),
    "quick": dict(_FULL, n_traj=2000), "paper": dict(_FULL, n_traj=20_000)}

#: Persistence agrees with the Kolmogorov prediction when every |z| is at most this (z:
#: observed minus predicted count over its binomial SE, where the prediction is strictly
#: between 1e-3 and 1 - 1e-3).  Successive times of a cell are strongly correlated; over
#: about 40 cells a correct prediction exceeds 4 rarely (of order 1%).
PERSIST_Z_MAX = 4.0
#: Hovering depths agree with the speed-measure median when every ratio is within this factor
#: of 1 (the median of a few hundred trajectories has a relative SE of a few percent; the
#: quasi-stationary law is the speed measure only approximately).
DEPTH_RATIO_TOL = 0.25
#: The log-log slope of the depth is fitted over the cells whose (alpha1 - alpha2)^2 is at
#: most this: proportionality is a small-scale statement (the tolerance caps the depth).
DEPTH_SLOPE_SCALE_MAX = 1e-4
#: Depths are compared only where at least this many trajectories are still antipodal at T.
DEPTH_MIN_COUNT = 50
#: The page quotes the fraction still antipodal at the first recorded time at or after this.
EARLY_TIME = 1.0
#: "Most" of a cell's trajectories have left at a time when more than this share has.
MOST_SHARE = 0.5


def parse_split(text):
    """``(m1, m2)`` of a split written 'm1,m2'."""
    m1, m2 = (int(p) for p in str(text).split(","))
    return m1, m2


def _balanced(split) -> bool:
    return len(set(parse_split(split))) == 1


def _split(name, text, knobs):
    """The check of one entry of ``splits``: 'm1,m2', two positive integers."""
    try:
        m1, m2 = parse_split(text)
    except ValueError:
        m1 = m2 = 0
    if min(m1, m2) < 1:
        raise ValueError(f"{name} must hold 'm1,m2' strings of two positive integers; got {text!r}")
    return text


def cell(*, split, attention, beta_index, betas_softmax, betas_unnormalized, n_traj, L, T,
         times, one_plus_z0, d, tol, seed):
    """One (split, attention, beta): counts over time of trajectories still antipodal, and the
    median depth :math:`1 + Z` among them."""
    m1, m2 = parse_split(split)
    betas = betas_softmax if attention == "softmax" else betas_unnormalized
    beta = float(betas[beta_index])
    cpu0 = time.process_time()
    ds = simulate(ModelConfig(d=d, beta=beta, attention=attention),
                  RunConfig(n_tokens=m1 + m2, n_traj=n_traj, L=L, T=T, seed=seed, split=(m1, m2),
                            z0=-1.0 + one_plus_z0, times=times, tol=tol, n_threads=cell_threads()))
    cpu = time.process_time() - cpu0
    depth = ds.one_plus_overlap_t.values                # (trajectory, time)
    anti = depth <= tol
    log_depth = np.where(anti, np.log(np.maximum(depth, 1e-300)), np.nan)
    counts = anti.sum(axis=0)
    median = np.zeros(counts.shape)
    for k in np.flatnonzero(counts):
        median[k] = float(np.exp(np.nanmedian(log_depth[:, k])))
    return {"n_antipodal": counts, "median_depth": median, "n_traj": n_traj, "beta": beta,
            "simulate_cpu_s": float(cpu)}


def run(knobs, sweeps):
    """One sweep per attention (parts ``softmax``, ``unnormalized``: their betas differ), joined
    along ``attention`` (coordinate ``beta(attention, split, beta_index)``, NaN where an
    attention has fewer betas); then :func:`finish`."""
    import xarray as xr

    times = [float(x) for x in log_time_grid(knobs["T"], knobs["L"], knobs["n_times"],
                                             t_min=knobs["t_min"])]
    n_beta = max(len(knobs["betas_softmax"]), len(knobs["betas_unnormalized"]))
    fixed = {**{k: knobs[k] for k in ("betas_softmax", "betas_unnormalized", "n_traj", "L", "T",
                                      "one_plus_z0", "d", "tol")}, "times": times}
    parts = [sweeps({"attention": [att], "split": list(knobs["splits"]),
                     "beta_index": list(range(len(knobs[f"betas_{att}"])))},
                    part=att, fixed=fixed, seed=knobs["seed"],
                    output_dims={"n_antipodal": ("time",), "median_depth": ("time",)},
                    output_coords={"time": times}).reindex(beta_index=range(n_beta))
             for att in ATTENTIONS]
    ds = xr.concat(parts, dim="attention", combine_attrs="override")
    # the first part's attributes, with every count and time summed over the parts
    ds.attrs.update(summed_attrs(parts),
                    sweep_name=", ".join(str(p.attrs.get("sweep_name", "")) for p in parts),
                    grid_attention=json.dumps(list(ATTENTIONS)))
    return finish(ds)


def finish(ds):
    """Fractions still antipodal with their Wilson bands, the reduction's predictions
    (:func:`two_clusters.split_predictions`: ``p_predicted`` and its error,
    ``hovering_scale``, ``depth_theory``) and ``persist_z`` (:func:`stats.binomial_z`)."""
    valid = ds.n_traj > 0   # the cells an attention with fewer betas does not have
    ds["n_antipodal"] = ds.n_antipodal.where(valid, 0)
    ds = add_fraction_where(ds, "n_antipodal", "n_traj", "p_antipodal", valid)
    d, tol = int(ds.attrs["fixed_d"]), float(ds.attrs["fixed_tol"])
    v0 = float(ds.attrs["fixed_one_plus_z0"])
    dims = ds.p_antipodal.dims   # (attention, split, beta_index, time)
    pred, err = np.full((2, *ds.p_antipodal.shape), np.nan)
    scale, depth = np.full((2, *ds.beta.shape), np.nan)
    for cell_index in np.ndindex(ds.beta.shape):   # (attention, split, beta_index)
        beta = float(ds.beta.values[cell_index])
        if np.isfinite(beta):
            ia, isp, _ = cell_index
            pred[cell_index], err[cell_index], scale[cell_index], depth[cell_index] = (
                two_clusters.split_predictions(ds.time.values, v0, beta, d,
                                               *parse_split(ds.split.values[isp]),
                                               attention=str(ds.attention.values[ia]), tol=tol))
    ds["p_predicted"] = (dims, pred, {"long_name": "Kolmogorov solution of the two-cluster diffusion"})
    ds["p_predicted_error"] = (dims, err)
    ds["hovering_scale"] = (ds.beta.dims, scale, {"long_name": "(alpha1 - alpha2)^2 at Z = -1"})
    ds["depth_theory"] = (ds.beta.dims, depth,
                          {"long_name": "median 1 + Z of the speed measure below -1 + tol"})
    ds["persist_z"] = binomial_z(ds.n_antipodal, ds.n_traj, ds.p_predicted)
    ds.attrs.update(beta_c=float(theory.critical_beta(d)))
    return ds


#: Seconds of simulation per trajectory-layer of the two-cluster chain, measured on the
#: committed paper run (results/clusters_paper.nc: 305 s of cell time for 4e9).
SECONDS_PER_WORK = 7.6e-8


def work(knobs) -> float:
    """Trajectory-layers of a run with these knobs: n_traj * L * T per (split, attention, beta)."""
    cells = len(knobs["splits"]) * (len(knobs["betas_softmax"]) + len(knobs["betas_unnormalized"]))
    return float(cells * knobs["n_traj"] * knobs["L"] * knobs["T"])


def _cells(ds, i_early) -> dict:
    """``{(attention, split, beta): row}`` over the cells the run has, in the grid's order."""
    cells = {}
    for ia, isp, ib in np.ndindex(ds.beta.shape):   # (attention, split, beta_index)
        sub = ds.isel(attention=ia, split=isp, beta_index=ib)
        if not np.isfinite(float(sub.beta)):
            continue
        z = np.abs(sub.persist_z.values)
        z = z[np.isfinite(z)]
        count_T = int(sub.n_antipodal.values[-1])
        p_early, p_final = float(sub.p_antipodal.values[i_early]), float(sub.p_antipodal.values[-1])
        cells[(str(sub.attention.values), str(sub.split.values), float(sub.beta))] = {
            "p_final": p_final, "p_early": p_early, "left_early": 1.0 - p_early,
            "left_final": 1.0 - p_final, "most_left_early": bool(1.0 - p_early > MOST_SHARE),
            "predicted_final": float(sub.p_predicted.values[-1]),
            "max_abs_z": float(z.max()) if z.size else float("nan"),
            "n_antipodal_final": count_T,
            "depth_final": float(sub.median_depth.values[-1]) if count_T else float("nan"),
            "depth_theory": float(sub.depth_theory), "hovering_scale": float(sub.hovering_scale)}
    return cells


def _depths(cells) -> dict:
    """Over the unbalanced cells with enough hovering trajectories: the ratios of simulated to
    theoretical depth, all within :data:`DEPTH_RATIO_TOL` of 1 or not, and the log-log slopes
    of both against :math:`(\alpha_1-\alpha_2)^2` at small scale (1 if proportional)."""
    rows = [row for (_, split, _), row in cells.items() if not _balanced(split)
            and row["n_antipodal_final"] >= DEPTH_MIN_COUNT and np.isfinite(row["depth_theory"])]
    ratios = [row["depth_final"] / row["depth_theory"] for row in rows]
    small = [row for row in rows if row["hovering_scale"] <= DEPTH_SLOPE_SCALE_MAX]

    def slope(key):
        if len(small) < 2:
            return float("nan")
        return log_log_slope([row["hovering_scale"] for row in small],
                             [row[key] for row in small])[0]

    return {"depth_ratios": ratios, "depth_n_cells": len(ratios),
            "depth_agree": (all(abs(r - 1) <= DEPTH_RATIO_TOL for r in ratios) if ratios else None),
            "depth_slope": slope("depth_final"), "depth_slope_theory": slope("depth_theory")}


def summary(ds) -> dict:
    r"""Every number the page quotes: per cell (:func:`_cells`) the fraction still antipodal
    at T and at ``t_early`` (the first time at or after :data:`EARLY_TIME`), its prediction,
    the largest |z| and the depth; the verdicts ``persist_agree`` (every |z| at most
    :data:`PERSIST_Z_MAX`, also by attention), ``depth_agree`` (:func:`_depths`) and
    ``unbalanced_leave`` (every unbalanced split with unnormalised attention keeps at most 1%
    antipodal at T); ``balanced_limit``, the two-token probability of ending antipodal (the
    exit probability of the proof of Theorem 2) that a balanced split tends to; and the range
    of :math:`(\alpha_1-\alpha_2)^2` at the largest softmax beta."""
    times = ds.time.values
    i_early = min(int(np.searchsorted(times, EARLY_TIME - 1e-12)), times.size - 1)
    d, v0 = int(ds.attrs["fixed_d"]), float(ds.attrs["fixed_one_plus_z0"])
    cells = _cells(ds, i_early)
    unbalanced = [k for k in cells if not _balanced(k[1])]
    z = np.abs(ds.persist_z)
    z_by = {str(a): float(z.sel(attention=a).max()) for a in ds.attention.values}
    out = {"n_traj": int(ds.n_traj.max()), "T": float(times[-1]),
           "L": int(ds.attrs["fixed_L"]), "d": d, "tol": float(ds.attrs["fixed_tol"]),
           "one_plus_z0": v0, "t_early": float(times[i_early]), "n_splits": int(ds.split.size),
           "beta_c": float(ds.attrs["beta_c"]), "cells": cells,
           "balanced_limit": {k: float(theory.antipodal_probability(k[2], d, z0=-1.0 + v0))
                              for k in cells if k not in unbalanced},
           "persist_max_abs_z": float(z.max()), "persist_agree": float(z.max()) <= PERSIST_Z_MAX,
           "persist_max_abs_z_by_attention": z_by,
           "persist_agree_by_attention": {a: v <= PERSIST_Z_MAX for a, v in z_by.items()},
           "persist_n_beyond_by_attention": {a: sum(r["max_abs_z"] > PERSIST_Z_MAX for k, r in
                                                    cells.items() if k[0] == a) for a in z_by},
           **_depths(cells),
           "unbalanced_leave": not any(cells[k]["p_final"] > 0.01 for k in unbalanced
                                       if k[0] == "unnormalized")}
    top = max((k[2] for k in cells if k[0] == "softmax"), default=None)
    if top is not None:
        scales = [row["hovering_scale"] for k, row in cells.items()
                  if k[0] == "softmax" and k[2] == top and row["hovering_scale"] > 0]
        out["hover_largest_softmax"] = {"beta": top, "scale_min": min(scales, default=math.nan),
                                        "scale_max": max(scales, default=math.nan)}
    return out


def explain_worst(ds, attention, factors=(1, 4, 16)) -> dict:
    """The cell of ``attention`` farthest from the prediction (the first such in grid order)
    rerun by :func:`cell` to the first recorded time at or after both its worst miss and
    t = 1, at ``L * factor`` layers per unit time (the same trajectories and start, another
    seed each): ``check`` maps L to the largest |z| up to then; ``explained``: the finest
    step puts the cell within :data:`PERSIST_Z_MAX`, so the miss is the discretisation's."""
    z = np.abs(ds.persist_z.sel(attention=attention).transpose("split", "beta_index", "time"))
    isp, ib, k = np.unravel_index(int(np.nanargmax(z.values)), z.shape)
    split, beta = str(ds.split.values[isp]), float(ds.beta.sel(attention=attention).values[isp, ib])
    t_worst = float(ds.time.values[k])
    t_check = float(ds.time.values[ds.time.values >= max(t_worst, 1.0)][0])
    d, tol, n_traj = int(ds.attrs["fixed_d"]), float(ds.attrs["fixed_tol"]), int(ds.n_traj.max())
    v0, times = float(ds.attrs["fixed_one_plus_z0"]), ds.time.values[ds.time.values <= t_check + 1e-12]
    pred, _ = two_clusters.antipodal_persistence(times, np.array([v0]), beta, d, *parse_split(split),
                                                 attention=attention, tol=tol)
    check = {}
    for factor in factors:
        L = int(ds.attrs["fixed_L"]) * int(factor)
        counts = cell(split=split, attention=attention, beta_index=0, betas_softmax=(beta,),
                      betas_unnormalized=(beta,), n_traj=n_traj, L=L, T=float(times[-1]),
                      times=times, one_plus_z0=v0, d=d, tol=tol,
                      seed=int(ds.attrs.get("sweep_seed", 0)) + factor)["n_antipodal"]
        zf = np.abs(binomial_z(counts, n_traj, pred[:, 0]))
        check[L] = float(np.nanmax(zf)) if np.any(np.isfinite(zf)) else float("nan")
    return {"split": split, "beta": beta, "z": float(z.values[isp, ib, k]), "t_worst": t_worst,
            "t_check": t_check, "check": check, "explained": bool(check[L] <= PERSIST_Z_MAX)}


def refine_misses(ds, stats) -> dict:
    """``{attention: explain_worst(ds, attention)}`` for every attention beyond the bound."""
    return {att: explain_worst(ds, att)
            for att, ok in stats["persist_agree_by_attention"].items() if not ok}


def phrases(stats, misses) -> dict[str, str]:
    """The page's Markdown: ``verdict`` on the reduction (persistence per attention, where
    ``misses`` are :func:`refine_misses`; depth) and ``table`` (per cell the fraction still
    antipodal at T, its prediction, the largest |z|, a balanced split's two-token limit)."""
    parts, ok_names, bound = [], [], f"{PERSIST_Z_MAX:g} standard errors"
    for att, ok in stats["persist_agree_by_attention"].items():
        name, n = att.replace("ized", "ised"), stats["persist_n_beyond_by_attention"][att]
        if ok:
            ok_names.append(name)
            parts.append(f"with {name} attention every split, $\\beta$ and recorded time is within "
                         f"{bound} of the limit (largest |z| "
                         f"{stats['persist_max_abs_z_by_attention'][att]:.1f})")
            continue
        m = misses[att]
        parts.append(f"with {name} attention the simulation at $L$ = {stats['L']} is more than "
                     f"{bound} from the limit in {n} cells (worst |z| = {m['z']:.1f}, for "
                     f"{m['split'].replace(',', ' vs ')} at $\\beta$ = {m['beta']:g}); rerun to "
                     f"$t$ = {m['t_check']:g} at $L$ = {listed(m['check'], ',')} (another seed "
                     f"each) the worst has |z| = {listed(m['check'].values(), '.1f')}, so " + (
                         "it is the discretisation's, not the reduction's" if m["explained"] else
                         "we cannot explain it") + (f"; the {n - 1} other cells beyond that "
                                                    "bound were not rerun" if n > 1 else ""))
    if (depth := stats["depth_agree"]) is not None:
        parts.append(f"the hovering depths are {'' if depth else 'not all '}within "
                     f"{100 * DEPTH_RATIO_TOL:.0f}% of the speed-measure median")
    explained = [m["explained"] for m in misses.values()]   # the attentions beyond the bound
    word = ("Confirmed" if not explained and depth is not False else "Confirmed for "
            + " and ".join(ok_names) if ok_names and all(explained) and depth is not False else
            "Partly confirmed" if ok_names or any(explained) or depth else "Not confirmed")
    rows = [[att, split.replace(",", " vs "), f"{beta:g}", f"{100 * row['p_final']:.1f}%",
             f"{100 * row['predicted_final']:.1f}%",
             f"{row['max_abs_z']:.1f}" if np.isfinite(row["max_abs_z"]) else None,
             None if (lim := stats["balanced_limit"].get((att, split, beta))) is None
             else f"{100 * lim:.1f}%"] for (att, split, beta), row in stats["cells"].items()]
    table = markdown_table(["attention", "split", "$\\beta$", "still antipodal at $T$",
                            "prediction", "largest \\|z\\|", "two-token limit"], rows)
    return {"verdict": f"**{word}:** " + "; ".join(parts) + ".", "table": table}


def plot(ds, panels=(("softmax", 2.0), ("softmax", 4.0), ("unnormalized", 1.0))):
    """Fraction still antipodal vs time for every split in three (attention, beta) panels,
    with the Kolmogorov predictions; and the hovering depth against (alpha1 - alpha2)^2."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(8.0, 6.8))
    colours = dict(zip(ds.split.values, palette(ds.split.size)))
    shown = [p for p in panels if np.any(np.isclose(ds.beta.sel(attention=p[0]).values, p[1]))]
    t = ds.time.values
    for i, (ax, (att, beta)) in enumerate(zip(axes.ravel()[:3], shown)):
        for split, colour in colours.items():
            betas = ds.beta.sel(attention=att, split=split).values
            sub = ds.sel(attention=att, split=split,
                         beta_index=int(np.flatnonzero(np.isclose(betas, beta))[0]))
            ax.fill_between(t, sub.p_antipodal_low, sub.p_antipodal_high, color=colour,
                            alpha=0.2, lw=0)
            ax.plot(t, sub.p_antipodal, "o", ms=3, color=colour, label=split.replace(",", " vs "))
            ax.plot(t, sub.p_predicted, "-", lw=1.3, color=colour)
        ax.set(xscale="log", xlim=(t[0], t[-1]), ylim=(-0.02, 1.02), xlabel=r"time $t$",
               ylabel="fraction still antipodal" if i % 2 == 0 else "",
               title=rf"{att}, $\beta$ = {beta:g}")
    for ax in axes.ravel()[len(shown):3]:
        ax.set_visible(False)
    axes[0, 1].plot([], [], "-", color="0.3", label="reduction (limit)")
    axes[0, 1].legend(loc="lower left", ncol=2)
    # the median depth at T of the unbalanced splits against (alpha1 - alpha2)^2, and theory
    ax = axes[1, 1]
    for att, marker in zip(ds.attention.values, ("o", "s")):
        for split in [s for s in ds.split.values if not _balanced(s)]:
            sub = ds.sel(attention=att, split=split)
            enough = sub.n_antipodal.values[:, -1] >= DEPTH_MIN_COUNT
            x = sub.hovering_scale.values[enough]
            if x.size:
                ax.plot(x, sub.median_depth.values[enough, -1], marker, ms=6,
                        color=colours[split], mfc="none" if att == "unnormalized" else None,
                        label=split.replace(",", " vs ") + ("" if att == "softmax" else f", {att}"))
                ax.plot(x, sub.depth_theory.values[enough], "x", ms=7, color="0.15")
    ax.set(xscale="log", yscale="log")
    grid = np.geomspace(*ax.get_xlim(), 10)
    ax.plot(grid, grid, ":", color="0.5", lw=1, label=r"$1 + Z_T = (\alpha_1-\alpha_2)^2$")
    ax.plot([], [], "x", color="0.15", label="theory")
    ax.set(xlabel=r"$(\alpha_1 - \alpha_2)^2$ at $Z = -1$", ylabel=r"median $1 + Z_T$",
           title="hovering depth, unbalanced splits")
    ax.legend(loc="upper left")
    return laid_out(fig, f"From 1 + Z = {ds.attrs['fixed_one_plus_z0']:g}: d = "
                    f"{ds.attrs['fixed_d']}, L = {ds.attrs['fixed_L']}, "
                    f"{int(ds.n_traj.max()):,} trajectories per cell")


FIGURE = Figure.declared(
    globals(), "clusters", source="ours",
    description="exact two-point splits of N tokens: persistence and hovering vs the "
                "two-cluster diffusion",
    # the splits, the betas of each attention (unnormalised attention grows like e^beta), one
    # dimension, the first recorded time in (0, T] and a start 1 + Z_0 inside the tolerance
    schema={"splits": sequence_of(_split, distinct=True), "betas_softmax": reals(0.0, 50.0),
            "betas_unnormalized": reals(0.0, 5.0), "d": integer(2),
            "t_min": real(0.0, lambda knobs: knobs["T"], strict_min=True),
            "one_plus_z0": real(ONE_PLUS_Z0_MIN, lambda knobs: knobs["tol"])})
compute, cost = FIGURE.compute, FIGURE.cost
