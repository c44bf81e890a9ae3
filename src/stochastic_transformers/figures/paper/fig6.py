r"""Figure 6: antipodal pairs survive for more than two tokens.

N tokens i.i.d. uniform on :math:`S^{d-1}`, d = 4, through :math:`LT` layers of the
stochastic model (paper eq. 4; section 6, paragraph "Multiple Tokens Case"): the fraction of
trajectories with some pair :math:`\langle x_i, x_j\rangle \le -1 + \mathrm{tol}` at T,
against :math:`\beta \in [0, 8]`, one curve per N, with the two-token limit probability of
ending antipodal from a uniform start (the exit probability of the proof of Theorem 2,
:func:`stochastic_transformers.theory.antipodal_probability`).

Softmax attention by default (:math:`|A_i| \le 1`: small steps at every beta).  The reduced
path runs the N-token map until the tokens occupy at most two points, then the exact
weighted two-cluster chain; each cell counts the splits reached and, for balanced ones
(:math:`m_1 = m_2`, two tokens in disguise), the limit probability of ending antipodal from
the overlap at the merge.
"""

from __future__ import annotations

import time

import numpy as np

from ... import simulate, theory
from ...classification import has_antipodal_pair, is_clustered, n_clusters
from ...config import ModelConfig, RunConfig
from ...stats import add_fraction, count_z, z_digest
from ...style import palette
from ..base import add_outcome_fractions, cell_threads, laid_out, trajectory_layer_work
from ..knobs import integer, integers, reals
from ..spec import Figure
from ..words import listed, markdown_table

_BETAS = tuple(float(b) for b in np.arange(0.0, 8.0 + 1e-9, 0.5))
SCALES = {
    "smoke": dict(n_tokens=(3, 5), betas=(0.0, 2.0, 6.0), n_traj=40, L=20, T=10.0, d=4,
                  attention="softmax", tol=1e-3, seed=0),
    "quick": dict(n_tokens=(3, 4, 5, 8), betas=_BETAS, n_traj=200, L=100, T=100.0, d=4,
                  attention="softmax", tol=1e-3, seed=0),
    "paper": dict(n_tokens=(3, 4, 5, 8), betas=_BETAS, n_traj=10_000, L=100, T=500.0, d=4,
                  attention="softmax", tol=1e-3, seed=0),
}


def cell(*, n_tokens, beta, n_traj, L, T, d, attention, tol, seed):
    """One (N, beta) point: counts of the classifications of ``n_traj`` trajectories at T,
    and what the two-cluster reduction saw: the trajectories merged into one point, into a
    balanced split (m1 = m2) or an unbalanced one, those of each with an antipodal pair at
    T, and for the balanced ones the sum (and the sum of p(1 - p)) of their limit
    probabilities p of ending antipodal from the overlap at the merge."""
    cpu0 = time.process_time()
    ds = simulate(ModelConfig(d=d, beta=beta, attention=attention),
                  RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=T, seed=seed, tol=tol,
                            n_threads=cell_threads()))
    cpu = time.process_time() - cpu0
    g = ds.gram.values
    anti = has_antipodal_pair(g, tol)
    clus = is_clustered(g, tol)
    k = n_clusters(g, tol)
    points = ds.merge_points.values
    balanced = (points == 2) & (2 * ds.merge_m1.values == n_tokens)
    unbalanced = (points == 2) & ~balanced
    z_merge = np.clip(ds.merge_one_plus_overlap.values[balanced] - 1.0, -1.0, 1.0)
    predicted = (np.asarray(theory.antipodal_probability(min(beta, theory.SCALE_FUNCTION_BETA_MAX), d,
                                                         z0=z_merge), dtype=float)
                 if z_merge.size else np.zeros(0))
    merged = ds.merge_layer.values >= 0
    return {"n_antipodal_pair": int(anti.sum()), "n_clustered": int(clus.sum()),
            "n_clustered_antipodal": int((anti & clus).sum()),
            "sum_n_clusters": int(k.sum()), "n_traj": n_traj,
            "n_merged_one": int((points == 1).sum()), "n_balanced": int(balanced.sum()),
            "n_unbalanced": int(unbalanced.sum()),
            "n_antipodal_balanced": int((anti & balanced).sum()),
            "n_antipodal_unbalanced": int((anti & unbalanced).sum()),
            "predicted_antipodal_balanced": float(predicted.sum()),
            "predicted_var_balanced": float((predicted * (1.0 - predicted)).sum()),
            "sum_merge_time": float(ds.merge_layer.values[merged].sum() / L),
            "simulate_s": float(ds.attrs["wall_time_s"]), "simulate_cpu_s": float(cpu)}


