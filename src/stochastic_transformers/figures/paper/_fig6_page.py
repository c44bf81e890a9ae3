r"""Figure 6's page: panel (b) of its plot, the sentences that read its summary, its tables.

Built from :func:`.fig6.summary` alone, so that the notebook's only hidden code is the glue
call: :func:`phrases` gives the verdict sentences (Markdown, ``{glue:md}``), the tables
are :func:`landmarks_table` and :func:`splits_table`.
"""

from __future__ import annotations

import numpy as np


def plot_splits(ax, sub, colour, even):
    """Panel (b) for one N: its antipodal pairs at T from unbalanced splits and, for even N,
    from balanced ones with their limit prediction (crosses)."""
    ax.plot(sub.beta, sub.p_antipodal_unbalanced, "s--", ms=2.5, lw=1.0, color=colour,
            mfc="white")
    if even:
        ax.fill_between(sub.beta, sub.p_antipodal_balanced_low, sub.p_antipodal_balanced_high,
                        color=colour, alpha=0.22, lw=0)
        ax.plot(sub.beta, sub.p_antipodal_balanced, "o-", ms=3, lw=1.3, color=colour)
        ax.plot(sub.beta, sub.p_antipodal_balanced_predicted, "x", ms=6, mew=1.3,
                color="0.15", zorder=5)


def splits_legend(ax):
    """Panel (b)'s legend (the colours are those of panel (a)), labels and title."""
    from matplotlib.lines import Line2D

    ax.legend(handles=[
        Line2D([], [], color="0.3", marker="o", lw=1.3, ms=4, label="balanced split (even N)"),
        Line2D([], [], color="0.15", marker="x", ls="none", ms=6, mew=1.3,
               label="balanced: limit prediction"),
        Line2D([], [], color="0.3", marker="s", mfc="white", ls="--", lw=1.0, ms=4,
               label="unbalanced split")], loc="upper left", frameon=True)
    ax.set(ylim=(-0.02, 1.02), ylabel="fraction", xlabel=r"$\beta$",
           title="(b) antipodal pairs by the split the tokens merged into")


def phrases(stats, *, z_max) -> dict[str, str]:
    """``onset`` (where the curves leave zero, and their values at the largest beta),
    ``parity_reading``, ``balanced_reading`` (every balanced |z| at most ``z_max``, and
    what the comparison tests) and ``odd_reading``."""
    parity, odd = stats["even_onset_earlier"], stats.get("odd_all_unbalanced")
    return {
        "onset": _onset(stats),
        "parity_reading": (
            "This run has only one parity of $N$, so it cannot show an effect of parity on the "
            "onset." if parity is None else
            "The onset depends on the parity of $N$: the band leaves zero at a smaller $\\beta$ "
            "for every even $N$ than for any odd $N$ (second column of the first table)."
            if parity else
            "The onset does not separate by the parity of $N$ in this run: some odd $N$ leaves "
            "zero no later than some even $N$."),
        "balanced_reading": _balanced_reading(stats, z_max),
        "odd_reading": (
            "No odd $N$ ever merged into a balanced split (it has none): all its antipodal "
            "pairs come from unbalanced splits, which the limit dynamics breaks up and which "
            "survive only while they hover (softmax at large $\\beta$). Even $N$ also reach "
            "balanced splits, as stable as two tokens above $\\beta_c$: that is the parity "
            "effect." if odd else
            "**Some odd $N$ merged into a balanced split, which it does not have: the split "
            "counts are wrong.**")}


def _onset(stats) -> str:
    per_n, b_last = stats["per_n"], stats["beta_last"]
    found = {n: r["first_beta_positive"] for n, r in per_n.items()
             if np.isfinite(r["first_beta_positive"])}
    if not found:
        return "for no $N$ does the 95% band of the fraction leave zero."
    who = ("for every $N$" if len(found) == len(per_n) else
           "for $N$ = " + ", ".join(str(n) for n in found) + " only")
    lo, hi = min(found.values()), max(found.values())
    last = {n: r["p_last"] for n, r in per_n.items()}
    n_lo, n_hi = min(last, key=last.get), max(last, key=last.get)
    return (f"{who} the 95% band of the fraction leaves zero, from $\\beta$ = {lo:g}"
            + (f" to {hi:g} depending on $N$" if hi > lo else "")
            + f", and at $\\beta$ = {b_last:g} the fraction is {last[n_lo]:.0%} (N = {n_lo}) "
            f"to {last[n_hi]:.0%} (N = {n_hi})"
            + (", growing with $N$." if stats["increasing_in_n_at_last_beta"] else "."))


