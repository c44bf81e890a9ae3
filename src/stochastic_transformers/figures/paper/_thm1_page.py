r"""Theorem 1's page: the sentences that read its summary, its table and its plot.

The page states verdicts whose wording depends on the numbers (the order the fits read,
whether the pure power law describes the data, what the control variate does at the
smallest L).  They are built here from :func:`.thm1.summary` and the dataset alone, so that
the notebook's only hidden code is the glue call; :mod:`.thm1` passes its criteria in
(this module imports nothing from it).
"""

from __future__ import annotations

import numpy as np

from ...stats import fit_corrected_order
from ..base import knob_attr, laid_out


def _listed(values) -> str:
    return ", ".join(str(x) for x in values) if values else "none"


def _fit_text(s) -> str:
    if s["verdict"] == "too_few_points":
        return (f"This run has fewer than four depths at $L \\ge$ {s['fit_L_min']}, too few to "
                "fit the order with its second-order term.")
    return (f"For $f = {s['headline_label']}$, $t = {s['headline_time']:g}$ (the largest error "
            f"at the largest $L$), the two-term model $C_1/L + C_2/L^2$ leaves $\\chi^2$ = "
            f"{s['two_term_chi2']:.1f} on {s['two_term_dof']} degrees of freedom (p = "
            f"{s['two_term_p_value']:.2f}), with $C_1$ = {s['C1']:.3f} ± {s['C1_se']:.3f} "
            f"({s['C1_snr']:.0f} standard errors from zero) and $C_2$ = {s['C2']:.2f} ± "
            f"{s['C2_se']:.2f}. With the order free, $C L^{{-p}} + D L^{{-2}}$ gives $p$ = "
            f"**{s['order_corrected']:.3f} ± {s['order_corrected_se']:.3f}** ($\\chi^2$ = "
            f"{s['corrected_chi2']:.1f} on {s['corrected_dof']} degrees of freedom, p = "
            f"{s['corrected_p_value']:.2f}), {abs(s['order_corrected_z']):.1f} standard errors "
            "from 1.")


def _pure_text(s) -> str:
    if s["verdict_pure"] == "too_few_points":
        return "A pure power law needs at least two resolved points; this run has fewer."
    text = (f"The pure power law on $\\max_{{f,t}}|e|$ (points $L$ = {_listed(s['L_used'])}) "
            f"gives order {s['order']:.2f} ± {s['order_se']:.2f}, {abs(s['order_z']):.1f} "
            "standard errors from 1")
    if not s["has_chi2"]:
        return text + "."
    text += (f", and its $\\chi^2$ test {'accepts' if s['pure_fits'] else 'rejects'} it "
             f"(reduced $\\chi^2$ = {s['chi2_red']:.1f} on {s['pure_dof']} degrees of freedom, "
             f"p = {s['pure_p_value']:.3f})")
    if s["pure_fits"]:
        return text + "."
    return text + (": with no second-order term, it absorbs that term into its exponent. In "
                   f"the two-term model that term carries {s['second_order_share_at_L_min']:.0%}"
                   f" of the error at $L$ = {s['fit_L_min']} (panel (b): $L\\,e$ is not yet "
                   "flat there).")


