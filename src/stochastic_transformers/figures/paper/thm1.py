r"""Theorem 1 made visible: the discrete two-token model converges weakly to the SDE.

With Gaussian values and :math:`B = I` the overlap :math:`Z^L_n` of two tokens is a Markov
chain (the exact ``overlap_chain`` of ``simulate``) that Theorem 1 with Lemma 4 sends to the
overlap diffusion (Gaussian entries lie outside Assumption 1: that they converge too is our
expectation).  We measure the weak error :math:`e_{f,t}(L) = E f(Z^L_{tL}) - E f(Z_t)` against
the backward Kolmogorov solution (:func:`stochastic_transformers.sde.overlap_expectation`)
and fit its order, expecting :math:`C_1/L + C_2/L^2 + \dots` (a layer is an Euler-type step of
size :math:`1/L`; the odd moments of the entries vanish); the paper proves no rate.  An exact
martingale control variate (:mod:`stochastic_transformers.kernels.control_variate`: mean zero
under the discrete model, variance :math:`O(1/L)`) runs beside the plain estimate.
"""

from __future__ import annotations

import functools
import time

import numpy as np
import xarray as xr

from ... import attention as _att
from ... import kolmogorov, sde, theory
from ..._validation import check_real
from ...kernels import control_variate
from ...stats import fit_corrected_order, fit_order, fit_two_term, pooled_mean_se
from ...style import palette
from ..base import cell_threads, knob_attr, laid_out
from ..knobs import all_of, choices, integer, integers, real, reals, whole_layers
from ..spec import Figure
from . import _thm1_page as _page
from ._thm1_page import table  # noqa: F401  (the page's table)

#: Test functions of the overlap: name -> (callable, LaTeX label).
FUNCTIONS = {"z": (lambda z: z, r"Z"), "z2": (lambda z: z * z, r"Z^2"),
             "z3": (lambda z: z * z * z, r"Z^3")}

#: Trajectories per sweep cell; the sweep grid is (L, block).
BLOCK_SIZE = 20_000

_COMMON = dict(beta=1.0, d=4, attention="softmax", sigma=1.0, z0=0.0, times=(1.0, 2.0),
               functions=("z", "z2"), fit_min_snr=3.0, fit_L_min=10, seed=0)
SCALES = {
    "smoke": dict(_COMMON, Ls=(3, 10, 30), n_traj=5_000, times=(1.0,)),
    "quick": dict(_COMMON, Ls=(3, 10, 30, 100, 300, 1000), n_traj=40_000),
    "paper": dict(_COMMON, Ls=(3, 10, 30, 100, 300, 1000), n_traj=1_000_000),
}


def _beta(name, value, knobs):
    """``beta`` in [0, 300], and with unnormalised attention at most
    ``attention.USA_PAIR_SHIFT_FROM`` (the control variate needs the unscaled weights)."""
    beta = check_real(name, value, 0.0, 300.0)
    if knobs["attention"] == "unnormalized" and beta > _att.USA_PAIR_SHIFT_FROM:
        raise ValueError(f"{name} must be <= {_att.USA_PAIR_SHIFT_FROM:g} with unnormalized "
                         f"attention in this study; got {beta}")
    return beta


#: The last recorded time: the control variate's table runs one step of
#: ``kolmogorov.GRADIENT_DS`` past it, and the Kolmogorov solution to t = 50.
TIME_MAX = 50.0 - kolmogorov.GRADIENT_DS
#: The largest sigma^2 t of the last recorded time: the noise's clock, on which the
#: Kolmogorov solver's steps grow stiff (sigma = 10 to t = 1 takes seconds, 100 minutes).
NOISE_CLOCK_MAX = 100.0


def plan(knobs):
    """Refuses, before any compute, a sigma^2 t beyond :data:`NOISE_CLOCK_MAX` and a beta or
    sigma whose Kolmogorov grid for the control variate's table could not be refined twice
    (the third grid over the points allowed)."""
    if knobs["sigma"] ** 2 * max(knobs["times"]) > NOISE_CLOCK_MAX:
        raise ValueError(f"sigma^2 times the last of times must be <= {NOISE_CLOCK_MAX:g}; got "
                         f"sigma = {knobs['sigma']:g}, times up to {max(knobs['times']):g}")
    sde.check_kolmogorov_grid(knobs["beta"], knobs["d"], knobs["attention"], knobs["sigma"],
                              max(knobs["times"]) + 2 * kolmogorov.GRADIENT_DS,
                              kolmogorov.GRADIENT_X_MAX)


