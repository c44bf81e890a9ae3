r"""Theorem 1's page: the sentences that read its summary, its table and its plot.

The page's verdicts depend on the numbers (the order the fits read, whether the pure power
law describes the data, what the control variate does at the smallest L).  They are built
here from :func:`.thm1.summary` and the dataset alone, so that the notebook's only hidden
code is the glue call; :mod:`.thm1` passes its criteria in (this module imports nothing
from it).
"""

from __future__ import annotations

import numpy as np

from ...stats import fit_corrected_order
from ..base import knob_attr, laid_out


def _verdict(s, agreement_se, p_min) -> str:
    """The opening verdict: whether the run converges and at which order, over which L."""
    span = f"$L$ = {s['fit_L_min']} to {s['L_largest']}"
    errors = (f"The largest weak error is {s['weak_error_smallest_L']:.2g} at $L$ = "
              f"{s['L_smallest']} and {s['weak_error_largest_L']:.2g} at $L$ = "
              f"{s['L_largest']}. ")
    order = (f"fitted with its second-order term, the order is {s['order_corrected']:.3f} ± "
             f"{s['order_corrected_se']:.3f}")
    return {
        "first_order": "**Reproduced, at the first order we expect.** " + errors
        + f"Over {span} the error decays like $1/L$: {order}, and $C_1/L + C_2/L^2$ "
        f"describes all {s['n_pairs']} pairs $(f, t)$, with $C_1$ resolved from zero.",
        "not_first_order": "**Convergence reproduced; first order not observed.** " + errors
        + f"Over {span}, {order}, further than {agreement_se:g} standard errors from 1.",
        "first_term_unresolved": "**Convergence reproduced; first order only partly "
        "observed.** " + errors + f"Over {span}, {order}, consistent with 1, but the "
        "first-order constant is not resolved from zero.",
        "poor_fit": "**Convergence reproduced; order not read.** " + errors + f"Over {span} "
        f"one of the two fits has a $\\chi^2$ p-value below {p_min:g}: it does not describe "
        "the data, so no order is read.",
        "too_few_points": "**Convergence only; no order read.** " + errors + "This run has "
        f"fewer than four depths at $L \\ge$ {s['fit_L_min']}, too few to fit the order with "
        "its second-order term."}[s["verdict"]]


def _fit_text(s) -> str:
    if s["verdict"] == "too_few_points":
        return "This run has too few depths to fit the order with its second-order term."
    return (f"For $f = {s['headline_label']}$, $t = {s['headline_time']:g}$ (the largest error "
            f"at the largest $L$), $C_1/L + C_2/L^2$ leaves $\\chi^2$ = "
            f"{s['two_term_chi2']:.1f} on {s['two_term_dof']} degrees of freedom (p = "
            f"{s['two_term_p_value']:.2f}), with $C_1$ = {s['C1']:.3f} ± {s['C1_se']:.3f} "
            f"({s['C1_snr']:.0f} standard errors from zero) and $C_2$ = {s['C2']:.2f} ± "
            f"{s['C2_se']:.2f}; $C L^{{-p}} + D L^{{-2}}$ gives $p$ = "
            f"{s['order_corrected']:.3f} ± {s['order_corrected_se']:.3f} ($\\chi^2$ = "
            f"{s['corrected_chi2']:.1f} on {s['corrected_dof']} degrees of freedom, p = "
            f"{s['corrected_p_value']:.2f}).")


def _pure_text(s) -> str:
    if s["verdict_pure"] == "too_few_points":
        return "A pure power law needs at least two resolved points; this run has fewer."
    text = (f"The pure power law $C L^{{-p}}$ on $\\max_{{f,t}}|e|$ gives order "
            f"{s['order']:.2f} ± {s['order_se']:.2f}")
    if not s["has_chi2"]:
        return text + "."
    text += (f", and its $\\chi^2$ test {'accepts' if s['pure_fits'] else 'rejects'} it "
             f"(reduced $\\chi^2$ = {s['chi2_red']:.1f} on {s['pure_dof']} degrees of "
             f"freedom, p = {s['pure_p_value']:.3f})")
    if s["pure_fits"]:
        return text + "."
    return text + (": with no second-order term it absorbs that term into its exponent, and "
                   f"in the two-term model that term is {s['second_order_share_at_L_min']:.0%}"
                   f" of the error at $L$ = {s['fit_L_min']}.")


