r"""Figure 4's page: the panels of its plot, the sentences that read its summary, its tables.

The page states verdicts whose wording depends on the numbers (where the discrete model
follows Proposition 1, what the deeper map and the depth check change, whether the limit
has clustered by the horizon at the reference cells).  They are built here from
:func:`.fig4.summary` and nothing else, so that the notebook's only hidden code is the
glue call: :func:`phrases` (Markdown, ``{glue:md}``) and :func:`page_values` (plain values,
``{glue:text}``, which the chapter can quote).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ... import theory

_LISTS = ("wrong_cells", "undecided_cells")


def plot_map(ax, ds, L, colours, refs, small_step, title, legend=False):
    """One phase diagram: the dominant outcome's colour, fainter as its share drops; the
    curve eps_c, where the step's random part reaches ``small_step`` (dotted; right of it the
    steps are large) and the reference cells (circled); with ``legend``, what each means."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    betas, eps = ds.beta.values, ds.epsilon.values
    db = np.diff(betas).mean() if betas.size > 1 else 1
    de = np.diff(eps).mean() if eps.size > 1 else 1
    extent = (betas[0] - db / 2, betas[-1] + db / 2, eps[0] - de / 2, eps[-1] + de / 2)
    sub = ds.sel(L=L)
    p_s, p_a = sub.p_single.values, sub.p_antipodal.values
    rgb = np.where((p_a > p_s)[..., None], np.array(to_rgb(colours[1])),
                   np.array(to_rgb(colours[0])))
    image = 1.0 - np.maximum(p_s, p_a)[..., None] * (1.0 - rgb)
    ax.imshow(np.transpose(image, (1, 0, 2)), origin="lower", aspect="auto",
              interpolation="nearest", extent=extent)
    bf = np.linspace(betas[0], betas[-1], 300)
    ax.plot(bf, theory.critical_epsilon(bf), "k--", lw=1.5)
    ax.plot(bf, small_step * 2.0 * np.sqrt(L) * np.exp(-bf), color="0.25", ls=":", lw=1.4)
    if refs:
        ax.plot(*zip(*refs), "o", mfc="none", mec="k", ms=6, mew=1.0)
    ax.set_xlim(*extent[:2])
    ax.set_ylim(*extent[2:])
    ax.set(xlabel=r"$\beta$", ylabel=r"$\varepsilon$", title=title)
    if legend:
        line = plt.Line2D
        ax.legend(handles=[
            Patch(color=colours[0], label="single cluster"),
            Patch(color=colours[1], label="antipodal pair"),
            line([], [], color="k", ls="--", label=r"$\varepsilon_c=\sqrt{2e^{-\beta}}$"),
            line([], [], color="0.25", ls=":",
                 label=rf"step $\varepsilon e^\beta/(2\sqrt{{L}})$ = {small_step:g}"),
            line([], [], ls="none", marker="o", mfc="none", mec="k",
                 label="reference cell (limit at T)")], loc="upper right", frameon=True)