def finish(ds, knobs):
    """Over (``n_tokens``, ``beta``): ``p_antipodal_pair``, ``p_clustered`` and
    ``p_two_clusters`` (clustered with an antipodal pair) with Wilson 95% bands,
    ``mean_n_clusters``, the split decomposition (``p_antipodal_balanced``,
    ``p_antipodal_unbalanced``, ``p_antipodal_balanced_predicted`` and ``balanced_z``), the
    two-token limit curve ``p_two_token_theory(beta_fine)`` and ``beta_c`` (attribute)."""
    ds = add_outcome_fractions(ds, ("antipodal_pair", "clustered"))
    ds = add_fraction(ds, "n_clustered_antipodal", "n_traj", "p_two_clusters")
    if "n_balanced" in ds:   # results of cell version >= 2
        ds = add_outcome_fractions(ds, ("antipodal_balanced", "antipodal_unbalanced"))
        ds["p_antipodal_balanced_predicted"] = ds.predicted_antipodal_balanced / ds.n_traj
        ds.p_antipodal_balanced_predicted.attrs["long_name"] = (
            "limit prediction for balanced splits (exit probability of the proof of "
            "Theorem 2, from the overlap at the merge)")
        ds["balanced_z"] = count_z(ds.n_antipodal_balanced, ds.predicted_antipodal_balanced,
                                   ds.predicted_var_balanced).where(ds.n_balanced > 0)
        ds.balanced_z.attrs["long_name"] = "balanced splits: (observed - predicted) / SE (stats.count_z)"
    ds["mean_n_clusters"] = ds.sum_n_clusters / ds.n_traj
    ds.mean_n_clusters.attrs["long_name"] = "mean number of clusters at T"
    d = int(ds.attrs["fixed_d"])
    betas = ds.beta.values
    beta_fine = np.linspace(betas.min(), betas.max(), 161)
    ds = ds.assign_coords(beta_fine=beta_fine)
    ds["p_two_token_theory"] = (("beta_fine",), np.asarray(
        theory.antipodal_probability(np.minimum(beta_fine, theory.SCALE_FUNCTION_BETA_MAX), d), dtype=float),
        {"long_name": "two-token limit P(antipodal) from a uniform start (exit probability "
                      "of the proof of Theorem 2), same d"})
    ds.attrs.update(beta_c=float(theory.critical_beta(d)),
                    attention_note="softmax keeps |A| <= 1, so steps stay small at large beta")
    return ds


#: Seconds of simulation per trajectory-layer (:func:`work`) on the reduced path, measured on
#: the committed paper run (results/fig6_paper.nc, N = 3, 4, 5, 8, on 2 cores).
SECONDS_PER_WORK = 4.96e-8
work = trajectory_layer_work("n_tokens", "betas")


#: Balanced splits agree with their limit prediction when every |z| is at most this (over
#: 17 betas of 2 even N, a correct prediction exceeds 3.5 somewhere with chance ~1.6%).
BALANCED_Z_MAX = 3.5
#: The balanced prediction is *sharp* (almost certain per trajectory) when the mean of
#: p(1 - p) over the balanced splits is at most this at every even N and beta: the
#: comparison then checks the balanced chain after the merge, not which split N tokens reach.
BALANCED_SHARP_PQ = 0.01


