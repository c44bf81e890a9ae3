r"""Theorem 1's page: its sentences and its table, from :func:`.thm1.summary` (which passes
its criteria in: this module imports nothing from it)."""

from __future__ import annotations

import numpy as np

from ..words import markdown_table


def phrases(s, agreement_se, p_min) -> dict[str, str]:
    """The page's sentences (Markdown) from the summary ``s``: the verdict, the criteria and
    the fits over all pairs, the pure power law, the control variate at the smallest L and
    which poles attract."""
    span = f"$L$ = {s['fit_L_min']} to {s['L_largest']}"
    order = (f"fitted with its second-order term, the order is {s['order_corrected']:.3f} ± "
             f"{s['order_corrected_se']:.3f}")
    verdict = {
        "first_order": "**Reproduced, at the first order we expect:** over " + span
        + f" the error decays like $1/L$ ({order}, with $C_1$ resolved from zero).",
        "not_first_order": f"**Convergence reproduced; first order not observed:** over {span}, "
        f"{order}, further than {agreement_se:g} standard errors from 1.",
        "first_term_unresolved": "**Convergence reproduced; first order only partly observed:** "
        f"over {span}, {order}, consistent with 1, but $C_1$ is not resolved from zero.",
        "poor_fit": f"**Convergence reproduced; order not read:** over {span} one of the two fits "
        f"has a $\\chi^2$ p-value below {p_min:g}, so it does not describe the data.",
        "too_few_points": "**Convergence only; no order read:** this run has fewer than four "
        f"depths at $L \\ge$ {s['fit_L_min']}, too few to fit the order."}[s["verdict"]]
    verdict += (f" The largest weak error is {s['weak_error_smallest_L']:.2g} at $L$ = "
                f"{s['L_smallest']} and {s['weak_error_largest_L']:.2g} at $L$ = {s['L_largest']}.")
    criteria = (f"We read the order from the pair with the largest error at the largest $L$ "
                f"($f = {s['headline_label']}$, $t = {s['headline_time']:g}$) and call it first "
                f"order when both fits have a $\\chi^2$ p-value of at least {p_min:g}, $C_1$ is "
                f"at least {s['fit_min_snr']:g} standard errors from zero and the free order is "
                f"within {agreement_se:g} standard errors of 1.")
    if s["verdict"] != "too_few_points":
        criteria += (f" Over all {s['n_pairs']} pairs, {s['n_pairs_two_term_fit']} are described "
                     f"by the two-term model, {s['n_pairs_C1_resolved']} have $C_1$ resolved "
                     f"and {s['n_pairs_order_within']} a free order within that distance of 1.")
    pure = ("The pure power law $C L^{-p}$ on $\\max_{f,t}|e|$ gives order "
            + str(_pm(s["order"], s["order_se"], ".2f")))
    if s["verdict_pure"] == "too_few_points":
        pure = "A pure power law needs at least two resolved points; this run has fewer."
    elif s["has_chi2"] and s["pure_fits"]:
        pure += f", and its $\\chi^2$ test accepts it (p = {s['pure_p_value']:.3f})."
    elif s["has_chi2"]:
        pure += (f", and its $\\chi^2$ test rejects it (p = {s['pure_p_value']:.3f}): with no "
                 "second-order term it absorbs that term into its exponent, and in the two-term "
                 f"model that term is {s['second_order_share_at_L_min']:.0%} of the error at "
                 f"$L$ = {s['fit_L_min']}.")
    else:
        pure += "."
    small_L = (f"while at $L$ = {s['L_smallest']}, where the first-order expansion is poor, it "
               f"raises the variance by about {s['variance_increase_smallest_L']:.0%}"
               if s["cv_raises_variance_smallest_L"] else
               f"and by {s['variance_reduction_smallest_L']:.2f} at $L$ = {s['L_smallest']}, "
               "where the first-order expansion is poor")
    poles = ("both poles attract, $\\beta > \\beta_c(d)$" if s["both_poles_attract"] else
             "only the pole $+1$ attracts, $\\beta \\le \\beta_c(d)$")
    return {"verdict_text": verdict, "criteria": criteria, "pure_text": pure,
            "small_L_cv_text": small_L, "poles_reading": poles}


def _pm(x, se, spec):
    """x ± se (x alone without a standard error, None without a value)."""
    if not np.isfinite(x):
        return None
    # no-break spaces keep a table cell on one line
    return f"{x:{spec}}\u00a0±\u00a0{se:{spec}}" if np.isfinite(se) else f"{x:{spec}}"


def table(ds, s):
    """The page's table (Markdown): per pair (f, t), the limit value, the two-term fit (C1 and
    its p-value), the free order and the pair's own pure power law."""
    from IPython.display import Markdown

    rows = [[f"${p['label']}$", f"{p['time']:g}",
             f"{float(ds.reference.sel(function=p['function'], time=p['time'])):.4f}",
             _pm(p["C1"], p["C1_se"], ".3f"), _pm(p["two_term_p"], np.nan, ".2f"),
             _pm(p["order_corrected"], p["order_corrected_se"], ".3f"),
             "– (sign change)" if p["pure_sign_change"] else
             _pm(p["pure_order"], p["pure_order_se"], ".2f")] for p in s["per_pair"]]
    return Markdown(markdown_table(["$f$", "$t$", "$E f(Z_t)$", "$C_1$", "$\\chi^2$ p",
                                    "free order", "power law"], rows))