def plot_collapse(ax, ds, title):
    """The antipodal fraction against eps / eps_c at every depth scale (solid the deepest,
    dashed the others; band: 95%) for five betas, with the limit's step at 1."""
    from ...style import palette

    Ls, betas = ds.L.values, ds.beta.values
    ratio = ds.epsilon.values[None, :] / ds.epsilon_c.values[:, None]
    shown = np.linspace(0, betas.size - 1, min(5, betas.size)).astype(int)
    styles = ["--", "-"] if len(Ls) == 2 else ["-"] * len(Ls)
    for L, style in zip(Ls, styles):
        sub, deepest = ds.sel(L=L), L == Ls[-1]
        for colour, i in zip(palette(len(shown)), shown):
            if deepest:
                ax.fill_between(ratio[i], sub.p_antipodal_low.values[i],
                                sub.p_antipodal_high.values[i], color=colour, alpha=0.2, lw=0)
            ax.plot(ratio[i], sub.p_antipodal.values[i], style, marker="o", ms=2.5, lw=1,
                    color=colour, label=rf"$\beta$ = {betas[i]:.2g}" if deepest else None)
    x = np.linspace(0, max(3.0, float(np.nanmax(ratio[shown]))), 400)
    ax.plot(x, (x > 1).astype(float), "k-", lw=1.2, label="limit theory (step)")
    if len(Ls) == 2:
        ax.plot([], [], "--", color="0.4", lw=1, label=f"L = {int(Ls[0])}")
        ax.plot([], [], "-", color="0.4", lw=1, label=f"L = {int(Ls[1])} (band: 95%)")
    ax.set_xlim(0, min(4.0, float(np.nanmax(ratio[shown]))))
    ax.set(xlabel=r"$\varepsilon / \varepsilon_c(\beta)$",
           ylabel=r"$P(\mathrm{antipodal\ at\ } T)$", title=title)
    # below the panel: inside it every corner holds data
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4, frameon=False)


def plot_depth_check(ax, ds, colours, title):
    """The depth check: the outcome fractions at the check point against L."""
    check_L = ds.check_L.values
    for name, colour, label in (("single", colours[0], "single cluster"),
                                ("antipodal", colours[1], "antipodal pair")):
        ax.fill_between(check_L, ds[f"depth_p_{name}_low"].values,
                        ds[f"depth_p_{name}_high"].values, color=colour, alpha=0.25, lw=0)
        ax.plot(check_L, ds[f"depth_p_{name}"].values, "o-", color=colour, ms=4, label=label)
    ax.plot(check_L, ds.depth_p_unclustered.values, "s:", color="0.4", ms=3, label="unclustered")
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set(xlabel="depth scale L", ylabel="fraction at T", title=title)
    ax.legend(loc="center right")


def page_values(stats) -> dict:
    """What the page glues as plain values: the summary without its lists of cells, the
    step's random part at beta 4, eps 0.5, L 100 (``step_example``), the depth check's
    antipodal fractions as text (``depth_check_text``) and the chapter's sentence
    (``chapter_reading``)."""
    out = {k: v for k, v in stats.items() if k not in _LISTS}
    out["by_L"] = {L: {k: v for k, v in s.items() if k not in _LISTS}
                   for L, s in stats["by_L"].items()}
    return out | {"step_example": float(theory.hybrid_step_size(4.0, 0.5, 100)),
                  "depth_check_text": ", ".join(f"{p:.2f} at L = {L}" for L, p in zip(
                      stats["depth_check_L"], stats["depth_check_antipodal"])),
                  "chapter_reading": _chapter_reading(stats)}


def phrases(stats) -> dict[str, str]:
    """The page's verdict sentences (Markdown): ``depth_check_reading``,
    ``reference_reading``, ``small_step_reading`` and ``large_step_reading``."""
    limit = f"{stats['check_limit']['antipodal']:.2f}"
    if not stats["depth_check_limit_reached"]:
        depth = "At the largest depth scale of this run the limit behaviour is not yet reached."
    elif stats["check_limit_reached"]:
        depth = ("The disagreement disappears as L grows, towards the limit's own outcome at "
                 f"this point: at T = {stats['check_T']:g} the limit's antipodal fraction is "
                 f"{limit}.")
    else:
        depth = ("The discrete model moves to the antipodal pair as L grows, but the limit "
                 f"itself has not reached it by T = {stats['check_T']:g} (antipodal fraction "
                 f"{limit}).")
    return {"depth_check_reading": depth, "reference_reading": _reference_reading(stats),
            "small_step_reading": _small_step_reading(stats),
            "large_step_reading": _large_step_reading(stats)}