def phrases(s, agreement_se, p_min) -> dict[str, str]:
    """The page's data-dependent sentences (Markdown) from the summary ``s``, with the
    criteria ``agreement_se`` (an order this many standard errors from 1 counts as 1) and
    ``p_min`` (a fit with a smaller chi-square p-value does not describe the data)."""
    pairs = ("" if s["verdict"] == "too_few_points" else
             f"Over all {s['n_pairs']} pairs (the table above), {s['n_pairs_two_term_fit']} are "
             f"described by the two-term model at the {p_min:g} level (smallest p-value "
             f"{s['two_term_p_min']:.2f}), {s['n_pairs_C1_resolved']} have $C_1$ resolved at "
             f"{s['fit_min_snr']:g} standard errors (the weakest at {s['C1_snr_min']:.1f}), "
             f"and {s['n_pairs_order_within']} a free order within {agreement_se:g} standard "
             "errors of 1.")
    small_L = (
        f"while at $L$ = {s['L_smallest']}, where the first-order expansion is poor, it raises "
        f"the variance by about {s['variance_increase_smallest_L']:.0%}"
        if s["cv_raises_variance_smallest_L"] else
        f"and by {s['variance_reduction_smallest_L']:.2f} at $L$ = {s['L_smallest']}, where "
        "the first-order expansion is poor")
    poles = ("both poles attract, $\\beta > \\beta_c(d)$" if s["both_poles_attract"] else
             "only the pole $+1$ attracts, $\\beta \\le \\beta_c(d)$")
    criteria = ("We read the order from the pair with the largest error at the largest $L$, "
                f"and call it first order when both models have a $\\chi^2$ p-value of at least "
                f"{p_min:g}, $C_1$ is at least {s['fit_min_snr']:g} standard errors from zero "
                f"and the free order is within {agreement_se:g} standard errors of 1.")
    return {"verdict_text": _verdict(s, agreement_se, p_min), "fit_text": _fit_text(s),
            "criteria": criteria, "pure_text": _pure_text(s), "pairs_text": pairs,
            "small_L_cv_text": small_L, "poles_reading": poles}


def _pm(x, se, spec) -> str:
    """x ± se, x alone without a standard error, a dash without a value."""
    if not np.isfinite(x):
        return "–"
    # no-break spaces keep a table cell on one line
    return f"{x:{spec}}\u00a0±\u00a0{se:{spec}}" if np.isfinite(se) else f"{x:{spec}}"


def table(ds, s):
    """The page's table (a Markdown object): per pair (f, t), the limit value, the two-term
    fit (C1 and its p-value), the free order and the pair's own pure power law."""
    from IPython.display import Markdown

    rows = []
    for p in s["per_pair"]:
        ref = float(ds.reference.sel(function=p["function"], time=p["time"]))
        pure = "– (sign change)" if p["pure_sign_change"] else _pm(p["pure_order"],
                                                                    p["pure_order_se"], ".2f")
        two_p = f"{p['two_term_p']:.2f}" if np.isfinite(p["two_term_p"]) else "–"
        rows.append(f"| ${p['label']}$ | {p['time']:g} | {ref:.4f} | "
                    f"{_pm(p['C1'], p['C1_se'], '.3f')} | {two_p} | "
                    f"{_pm(p['order_corrected'], p['order_corrected_se'], '.3f')} | {pure} |")
    return Markdown("| $f$ | $t$ | $E f(Z_t)$ | $C_1$ | $\\chi^2$ p | free order | power law |"
                    "\n|---|---|---|---|---|---|---|\n" + "\n".join(rows))


