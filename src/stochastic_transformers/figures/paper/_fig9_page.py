r"""Figure 9's page: the verdict on the paper's claims and the table (Markdown), from
:func:`.fig9.summary`."""

from __future__ import annotations

import numpy as np

#: The paper's claims of appendix D.2, as the verdicts of :func:`.fig9.summary` that test them.
CLAIMS = {"comparable_small": "comparable rates at small $\\beta$",
          "one_cluster_small": "mostly one cluster at small $\\beta$",
          "faster_large": "a markedly faster stochastic model at large $\\beta$",
          "deterministic_plateaus": "a metastable deterministic flow",
          "stochastic_no_plateau": "no metastability of the stochastic model"}


def phrases(stats) -> dict[str, str]:
    """``verdict``: reproduced when every claim of :data:`CLAIMS` holds, partly (naming those
    that do not) or not at all; ``table``: per beta and model, the clustered share at T, the
    median and 90% times to cluster, the longest plateaus and the groups at T."""
    v = stats["verdicts"]
    failed = [words for key, words in CLAIMS.items() if not v[key]]
    verdict = ("**Reproduced.**" if not failed else "**Not reproduced.**"
               if len(failed) == len(CLAIMS) else
               "**Partly reproduced:** we do not see " + "; ".join(failed) + ".")

    def when(x):
        return "later than $T$" if not np.isfinite(x) else f"{x:.3g}"

    rows = [f"| {b:g} | {m} | {100 * s['p_clustered_T']:.0f}% | {when(s['median_t_clustered'])} "
            f"| {when(s['q90_t_clustered'])} | {s['median_longest_plateau']:.3g} "
            f"| {s['max_longest_plateau']:.3g} | {100 * s['share_plateau_over_10']:.1f}% "
            f"| {s['mean_n_clusters_T']:.2f} | {100 * s['p_antipodal_pair_T']:.1f}% |"
            for (m, b), s in sorted(stats["by"].items(), key=lambda item: item[0][::-1])]
    table = ("| $\\beta$ | dynamics | clustered at $T$ | median time to cluster | 90% by "
             "| median longest plateau | longest | plateau > 10 | mean groups at $T$ "
             "| antipodal pair at $T$ |\n" + "|---" * 10 + "|\n" + "\n".join(rows))
    return {"verdict": verdict, "table": table}
