r"""The universality page: the sentences that read its summary, its table and its plot.

The page's verdicts depend on the numbers (whether the laws differ detectably, whether the
limit at T and the :math:`T = \infty` curve differ at this resolution, what the longer
horizons and the smallest L show).  They are built here from :func:`.universality.summary`
and the dataset alone, so that the notebook's only hidden code is the glue call;
:mod:`.universality` passes its criteria in (this module imports nothing from it).
"""

from __future__ import annotations

import numpy as np

from ..base import knob_attr, laid_out

#: Each law's name in the page's sentences.
NAMES = {"gaussian": "Gaussian", "uniform": "uniform", "rademacher": "Rademacher"}
_LABELS = {"gaussian": "Gaussian (exact overlap chain)", "uniform": "uniform (literal)",
           "rademacher": "Rademacher (literal)"}


def _horizon_text(s, b, by_t, crit) -> str:
    """What the horizon check shows at one beta below beta_c."""
    lim = s["horizon_limit"][b]
    at_T = s["horizon_main"][b].items()
    text = (f"At $\\beta$ = {b:g} (below $\\beta_c$ = {s['beta_c']:.3f}, where the $T = \\infty$ "
            "probability is 0) the laws end antipodal at T in "
            + ", ".join(f"{100 * v:.2f}% ({NAMES[law]})" for law, v in at_T)
            + f" of the runs (homogeneity p = {s['horizon_p_between'][b]:.2f}"
            + ("; the laws agree with each other on it)" if s["horizon_laws_agree"][b] else
               f"; they differ, p < {crit['alpha']:g})")
            + ". The Gaussian chain, run longer, gives "
            + ", ".join(f"{100 * p:.2f}% at T = {t:g}" for t, p in by_t.items()))
    z, within = s["horizon_max_abs_z"][b], f"{crit['agreement_se']:g}-standard-error criterion"
    if np.isfinite(z):
        text += ("; the limit itself still has "
                 + ", ".join(f"{100 * lim[t]:.2f}%" for t in by_t)
                 + " within the tolerance of the weakly repelling pole $-1$ at the same "
                 "horizons. " + (f"The chain agrees with it (largest deviation {z:.1f} standard "
                                 f"errors, within our {within}): what remains at T is a finite-T "
                                 "property of the limit" if s["horizon_agrees_limit"][b] else
                                 f"The chain deviates from it by up to {z:.1f} standard errors, "
                                 f"more than our {within}"))
    decline = s["horizon_decline_z"][b]
    threshold = f"{crit['decline_se']:g}-standard-error threshold"
    return text + ". Between the first and the last horizon the fraction " + (
        f"falls by {decline:.1f} standard errors, beyond our {threshold}."
        if s["horizon_declines"][b] else
        f"changes by {-decline:+.1f} standard errors, within our {threshold}: no decline is "
        "resolved at this number of trajectories.")