def _per_n(sub, betas) -> dict:
    """The curve's landmarks for one N and, with split counts, where its pairs come from."""
    p = sub.p_antipodal_pair.values
    positive = betas[sub.p_antipodal_pair_low.values > 0]
    row = {"p_at_beta0": float(p[0]), "p_last": float(p[-1]),
           "low_last": float(sub.p_antipodal_pair_low.values[-1]),
           "high_last": float(sub.p_antipodal_pair_high.values[-1]),
           "first_beta_positive": float(positive.min()) if positive.size else float("nan"),
           "min_clustered": float(sub.p_clustered.min()),
           "mean_clusters_last": float(sub.mean_n_clusters.values[-1])}
    if "n_balanced" not in sub:
        return row
    last = sub.isel(beta=-1)
    n_anti = max(int(last.n_antipodal_pair), 1)
    has = sub.n_balanced.values > 0
    var = sub.predicted_var_balanced.values
    n_merged = int((sub.n_balanced + sub.n_unbalanced + sub.n_merged_one).sum())
    return row | {
        "p_balanced_last": float(last.p_antipodal_balanced),
        "share_balanced_last": float(last.n_antipodal_balanced) / n_anti,
        "share_unbalanced_last": float(last.n_antipodal_unbalanced) / n_anti,
        "share_unmerged_last": float(last.n_antipodal_pair - last.n_antipodal_balanced
                                     - last.n_antipodal_unbalanced) / n_anti,
        "frac_balanced_last": float(last.n_balanced / last.n_traj),
        "frac_unbalanced_last": float(last.n_unbalanced / last.n_traj),
        "frac_merged_one_last": float(last.n_merged_one / last.n_traj),
        "predicted_balanced_last": float(last.p_antipodal_balanced_predicted),
        "balanced_max_abs_z": z_digest(sub.balanced_z.values)["max_abs_z"],
        # what the comparison can see: the mean of p(1 - p) over the balanced splits and the
        # standard error of a predicted count (NaN without balanced splits)
        "balanced_mean_pq_max": (float(np.max(var[has] / sub.n_balanced.values[has]))
                                 if has.any() else float("nan")),
        "balanced_se_max": float(np.sqrt(np.max(var[has]))) if has.any() else float("nan"),
        "mean_merge_time": float(sub.sum_merge_time.sum() / max(1, n_merged))}


def summary(ds) -> dict:
    """Numbers and verdicts the page quotes.  ``verdict`` on the paper's claim that the
    probability of an antipodal pair becomes positive for every N: ``"reproduced"`` where the
    95% band leaves zero at some beta for every N, ``"partly reproduced"`` for some, else
    ``"not reproduced"``.  ``per_n[N]``: :func:`_per_n`.  Over the even N: the largest
    ``balanced_max_abs_z``, ``balanced_mean_pq_max`` and ``balanced_se_max``,
    ``balanced_agree`` (every |z| <= :data:`BALANCED_Z_MAX`) and ``balanced_prediction_sharp``
    (mean p(1 - p) <= :data:`BALANCED_SHARP_PQ`), None without an even N;
    ``odd_all_unbalanced`` (no odd N has a balanced split: the reduction's explanation of the
    parity effect); ``even_onset_earlier`` (the band leaves zero at a smaller beta for every
    even N than for any odd N)."""
    betas = ds.beta.values
    per_n = {int(n): _per_n(ds.sel(n_tokens=n), betas) for n in ds.n_tokens.values}
    first = {n: r["first_beta_positive"] for n, r in per_n.items()}
    even = [b for n, b in first.items() if n % 2 == 0]
    odd = [b for n, b in first.items() if n % 2 == 1]
    n_positive = sum(np.isfinite(b) for b in first.values())
    out = {"n_traj": int(ds.n_traj.values.max()), "betas": [float(b) for b in betas],
           "beta_last": float(betas[-1]), "n_tokens": [int(n) for n in ds.n_tokens.values],
           "L": int(ds.attrs["fixed_L"]), "T": float(ds.attrs["fixed_T"]),
           "d": int(ds.attrs["fixed_d"]), "attention": str(ds.attrs["fixed_attention"]),
           "beta_c": float(ds.attrs["beta_c"]), "per_n": per_n,
           "even_onset_earlier": bool(max(even) < min(odd)) if even and odd else None,
           "increasing_in_n_at_last_beta": bool(np.all(np.diff(
               ds.isel(beta=-1).p_antipodal_pair.values) >= 0)),
           "verdict": ("reproduced" if n_positive == len(first) else
                       "partly reproduced" if n_positive else "not reproduced")}
    if "n_balanced" not in ds:
        return out
    rows = [r for n, r in per_n.items() if n % 2 == 0]
    zs, pqs, ses = ([r[k] for r in rows if np.isfinite(r[k])] for k in
                    ("balanced_max_abs_z", "balanced_mean_pq_max", "balanced_se_max"))
    return out | {
        "balanced_max_abs_z": max(zs, default=float("nan")),
        "balanced_agree": (max(zs) <= BALANCED_Z_MAX) if zs else None,
        "balanced_mean_pq_max": max(pqs, default=float("nan")),
        "balanced_se_max": max(ses, default=float("nan")),
        "balanced_prediction_sharp": (max(pqs) <= BALANCED_SHARP_PQ) if pqs else None,
        "odd_all_unbalanced": all(int(ds.sel(n_tokens=n).n_balanced.sum()) == 0
                                  for n in per_n if n % 2 == 1)}


