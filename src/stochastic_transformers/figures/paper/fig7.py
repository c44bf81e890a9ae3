r"""Figure 7: antipodal structure, once formed, persists.

Same model as Figure 6 (N tokens i.i.d. uniform on :math:`S^{d-1}`, d = 4, i.i.d.
Gaussian value matrices shared by all tokens, :math:`LT` layers), at a few large
:math:`\beta`.  Every trajectory's Gram matrix is recorded on a logarithmic grid of
times in one run (``simulate(..., times=...)``), and at each recorded time we count the
trajectories with at least one antipodal pair
(:math:`\langle x_i, x_j\rangle \le -1 + \mathrm{tol}`).  The paper (section 6, paragraph
"Multiple Tokens Case") reports that at large :math:`\beta` clustering happens well before
T = 500 and that the fraction with antipodal structure then stays put.

A constant *fraction* could hide trajectories that trade places (some lose their
antipodal pair while others gain one), so each cell also follows every trajectory:

* ``n_lost(time)``: had an antipodal pair at that time but not at T;
* ``n_gained(time)``: had none at that time but one at T;
* ``n_unsettled(time)``: the status at some recorded time at or after ``time`` differs
  from the status at T (a survival curve: once it reaches zero every trajectory has
  kept its final status ever since);
* ``n_split(time, minority)``: clustered into two antipodal groups, the smaller of
  which has ``minority`` tokens (1 to N // 2).  With equal groups and softmax attention
  every token receives exactly the attention of a two-token antipodal pair; unequal
  groups have no two-token counterpart, and they need not be equally long-lived.

Attention is softmax by default, for the reason given in Figure 6.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import simulate, theory, two_clusters
from ..classification import has_antipodal_pair, is_clustered, n_clusters, together
from ..config import ModelConfig, RunConfig
from ..stats import add_fraction_where, count_z
from .base import (add_outcome_fractions, cell_threads, cost_function, figure_sweep, integer,
                   laid_out, log_time_grid, real, reals, resolve_scale, trajectory_layer_work)

ID = "fig7"
#: Version of this module's cell outputs; bump it whenever :func:`cell` returns different
#: outputs or numbers, so that cached cells of the old version are not reused.
CELL_VERSION = "2"  # 2: the reduced path; persistence of merged splits and its prediction
DESCRIPTION = "persistence: fraction of trajectories with an antipodal pair vs time, large beta"

SCALES = {
    "smoke": dict(betas=(4.0, 8.0), n_tokens=4, n_traj=40, L=10, T=20.0, t_min=0.1, n_times=8,
                  d=4, attention="softmax", tol=1e-3, seed=0),
    "quick": dict(betas=(4.0, 6.0, 8.0), n_tokens=4, n_traj=300, L=100, T=500.0, t_min=0.1,
                  n_times=40, d=4, attention="softmax", tol=1e-3, seed=0),
    "paper": dict(betas=(4.0, 6.0, 8.0), n_tokens=4, n_traj=10_000, L=100, T=500.0, t_min=0.1,
                  n_times=40, d=4, attention="softmax", tol=1e-3, seed=0),
}
#: The knobs beyond the shared ones (:data:`.base.KNOB_CHECKS`): one token count and one
#: dimension, distinct betas, and the first recorded time t_min in (0, T].
KNOB_SCHEMA = {"betas": reals(0.0, distinct=True), "n_tokens": integer(2), "d": integer(2),
               "t_min": real(0.0, lambda knobs: knobs["T"], strict_min=True)}


def cell(*, beta, n_tokens, n_traj, L, T, times, d, attention, tol, seed):
    """One beta: counts over time of ``n_traj`` trajectories (antipodal pair, clustered, ...)."""
    cpu0 = time.process_time()
    ds = simulate(ModelConfig(d=d, beta=beta, attention=attention),
                  RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=T, seed=seed, tol=tol,
                            times=times, n_threads=cell_threads()))
    cpu = time.process_time() - cpu0
    g = ds.gram_t.values                         # (trajectory, time, N, N)
    anti = has_antipodal_pair(g, tol)            # (trajectory, time)
    final = anti[:, -1:]
    differs = anti != final
    # unsettled at t: differs at some recorded time s >= t (reverse cumulative "or")
    unsettled = np.logical_or.accumulate(differs[:, ::-1], axis=1)[:, ::-1]
    clustered = is_clustered(g, tol)
    two_groups = clustered & anti                # clustered with an antipodal pair
    k = together(g, tol)[..., 0, :].sum(axis=-1)  # size of token 0's group
    minority = np.minimum(k, n_tokens - k)
    n_split = np.stack([(two_groups & (minority == m)).sum(axis=0)
                        for m in range(1, n_tokens // 2 + 1)], axis=-1)
    merged = _merged_splits(ds, anti, n_tokens, beta, d, attention, tol, np.asarray(times))
    return {"n_antipodal_pair": anti.sum(axis=0), "n_clustered": clustered.sum(axis=0),
            "n_split": n_split, **merged,
            "sum_n_clusters": n_clusters(g, tol).sum(axis=0),
            "n_lost": (anti & ~final).sum(axis=0), "n_gained": (~anti & final).sum(axis=0),
            "n_unsettled": unsettled.sum(axis=0), "n_traj": n_traj,
            "simulate_s": float(ds.attrs["wall_time_s"]), "simulate_cpu_s": float(cpu)}


def _merged_splits(ds, anti, n_tokens, beta, d, attention, tol, times):
    """Per recorded time and split: how many trajectories have merged into it, how many of
    those have an antipodal pair, and the reduction's limit prediction for that number.

    A trajectory that merged into the split with minority m at time :math:`t_m`, with
    overlap :math:`1 + Z = v_m`, counts from :math:`t_m` on; its predicted probability of
    being antipodal at t is :math:`u(t - t_m, v_m)`, the Kolmogorov solution of the
    two-cluster diffusion (:func:`stochastic_transformers.two_clusters.persistence_of_merged`).
    """
    L = ds.attrs["L"]
    m1 = ds.merge_m1.values
    minority = np.minimum(m1, n_tokens - m1)
    t_merge = ds.merge_layer.values / L
    shape = (times.size, n_tokens // 2)
    out = {k: np.zeros(shape) for k in ("n_merged_split", "n_antipodal_merged_split",
                                         "predicted_merged_split", "predicted_var_merged_split")}
    for m in range(1, n_tokens // 2 + 1):
        rows = np.flatnonzero((ds.merge_points.values == 2) & (minority == m))
        if rows.size == 0:
            continue
        elapsed = times[None, :] - t_merge[rows, None]            # (n, time)
        started = elapsed >= 0
        u = two_clusters.persistence_of_merged(
            np.maximum(elapsed, 0.0), ds.merge_one_plus_overlap.values[rows], beta, d, m,
            n_tokens - m, attention=attention, tol=tol) * started
        out["n_merged_split"][:, m - 1] = started.sum(axis=0)
        out["n_antipodal_merged_split"][:, m - 1] = (anti[rows] & started).sum(axis=0)
        out["predicted_merged_split"][:, m - 1] = u.sum(axis=0)
        out["predicted_var_merged_split"][:, m - 1] = (u * (1 - u)).sum(axis=0)
    return out


_PER_SPLIT = ("n_split", "n_merged_split", "n_antipodal_merged_split", "predicted_merged_split",
              "predicted_var_merged_split")


def compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides):
    """Run one long simulation per beta, recorded on a log time grid.

    Returns a dataset over (``beta``, ``time``) with ``p_antipodal_pair`` and its
    Wilson 95% band (``_low``, ``_high``), ``p_clustered`` (with band),
    ``mean_n_clusters``, ``p_unsettled`` (with band), ``p_lost``, ``p_gained``, the raw
    counts, ``p_split(beta, time, minority)`` (clustered into two antipodal groups
    whose smaller one has ``minority`` tokens, with band) and ``n_traj(beta)``.
    """
    knobs = resolve_scale(SCALES, scale, overrides, KNOB_SCHEMA)
    times = [float(x) for x in log_time_grid(knobs["T"], knobs["L"], knobs["n_times"],
                                             t_min=knobs["t_min"])]
    fixed = {k: knobs[k] for k in ("n_tokens", "n_traj", "L", "T", "d", "attention", "tol")}
    fixed["times"] = times
    per_time = ("n_antipodal_pair", "n_clustered", "sum_n_clusters", "n_lost", "n_gained",
                "n_unsettled")
    ds = figure_sweep(__name__, scale, {"beta": list(knobs["betas"])}, fixed=fixed,
                      seed=knobs["seed"], scheduler=scheduler, cache_dir=cache_dir,
                      progress=progress, output_dims={**{v: ("time",) for v in per_time},
                                   **{v: ("time", "minority") for v in _PER_SPLIT}},
                      output_coords={"time": times,
                                     "minority": list(range(1, knobs["n_tokens"] // 2 + 1))})
    return _finish(ds, scale)


def _finish(ds, scale):
    """Fractions and bands from the raw counts."""
    ds = add_outcome_fractions(ds, ("antipodal_pair", "clustered", "unsettled", "lost", "gained"))
    ds["mean_n_clusters"] = ds.sum_n_clusters / ds.n_traj
    ds = add_outcome_fractions(ds, ("split",))
    if "n_merged_split" in ds:   # results of CELL_VERSION >= 2
        has = ds.n_merged_split > 0   # the fraction of merged splits, where there are some
        ds = add_fraction_where(ds, "n_antipodal_merged_split", "n_merged_split", "p_persist",
                                has)
        ds["p_persist_predicted"] = (ds.predicted_merged_split / ds.n_merged_split).where(has)
        ds.p_persist_predicted.attrs["long_name"] = (
            "limit prediction: Kolmogorov solution of the two-cluster diffusion from each merge")
        ds["persist_z"] = count_z(ds.n_antipodal_merged_split, ds.predicted_merged_split,
                                  ds.predicted_var_merged_split).where(has)
        ds.persist_z.attrs["long_name"] = "(observed - predicted) / SE, merged splits (stats.count_z)"
    ds.minority.attrs["long_name"] = "tokens in the smaller of the two antipodal groups"
    ds.time.attrs["long_name"] = "time t = layer / L"
    ds.attrs.update(scale=scale, figure=ID)
    return ds


#: Seconds of simulation per trajectory-layer (the unit of :func:`work`) on the reduced
#: path, measured on the committed paper run (results/fig7_paper.nc: 191 s of cell time
#: for 1.5e9 trajectory-layers, N = 4, on the project's 2-core machine).
SECONDS_PER_WORK = 1.3e-7


work = trajectory_layer_work("betas")


cost = cost_function(__name__, note="The notebook's depth check at 4L is not included.  "
                                    ":func:`cost_report` gives details.")


def cost_report(ds, scale="paper") -> dict:
    """What the run cost and what ``scale`` would cost at the same speed, in detail.

    ``cpu_s`` is the CPU time of the simulations summed over the cells (``cell_wall_s``
    their wall time); ``per_step_us`` the median over cells of that CPU time per layer
    per trajectory (recording the Gram matrices on the time grid adds little).  One cell per beta, so a cluster runs at most
    ``len(betas)`` cells at once: ``{scale}_cell_cpu_min`` is also about the wall time.
    """
    n_layers = int(ds.attrs["fixed_L"]) * float(ds.attrs["fixed_T"])
    steps = float(ds.n_traj.sum()) * n_layers
    per_step = float(np.median(ds.simulate_cpu_s.values / (ds.n_traj.values * n_layers)))
    k = SCALES[scale]
    cells = len(k["betas"])
    target = work(k)
    return {"cpu_s": float(ds.simulate_cpu_s.sum()),
            "cell_wall_s": float(ds.attrs.get("cell_time_s", np.nan)),
            "wall_s": float(ds.attrs.get("wall_time_s", np.nan)),
            "per_step_us": 1e6 * per_step, "steps": steps, f"{scale}_steps": target,
            f"{scale}_cpu_h": per_step * target / 3600.0, f"{scale}_cells": cells,
            f"{scale}_cell_cpu_min": per_step * target / 60.0 / cells}


#: Merged splits agree with the reduction when every |z| (observed - predicted, in standard
#: errors, over the recorded times with at least :data:`PERSIST_MIN_MERGED` merged
#: trajectories) is at most this.  The z of one split at successive times are strongly
#: correlated; over 3 betas x 2 splits x about 40 times a correct prediction exceeds 4
#: with probability of order 1%.
PERSIST_Z_MAX = 4.0
PERSIST_MIN_MERGED = 50
#: The fraction with an antipodal pair has levelled off from the first recorded time after
#: which it stays within this distance of its value at T (half a percentage point).
LEVEL_TOL = 0.005


def summary(ds, t_ref=None) -> dict:
    """Numbers the notebook quotes, per beta.

    ``t_ref`` (default T/10) is the time from which persistence is measured:
    ``p_ref`` and ``p_final`` are the fractions with an antipodal pair at ``t_ref`` and
    at T, ``lost``/``gained`` the trajectories that changed status in between, and
    ``max_dev_after_ref`` the largest distance of the fraction from its final value over
    recorded times >= ``t_ref``.  ``t_settle_99`` is the first recorded time from which
    at most 1% of the trajectories ever change status again; ``t_clustered_95`` the
    first time at which 95% are clustered; ``t_level`` the first recorded time from which
    the fraction stays within :data:`LEVEL_TOL` of its value at T; ``unchanged`` that no
    trajectory changed status after ``t_ref``.

    Across betas: ``lost_total``; ``most_lost_beta``, the beta where the most trajectories
    lose their pair (the first beta if none does), and ``most_lost``, its row with
    ``beta``, ``net_loss`` (``lost - gained``), ``unbalanced_drop`` (the fall, from
    ``t_ref`` to T, of the two-group configurations with unequal groups, summed over
    them) and ``balanced_holds`` (the count with equal groups does not fall; None for
    odd N); ``others``, the largest ``t_level`` and ``max_dev_after_ref`` over the other
    betas (NaN when there is none); ``t_clustered_95_max`` over the betas (NaN if some beta
    never reaches 95%) and its share of T.  ``d``, ``L`` and ``scale`` are the run's;
    ``beta_c`` is the two-token threshold of Theorem 2 in that d.
    """
    times = ds.time.values
    T = float(times[-1])
    t_ref = T / 10 if t_ref is None else float(t_ref)
    i_ref = int(np.searchsorted(times, t_ref))
    i_ref = min(i_ref, times.size - 1)
    out = {"n_traj": int(ds.n_traj.values.max()), "T": T, "t_ref": float(times[i_ref]),
           "n_tokens": int(ds.attrs["fixed_n_tokens"]), "d": int(ds.attrs["fixed_d"]),
           "L": int(ds.attrs["fixed_L"]), "scale": str(ds.attrs.get("scale", "")),
           "beta_c": float(theory.critical_beta(int(ds.attrs["fixed_d"]))), "per_beta": {}}
    for b in ds.beta.values:
        sub = ds.sel(beta=b)
        p = sub.p_antipodal_pair.values
        unsettled = sub.p_unsettled.values
        settled = np.nonzero(unsettled <= 0.01)[0]
        clustered = np.nonzero(sub.p_clustered.values >= 0.95)[0]
        # the last recorded time farther than LEVEL_TOL from the final value, then one more
        far = np.nonzero(np.abs(p - p[-1]) > LEVEL_TOL)[0]
        i_level = int(far[-1]) + 1 if far.size else 0
        out["per_beta"][float(b)] = {
            "p_ref": float(p[i_ref]), "p_final": float(p[-1]),
            "t_level": float(times[min(i_level, times.size - 1)]),
            "unchanged": bool(int(sub.n_lost.values[i_ref]) == 0
                              and int(sub.n_gained.values[i_ref]) == 0),
            "low_final": float(sub.p_antipodal_pair_low.values[-1]),
            "high_final": float(sub.p_antipodal_pair_high.values[-1]),
            "lost": int(sub.n_lost.values[i_ref]), "gained": int(sub.n_gained.values[i_ref]),
            "max_dev_after_ref": float(np.max(np.abs(p[i_ref:] - p[-1]))),
            "t_settle_99": float(times[settled[0]]) if settled.size else float("nan"),
            "t_clustered_95": float(times[clustered[0]]) if clustered.size else float("nan"),
            "p_clustered_final": float(sub.p_clustered.values[-1]),
            "split_ref": {int(m): int(sub.n_split.values[i_ref, j])
                          for j, m in enumerate(ds.minority.values)},
            "split_final": {int(m): int(sub.n_split.values[-1, j])
                            for j, m in enumerate(ds.minority.values)},
        }
        if "persist_z" in ds:
            merged = {}
            for j, m in enumerate(ds.minority.values):
                ss = sub.isel(minority=j)
                ok = (ss.n_merged_split.values >= PERSIST_MIN_MERGED) & np.isfinite(ss.persist_z.values)
                z = np.abs(ss.persist_z.values[ok])
                merged[int(m)] = {
                    "n_merged_final": int(ss.n_merged_split.values[-1]),
                    "p_final": float(ss.p_persist.values[-1]),
                    "predicted_final": float(ss.p_persist_predicted.values[-1]),
                    "z_final": float(ss.persist_z.values[-1]),
                    "max_abs_z": float(z.max()) if z.size else float("nan"),
                    "n_times_compared": int(z.size),
                }
            out["per_beta"][float(b)]["merged"] = merged
    rows = out["per_beta"]
    out["lost_total"] = int(sum(r["lost"] for r in rows.values()))
    b_most = max(rows, key=lambda b: rows[b]["lost"])
    row = rows[b_most]
    n_tok = out["n_tokens"]
    unbalanced = [m for m in row["split_ref"] if 2 * m != n_tok]
    out["most_lost_beta"] = b_most
    out["most_lost"] = {
        "beta": b_most, **{k: v for k, v in row.items() if k != "merged"},
        "net_loss": row["lost"] - row["gained"],
        "unbalanced_drop": int(sum(row["split_ref"][m] - row["split_final"][m] for m in unbalanced)),
        "balanced_holds": (row["split_final"][n_tok // 2] >= row["split_ref"][n_tok // 2]
                           if n_tok % 2 == 0 else None)}
    others = [r for b, r in rows.items() if b != b_most]
    out["others"] = {"t_level_max": max((r["t_level"] for r in others), default=float("nan")),
                     "max_dev_max": max((r["max_dev_after_ref"] for r in others),
                                        default=float("nan"))}
    t95 = [r["t_clustered_95"] for r in rows.values()]
    out["t_clustered_95_max"] = max(t95) if all(np.isfinite(t95)) else float("nan")
    out["t_clustered_95_share"] = out["t_clustered_95_max"] / T
    if "persist_z" in ds:
        zs = [v["max_abs_z"] for row in out["per_beta"].values() for v in row["merged"].values()
              if np.isfinite(v["max_abs_z"])]
        out["persist_max_abs_z"] = max(zs) if zs else float("nan")
        out["persist_agree"] = (max(zs) <= PERSIST_Z_MAX) if zs else None
    return out


def split_drop(ds, beta, t_ref=None) -> dict:
    """Per group split ``m``: how many two-group configurations at ``t_ref`` (default
    T/10) and at T, the relative drop and its binomial standard error.

    Used to compare runs that differ only in ``L`` (a discretisation check): the same
    relative drop at a finer step says the losses belong to the dynamics, not the step.
    """
    times = ds.time.values
    t_ref = times[-1] / 10 if t_ref is None else float(t_ref)
    i_ref = min(int(np.searchsorted(times, t_ref)), times.size - 1)
    sub = ds.sel(beta=beta)
    out = {}
    for j, m in enumerate(ds.minority.values):
        ref, fin = int(sub.n_split.values[i_ref, j]), int(sub.n_split.values[-1, j])
        drop = (ref - fin) / ref if ref > 0 else float("nan")
        se = math.sqrt(max(drop * (1 - drop), 0.0) / ref) if ref > 0 else float("nan")
        out[int(m)] = {"ref": ref, "final": fin, "drop": drop, "se": se,
                       "t_ref": float(times[i_ref]), "L": int(ds.attrs["fixed_L"])}
    return out


#: The simulation code version (``SIMULATION_CODE_VERSION``, the part of a result's
#: ``code_version`` before "+") from which N >= 3 tokens take the reduced path; results of
#: earlier versions ran the full N-token map to T.
REDUCED_PATH_FROM = 2


def _simulation_version(code_version):
    """The simulation part of a ``code_version`` ("2+fig7.2" -> 2), or None if unreadable."""
    try:
        return int(str(code_version).split("+", 1)[0])
    except ValueError:
        return None


def check_matches(ds, ds_check, beta) -> dict:
    """Whether ``ds_check`` is the discretisation check of ``ds`` at ``beta``, and with what code.

    The check reruns ``beta`` with four times the layers per unit time and half the
    trajectories, every other setting (N, d, T, attention, tolerance, the number of recorded
    times, and the reference time T/10 to within a layer of ``ds``) equal.
    ``usable`` says that it does (then a notebook may reuse a stored check instead of
    recomputing it); ``same_code`` that both runs carry the same ``code_version``;
    ``code_version`` and ``code_version_check`` are those versions, and ``reduced`` and
    ``reduced_check`` whether each run took the reduced path (simulation version at least
    :data:`REDUCED_PATH_FROM`; None if unreadable).
    """
    a, c = ds.attrs, ds_check.attrs
    same = all(str(a.get(f"fixed_{k}")) == str(c.get(f"fixed_{k}"))
               for k in ("n_tokens", "T", "d", "attention", "tol"))
    # the recorded times are snapped to each run's layers, so they differ by up to a coarse
    # layer; the check compares the two runs at their first recorded time from T/10 on
    t_ref = [float(x.time.values[min(int(np.searchsorted(x.time.values, x.time.values[-1] / 10)),
                                     x.sizes["time"] - 1)]) for x in (ds, ds_check)]
    times = (ds.sizes.get("time") == ds_check.sizes.get("time")
             and abs(t_ref[0] - t_ref[1]) <= 1.0 / int(a["fixed_L"]) + 1e-12)
    usable = bool(ds_check.beta.size == 1 and float(ds_check.beta.values[0]) == float(beta)
                  and int(c["fixed_L"]) == 4 * int(a["fixed_L"])
                  and int(ds_check.n_traj.values.max()) == max(1, int(ds.n_traj.values.max()) // 2)
                  and same and times)
    v, vc = str(a.get("code_version", "")), str(c.get("code_version", ""))
    sv, svc = _simulation_version(v), _simulation_version(vc)
    return {"usable": usable, "same_code": v == vc, "code_version": v,
            "code_version_check": vc,
            "reduced": None if sv is None else sv >= REDUCED_PATH_FROM,
            "reduced_check": None if svc is None else svc >= REDUCED_PATH_FROM}


def depth_check_verdicts(coarse, fine) -> dict:
    """Compare the relative drops of :func:`split_drop` at L and at 4L, per split.

    For each split with a positive drop at L: ``z`` (coarse minus fine drop over the SE of
    the difference), ``persists`` (the fine drop exceeds two of its SEs: the losses are
    not only a discretisation artefact) and ``discretisation_part`` (z > 2: the drop is
    significantly smaller at the finer step).
    """
    out = {}
    for m in coarse:
        c, f = coarse[m], fine[m]
        if not (np.isfinite(c["drop"]) and np.isfinite(f["drop"])) or c["drop"] <= 0:
            continue
        se = math.hypot(c["se"], f["se"])
        z = (c["drop"] - f["drop"]) / se if se > 0 else 0.0
        out[m] = {"z": float(z), "persists": bool(f["drop"] > 2 * f["se"]),
                  "discretisation_part": bool(z > 2)}
    return out


def plot(ds):
    """(a) fraction with an antipodal pair (and clustered) vs time; (b) trajectories not
    yet settled; (c) the two-group antipodal configurations by the size of the smaller group."""
    import matplotlib.pyplot as plt

    from ..style import palette

    betas = ds.beta.values
    colours = palette(len(betas))
    styles = ["-", "--", ":", "-."]
    merged = "p_persist" in ds
    if merged:
        fig, axes = plt.subplots(2, 2, figsize=(12, 9))
        ax, axu, axs, axp = axes.ravel()
    else:
        fig, (ax, axu, axs) = plt.subplots(1, 3, figsize=(15, 4.6))
        axp = None
    t = ds.time.values
    n_tok = int(ds.attrs["fixed_n_tokens"])
    for colour, b in zip(colours, betas):
        sub = ds.sel(beta=b)
        ax.fill_between(t, sub.p_antipodal_pair_low, sub.p_antipodal_pair_high, color=colour,
                        alpha=0.25, lw=0)
        ax.plot(t, sub.p_antipodal_pair, "-", lw=1.6, color=colour, label=rf"$\beta$ = {b:g}")
        ax.plot(t, sub.p_clustered, "--", lw=1.0, color=colour)
        axu.fill_between(t, sub.p_unsettled_low, sub.p_unsettled_high, color=colour, alpha=0.25,
                         lw=0)
        axu.plot(t, sub.p_unsettled, "-", lw=1.6, color=colour, label=rf"$\beta$ = {b:g}")
        for j, m in enumerate(ds.minority.values):
            ss = sub.sel(minority=m)
            axs.fill_between(t, ss.p_split_low, ss.p_split_high, color=colour, alpha=0.15, lw=0)
            axs.plot(t, ss.p_split, styles[j % len(styles)], lw=1.4, color=colour)
            if axp is not None:
                # only where enough trajectories have merged for the fraction to mean much
                shown = ss.n_merged_split >= 20
                axp.fill_between(t, ss.p_persist_low.where(shown), ss.p_persist_high.where(shown),
                                 color=colour, alpha=0.15, lw=0)
                axp.plot(t, ss.p_persist.where(shown), "o", ms=2.5, color=colour)
                axp.plot(t, ss.p_persist_predicted.where(shown), styles[j % len(styles)],
                         lw=1.3, color=colour)
    ax.plot([], [], "-", color="0.3", lw=1.6, label="at least one antipodal pair")
    ax.plot([], [], "--", color="0.3", lw=1.0, label="clustered")
    for colour, b in zip(colours, betas):
        axs.plot([], [], "-", color=colour, lw=1.6, label=rf"$\beta$ = {b:g}")
    for j, m in enumerate(ds.minority.values):
        axs.plot([], [], styles[j % len(styles)], color="0.3", lw=1.4,
                 label=f"{m} vs {n_tok - m} tokens")
    if axp is not None:
        axp.plot([], [], "o", ms=3, color="0.3", label="simulation (merged by t)")
        for j, m in enumerate(ds.minority.values):
            axp.plot([], [], styles[j % len(styles)], color="0.3", lw=1.3,
                     label=f"{m} vs {n_tok - m}: limit prediction")
        axp.set_ylim(-0.02, 1.02)
        axp.set_ylabel("fraction antipodal, of those merged into the split")
        axp.set_title("(d) merged splits: simulation vs the two-cluster diffusion\n"
                      "(times with at least 20 merged trajectories)", fontsize=10)
        axp.legend(fontsize=8, loc="lower left")
    for a in (ax, axu, axs) + ((axp,) if axp is not None else ()):
        a.set_xscale("log")
        a.set_xlabel(r"time $t$ (= layer / L)")
        a.set_xlim(t[0], t[-1])
    for a in (ax, axu):
        a.set_ylim(-0.02, 1.02)
    axs.set_ylim(-0.02, min(1.02, float(ds.p_split_high.max()) + 0.1))
    ax.set_ylabel("fraction of trajectories")
    ax.set_title("(a) antipodal structure and clustering over time", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    axu.set_ylabel("fraction whose status still changes after t")
    axu.set_title("(b) not yet settled (antipodal pair or not, vs at T)", fontsize=10)
    axu.legend(fontsize=8, loc="upper right")
    axs.set_ylabel("fraction of trajectories")
    axs.set_title("(c) two antipodal groups, by group sizes", fontsize=10)
    axs.legend(fontsize=8, loc="upper left", ncol=2)
    return laid_out(fig, f"Persistence: N = {n_tok}, d = {ds.attrs['fixed_d']}, "
                    f"{ds.attrs['fixed_attention']} attention, L = {ds.attrs['fixed_L']}, "
                    f"T = {ds.attrs['fixed_T']:g}, {int(ds.n_traj.values.max()):,} "
                    "trajectories per beta "
                    "(shaded: Wilson 95% interval)", fontsize=10)
