r"""Universality: the two-token outcome law does not depend on the law of V.

Theorem 1 of the paper assumes i.i.d. value entries that are centred, of variance
:math:`\sigma^2` and bounded (its Assumption 1); under it the depth limit is the same
for uniform (on :math:`[-\sqrt3\sigma, \sqrt3\sigma]`) and Rademacher
(:math:`\pm\sigma`) entries.  Gaussian entries, which the paper simulates, are not
bounded and fall outside the theorem; they have moments of all orders, and we expect,
and check numerically, the same limit.  The paper states the universality but shows no
simulation of it.

Theorem 1 is weak convergence of paths on compact time intervals, so what the discrete
model at a horizon T converges to is the limit's law at T: here its antipodal fraction
:math:`P(Z_T \le -1 + \text{tol})` (:func:`limit_at_horizon`, a backward equation).  The
:math:`T \to \infty` curve :math:`P(\text{antipodal}\mid\beta, d)`
(:func:`stochastic_transformers.theory.antipodal_probability`, the scale-function exit
probability of the paper's App. C.3) is a long-time property of the limit; that the
discrete model's long-time fractions approach it needs the limits in L and T to
commute, which Theorem 1 does not give, so that comparison is a separate one.

We simulate the discrete two-token model at one dimension for the three laws and
compare each with the limit at T (deviation in standard errors, ``z_score``), with the
:math:`T = \infty` curve (``z_score_infinite``) and with each other (a chi-square test
of homogeneity of the 3 x 2 table laws x {antipodal, not} at every beta, and their sum
over beta).

**Methods.**  Gaussian values run on the exact overlap chain (seven random numbers a
layer, exact in law for the Gaussian model); uniform and Rademacher values need the
``literal`` method, a full d x d matrix of the requested law every layer.  Neither
uses early stopping: every trajectory runs :math:`LT` layers and is classified at
T with tolerance ``tol``; the fraction still unclustered at T is kept and reported.
(``gaussian_method="literal"`` runs the Gaussian law through the literal method too.)

**Finite L.**  At finite depth scale the three discrete models differ (the law of V
enters through its higher moments, at order 1/L for these symmetric laws; a skewed
centred law would enter at order :math:`L^{-1/2}` through its third moment); only the
limit is universal.  A
second, smaller sweep at one beta runs several L for the three laws to show that
they converge to the same limit value.

**Finite T.**  Just below :math:`\beta_c` the pole -1 repels only weakly, so at T some
trajectories may still sit within ``tol`` of it although the limit never ends there.
For those betas a third sweep runs the Gaussian chain to ``T * horizon_factors`` and
compares the fractions with the limit at the same horizons (``p_theory_horizon``).
"""

from __future__ import annotations

import time

import numpy as np
import xarray as xr

from .. import simulate, theory
from .._validation import check_real, check_whole_layers
from ..classification import outcome_counts
from ..config import ModelConfig, RunConfig, configs_from_flat
from ..stats import agreement_z, homogeneity_test, two_proportion_z
from .base import (add_outcome_fractions, all_of, cell_threads, choice, choices, cost_function,
                   figure_sweep, integer, integers, knob_attr, laid_out, reals, resolve_scale,
                   sweep_seconds, whole_layers)

ID = "universality"
#: Version of this module's cell outputs, folded into the sweep cache key; bump it whenever
#: :func:`cell` returns different outputs or numbers for the same arguments.
CELL_VERSION = "1"
DESCRIPTION = ("two tokens: P(antipodal) vs beta for Gaussian, uniform and Rademacher values "
               "against the limit curve (Theorem 1's universality)")

LAWS = ("gaussian", "uniform", "rademacher")

_COMMON = dict(d=4, values=LAWS, attention="softmax", tol=1e-3, gaussian_method="overlap_chain",
               horizon_factors=(1, 2, 4), seed=0)
SCALES = {
    "smoke": dict(_COMMON, betas=(0.0, 0.5, 1.0), L=10, T=10.0, n_traj=300,
                  convergence_beta=1.0, convergence_Ls=(5,), convergence_n_traj=300),
    "quick": dict(_COMMON, betas=(0.0, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0), L=20, T=30.0,
                  n_traj=4000, convergence_beta=1.0, convergence_Ls=(5, 10, 50),
                  convergence_n_traj=4000),
    "paper": dict(_COMMON, betas=tuple(np.round(np.arange(0.0, 4.01, 0.25), 2)), L=100,
                  T=100.0, n_traj=40_000, convergence_beta=1.0,
                  convergence_Ls=(5, 10, 20, 50, 200), convergence_n_traj=40_000),
}


def _optional_beta(name, value, knobs):
    """The check of ``convergence_beta``: a beta in [0, 300], or None (no L sweep)."""
    return None if value is None else check_real(name, value, 0.0, 300.0)


def _horizons_on_layers(name, factors, knobs):
    """Relation check: every horizon T * factor is a whole number of layers at L."""
    for f in factors:
        check_whole_layers(knobs["T"] * f, knobs["L"], f"{name}: T * {f:g}")
    return factors


