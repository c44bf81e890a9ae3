r"""Universality: the two-token outcome law does not depend on the law of V.

Theorem 1 assumes i.i.d. centred value entries of variance :math:`\sigma^2`, bounded
(Assumption 1): its limit is the same for uniform and Rademacher entries.  Gaussian entries,
which the paper simulates, are unbounded; we expect, and check, the same limit.  What the
discrete model at a horizon T converges to is the limit's antipodal fraction at T
(:func:`limit_at_horizon`); the :math:`T \to \infty` curve
(:func:`stochastic_transformers.theory.antipodal_probability`) is a long-time property that
Theorem 1 does not reach (the limits in L and T would have to commute), a separate
comparison.  Gaussian values run on the exact overlap chain, uniform and Rademacher values on
the ``literal`` method, without early stopping.  A second sweep at one beta runs several L
(the discrete laws differ at order 1/L); a third runs the Gaussian chain longer at the betas
just below :math:`\beta_c`, where the pole -1 repels only weakly.
"""

from __future__ import annotations

import time

import numpy as np
import xarray as xr

from ... import sde, simulate, theory
from ..._validation import check_real, check_whole_layers
from ...classification import outcome_counts
from ...config import ModelConfig, RunConfig, configs_from_flat
from ...stats import agreement_z, two_proportion_z
from ..base import add_outcome_fractions, cell_threads, knob_attr, sweep_seconds
from ..knobs import all_of, choice, choices, integer, integers, reals, whole_layers
from ..spec import Figure
from . import _universality_page as _page
from ._universality_checks import (ALPHA, HORIZON_AGREEMENT_SE, HORIZON_DECLINE_SE,
                                   convergence_in_L, homogeneity, limit_at_horizon,
                                   summary_convergence, summary_horizon)

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


def _beta_max(knobs) -> float:
    """The largest beta: with softmax the limit at T is computed, up to
    :data:`stochastic_transformers.sde.ANTIPODAL_BETA_MAX`."""
    return sde.ANTIPODAL_BETA_MAX if knobs["attention"] == "softmax" else 300.0


def _horizons_on_layers(name, factors, knobs):
    """Relation check: every horizon T * factor is a whole number of layers at L."""
    for f in factors:
        check_whole_layers(knobs["T"] * f, knobs["L"], f"{name}: T * {f:g}")
    return factors


def _below_c(knobs) -> list:
    """The betas of the horizon check: strictly between 0 and beta_c (none without horizon
    factors or the Gaussian law)."""
    if not (len(knobs["horizon_factors"]) > 0 and "gaussian" in knobs["values"]):
        return []
    return [b for b in knobs["betas"] if 0.0 < b < theory.critical_beta(knobs["d"])]


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
    """Gaussian overlap chain at one beta below beta_c: outcome counts at the times
    ``T * horizon_factors``."""
    start = time.perf_counter()
    times = [T * f for f in horizon_factors]
    ds = simulate(ModelConfig(d=d, beta=beta, attention=attention),
                  RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=max(times), seed=seed, tol=tol,
                            times=times, stop_level=0.0, n_threads=cell_threads()))
    counts = [outcome_counts(ds, tol=tol, time=t) for t in times]
    return {"n_antipodal": np.array([c["antipodal"] for c in counts]),
            "n_unclustered": np.array([c["unclustered"] for c in counts]),
            "n_traj": n_traj, "elapsed_s": time.perf_counter() - start}


def run(knobs, sweeps):
    """The (law, beta) sweep at L, the (law, L) sweep at ``convergence_beta`` (part ``L``)
    and the horizon check below beta_c (part ``horizon``), finished by :func:`finish`."""
    fixed = {k: knobs[k] for k in ("L", "T", "d", "n_traj", "attention", "tol",
                                   "gaussian_method")}
    ds = sweeps({"values": list(knobs["values"]), "beta": list(knobs["betas"])}, fixed=fixed,
                seed=knobs["seed"])
    conv = horizon = None
    c_ls = [x for x in knobs["convergence_Ls"] if x != knobs["L"]]
    if knobs["convergence_beta"] is not None and c_ls:
        fixed_c = {k: v for k, v in fixed.items() if k != "L"} | dict(
            beta=knobs["convergence_beta"], n_traj=knobs["convergence_n_traj"])
        conv = sweeps({"values": list(knobs["values"]), "L": c_ls}, part="L", fixed=fixed_c,
                      seed=knobs["seed"])
    if _below_c(knobs):
        fixed_h = {k: knobs[k] for k in ("L", "T", "d", "n_traj", "attention", "tol")}
        horizon = sweeps({"beta": _below_c(knobs)}, cell=horizon_cell, part="horizon",
                         fixed=fixed_h | {"horizon_factors": list(knobs["horizon_factors"])},
                         seed=knobs["seed"], output_dims={"n_antipodal": ("horizon",),
                                                          "n_unclustered": ("horizon",)},
                         output_coords={"horizon": [knobs["T"] * f for f in
                                                    knobs["horizon_factors"]]})
    return finish(ds, knobs, conv=conv, horizon=horizon)