def phrases(s, agreement_se, p_min) -> dict[str, str]:
    """The page's data-dependent sentences (Markdown) from the summary ``s``, with the
    criteria ``agreement_se`` (an order this many standard errors from 1 counts as 1) and
    ``p_min`` (a fit with a smaller chi-square p-value does not describe the data)."""
    within = f"{agreement_se:g}-standard-error criterion"
    verdicts = {
        "first_order": "Both models describe the data, the first-order constant is resolved "
                       f"and the free order is within our {within}: the run agrees with "
                       "first-order weak convergence.",
        "not_first_order": "Both models describe the data, but the free order is further than "
                           f"our {within} from 1: a disagreement we do not explain away.",
        "first_term_unresolved": "Both models describe the data and the order is near 1, but "
                                 "the first-order constant is not resolved from zero at this "
                                 "resolution.",
        "poor_fit": f"One of the two models has a $\\chi^2$ p-value below {p_min:g}: it "
                    "does not describe the data, so its order is not read; look at panel (b).",
        "too_few_points": "The pure power law below is the only order it gives."}
    pairs = (
        "The table below gives the errors of every pair." if s["verdict"] == "too_few_points"
        else f"Over all {s['n_pairs']} pairs (table below), {s['n_pairs_two_term_fit']} are "
        f"described by the two-term model at the {p_min:g} level (smallest p-value "
        f"{s['two_term_p_min']:.2f}), {s['n_pairs_C1_resolved']} have a first-order constant "
        f"resolved at {s['fit_min_snr']:g} standard errors (the weakest at "
        f"{s['C1_snr_min']:.1f}), and {s['n_pairs_order_within']} a free order within "
        f"{agreement_se:g} standard errors of 1.")
    small_L = (
        f"while at $L$ = {s['L_smallest']}, where the first-order expansion is poor, it raises "
        f"the variance by about {s['variance_increase_smallest_L']:.0%}"
        if s["cv_raises_variance_smallest_L"] else
        f"and by {s['variance_reduction_smallest_L']:.2f} at $L$ = {s['L_smallest']}, where "
        "the first-order expansion is poor")
    panel_b = "; ".join(
        f"for $f = {p['label']}$, $t = {p['time']:g}$, $L\\,e$ lies between {p['Le_min']:+.2f} "
        f"and {p['Le_max']:+.2f} over $L$ = {p['L_from']}..{p['L_to']} (two standard errors up "
        f"to {p['two_se_max']:.2f})" + ("; its resolved errors change sign" if p["sign_change"]
                                        else "") for p in s["per_pair"] if "Le_min" in p)
    poles = ("both poles attract: $\\beta > \\beta_c(d)$" if s["both_poles_attract"] else
             "only the pole $+1$ attracts: $\\beta \\le \\beta_c(d)$")
    return {"poles_reading": poles, "fit_text": _fit_text(s), "pure_text": _pure_text(s),
            "verdict_text": verdicts[s["verdict"]], "pairs_text": pairs,
            "small_L_cv_text": small_L, "panel_b_pairs": panel_b}


def page_values(s, run_wall, **paper) -> dict:
    """Plain values the page quotes besides the summary ``s``: ``run_wall_s`` (the wall time
    of the run behind it), the lists of L as text, the cache note, and ``paper`` (the paper
    scale's size and cost)."""
    cached = (f"; {s['n_cells_cached']} of {s['n_cells']} cells came from the cache"
              if s["n_cells_cached"] else "")
    return {"run_wall_s": run_wall, "L_used_text": _listed(s["L_used"]),
            "L_unresolved_text": _listed(s["L_unresolved"]), "cache_note": cached, **paper}


def _pm(x, se, spec) -> str:
    """x ± se, x alone without a standard error, – without a value."""
    if not np.isfinite(x):
        return "–"
    return f"{x:{spec}} ± {se:{spec}}" if np.isfinite(se) else f"{x:{spec}}"


def table(ds, s) -> str:
    """The page's table (Markdown): per pair, the limit value, both fits, the pure power law
    and the signed error at every L with its standard error."""
    rows = []
    for p in s["per_pair"]:
        at = dict(function=p["function"], time=p["time"])
        pure = (f"{_pm(p['pure_order'], p['pure_order_se'], '.2f')} ({p['pure_n_fit']})"
                if not p["pure_sign_change"] else f"– ({p['pure_n_fit']}, sign change)")
        errors = " | ".join(f"{float(ds.bias.sel(**at, L=L)):+.1e} "
                            f"({float(ds.bias_se.sel(**at, L=L)):.0e})" for L in ds.L.values)
        two_p = f"{p['two_term_p']:.2f}" if np.isfinite(p["two_term_p"]) else "–"
        rows.append(f"| ${p['label']}$ | {p['time']:g} | {float(ds.reference.sel(**at)):.6f} | "
                    f"{_pm(p['C1'], p['C1_se'], '.3f')} | {two_p} | "
                    f"{_pm(p['order_corrected'], p['order_corrected_se'], '.3f')} | {pure} | "
                    f"{errors} |")
    header = ("| $f$ | $t$ | $E f(Z_t)$ (Kolmogorov) | $C_1$ | two-term p | free order $p$ "
              "| pure power law (points) | "
              + " | ".join(f"$e$ at L = {int(L)} (s.e.)" for L in ds.L.values) + " |\n"
              + "|---" * (7 + ds.L.size) + "|\n")
    return header + "\n".join(rows)