def phrases(s, paper, **crit) -> dict[str, str]:
    """The page's data-dependent sentences (Markdown) from the summary ``s``; ``paper`` is the
    paper scale's knobs, ``crit`` the criteria (``alpha``, ``agreement_se``, ``decline_se``)."""
    cost = s["paper_cost_cpu_hours"]
    projection = (
        f"At these rates the paper scale (L = {paper['L']}, T = {paper['T']:g}, "
        f"{paper['n_traj']:,} trajectories, {len(paper['betas'])} values of $\\beta$, and the "
        f"L sweep) would take about {cost['total']:.0f} CPU-hours ("
        + ", ".join(f"{NAMES[law]} {cost[law]:.1f}" for law in s["laws"])
        + "), an upper bound: the cells of this run last seconds, and what a cell costs "
        "whatever its length (starting a worker, loading the compiled kernels) inflates the "
        "rate; the book's Reproducing page gives the rate measured on long runs. It is meant "
        "for a Dask cluster" if s["projects_cost"] else
        "A smoke run is too small to project the paper-scale cost from (start-up dominates); "
        "the paper scale is meant for a Dask cluster")
    return {
        "laws_reading": "no test detects a difference between the laws at this L, where, as "
        "said above, a difference is not expected to be visible; the positive control is in (e) "
        "below" if s["laws_agree"] else "**the laws differ detectably** at this L and "
        "resolution, although we expect the law of $V$ to matter little there; (e) below shows "
        "how the difference changes with L",
        "reference_reading": "the limit at T (computed from the backward equation, error "
        f"estimate at most {s['theory_T_error_max']:.0e})" if s["horizon_theory"] else
        "the $T = \\infty$ curve: the limit at T is computed only for softmax attention, so for "
        "this run the two comparisons coincide",
        "shift_reading": "so at this horizon the $T = \\infty$ curve is not the reference "
        "Theorem 1 predicts near $\\beta_c$, and a deviation from it there says nothing about "
        "the law of $V$" if s["finite_T_shift_resolved"] else "a difference this run cannot "
        "resolve",
        "horizon_text": " ".join(_horizon_text(s, b, by_t, crit)
                                 for b, by_t in s.get("horizon", {}).items()),
        "control_reading": "the test does detect a difference there, so it can see the law of "
        "$V$ where it matters" if s.get("conv_detects_first") else "the test detects no "
        "difference even there, so at this number of trajectories it cannot see the law of $V$ "
        "at any $L$ of this run, and the agreement of the laws above is weak evidence",
        "cost_projection": projection}


def page_values(s, elapsed) -> dict:
    """Plain values the page quotes besides the summary ``s``: ``elapsed_s`` (this page's
    seconds), the law names and rows of its sentences, the cache note and ``d_squared``."""
    laws = s["laws"]
    times = ", ".join(f"{NAMES[law]} {s['cell_time_s'][law]:.0f} s" for law in laws)
    if "cell_time_convergence_s" in s:
        times += ", convergence sweep " + ", ".join(
            f"{NAMES[law]} {s['cell_time_convergence_s'][law]:.0f} s" for law in laws)
    if "cell_time_horizon_s" in s:
        times += f", horizon check {s['cell_time_horizon_s']:.0f} s"
    out = {"elapsed_s": elapsed, "max_unclustered_law_name": NAMES[s["max_unclustered_law"]],
           "cache_note": (f"; {s['n_cells_cached']} of {s['n_cells']} main cells came from the "
                          "cache") if s["n_cells_cached"] else "",
           "cell_times_text": times, "d_squared": s["d"] ** 2}
    if "convergence_beta" in s:
        out["conv_rows"] = "; ".join(
            f"L = {L}: " + ", ".join(f"{NAMES[law]} {s['p_conv'][law][L]:.4f}" for law in laws)
            + f" (homogeneity p = {s['p_between_L'][L]:.2f})" for L in sorted(s["p_between_L"]))
    return out


def table(ds, reference):
    """Per beta: the limit at T (``reference``), the T = infinity probability, each law's
    antipodal fraction and deviation, and the homogeneity p-value (a DataFrame)."""
    tab = ds[["p_antipodal", "z_score"]].to_dataframe().unstack("values")
    tab.columns = [f"{'P' if v == 'p_antipodal' else 'z'} {NAMES[law]}" for v, law in tab.columns]
    tab.insert(0, "T = inf", ds.p_theory.values)
    tab.insert(0, "limit at T", reference.values)
    tab["homogeneity p"] = ds.p_value_between_laws.values
    return tab.round(4)


def _convergence_panel(axc, ds, laws, colours, markers):
    """Panel (c): each law's antipodal fraction against L at ``convergence_beta``."""
    Ls = ds.L_conv.values.astype(float)
    for i, law in enumerate(laws):
        sub = ds.sel(values=law)
        p = sub.p_antipodal_L.values
        err = np.vstack([p - sub.p_antipodal_L_low.values, sub.p_antipodal_L_high.values - p])
        axc.errorbar(Ls * (1 + 0.04 * (i - 1)), p, yerr=err, fmt=markers[law] + "-",
                     color=colours[law], ms=4, capsize=2, lw=1, label=NAMES[law])
    axc.axhline(float(ds.p_theory_conv), color="k", lw=1.3,
                label=f"limit (L = infinity) at T = {knob_attr(ds, 'T'):g}")
    axc.set_xscale("log")
    axc.set_xticks(Ls)
    axc.set_xticklabels([str(int(x)) for x in Ls])
    axc.minorticks_off()
    axc.set(xlabel="L (layers per unit time)", ylabel=r"$P(\mathrm{antipodal\ at\ } T)$",
            title=rf"(c) convergence in L at $\beta$ = {ds.attrs['convergence_beta']:g}"
                  f" (T = {knob_attr(ds, 'T'):g}, {int(ds.n_traj_L.max()):,} trajectories)")
    axc.legend(loc="lower right")