def _fit_lines(ax, ds, Ls, head):
    """Panel (a)'s fits: the pure power law on the largest error, and the free-order fit
    of the headline pair ``head`` (its indices)."""
    order = float(ds.order)
    if np.isfinite(order):
        xf = np.geomspace(Ls[ds.fit_used.values].min() / 1.5, Ls.max() * 1.5, 50)
        ax.plot(xf, np.exp(float(ds.log_constant)) * xf ** (-order), color="0.65", lw=1.0,
                label=rf"$C L^{{-p}}$ on the largest $|e|$: $p$ = {order:.2f}")
    i, j = head
    L_min = float(ds.attrs["fit_L_min"])
    free = fit_corrected_order(Ls, ds.bias.values[i, j], ds.bias_se.values[i, j], L_min=L_min)
    if np.isfinite(free["order"]) and np.isfinite(free["order_se"]):
        xf = np.geomspace(L_min / 1.5, Ls.max() * 1.5, 50)
        ax.plot(xf, np.abs(free["C"] * xf ** -free["order"] + free["D"] * xf ** -2.0), "k--",
                lw=1.2, label=rf"$C L^{{-p}} + D L^{{-2}}$ (pair with largest $e$): "
                              rf"$p$ = {free['order']:.3f}")


def plot(ds, labels, head):
    """(a) |weak error| vs L, log-log, with the fits; (b) L x signed error vs L, stacked.
    ``labels``: the LaTeX label of each test function; ``head``: the headline pair."""
    import matplotlib.pyplot as plt

    from ...style import palette

    Ls = ds.L.values.astype(float)
    pairs = [(name, t) for name in ds.function.values for t in ds.time.values]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(7.2, 8.0), sharex=True)
    snr_min = float(ds.attrs["fit_min_snr"])
    for k, ((name, t), colour) in enumerate(zip(pairs, palette(len(pairs)))):
        m, shift = "osD^v<>"[k % 7], 1.0 + 0.03 * k  # dodge the points horizontally
        b, se = ds.bias.sel(function=name, time=t).values, ds.bias_se.sel(function=name,
                                                                          time=t).values
        res = np.abs(b) >= snr_min * se
        ax.errorbar(Ls[res] * shift, np.abs(b[res]), yerr=se[res], fmt=m, color=colour, ms=5,
                    capsize=2, lw=1)
        # unresolved: only an upper bound |e| < |e| + 2 se, drawn hollow there
        ax.plot(Ls[~res] * shift, np.abs(b[~res]) + 2 * se[~res], m, mfc="none", color=colour,
                ms=5)
        ax2.errorbar(Ls * shift, Ls * b, yerr=2 * Ls * se, fmt=m + "-", color=colour, ms=4,
                     capsize=2, lw=0.8, label=rf"$f = {labels[str(name)]}$, $t = {t:g}$")
    for var, ls, what in (("bias_se", ":", "control variate"), ("bias_se_plain", "-.",
                                                                 "plain Monte Carlo")):
        ax.plot(Ls, 2 * ds[var].max(("function", "time")).values, color="0.5", lw=1, ls=ls,
                label=f"2 s.e., {what}")
    _fit_lines(ax, ds, Ls, head)
    ax.set(xscale="log", yscale="log", ylabel=r"$|E f(Z^L_t) - E f(Z_t)|$",
           title="(a) weak error; bars 1 s.e.; hollow: unresolved, at |e| + 2 s.e.")
    ax.legend(loc="upper right")
    ax2.axhline(0, color="0.4", lw=0.8)
    ax2.set(xscale="log", xlabel="L (layers per unit time)",
            ylabel=r"$L \times (E f(Z^L_t) - E f(Z_t))$",
            title="(b) L x signed error: flat means order 1; bars 2 s.e.")
    ax2.legend(loc="lower right")
    return laid_out(fig, f"Theorem 1, two tokens: discrete chain against the limit SDE\n"
                         rf"$\beta$ = {knob_attr(ds, 'beta'):g}, d = {knob_attr(ds, 'd')}, "
                         rf"{knob_attr(ds, 'attention')}, $z_0$ = {knob_attr(ds, 'z0'):g}, "
                         rf"{int(ds.n_traj.max()):,} trajectories per L")