@functools.lru_cache(maxsize=8)
def _phi_table(functions, beta, d, attention, sigma, t_max):
    """The control variate's table of u_x for the named test functions, with its grid
    (``table`` of :func:`.kernels.control_variate.run_chain`; cached per process)."""
    expectation = functools.partial(sde.overlap_expectation, beta=beta, d=d,
                                    attention=attention, sigma=sigma, atol=1e-6)
    phi, x_lo = kolmogorov.gradient_table(expectation, [FUNCTIONS[f][0] for f in functions],
                                          t_max)
    return phi, x_lo, kolmogorov.GRADIENT_DS, kolmogorov.GRADIENT_DX


def run_chain(n, *, L, times, beta, d, attention="softmax", sigma=1.0, z0=0.0,
              functions=("z", "z2"), seed=0, first_trajectory=0, n_threads=None):
    """Overlaps ``Z[n, time]`` of the discrete chain, bit for bit those of ``simulate``, and
    the control variates ``C[n, f, time]`` of the named test functions."""
    table = _phi_table(tuple(functions), float(beta), int(d), attention, float(sigma),
                       float(max(times)))
    return control_variate.run_chain(n, L=L, times=times, table=table, beta=beta, d=d,
                                     softmax=attention == "softmax", sigma=sigma, z0=z0,
                                     seed=seed, first_trajectory=first_trajectory,
                                     n_threads=n_threads)


def cell(*, L, block, n_traj, block_size, beta, d, attention, sigma, z0, times, functions, seed):
    """One block of trajectories at depth scale L: over (function, time), ``mean_plain`` and
    ``m2_plain`` (mean, centred sum of squares) of :math:`f(Z^L_t)`, ``mean_cv`` and ``m2_cv``
    of :math:`f(Z^L_t) - C_{f,t}`, ``count``; and ``elapsed_s``, the compute time."""
    start = time.perf_counter()
    n = min(block_size, n_traj - block * block_size)
    if n <= 0:
        raise ValueError(f"block {block} is empty for n_traj = {n_traj}")
    z, cv = run_chain(n, L=L, times=times, beta=beta, d=d, attention=attention, sigma=sigma,
                      z0=z0, functions=functions, seed=seed, n_threads=cell_threads())
    fz = np.stack([FUNCTIONS[name][0](z) for name in functions], axis=1)  # (n, f, t)
    y = fz - cv
    return {"mean_plain": fz.mean(0), "m2_plain": ((fz - fz.mean(0)) ** 2).sum(0),
            "mean_cv": y.mean(0), "m2_cv": ((y - y.mean(0)) ** 2).sum(0),
            "count": np.full(fz.shape[1:], float(n)), "elapsed_s": time.perf_counter() - start}