#: The knobs beyond the shared ones (:data:`.base.KNOB_CHECKS`): the laws, distinct betas
#: (sorted), one dimension, the L sweep (its depth scales must put T on whole layers) and
#: the horizon factors (increasing; none turns the horizon check off).
KNOB_SCHEMA = {
    "values": choices(LAWS),
    "betas": reals(0.0, 300.0, distinct=True, sort=True),
    "d": integer(2),
    "gaussian_method": choice(("overlap_chain", "literal")),
    "convergence_beta": _optional_beta,
    "convergence_Ls": all_of(integers(1, distinct=True, sort=True, empty=True),
                             whole_layers("T", "convergence_Ls")),
    "convergence_n_traj": integer(1),
    "horizon_factors": all_of(reals(0.0, strict_min=True, increasing=True, empty=True),
                              _horizons_on_layers),
}


def cell(*, values, beta, L, T, d, n_traj, attention, tol, gaussian_method, seed):
    """One (law, beta, L) point: outcome counts of ``n_traj`` two-token trajectories at T."""
    start = time.perf_counter()
    method = gaussian_method if values == "gaussian" else "literal"
    ds = simulate(*configs_from_flat(n_tokens=2, d=d, beta=beta, n_traj=n_traj, L=L, T=T,
                                     attention=attention, values=values, method=method, seed=seed,
                                     tol=tol, n_threads=cell_threads(),
                                     **{"stop_level": 0.0} if method == "overlap_chain" else {}))
    counts = outcome_counts(ds, tol=tol)
    return {"n_single": counts["single"], "n_antipodal": counts["antipodal"],
            "n_unclustered": counts["unclustered"], "n_traj": n_traj,
            "elapsed_s": time.perf_counter() - start}


def horizon_cell(*, beta, L, T, d, n_traj, attention, tol, horizon_factors, seed):
    """Gaussian overlap chain at one beta: outcome counts at the times ``T * horizon_factors``.

    Used below beta_c, where the limit never ends antipodal but a finite horizon may
    still hold trajectories within ``tol`` of the weakly repelling pole -1.
    """
    start = time.perf_counter()
    times = [T * f for f in horizon_factors]
    ds = simulate(ModelConfig(d=d, beta=beta, attention=attention),
                  RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=max(times), seed=seed, tol=tol,
                            times=times, stop_level=0.0, n_threads=cell_threads()))
    counts = [outcome_counts(ds, tol=tol, time=t) for t in times]
    return {"n_antipodal": np.array([c["antipodal"] for c in counts]),
            "n_unclustered": np.array([c["unclustered"] for c in counts]),
            "n_traj": n_traj, "elapsed_s": time.perf_counter() - start}


def compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides):
    """Run the (law, beta) sweep at L, and the (law, L) sweep at ``convergence_beta``.

    Returns a dataset with ``p_antipodal(values, beta)`` and its Wilson 95% band
    (``_low``, ``_high``), ``p_single``, ``p_unclustered``, ``p_theory(beta)`` and the
    curve ``p_theory_fine(beta_fine)``, ``z_score(values, beta)`` (deviation from the
    limit in standard errors), ``max_abs_z(values)``, the homogeneity test
    ``chi2_between_laws(beta)``, ``dof_between_laws(beta)``, ``p_value_between_laws(beta)``
    and their sums over beta, ``z_vs_gaussian(values, beta)`` (two-proportion z), and,
    when ``convergence_beta`` is set, ``p_antipodal_L(values, L_conv)`` with its band and
    ``p_theory_conv``; for the betas strictly between 0 and beta_c (where the limit never
    ends antipodal), ``p_antipodal_horizon(beta_below_c, horizon)`` and
    ``p_unclustered_horizon`` of the Gaussian chain at the times ``T * horizon_factors``.
    """
    knobs = resolve_scale(SCALES, scale, overrides, KNOB_SCHEMA)
    run = dict(seed=knobs["seed"], scheduler=scheduler, cache_dir=cache_dir, progress=progress)
    fixed = {k: knobs[k] for k in ("L", "T", "d", "n_traj", "attention", "tol",
                                   "gaussian_method")}
    ds = figure_sweep(__name__, scale, {"values": list(knobs["values"]),
                                        "beta": list(knobs["betas"])}, fixed=fixed, **run)
    conv = None
    c_beta, c_ls = knobs["convergence_beta"], [x for x in knobs["convergence_Ls"]
                                               if x != knobs["L"]]
    if c_beta is not None and c_ls:
        fixed_c = dict(fixed, beta=c_beta, n_traj=knobs["convergence_n_traj"])
        del fixed_c["L"]
        conv = figure_sweep(__name__, scale, {"values": list(knobs["values"]), "L": c_ls},
                            part="L", fixed=fixed_c, **run)
    horizon = None
    below = [b for b in knobs["betas"] if 0.0 < b < theory.critical_beta(knobs["d"])]
    if below and len(knobs["horizon_factors"]) > 0 and "gaussian" in knobs["values"]:
        fixed_h = {k: knobs[k] for k in ("L", "T", "d", "n_traj", "attention", "tol")}
        fixed_h["horizon_factors"] = list(knobs["horizon_factors"])
        horizon = figure_sweep(__name__, scale, {"beta": below}, cell=horizon_cell,
                               part="horizon", fixed=fixed_h, **run,
                               output_dims={"n_antipodal": ("horizon",),
                                            "n_unclustered": ("horizon",)},
                               output_coords={"horizon": [knobs["T"] * f for f in
                                                          knobs["horizon_factors"]]})
    return _finish(ds, scale, knobs=knobs, conv=conv, horizon=horizon)


