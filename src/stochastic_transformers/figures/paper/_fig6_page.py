r"""Figure 6's page: the sentences that read its summary, and its tables.

Built from :func:`.fig6.summary` alone, so that the notebook's only hidden code is the glue
call: :func:`phrases` gives the verdict sentences (Markdown, ``{glue:md}``), the tables
are :func:`landmarks_table` and :func:`splits_table`.
"""

from __future__ import annotations

import numpy as np


def phrases(stats, scale, *, z_max) -> dict[str, str]:
    """``increasing_reading``, ``parity_reading``, ``balanced_reading`` (every balanced |z| at
    most ``z_max``, and what the comparison tests), ``odd_reading`` and ``timing_note`` (a
    run at ``scale="smoke"`` is too small to time)."""
    parity, odd = stats["even_onset_earlier"], stats.get("odd_all_unbalanced")
    return {
        "increasing_reading": (
            "At the largest $\\beta$ the fraction grows with $N$: more tokens, more pairs that "
            "can end antipodal." if stats["increasing_in_n_at_last_beta"] else
            "At the largest $\\beta$ the fraction is not monotone in $N$ in this run."),
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
            "No odd $N$ ever merged into a balanced split (it has none), so all its clustered "
            "antipodal pairs are unbalanced splits, which the limit dynamics breaks up and "
            "which survive only as long as they hover (softmax at large $\\beta$). That is the "
            "parity effect: even $N$ reach balanced splits, which are as stable as two tokens "
            "above $\\beta_c$." if odd else
            "**Some odd $N$ merged into a balanced split, which it does not have: the split "
            "counts are wrong.**"),
        "timing_note": (
            "A smoke run is too small to time: compilation and start-up dominate."
            if scale == "smoke" else
            "The median over points leaves out the one-off compilation that the first point "
            "of a fresh process pays.")}


def _balanced_reading(stats, z_max) -> str:
    agree = stats.get("balanced_agree")
    if agree is None:
        return ("This run has no even $N$, hence no balanced split to compare with its limit "
                "prediction.")
    verdict = (f"Every balanced count is within {z_max:g} standard errors of its limit "
               "prediction. " if agree else
               f"**Some balanced count is more than {z_max:g} standard errors from its limit "
               "prediction.** ")
    if not stats.get("balanced_prediction_sharp"):
        return verdict + (
            "At the merge the prediction is still uncertain for many trajectories (the mean "
            "of $p(1-p)$ over the balanced splits, $p$ being a trajectory's predicted "
            f"probability, reaches {stats['balanced_mean_pq_max']:.2f}), so the agreement also "
            "tests how the balanced chain decides between merging and ending antipodal; it "
            "does not test which split the $N$ tokens reach, which is measured here, not "
            "predicted.")
    return verdict + (
        "What this comparison tests is narrow. At the merge the prediction is already almost "
        "certain for each trajectory: the mean of $p(1-p)$ over the balanced splits is at "
        f"most {stats['balanced_mean_pq_max']:.2g}, $p$ being a trajectory's predicted "
        "probability (exactly 0 below $\\beta_c$), and the standard error of a predicted "
        f"count is at most {stats['balanced_se_max']:.1f} trajectories. Above $\\beta_c$ the "
        "two groups are by then nearly antipodal or close to merging, so the agreement checks "
        "that a balanced split, once formed, ends as the two-token diffusion says from where "
        "it is, and that the count at $T$ has reached the $T \\to \\infty$ probability it is "
        "compared with. It does not test which split the $N$ tokens reach, nor how often they "
        "reach a balanced one: that is measured here, not predicted.")


def landmarks_table(stats):
    """Per N: the antipodal fraction at beta = 0, where its band leaves zero, at the largest
    beta with its band, its largest value, the least clustered fraction, the mean clusters."""
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
        "largest (at β)": f"{100 * s['p_max']:.0f}% ({s['beta_at_max']:g})",
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
