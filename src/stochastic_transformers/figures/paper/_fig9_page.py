r"""Figure 9's page: the sentences that read :func:`.fig9.summary` and its table.

The verdict phrases (:func:`phrases`, Markdown for ``{glue:md}``) and the table of the
per-(beta, model) numbers (:func:`table`) are built here, so that the notebook's only hidden
code is the glue call.
"""

from __future__ import annotations

import numpy as np

#: The page's words for the verdicts of :func:`summary` (Markdown): key -> (verdict, words
#: where it holds, words where not).
VERDICT_WORDS = {
    "one_cluster_reading": ("one_cluster_small", "Both end mostly in one cluster",
                            "They do not both end mostly in one cluster"),
    "plateau_reading": (
        "deterministic_plateaus", "the deterministic flow is metastable, visible as the flat "
        "stretches of the thin lines in the top and middle panels on the right.",
        "we do not see clear metastable plateaus of the deterministic flow at this scale."),
    "no_plateau_reading": ("stochastic_no_plateau", "the stochastic model shows none.",
                           "the stochastic model also has some long stays."),
    "hover_reading": (
        "stochastic_hovers", "One thing the paper does not discuss: at the larger $\\beta$ the "
        "stochastic model's clustered configurations do not keep converging: the antipodal "
        "groups keep fluctuating at a small but finite distance from exact antipodality, well "
        "inside the tolerance. The two-cluster reduction of the chapter (ours, section *Two "
        "clusters, exactly* of *Many tokens*) explains it: when the two groups have different "
        "sizes, $1 + Z$ between them is locally a squared Bessel process pushed away from 0, "
        "and it hovers at a depth of order $(\\alpha_1 - \\alpha_2)^2$. With softmax "
        "$\\alpha_1 - \\alpha_2 \\approx 2e^{-2\\beta}(m_1/m_2 - m_2/m_1)$, so that depth is of "
        "order $4e^{-4\\beta}(m_1/m_2 - m_2/m_1)^2$, with a prefactor that varies a lot from "
        "split to split (groups of equal size have $\\alpha_1 = \\alpha_2$ and converge). So "
        "for $N \\ge 3$ the antipodal configurations that persist are near-antipodal, not "
        "exactly antipodal.",
        "At this scale the stochastic model's clustering gap at the larger $\\beta$ is not "
        "clearly above its value at the smaller one, so the hovering of unbalanced splits "
        "(chapter *Many tokens*, section *Two clusters, exactly*) does not show."),
}


def phrases(stats, scale: str) -> dict[str, str]:
    """The page's verdict phrases (Markdown, with math) from :func:`summary`'s verdicts
    (:data:`VERDICT_WORDS`, the two rate readings, the small-beta gap); ``timing_note`` says
    what a cost projected from a run at ``scale`` is worth."""
    v = stats["verdicts"]
    r_small, r_large = v["ratio_small"], v["ratio_large"]
    gap_small = stats["small"]["stochastic"]["median_gap_T"]
    out = {key: yes if v[verdict] else no for key, (verdict, yes, no) in VERDICT_WORDS.items()}
    out["small_reading"] = (
        (f"the deterministic flow takes {r_small:.2g} times as long as the stochastic model to "
         "reach a clustered configuration (median over trajectories)" if r_small is not None
         else "the deterministic flow does not cluster within $T$")
        + (": comparable rates, as the paper says." if v["comparable_small"] else
           ": not what the paper calls comparable."))
    out["large_reading"] = (
        (f"the ratio is {r_large:.2g}" if r_large is not None else
         "the deterministic flow has not clustered half of its trajectories within $T$, while "
         "the stochastic model has")
        + (": the stochastic model converges markedly faster, as the paper says."
           if v["faster_large"] else ": a smaller gap than the paper suggests."))
    out["small_gap_text"] = (f"{gap_small:.1e}" if gap_small > 1e-15
                             else "rounding level ($10^{-16}$ or less)")
    out["timing_note"] = (
        "This projection comes from a smoke run, dominated by fixed overheads; the quick scale "
        "gives a truer one." if scale == "smoke" else
        "The projection scales this run's measured cost by the number of token-layers.")
    return out


def table(stats, betas) -> str:
    """The page's table (Markdown): per beta and model, the clustered share at T, the
    median and 90% times to cluster, the plateaus, the groups and antipodal pairs at T."""
    def when(x):
        return f"later than T = {stats['T']:g}" if not np.isfinite(x) else f"t = {x:.3g}"

    rows = [f"| {b:g} | {m} | {100 * s['p_clustered_T']:.0f}% | {when(s['median_t_clustered'])} "
            f"| {when(s['q90_t_clustered'])} | {s['median_longest_plateau']:.3g} "
            f"| {s['max_longest_plateau']:.3g} | {100 * s['share_plateau_over_10']:.0f}% "
            f"| {s['mean_n_clusters_T']:.2f} | {100 * s['p_antipodal_pair_T']:.0f}% |"
            for b in betas for m in stats["small"] for s in (stats["by"][(m, float(b))],)]
    return ("| $\\beta$ | dynamics | clustered at T | median time to cluster | 90% clustered by "
            "| median longest plateau | longest plateau | plateau > 10 | mean groups at T "
            "| antipodal pair at T |\n|---|---|---|---|---|---|---|---|---|---|\n"
            + "\n".join(rows))