#: Grid step (in atanh of the overlap) of the backward equation that gives the limit's
#: antipodal fraction at a finite horizon: its error estimate (stored as
#: ``p_theory_T_error``) is below 2e-5 at T >= 30 and below 7e-4 at T = 10, a tenth of a
#: standard error or less at every scale's number of trajectories.
HORIZON_GRID_STEP = 0.1


def limit_at_horizon(betas, d, times, tol, attention="softmax"):
    r"""The limit diffusion's :math:`P(Z_t \le -1 + \text{tol})` at the ``times``, from two
    independent uniform tokens: ``(p, error)`` of shape ``(len(betas), len(times))``.

    Theorem 1 is a statement at a finite horizon: what the discrete model converges to at
    :math:`T` is this probability, not the :math:`T \to \infty` curve of
    :func:`stochastic_transformers.theory.antipodal_probability`, and near
    :math:`\beta_c(d)` the two differ by more than a standard error of the paper-scale run
    (at d = 4, T = 100: 0.0415 against 0.0377 at beta = 0.75).  It is the backward
    Kolmogorov equation with the indicator as data
    (:func:`stochastic_transformers.homogenized.antipodal_by` with the main paper's
    coefficients, softmax attention); for unnormalised attention it is not computed (nan).
    """
    from .. import homogenized

    betas = np.atleast_1d(np.asarray(betas, dtype=float))
    times = np.atleast_1d(np.asarray(times, dtype=float))
    p = np.full((betas.size, times.size), np.nan)
    err = np.full_like(p, np.nan)
    if attention != "softmax":
        return p, err
    for i, beta in enumerate(betas):
        p[i], err[i] = homogenized.antipodal_by(times, float(beta), int(d), model="stochastic",
                                                tol=float(tol), h=HORIZON_GRID_STEP)
    return p, err


def _finish(ds, scale, *, knobs, conv=None, horizon=None):
    """Fractions, bands, theory, deviations and the between-law tests from the raw counts."""
    d = knobs["d"]
    ds = add_outcome_fractions(ds, ("antipodal", "single", "unclustered"))
    betas = ds.beta.values
    ds["p_theory"] = (("beta",), np.asarray(theory.antipodal_probability(betas, d), dtype=float))
    p_T, err_T = limit_at_horizon(betas, d, knobs["T"], knobs["tol"], knobs["attention"])
    ds["p_theory_T"] = (("beta",), p_T[:, 0], {
        "long_name": "limit's antipodal fraction at the horizon T (backward equation)"})
    ds["p_theory_T_error"] = (("beta",), err_T[:, 0])
    # The deviations are from the limit at the horizon the simulation stops at (where it is
    # computed: softmax), else from the T -> infinity curve.
    reference = ds.p_theory_T.where(np.isfinite(ds.p_theory_T), ds.p_theory)
    beta_fine = np.linspace(min(betas.min(), 0.0), betas.max(), 241)
    ds = ds.assign_coords(beta_fine=beta_fine)
    ds["p_theory_fine"] = (("beta_fine",),
                           np.asarray(theory.antipodal_probability(beta_fine, d), dtype=float))
    ds["beta_c"] = float(theory.critical_beta(d))
    ds["z_score"] = agreement_z(ds.n_antipodal, ds.n_traj, reference.broadcast_like(
        ds.n_antipodal)).transpose("values", "beta")
    ds["z_score_infinite"] = agreement_z(ds.n_antipodal, ds.n_traj, ds.p_theory.broadcast_like(
        ds.n_antipodal)).transpose("values", "beta")
    ds["max_abs_z"] = np.abs(ds.z_score).max("beta")
    ds["beta_of_max_abs_z"] = ds.beta[np.abs(ds.z_score).argmax("beta")].drop_vars("beta")
    ds = _between_laws(ds)
    ds["cell_time_s"] = ds.elapsed_s.sum("beta")
    if conv is not None:
        ds = _convergence_in_L(ds, conv, knobs)
    if horizon is not None:
        h = horizon.rename(beta="beta_below_c")
        ds["p_antipodal_horizon"] = h.n_antipodal / h.n_traj
        ds["p_unclustered_horizon"] = h.n_unclustered / h.n_traj
        ds["n_traj_horizon"] = h.n_traj
        ds["cell_time_horizon_s"] = float(h.elapsed_s.sum())
        p_h, _ = limit_at_horizon(h.beta_below_c.values, d, h.horizon.values, knobs["tol"],
                                  knobs["attention"])
        ds["p_theory_horizon"] = (("beta_below_c", "horizon"), p_h)
    # d, L, T, attention, tol and gaussian_method are the main sweep's fixed_* attributes
    ds.attrs.update(scale=scale, figure=ID,
                    methods=("gaussian: " + knobs["gaussian_method"]
                             + "; uniform, rademacher: literal"))
    return ds


