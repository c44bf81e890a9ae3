r"""Theorem 1 made visible: the discrete two-token model converges weakly to the SDE.

For two tokens with Gaussian values and :math:`B = I` the overlap
:math:`Z^L_n = \langle X^1_n, X^2_n\rangle` of the discrete model is itself a Markov
chain (the exact ``overlap_chain`` of :func:`stochastic_transformers.simulate`), and
Theorem 1 with Lemma 4 says that :math:`Z^L_{\lfloor tL\rfloor}` converges in law to the
overlap diffusion :math:`dZ = a(Z)\,dt + b(Z)\,dB` as :math:`L\to\infty`.  This module
measures the **weak error**

.. math::

    e_{f,t}(L) = E\bigl[f(Z^L_{tL})\bigr] - E\bigl[f(Z_t)\bigr],\qquad Z^L_0 = Z_0 = z_0,

for smooth test functions (:math:`f(z) = z`, :math:`z^2`) at a few times, and fits its
order :math:`e \approx C L^{-p}` (one expects :math:`p = 1`: one layer is one
Euler-type step of size :math:`1/L` of the limit SDE).  The paper has no such figure.

**Reference.** :math:`E[f(Z_t)\mid Z_0 = z_0]` of the limit diffusion is the solution
:math:`u(t, z_0)` of the backward Kolmogorov equation
(:func:`stochastic_transformers.sde.overlap_expectation`, with its own error estimate,
about :math:`10^{-9}` here, far below every Monte Carlo error).

**Estimator: an exact martingale control variate.**  Plain Monte Carlo has a standard
error :math:`\operatorname{sd}(f(Z_t))/\sqrt n \approx 0.45/\sqrt n` that does not shrink
with L while the error does, so plain runs cannot see errors of order
:math:`10^{-3}` without about :math:`10^6` trajectories.  Write one layer of the chain
(:func:`stochastic_transformers.attention.pair_layer_stochastic`) as a function of its
seven random numbers; to first order in :math:`h = L^{-1/2}` only two of them move
the overlap:

.. math::

    Z_{n+1} - Z_n = (1 - Z_n^2)\,h\sigma\bigl((a+b)\,g_{11} - (a-b)\,g_{22}\bigr)
                    + O(h^2),

with :math:`a, b` the self and cross attention weights and :math:`g_{11}, g_{22}`
independent standard normals drawn for layer :math:`n+1`, hence independent of
:math:`Z_n`.  With :math:`u_x(s, x) = \partial_x u(s, \tanh x)` the derivative of the
Kolmogorov solution in :math:`x = \operatorname{atanh} z`,

.. math::

    C_{f,t} = \sum_{n < tL} u_x\bigl(t - \tfrac{n+1}{L}, \operatorname{atanh} Z_n\bigr)\,
              h\sigma\bigl((a+b)\,g_{11} - (a-b)\,g_{22}\bigr)_{n+1}

is a sum of martingale increments, so :math:`E[C_{f,t}] = 0` **exactly** under the
discrete model, whatever the accuracy of :math:`u_x` (only the variance depends on
it).  :math:`f(Z^L_{tL}) - C_{f,t}` is therefore an unbiased estimator of
:math:`E f(Z^L_{tL})`; it removes the first-order noise, and its variance is
:math:`O(1/L)` instead of :math:`O(1)` (measured: :math:`\approx 1.1/L` for
:math:`f = z`).  The chain is run by a kernel of this module that draws exactly the
random numbers of :func:`simulate`'s overlap chain in the same order (the tests check
that the overlaps agree bit for bit); the plain estimate from the same trajectories
is kept for comparison.

The order is fitted by weighted least squares on :math:`\log|e|` against
:math:`\log L`, using only the points whose error is at least ``fit_min_snr``
standard errors from zero and whose L is at least ``fit_L_min`` (L = 3 is a step of
:math:`h = 0.58`, outside the asymptotic regime).
"""

from __future__ import annotations

import functools
import math
import time

import numba as nb
import numpy as np
import xarray as xr