def _onset(stats) -> str:
    per_n = stats["per_n"]
    found = {n: r["first_beta_positive"] for n, r in per_n.items()
             if np.isfinite(r["first_beta_positive"])}
    if not found:
        return "for no $N$ does the 95% band of the fraction leave zero."
    lo, hi = min(found.values()), max(found.values())
    last = {n: r["p_last"] for n, r in per_n.items()}
    n_lo, n_hi = min(last, key=last.get), max(last, key=last.get)
    who = "for every $N$" if len(found) == len(per_n) else f"for $N$ = {listed(found, 'd')} only"
    return (who
            + f" the 95% band of the fraction leaves zero, from $\\beta$ = {lo:g}"
            + (f" to {hi:g} depending on $N$" if hi > lo else "")
            + f", and at $\\beta$ = {stats['beta_last']:g} the fraction is {last[n_lo]:.0%} "
            f"(N = {n_lo}) to {last[n_hi]:.0%} (N = {n_hi})"
            + (", growing with $N$." if stats["increasing_in_n_at_last_beta"] else "."))


def _balanced_reading(stats) -> str:
    agree, pq = stats.get("balanced_agree"), stats.get("balanced_mean_pq_max")
    if agree is None:
        return "This run has no even $N$, hence no balanced split to compare."
    said = (f"Every balanced count is within {BALANCED_Z_MAX:g} standard errors of its limit "
            "prediction. " if agree else f"**Some balanced count is more than "
            f"{BALANCED_Z_MAX:g} standard errors from its limit prediction.** ")
    unpredicted = ("which split the $N$ tokens reach, and how often it is balanced, is "
                   "measured here, not predicted.")
    if not stats["balanced_prediction_sharp"]:
        return said + ("At the merge the prediction is still uncertain (the mean of $p(1-p)$ "
                       f"over the balanced splits, $p$ a trajectory's predicted probability, "
                       f"reaches {pq:.2f}), so this also tests how a balanced split decides; "
                       + unpredicted)
    return said + (
        "What this comparison tests is narrow: at the merge the prediction is already almost "
        f"certain (the mean of $p(1-p)$ over the balanced splits is at most {pq:.2g}, $p$ a "
        "trajectory's predicted probability; the standard error of a predicted count is at "
        f"most {stats['balanced_se_max']:.1f} trajectories). It checks that a balanced split, "
        "once formed, ends as the two-token diffusion says from where it is; " + unpredicted)