def _reference(ds):
    """What the simulation is compared with: the limit at the horizon T where it was
    computed, else the T -> infinity curve (results written before it existed)."""
    if "p_theory_T" in ds:
        return ds.p_theory_T.where(np.isfinite(ds.p_theory_T), ds.p_theory)
    return ds.p_theory


def _between_laws(ds):
    """The homogeneity test of the laws at every beta and summed over beta, and each law's
    two-proportion z against the Gaussian one."""
    from scipy import stats

    betas = ds.beta.values
    if ds["values"].size >= 2:
        stat, dof, p = homogeneity_test(ds.n_antipodal.values, ds.n_traj.values)
    else:  # one law: nothing to compare
        stat, dof, p = (np.zeros(betas.size), np.zeros(betas.size, dtype=int),
                        np.ones(betas.size))
    ds["chi2_between_laws"] = (("beta",), stat)
    ds["dof_between_laws"] = (("beta",), dof)
    ds["p_value_between_laws"] = (("beta",), p)
    total_stat, total_dof = float(stat.sum()), int(dof.sum())
    ds["chi2_between_laws_total"] = total_stat
    ds["dof_between_laws_total"] = total_dof
    ds["p_value_between_laws_total"] = (float(stats.chi2.sf(total_stat, total_dof))
                                        if total_dof > 0 else 1.0)
    if "gaussian" in ds["values"].values:
        g = ds.sel(values="gaussian")
        ds["z_vs_gaussian"] = xr.DataArray(
            two_proportion_z(ds.n_antipodal, ds.n_traj, g.n_antipodal, g.n_traj),
            dims=("values", "beta"), coords={"values": ds["values"], "beta": ds.beta})
    return ds


def _convergence_in_L(ds, conv, knobs):
    """The L sweep at ``convergence_beta`` (with the main sweep's L where it ran that beta):
    fractions over ``L_conv``, deviations from the limit and the test between the laws."""
    conv = add_outcome_fractions(conv, ("antipodal", "unclustered"))
    parts = [conv[["n_antipodal", "n_traj", "n_unclustered", "elapsed_s"]]]
    betas, c_beta = ds.beta.values, knobs["convergence_beta"]
    if np.any(np.isclose(betas, c_beta)):
        main = ds.sel(beta=betas[np.isclose(betas, c_beta)][0])
        parts.append(main[["n_antipodal", "n_traj", "n_unclustered", "elapsed_s"]]
                     .drop_vars("beta").expand_dims(L=[knobs["L"]]))
    merged = xr.concat(parts, dim="L").sortby("L").rename(L="L_conv")
    merged = add_outcome_fractions(merged, ("antipodal",))
    for var in ("p_antipodal", "p_antipodal_low", "p_antipodal_high"):
        ds[var.replace("p_antipodal", "p_antipodal_L")] = merged[var].transpose(
            "values", "L_conv")
    ds["n_antipodal_L"] = merged.n_antipodal.transpose("values", "L_conv")
    ds["n_traj_L"] = merged.n_traj.transpose("values", "L_conv")
    ds["p_unclustered_L"] = (merged.n_unclustered / merged.n_traj).transpose("values",
                                                                              "L_conv")
    p_T, _ = limit_at_horizon([c_beta], knobs["d"], knobs["T"], knobs["tol"], knobs["attention"])
    ds["p_theory_conv_infinite"] = float(theory.antipodal_probability(c_beta, knobs["d"]))
    ds["p_theory_conv"] = (float(p_T[0, 0]) if np.isfinite(p_T[0, 0])
                           else float(ds.p_theory_conv_infinite))
    ds["z_score_L"] = agreement_z(ds.n_antipodal_L, ds.n_traj_L,
                                  xr.full_like(ds.p_antipodal_L, float(ds.p_theory_conv)))
    cp = (homogeneity_test(ds.n_antipodal_L.values, ds.n_traj_L.values)[2]
          if ds["values"].size >= 2 else np.ones(ds.L_conv.size))
    ds["p_value_between_laws_L"] = (("L_conv",), cp)
    ds["cell_time_convergence_s"] = conv.elapsed_s.sum("L")
    ds.attrs["convergence_beta"] = c_beta
    return ds


#: Significance level of the tests between the laws: the laws count as agreeing when the
#: summed homogeneity test and the smallest single-beta test after a Bonferroni correction
#: both have p above it.
ALPHA = 0.05

#: The Gaussian chain's antipodal fraction counts as falling between the first and the last
#: horizon of the horizon check when the drop exceeds this many standard errors (a pooled
#: two-proportion z that treats the two fractions as independent; they come from the same
#: trajectories, and for positively correlated indicators, as we expect of one trajectory
#: at two times, that overstates the standard error, so the test is conservative).
HORIZON_DECLINE_SE = 2.0

#: The limit at T and the :math:`T = \infty` curve count as different at this run's
#: resolution (``finite_T_shift_resolved``) when they differ somewhere by at least this many
#: standard errors of one fraction.
FINITE_T_SHIFT_SE = 2.0

#: The Gaussian chain of the horizon check agrees with the limit at the same horizons
#: (``horizon_agrees_limit``) when its largest deviation is at most this many standard errors.
HORIZON_AGREEMENT_SE = 2.0


