r"""The universality figure's limit at finite horizons and its two checks beside the main sweep.

:func:`limit_at_horizon` is what the discrete model at a horizon T converges to (the
reference of every comparison).  The L sweep (:func:`convergence_in_L`,
:func:`summary_convergence`) runs the three laws at several L at one beta, where they should
meet the same limit value; the horizon check (:func:`summary_horizon`) runs the Gaussian chain
longer at the betas just below :math:`\beta_c`, where the pole -1 repels only weakly and the
limit itself still holds some pairs near it at T.  The tests between the laws share
:data:`ALPHA`.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ... import sde, theory
from ...stats import agreement_z, homogeneity_test, two_proportion_z
from ..base import add_outcome_fractions


#: Grid step (in atanh of the overlap) of the backward equation of the limit at a finite
#: horizon: its error estimate (``p_theory_T_error``) is below 2e-5 at T >= 30 and below
#: 7e-4 at T = 10, a tenth of a standard error or less at every scale.
HORIZON_GRID_STEP = 0.1


def limit_at_horizon(betas, d, times, tol, attention="softmax"):
    r"""The limit's :math:`P(Z_t \le -1 + \text{tol})` from uniform tokens
    (:func:`stochastic_transformers.sde.antipodal_at`): ``(p, error)`` over (betas, times);
    nan for unnormalised attention (not computed)."""
    betas = np.atleast_1d(np.asarray(betas, dtype=float))
    times = np.atleast_1d(np.asarray(times, dtype=float))
    p = np.full((betas.size, times.size), np.nan)
    err = np.full_like(p, np.nan)
    for i, beta in enumerate(betas if attention == "softmax" else []):
        p[i], err[i] = sde.antipodal_at(times, float(beta), int(d), tol=float(tol),
                                        h=HORIZON_GRID_STEP)
    return p, err


def homogeneity(counts, totals):
    """:func:`~stochastic_transformers.stats.homogeneity_test` over the laws (axis 0); with
    one law there is nothing to compare (statistic 0, 0 degrees of freedom, p-value 1)."""
    if counts.shape[0] >= 2:
        return homogeneity_test(counts, totals)
    return np.zeros(counts.shape[1:]), np.zeros(counts.shape[1:], dtype=int), np.ones(
        counts.shape[1:])


def convergence_in_L(ds, conv, knobs):
    """The L sweep at ``convergence_beta`` (with the main sweep's L where it ran that beta):
    fractions over ``L_conv``, deviations from the limit and the test between the laws."""
    conv = add_outcome_fractions(conv, ("antipodal", "unclustered"))
    counts = ["n_antipodal", "n_traj", "n_unclustered", "elapsed_s"]
    parts = [conv[counts]]
    betas, c_beta = ds.beta.values, knobs["convergence_beta"]
    if np.any(np.isclose(betas, c_beta)):
        main = ds.sel(beta=betas[np.isclose(betas, c_beta)][0])
        parts.append(main[counts].drop_vars("beta").expand_dims(L=[knobs["L"]]))
    merged = xr.concat(parts, dim="L").sortby("L").rename(L="L_conv")
    merged = add_outcome_fractions(merged, ("antipodal",))
    for var in ("p_antipodal", "p_antipodal_low", "p_antipodal_high"):
        ds[var.replace("p_antipodal", "p_antipodal_L")] = merged[var].transpose("values",
                                                                                 "L_conv")
    ds["n_antipodal_L"] = merged.n_antipodal.transpose("values", "L_conv")
    ds["n_traj_L"] = merged.n_traj.transpose("values", "L_conv")
    ds["p_unclustered_L"] = (merged.n_unclustered / merged.n_traj).transpose("values", "L_conv")
    p_T, _ = limit_at_horizon([c_beta], knobs["d"], knobs["T"], knobs["tol"], knobs["attention"])
    ds["p_theory_conv_infinite"] = float(theory.antipodal_probability(c_beta, knobs["d"]))
    ds["p_theory_conv"] = (float(p_T[0, 0]) if np.isfinite(p_T[0, 0])
                           else float(ds.p_theory_conv_infinite))
    ds["z_score_L"] = agreement_z(ds.n_antipodal_L, ds.n_traj_L,
                                  xr.full_like(ds.p_antipodal_L, float(ds.p_theory_conv)))
    ds["p_value_between_laws_L"] = (("L_conv",), homogeneity(ds.n_antipodal_L.values,
                                                              ds.n_traj_L.values)[2])
    ds["cell_time_convergence_s"] = conv.elapsed_s.sum("L")
    ds.attrs["convergence_beta"] = c_beta
    return ds


#: Significance level of the tests between the laws: they agree when the summed homogeneity
#: test and the smallest single-beta test after a Bonferroni correction both have p above it.
ALPHA = 0.05
#: The Gaussian chain's antipodal fraction falls between the first and the last horizon when
#: the drop exceeds this many standard errors (a pooled two-proportion z treating the two
#: fractions as independent; they come from the same trajectories, and for positively
#: correlated indicators that overstates the standard error: the test is conservative).
HORIZON_DECLINE_SE = 2.0
#: The horizon check's Gaussian chain agrees with the limit at the same horizons
#: (``horizon_agrees_limit``) when its largest deviation is at most this many standard errors.
HORIZON_AGREEMENT_SE = 2.0


def summary_horizon(ds, laws) -> dict:
    """The horizon check's part of the summary, for each beta below beta_c: the Gaussian
    chain's fractions at the horizons (``horizon``) and the laws' at T (``horizon_main``,
    ``horizon_p_between``, ``horizon_laws_agree``: p above :data:`ALPHA`), whether the
    fraction decays (``horizon_decays``, however little; ``horizon_decline_z`` in standard
    errors, ``horizon_declines``: beyond :data:`HORIZON_DECLINE_SE`), the limit at the same
    horizons (``horizon_limit``) and the chain's largest deviation from it
    (``horizon_max_abs_z``, ``horizon_agrees_limit``: within :data:`HORIZON_AGREEMENT_SE`)."""
    out = {"horizon": {float(b): {float(t): float(p) for t, p in zip(
        ds.horizon.values, ds.p_antipodal_horizon.sel(beta_below_c=b).values)}
        for b in ds.beta_below_c.values}}
    betas = list(out["horizon"])
    out["horizon_main"] = {b: {law: float(ds.p_antipodal.sel(values=law, beta=b))
                               for law in laws} for b in betas}
    out["horizon_p_between"] = {b: float(ds.p_value_between_laws.sel(beta=b)) for b in betas}
    out["horizon_laws_agree"] = {b: bool(p > ALPHA) for b, p in out["horizon_p_between"].items()}
    out["horizon_decays"] = {b: bool(list(by_t.values())[-1] < list(by_t.values())[0])
                             for b, by_t in out["horizon"].items()}
    n_h = ds.n_traj_horizon
    counts = np.rint(ds.p_antipodal_horizon * n_h)
    out["horizon_decline_z"] = {float(b): float(two_proportion_z(
        counts.sel(beta_below_c=b).values[0], float(n_h.sel(beta_below_c=b)),
        counts.sel(beta_below_c=b).values[-1], float(n_h.sel(beta_below_c=b))))
        for b in ds.beta_below_c.values}
    out["horizon_declines"] = {b: bool(z > HORIZON_DECLINE_SE)
                               for b, z in out["horizon_decline_z"].items()}
    out["horizon_limit"] = {float(b): {float(t): float(p) for t, p in zip(
        ds.horizon.values, ds.p_theory_horizon.sel(beta_below_c=b).values)}
        for b in ds.beta_below_c.values}
    z_h = agreement_z(counts, n_h.broadcast_like(counts), ds.p_theory_horizon)
    out["horizon_max_abs_z"] = {float(b): float(np.abs(z_h.sel(beta_below_c=b)).max())
                                for b in ds.beta_below_c.values}
    out["horizon_agrees_limit"] = {b: bool(z <= HORIZON_AGREEMENT_SE)
                                   for b, z in out["horizon_max_abs_z"].items()}
    return out


def summary_convergence(ds, laws) -> dict:
    """The L sweep's part of the summary: the test between the laws at each of its L
    (``p_between_L``; ``conv_detects_first``: p at most :data:`ALPHA` at the smallest L),
    and at the smallest L the laws' mean gap to the limit and their spread."""
    Ls = sorted(int(L) for L in ds.L_conv.values)
    pth = float(ds.p_theory_conv)
    first = [float(ds.p_antipodal_L.sel(values=law, L_conv=Ls[0])) for law in laws]
    p_between = {int(L): float(p) for L, p in zip(ds.L_conv.values,
                                                  ds.p_value_between_laws_L.values)}
    return {"convergence_beta": float(ds.attrs["convergence_beta"]), "p_theory_conv": pth,
            "p_between_L": p_between, "conv_p_between_first": p_between[Ls[0]],
            "conv_detects_first": bool(p_between[Ls[0]] <= ALPHA), "conv_L_first": Ls[0],
            "conv_L_last": Ls[-1], "conv_gap_first": float(np.mean([p - pth for p in first])),
            "conv_spread_first": float(np.ptp(first)),
            "conv_se": float(np.sqrt(pth * (1 - pth) / float(ds.n_traj_L.max())))}