def _reference(ds):
    """What the simulation is compared with: the limit at the horizon T where it was
    computed (softmax), else the T -> infinity curve."""
    return ds.p_theory_T.where(np.isfinite(ds.p_theory_T), ds.p_theory)


def finish(ds, knobs, conv=None, horizon=None):
    """Fractions, both references (``p_theory`` at T = infinity, ``p_theory_T`` at T), the
    deviations from them (``z_score``, ``z_score_infinite``), the tests between the laws, the
    L sweep (:func:`.convergence_in_L`) and the horizon check (``..._horizon``)."""
    d = knobs["d"]
    ds = add_outcome_fractions(ds, ("antipodal", "single", "unclustered"))
    betas = ds.beta.values
    ds["p_theory"] = (("beta",), np.asarray(theory.antipodal_probability(betas, d), dtype=float))
    p_T, err_T = limit_at_horizon(betas, d, knobs["T"], knobs["tol"], knobs["attention"])
    ds["p_theory_T"] = (("beta",), p_T[:, 0], {
        "long_name": "limit's antipodal fraction at the horizon T (backward equation)"})
    ds["p_theory_T_error"] = (("beta",), err_T[:, 0])
    ds = ds.assign_coords(beta_fine=np.linspace(min(betas.min(), 0.0), betas.max(), 241))
    ds["p_theory_fine"] = (("beta_fine",), np.asarray(
        theory.antipodal_probability(ds.beta_fine.values, d), dtype=float))
    ds["beta_c"] = float(theory.critical_beta(d))
    for var, reference in (("z_score", _reference(ds)), ("z_score_infinite", ds.p_theory)):
        ds[var] = agreement_z(ds.n_antipodal, ds.n_traj, reference.broadcast_like(
            ds.n_antipodal)).transpose("values", "beta")
    ds["max_abs_z"] = np.abs(ds.z_score).max("beta")
    ds["beta_of_max_abs_z"] = ds.beta[np.abs(ds.z_score).argmax("beta")].drop_vars("beta")
    ds = _between_laws(ds)
    ds["cell_time_s"] = ds.elapsed_s.sum("beta")
    if conv is not None:
        ds = convergence_in_L(ds, conv, knobs)
    if horizon is not None:
        h = horizon.rename(beta="beta_below_c")
        ds["p_antipodal_horizon"] = h.n_antipodal / h.n_traj
        ds["p_unclustered_horizon"] = h.n_unclustered / h.n_traj
        ds["n_traj_horizon"] = h.n_traj
        ds["cell_time_horizon_s"] = float(h.elapsed_s.sum())
        ds["p_theory_horizon"] = (("beta_below_c", "horizon"), limit_at_horizon(
            h.beta_below_c.values, d, h.horizon.values, knobs["tol"], knobs["attention"])[0])
    # d, L, T, attention, tol and gaussian_method are the main sweep's fixed_* attributes
    ds.attrs["methods"] = f"gaussian: {knobs['gaussian_method']}; uniform, rademacher: literal"
    return ds


def _between_laws(ds):
    """The homogeneity test of the laws at every beta and summed over beta, and each law's
    two-proportion z against the Gaussian one."""
    from scipy import stats

    stat, dof, p = homogeneity(ds.n_antipodal.values, ds.n_traj.values)
    for var, value in (("chi2_between_laws", stat), ("dof_between_laws", dof),
                       ("p_value_between_laws", p)):
        ds[var] = (("beta",), value)
    total_stat, total_dof = float(stat.sum()), int(dof.sum())
    ds["chi2_between_laws_total"], ds["dof_between_laws_total"] = total_stat, total_dof
    ds["p_value_between_laws_total"] = (float(stats.chi2.sf(total_stat, total_dof))
                                        if total_dof > 0 else 1.0)
    if "gaussian" in ds["values"].values:
        g = ds.sel(values="gaussian")
        ds["z_vs_gaussian"] = xr.DataArray(
            two_proportion_z(ds.n_antipodal, ds.n_traj, g.n_antipodal, g.n_traj),
            dims=("values", "beta"), coords={"values": ds["values"], "beta": ds.beta})
    return ds