def _summary_horizon(ds, laws, out) -> None:
    """The horizon check's part of :func:`summary` (betas below beta_c), into ``out``."""
    out["horizon"] = {float(b): {float(t): float(p) for t, p in zip(
        ds.horizon.values, ds.p_antipodal_horizon.sel(beta_below_c=b).values)}
        for b in ds.beta_below_c.values}
    out["horizon_main"] = {b: {law: float(ds.p_antipodal.sel(values=law, beta=b))
                               for law in laws} for b in out["horizon"]}
    out["horizon_p_between"] = {b: float(ds.p_value_between_laws.sel(beta=b))
                                for b in out["horizon"]}
    out["horizon_decays"] = {b: bool(list(by_t.values())[-1] < list(by_t.values())[0])
                             for b, by_t in out["horizon"].items()}
    n_h = ds.n_traj_horizon
    counts = np.rint(ds.p_antipodal_horizon * n_h)
    decline = {}
    for b in ds.beta_below_c.values:
        k, n = counts.sel(beta_below_c=b).values, float(n_h.sel(beta_below_c=b))
        decline[float(b)] = float(two_proportion_z(k[0], n, k[-1], n))
    out["horizon_decline_z"] = decline
    out["horizon_declines"] = {b: bool(z > HORIZON_DECLINE_SE) for b, z in decline.items()}
    if "p_theory_horizon" in ds:
        out["horizon_limit"] = {float(b): {float(t): float(p) for t, p in zip(
            ds.horizon.values, ds.p_theory_horizon.sel(beta_below_c=b).values)}
            for b in ds.beta_below_c.values}
        z_h = agreement_z(counts, n_h.broadcast_like(counts), ds.p_theory_horizon)
        out["horizon_max_abs_z"] = {float(b): float(np.abs(z_h.sel(beta_below_c=b)).max())
                                    for b in ds.beta_below_c.values}
        out["horizon_agrees_limit"] = {b: bool(z <= HORIZON_AGREEMENT_SE)
                                       for b, z in out["horizon_max_abs_z"].items()}
    else:
        out["horizon_limit"] = {b: {t: float("nan") for t in by_t}
                                for b, by_t in out["horizon"].items()}
        out["horizon_max_abs_z"] = {b: float("nan") for b in out["horizon"]}
        out["horizon_agrees_limit"] = {b: False for b in out["horizon"]}
    out["horizon_laws_agree"] = {b: bool(p > ALPHA)
                                 for b, p in out["horizon_p_between"].items()}
    out["cell_time_horizon_s"] = float(ds.cell_time_horizon_s)


def _summary_convergence(ds, laws, out) -> None:
    """The L sweep's part of :func:`summary`, into ``out``."""
    out["convergence_beta"] = float(ds.attrs["convergence_beta"])
    out["p_theory_conv"] = float(ds.p_theory_conv)
    out["p_conv"] = {law: {int(L): float(p) for L, p in
                           zip(ds.L_conv.values, ds.p_antipodal_L.sel(values=law).values)}
                     for law in laws}
    out["p_between_L"] = {int(L): float(p) for L, p in
                          zip(ds.L_conv.values, ds.p_value_between_laws_L.values)}
    out["cell_time_convergence_s"] = {law: float(ds.cell_time_convergence_s.sel(values=law))
                                      for law in laws}
    Ls_c = sorted(int(L) for L in ds.L_conv.values)
    pth = out["p_theory_conv"]
    gap = {L: float(np.mean([out["p_conv"][law][L] - pth for law in laws])) for L in Ls_c}
    spread = {L: float(np.ptp([out["p_conv"][law][L] for law in laws])) for L in Ls_c}
    out.update(conv_p_between_first=out["p_between_L"][Ls_c[0]],
               conv_p_between_last=out["p_between_L"][Ls_c[-1]],
               conv_detects_first=bool(out["p_between_L"][Ls_c[0]] <= ALPHA))
    out.update(conv_L_first=Ls_c[0], conv_L_last=Ls_c[-1],
               conv_gap_first=gap[Ls_c[0]], conv_gap_last=gap[Ls_c[-1]],
               conv_spread_first=spread[Ls_c[0]], conv_spread_last=spread[Ls_c[-1]],
               conv_se=float(np.sqrt(pth * (1 - pth) / float(ds.n_traj_L.max()))))


