r"""Figure 7: antipodal structure, once formed, persists.

Same model as Figure 6, at a few large :math:`\beta`, each trajectory's Gram matrix recorded
on a logarithmic time grid.  The paper (section 6, paragraph "Multiple Tokens Case") reports
that at large :math:`\beta` the tokens cluster well before T = 500 and the fraction with
antipodal structure then stays put.  A constant fraction could hide trajectories that trade
places, so each cell follows every trajectory: ``n_lost(time)`` (a pair then, none at T),
``n_gained`` (the reverse), ``n_unsettled`` (the status differs from that at T at some
recorded time from then on) and ``n_split(time, minority)`` (two antipodal groups, the
smaller of ``minority`` tokens; equal groups receive exactly the attention of a two-token
pair under softmax), and compares the trajectories merged into each split with the
two-cluster diffusion (:func:`stochastic_transformers.two_clusters.persistence_of_merged`).
"""

from __future__ import annotations

import time

import numpy as np

from ... import simulate, theory, two_clusters
from ..._validation import EXP_BETA_MAX
from ...classification import has_antipodal_pair, is_clustered, n_clusters, together
from ...config import ModelConfig, RunConfig
from ...stats import add_fraction_where, count_z, z_digest
from ...style import palette
from ..base import (add_outcome_fractions, cell_threads, laid_out, load_committed, log_time_grid,
                    trajectory_layer_work)
from ..knobs import integer, real, reals
from ..spec import Figure
from ..words import listed, markdown_table
from ._fig7_page import (check_matches, check_text, depth_check_verdicts,  # noqa: F401
                         reference_index, split_drop)

SCALES = {
    "smoke": dict(betas=(4.0, 8.0), n_tokens=4, n_traj=40, L=10, T=20.0, t_min=0.1, n_times=8,
                  d=4, attention="softmax", tol=1e-3, seed=0),
    "quick": dict(betas=(4.0, 6.0, 8.0), n_tokens=4, n_traj=300, L=100, T=500.0, t_min=0.1,
                  n_times=40, d=4, attention="softmax", tol=1e-3, seed=0),
    "paper": dict(betas=(4.0, 6.0, 8.0), n_tokens=4, n_traj=10_000, L=100, T=500.0, t_min=0.1,
                  n_times=40, d=4, attention="softmax", tol=1e-3, seed=0),
}


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
    """Per recorded time and split: the trajectories merged into it, those of them with an
    antipodal pair, and the sum (and the sum of u(1 - u)) of their predictions u.  One merged
    into minority m at :math:`t_m` with :math:`1 + Z = v_m` counts from :math:`t_m` on, with
    :math:`u = u(t - t_m, v_m)` from the two-cluster diffusion's Kolmogorov equation
    (:func:`stochastic_transformers.two_clusters.persistence_of_merged`)."""
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


_PER_TIME = ("n_antipodal_pair", "n_clustered", "sum_n_clusters", "n_lost", "n_gained",
             "n_unsettled")
_PER_SPLIT = ("n_split", "n_merged_split", "n_antipodal_merged_split", "predicted_merged_split",
              "predicted_var_merged_split")


