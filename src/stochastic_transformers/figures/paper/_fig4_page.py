r"""Figure 4's page: the panels of its plot and the sentences and tables that read
:func:`.fig4.summary` (Markdown, for ``{glue:md}``)."""

from __future__ import annotations

import numpy as np

from ... import theory
from ...style import palette
from ..words import markdown_table


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
    ax.set(xlim=extent[:2], ylim=extent[2:], xlabel=r"$\beta$", ylabel=r"$\varepsilon$",
           title=title)


def map_legend(ax, colours, small_step):
    """What the maps' colours, curves and circles mean, in an axes of its own."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ax.axis("off")
    ax.legend(handles=[
        Patch(color=colours[0], label="single cluster dominant"),
        Patch(color=colours[1], label="antipodal pair dominant"),
        Line2D([], [], ls="none", marker="o", mfc="none", mec="k",
               label="reference cell (limit at T)"),
        Line2D([], [], color="k", ls="--", label=r"$\varepsilon_c=\sqrt{2e^{-\beta}}$"),
        Line2D([], [], color="0.25", ls=":",
               label=rf"random step $\varepsilon e^\beta/(2\sqrt{{L}})$ = {small_step:g}")],
        loc="center", ncol=2, frameon=False)


def plot_collapse(ax, ds, title):
    """The antipodal fraction against eps / eps_c at every depth scale (solid the deepest,
    dashed the others; band: 95%) for five betas, with the limit's step at 1; returns the
    legend's handles and labels (drawn below the panel by the caller)."""
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
    ax.set(xlim=(0, min(4.0, float(np.nanmax(ratio[shown])))), title=title,
           xlabel=r"$\varepsilon / \varepsilon_c(\beta)$", ylabel="antipodal at T")
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
    ax.set(xscale="log", ylim=(-0.03, 1.03), xlabel="depth scale L", ylabel="fraction at T",
           title=title)
    ax.legend(loc="center right")


def _misses(s) -> str:
    n_small, wrong_small = s["n_decided_small_step"], s["n_wrong_small_step"]
    text = ("no decided cell has small steps" if not n_small else
            f"all {n_small:,} decided cells where a layer's random step is small are on it"
            if not wrong_small else f"{wrong_small:,} of the {n_small:,} decided cells where "
            "a layer's random step is small are not")
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
        text += (" No miss stays on the wrong side" if s["depth_reading"] == "all_fixed" else
                 f" {s['still_wrong']:,} of the {s['n_wrong']:,} misses stay")
        text += (f"; only one point (panel d) was rerun to $L$ = {s['depth_check_L'][-1]:,}, "
                 "and there the miss disappears.")
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
    ref = s["reference"]
    if not ref["n"]:
        return "This grid has no reference cell."
    if not s["limit_undecided_near_curve"]:
        return (f"The limit has clustered by T at each of the {ref['n']} reference cells "
                f"(unclustered fraction at most {ref['limit_unclustered_max']:.2f}).")

    def of(k):
        return f"each of the {ref['n']}" if k == ref["n"] else f"{k} of the {ref['n']}"

    text = (f"At {of(ref['n_limit_undecided'])} reference cells the limit itself has not "
            f"clustered by T (unclustered fraction {ref['limit_unclustered_min']:.2f} to "
            f"{ref['limit_unclustered_max']:.2f}): what is missing there is a longer horizon, "
            "not a larger L.")
    if s["ahead_small_step"]:
        text += (f" The map at L = {s['L_first']} nonetheless shows the antipodal pair at "
                 f"{ref['n_ahead_small_step']} of them ({ref['ahead_antipodal_min']:.0%} to "
                 f"{ref['ahead_antipodal_max']:.0%} of the trajectories, against at most "
                 f"{ref['ahead_limit_antipodal_max']:.0%} in the limit): there its small but "
                 "finite steps approach −1 faster than the limit does (last row of each "
                 "depth in the table).")
    return text + (f" At L = {s['L_last']} the map is undecided at "
                   f"{of(ref['n_undecided_last'])} reference cells.")


def _tables(stats) -> dict[str, str]:
    """``counts_table``: at each L the cells off the band, undecided, decided and on the
    predicted side, in all and by the size of a step's random part; ``reference_table``: at
    each reference cell the limit's and each map's fractions at T, the step's random part
    and the ratio of the approach rates to -1."""
    by_L, cells = stats["by_L"], stats["reference"]["cells"]

    def agree(s, suffix=""):
        return f"{s['n_agree' + suffix]:,} of {s['n_decided' + suffix]:,}"

    counts = markdown_table([""] + [f"L = {L}" for L in by_L], [
        [name] + [value(s) for s in by_L.values()] for name, value in (
            ("cells off the band", lambda s: f"{s['n_away']:,}"),
            ("undecided at T", lambda s: f"{s['n_undecided']:,}"),
            ("on the predicted side", agree), ("share", lambda s: f"{s['share_agree']:.0%}"),
            ("small steps: on it", lambda s: agree(s, "_small_step")),
            ("large steps: on it", lambda s: agree(s, "_large_step")))], numeric=True)
    rows = [("ε", lambda c: c["epsilon"]), ("limit: antipodal", lambda c: c["limit_antipodal"]),
            ("limit: unclustered", lambda c: c["limit_unclustered"])]
    for L in by_L:
        rows += [(f"L = {L}: {name}", lambda c, L=L, k=k: c["by_L"][L][k]) for name, k in (
            ("antipodal", "p_antipodal"), ("unclustered", "p_unclustered"),
            ("random step", "step"), ("rate / limit's", "rate_ratio"))]
    reference = markdown_table([""] + [f"β = {c['beta']:g}" for c in cells], [
        [name] + [f"{round(v, 2) + 0.0:.2f}".replace("-", "−") if np.isfinite(v) else None
                  for v in map(value, cells)] for name, value in rows],
        numeric=True) if cells else ""
    return {"counts_table": counts, "reference_table": reference}


def phrases(stats) -> dict[str, str]:
    """The page's data-dependent Markdown: ``misses`` (where the map at the first L leaves
    the predicted side), ``deeper`` (what the deepest map changes), ``depth`` (the depth
    check), ``horizon`` (the limit at T at the reference cells) and the two tables."""
    return {"misses": _misses(stats), "deeper": _deeper(stats), "depth": _depth(stats),
            "horizon": _horizon(stats), **_tables(stats)}
