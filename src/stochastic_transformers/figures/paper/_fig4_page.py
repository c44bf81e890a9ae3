r"""Figure 4's page: the panels of its plot, the sentences that read its summary, its tables.

The page's verdict sentences depend on the numbers (where the discrete model follows
Proposition 1, what the depth check shows, whether the limit has clustered by the horizon
at the reference cells); :func:`phrases` builds them from :func:`.fig4.summary` alone, so
that the notebook's only hidden code is the glue call.
"""

from __future__ import annotations

import numpy as np

from ... import theory


def plot_map(ax, ds, L, colours, refs, small_step, title):
    """One phase diagram: the dominant outcome's colour, fainter as its share drops; the
    curve eps_c, where the step's random part reaches ``small_step`` (dotted; right of it the
    steps are large) and the reference cells (circled)."""
    from matplotlib.colors import to_rgb

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
        ax.plot(*zip(*refs), "o", mfc="none", mec="k", ms=5, mew=1.0)
    ax.set_xlim(*extent[:2])
    ax.set_ylim(*extent[2:])
    ax.set(xlabel=r"$\beta$", ylabel=r"$\varepsilon$", title=title)


def map_legend(ax, colours, small_step):
    """What the maps' colours, curves and circles mean, in an axes of its own."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    line = plt.Line2D
    ax.axis("off")
    ax.legend(handles=[
        Patch(color=colours[0], label="single cluster dominant"),
        Patch(color=colours[1], label="antipodal pair dominant"),
        line([], [], ls="none", marker="o", mfc="none", mec="k",
             label="reference cell (limit at T)"),
        line([], [], color="k", ls="--", label=r"$\varepsilon_c=\sqrt{2e^{-\beta}}$"),
        line([], [], color="0.25", ls=":",
             label=rf"random step $\varepsilon e^\beta/(2\sqrt{{L}})$ = {small_step:g}")],
        loc="center", ncol=2, frameon=False)


def plot_collapse(ax, ds, title):
    """The antipodal fraction against eps / eps_c at every depth scale (solid the deepest,
    dashed the others; band: 95%) for five betas, with the limit's step at 1; returns the
    legend's handles and labels (drawn below the panel by the caller)."""
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
    ax.plot(x, (x > 1).astype(float), "k-", lw=1.2, label="limit (a step)")
    if len(Ls) == 2:
        ax.plot([], [], "--", color="0.4", lw=1, label=f"L = {int(Ls[0])}")
        ax.plot([], [], "-", color="0.4", lw=1, label=f"L = {int(Ls[1])} (band: 95%)")
    ax.set_xlim(0, min(4.0, float(np.nanmax(ratio[shown]))))
    ax.set(xlabel=r"$\varepsilon / \varepsilon_c(\beta)$", ylabel="antipodal at T",
           title=title)
    return ax.get_legend_handles_labels()


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
    """The summary as the page glues it: without its lists of cells (thousands of keys that
    no sentence quotes; the maps and the tables show them)."""
    def keep(d, drop=("wrong_cells", "undecided_cells", "cells")):
        return {k: keep(v) if isinstance(v, dict) else v for k, v in d.items() if k not in drop}

    return keep(stats)


def phrases(stats) -> dict[str, str]:
    """The page's data-dependent sentences (Markdown): ``misses`` (where the map at the
    first L leaves the predicted side), ``deeper`` (what the deepest map changes),
    ``depth`` (what the depth check shows) and ``horizon`` (the limit at T at the
    reference cells)."""
    return {"misses": _misses(stats), "deeper": _deeper(stats), "depth": _depth(stats),
            "horizon": _horizon(stats)}


def _misses(s) -> str:
    n_small, wrong_small = s["n_decided_small_step"], s["n_wrong_small_step"]
    text = ("no decided cell has small steps" if not n_small else
            f"all {n_small:,} decided cells where a layer's random step is small are on it"
            if not wrong_small else
            f"{wrong_small:,} of the {n_small:,} decided cells where a layer's random step is "
            "small are not")
    large = s["n_wrong_large_step_above"]
    if large and large == s["n_wrong"]:
        text += (", and every miss lies above the curve where the steps are large; there the "
                 "discrete pair merges instead of ending antipodal")
    elif large:
        text += (f"; {large:,} misses lie above the curve where the steps are large, where "
                 "the discrete pair merges instead")
    return text + "."


