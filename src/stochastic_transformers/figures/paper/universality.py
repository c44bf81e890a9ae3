r"""Universality: the two-token outcome law does not depend on the law of V.

Theorem 1's limit is the same for every i.i.d. centred, bounded law of the value entries of
variance :math:`\sigma^2` (Assumption 1); for unbounded Gaussian ones we expect the same.  The
model run to a horizon T converges to the limit's antipodal fraction at T
(:func:`limit_at_horizon`), not to the :math:`T \to \infty` curve (the limits in L and T would
have to commute).  Gaussian values run on the exact overlap chain, the others on the literal
model.  Beside the main sweep: several L at one beta, and longer horizons below beta_c.
"""

from __future__ import annotations

import time

import numpy as np
import xarray as xr

from ... import sde, simulate, theory
from ..._validation import check_real, check_whole_layers
from ...classification import outcome_counts
from ...config import ModelConfig, RunConfig, configs_from_flat
from ...stats import agreement_z, homogeneity_test, two_proportion_z
from ..base import add_outcome_fractions, cell_threads, knob_attr, sweep_seconds
from ..knobs import all_of, choice, choices, integer, integers, reals, whole_layers
from ..spec import Figure
from . import _universality_page as _page

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

#: Significance level of the tests between the laws: they agree when the summed homogeneity
#: test and the smallest single-beta test after a Bonferroni correction both have p above it.
ALPHA = 0.05
#: The Gaussian chain's antipodal fraction falls between the first and the last horizon when
#: the drop exceeds this many standard errors (a pooled two-proportion z treating the two
#: fractions as independent; they come from the same trajectories, and for positively
#: correlated indicators that overstates the standard error: the test is conservative).
HORIZON_DECLINE_SE = 2.0
#: The horizon check's chain agrees with the limit at the same horizons when its largest
#: deviation is at most this many standard errors.
HORIZON_AGREEMENT_SE = 2.0
#: The limit at T and the T = infinity curve differ at this run's resolution when they
#: differ somewhere by this many standard errors.
FINITE_T_SHIFT_SE = 2.0
#: Grid step (in atanh of the overlap) of the backward equation at a finite horizon: its error
#: is below 2e-5 at T >= 30 and 7e-4 at T = 10, a tenth of a standard error at every scale.
HORIZON_GRID_STEP = 0.1


def _beta_max(knobs) -> float:
    """The largest beta (with softmax, where the limit at T is computed, a smaller one)."""
    return sde.ANTIPODAL_BETA_MAX if knobs["attention"] == "softmax" else 300.0


def _horizons_on_layers(name, factors, knobs):
    """Relation check: every horizon T * factor is a whole number of layers at L."""
    for f in factors:
        check_whole_layers(knobs["T"] * f, knobs["L"], f"{name}: T * {f:g}")
    return factors


def _below_c(knobs) -> list:
    """The betas of the horizon check: in (0, beta_c), if it runs (horizons, Gaussian law)."""
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
    """Gaussian overlap chain at one beta below beta_c: outcome counts at ``T * factors``."""
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


def _homogeneity(counts, totals):
    """:func:`~stochastic_transformers.stats.homogeneity_test` over the laws (axis 0); one
    law has nothing to compare (statistic 0, 0 degrees of freedom, p-value 1)."""
    if counts.shape[0] >= 2:
        return homogeneity_test(counts, totals)
    shape = counts.shape[1:]
    return np.zeros(shape), np.zeros(shape, dtype=int), np.ones(shape)


def _reference(ds):
    """The reference: the limit at the horizon T where computed (softmax), else T = infinity."""
    return ds.p_theory_T.where(np.isfinite(ds.p_theory_T), ds.p_theory)


def finish(ds, knobs, conv=None, horizon=None):
    """Fractions; both references (``p_theory`` at T = infinity, ``p_theory_T`` at T); the
    deviations ``z_score`` from :func:`_reference`; the homogeneity tests between the laws at
    every beta and summed; the L sweep (``..._L``) and the horizon check (``..._horizon``)."""
    from scipy import stats

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
    ds["z_score"] = agreement_z(ds.n_antipodal, ds.n_traj, _reference(ds).broadcast_like(
        ds.n_antipodal)).transpose("values", "beta")
    ds["max_abs_z"] = np.abs(ds.z_score).max("beta")
    ds["beta_of_max_abs_z"] = ds.beta[np.abs(ds.z_score).argmax("beta")].drop_vars("beta")
    stat, dof, p = _homogeneity(ds.n_antipodal.values, ds.n_traj.values)
    for var, value in zip(("chi2_between_laws", "dof_between_laws", "p_value_between_laws"),
                          (stat, dof, p)):
        ds[var] = (("beta",), value)
    ds["chi2_between_laws_total"], ds["dof_between_laws_total"] = float(stat.sum()), int(dof.sum())
    ds["p_value_between_laws_total"] = (float(stats.chi2.sf(stat.sum(), dof.sum()))
                                        if dof.sum() > 0 else 1.0)
    ds["cell_time_s"] = ds.elapsed_s.sum("beta")
    if conv is not None:
        ds = _convergence_in_L(ds, conv, knobs)
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