#: The limit at T and the T = infinity curve differ at this run's resolution
#: (``finite_T_shift_resolved``) when they differ somewhere by this many standard errors.
FINITE_T_SHIFT_SE = 2.0


def _per_law(laws, value) -> dict:
    return {law: float(value(law)) for law in laws}


def _summary_laws(ds, laws) -> dict:
    """Each law against the limit at T and the T = infinity curve, and the laws between them."""
    above = ds.beta.values > float(ds.beta_c)
    nan = float("nan")
    p_between = ds.p_value_between_laws
    # informative: some law has an antipodal pair (elsewhere every deviation is trivially 0)
    informative = (ds.dof_between_laws > 0).values
    out = {"laws": laws, "n_points": int(ds.z_score.size), "has_beta_above_c": bool(above.any()),
           "max_abs_z": _per_law(laws, lambda law: ds.max_abs_z.sel(values=law)),
           "beta_of_max_abs_z": _per_law(laws, lambda law: ds.beta_of_max_abs_z.sel(values=law)),
           "max_abs_z_infinite": _per_law(laws, lambda law: np.abs(
               ds.z_score_infinite.sel(values=law)).max()),
           "share_within_2se": float((np.abs(ds.z_score) <= 2).mean()),
           "n_points_informative": int(ds.z_score.values[:, informative].size),
           "share_within_2se_informative": (float(
               (np.abs(ds.z_score.values[:, informative]) <= 2).mean())
               if informative.any() else nan),
           "share_within_2se_above_c": (float((np.abs(ds.z_score.values[:, above]) <= 2).mean())
                                        if above.any() else nan),
           "min_p_between": float(p_between.min()),
           "beta_of_min_p_between": float(ds.beta[int(np.argmin(p_between.values))]),
           "n_tests_between": int((ds.dof_between_laws > 0).sum()),
           "chi2_total": float(ds.chi2_between_laws_total),
           "dof_total": int(ds.dof_between_laws_total),
           "p_total": float(ds.p_value_between_laws_total)}
    out["min_p_between_bonferroni"] = min(1.0, out["min_p_between"]
                                          * max(out["n_tests_between"], 1))
    out["laws_agree"] = bool(out["p_total"] > ALPHA and out["min_p_between_bonferroni"] > ALPHA)
    if "z_vs_gaussian" in ds:
        out["max_abs_z_vs_gaussian"] = float(np.abs(ds.z_vs_gaussian).max())
    return out


def summary(ds) -> dict:
    r"""Numbers and verdicts the notebook quotes: each law against both references and the
    laws between them (:func:`_summary_laws`, verdict ``laws_agree``); the references'
    distance (``max_shift_finite_T``, ``finite_T_shift_resolved``); the horizon check
    and the L sweep (:mod:`._universality_checks`); compute time per law."""
    laws = [str(v) for v in ds["values"].values]
    reference = _reference(ds)
    shift = np.abs(reference - ds.p_theory)
    n_max = float(ds.n_traj.max())
    shift_se = shift / np.sqrt(np.maximum(reference * (1 - reference), 0.25 / n_max) / n_max)
    out = _summary_laws(ds, laws) | {
        "max_unclustered": float(ds.p_unclustered.max()),
        "n_traj": int(ds.n_traj.max()),
        "cell_time_s": _per_law(laws, lambda law: ds.cell_time_s.sel(values=law)),
        "horizon_theory": bool(np.isfinite(ds.p_theory_T.values).all()),
        "max_shift_finite_T": float(np.abs(ds.p_theory_T - ds.p_theory).max()),
        "beta_of_max_shift_finite_T": float(ds.beta.values[int(np.argmax(shift.values))]),
        "max_shift_finite_T_se": float(shift_se.max()),
        "finite_T_shift_resolved": bool(float(shift_se.max()) >= FINITE_T_SHIFT_SE),
        "theory_T_error_max": float(ds.p_theory_T_error.max()),
        "d": int(knob_attr(ds, "d")), "L": int(knob_attr(ds, "L")),
        "T": float(knob_attr(ds, "T")), "attention": str(knob_attr(ds, "attention")),
        "beta_c": float(ds.beta_c)}
    if "p_antipodal_horizon" in ds:
        out |= summary_horizon(ds, laws)
    if "p_antipodal_L" in ds:
        out |= summary_convergence(ds, laws)
    return out