def plot(ds, reference):
    """(a) P(antipodal) vs beta per law with the limit curve; (b) deviation from
    ``reference``, the limit at T; (c) convergence in L at one beta."""
    import matplotlib.pyplot as plt

    from ...style import palette

    laws = [str(v) for v in ds["values"].values]
    colours, markers = dict(zip(NAMES, palette(3))), dict(zip(NAMES, "os^"))
    has_conv = "p_antipodal_L" in ds
    fig = plt.figure(figsize=(11.5 if has_conv else 7.2, 6.2))
    gs = fig.add_gridspec(2, 2 if has_conv else 1, height_ratios=[3, 1.3],
                          width_ratios=[1.35, 1] if has_conv else None)
    ax = fig.add_subplot(gs[0, 0])
    axd = fig.add_subplot(gs[1, 0], sharex=ax)
    betas = ds.beta.values
    width = 0.012 * (betas.max() - betas.min() if betas.size > 1 else 1.0)
    chain = knob_attr(ds, "gaussian_method", "overlap_chain") == "overlap_chain"
    for i, law in enumerate(laws):
        sub = ds.sel(values=law)
        x = betas + (i - (len(laws) - 1) / 2) * width
        p = sub.p_antipodal.values
        err = np.vstack([p - sub.p_antipodal_low.values, sub.p_antipodal_high.values - p])
        ax.errorbar(x, p, yerr=err, fmt=markers[law], color=colours[law], ms=4, capsize=2, lw=1,
                    label=_LABELS[law] if law != "gaussian" or chain else "Gaussian (literal)")
        axd.errorbar(x, p - reference.values, yerr=err, fmt=markers[law], color=colours[law],
                     ms=3.5, capsize=2, lw=0.8)
    ax.plot(ds.beta_fine, ds.p_theory_fine, color="k", lw=1.3,
            label=r"limit, $T = \infty$ (scale function)")
    if np.isfinite(ds.p_theory_T.values).any():
        ax.plot(betas, ds.p_theory_T, color="k", ls="none", marker="x", ms=5,
                label=f"limit at T = {knob_attr(ds, 'T'):g} (backward equation)")
    ax.axvline(float(ds.beta_c), color="0.4", ls="--", lw=1, label=r"$\beta_c(d)$")
    ax.set_ylabel(r"$P(\mathrm{antipodal\ at\ } T)$")
    ax.legend(loc="upper left")
    ax.set_title(f"(a) d = {knob_attr(ds, 'd')}, L = {knob_attr(ds, 'L')}, T = "
                 f"{knob_attr(ds, 'T'):g}, {int(ds.n_traj.max()):,} trajectories per point; bars: "
                 "Wilson 95%")
    ax.tick_params(labelbottom=False)
    axd.axhline(0, color="0.3", lw=0.8)
    axd.set(ylabel="sim - limit at T", xlabel=r"$\beta$",
            title=f"(b) deviation from the limit at T; equality of the laws: $\\chi^2$ = "
                  f"{float(ds.chi2_between_laws_total):.1f} on {int(ds.dof_between_laws_total)} "
                  f"d.o.f., p = {float(ds.p_value_between_laws_total):.2g}")
    if has_conv:
        _convergence_panel(fig.add_subplot(gs[:, 1]), ds, laws, colours, markers)
    return laid_out(fig, "Universality: the two-token outcome law for three laws of the value "
                         r"entries (same variance $\sigma^2 = 1$)")