def _fit_lines(ax, ds, Ls, labels, head):
    """Panel (a)'s fits: the pure power law on the largest error, and the free-order fit
    of the headline pair ``head`` (its indices)."""
    order, order_se = float(ds.order), float(ds.order_se)
    if np.isfinite(order):
        xf = np.geomspace(Ls[ds.fit_used.values].min() / 1.5, Ls.max() * 1.5, 50)
        ax.plot(xf, np.exp(float(ds.log_constant)) * xf ** (-order), color="0.65", lw=1.0,
                label=rf"pure power law on $\max_{{f,t}}|e|$: order {order:.2f} "
                      rf"$\pm$ {order_se:.2f}")
    i, j = head
    L_min = float(ds.attrs["fit_L_min"])
    free = fit_corrected_order(Ls, ds.bias.values[i, j], ds.bias_se.values[i, j], L_min=L_min)
    if np.isfinite(free["order"]) and np.isfinite(free["order_se"]):
        xf = np.geomspace(L_min / 1.5, Ls.max() * 1.5, 50)
        ax.plot(xf, np.abs(free["C"] * xf ** -free["order"] + free["D"] * xf ** -2.0), "k--",
                lw=1.2, label=rf"$C L^{{-p}} + D L^{{-2}}$ on "
                              rf"$f = {labels[str(ds.function.values[i])]}$, "
                              rf"$t = {ds.time.values[j]:g}$: $p$ = {free['order']:.3f} $\pm$ "
                              rf"{free['order_se']:.3f}" "\n" rf"($\chi^2$ = {free['chi2']:.1f} "
                              f"on {free['dof']} d.o.f., L >= {L_min:g})")


def plot(ds, labels, head):
    """(a) |weak error| vs L, log-log, with the fits; (b) L x signed error vs L.  ``labels``:
    the LaTeX label of each test function; ``head``: the indices of the headline pair."""
    import matplotlib.pyplot as plt

    from ...style import palette

    Ls = ds.L.values.astype(float)
    pairs = [(name, t) for name in ds.function.values for t in ds.time.values]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.4))
    snr_min = float(ds.attrs["fit_min_snr"])
    for k, ((name, t), colour) in enumerate(zip(pairs, palette(len(pairs)))):
        m, shift = "osD^v<>"[k % 7], 1.0 + 0.03 * k  # dodge the points horizontally
        at = dict(function=name, time=t)
        b, se = ds.bias.sel(**at).values, ds.bias_se.sel(**at).values
        label = rf"$f = {labels[str(name)]}$, $t = {t:g}$"
        res = np.abs(b) >= snr_min * se
        ax.errorbar(Ls[res] * shift, np.abs(b[res]), yerr=se[res], fmt=m, color=colour, ms=5,
                    capsize=2, lw=1, label=label)
        # unresolved: only an upper bound |e| < |e| + 2 se, drawn hollow there
        if np.any(~res):
            ax.plot(Ls[~res] * shift, np.abs(b[~res]) + 2 * se[~res], m, mfc="none",
                    color=colour, ms=5)
        ax2.errorbar(Ls * shift, Ls * b, yerr=2 * Ls * se, fmt=m + "-", color=colour, ms=4,
                     capsize=2, lw=0.8, label=label)
    for var, ls, what in (("bias_se", ":", "control variate"), ("bias_se_plain", "-.",
                                                                 "plain Monte Carlo")):
        ax.plot(Ls, 2 * ds[var].max(("function", "time")).values, color="0.5", lw=1, ls=ls,
                label=f"2 s.e., {what}")
    _fit_lines(ax, ds, Ls, labels, head)
    ax.set(xscale="log", yscale="log", xlabel="L (layers per unit time)",
           ylabel=r"$|E f(Z^L_t) - E f(Z_t)|$",
           title="(a) weak error, bars 1 s.e. (hollow: unresolved, at |e| + 2 s.e.)")
    ax.legend(loc="upper right")
    ax2.axhline(0, color="0.4", lw=0.8)
    ax2.set(xscale="log", xlabel="L", ylabel=r"$L \times (E f(Z^L_t) - E f(Z_t))$",
            title="(b) L x signed error (flat = order 1; bars: 2 s.e.)")
    ax2.legend()
    return laid_out(fig, f"Theorem 1 for N = 2: discrete overlap chain vs the limit SDE "
                         rf"($\beta$ = {knob_attr(ds, 'beta'):g}, d = {knob_attr(ds, 'd')}, "
                         rf"{knob_attr(ds, 'attention')}, $z_0$ = {knob_attr(ds, 'z0'):g}, "
                         rf"{int(ds.n_traj.max()):,} trajectories per L)")