def run(knobs, sweeps):
    """The (L, block) sweep of :func:`cell`, finished by :func:`finish`."""
    fixed = {k: knobs[k] for k in ("n_traj", "beta", "d", "attention", "sigma", "z0")} | dict(
        block_size=BLOCK_SIZE, times=list(knobs["times"]), functions=list(knobs["functions"]))
    raw = sweeps({"L": list(knobs["Ls"]), "block": list(range(-(-knobs["n_traj"] // BLOCK_SIZE)))},
                 fixed=fixed, seed=knobs["seed"],
                 output_dims={v: ("function", "time") for v in
                              ("mean_plain", "m2_plain", "mean_cv", "m2_cv", "count")},
                 output_coords={"function": list(knobs["functions"]),
                                "time": list(knobs["times"])})
    return finish(raw, knobs)


def finish(raw, knobs):
    """The dataset: ``reference(function, time)`` (:math:`E f(Z_t)` of the limit) with
    ``reference_error``; ``mean_discrete(function, time, L)`` (control variate) and
    ``mean_plain``; the signed errors ``bias``, ``bias_plain`` with ``bias_se``,
    ``bias_se_plain``; ``weak_error(L)`` (:math:`\\max_{f,t}|e|`), ``weak_error_se`` (of the
    entry attaining it), ``weak_error_snr``; and the pure power law on ``weak_error``
    (:func:`fit_order`: ``fit_used(L)``, ``order``, ``order_se``, ``log_constant``,
    ``chi2_red``, ``n_fit``)."""
    fns, times = list(knobs["functions"]), np.asarray(knobs["times"])
    ref = np.empty((len(fns), len(times)))
    ref_err = np.empty_like(ref)
    for i, name in enumerate(fns):
        v, e = sde.overlap_expectation(FUNCTIONS[name][0], np.array([knobs["z0"]]), times,
                                       knobs["beta"], knobs["d"], knobs["attention"],
                                       knobs["sigma"])
        ref[i], ref_err[i] = v[:, 0], e[:, 0]
    ds = xr.Dataset(coords={"function": fns, "time": times, "L": raw.L.values})
    ds["reference"] = (("function", "time"), ref)
    ds["reference_error"] = (("function", "time"), ref_err)
    for kind, mean, se in (("cv", "mean_discrete", "bias_se"), ("plain", "mean_plain",
                                                                 "bias_se_plain")):
        *pooled, n = pooled_mean_se(raw[f"mean_{kind}"], raw[f"m2_{kind}"], raw["count"], "block")
        ds[mean], ds[se] = (x.transpose("function", "time", "L") for x in pooled)
    ds["bias"] = ds.mean_discrete - ds.reference
    ds["bias_plain"] = ds.mean_plain - ds.reference
    ds["n_traj"] = n.isel(function=0, time=0, drop=True)
    flat = np.abs(ds.bias).stack(ft=("function", "time")).transpose("L", "ft")
    at = (np.arange(flat.shape[0]), flat.argmax("ft").values)
    ds["weak_error"] = (("L",), flat.values[at])
    ds["weak_error_se"] = (("L",), ds.bias_se.stack(ft=("function", "time"))
                           .transpose("L", "ft").values[at])
    ds["weak_error_snr"] = ds.weak_error / ds.weak_error_se
    fit = fit_order(ds.L.values, ds.weak_error.values, ds.weak_error_se.values,
                    min_snr=knobs["fit_min_snr"], L_min=knobs["fit_L_min"])
    ds["fit_used"] = (("L",), fit["used"])
    for key in ("order", "order_se", "log_constant", "chi2_red"):
        ds[key] = fit[key]
    ds["n_fit"] = int(fit["used"].sum())
    ds["cell_time_s"] = raw.elapsed_s.sum("block")
    # beta, d, attention, sigma and z0 are the sweep's fixed_* attributes
    ds.attrs.update(raw.attrs, fit_min_snr=knobs["fit_min_snr"], fit_L_min=knobs["fit_L_min"],
                    estimator="martingale control variate (exact, mean zero)",
                    reference="backward Kolmogorov equation (sde.overlap_expectation)")
    return ds


#: Seconds of simulation per trajectory-layer (the unit of :func:`work`), measured on the
#: committed paper run (results/thm1_paper.nc: 647 s of cell time for 2.9e9
#: trajectory-layers, on the project's 2-core machine).
SECONDS_PER_WORK = 2.2e-7


def work(knobs) -> float:
    """Trajectory-layers of a run (max(times) * L per trajectory and L; no Kolmogorov time)."""
    return float(knobs["n_traj"] * sum(knobs["Ls"]) * max(knobs["times"]))


#: A fitted order within this many standard errors of 1 counts as first-order convergence.
ORDER_AGREEMENT_SE = 2.0
#: A fit describes the data when its chi-square p-value is at least this (below it the
#: model is rejected at this level and its order is not read).
FIT_P_MIN = 0.05


def _within_one(p, se) -> bool:
    """An order ``p`` within :data:`ORDER_AGREEMENT_SE` standard errors ``se`` of 1."""
    return bool(np.isfinite(p) and np.isfinite(se) and se > 0
                and abs(p - 1.0) <= ORDER_AGREEMENT_SE * se)


def _changes_sign(values) -> bool:
    return bool(values.size > 1 and np.any(np.sign(values) != np.sign(values[0])))


def _headline(ds):
    """``(i, j)``: the (function, time) pair with the largest error at the largest L."""
    last = np.abs(ds.bias.isel(L=-1)).values
    return np.unravel_index(int(np.argmax(last)), last.shape)


_TWO_TERM = {"C1": "C1", "C1_se": "C1_se", "C2": "C2", "C2_se": "C2_se",
             "two_term_chi2": "chi2", "two_term_dof": "dof", "two_term_p": "p_value"}
_FREE = {"order_corrected": "order", "order_corrected_se": "order_se",
         "corrected_chi2": "chi2", "corrected_dof": "dof", "corrected_p": "p_value"}


def _pair(ds, name, t, snr, L_min) -> dict:
    """One (function, time) entry of ``per_pair``: both fits of its signed errors, whether
    they change sign at L >= L_min, its own pure power law and the range of L e."""
    Ls = ds.L.values
    b, se = ds.bias.sel(function=name, time=t).values, ds.bias_se.sel(function=name, time=t).values
    two = fit_two_term(Ls, b, se, L_min=L_min)
    free = fit_corrected_order(Ls, b, se, L_min=L_min)
    entry = {"function": str(name), "time": float(t), "label": FUNCTIONS[str(name)][1]}
    entry.update({k: two[v] for k, v in _TWO_TERM.items()})
    entry.update({k: free[v] for k, v in _FREE.items()})
    entry.update(two_term_dof=int(two["dof"]), corrected_dof=int(free["dof"]))
    late = Ls >= L_min
    entry["sign_change"] = _changes_sign(b[late & (np.abs(b) >= snr * se)])
    # the pair's pure power law, meaningless across a sign change
    pure = fit_order(Ls, np.abs(b), se, min_snr=snr, L_min=L_min)
    change = entry["pure_sign_change"] = _changes_sign(b[pure["used"]])
    for key, value in (("pure_order", pure["order"]), ("pure_order_se", pure["order_se"])):
        entry[key] = float("nan") if change else float(value)
    if late.any():
        entry.update(Le_min=float((b * Ls)[late].min()), Le_max=float((b * Ls)[late].max()))
    return entry


def _verdict(head, snr) -> str:
    """The verdict of :func:`summary` from the headline pair's two fits."""
    if not (np.isfinite(head["order_corrected_se"]) and head["two_term_dof"] > 0):
        return "too_few_points"
    if not all(np.isfinite(head[k]) and head[k] >= FIT_P_MIN for k in ("two_term_p",
                                                                        "corrected_p")):
        return "poor_fit"
    if not _within_one(head["order_corrected"], head["order_corrected_se"]):
        return "not_first_order"
    return "first_order" if abs(head["C1"]) >= snr * head["C1_se"] else "first_term_unresolved"


def _order_part(ds, pairs, snr) -> dict:
    """The order from the headline pair's two fits, and the same fits over all pairs."""
    i, j = _headline(ds)
    head = next(p for p in pairs if p["function"] == str(ds.function.values[i])
                and p["time"] == float(ds.time.values[j]))
    two_p = [q["two_term_p"] for q in pairs if np.isfinite(q["two_term_p"])]
    L_min = float(ds.attrs["fit_L_min"])
    first, second = head["C1"] / L_min, head["C2"] / L_min**2
    out = {k: head[k] for k in (*_TWO_TERM, *_FREE) if k not in ("two_term_p", "corrected_p")}
    out.update(
        verdict=_verdict(head, snr), headline_function=head["function"],
        headline_label=head["label"], headline_time=head["time"],
        second_order_share_at_L_min=(float(abs(second) / abs(first + second))
                                     if abs(first + second) > 0 else float("nan")),
        n_pairs=len(pairs), n_pairs_two_term_fit=sum(q >= FIT_P_MIN for q in two_p),
        n_pairs_C1_resolved=sum(abs(q["C1"]) / q["C1_se"] >= snr for q in pairs
                                if q["C1_se"] > 0),
        n_pairs_order_within=sum(_within_one(q["order_corrected"], q["order_corrected_se"])
                                 for q in pairs),
        two_term_p_min=float(min(two_p)) if two_p else float("nan"))
    return out


def _pure_part(ds, snr) -> dict:
    """The pure power law on the largest error: its chi-square test and verdict, and the
    same fit without its smallest L (``order_tail``)."""
    from scipy import stats

    Ls = ds.L.values
    used_L = [int(L) for L in Ls[ds.fit_used.values]]
    order, order_se, chi2_red = float(ds.order), float(ds.order_se), float(ds.chi2_red)
    tail = {"order": float("nan"), "order_se": float("nan")} if len(used_L) < 3 else \
        fit_order(Ls, ds.weak_error.values, ds.weak_error_se.values, min_snr=snr,
                  L_min=used_L[1])
    dof = max(len(used_L) - 2, 0)
    p = float(stats.chi2.sf(chi2_red * dof, dof)) if dof > 0 and np.isfinite(chi2_red) \
        else float("nan")
    verdict = ("too_few_points" if not np.isfinite(order) else
               "first_order" if _within_one(order, order_se) else "not_first_order")
    return {"verdict_pure": verdict, "pure_dof": dof, "pure_p_value": p,
            "pure_fits": bool(np.isfinite(p) and p >= FIT_P_MIN),
            "order_tail": float(tail["order"]), "order_tail_se": float(tail["order_se"]),
            "order": order, "order_se": order_se,
            "chi2_red": chi2_red, "has_chi2": bool(np.isfinite(chi2_red))}


def summary(ds) -> dict:
    r"""Numbers and verdicts the page quotes: the order (:func:`_order_part`) from the two
    fits of the headline pair (the largest error at the largest L), with ``verdict``
    (``"first_order"``: both fits have p-values of at least :data:`FIT_P_MIN`, :math:`|C_1|`
    is ``fit_min_snr`` standard errors or more and p is within :data:`ORDER_AGREEMENT_SE` of
    1), and counts over all pairs; the pure power law on :math:`\max_{f,t}|e|`
    (:func:`_pure_part`); the run, its errors and variance reductions (plain over
    control-variate variance, median over the pairs); ``per_pair`` (:func:`_pair`)."""
    snr, L_min = float(ds.attrs["fit_min_snr"]), float(ds.attrs["fit_L_min"])
    pairs = [_pair(ds, name, t, snr, L_min) for name in ds.function.values
             for t in ds.time.values]
    Ls, err = ds.L.values, ds.weak_error.values
    beta, d = float(knob_attr(ds, "beta")), int(knob_attr(ds, "d"))
    beta_c = float(theory.critical_beta(d))
    ratio = (ds.bias_se_plain / ds.bias_se).values
    vr_small = float(np.nanmedian(ratio[..., 0] ** 2))
    run = {"n_traj": int(ds.n_traj.max()),
           "weak_error": {int(L): float(e) for L, e in zip(Ls, err)},
           "variance_reduction_largest_L": float(np.nanmedian(ratio[..., -1] ** 2)),
           "variance_reduction_smallest_L": vr_small,
           "cv_raises_variance_smallest_L": bool(vr_small < 1.0),
           "variance_increase_smallest_L": float(1.0 / vr_small - 1.0),
           "beta": beta, "d": d, "beta_c": beta_c, "both_poles_attract": bool(beta > beta_c),
           "fit_min_snr": snr, "fit_L_min": int(L_min), "L_smallest": int(Ls[0]),
           "L_largest": int(Ls[-1]), "weak_error_smallest_L": float(err[0]),
           "weak_error_largest_L": float(err[-1])}
    return {**_order_part(ds, pairs, snr), **_pure_part(ds, snr), **run, "per_pair": pairs}


def phrases(s) -> dict[str, str]:
    """The page's sentences (Markdown) from :func:`summary` ``s``, under this module's criteria."""
    return _page.phrases(s, ORDER_AGREEMENT_SE, FIT_P_MIN)


def plot(ds):
    """(a) |weak error| vs L, log-log, with the fits; (b) L x signed error vs L."""
    import matplotlib.pyplot as plt

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
                     capsize=2, lw=0.8, label=rf"$f = {FUNCTIONS[str(name)][1]}$, $t = {t:g}$")
    for var, ls, what in (("bias_se", ":", "control variate"), ("bias_se_plain", "-.",
                                                                 "plain Monte Carlo")):
        ax.plot(Ls, 2 * ds[var].max(("function", "time")).values, color="0.5", lw=1, ls=ls,
                label=f"2 s.e., {what}")
    order = float(ds.order)
    if np.isfinite(order):
        xf = np.geomspace(Ls[ds.fit_used.values].min() / 1.5, Ls.max() * 1.5, 50)
        ax.plot(xf, np.exp(float(ds.log_constant)) * xf ** (-order), color="0.65", lw=1.0,
                label=rf"$C L^{{-p}}$ on the largest $|e|$: $p$ = {order:.2f}")
    i, j = _headline(ds)
    L_min = float(ds.attrs["fit_L_min"])
    free = fit_corrected_order(Ls, ds.bias.values[i, j], ds.bias_se.values[i, j], L_min=L_min)
    if np.isfinite(free["order"]) and np.isfinite(free["order_se"]):
        xf = np.geomspace(L_min / 1.5, Ls.max() * 1.5, 50)
        ax.plot(xf, np.abs(free["C"] * xf ** -free["order"] + free["D"] * xf ** -2.0), "k--",
                lw=1.2, label=rf"$C L^{{-p}} + D L^{{-2}}$ (pair with largest $e$): "
                              rf"$p$ = {free['order']:.3f}")
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


FIGURE = Figure.declared(
    globals(), "thm1", source="paper",
    description="Theorem 1: weak error of the discrete two-token model against the limit SDE, "
                "vs L (log-log, fitted order)",
    schema={"beta": _beta, "d": integer(2), "n_traj": integer(2), "fit_min_snr": real(0.0),
            "z0": lambda name, value, knobs: check_real(name, value, -1.0, 1.0,
                                                        strict_min=True, strict_max=True),
            "fit_L_min": integer(1), "Ls": integers(1, distinct=True, sort=True),
            # every recorded time a whole number of layers at every L
            "times": all_of(reals(0.0, TIME_MAX, strict_min=True, increasing=True),
                            whole_layers("times", "Ls")),
            "functions": choices(tuple(FUNCTIONS))})
compute, cost = FIGURE.compute, FIGURE.cost