def _convergence_in_L(ds, conv, knobs):
    """The L sweep at ``convergence_beta`` (with the main sweep's L if it ran that beta):
    fractions over ``L_conv``, deviations from the limit, the test between the laws."""
    conv = add_outcome_fractions(conv, ("antipodal", "unclustered"))
    counts = ["n_antipodal", "n_traj", "n_unclustered", "elapsed_s"]
    parts = [conv[counts]]
    betas, c_beta = ds.beta.values, knobs["convergence_beta"]
    if np.any(np.isclose(betas, c_beta)):
        main = ds.sel(beta=betas[np.isclose(betas, c_beta)][0])
        parts.append(main[counts].drop_vars("beta").expand_dims(L=[knobs["L"]]))
    merged = xr.concat(parts, dim="L").sortby("L").rename(L="L_conv")
    merged = add_outcome_fractions(merged, ("antipodal",))
    for var in ("p_antipodal", "p_antipodal_low", "p_antipodal_high", "n_antipodal", "n_traj"):
        name = var.replace("antipodal", "antipodal_L") if "antipodal" in var else var + "_L"
        ds[name] = merged[var].transpose("values", "L_conv")
    ds["p_unclustered_L"] = (merged.n_unclustered / merged.n_traj).transpose("values", "L_conv")
    p_T, _ = limit_at_horizon([c_beta], knobs["d"], knobs["T"], knobs["tol"], knobs["attention"])
    ds["p_theory_conv_infinite"] = float(theory.antipodal_probability(c_beta, knobs["d"]))
    ds["p_theory_conv"] = (float(p_T[0, 0]) if np.isfinite(p_T[0, 0])
                           else float(ds.p_theory_conv_infinite))
    ds["z_score_L"] = agreement_z(ds.n_antipodal_L, ds.n_traj_L,
                                  xr.full_like(ds.p_antipodal_L, float(ds.p_theory_conv)))
    ds["p_value_between_laws_L"] = (("L_conv",), _homogeneity(ds.n_antipodal_L.values,
                                                               ds.n_traj_L.values)[2])
    ds["cell_time_convergence_s"] = conv.elapsed_s.sum("L")
    ds.attrs["convergence_beta"] = c_beta
    return ds


def _summary_laws(ds, laws) -> dict:
    """Each law against the limit at T, and the laws between them (``laws_agree``)."""
    above = ds.beta.values > float(ds.beta_c)
    p_between = ds.p_value_between_laws
    out = {"laws": laws, "n_points": int(ds.z_score.size), "has_beta_above_c": bool(above.any()),
           "max_abs_z": {law: float(ds.max_abs_z.sel(values=law)) for law in laws},
           "beta_of_max_abs_z": {law: float(ds.beta_of_max_abs_z.sel(values=law))
                                 for law in laws},
           "share_within_2se": float((np.abs(ds.z_score) <= 2).mean()),
           "share_within_2se_above_c": (float((np.abs(ds.z_score.values[:, above]) <= 2).mean())
                                        if above.any() else float("nan")),
           "min_p_between": float(p_between.min()),
           "beta_of_min_p_between": float(ds.beta[int(np.argmin(p_between.values))]),
           "n_tests_between": int((ds.dof_between_laws > 0).sum()),
           "p_total": float(ds.p_value_between_laws_total)}
    out["min_p_between_bonferroni"] = min(1.0, out["min_p_between"]
                                          * max(out["n_tests_between"], 1))
    out["laws_agree"] = bool(out["p_total"] > ALPHA and out["min_p_between_bonferroni"] > ALPHA)
    return out


def _summary_horizon(ds) -> dict:
    """Per beta below beta_c: the chain's and the limit's fractions at the horizons, the laws'
    test at T, whether the fraction decays (``horizon_declines``: by more than
    :data:`HORIZON_DECLINE_SE`) and whether the chain agrees with the limit."""
    betas, n_h = [float(b) for b in ds.beta_below_c.values], ds.n_traj_horizon
    counts = np.rint(ds.p_antipodal_horizon * n_h)
    z_h = agreement_z(counts, n_h.broadcast_like(counts), ds.p_theory_horizon)
    out = {key: {b: {float(t): float(p) for t, p in zip(ds.horizon.values, var.sel(
        beta_below_c=b).values)} for b in betas} for key, var in (
        ("horizon", ds.p_antipodal_horizon), ("horizon_limit", ds.p_theory_horizon))}
    out["horizon_p_between"] = {b: float(ds.p_value_between_laws.sel(beta=b)) for b in betas}
    out["horizon_laws_agree"] = {b: bool(p > ALPHA) for b, p in out["horizon_p_between"].items()}
    out["horizon_decays"] = {b: bool(list(by_t.values())[-1] < list(by_t.values())[0])
                             for b, by_t in out["horizon"].items()}
    out["horizon_decline_z"] = {b: float(two_proportion_z(
        counts.sel(beta_below_c=b).values[0], float(n_h.sel(beta_below_c=b)),
        counts.sel(beta_below_c=b).values[-1], float(n_h.sel(beta_below_c=b)))) for b in betas}
    out["horizon_declines"] = {b: bool(z > HORIZON_DECLINE_SE)
                               for b, z in out["horizon_decline_z"].items()}
    out["horizon_max_abs_z"] = {b: float(np.abs(z_h.sel(beta_below_c=b)).max()) for b in betas}
    out["horizon_agrees_limit"] = {b: bool(z <= HORIZON_AGREEMENT_SE)
                                   for b, z in out["horizon_max_abs_z"].items()}
    return out