def _tables(stats) -> dict[str, str]:
    """Per N: the curve's landmarks (``landmarks_table``) and, at the largest beta, the
    splits reached, where the pairs come from and the balanced fraction against its
    prediction (``splits_table``)."""
    b, per_n = f"{stats['beta_last']:g}", stats["per_n"]

    def pct(x, digits=0):
        return f"{100 * x:.{digits}f}%"

    landmarks = markdown_table(
        ["N", "at β = 0", "band above 0 from β", f"at β = {b} [95% band]", "clustered, at least",
         f"mean clusters at β = {b}"],
        [[n, pct(s["p_at_beta0"], 1), f"{s['first_beta_positive']:g}".replace("nan", "never"),
          f"{pct(s['p_last'])} [{100 * s['low_last']:.0f}, {100 * s['high_last']:.0f}]%",
          pct(s["min_clustered"]), f"{s['mean_clusters_last']:.2f}"] for n, s in per_n.items()])
    rows = []
    for n, s in per_n.items():
        if "share_balanced_last" not in s:
            continue
        even = n % 2 == 0 and np.isfinite(s["balanced_max_abs_z"])
        rows.append([n, *(pct(s[f"frac_{k}_last"], 1) for k in ("merged_one", "balanced",
                                                                 "unbalanced")),
                     f"{s['mean_merge_time']:.1f}",
                     *(pct(s[f"share_{k}_last"]) for k in ("balanced", "unbalanced", "unmerged")),
                     f"{pct(s['p_balanced_last'], 1)} / {pct(s['predicted_balanced_last'], 1)}"
                     if even else None, f"{s['balanced_max_abs_z']:.1f}" if even else None])
    splits = markdown_table(
        ["N", "one point", "balanced", "unbalanced", "mean merge time", "pairs from balanced",
         "from unbalanced", "not merged", "balanced: observed / predicted", "largest \\|z\\|"],
        rows) if rows else ""
    return {"landmarks_table": landmarks, "splits_table": splits}


def phrases(stats) -> dict[str, str]:
    """The page's Markdown: ``onset``, ``parity_reading``, ``balanced_reading`` (every
    balanced |z| at most :data:`BALANCED_Z_MAX`, and what the comparison tests),
    ``odd_reading`` and the two tables (:func:`_tables`)."""
    parity = stats["even_onset_earlier"]
    return {"onset": _onset(stats), "balanced_reading": _balanced_reading(stats),
            "parity_reading": (
                "This run has only one parity of $N$, so it cannot show an effect of parity on "
                "the onset." if parity is None else
                "The onset depends on the parity of $N$: the band leaves zero at a smaller "
                "$\\beta$ for every even $N$ than for any odd $N$ (second column of the first "
                "table)." if parity else
                "The onset does not separate by the parity of $N$ in this run: some odd $N$ "
                "leaves zero no later than some even $N$."),
            "odd_reading": (
                "This run has no odd $N$." if all(n % 2 == 0 for n in stats["n_tokens"]) else
                "No odd $N$ ever merged into a balanced split (it has none): all its antipodal "
                "pairs come from unbalanced splits, which the limit dynamics breaks up and "
                "which survive only while they hover (softmax at large $\\beta$)."
                + (" Even $N$ also reach balanced splits, as stable as two tokens above "
                   "$\\beta_c$: that is the parity effect." if parity is not None else "")
                if stats.get("odd_all_unbalanced") else
                "**Some odd $N$ merged into a balanced split, which it does not have: the "
                "split counts are wrong.**"),
            **_tables(stats)}


