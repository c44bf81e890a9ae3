r"""The universality page: its sentences, table and plot, from :func:`.universality.summary`
and the dataset (:mod:`.universality` passes its criteria in; this module imports nothing
from it)."""

from __future__ import annotations

import numpy as np

from ...style import palette
from ..base import knob_attr, laid_out
from ..words import markdown_table, signed

#: Each law's name in the page's sentences.
NAMES = {"gaussian": "Gaussian", "uniform": "uniform", "rademacher": "Rademacher"}


def _verdict(s, alpha) -> str:
    """The opening verdict: whether the law of V measurably matters, and where."""
    tests = (f"summed over the {s['n_tests_between']} informative values of $\\beta$, "
             f"homogeneity p = {s['p_total']:.2f}; the closest call, $\\beta$ = "
             f"{s['beta_of_min_p_between']:g}, has p = {s['min_p_between']:.2g} alone and "
             f"{s['min_p_between_bonferroni']:.2f} after a correction for "
             f"{s['n_tests_between']} tests")
    at_L = f"$L$ = {s['L']}"
    differ = sorted(L for L, p in s.get("p_between_L", {}).items() if p <= alpha)
    if not s["laws_agree"]:
        head = f"**Partly reproduced: the three laws differ detectably at {at_L}** ({tests})"
    elif differ:
        head = f"**Reproduced at {at_L}, where no test tells the three laws apart** ({tests})"
    elif "conv_L_first" in s and not s.get("conv_detects_first"):
        # the positive control fails: agreement is weak evidence
        head = ("**Consistent with universality; this run cannot resolve an effect of the "
                f"value law at any $L$.** No test tells the three laws apart at {at_L} ({tests})")
    else:
        head = ("**Reproduced, as far as this run can resolve: the law of $V$ does not "
                f"measurably matter.** No test tells the three laws apart at {at_L} ({tests})")
    if "conv_L_first" not in s:
        return head + "."
    L0, gap = s["conv_L_first"], s["conv_gap_first"]
    where = (f"{abs(gap):.3f} {'below' if gap < 0 else 'above'} the limit together and differ "
             f"from each other by {s['conv_spread_first']:.4f}, "
             f"{s['conv_spread_first'] / s['conv_se']:.1f} standard errors")
    if differ:
        return head + (". The law of $V$ does measurably matter at $L$ = "
                       + ", ".join(str(L) for L in differ) + f" (homogeneity p at most "
                       f"{alpha:g}); at $L$ = {L0} the three laws end {where}.")
    return head + (f", nor at any $L$ of the convergence sweep, down to $L$ = {L0}, where the "
                   f"law matters most: there the three laws end {where}.")


def _horizon_text(s, b, by_t, agreement_se) -> str:
    """What the horizon check shows at one beta below beta_c."""
    lim, z, decline = s["horizon_limit"][b], s["horizon_max_abs_z"][b], s["horizon_decline_z"][b]
    text = (f"At $\\beta$ = {b:g} the Gaussian chain ends antipodal in "
            + ", ".join(f"{p:.2%} at T = {t:g}" for t, p in by_t.items()))
    if np.isfinite(z):
        text += ("; the limit has " + ", ".join(f"{lim[t]:.2%}" for t in by_t) + ", and the "
                 "chain " + (f"agrees with it (largest deviation {z:.1f} standard errors)"
                             if s["horizon_agrees_limit"][b] else
                             f"deviates from it by up to {z:.1f} standard errors, more than our "
                             f"{agreement_se:g}-standard-error criterion"))
    if not np.isfinite(decline):
        return text + "."
    return text + ". Between the first and the last horizon the fraction " + (
        f"falls by {decline:.1f} standard errors." if s["horizon_declines"][b] else
        f"changes by {signed(-decline, 1)} standard errors: no decline is resolved.")


def phrases(s, alpha, agreement_se) -> dict[str, str]:
    """The page's sentences (Markdown) from the summary ``s``, with the criteria ``alpha``
    (of the tests between the laws) and ``agreement_se`` (of the horizon check)."""
    return {
        "verdict": _verdict(s, alpha),
        "reference_reading": "the limit at T (from the backward equation, error estimate at "
        f"most {s['theory_T_error_max']:.0e})" if s["horizon_theory"] else "the $T = \\infty$ "
        "curve: the limit at T is computed only for softmax attention, so the two comparisons "
        "coincide",
        "shift_reading": "There is no limit at T to compare with the $T = \\infty$ curve here."
        if not s["horizon_theory"] else f"The two references differ by up to "
        f"{s['max_shift_finite_T']:.4f} (at $\\beta$ = {s['beta_of_max_shift_finite_T']:g}, "
        "where the pole $-1$ attracts only weakly and pairs linger near it), " + (
            "so near $\\beta_c$ the $T = \\infty$ curve is not the reference Theorem 1 "
            "predicts at this horizon, and a deviation from it there says nothing about the law "
            "of $V$." if s["finite_T_shift_resolved"] else "a difference this run cannot resolve."),
        "above_c_text": f"Over $\\beta > \\beta_c$ = {s['beta_c']:.3f} alone, where the limit is "
        f"not near zero, {s['share_within_2se_above_c']:.0%} of the points lie within 2 standard "
        "errors." if s["has_beta_above_c"] else f"No $\\beta$ of this run exceeds $\\beta_c$ = "
        f"{s['beta_c']:.3f}.",
        "horizon_text": " ".join(_horizon_text(s, b, by_t, agreement_se)
                                 for b, by_t in s.get("horizon", {}).items()),
        "control_reading": "the test does detect a difference there, so it can see the law of "
        "$V$ where it matters" if s.get("conv_detects_first") else "the test detects no "
        "difference even there, so at this number of trajectories it cannot see the law of $V$ "
        "at any $L$ of this run, and the agreement of the laws is weak evidence"}