def _balanced_reading(stats, z_max) -> str:
    agree = stats.get("balanced_agree")
    if agree is None:
        return "This run has no even $N$, hence no balanced split to compare."
    verdict = (f"Every balanced count is within {z_max:g} standard errors of its limit "
               "prediction. " if agree else
               f"**Some balanced count is more than {z_max:g} standard errors from its limit "
               "prediction.** ")
    pq = stats["balanced_mean_pq_max"]
    if not stats.get("balanced_prediction_sharp"):
        return verdict + (
            f"At the merge the prediction is still uncertain (the mean of $p(1-p)$ over the "
            f"balanced splits, $p$ a trajectory's predicted probability, reaches {pq:.2f}), so "
            "this also tests how a balanced split decides; which split the $N$ tokens reach "
            "is measured here, not predicted.")
    return verdict + (
        "What this comparison tests is narrow: at the merge the prediction is already almost "
        f"certain (the mean of $p(1-p)$ over the balanced splits is at most {pq:.2g}, $p$ a "
        "trajectory's predicted probability; the standard error of a predicted count is at "
        f"most {stats['balanced_se_max']:.1f} trajectories). It checks that a balanced split, "
        "once formed, ends as the two-token diffusion says from where it is; which split the "
        "$N$ tokens reach, and how often it is balanced, is measured here, not predicted.")


def landmarks_table(stats):
    """Per N: the antipodal fraction at beta = 0, where its band leaves zero, at the largest
    beta with its band, the least clustered fraction, the mean clusters."""
    import pandas as pd

    b_last = stats["beta_last"]

    def beta(b):
        return "never" if not np.isfinite(b) else f"{b:g}"

    return pd.DataFrame([{
        "N": n,
        "at β = 0": f"{100 * s['p_at_beta0']:.1f}%",
        "band above 0 from β": beta(s["first_beta_positive"]),
        f"at β = {b_last:g} [95% band]": f"{100 * s['p_last']:.0f}% "
                                          f"[{100 * s['low_last']:.0f}, {100 * s['high_last']:.0f}]%",
        "clustered, at least": f"{100 * s['min_clustered']:.0f}%",
        f"mean clusters at β = {b_last:g}": f"{s['mean_clusters_last']:.2f}",
    } for n, s in stats["per_n"].items()]).set_index("N")


def splits_table(stats):
    """Per N at the largest beta: the splits the tokens merged into, where the antipodal
    pairs come from, and (even N) the balanced fraction against its limit prediction."""
    import pandas as pd

    rows = []
    for n, s in stats["per_n"].items():
        rows.append({"N": n})
        if "share_balanced_last" not in s:
            continue
        even = n % 2 == 0 and np.isfinite(s["balanced_max_abs_z"])
        rows[-1].update({
            "one point": f"{100 * s['frac_merged_one_last']:.1f}%",
            "balanced": f"{100 * s['frac_balanced_last']:.1f}%",
            "unbalanced": f"{100 * s['frac_unbalanced_last']:.1f}%",
            "mean merge time": f"{s['mean_merge_time']:.1f}",
            "pairs from balanced": f"{100 * s['share_balanced_last']:.0f}%",
            "from unbalanced": f"{100 * s['share_unbalanced_last']:.0f}%",
            "not merged": f"{100 * s['share_unmerged_last']:.0f}%",
            "balanced: observed / predicted": (f"{100 * s['p_balanced_last']:.1f}% / "
                                               f"{100 * s['predicted_balanced_last']:.1f}%"
                                               if even else "–"),
            "largest |z|": f"{s['balanced_max_abs_z']:.1f}" if even else "–"})
    return pd.DataFrame(rows).set_index("N")