def _reference_reading(stats) -> str:
    ref, L1, L2 = stats["reference"], stats["L_first"], stats["L_last"]
    if not ref["n"]:
        return "This grid has no reference cell."
    if not stats["limit_undecided_near_curve"]:
        return (f"At every one of the {ref['n']} reference cells the limit has clustered by T "
                f"(unclustered fraction at most {ref['limit_unclustered_max']:.2f}).")
    text = ((f"At each of the {ref['n']} reference cells" if ref["n_limit_undecided"] == ref["n"]
             else f"At {ref['n_limit_undecided']} of the {ref['n']} reference cells")
            + " the limit itself has not clustered by T: its unclustered fraction there is "
            f"between {ref['limit_unclustered_min']:.2f} and {ref['limit_unclustered_max']:.2f}, "
            f"its antipodal fraction at most {ref['limit_antipodal_max']:.2f}. At such a cell a "
            "discrete model that follows its limit cannot show the outcome of Proposition 1 at "
            "this horizon, whatever L: what is missing there is a longer T, not a larger L.")
    if stats["ahead_small_step"]:
        lo, hi = (f"{ref[k]:.2g}" for k in ("ahead_rate_ratio_min", "ahead_rate_ratio_max"))
        text += (f" Yet at {ref['n_ahead_small_step']} of them, where the steps at L = {L1} are "
                 f"small (random part at most {ref['ahead_step_max']:.2f}), the map at L = {L1} "
                 f"shows the antipodal pair in {ref['ahead_antipodal_min']:.0%} to "
                 f"{ref['ahead_antipodal_max']:.0%} of the trajectories, against at most "
                 f"{ref['ahead_limit_antipodal_max']:.0%} in the limit: there the chain at L = "
                 f"{L1} approaches −1 {f'about {lo}' if lo == hi else f'{lo} to {hi}'} times as "
                 "fast as its limit (table below), so it agrees with the prediction for t → ∞ "
                 "sooner than the limit does. A small step does not guarantee that the rates "
                 "agree.")
    return text + f" At L = {L2}, " + (
        f"each of the {ref['n']} reference cells is undecided, as the limit is."
        if ref["n_undecided_last"] == ref["n"] else
        f"{ref['n_undecided_last']} of the {ref['n']} reference cells are undecided, as the "
        "limit is.")


def _small_step_reading(stats) -> str:
    L1, wrong, decided = stats["L_first"], stats["n_wrong_small_step"], stats["n_decided_small_step"]
    if not stats["small_step_agree"]:
        return (f"does not hold everywhere at $L$ = {L1} even where a step's random part is "
                f"small: {wrong} of the {decided} decided small-step cells away from the "
                "threshold are on the wrong side.")
    text = (f"holds at $L$ = {L1} for the dominant clustered outcome wherever a step's random "
            "part is small" + (": there the counts above show no decided cell on the wrong side."
                               if wrong == 0 else
                               f", up to {wrong} of the {decided} decided small-step cells."))
    if stats["ahead_small_step"]:
        text += (" This is agreement with the outcome as $t \\to \\infty$, not with the limit at "
                 "$T$: just above the curve at large $\\beta$ the limit itself has mostly not "
                 f"clustered by $T$, and the map at $L$ = {L1} shows the antipodal pair there "
                 "only because its steps speed up the approach to $-1$ (the reference cells "
                 "above).")
    return text


