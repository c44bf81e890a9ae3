r"""Two clusters, exactly: antipodal splits of N tokens against the two-cluster diffusion.

This page is the companion's, not the paper's.  It starts from exact two-point
configurations, :math:`m_1` tokens at :math:`y_1` and :math:`m_2` at :math:`y_2` with
:math:`1 + \langle y_1, y_2\rangle = v_0` (just inside the antipodal tolerance), and runs
them on the weighted two-cluster chain (``simulate(..., split=(m1, m2))``), exact for
such configurations (tests/test_clusters.py checks it against the full N-token map).
Two things are measured against the reduction's limit theory
(:mod:`stochastic_transformers.two_clusters`):

* the fraction still antipodal (:math:`1 + Z_t \le \mathrm{tol}`) against time, with
  the Kolmogorov solution of the reduced diffusion drawn over it: balanced splits stay
  when :math:`\beta > \beta_c(d)` (they are two tokens), unbalanced ones break up,
  at once with unnormalised attention and slowly with softmax at large :math:`\beta`;
* the depth at which unbalanced splits hover, the median of :math:`1 + Z` among the
  trajectories still antipodal at T, against :math:`(\alpha_1-\alpha_2)^2` on log-log
  axes, with the speed-measure median of :func:`two_clusters.hovering_depth`.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np

from .. import simulate, theory, two_clusters
from .._validation import ATTENTIONS, check_int
from ..config import ModelConfig, RunConfig
from ..stats import add_fraction_where
from ..sweep import summed_attrs
from .base import (cell_threads, cost_function, figure_sweep, integer, laid_out, log_time_grid,
                   real, reals, resolve_scale, sequence_of)

ID = "clusters"
CELL_VERSION = "1"
DESCRIPTION = "exact two-point splits of N tokens: persistence and hovering vs the two-cluster diffusion"

SPLITS = ("1,1", "2,2", "1,2", "1,3", "2,3")
SCALES = {
    "smoke": dict(splits=("1,1", "1,2", "1,3"), betas_softmax=(2.0, 4.0),
                  betas_unnormalized=(1.0,), n_traj=200, L=20, T=5.0, t_min=0.05, n_times=8,
                  one_plus_z0=1e-4, d=4, tol=1e-3, seed=0),
    "quick": dict(splits=SPLITS, betas_softmax=(1.0, 2.0, 3.0, 4.0, 5.0),
                  betas_unnormalized=(0.5, 1.0, 2.0), n_traj=2000, L=100, T=50.0,
                  t_min=0.01, n_times=30, one_plus_z0=1e-4, d=4, tol=1e-3, seed=0),
    "paper": dict(splits=SPLITS, betas_softmax=(1.0, 2.0, 3.0, 4.0, 5.0),
                  betas_unnormalized=(0.5, 1.0, 2.0), n_traj=20_000, L=100, T=50.0,
                  t_min=0.01, n_times=30, one_plus_z0=1e-4, d=4, tol=1e-3, seed=0),
}

#: Persistence agrees with the Kolmogorov prediction when every |z| is at most this
#: (z = observed minus predicted count over its binomial SE, at recorded times where the
#: prediction is strictly between 1e-3 and 1 - 1e-3).  Successive times of one cell are
#: strongly correlated; over about 40 cells a correct prediction exceeds 4 rarely (of
#: order 1%).  The limit neglects the O(1/sqrt L) discretisation of the chain.
PERSIST_Z_MAX = 4.0
#: Hovering depths agree with the speed-measure median when every ratio is within this
#: factor of 1 (the median of a few hundred hovering trajectories has a relative SE of
#: a few percent; the quasi-stationary law is the speed measure only approximately).
DEPTH_RATIO_TOL = 0.25
#: The slope of log depth against log (alpha1 - alpha2)^2 is fitted over the cells whose
#: scale is at most this: proportionality is a small-scale statement (near the tolerance
#: the depth is capped by it).
DEPTH_SLOPE_SCALE_MAX = 1e-4
#: Depths are compared only where at least this many trajectories are still antipodal at T.
DEPTH_MIN_COUNT = 50
#: "Early" time of the persistence curves: the page quotes the fraction still antipodal at
#: the first recorded time at or after it.
EARLY_TIME = 1.0
#: "Most" of a cell's trajectories have left the antipodal state at a time when more than
#: this share of them is no longer antipodal then.
MOST_SHARE = 0.5

# The chapter's statements about the reduced diffusion (section "Two clusters, exactly" of
# "Many tokens"), evaluated by :func:`theory_numbers` (no simulation).
#: The unbalanced splits and the softmax betas of the hovering statements.
THEORY_SPLITS = ((1, 2), (1, 3), (2, 3))
THEORY_BETAS = (1.0, 2.0, 3.0, 4.0, 5.0)
#: From this beta on the chapter says the hovering depth is set by (alpha1 - alpha2)^2.
THEORY_BETA_DEEP = 3.0
#: The large-beta limit of the balanced-like part is evaluated here (e^{-2 beta} ~ 4e-11).
THEORY_BETA_LARGE = 12.0
#: The grid on which the exponent of log(1 - Z) at +1 (:func:`two_clusters.boundaries`) is
#: compared with -(d - 1) a12(1), both attentions.
PLUS_ONE_GRID = {"d": (2, 3, 4, 6, 10, 20, 50), "m1": (1, 2, 3, 5, 10, 30, 99),
                 "m2": (1, 2, 5, 30, 99), "beta": (0.0, 0.5, 2.0, 8.0, 15.0)}


def _parse_split(text):
    m1, m2 = (int(p) for p in str(text).split(","))
    return m1, m2


def _split(name, text, knobs):
    """The check of one entry of ``splits``: 'm1,m2', two positive integers."""
    try:
        m1, m2 = _parse_split(text)
    except ValueError:
        raise ValueError(f"{name} must hold 'm1,m2' strings of two positive integers; got "
                         f"{text!r}") from None
    check_int(f"{name} (m1)", m1, 1)
    check_int(f"{name} (m2)", m2, 1)
    return text


#: The knobs beyond the shared ones (:data:`.base.KNOB_CHECKS`): the splits, the betas of
#: each attention (unnormalised attention grows like e^beta), one dimension, the first
#: recorded time in (0, T] and a start 1 + Z_0 inside the antipodal tolerance.
KNOB_SCHEMA = {
    "splits": sequence_of(_split),
    "betas_softmax": reals(0.0, 50.0),
    "betas_unnormalized": reals(0.0, 5.0),
    "d": integer(2),
    "t_min": real(0.0, lambda knobs: knobs["T"], strict_min=True),
    "one_plus_z0": real(0.0, lambda knobs: knobs["tol"], strict_min=True),
}


def cell(*, split, attention, beta_index, betas_softmax, betas_unnormalized, n_traj, L, T,
         times, one_plus_z0, d, tol, seed):
    """One (split, attention, beta): counts over time of trajectories still antipodal, and the
    median depth :math:`1 + Z` among them."""
    m1, m2 = _parse_split(split)
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


def compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides):
    """Run every (attention, split, beta) cell; return the dataset with the predictions.

    Dimensions ``attention``, ``split``, ``beta_index`` (the betas differ by attention:
    coordinate ``beta(attention, beta_index)``, NaN where an attention has fewer betas)
    and ``time``.
    """
    knobs = resolve_scale(SCALES, scale, overrides, KNOB_SCHEMA)
    times = [float(x) for x in log_time_grid(knobs["T"], knobs["L"], knobs["n_times"],
                                             t_min=knobs["t_min"])]
    n_beta = max(len(knobs["betas_softmax"]), len(knobs["betas_unnormalized"]))
    fixed = {k: knobs[k] for k in ("betas_softmax", "betas_unnormalized", "n_traj", "L", "T",
                                   "one_plus_z0", "d", "tol")}
    fixed["times"] = times
    parts = []
    import xarray as xr

    for att in ATTENTIONS:
        k = len(knobs[f"betas_{att}"])
        grid = {"attention": [att], "split": list(knobs["splits"]),
                "beta_index": list(range(k))}
        part = figure_sweep(__name__, scale, grid, part=att, fixed=fixed, seed=knobs["seed"],
                            scheduler=scheduler, cache_dir=cache_dir, progress=progress,
                            output_dims={"n_antipodal": ("time",), "median_depth": ("time",)},
                            output_coords={"time": times})
        parts.append(part.reindex(beta_index=range(n_beta)))
    ds = xr.concat(parts, dim="attention", combine_attrs="override")
    # the first part's attributes, but every count and time summed over the parts, and the
    # sweep named by all of them
    ds.attrs.update(summed_attrs(parts),
                    sweep_name=", ".join(str(p.attrs.get("sweep_name", "")) for p in parts),
                    grid_attention=json.dumps(list(ATTENTIONS)))
    return _finish(ds, scale)


def _finish(ds, scale):
    """Fractions, bands, the Kolmogorov predictions, z-scores and the hovering theory."""
    valid = ds.n_traj > 0   # the cells an attention with fewer betas does not have
    ds["n_antipodal"] = ds.n_antipodal.where(valid, 0)
    ds = add_fraction_where(ds, "n_antipodal", "n_traj", "p_antipodal", valid)
    d, tol, v0 = int(ds.attrs["fixed_d"]), float(ds.attrs["fixed_tol"]), float(ds.attrs["fixed_one_plus_z0"])
    times = ds.time.values
    pred = np.full(ds.p_antipodal.shape, np.nan)
    err = np.full(ds.p_antipodal.shape, np.nan)
    gap2 = np.full(ds.beta.shape, np.nan)
    depth_theory = np.full(ds.beta.shape, np.nan)
    dims = ds.p_antipodal.dims
    for ia, att in enumerate(ds.attention.values):
        for isp, split in enumerate(ds.split.values):
            m1, m2 = _parse_split(split)
            for ib in range(ds.beta_index.size):
                beta = float(ds.beta.values[ia, isp, ib])
                if not np.isfinite(beta):
                    continue
                p, e = two_clusters.antipodal_persistence(times, np.array([v0]), beta, d, m1, m2,
                                                          attention=str(att), tol=tol)
                idx = {"attention": ia, "split": isp, "beta_index": ib}
                sel = tuple(idx[dim] if dim in idx else slice(None) for dim in dims)
                pred[sel], err[sel] = p[:, 0], e[:, 0]
                gap2[ia, isp, ib] = two_clusters.hovering_scale(beta, m1, m2, attention=str(att))
                if m1 != m2 and gap2[ia, isp, ib] > 0:
                    depth_theory[ia, isp, ib] = two_clusters.hovering_depth(
                        beta, d, m1, m2, attention=str(att), tol=tol)[0]
    ds["p_predicted"] = (dims, pred, {"long_name": "Kolmogorov solution of the two-cluster diffusion"})
    ds["p_predicted_error"] = (dims, err)
    ds["hovering_scale"] = (ds.beta.dims, gap2, {"long_name": "(alpha1 - alpha2)^2 at Z = -1"})
    ds["depth_theory"] = (ds.beta.dims, depth_theory,
                          {"long_name": "median 1 + Z of the speed measure below -1 + tol"})
    se = np.sqrt(ds.n_traj * ds.p_predicted * (1 - ds.p_predicted))
    informative = (ds.p_predicted > 1e-3) & (ds.p_predicted < 1 - 1e-3)
    ds["persist_z"] = ((ds.n_antipodal - ds.n_traj * ds.p_predicted) / se).where(informative)
    ds.attrs.update(scale=scale, figure=ID, beta_c=float(theory.critical_beta(d)))
    return ds


#: Seconds of simulation per trajectory-layer (the unit of :func:`work`) of the two-cluster
#: chain, measured on the committed paper run (results/clusters_paper.nc: 305 s of cell
#: time for 4e9 trajectory-layers, on the project's 2-core machine).
SECONDS_PER_WORK = 7.6e-8


def work(knobs) -> float:
    """Trajectory-layers of a run with these knobs: n_traj * L * T per (split, attention, beta)."""
    cells = len(knobs["splits"]) * (len(knobs["betas_softmax"]) + len(knobs["betas_unnormalized"]))
    return float(cells * knobs["n_traj"] * knobs["L"] * knobs["T"])


cost = cost_function(__name__)


def summary(ds) -> dict:
    r"""Every number the page quotes, and the two verdicts.

    ``cells[(attention, split, beta)]`` has the fraction still antipodal at T, its
    prediction, the largest |z| over informative times, the depth at T and its theory.
    ``persist_agree``: every |z| at most :data:`PERSIST_Z_MAX`.  ``depth_agree``: every
    unbalanced cell with at least :data:`DEPTH_MIN_COUNT` hovering trajectories has
    simulated / theoretical depth within :data:`DEPTH_RATIO_TOL` of 1;
    ``depth_slope`` (``depth_slope_theory``) is the least-squares slope of the simulated
    (theoretical) log depth against log :math:`(\alpha_1-\alpha_2)^2` over those cells
    with scale at most :data:`DEPTH_SLOPE_SCALE_MAX` (1 if the depth is proportional).
    ``persist_max_abs_z_by_attention`` and ``persist_agree_by_attention`` split the
    persistence verdict by attention.
    ``unbalanced_leave``: at T every unbalanced split with unnormalised attention keeps
    at most 1% antipodal (their :math:`\alpha_1 - \alpha_2` is of order
    :math:`\cosh\beta`: they break up at once).  ``balanced_limit[(attention, split,
    beta)]`` is the two-token probability of ending antipodal from the start (the exit
    probability of the proof of Theorem 2, the paper's appendix C.3), the value a balanced
    split's curve tends to.  ``t_early`` is the first recorded time at
    or after :data:`EARLY_TIME` and each cell's ``p_early`` the fraction still antipodal
    then, ``left_early`` and ``left_final`` the fractions no longer antipodal at
    ``t_early`` and at T (one minus ``p_early`` and ``p_final``), and ``most_left_early``
    whether ``left_early`` exceeds :data:`MOST_SHARE`.  ``depth_ratio_min``,
    ``depth_ratio_max`` and ``depth_n_cells`` summarise
    ``depth_ratios`` (NaN and 0 when no cell qualifies); ``hover_largest_softmax`` has the
    range of :math:`(\alpha_1-\alpha_2)^2` over the unbalanced splits at the largest
    softmax beta.  ``L``, ``d``, ``tol``, ``one_plus_z0`` and ``n_splits`` are the run's
    settings.
    """
    times = ds.time.values
    i_early = min(int(np.searchsorted(times, EARLY_TIME - 1e-12)), times.size - 1)
    out = {"n_traj": int(ds.n_traj.max()), "T": float(times[-1]),
           "L": int(ds.attrs["fixed_L"]), "d": int(ds.attrs["fixed_d"]),
           "tol": float(ds.attrs["fixed_tol"]),
           "one_plus_z0": float(ds.attrs["fixed_one_plus_z0"]),
           "t_early": float(times[i_early]), "n_splits": int(ds.split.size),
           "beta_c": float(ds.attrs["beta_c"]), "cells": {}}
    zs, ratios, xs, ys, ys_theory = [], [], [], [], []
    zs_by = {str(a): [] for a in ds.attention.values}
    unbalanced_leave = True
    out["balanced_limit"] = {}
    for att in ds.attention.values:
        for split in ds.split.values:
            m1, m2 = _parse_split(split)
            for ib in ds.beta_index.values:
                sub = ds.sel(attention=att, split=split, beta_index=ib)
                beta = float(sub.beta)
                if not np.isfinite(beta):
                    continue
                z = np.abs(sub.persist_z.values)
                z = z[np.isfinite(z)]
                count_T = int(sub.n_antipodal.values[-1])
                row = {"p_final": float(sub.p_antipodal.values[-1]),
                       "p_early": float(sub.p_antipodal.values[i_early]),
                       "left_early": 1.0 - float(sub.p_antipodal.values[i_early]),
                       "left_final": 1.0 - float(sub.p_antipodal.values[-1]),
                       "most_left_early": bool(1.0 - float(sub.p_antipodal.values[i_early])
                                               > MOST_SHARE),
                       "predicted_final": float(sub.p_predicted.values[-1]),
                       "max_abs_z": float(z.max()) if z.size else float("nan"),
                       "n_antipodal_final": count_T,
                       "depth_final": float(sub.median_depth.values[-1]) if count_T else float("nan"),
                       "depth_theory": float(sub.depth_theory),
                       "hovering_scale": float(sub.hovering_scale)}
                out["cells"][(str(att), str(split), beta)] = row
                zs.extend(z.tolist())
                zs_by[str(att)].extend(z.tolist())
                if m1 == m2:
                    out["balanced_limit"][(str(att), str(split), beta)] = float(
                        theory.antipodal_probability(beta, int(ds.attrs["fixed_d"]),
                                                     z0=-1.0 + float(ds.attrs["fixed_one_plus_z0"])))
                if m1 != m2 and att == "unnormalized" and row["p_final"] > 0.01:
                    unbalanced_leave = False
                if (m1 != m2 and count_T >= DEPTH_MIN_COUNT and np.isfinite(row["depth_theory"])):
                    ratios.append(row["depth_final"] / row["depth_theory"])
                    if row["hovering_scale"] <= DEPTH_SLOPE_SCALE_MAX:
                        xs.append(math.log(row["hovering_scale"]))
                        ys.append(math.log(row["depth_final"]))
                        ys_theory.append(math.log(row["depth_theory"]))
    out["persist_max_abs_z"] = max(zs) if zs else float("nan")
    out["persist_agree"] = bool(zs) and max(zs) <= PERSIST_Z_MAX
    out["depth_ratios"] = ratios
    out["depth_ratio_min"] = min(ratios) if ratios else float("nan")
    out["depth_ratio_max"] = max(ratios) if ratios else float("nan")
    out["depth_n_cells"] = len(ratios)
    out["depth_agree"] = (all(abs(r - 1) <= DEPTH_RATIO_TOL for r in ratios) if ratios else None)
    out["depth_slope"] = float(np.polyfit(xs, ys, 1)[0]) if len(xs) >= 2 else float("nan")
    out["depth_slope_theory"] = (float(np.polyfit(xs, ys_theory, 1)[0]) if len(xs) >= 2
                                 else float("nan"))
    out["depth_slope_cells"] = len(xs)
    out["persist_max_abs_z_by_attention"] = {a: (max(v) if v else float("nan"))
                                             for a, v in zs_by.items()}
    out["persist_agree_by_attention"] = {a: (bool(v) and max(v) <= PERSIST_Z_MAX)
                                         for a, v in zs_by.items()}
    out["unbalanced_leave"] = unbalanced_leave
    soft = [k for k in out["cells"] if k[0] == "softmax"]
    if soft:
        b_top = max(k[2] for k in soft)
        scales = [out["cells"][k]["hovering_scale"] for k in soft
                  if k[2] == b_top and out["cells"][k]["hovering_scale"] > 0]
        out["hover_largest_softmax"] = {
            "beta": b_top, "scale_min": min(scales) if scales else float("nan"),
            "scale_max": max(scales) if scales else float("nan")}
    return out


def theory_numbers(d=4, tol=1e-3) -> dict:
    r"""The chapter's numbers about the reduced diffusion, computed (about a second).

    ``per_beta[beta]`` (softmax, the splits :data:`THEORY_SPLITS`, each beta of
    :data:`THEORY_BETAS`): the range of :math:`(\alpha_1-\alpha_2)^2`
    (``scale_min``, ``scale_max``, :func:`two_clusters.hovering_scale`), of the
    speed-measure median below the tolerance over it (``ratio_min``, ``ratio_max``,
    :func:`two_clusters.hovering_depth`), and of :math:`2|\lambda|/\ell`
    (``two_lam_over_ell`` the mean over the splits, ``_min`` and ``_max``;
    :func:`two_clusters.balanced_like_exponent`).  ``shallow`` and ``deep``: the same
    ranges over the betas below :data:`THEORY_BETA_DEEP` and from it on.  ``large_beta``: :math:`\lambda`,
    :math:`\ell` and :math:`2|\lambda|/\ell` at :data:`THEORY_BETA_LARGE` (split 1 vs 3:
    their common large-beta limit) and the median of the frozen law of
    :math:`Q = (1+Z)/(\alpha_1-\alpha_2)^2` (:func:`two_clusters.frozen_hovering_quantile`).
    ``plus_one``: the largest relative difference, over :data:`PLUS_ONE_GRID` and both
    attentions, between the exponent of :math:`\log(1 - Z)` at +1 that
    :func:`two_clusters.boundaries` computes and :math:`-(d-1)a_{12}(1)`
    (:math:`a_{12}(1) = 1` with softmax, :math:`e^{2\beta}` unnormalised), and the
    number of cases.
    """
    def ranges(betas):
        scales, ratios, rates = [], [], []
        for beta in betas:
            for m1, m2 in THEORY_SPLITS:
                scale = two_clusters.hovering_scale(beta, m1, m2)
                scales.append(scale)
                ratios.append(float(two_clusters.hovering_depth(beta, d, m1, m2, tol=tol)[0])
                              / scale)
                lam, ell = two_clusters.balanced_like_exponent(beta, d, m1, m2)
                rates.append(2.0 * abs(lam) / ell)
        return {"scale_min": min(scales), "scale_max": max(scales), "ratio_min": min(ratios),
                "ratio_max": max(ratios), "two_lam_over_ell": float(np.mean(rates)),
                "two_lam_over_ell_min": min(rates), "two_lam_over_ell_max": max(rates)}

    lam, ell = two_clusters.balanced_like_exponent(THEORY_BETA_LARGE, d, 1, 3)
    worst, cases = 0.0, 0
    for attention in ATTENTIONS:
        for dd in PLUS_ONE_GRID["d"]:
            for m1 in PLUS_ONE_GRID["m1"]:
                for m2 in PLUS_ONE_GRID["m2"]:
                    for beta in PLUS_ONE_GRID["beta"]:
                        got = two_clusters.boundaries(beta, dd, m1, m2, attention=attention)
                        a12 = 1.0 if attention == "softmax" else math.exp(2.0 * beta)
                        worst = max(worst, abs(got["single_exponent"] / (-(dd - 1) * a12) - 1.0))
                        cases += 1
    return {"d": int(d), "tol": float(tol),
            "per_beta": {float(b): ranges([b]) for b in THEORY_BETAS},
            "shallow": ranges([b for b in THEORY_BETAS if b < THEORY_BETA_DEEP]),
            "deep": {"beta_from": THEORY_BETA_DEEP,
                     **ranges([b for b in THEORY_BETAS if b >= THEORY_BETA_DEEP])},
            "large_beta": {"beta": THEORY_BETA_LARGE, "lam": lam, "ell": ell,
                           "two_lam_over_ell": 2.0 * abs(lam) / ell,
                           "median_q": float(two_clusters.frozen_hovering_quantile(d, lam, ell)[0])},
            "plus_one": {"max_rel_error": worst, "n_cases": cases,
                         "d_max": max(PLUS_ONE_GRID["d"]),
                         "m_max": max(PLUS_ONE_GRID["m1"] + PLUS_ONE_GRID["m2"]),
                         "beta_max": max(PLUS_ONE_GRID["beta"])}}


def plot(ds, panels=(("softmax", 2.0), ("softmax", 4.0), ("unnormalized", 1.0))):
    """Fraction still antipodal vs time for every split in three (attention, beta) panels,
    with the Kolmogorov predictions; and the hovering depth against (alpha1 - alpha2)^2."""
    import matplotlib.pyplot as plt

    from ..style import palette

    fig, axes = plt.subplots(2, 2, figsize=(11.5, 9))
    colours = dict(zip(ds.split.values, palette(ds.split.size)))
    t = ds.time.values
    shown = [p for p in panels if np.any(np.isclose(ds.beta.sel(attention=p[0]).values, p[1]))]
    for ax, (att, beta) in zip(axes.ravel()[:3], shown):
        for split in ds.split.values:
            betas = ds.beta.sel(attention=att, split=split).values
            ib = int(np.flatnonzero(np.isclose(betas, beta))[0])
            sub = ds.sel(attention=att, split=split, beta_index=ib)
            m1, m2 = _parse_split(split)
            label = f"{m1} vs {m2}" + (" (balanced)" if m1 == m2 else "")
            ax.fill_between(t, sub.p_antipodal_low, sub.p_antipodal_high,
                            color=colours[split], alpha=0.2, lw=0)
            ax.plot(t, sub.p_antipodal, "o", ms=3, color=colours[split], label=label)
            ax.plot(t, sub.p_predicted, "-", lw=1.3, color=colours[split])
        ax.set_xscale("log")
        ax.set_xlim(t[0], t[-1])
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(r"time $t$")
        ax.set_ylabel(r"fraction still antipodal ($1 + Z_t \leq$ tol)")
        ax.set_title(rf"{att} attention, $\beta$ = {beta:g}", fontsize=10)
    for ax in axes.ravel()[len(shown):3]:
        ax.set_visible(False)
    axes[0, 0].plot([], [], "-", color="0.3", label="limit: Kolmogorov solution")
    axes[0, 0].legend(fontsize=8, loc="lower left")
    ax = axes[1, 1]
    markers = {"softmax": "o", "unnormalized": "s"}
    for att in ds.attention.values:
        for split in ds.split.values:
            m1, m2 = _parse_split(split)
            if m1 == m2:
                continue
            sub = ds.sel(attention=att, split=split)
            enough = sub.n_antipodal.values[:, -1] >= DEPTH_MIN_COUNT
            x = sub.hovering_scale.values[enough]
            if x.size:
                ax.plot(x, sub.median_depth.values[enough, -1], markers[str(att)], ms=6,
                        color=colours[split], mfc="none" if att == "unnormalized" else None,
                        label=f"{m1} vs {m2}, {att}")
                ax.plot(x, sub.depth_theory.values[enough], "x", ms=7, color="0.15")
    ax.set_xscale("log")
    ax.set_yscale("log")
    lo, hi = ax.get_xlim()
    grid = np.geomspace(lo, hi, 10)
    ax.plot(grid, grid, ":", color="0.5", lw=1, label=r"depth $= (\alpha_1-\alpha_2)^2$")
    ax.plot([], [], "x", color="0.15", label="speed-measure median (theory)")
    ax.set_xlabel(r"$(\alpha_1 - \alpha_2)^2$ at $Z = -1$")
    ax.set_ylabel(r"median $1 + Z_T$ of the splits still antipodal")
    ax.set_title("hovering depth of unbalanced splits", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return laid_out(fig,
                    f"Two-point configurations from 1 + Z = {ds.attrs['fixed_one_plus_z0']:g}: "
                    f"d = {ds.attrs['fixed_d']}, L = {ds.attrs['fixed_L']}, "
                    f"{int(ds.n_traj.max()):,} trajectories per cell (shaded: Wilson 95%)",
                    fontsize=10)


def worst_cell(ds, attention):
    """``(split, beta, max |z|, time)`` of the cell of ``attention`` farthest from the
    prediction, and the recorded time where it is farthest."""
    best = None
    for split in ds.split.values:
        for ib in ds.beta_index.values:
            sub = ds.sel(attention=attention, split=split, beta_index=ib)
            z = np.abs(sub.persist_z.values)
            if np.any(np.isfinite(z)):
                k = int(np.nanargmax(z))
                if best is None or z[k] > best[2]:
                    best = (str(split), float(sub.beta), float(z[k]), float(ds.time.values[k]))
    return best


def refinement_check(ds, attention, split, beta, t_check, *, factors=(1, 4, 16)):
    r"""Rerun one cell up to ``t_check`` at ``L * factor`` layers per unit time.

    Returns ``{L: max |z|}`` over the recorded times up to ``t_check`` (the same grid,
    trajectory count and start as ``ds``; another seed for each L).  The limit
    prediction neglects the discretisation, whose step :math:`|A|\sigma\sqrt{d/L}`
    grows like :math:`e^\beta` with unnormalised attention: a distance that falls within
    :data:`PERSIST_Z_MAX` at the finest step belongs to the discretisation, not to the
    reduction.
    """
    m1, m2 = _parse_split(split)
    d, tol, v0 = int(ds.attrs["fixed_d"]), float(ds.attrs["fixed_tol"]), float(ds.attrs["fixed_one_plus_z0"])
    L0, n_traj = int(ds.attrs["fixed_L"]), int(ds.n_traj.max())
    times = ds.time.values[ds.time.values <= t_check + 1e-12]
    pred, _ = two_clusters.antipodal_persistence(times, np.array([v0]), beta, d, m1, m2,
                                                 attention=attention, tol=tol)
    pred = pred[:, 0]
    informative = (pred > 1e-3) & (pred < 1 - 1e-3)
    out = {}
    for factor in factors:
        L = L0 * int(factor)
        sim = simulate(ModelConfig(d=d, beta=beta, attention=attention),
                       RunConfig(n_tokens=m1 + m2, n_traj=n_traj, L=L, T=float(times[-1]),
                                 split=(m1, m2), z0=-1.0 + v0, times=times, tol=tol,
                                 seed=int(ds.attrs.get("sweep_seed", 0)) + factor))
        frac = (sim.one_plus_overlap_t.values <= tol).mean(axis=0)
        z = (frac - pred) / np.sqrt(pred * (1 - pred) / n_traj)
        out[L] = float(np.abs(z[informative]).max()) if informative.any() else float("nan")
    return out


def explain_worst(ds, attention) -> dict:
    """The farthest cell of ``attention`` and its :func:`refinement_check`, rerun to the
    first recorded time at or after both the worst miss and t = 1; ``explained`` is
    :func:`discretisation_explains` of the check."""
    split, beta, z, t_worst = worst_cell(ds, attention)
    t_check = float(ds.time.values[ds.time.values >= max(t_worst, 1.0)][0])
    check = refinement_check(ds, attention, split, beta, t_check)
    return {"split": split, "beta": beta, "z": z, "t_worst": t_worst, "t_check": t_check,
            "check": check, "explained": discretisation_explains(check)}


def discretisation_explains(check) -> bool:
    """Whether a :func:`refinement_check` puts the cell within :data:`PERSIST_Z_MAX` at its
    finest step."""
    return bool(list(check.values())[-1] <= PERSIST_Z_MAX)