def summary(ds) -> dict:
    r"""Numbers and verdicts the notebook quotes.

    Besides the deviations from the limit at the horizon T (``max_abs_z``; ``z_score`` of
    the dataset, against :func:`limit_at_horizon`) and from the :math:`T = \infty` curve
    (``max_abs_z_infinite``), ``horizon_theory`` (the limit at T was computed),
    ``max_shift_finite_T`` (its largest distance from the curve),
    ``beta_of_max_shift_finite_T`` (where it is largest), ``max_shift_finite_T_se`` (the
    largest shift in standard errors of one fraction at the limit at T;
    ``finite_T_shift_resolved``: at least :data:`FINITE_T_SHIFT_SE`) and
    ``theory_T_error_max`` (the backward equation's error estimate): the run's ``d``,
    ``L``, ``T``, ``attention`` and :math:`\beta_c(d)` (``beta_c``);
    ``max_abs_z_above_c`` and ``max_abs_z_infinite_above_c`` (each law's largest deviation
    over beta > beta_c, nan without such a beta, ``has_beta_above_c``);
    ``share_within_2se`` over all points and ``share_within_2se_above_c`` over beta > beta_c
    (below it the limit is near 0 and most counts are 0, which inflates the share; nan
    without such a beta); ``min_p_between_bonferroni`` and the verdict ``laws_agree`` (see
    :data:`ALPHA`).  With the horizon check, for each beta below beta_c: ``horizon_main``
    (each law's antipodal fraction at T), ``horizon_p_between``, ``horizon_laws_agree``
    (p above :data:`ALPHA`), the limit's fractions at the same horizons
    (``horizon_limit``, nan without them), the Gaussian chain's largest deviation from
    them in standard errors (``horizon_max_abs_z``; ``horizon_agrees_limit``: at most
    :data:`HORIZON_AGREEMENT_SE`), ``horizon_decays`` (the Gaussian
    fraction at the longest horizon is below that at T, however little),
    ``horizon_decline_z`` (that drop in standard errors) and ``horizon_declines`` (it
    exceeds :data:`HORIZON_DECLINE_SE`).  With the L sweep: its smallest and largest L
    (``conv_L_first``, ``conv_L_last``), the gap to the limit averaged over the laws
    (``conv_gap_*``), the spread between the laws (``conv_spread_*``), the homogeneity
    p-value at both (``conv_p_between_first``, ``conv_p_between_last``),
    ``conv_detects_first`` (that test finds the laws different at the smallest L, p at
    most :data:`ALPHA`) and one standard error of a single fraction at the limit value
    (``conv_se``).  Last, the cost: ``paper_cost_cpu_hours`` (:func:`cost_by_law` in
    hours) and ``projects_cost`` (False at the smoke scale, whose cells are too short for
    a rate).
    """
    laws = [str(v) for v in ds["values"].values]
    beta_c = float(ds.beta_c)
    above = ds.beta.values > beta_c
    reference = _reference(ds)
    shift = np.abs(reference - ds.p_theory)
    n_max = float(ds.n_traj.max())
    shift_se = shift / np.sqrt(np.maximum(reference * (1 - reference), 0.25 / n_max) / n_max)
    z_inf = ds.z_score_infinite if "z_score_infinite" in ds else None
    out = {
        "laws": laws,
        "max_abs_z": {law: float(ds.max_abs_z.sel(values=law)) for law in laws},
        "beta_of_max_abs_z": {law: float(ds.beta_of_max_abs_z.sel(values=law)) for law in laws},
        "share_within_2se": float((np.abs(ds.z_score) <= 2).mean()),
        "share_within_2se_above_c": (float((np.abs(ds.z_score.values[:, above]) <= 2).mean())
                                     if above.any() else float("nan")),
        "n_points": int(ds.z_score.size),
        "min_p_between": float(ds.p_value_between_laws.min()),
        "beta_of_min_p_between": float(ds.beta[int(np.argmin(ds.p_value_between_laws.values))]),
        "n_tests_between": int((ds.dof_between_laws > 0).sum()),
        "chi2_total": float(ds.chi2_between_laws_total),
        "dof_total": int(ds.dof_between_laws_total),
        "p_total": float(ds.p_value_between_laws_total),
        "max_unclustered": float(ds.p_unclustered.max()),
        "max_unclustered_law": str(ds["values"].values[
            int(np.argmax(ds.p_unclustered.max("beta").values))]),
        "n_traj": int(ds.n_traj.max()),
        "cell_time_s": {law: float(ds.cell_time_s.sel(values=law)) for law in laws},
        "max_abs_diff": float(np.abs(ds.p_antipodal - _reference(ds)).max()),
        "max_abs_z_infinite": {law: float(np.abs(ds.z_score_infinite.sel(values=law)).max())
                               if "z_score_infinite" in ds else float("nan") for law in laws},
        "horizon_theory": bool("p_theory_T" in ds and np.isfinite(ds.p_theory_T.values).all()),
        "max_shift_finite_T": (float(np.abs(ds.p_theory_T - ds.p_theory).max())
                               if "p_theory_T" in ds else float("nan")),
        "beta_of_max_shift_finite_T": float(ds.beta.values[int(np.argmax(shift.values))]),
        "max_shift_finite_T_se": float(shift_se.max()),
        "finite_T_shift_resolved": bool(float(shift_se.max()) >= FINITE_T_SHIFT_SE),
        "theory_T_error_max": (float(ds.p_theory_T_error.max())
                               if "p_theory_T_error" in ds else float("nan")),
        "d": int(knob_attr(ds, "d")), "L": int(knob_attr(ds, "L")),
        "T": float(knob_attr(ds, "T")), "attention": str(knob_attr(ds, "attention")),
        "beta_c": beta_c, "has_beta_above_c": bool(above.any()),
        "max_abs_z_above_c": {law: float(np.abs(ds.z_score.sel(values=law).values[above]).max())
                              if above.any() else float("nan") for law in laws},
        "max_abs_z_infinite_above_c": {
            law: float(np.abs(z_inf.sel(values=law).values[above]).max())
            if above.any() and z_inf is not None else float("nan") for law in laws},
        "n_cells": int(ds.attrs.get("n_cells", 0)),
        "n_cells_cached": int(ds.attrs.get("n_cells_cached", 0)),
    }
    out["min_p_between_bonferroni"] = min(1.0, out["min_p_between"]
                                          * max(out["n_tests_between"], 1))
    out["laws_agree"] = bool(out["p_total"] > ALPHA and out["min_p_between_bonferroni"] > ALPHA)
    if "z_vs_gaussian" in ds:
        out["max_abs_z_vs_gaussian"] = float(np.abs(ds.z_vs_gaussian).max())
    if "p_antipodal_horizon" in ds:
        _summary_horizon(ds, laws, out)
    if "p_antipodal_L" in ds:
        _summary_convergence(ds, laws, out)
    out["paper_cost_cpu_hours"] = {k: v / 3600 for k, v in cost_by_law(ds, "paper").items()}
    out["projects_cost"] = ds.attrs.get("scale") != "smoke"
    return out