def _large_step_reading(stats) -> str:
    L1, reached = stats["L_first"], stats["depth_check_limit_reached"]
    if not stats["large_step_merges"]:
        return f"the dominant outcome at $L$ = {L1} is the predicted one there too."
    n_wrong = stats["reference"]["n_wrong_first_limit_undecided"]
    longer_T = (f"; just above the curve, where the limit itself has not clustered by $T$ "
                f"({n_wrong} of the reference cells are on the wrong side at $L$ = {L1}), a "
                "larger $L$ leads the map towards undecided, and what is missing there is a "
                "longer $T$" if n_wrong else "")
    deeper = {
        "part_fixed": ", and the deeper map moves part of that region to the predicted side, "
                      "as the limit theorem says it must"
                      + ("; where the limit itself has clustered by $T$, a still larger $L$ "
                         "should move the rest, as the depth check shows at one point" if reached
                         else "; the depth check of this run does not reach the limit at its "
                              "largest $L$ either") + longer_T + ".",
        "all_fixed": ", and the deeper map moves all of that region off the wrong side, as the "
                     "limit theorem says it must.",
        "none_fixed": ", and the deeper map does not move it to the predicted side"
                      + ("; the depth check reaches the limit only at a larger $L$" if reached
                         else "; the depth check of this run does not reach the limit either")
                      + longer_T + "."}.get(stats["depth_reading"], ".")
    return f"the discrete model at $L$ = {L1} merges the pair instead{deeper}"


def _chapter_reading(stats) -> str:
    """The sentence the chapter quotes (plain text: a chapter cannot quote glued Markdown)."""
    ref, L1 = stats["reference"], stats["L_first"]
    text = (f"where a step's random part is small the dominant clustered outcome at L = {L1} "
            "is the predicted one" if stats["small_step_agree"] else
            f"even where a step's random part is small some cells at L = {L1} are on the wrong "
            "side")
    if stats["ahead_small_step"]:
        return text + (
            "; but that is agreement with the outcome as t → ∞, not with the limit at the "
            "horizon: just above the curve at large β the limit itself has mostly not clustered "
            f"by T = {stats['T']:g} (the notebook computes it at {ref['n']} cells), the map at "
            f"L = {L1} shows the antipodal pair there only because its steps speed up the "
            "approach to −1"
            + (f", and at L = {stats['L_last']} those cells are undecided, like the limit"
               if ref["n_undecided_last"] == ref["n_limit_undecided"] else "")
            + "; there a longer horizon, not a larger L, is what is missing")
    if stats["limit_undecided_near_curve"]:
        text += ("; just above the curve at large β the limit itself has mostly not clustered "
                 f"by T = {stats['T']:g}, so there a longer horizon, not a larger L, is what is "
                 "missing")
    return text


def reference_table(stats):
    """At each reference cell: the limit's and each map's antipodal and unclustered
    fractions at T, the step's random part and the ratio of the approach rates to -1."""
    import pandas as pd

    rows = []
    for c in stats["reference"]["cells"]:
        row = {"beta": c["beta"], "eps": round(c["epsilon"], 3),
               "limit: antipodal": c["limit_antipodal"],
               "limit: unclustered": c["limit_unclustered"]}
        for L, v in c["by_L"].items():
            row |= {f"L={L}: antipodal": v["p_antipodal"], f"L={L}: unclustered": v["p_unclustered"],
                    f"L={L}: step": v["step"], f"L={L}: rate / limit rate": v["rate_ratio"]}
        rows.append(row)
    return pd.DataFrame(rows).round(3)


def wrong_cells_text(stats) -> str:
    """At each L: the decided cells on the wrong side by beta, and the undecided ones."""
    lines = []
    for L in stats["Ls"]:
        s = stats["by_L"][L]
        lines.append(f"L = {L}: {s['n_wrong']} decided cells whose dominant outcome contradicts "
                     "the prediction for t -> infinity" + (
                         ", by beta (the noise levels eps where it happens):" if s["wrong_cells"]
                         else "."))
        by_beta = defaultdict(list)
        for b, e in s["wrong_cells"]:
            by_beta[b].append(e)
        lines += [f"  beta = {b:.3g}: {len(es)} cells, eps from {min(es):.2f} to {max(es):.2f}"
                  for b, es in sorted(by_beta.items())]
        lines += [f"  undecided (unclustered fraction above {stats['undecided']:g}): "
                  f"{s['n_undecided']} cells",
                  f"  largest unclustered fraction at T: {s['max_unclustered']:.3f}"]
    return "\n".join(lines)