#: Seconds of simulation per trajectory-layer of the literal model (the unit of
#: :func:`work`), measured on the committed paper run (its cell time over its
#: trajectory-layers, on the project's 2-core machine).
SECONDS_PER_WORK = 3.56e-7
#: A layer of the Gaussian overlap chain in units of a literal layer: the chain runs
#: 11-12.5 M trajectory-layers a second per core on the same machine, against 2.57 M.
CHAIN_LAYER_WORK = 0.22


def _law_work(law, gaussian_method) -> float:
    """Work of one trajectory-layer of ``law``: 1 on the literal method, less on the chain."""
    return CHAIN_LAYER_WORK if law == "gaussian" and gaussian_method == "overlap_chain" else 1.0


def _layers(knobs) -> float:
    """Trajectory-layers of the main sweep and the L sweep for one law."""
    layers = knobs["n_traj"] * knobs["L"] * knobs["T"] * len(knobs["betas"])
    if knobs["convergence_beta"] is not None:
        layers += knobs["convergence_n_traj"] * knobs["T"] * sum(
            x for x in knobs["convergence_Ls"] if x != knobs["L"])
    return layers


def work(knobs) -> float:
    """Literal-equivalent trajectory-layers of a run: the main and L sweeps for every law (a
    Gaussian chain layer counts :data:`CHAIN_LAYER_WORK`) and the horizon check."""
    per_law = sum(_law_work(law, knobs["gaussian_method"]) for law in knobs["values"])
    horizon = (len(_below_c(knobs)) * knobs["n_traj"] * knobs["L"] * knobs["T"]
               * max(knobs["horizon_factors"], default=0.0) * CHAIN_LAYER_WORK)
    return float(per_law * _layers(knobs) + horizon)


def measured_work(ds) -> tuple[float, float]:
    """(seconds of simulation, literal-equivalent trajectory-layers) of a computed dataset,
    its three sweeps together."""
    method = str(knob_attr(ds, "gaussian_method"))
    weight = xr.DataArray([_law_work(str(v), method) for v in ds["values"].values],
                          dims="values", coords={"values": ds["values"]})
    L, T = int(knob_attr(ds, "L")), float(knob_attr(ds, "T"))
    seconds, layers = sweep_seconds(ds), float((ds.n_traj * weight).sum()) * L * T
    if "cell_time_convergence_s" in ds:
        seconds += float(ds.cell_time_convergence_s.sum())
        own = ds.n_traj_L.where(ds.L_conv != L, 0)   # the main sweep's L is counted above
        layers += float((own * ds.L_conv * weight).sum()) * T
    if "cell_time_horizon_s" in ds:
        seconds += float(ds.cell_time_horizon_s)
        layers += float(ds.n_traj_horizon.sum()) * L * float(ds.horizon.max()) * CHAIN_LAYER_WORK
    return seconds, layers


def phrases(s) -> dict[str, str]:
    """The page's sentences (Markdown) from :func:`summary` ``s``, under this module's criteria."""
    return _page.phrases(s, alpha=ALPHA, agreement_se=HORIZON_AGREEMENT_SE,
                         decline_se=HORIZON_DECLINE_SE)


def table(ds):
    """The page's table (Markdown): per beta, both references, each law's fraction and
    deviation, and the test that the laws are equal."""
    return _page.table(ds, _reference(ds))


def plot(ds):
    """(a) P(antipodal) vs beta per law with the limit curve; (b) deviation from it;
    (c) convergence in L at one beta."""
    return _page.plot(ds, _reference(ds))


FIGURE = Figure.declared(
    globals(), "universality", source="paper",
    description="two tokens: P(antipodal) vs beta for Gaussian, uniform and Rademacher values "
                "against the limit curve (Theorem 1's universality)",
    schema={"values": choices(LAWS), "d": integer(2),
            "betas": lambda name, value, knobs: reals(0.0, _beta_max(knobs), distinct=True,
                                                      sort=True)(name, value, knobs),
            "gaussian_method": choice(("overlap_chain", "literal")),
            "convergence_beta": lambda name, value, knobs: None if value is None else
            check_real(name, value, 0.0, _beta_max(knobs)),
            # the L sweep's depth scales put T on whole layers, and so do the horizons
            "convergence_Ls": all_of(integers(1, distinct=True, sort=True, empty=True),
                                     whole_layers("T", "convergence_Ls")),
            "convergence_n_traj": integer(1),
            "horizon_factors": all_of(reals(0.0, strict_min=True, increasing=True, empty=True),
                                      _horizons_on_layers)})
compute, cost = FIGURE.compute, FIGURE.cost