#: Seconds of simulation per trajectory-layer of the literal model (the unit of
#: :func:`work`), measured on the committed paper run (results/universality_paper.nc: its
#: cell time over its trajectory-layers, on the project's 2-core machine).
SECONDS_PER_WORK = 3.56e-7
#: A layer of the Gaussian overlap chain in units of a literal layer: the chain runs
#: 11-12.5 M trajectory-layers a second per core on the same machine, against 2.57 M.
CHAIN_LAYER_WORK = 0.22


def _law_work(law, gaussian_method) -> float:
    """Work of one trajectory-layer of ``law``: 1 on the literal method, less on the chain."""
    return CHAIN_LAYER_WORK if law == "gaussian" and gaussian_method == "overlap_chain" else 1.0


def work(knobs) -> float:
    """Literal-equivalent trajectory-layers of a run with these knobs: the main sweep and
    the L sweep for every law (a Gaussian chain layer counts :data:`CHAIN_LAYER_WORK`) and
    the horizon check (Gaussian chain to ``T * max(horizon_factors)``)."""
    per_law = sum(_law_work(law, knobs["gaussian_method"]) for law in knobs["values"])
    layers = knobs["n_traj"] * knobs["L"] * knobs["T"] * len(knobs["betas"])
    if knobs["convergence_beta"] is not None:
        layers += knobs["convergence_n_traj"] * knobs["T"] * sum(
            x for x in knobs["convergence_Ls"] if x != knobs["L"])
    below = [b for b in knobs["betas"] if 0.0 < b < theory.critical_beta(knobs["d"])]
    horizon = 0.0
    if below and len(knobs["horizon_factors"]) > 0 and "gaussian" in knobs["values"]:
        horizon = (len(below) * knobs["n_traj"] * knobs["L"] * knobs["T"]
                   * max(knobs["horizon_factors"]) * CHAIN_LAYER_WORK)
    return float(per_law * layers + horizon)


def measured_work(ds) -> tuple[float, float]:
    """(seconds of simulation, literal-equivalent trajectory-layers) of a computed dataset,
    its three sweeps together."""
    method = str(knob_attr(ds, "gaussian_method"))
    weight = xr.DataArray([_law_work(str(v), method) for v in ds["values"].values],
                          dims="values", coords={"values": ds["values"]})
    L, T = int(knob_attr(ds, "L")), float(knob_attr(ds, "T"))
    seconds = sweep_seconds(ds)
    layers = float((ds.n_traj * weight).sum()) * L * T
    if "cell_time_convergence_s" in ds:
        seconds += float(ds.cell_time_convergence_s.sum())
        own = ds.n_traj_L.where(ds.L_conv != L, 0)   # the main sweep's L is counted above
        layers += float((own * ds.L_conv * weight).sum()) * T
    if "cell_time_horizon_s" in ds:
        seconds += float(ds.cell_time_horizon_s)
        layers += float(ds.n_traj_horizon.sum()) * L * float(ds.horizon.max()) * CHAIN_LAYER_WORK
    return seconds, layers


cost = cost_function(__name__, note=":func:`cost_by_law` splits a run's projection by law.")


def cost_by_law(ds, target="paper") -> dict:
    """CPU-seconds the ``target`` scale would take, per law, at this run's cost per layer.

    A cell's cost is proportional to trajectories x layers (L T); the rate of each law
    is measured on this run's main sweep (so the Gaussian rate is the overlap chain's
    unless ``gaussian_method="literal"``).  The horizon check is not included (one
    Gaussian-chain cell per beta below beta_c).
    """
    knobs = SCALES[target]
    L, T = int(knob_attr(ds, "L")), float(knob_attr(ds, "T"))
    out = {}
    for law in [str(v) for v in ds["values"].values]:
        layers = float((ds.n_traj.sel(values=law) * L * T).sum())
        rate = float(ds.cell_time_s.sel(values=law)) / layers
        main = knobs["n_traj"] * knobs["L"] * knobs["T"] * len(knobs["betas"])
        conv = knobs["convergence_n_traj"] * knobs["T"] * sum(
            x for x in knobs["convergence_Ls"] if x != knobs["L"])
        out[law] = rate * (main + conv)
    out["total"] = sum(out.values())
    return out