def _summary_convergence(ds, laws) -> dict:
    """The L sweep: the test between the laws at each L (``p_between_L``;
    ``conv_detects_first``: p at most :data:`ALPHA` at the smallest L), and at the smallest L
    the laws' mean gap to the limit and their spread."""
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


def summary(ds) -> dict:
    """Numbers and verdicts the page quotes: the laws against the limit at T and between
    them (``laws_agree``); how far the limit at T is from the T = infinity curve (resolved at
    :data:`FINITE_T_SHIFT_SE` standard errors of one fraction); the horizon and L checks."""
    laws = [str(v) for v in ds["values"].values]
    reference = _reference(ds)
    shift = np.abs(reference - ds.p_theory)
    n_max = float(ds.n_traj.max())
    shift_se = shift / np.sqrt(np.maximum(reference * (1 - reference), 0.25 / n_max) / n_max)
    out = _summary_laws(ds, laws) | {
        "max_unclustered": float(ds.p_unclustered.max()),
        "n_traj": int(ds.n_traj.max()),
        "cell_time_s": {law: float(ds.cell_time_s.sel(values=law)) for law in laws},
        "horizon_theory": bool(np.isfinite(ds.p_theory_T.values).all()),
        "max_shift_finite_T": float(np.abs(ds.p_theory_T - ds.p_theory).max()),
        "beta_of_max_shift_finite_T": float(ds.beta.values[int(np.argmax(shift.values))]),
        "finite_T_shift_resolved": bool(float(shift_se.max()) >= FINITE_T_SHIFT_SE),
        "theory_T_error_max": float(ds.p_theory_T_error.max()),
        "d": int(knob_attr(ds, "d")), "L": int(knob_attr(ds, "L")),
        "T": float(knob_attr(ds, "T")), "attention": str(knob_attr(ds, "attention")),
        "beta_c": float(ds.beta_c)}
    if "p_antipodal_horizon" in ds:
        out |= _summary_horizon(ds)
    if "p_antipodal_L" in ds:
        out |= _summary_convergence(ds, laws)
    return out


#: Seconds of simulation per trajectory-layer of the literal model (:func:`work`), measured
#: on the committed paper run (on the project's 2-core machine).
SECONDS_PER_WORK = 3.56e-7
#: A layer of the Gaussian overlap chain in units of a literal layer: the chain runs
#: 11-12.5 M trajectory-layers a second per core on the same machine, against 2.57 M.
CHAIN_LAYER_WORK = 0.22


def _law_work(law, gaussian_method) -> float:
    """Work of one trajectory-layer of ``law``: 1 on the literal method, less on the chain."""
    return CHAIN_LAYER_WORK if law == "gaussian" and gaussian_method == "overlap_chain" else 1.0


def work(knobs) -> float:
    """Literal-equivalent trajectory-layers of a run: the main and L sweeps for every law (a
    Gaussian chain layer counts :data:`CHAIN_LAYER_WORK`) and the horizon check."""
    layers = knobs["n_traj"] * knobs["L"] * knobs["T"] * len(knobs["betas"])
    if knobs["convergence_beta"] is not None:
        layers += knobs["convergence_n_traj"] * knobs["T"] * sum(
            x for x in knobs["convergence_Ls"] if x != knobs["L"])
    per_law = sum(_law_work(law, knobs["gaussian_method"]) for law in knobs["values"])
    horizon = (len(_below_c(knobs)) * knobs["n_traj"] * knobs["L"] * knobs["T"]
               * max(knobs["horizon_factors"], default=0.0) * CHAIN_LAYER_WORK)
    return float(per_law * layers + horizon)


def measured_work(ds) -> tuple[float, float]:
    """(seconds, literal-equivalent trajectory-layers) of a dataset, its three sweeps."""
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
    """The page's sentences (Markdown) from :func:`summary` ``s``."""
    return _page.phrases(s, ALPHA, HORIZON_AGREEMENT_SE)


def table(ds):
    """The page's table (Markdown), beta by beta."""
    return _page.table(ds, _reference(ds))


def plot(ds):
    """(a) P(antipodal) vs beta per law; (b) deviation from the limit at T; (c) L sweep."""
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