def _deeper(s) -> str:
    first, last = s["share_agree"], s["last"]["share_agree"]
    if s["L_first"] == s["L_last"]:
        return ""
    verb = ("rises to" if last > first + 0.005 else "falls to" if last < first - 0.005
            else "stays at")
    text = f"At $L$ = {s['L_last']} that share {verb} **{last:.0%}**."
    if verb == "rises to" and s["depth_check_limit_reached"] and s["check_limit_reached"]:
        text += (f" Of the {s['n_wrong']:,} misses at $L$ = {s['L_first']}, {s['fixed_by_depth']:,}"
                 f" are on the predicted side at $L$ = {s['L_last']}, {s['undecided_by_depth']:,} "
                 f"are undecided and {s['still_wrong']:,} remain. Only one point (panel d) was "
                 f"rerun to $L$ = {s['depth_check_L'][-1]:,}, and there the miss disappears.")
    return text


def _depth(s) -> str:
    pa, Ls = s["depth_check_antipodal"], s["depth_check_L"]
    text = (f"At $\\beta$ = {s['check_beta']:g}, $\\varepsilon$ = {s['check_epsilon']:g} "
            f"(panel d) the antipodal fraction goes from {pa[0]:.2f} at L = {Ls[0]:,} to "
            f"{pa[-1]:.2f} at L = {Ls[-1]:,}")
    if not s["depth_check_limit_reached"]:
        return text + ": the largest L of this run does not reach the limit's outcome."
    if s["check_limit_reached"]:
        return text + (", the limit's own outcome there at T: at this point the miss is "
                       "the discretisation, and it recedes as L grows, as the limit theorem "
                       "says it must.")
    return text + (f", although the limit itself has not reached the antipodal pair by "
                   f"T = {s['check_T']:g}.")


def _horizon(s) -> str:
    ref, L1, L2 = s["reference"], s["L_first"], s["L_last"]
    if not ref["n"]:
        return "This grid has no reference cell."
    if not s["limit_undecided_near_curve"]:
        return (f"The limit has clustered by T at each of the {ref['n']} reference cells "
                f"(unclustered fraction at most {ref['limit_unclustered_max']:.2f}).")
    text = (f"At {_of(ref['n_limit_undecided'], ref['n'])} reference cells the limit "
            "itself has not clustered by T (unclustered fraction "
            f"{ref['limit_unclustered_min']:.2f} to {ref['limit_unclustered_max']:.2f}): what "
            "is missing there is a longer horizon, not a larger L.")
    if s["ahead_small_step"]:
        text += (f" The map at L = {L1} nonetheless shows the antipodal pair at "
                 f"{ref['n_ahead_small_step']} of them ({ref['ahead_antipodal_min']:.0%} to "
                 f"{ref['ahead_antipodal_max']:.0%} of the trajectories, against at most "
                 f"{ref['ahead_limit_antipodal_max']:.0%} in the limit): there its small but "
                 "finite steps approach −1 faster than the limit does (last row of each "
                 "depth in the table).")
    return text + (f" At L = {L2} the map is undecided at "
                   f"{_of(ref['n_undecided_last'], ref['n'])} reference cells.")


def _of(k, n) -> str:
    return f"each of the {n}" if k == n else f"{k} of the {n}"


def _number(value) -> str:
    """Two decimals with a true minus sign, a dash for a missing value, never a negative
    zero."""
    if not np.isfinite(value):
        return "–"
    return f"{value:.2f}".replace("-0.00", "0.00").replace("-", "−")


def counts_table(stats):
    """At each L: the cells away from the band, undecided, decided and on the predicted side,
    in all and by the size of a step's random part."""
    import pandas as pd

    def agree(s, suffix):
        return f"{s['n_agree' + suffix]:,} of {s['n_decided' + suffix]:,}"

    return pd.DataFrame({f"L = {L}": {
        "cells off the band": f"{s['n_away']:,}",
        "undecided at T": f"{s['n_undecided']:,}",
        "on the predicted side": agree(s, ""),
        "share": f"{s['share_agree']:.0%}",
        "small steps: on it": agree(s, "_small_step"),
        "large steps: on it": agree(s, "_large_step")} for L, s in stats["by_L"].items()})


def reference_table(stats):
    """At each reference cell (columns): the limit's and each map's antipodal and unclustered
    fractions at T, the step's random part and the ratio of the approach rates to -1."""
    import pandas as pd

    columns = {}
    for c in stats["reference"]["cells"]:
        rows = {"ε": _number(c["epsilon"]), "limit: antipodal": _number(c["limit_antipodal"]),
                "limit: unclustered": _number(c["limit_unclustered"])}
        for L, v in c["by_L"].items():
            rows |= {f"L = {L}: antipodal": _number(v["p_antipodal"]),
                     f"L = {L}: unclustered": _number(v["p_unclustered"]),
                     f"L = {L}: random step": _number(v["step"]),
                     f"L = {L}: rate / limit's": _number(v["rate_ratio"])}
        columns[f"β = {c['beta']:g}"] = rows
    return pd.DataFrame(columns)