def plot(ds):
    """(a) P(antipodal pair at T) vs beta per N; (b) where the pairs come from (balanced or
    unbalanced splits, with the balanced limit prediction); (c) fraction clustered; (d) mean
    number of clusters; stacked for the page's column."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    splits = "n_balanced" in ds
    fig = plt.figure(figsize=(7.0, 9.2 if splits else 6.4))
    gs = fig.add_gridspec(3 if splits else 2, 2, height_ratios=[1.25, 1.1, 1] if splits else [1.25, 1])
    ax = fig.add_subplot(gs[0, :])
    axs = fig.add_subplot(gs[1, :], sharex=ax) if splits else None
    axc = fig.add_subplot(gs[-1, 0])
    axk = fig.add_subplot(gs[-1, 1], sharex=axc)

    def band(a, sub, name, colour, **line):
        a.fill_between(sub.beta, sub[f"{name}_low"], sub[f"{name}_high"], color=colour,
                       alpha=0.22, lw=0)
        a.plot(sub.beta, sub[name], "o-", color=colour, **line)

    for colour, n in zip(palette(ds.n_tokens.size), ds.n_tokens.values):
        sub = ds.sel(n_tokens=n)
        band(ax, sub, "p_antipodal_pair", colour, ms=3, lw=1.3, label=f"N = {n}")
        band(axc, sub, "p_clustered", colour, ms=2.5, lw=1.1)
        axk.plot(sub.beta, sub.mean_n_clusters, "o-", ms=2.5, lw=1.1, color=colour)
        if not splits:
            continue
        axs.plot(sub.beta, sub.p_antipodal_unbalanced, "s--", ms=2.5, lw=1.0, color=colour,
                 mfc="white")
        if int(n) % 2 == 0:
            band(axs, sub, "p_antipodal_balanced", colour, ms=3, lw=1.3)
            axs.plot(sub.beta, sub.p_antipodal_balanced_predicted, "x", ms=6, mew=1.3,
                     color="0.15", zorder=5)
    ax.plot(ds.beta_fine, ds.p_two_token_theory, color="0.35", ls=":", lw=1.5,
            label="N = 2, limit exit probability (proof of Thm 2)")
    for a in (ax, axs) if splits else (ax,):
        a.axvline(ds.attrs["beta_c"], color="0.5", ls="--", lw=1,
                  label=rf"$\beta_c(d)$ = {ds.attrs['beta_c']:.2f}" if a is ax else None)
    ax.set(ylabel="P(antipodal pair at T)", xlabel=r"$\beta$", ylim=(-0.02, 1.02),
           title="(a) at least one antipodal pair at T (band: 95%)")
    # the curves' legend top left, the references' bottom right: each where no data is
    handles, labels = ax.get_legend_handles_labels()
    ax.add_artist(ax.legend(handles[:-2], labels[:-2], ncol=2, loc="upper left"))
    ax.legend(handles[-2:], labels[-2:], loc="lower right")
    if splits:
        axs.legend(handles=[
            Line2D([], [], color="0.3", marker="o", lw=1.3, ms=4, label="balanced split (even N)"),
            Line2D([], [], color="0.15", marker="x", ls="none", ms=6, mew=1.3,
                   label="balanced: limit prediction"),
            Line2D([], [], color="0.3", marker="s", mfc="white", ls="--", lw=1.0, ms=4,
                   label="unbalanced split")], loc="upper left", frameon=True)
        axs.set(ylim=(-0.02, 1.02), ylabel="fraction", xlabel=r"$\beta$",
                title="(b) antipodal pairs by the split the tokens merged into")
    axc.set(ylabel="P(clustered at T)", xlabel=r"$\beta$",
            ylim=(max(-0.02, float(ds.p_clustered_low.min()) - 0.05), 1.02),
            title="(c) every pair together or antipodal")
    axk.set(ylabel="mean clusters at T", xlabel=r"$\beta$", title="(d) clusters")
    return laid_out(fig, f"d = {ds.attrs['fixed_d']}, {ds.attrs['fixed_attention']} attention, "
                    f"L = {ds.attrs['fixed_L']}, T = {ds.attrs['fixed_T']:g}, "
                    f"{int(ds.n_traj.values.max()):,} trajectories a point")


FIGURE = Figure.declared(
    globals(), "fig6", source="paper",
    description="N >= 3 tokens: P(at least one antipodal pair at T) vs beta for several N, d = 4",
    schema={"n_tokens": integers(3, distinct=True), "betas": reals(0.0, distinct=True),
            "d": integer(2)},
    cell_version="2",  # 2: the reduced path and its split counts
    grid={"n_tokens": "n_tokens", "beta": "betas"},
    fixed=("n_traj", "L", "T", "d", "attention", "tol"))
compute, cost = FIGURE.compute, FIGURE.cost