def run(knobs, sweeps):
    """One long simulation per beta, recorded on a log time grid (sweep ``fig7-SCALE``)."""
    times = [float(x) for x in log_time_grid(knobs["T"], knobs["L"], knobs["n_times"],
                                             t_min=knobs["t_min"])]
    fixed = {k: knobs[k] for k in ("n_tokens", "n_traj", "L", "T", "d", "attention", "tol")}
    ds = sweeps({"beta": list(knobs["betas"])}, fixed={**fixed, "times": times},
                seed=knobs["seed"],
                output_dims={**{v: ("time",) for v in _PER_TIME},
                             **{v: ("time", "minority") for v in _PER_SPLIT}},
                output_coords={"time": times,
                               "minority": list(range(1, knobs["n_tokens"] // 2 + 1))})
    return finish(ds, knobs)


def finish(ds, knobs):
    """Over (``beta``, ``time``): ``p_antipodal_pair``, ``p_clustered``, ``p_unsettled``,
    ``p_lost``, ``p_gained`` with Wilson 95% bands, ``mean_n_clusters``,
    ``p_split(beta, time, minority)`` (with band) and, for the merged splits, ``p_persist``
    against its limit prediction ``p_persist_predicted`` (``persist_z`` in standard errors)."""
    ds = add_outcome_fractions(ds, ("antipodal_pair", "clustered", "unsettled", "lost", "gained"))
    ds["mean_n_clusters"] = ds.sum_n_clusters / ds.n_traj
    ds = add_outcome_fractions(ds, ("split",))
    if "n_merged_split" in ds:   # results of cell version >= 2
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
    return ds


#: Seconds of simulation per trajectory-layer (:func:`work`) on the reduced path, measured on
#: the committed paper run (results/fig7_paper.nc: 191 s for 1.5e9 trajectory-layers, N = 4).
SECONDS_PER_WORK = 1.3e-7
work = trajectory_layer_work("betas")

#: Merged splits agree with the reduction when every |z| (at the times with at least
#: PERSIST_MIN_MERGED merged) is at most this: over 3 betas x 2 splits x ~40 correlated
#: times a correct prediction exceeds 4 with probability of order 1%.
PERSIST_Z_MAX = 4.0
PERSIST_MIN_MERGED = 50
#: The fraction with an antipodal pair has levelled off from the first recorded time after
#: which it stays within this distance of its value at T (half a percentage point).
LEVEL_TOL = 0.005


def _per_beta(sub, times, i_ref) -> dict:
    """The persistence numbers of one beta (see :func:`summary`)."""
    p = sub.p_antipodal_pair.values
    settled = np.nonzero(sub.p_unsettled.values <= 0.01)[0]
    clustered = np.nonzero(sub.p_clustered.values >= 0.95)[0]
    # the last recorded time farther than LEVEL_TOL from the final value, then one more
    far = np.nonzero(np.abs(p - p[-1]) > LEVEL_TOL)[0]
    i_level = int(far[-1]) + 1 if far.size else 0
    splits = {int(m): j for j, m in enumerate(sub.minority.values)}
    row = {"p_ref": float(p[i_ref]), "p_final": float(p[-1]),
           "t_level": float(times[min(i_level, times.size - 1)]),
           "low_final": float(sub.p_antipodal_pair_low.values[-1]),
           "high_final": float(sub.p_antipodal_pair_high.values[-1]),
           "lost": int(sub.n_lost.values[i_ref]), "gained": int(sub.n_gained.values[i_ref]),
           "max_dev_after_ref": float(np.max(np.abs(p[i_ref:] - p[-1]))),
           "t_settle_99": float(times[settled[0]]) if settled.size else float("nan"),
           "t_clustered_95": float(times[clustered[0]]) if clustered.size else float("nan"),
           "split_ref": {m: int(sub.n_split.values[i_ref, j]) for m, j in splits.items()},
           "split_final": {m: int(sub.n_split.values[-1, j]) for m, j in splits.items()}}
    if "persist_z" not in sub:
        return row
    row["merged"] = {}
    for m, j in splits.items():
        ss = sub.isel(minority=j)
        digest = z_digest(ss.persist_z.where(ss.n_merged_split >= PERSIST_MIN_MERGED).values)
        row["merged"][m] = {"n_merged_final": int(ss.n_merged_split.values[-1]),
                            "p_final": float(ss.p_persist.values[-1]),
                            "predicted_final": float(ss.p_persist_predicted.values[-1]),
                            "max_abs_z": digest["max_abs_z"], "n_times_compared": digest["n"]}
    return row


def summary(ds) -> dict:
    """Numbers the page quotes.  ``per_beta[beta]``: ``p_ref``, ``p_final`` (fractions with an
    antipodal pair at ``t_ref``, the first recorded time from T/10 on, and at T),
    ``lost``/``gained`` in between, ``max_dev_after_ref``, ``t_settle_99`` (from when at
    most 1% ever change status again), ``t_clustered_95``, ``t_level`` (from when the
    fraction stays within :data:`LEVEL_TOL` of its final value), the two-group
    configurations by split at ``t_ref`` and T, and each merged split against its prediction
    (largest |z| over the times with :data:`PERSIST_MIN_MERGED` merged).  ``most_lost``: the
    row of the beta where most trajectories lose their pair (the first if none does) with
    ``net_loss``, ``unbalanced_drop`` (the fall of the unequal splits) and
    ``balanced_holds`` (the equal ones do not fall; None for odd N); ``others``: the largest
    ``t_level`` and ``max_dev_after_ref`` over the other betas; ``t_clustered_95_max`` (NaN
    if some beta never reaches 95%); ``persist_max_abs_z`` and ``persist_agree`` (at most
    :data:`PERSIST_Z_MAX`; None without a compared time)."""
    times = ds.time.values
    i_ref = reference_index(times)
    rows = {float(b): _per_beta(ds.sel(beta=b), times, i_ref) for b in ds.beta.values}
    n_tok = int(ds.attrs["fixed_n_tokens"])
    b_most = max(rows, key=lambda b: rows[b]["lost"])
    row = rows[b_most]
    others = [r for b, r in rows.items() if b != b_most]
    t95 = [r["t_clustered_95"] for r in rows.values()]
    out = {"n_traj": int(ds.n_traj.values.max()), "T": float(times[-1]),
           "t_ref": float(times[i_ref]), "n_tokens": n_tok, "d": int(ds.attrs["fixed_d"]),
           "scale": str(ds.attrs.get("scale", "")),
           "beta_c": float(theory.critical_beta(int(ds.attrs["fixed_d"]))), "per_beta": rows,
           "most_lost_beta": b_most,
           "most_lost": {
               "beta": b_most, **{k: v for k, v in row.items() if k != "merged"},
               "net_loss": row["lost"] - row["gained"],
               "unbalanced_drop": int(sum(row["split_ref"][m] - row["split_final"][m]
                                          for m in row["split_ref"] if 2 * m != n_tok)),
               "balanced_holds": (row["split_final"][n_tok // 2] >= row["split_ref"][n_tok // 2]
                                  if n_tok % 2 == 0 else None)},
           "others": {"t_level_max": max((r["t_level"] for r in others), default=float("nan")),
                      "max_dev_max": max((r["max_dev_after_ref"] for r in others),
                                         default=float("nan"))},
           "t_clustered_95_max": max(t95) if all(np.isfinite(t95)) else float("nan")}
    if "persist_z" in ds:
        zs = [v["max_abs_z"] for r in rows.values() for v in r["merged"].values()
              if np.isfinite(v["max_abs_z"])]
        out["persist_max_abs_z"] = max(zs) if zs else float("nan")
        out["persist_agree"] = (max(zs) <= PERSIST_Z_MAX) if zs else None
    return out


def discretisation_check(ds, beta, source, *, cache_dir=None, **overrides):
    """The run of ``ds`` again at ``beta`` with four times the layers per unit time and half
    the trajectories: ``(dataset, seconds)``.  A committed result comes with its committed
    check, reused when it matches (:func:`check_matches`; the seconds are then its cells'
    compute time); otherwise it is computed at the scale ``ds`` was, with ``overrides``."""
    start = time.perf_counter()
    check = load_committed("fig7_check") if source.startswith("the committed") else None
    if check is not None and check_matches(ds, check, beta)["usable"]:
        return check, float(check.attrs["cell_time_s"])
    check = FIGURE.compute(ds.attrs["shown_scale"], cache_dir=cache_dir, progress=False,
                           **{**overrides, "betas": (beta,), "L": 4 * int(ds.attrs["fixed_L"]),
                              "n_traj": max(1, int(ds.n_traj.values.max()) // 2)})
    return check, time.perf_counter() - start


def _verdict(stats) -> str:
    """The paper's two claims: clustering before T/10 at every beta, and a fraction with an
    antipodal pair within :data:`LEVEL_TOL` of its value at T from ``t_ref`` on."""
    rows, t95 = stats["per_beta"], stats["t_clustered_95_max"]
    flat = [b for b, r in rows.items() if r["max_dev_after_ref"] <= LEVEL_TOL]
    moved = [b for b in rows if b not in flat]
    early = bool(np.isfinite(t95) and t95 <= stats["T"] / 10)
    word = ("Reproduced" if early and not moved else
            "Not reproduced" if not (early or flat) else "Partly reproduced")
    clustering = (f"95% of the trajectories are clustered by $t$ = {t95:.3g} at every $\\beta$"
                  if early else "at some $\\beta$ fewer than 95% of the trajectories are "
                  "clustered by $T/10$")
    holds = (f"from $t$ = {stats['t_ref']:.0f} on the fraction with an antipodal pair stays "
             f"within {100 * LEVEL_TOL:g} points of its value at $T$ at $\\beta$ = "
             + listed(flat, "g") if flat else "the fraction with an antipodal pair moves after "
             "$t = T/10$ at every $\\beta$")
    if flat and moved:
        holds += ", but not at $\\beta$ = " + listed(moved, "g")
    return f"**{word}:** {clustering}, and {holds}."


def _readings(stats) -> dict[str, str]:
    """``fall`` (the beta with most losses), ``splits`` (its two-group counts) and
    ``persist`` (the merged splits against the reduction), for any run."""
    s, n, t = stats["most_lost"], stats["n_tokens"], f"$t$ = {stats['t_ref']:.0f}"
    fall = (f"at $\\beta$ = {s['beta']:g} the fraction with an antipodal pair falls from "
            f"{s['p_ref']:.2f} at {t} to {s['p_final']:.2f} at $T$"
            + (", as configurations of unequal groups break up" if s["unbalanced_drop"] > 0
               else "") if s["net_loss"] > 0 else
            f"in this run no $\\beta$ loses more antipodal pairs than it gains after {t}")
    counts = [f"the {m}-vs-{n - m} count " + (f"stays at {s['split_final'][m]:,}"
              if ref == s["split_final"][m] else
              f"goes from {ref:,} at {t} to {s['split_final'][m]:,} at $T$")
              for m, ref in s["split_ref"].items()]
    z, agree = stats.get("persist_max_abs_z"), stats.get("persist_agree")
    persist = (f"This run is too small to judge it: no recorded time has {PERSIST_MIN_MERGED} "
               "merged trajectories." if agree is None else
               f"They agree to within {z:.1f} standard errors at every compared time." if agree
               else f"**They differ by up to {z:.1f} standard errors, more than the "
               f"{PERSIST_Z_MAX:g} a correct prediction allows.**")
    return {"fall": fall, "splits": f"At $\\beta$ = {s['beta']:g} " + "; ".join(counts) + ".",
            "persist": persist}


def _tables(stats) -> dict[str, str]:
    """``table``: per beta the clustering time, the antipodal fraction at ``t_ref`` and at T,
    the trajectories lost and gained, and the two-group configurations by split;
    ``merged_table``: the merged splits against the reduction (empty without them)."""
    n, rows = stats["n_tokens"], stats["per_beta"]

    def when(t):
        return f"{t:.3g}" if np.isfinite(t) and t < stats["T"] else None

    def pct(x):
        return f"{100 * x:.1f}%" if np.isfinite(x) else None

    splits = list(next(iter(rows.values()))["split_ref"])
    table = markdown_table(
        ["$\\beta$", "95% clustered by $t$", "≤ 1% still change after $t$",
         f"antipodal at $t$ = {stats['t_ref']:.3g}", "at $T$ [95% band]", "lost", "gained",
         *(f"{m} vs {n - m}" for m in splits)],
        [[f"{b:g}", when(s["t_clustered_95"]), when(s["t_settle_99"]), pct(s["p_ref"]),
          f"{pct(s['p_final'])} [{100 * s['low_final']:.1f}, {100 * s['high_final']:.1f}]",
          f"{s['lost']:,}", f"{s['gained']:,}",
          *(f"{s['split_ref'][m]:,} → {s['split_final'][m]:,}" for m in splits)]
         for b, s in rows.items()])
    merged = [[f"{b:g}", f"{m} vs {n - m}", f"{r['n_merged_final']:,}", pct(r["p_final"]),
               pct(r["predicted_final"]), f"{r['max_abs_z']:.1f} ({r['n_times_compared']})"
               if r["n_times_compared"] else None]
              for b, s in rows.items() for m, r in s.get("merged", {}).items()]
    return {"table": table, "merged_table": markdown_table(
        ["$\\beta$", "split", "merged by $T$", "antipodal at $T$", "predicted",
         "largest \\|z\\| (times)"], merged) if merged else ""}


def phrases(stats, ds=None, check=None) -> dict[str, str]:
    """The page's Markdown: ``verdict``, ``fall``, ``splits``, ``persist``, the tables and,
    with the run ``ds`` and its discretisation ``check``, ``check``."""
    out = {"verdict": _verdict(stats), **_readings(stats), **_tables(stats)}
    if check is not None:
        out["check"] = check_text(ds, check, stats["most_lost_beta"])
    return out


def plot(ds):
    """(a) fraction with an antipodal pair (and clustered) vs time; (b) trajectories not yet
    settled; (c) the two-group configurations by the size of the smaller group; (d) the
    merged splits against the two-cluster diffusion."""
    import matplotlib.pyplot as plt

    t, n_tok, styles = ds.time.values, int(ds.attrs["fixed_n_tokens"]), ["-", "--", ":", "-."]
    fig, axes = plt.subplots(2, 2, figsize=(8.0, 6.6), sharex=True)
    ax, axu, axs, axp = axes.ravel()

    def band(a, sub, name, colour, style="-"):
        a.fill_between(t, sub[f"{name}_low"], sub[f"{name}_high"], color=colour, alpha=0.2, lw=0)
        a.plot(t, sub[name], style, lw=1.5, color=colour)

    for colour, b in zip(palette(ds.beta.size), ds.beta.values):
        sub = ds.sel(beta=b)
        band(ax, sub, "p_antipodal_pair", colour)
        ax.plot(t, sub.p_clustered, "--", lw=1.0, color=colour)
        band(axu, sub, "p_unsettled", colour)
        ax.plot([], [], "-", color=colour, label=rf"$\beta$ = {b:g}")
        for j, m in enumerate(ds.minority.values):
            ss, style = sub.sel(minority=m), styles[j % len(styles)]
            band(axs, ss, "p_split", colour, style)
            if "p_persist" in ds:   # where enough trajectories have merged to mean much
                shown = ss.n_merged_split >= 20
                axp.plot(t, ss.p_persist.where(shown), "o", ms=2.5, color=colour)
                axp.plot(t, ss.p_persist_predicted.where(shown), style, lw=1.2, color=colour)
    ax.plot([], [], "--", color="0.4", lw=1.0, label="clustered")
    for j, m in enumerate(ds.minority.values):
        axs.plot([], [], styles[j % len(styles)], color="0.4", label=f"{m} vs {n_tok - m}")
    axp.plot([], [], "o", ms=3, color="0.4", label="simulation")
    axp.plot([], [], "-", color="0.4", label="reduction")
    ax.set(ylim=(-0.02, 1.02), ylabel="fraction of trajectories",
           title="(a) antipodal pair (solid)")
    axu.set(ylim=(-0.02, 1.02), title="(b) status still changes after t")
    axs.set(ylim=(-0.02, min(1.02, float(ds.p_split_high.max()) + 0.1)),
            ylabel="fraction of trajectories", title="(c) two antipodal groups")
    axp.set(ylim=(-0.02, 1.02), title="(d) merged splits vs the reduction")
    for a in axes.ravel():
        a.set(xscale="log", xlim=(t[0], t[-1]))
    for a in axes[1]:
        a.set_xlabel("time $t$")
    for a, where in ((ax, "upper left"), (axs, "upper left"), (axp, "lower left")):
        a.legend(loc=where)
    return laid_out(fig, f"N = {n_tok}, d = {ds.attrs['fixed_d']}, L = {ds.attrs['fixed_L']}, "
                    f"{int(ds.n_traj.values.max()):,} trajectories per β")


FIGURE = Figure.declared(
    globals(), "fig7", source="paper",
    description="persistence: fraction of trajectories with an antipodal pair vs time, large beta",
    # one token count and one dimension, distinct betas, the first recorded time in (0, T]
    schema={"betas": reals(0.0, EXP_BETA_MAX, distinct=True), "n_tokens": integer(3), "d": integer(2),
            "t_min": real(0.0, lambda knobs: knobs["T"], strict_min=True)},
    cell_version="2")  # 2: the reduced path; persistence of merged splits
compute, cost = FIGURE.compute, FIGURE.cost