def table(ds, reference):
    """Per beta (Markdown): the limit at T (``reference``), the T = infinity probability, each
    law's antipodal fraction with its deviation in standard errors, and the homogeneity p."""
    from IPython.display import Markdown

    laws = [str(v) for v in ds["values"].values]
    rows = [[f"{b:g}", f"{float(reference.sel(beta=b)):.4f}",
             f"{float(ds.p_theory.sel(beta=b)):.4f}"]
            + [f"{float(ds.p_antipodal.sel(values=law, beta=b)):.4f}\u00a0"   # one line a cell
               f"({signed(ds.z_score.sel(values=law, beta=b), 1)})" for law in laws]
            + [f"{float(ds.p_value_between_laws.sel(beta=b)):.2g}"] for b in ds.beta.values]
    return Markdown(markdown_table(["$\\beta$", "limit at T", "$T = \\infty$"]
                                   + [NAMES[law] for law in laws] + ["p, laws equal"], rows))


def plot(ds, reference):
    """(a) P(antipodal) vs beta per law with the limit curve; (b) deviation from
    ``reference``, the limit at T; (c) convergence in L at one beta; stacked."""
    import matplotlib.pyplot as plt

    laws = [str(v) for v in ds["values"].values]
    colours, markers = dict(zip(NAMES, palette(3))), dict(zip(NAMES, "os^"))
    chain = knob_attr(ds, "gaussian_method", "overlap_chain") == "overlap_chain"
    labels = {"gaussian": f"Gaussian ({'exact overlap chain' if chain else 'literal'})",
              "uniform": "uniform (literal)", "rademacher": "Rademacher (literal)"}
    has_conv = "p_antipodal_L" in ds
    fig = plt.figure(figsize=(7.2, 9.4 if has_conv else 6.2))
    gs = fig.add_gridspec(3 if has_conv else 2, 1, height_ratios=[3, 1.4, 2.6][:2 + has_conv])
    ax = fig.add_subplot(gs[0])
    axd = fig.add_subplot(gs[1], sharex=ax)
    betas = ds.beta.values
    width = 0.012 * (betas.max() - betas.min() if betas.size > 1 else 1.0)
    T = f"T = {knob_attr(ds, 'T'):g}"

    def points(ax, x, sub, var, law, y0=0.0, **style):
        p = sub[var].values
        err = np.vstack([p - sub[f"{var}_low"].values, sub[f"{var}_high"].values - p])
        ax.errorbar(x, p - y0, yerr=err, fmt=style.pop("fmt", markers[law]), color=colours[law],
                    capsize=2, **style)

    for i, law in enumerate(laws):
        sub, x = ds.sel(values=law), betas + (i - (len(laws) - 1) / 2) * width
        points(ax, x, sub, "p_antipodal", law, ms=4, lw=1, label=labels[law])
        points(axd, x, sub, "p_antipodal", law, reference.values, ms=3.5, lw=0.8)
    ax.plot(ds.beta_fine, ds.p_theory_fine, color="k", lw=1.3, label=r"limit, $T = \infty$")
    if np.isfinite(ds.p_theory_T.values).any():
        ax.plot(betas, ds.p_theory_T, color="k", ls="none", marker="x", ms=5, label=f"limit at {T}")
    ax.axvline(float(ds.beta_c), color="0.4", ls="--", lw=1, label=r"$\beta_c(d)$")
    ax.set_ylabel(r"$P(\mathrm{antipodal\ at\ } T)$")
    ax.legend(loc="lower right")
    ax.set_title(f"(a) d = {knob_attr(ds, 'd')}, L = {knob_attr(ds, 'L')}, {T}, "
                 f"{int(ds.n_traj.max()):,} trajectories a point; bars Wilson 95%")
    ax.tick_params(labelbottom=False)
    axd.axhline(0, color="0.3", lw=0.8)
    axd.set(ylabel="sim - limit at T", xlabel=r"$\beta$",
            title=f"(b) deviation from the limit at T; laws equal: $\\chi^2$ = "
                  f"{float(ds.chi2_between_laws_total):.1f} on {int(ds.dof_between_laws_total)} "
                  f"d.o.f., p = {float(ds.p_value_between_laws_total):.2g}")
    if has_conv:
        axc, Ls = fig.add_subplot(gs[2]), ds.L_conv.values.astype(float)
        for i, law in enumerate(laws):
            points(axc, Ls * (1 + 0.04 * (i - 1)), ds.sel(values=law), "p_antipodal_L", law,
                   fmt=markers[law] + "-", ms=4, lw=1, label=NAMES[law])
        axc.axhline(float(ds.p_theory_conv), color="k", lw=1.3, label=f"limit at {T}")
        axc.set_xscale("log")
        axc.set_xticks(Ls)
        axc.set_xticklabels([str(int(x)) for x in Ls])
        axc.minorticks_off()
        axc.set(xlabel="L (layers per unit time)", ylabel=r"$P(\mathrm{antipodal\ at\ } T)$",
                title=rf"(c) convergence in L at $\beta$ = {ds.attrs['convergence_beta']:g}, "
                      f"{int(ds.n_traj_L.max()):,} trajectories a point")
        axc.legend(loc="lower right")
    return laid_out(fig, "Universality: two tokens, three laws of the value entries "
                         r"($\sigma^2 = 1$)")