from .. import attention as _att
from .. import rng as _rng
from .. import theory
from .._jit import JIT_PARALLEL
from ..kernels.common import draw_pair_noise
from .._validation import check_real
from .base import (all_of, cell_threads, choices, cost_function, figure_sweep, integer, integers,
                   knob_attr, laid_out, real, reals, resolve_scale, sweep_seconds, whole_layers)

ID = "thm1"
DESCRIPTION = ("Theorem 1: weak error of the discrete two-token model against the limit SDE, "
               "vs L (log-log, fitted order)")

#: Bumped when this module's kernel or estimator changes (part of the sweep cache key).
CELL_VERSION = "1"

#: Test functions of the overlap: name -> (callable, LaTeX label).
FUNCTIONS = {
    "z": (lambda z: z, r"Z"),
    "z2": (lambda z: z * z, r"Z^2"),
    "z3": (lambda z: z * z * z, r"Z^3"),
}

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
    """The check of ``beta``: in [0, 300], and with unnormalised attention at most
    ``attention.USA_PAIR_SHIFT_FROM`` (the control variate needs the unscaled weights,
    whose powers overflow beyond)."""
    beta = check_real(name, value, 0.0, 300.0)
    if knobs["attention"] == "unnormalized" and beta > _att.USA_PAIR_SHIFT_FROM:
        raise ValueError(f"{name} must be <= {_att.USA_PAIR_SHIFT_FROM:g} with unnormalized "
                         f"attention in this study; got {beta}")
    return beta


def _open_overlap(name, value, knobs):
    """The check of ``z0``: a start inside the open interval (-1, 1)."""
    z0 = check_real(name, value, -1.0, 1.0)
    if abs(z0) >= 1.0:
        raise ValueError(f"{name} must lie in the open interval (-1, 1); got {z0}")
    return z0


#: The knobs beyond the shared ones (:data:`.base.KNOB_CHECKS`).  Every recorded time must
#: be a whole number of layers at every L; at least two trajectories give a standard error.
KNOB_SCHEMA = {
    "beta": _beta,
    "d": integer(2),
    "z0": _open_overlap,
    "n_traj": integer(2),
    "fit_min_snr": real(0.0),
    "fit_L_min": integer(1),
    "Ls": integers(1, distinct=True, sort=True),
    "times": all_of(reals(0.0, 50.0, strict_min=True, increasing=True),
                    whole_layers("times", "Ls")),
    "functions": choices(tuple(FUNCTIONS)),
}

# Kolmogorov table of u_x on a uniform grid: remaining time s = j * _DS, x in
# [-_X_MAX, _X_MAX] with step _DX.  Only the control variate's variance depends on it.
_DS = 1.0 / 32.0
_DX = 0.05
_X_MAX = 9.0


# ----------------------------------------------------------------------------- kernel

@nb.njit(**JIT_PARALLEL)
def _cv_kernel(key0, key1, first, n, d, beta, softmax, h, sigma, s0, c0, rec, phi, ds, x_lo,
               dx, z_out, cv_out):
    """Run ``n`` overlap-chain trajectories and accumulate the martingale control variates.

    Draws exactly what :mod:`stochastic_transformers.kernels.pair` draws (stochastic model, no early
    stopping), in the same order, so ``z_out`` equals simulate's overlaps bit for bit.
    ``rec`` (sorted, >= 1) are the recording layers; ``phi[f, j, i]`` is
    :math:`u_x` of test function f at remaining time ``j * ds`` and
    ``x = x_lo + i * dx``.  ``cv_out[t, f, k]`` is the control variate of
    :math:`f(Z_{rec[k]})`.
    """
    n_f, n_s, n_x = phi.shape
    n_t = rec.size
    n_layers = rec[n_t - 1]
    inv_l = h * h
    for t in nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        _rng.seed_stream(state, key0, key1, first + t)
        s, c = s0, c0
        z = np.empty(7)
        cv = np.zeros((n_f, n_t))
        ptr = 0
        for layer in range(1, n_layers + 1):
            ksum, kdiff = _att.pair_weights(s, beta, softmax)
            draw_pair_noise(state, d, z)
            # First-order overlap increment divided by (1 - Z^2): its mean is 0.
            xi = h * sigma * (ksum * z[0] - kdiff * z[3])
            fx = (math.log(c / s) - x_lo) / dx
            if not fx > 0.0:  # also catches nan
                fx = 0.0
            if fx > n_x - 1.000001:
                fx = n_x - 1.000001
            ix = int(fx)
            wx = fx - ix
            for k in range(ptr, n_t):
                rem = (rec[k] - layer) * inv_l / ds
                it = int(rem)
                wt = rem - it
                if it >= n_s - 1:
                    it = n_s - 2
                    wt = 1.0
                for f in range(n_f):
                    p = ((1.0 - wt) * ((1.0 - wx) * phi[f, it, ix] + wx * phi[f, it, ix + 1])
                         + wt * ((1.0 - wx) * phi[f, it + 1, ix] + wx * phi[f, it + 1, ix + 1]))
                    cv[f, k] += p * xi
            s, c = _att.pair_layer_stochastic(s, c, h * sigma * ksum, h * sigma * kdiff, z)
            while ptr < n_t and rec[ptr] == layer:
                z_out[t, ptr] = c * c - s * s
                ptr += 1
        for f in range(n_f):
            for k in range(n_t):
                cv_out[t, f, k] = cv[f, k]