_SHORT = {"gaussian": "Gaussian", "uniform": "uniform", "rademacher": "Rademacher"}
_LABELS = {"gaussian": "Gaussian (exact overlap chain)", "uniform": "uniform (literal)",
           "rademacher": "Rademacher (literal)"}


def plot(ds):
    """(a) P(antipodal) vs beta per law with the limit curve; (b) deviation from it;
    (c) convergence in L at one beta."""
    import matplotlib.pyplot as plt

    from ..style import palette

    laws = [str(v) for v in ds["values"].values]
    colours = dict(zip(LAWS, palette(3)))
    markers = dict(zip(LAWS, "os^"))
    has_conv = "p_antipodal_L" in ds
    fig = plt.figure(figsize=(11.5 if has_conv else 7.2, 6.2))
    gs = fig.add_gridspec(2, 2 if has_conv else 1, height_ratios=[3, 1.3],
                          width_ratios=[1.35, 1] if has_conv else None)
    ax = fig.add_subplot(gs[0, 0])
    axd = fig.add_subplot(gs[1, 0], sharex=ax)
    betas = ds.beta.values
    width = 0.012 * (betas.max() - betas.min() if betas.size > 1 else 1.0)
    gaussian_method = knob_attr(ds, "gaussian_method", "overlap_chain")
    for i, law in enumerate(laws):
        sub = ds.sel(values=law)
        x = betas + (i - (len(laws) - 1) / 2) * width
        p = sub.p_antipodal.values
        err = np.vstack([p - sub.p_antipodal_low.values, sub.p_antipodal_high.values - p])
        label = _LABELS[law] if law != "gaussian" or gaussian_method == "overlap_chain" \
            else "Gaussian (literal)"
        ax.errorbar(x, p, yerr=err, fmt=markers[law], color=colours[law], ms=4, capsize=2, lw=1,
                    label=label)
        d = p - _reference(ds).values
        axd.errorbar(x, d, yerr=np.vstack([p - sub.p_antipodal_low.values,
                                           sub.p_antipodal_high.values - p]),
                     fmt=markers[law], color=colours[law], ms=3.5, capsize=2, lw=0.8)
    ax.plot(ds.beta_fine, ds.p_theory_fine, color="k", lw=1.3,
            label=r"limit, $T = \infty$ (scale function)")
    if "p_theory_T" in ds and np.isfinite(ds.p_theory_T.values).any():
        ax.plot(betas, ds.p_theory_T, color="k", ls="none", marker="x", ms=5,
                label=f"limit at T = {knob_attr(ds, 'T'):g} (backward equation)")
    ax.axvline(float(ds.beta_c), color="0.4", ls="--", lw=1, label=r"$\beta_c(d)$")
    ax.set_ylabel(r"$P(\mathrm{antipodal\ at\ } T)$")
    ax.legend(fontsize=8, loc="upper left")
    n = int(ds.n_traj.max())
    ax.set_title(f"(a) d = {knob_attr(ds, 'd')}, L = {knob_attr(ds, 'L')}, T = {knob_attr(ds, 'T'):g}, "
                 f"{n:,} trajectories per point; bars: Wilson 95%", fontsize=9.5)
    ax.tick_params(labelbottom=False)
    axd.axhline(0, color="0.3", lw=0.8)
    axd.set_ylabel("sim - limit at T", fontsize=9)
    axd.set_xlabel(r"$\beta$")
    p_tot = float(ds.p_value_between_laws_total)
    axd.set_title(f"(b) deviation from the limit at T; equality of the laws: "
                  rf"$\chi^2$ = {float(ds.chi2_between_laws_total):.1f} on "
                  f"{int(ds.dof_between_laws_total)} d.o.f., p = {p_tot:.2g}", fontsize=9)
    if has_conv:
        axc = fig.add_subplot(gs[:, 1])
        Ls = ds.L_conv.values.astype(float)
        for i, law in enumerate(laws):
            sub = ds.sel(values=law)
            p = sub.p_antipodal_L.values
            err = np.vstack([p - sub.p_antipodal_L_low.values, sub.p_antipodal_L_high.values - p])
            axc.errorbar(Ls * (1 + 0.04 * (i - 1)), p, yerr=err, fmt=markers[law] + "-",
                         color=colours[law], ms=4, capsize=2, lw=1, label=_SHORT[law])
        axc.axhline(float(ds.p_theory_conv), color="k", lw=1.3,
                    label=f"limit (L = infinity) at T = {knob_attr(ds, 'T'):g}")
        axc.set_xscale("log")
        axc.set_xticks(Ls)
        axc.set_xticklabels([str(int(x)) for x in Ls])
        axc.minorticks_off()
        axc.set_xlabel("L (layers per unit time)")
        axc.set_ylabel(r"$P(\mathrm{antipodal\ at\ } T)$")
        axc.set_title(rf"(c) convergence in L at $\beta$ = {ds.attrs['convergence_beta']:g}"
                      f" (T = {knob_attr(ds, 'T'):g}, {int(ds.n_traj_L.max()):,} trajectories)",
                      fontsize=9.5)
        axc.legend(fontsize=8, loc="lower right")
    return laid_out(fig,
                    "Universality: the two-token outcome law for three laws of the value entries "
                    r"(same variance $\sigma^2 = 1$)", fontsize=10)