@functools.lru_cache(maxsize=8)
def _phi_table(functions, beta, d, attention, sigma, t_max):
    """u_x(s, x) for each test function on the (remaining time, x) grid (cached per process)."""
    from .. import sde

    xs = np.arange(-_X_MAX, _X_MAX + _DX / 2, _DX)
    n_s = int(math.ceil(t_max / _DS - 1e-9)) + 2
    ss = np.arange(n_s) * _DS
    tables = []
    for name in functions:
        f = FUNCTIONS[name][0]
        u, _ = sde.overlap_expectation(f, np.tanh(xs), ss[1:], beta, d, attention, sigma,
                                       atol=1e-6)
        u = np.vstack([f(np.tanh(xs))[None, :], u])
        tables.append(np.gradient(u, xs, axis=1))
    return np.ascontiguousarray(np.stack(tables)), float(xs[0])


def run_chain(n, *, L, times, beta, d, attention="softmax", sigma=1.0, z0=0.0,
              functions=("z", "z2"), seed=0, first_trajectory=0, n_threads=None):
    """Overlaps ``Z[n, time]`` of the discrete chain and the control variates ``C[n, f, time]``.

    The overlaps are those of ``simulate(2, d, beta, L=L, T=max(times), z0=z0,
    times=times, seed=seed, first_trajectory=first_trajectory)`` bit for bit (times
    must be positive multiples of 1/L).
    """
    times = np.asarray(times, dtype=float)
    rec = np.rint(times * L).astype(np.int64)
    if np.any(rec < 1) or np.any(np.abs(rec - times * L) > 1e-9 * L) or np.any(np.diff(rec) <= 0):
        raise ValueError(f"times must be increasing positive multiples of 1/L = 1/{L}; got {times}")
    phi, x_lo = _phi_table(tuple(functions), float(beta), int(d), attention, float(sigma),
                           float(times.max()))
    key0, key1 = _rng.stream_keys(seed)
    z_out = np.empty((n, rec.size))
    cv_out = np.empty((n, len(functions), rec.size))
    with _att.numba_threads(n_threads):  # restored after the call, as in simulate()
        _cv_kernel(key0, key1, first_trajectory, n, d, float(beta), attention == "softmax",
                   1.0 / math.sqrt(L), float(sigma), math.sqrt((1.0 - z0) / 2.0),
                   math.sqrt((1.0 + z0) / 2.0), rec, phi, _DS, x_lo, _DX, z_out, cv_out)
    return z_out, cv_out


# ----------------------------------------------------------------------------- sweep

def cell(*, L, block, n_traj, block_size, beta, d, attention, sigma, z0, times, functions, seed):
    """One block of trajectories at depth scale L: means and centred sums of squares.

    Outputs have dims (function, time): ``mean_plain``/``m2_plain`` of
    :math:`f(Z^L_t)` and ``mean_cv``/``m2_cv`` of :math:`f(Z^L_t) - C_{f,t}`, and
    ``count``; and ``elapsed_s``, the cell's compute time.
    """
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
            "count": np.full(fz.shape[1:], float(n)),
            "elapsed_s": time.perf_counter() - start}


def compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides):
    """Weak errors of the discrete model against the Kolmogorov reference, and the fitted order.

    Returns a dataset with

    * ``reference(function, time)`` and ``reference_error``: :math:`E f(Z_t)` of the limit;
    * ``mean_discrete(function, time, L)``: :math:`E f(Z^L_t)` (control-variate estimate),
      ``mean_plain`` (plain Monte Carlo from the same trajectories);
    * ``bias(function, time, L)``: the signed weak error, with standard errors
      ``bias_se`` (control variate) and ``bias_se_plain`` (plain Monte Carlo);
    * ``weak_error(L)``: :math:`\\max_{f,t}|e_{f,t}(L)|`, with ``weak_error_se`` (the
      standard error of the entry that attains the maximum) and ``weak_error_snr``;
    * ``fit_used(L)``, ``order``, ``order_se``, ``log_constant``: the fit on ``weak_error``;
    * ``order_ft(function, time)``, ``order_ft_se``, ``n_fit_ft``: one fit per (f, t).
    """
    knobs = resolve_scale(SCALES, scale, overrides, KNOB_SCHEMA)
    n_blocks = -(-knobs["n_traj"] // BLOCK_SIZE)
    fixed = {k: knobs[k] for k in ("n_traj", "beta", "d", "attention", "sigma", "z0")}
    fixed.update(block_size=BLOCK_SIZE, times=list(knobs["times"]),
                 functions=list(knobs["functions"]))
    raw = figure_sweep(__name__, scale, {"L": list(knobs["Ls"]), "block": list(range(n_blocks))},
                       fixed=fixed, seed=knobs["seed"], scheduler=scheduler, cache_dir=cache_dir,
                       progress=progress,
                       output_dims={v: ("function", "time") for v in
                                    ("mean_plain", "m2_plain", "mean_cv", "m2_cv", "count")},
                       output_coords={"function": list(knobs["functions"]),
                                      "time": list(knobs["times"])})
    return _finish(raw, scale, knobs=knobs)


def _pool(raw, kind):
    """Combine per-block means and centred sums of squares (Chan et al.) over blocks."""
    n_b = raw["count"]
    n = n_b.sum("block")
    mean = (raw[f"mean_{kind}"] * n_b).sum("block") / n
    m2 = (raw[f"m2_{kind}"] + n_b * (raw[f"mean_{kind}"] - mean) ** 2).sum("block")
    se = np.sqrt(m2 / (n - 1) / n)
    return mean, se, n


def _finish(raw, scale, *, knobs):
    """Reference values, weak errors, standard errors and fits from the raw block sums."""
    from .. import sde

    fns, times = list(knobs["functions"]), np.asarray(knobs["times"])
    ref = np.empty((len(fns), len(times)))
    ref_err = np.empty_like(ref)
    for i, name in enumerate(fns):
        v, e = sde.overlap_expectation(FUNCTIONS[name][0], np.array([knobs["z0"]]), times,
                                       knobs["beta"], knobs["d"], knobs["attention"],
                                       knobs["sigma"])
        ref[i], ref_err[i] = v[:, 0], e[:, 0]
    coords = {"function": fns, "time": times, "L": raw.L.values}
    mean_cv, se_cv, n = _pool(raw, "cv")
    mean_plain, se_plain, _ = _pool(raw, "plain")
    ds = xr.Dataset(coords=coords)
    ds["reference"] = (("function", "time"), ref)
    ds["reference_error"] = (("function", "time"), ref_err)
    ds["mean_discrete"] = mean_cv.transpose("function", "time", "L")
    ds["mean_plain"] = mean_plain.transpose("function", "time", "L")
    ds["bias"] = ds.mean_discrete - ds.reference
    ds["bias_se"] = se_cv.transpose("function", "time", "L")
    ds["bias_se_plain"] = se_plain.transpose("function", "time", "L")
    ds["bias_plain"] = ds.mean_plain - ds.reference
    ds["n_traj"] = n.isel(function=0, time=0, drop=True)
    # Headline: the largest error over the test functions and times.
    flat = np.abs(ds.bias).stack(ft=("function", "time")).transpose("L", "ft")
    arg = flat.argmax("ft").values
    se_flat = ds.bias_se.stack(ft=("function", "time")).transpose("L", "ft").values
    ds["weak_error"] = (("L",), flat.values[np.arange(flat.shape[0]), arg])
    ds["weak_error_se"] = (("L",), se_flat[np.arange(flat.shape[0]), arg])
    ds["weak_error_snr"] = ds.weak_error / ds.weak_error_se
    fit = fit_order(ds.L.values, ds.weak_error.values, ds.weak_error_se.values,
                    min_snr=knobs["fit_min_snr"], L_min=knobs["fit_L_min"])
    ds["fit_used"] = (("L",), fit["used"])
    for key in ("order", "order_se", "log_constant", "chi2_red"):
        ds[key] = fit[key]
    ds["n_fit"] = int(fit["used"].sum())
    order_ft = np.full((len(fns), len(times)), np.nan)
    order_ft_se = np.full_like(order_ft, np.nan)
    n_fit_ft = np.zeros(order_ft.shape, dtype=int)
    used_ft = np.zeros((len(fns), len(times), ds.L.size), dtype=bool)
    for i in range(len(fns)):
        for j in range(len(times)):
            r = fit_order(ds.L.values, np.abs(ds.bias.values[i, j]), ds.bias_se.values[i, j],
                          min_snr=knobs["fit_min_snr"], L_min=knobs["fit_L_min"])
            order_ft[i, j], order_ft_se[i, j] = r["order"], r["order_se"]
            n_fit_ft[i, j] = r["used"].sum()
            used_ft[i, j] = r["used"]
    ds["order_ft"] = (("function", "time"), order_ft)
    ds["order_ft_se"] = (("function", "time"), order_ft_se)
    ds["n_fit_ft"] = (("function", "time"), n_fit_ft)
    ds["fit_used_ft"] = (("function", "time", "L"), used_ft)
    ds["cell_time_s"] = raw.elapsed_s.sum("block")
    ds.attrs.update({k: v for k, v in raw.attrs.items()})
    ds.attrs.update(
        # beta, d, attention, sigma and z0 are the sweep's fixed_* attributes
        scale=scale, figure=ID, fit_min_snr=knobs["fit_min_snr"],
        fit_L_min=knobs["fit_L_min"], estimator="martingale control variate (exact, mean zero)",
        reference="backward Kolmogorov equation (sde.overlap_expectation)")
    return ds


def fit_order(L, err, se, *, min_snr=3.0, L_min=1):
    r"""Fit :math:`|e| \approx C L^{-p}` by weighted least squares on :math:`\log|e|`.

    Points enter the fit when ``|err| >= min_snr * se`` and ``L >= L_min``; each has
    the delta-method standard deviation ``se / |err|`` on the log scale.  The slope's
    standard error comes from the weighted covariance, inflated by
    :math:`\sqrt{\chi^2_\nu}` when the reduced chi-square exceeds 1 (scatter beyond the
    error bars, e.g. pre-asymptotic curvature).

    Parameters
    ----------
    L, err, se : 1-d arrays of the same length
        Depth scales, errors (their absolute value is used) and standard errors (> 0,
        or 0 for exact values).
    min_snr : float >= 0
    L_min : int >= 1

    Returns
    -------
    dict
        ``order`` (p), ``order_se``, ``log_constant`` (:math:`\log C`), ``chi2_red``
        and ``used`` (boolean mask).  ``order`` is nan with fewer than two usable
        points; ``order_se`` is nan with fewer than three (no residual freedom left when
        there is no error bar, e.g. se = 0).
    """
    L = np.asarray(L, dtype=float)
    err = np.abs(np.asarray(err, dtype=float))
    se = np.asarray(se, dtype=float)
    if not (L.ndim == err.ndim == se.ndim == 1 and L.size == err.size == se.size):
        raise ValueError("L, err and se must be 1-d arrays of the same length")
    if np.any(~np.isfinite(L)) or np.any(L <= 0):
        raise ValueError("L must hold positive numbers")
    if np.any(se < 0) or np.any(np.isnan(se)):
        raise ValueError("se must hold standard errors >= 0")
    min_snr = check_real("min_snr", min_snr, 0.0)
    L_min = check_real("L_min", L_min, 0.0)
    used = (err > 0) & np.isfinite(err) & (err >= min_snr * se) & (L >= L_min)
    out = {"order": np.nan, "order_se": np.nan, "log_constant": np.nan, "chi2_red": np.nan,
           "used": used}
    if used.sum() < 2:
        return out
    x, y = np.log(L[used]), np.log(err[used])
    sd = se[used] / err[used]
    w = 1.0 / sd**2 if np.all(sd > 0) else np.ones_like(x)
    X = np.column_stack([np.ones_like(x), x])
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    beta = cov @ (X.T @ (w * y))
    resid = y - X @ beta
    nu = x.size - 2
    out["order"] = float(-beta[1])
    out["log_constant"] = float(beta[0])
    if nu > 0:
        chi2_red = float(np.sum(w * resid**2) / nu)
        out["chi2_red"] = chi2_red
        scale = max(1.0, chi2_red) if np.all(sd > 0) else chi2_red
        out["order_se"] = float(math.sqrt(cov[1, 1] * scale))
    elif np.all(sd > 0):
        out["order_se"] = float(math.sqrt(cov[1, 1]))
    return out


#: A fitted order within this many standard errors of 1 counts as first-order convergence.
ORDER_AGREEMENT_SE = 2.0


#: Seconds of simulation per trajectory-layer (the unit of :func:`work`) of the
#: control-variate chain, measured on the committed paper run (results/thm1_paper.nc:
#: 647 s of cell time for 2.9e9 trajectory-layers, on the project's 2-core machine).
SECONDS_PER_WORK = 2.2e-7


def work(knobs) -> float:
    """Trajectory-layers of a run with these knobs: every trajectory runs max(times) * L
    layers, for each L."""
    return float(knobs["n_traj"] * sum(knobs["Ls"]) * max(knobs["times"]))


def measured_work(ds) -> tuple[float, float]:
    """(seconds of simulation, trajectory-layers) of a computed dataset: every trajectory
    of depth scale L runs L * max(times) layers."""
    return sweep_seconds(ds), float((ds.n_traj * ds.L).sum()) * float(ds.time.max())


cost = cost_function(__name__, note="The Kolmogorov reference (seconds) is not included.")


def summary(ds) -> dict:
    """Numbers and verdicts the notebook quotes.

    ``verdict`` is ``"first_order"`` when the fitted order is within
    :data:`ORDER_AGREEMENT_SE` standard errors of 1; ``"first_order_asymptotically"``
    when it is not but the fit without the smallest fitted L is (``order_tail``,
    ``order_tail_se``, from ``L >= tail_L_min``): a second-order term still visible at
    the smallest L steepens a pure power-law fit; ``"not_first_order"`` when neither
    is; ``"too_few_points"`` without a fitted order.

    Also: the run's ``beta``, ``d`` and :math:`\\beta_c(d)` (``beta_c``), with
    ``both_poles_attract`` (``beta > beta_c``: the antipodal pole attracts too, Theorem 2);
    ``has_chi2`` (the fit had residual freedom, so ``chi2_red`` is a number); the smallest
    and largest L with their errors; compute times; and ``per_pair``, one entry per
    (function, time): the range of :math:`L\\,e` over ``L >= fit_L_min`` (``Le_min``,
    ``Le_max``, ``L_from``, ``L_to``), twice its largest standard error there
    (``two_se_max``) and ``sign_change`` (the errors resolved at ``fit_min_snr`` standard
    errors do not all have one sign).
    """
    used = ds.fit_used.values
    Ls = ds.L.values
    beta, d = float(knob_attr(ds, "beta")), int(knob_attr(ds, "d"))
    beta_c = float(theory.critical_beta(d))
    resolved = ds.weak_error_snr.values >= float(ds.attrs["fit_min_snr"])
    ratio = (ds.bias_se_plain / ds.bias_se).values
    order, order_se = float(ds.order), float(ds.order_se)
    used_L = [int(L) for L in Ls[used]]
    tail = {"order": float("nan"), "order_se": float("nan")}
    tail_L_min = used_L[1] if len(used_L) >= 3 else None
    if tail_L_min is not None:
        tail = fit_order(Ls, ds.weak_error.values, ds.weak_error_se.values,
                         min_snr=float(ds.attrs["fit_min_snr"]), L_min=tail_L_min)

    def within(p, se):
        return bool(np.isfinite(p) and np.isfinite(se) and se > 0
                    and abs(p - 1.0) <= ORDER_AGREEMENT_SE * se)

    if not np.isfinite(order):
        verdict = "too_few_points"
    elif within(order, order_se):
        verdict = "first_order"
    elif within(tail["order"], tail["order_se"]):
        verdict = "first_order_asymptotically"
    else:
        verdict = "not_first_order"
    return {
        "verdict": verdict,
        "order_z": float((order - 1.0) / order_se) if order_se > 0 else float("nan"),
        "order_tail": float(tail["order"]), "order_tail_se": float(tail["order_se"]),
        "tail_L_min": tail_L_min,
        "order": float(ds.order),
        "order_se": float(ds.order_se),
        "chi2_red": float(ds.chi2_red),
        "L_used": [int(L) for L in Ls[used]],
        "L_unresolved": [int(L) for L in Ls[~resolved]],
        "n_traj": int(ds.n_traj.max()),
        "weak_error": {int(L): float(e) for L, e in zip(Ls, ds.weak_error.values)},
        "weak_error_se": {int(L): float(e) for L, e in zip(Ls, ds.weak_error_se.values)},
        "noise_floor_largest_L": float(2 * ds.bias_se.isel(L=-1).max()),
        "noise_floor_plain_largest_L": float(2 * ds.bias_se_plain.isel(L=-1).max()),
        "variance_reduction_largest_L": float(np.nanmedian(ratio[..., -1] ** 2)),
        "variance_reduction_smallest_L": float(np.nanmedian(ratio[..., 0] ** 2)),
        "max_reference_error": float(ds.reference_error.max()),
        "L_times_error_largest_L": float(Ls[-1] * ds.weak_error.values[-1]),
        "beta": beta, "d": d, "beta_c": beta_c, "both_poles_attract": bool(beta > beta_c),
        "has_chi2": bool(np.isfinite(float(ds.chi2_red))),
        "fit_min_snr": float(ds.attrs["fit_min_snr"]), "fit_L_min": int(ds.attrs["fit_L_min"]),
        "L_smallest": int(Ls[0]), "L_largest": int(Ls[-1]),
        "weak_error_smallest_L": float(ds.weak_error.values[0]),
        "weak_error_largest_L": float(ds.weak_error.values[-1]),
        "weak_error_se_largest_L": float(ds.weak_error_se.values[-1]),
        "cell_time_total_s": float(ds.cell_time_s.sum()),
        "cell_time_largest_L_s": float(ds.cell_time_s.isel(L=-1)),
        "n_cells": int(ds.attrs.get("n_cells", 0)),
        "n_cells_cached": int(ds.attrs.get("n_cells_cached", 0)),
        "per_pair": _per_pair(ds),
    }


def _per_pair(ds) -> list[dict]:
    """Panel (b) read in numbers: for each (function, time), L e over L >= fit_L_min."""
    late = [int(L) for L in ds.L.values if L >= float(ds.attrs["fit_L_min"])]
    snr = float(ds.attrs["fit_min_snr"])
    out = []
    for name in ds.function.values:
        for t in ds.time.values:
            b = ds.bias.sel(function=name, time=t)
            se = ds.bias_se.sel(function=name, time=t)
            signs = np.sign(b.values[np.abs(b.values) >= snr * se.values])
            entry = {"function": str(name), "time": float(t),
                     "sign_change": bool(signs.size > 1 and np.any(signs != signs[0]))}
            if late:
                lb = (b * ds.L).sel(L=late).values
                lse = (se * ds.L).sel(L=late).values
                entry.update(Le_min=float(lb.min()), Le_max=float(lb.max()),
                             two_se_max=float(2 * lse.max()), L_from=late[0], L_to=late[-1])
            out.append(entry)
    return out


def plot(ds):
    """(a) |weak error| vs L, log-log, with the fit; (b) L x signed error vs L."""
    import matplotlib.pyplot as plt

    from ..style import palette

    Ls = ds.L.values.astype(float)
    fns, times = list(ds.function.values), ds.time.values
    colours = palette(len(fns) * len(times))
    markers = "osD^v<>"
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.4))
    snr_min = float(ds.attrs["fit_min_snr"])
    k = 0
    for i, name in enumerate(fns):
        for j, t in enumerate(times):
            colour, m = colours[k], markers[k % len(markers)]
            k += 1
            b = ds.bias.values[i, j]
            se = ds.bias_se.values[i, j]
            shift = 1.0 + 0.03 * (k - 1)  # dodge the points horizontally
            label = rf"$f = {FUNCTIONS[str(name)][1]}$, $t = {t:g}$"
            res = np.abs(b) >= snr_min * se
            ax.errorbar(Ls[res] * shift, np.abs(b[res]), yerr=se[res], fmt=m, color=colour,
                        ms=5, capsize=2, lw=1, label=label)
            # unresolved: only an upper bound |e| < |e| + 2 se, drawn hollow there
            if np.any(~res):
                ax.plot(Ls[~res] * shift, np.abs(b[~res]) + 2 * se[~res], m, mfc="none",
                        color=colour, ms=5)
            ax2.errorbar(Ls * shift, Ls * b, yerr=2 * Ls * se, fmt=m + "-", color=colour, ms=4,
                         capsize=2, lw=0.8, label=label)
    # noise floors
    ax.plot(Ls, 2 * ds.bias_se.max(("function", "time")).values, color="0.5", lw=1, ls=":",
            label="2 s.e., control variate")
    ax.plot(Ls, 2 * ds.bias_se_plain.max(("function", "time")).values, color="0.5", lw=1,
            ls="-.", label="2 s.e., plain Monte Carlo")
    order, order_se = float(ds.order), float(ds.order_se)
    used = ds.fit_used.values
    if np.isfinite(order):
        xf = np.geomspace(Ls[used].min() / 1.5, Ls.max() * 1.5, 50)
        ax.plot(xf, np.exp(float(ds.log_constant)) * xf ** (-order), "k--", lw=1.2,
                label=rf"fit on $\max_{{f,t}}|e|$: order {order:.2f} $\pm$ {order_se:.2f}"
                      "\n" f"(fitted: L = {', '.join(str(int(x)) for x in Ls[used])})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("L (layers per unit time)")
    ax.set_ylabel(r"$|E f(Z^L_t) - E f(Z_t)|$")
    ax.set_title("(a) weak error, bars 1 s.e. (hollow: unresolved, at |e| + 2 s.e.)",
                 fontsize=9.5)
    ax.legend(fontsize=7, loc="upper right")
    ax2.axhline(0, color="0.4", lw=0.8)
    ax2.set_xscale("log")
    ax2.set_xlabel("L")
    ax2.set_ylabel(r"$L \times (E f(Z^L_t) - E f(Z_t))$")
    ax2.set_title("(b) L x signed error (flat = order 1; bars: 2 s.e.)", fontsize=10)
    ax2.legend(fontsize=7.5)
    n = int(ds.n_traj.max())
    return laid_out(fig,
                    f"Theorem 1 for N = 2: discrete overlap chain vs the limit SDE "
                    rf"($\beta$ = {knob_attr(ds, 'beta'):g}, d = {knob_attr(ds, 'd')}, "
                    rf"{knob_attr(ds, 'attention')}, $z_0$ = {knob_attr(ds, 'z0'):g}, "
                    rf"{n:,} trajectories per L)", fontsize=10)
