r"""Theorem 1 made visible: the discrete two-token model converges weakly to the SDE.

For two tokens with Gaussian values and :math:`B = Q^\top K = I` the overlap
:math:`Z^L_n = \langle X^1_n, X^2_n\rangle` of the discrete model is itself a Markov
chain (rotation invariance of the Gaussian law; the exact ``overlap_chain`` of
:func:`stochastic_transformers.simulate`), and Theorem 1 with Lemma 4 (which assumes
:math:`Q^\top K = I`, the paper's Assumption 2) says that :math:`Z^L_{\lfloor tL\rfloor}`
converges in law to the overlap diffusion :math:`dZ = a(Z)\,dt + b(Z)\,dB` as
:math:`L\to\infty`.  Gaussian entries are not bounded, so they lie outside Theorem 1's
Assumption 1; that they converge to the same limit is our expectation (they have moments
of all orders), which this figure checks numerically.  This module measures the
**weak error**

.. math::

    e_{f,t}(L) = E\bigl[f(Z^L_{tL})\bigr] - E\bigl[f(Z_t)\bigr],\qquad Z^L_0 = Z_0 = z_0,

for smooth test functions (:math:`f(z) = z`, :math:`z^2`) at a few times, and fits its
order.  We expect :math:`e = C_1/L + C_2/L^2 + \dots`: one layer is one Euler-type step
of size :math:`1/L` of the limit SDE, and the odd moments of the entries vanish (a
skewed centred law would add a term of order :math:`L^{-1/2}` through its third moment).
This is our expectation: the paper proves no rate.  The paper has no such figure.

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

**Fits.**  :func:`summary` reads the order from the signed errors at ``L >= fit_L_min``
(L = 3 is a step of :math:`h = 0.58`, outside the asymptotic regime): the two-term model
:math:`C_1/L + C_2/L^2` (:func:`fit_two_term`) and a power law of free order with the
second-order term, :math:`C L^{-p} + D L^{-2}` (:func:`fit_corrected_order`).  The
dataset also keeps a pure power law :math:`|e| \approx C L^{-p}` fitted by weighted
least squares on :math:`\log|e|` against :math:`\log L` (:func:`fit_order`, on the
points whose error is at least ``fit_min_snr`` standard errors from zero); it ignores
the second-order term, and the committed run rejects it by its chi-square.
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
    L, err, se = _fit_arrays(L, err, se)
    err = np.abs(err)
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

#: A fit describes the data when its chi-square p-value is at least this (below it the
#: model is rejected at this level and its order is not read).
FIT_P_MIN = 0.05

#: The orders p tried by :func:`fit_corrected_order` (the chi-square is profiled over them).
ORDER_GRID = np.round(np.arange(0.0, 4.0 + 1e-9, 0.0005), 4)


def _wls(X, y, se):
    """Weighted least squares ``y ~ X c`` with standard deviations ``se``: ``(c, cov, chi2)``
    (unit weights and a nan chi-square when some ``se`` is 0)."""
    w = 1.0 / se**2 if np.all(se > 0) else np.ones_like(y)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    c = cov @ (X.T @ (w * y))
    chi2 = float(np.sum(w * (y - X @ c) ** 2)) if np.all(se > 0) else float("nan")
    return c, cov, chi2


def _fit_arrays(L, err, se):
    """``L``, ``err`` and ``se`` as float arrays, checked: 1-d of one length, L > 0, se >= 0."""
    L = np.asarray(L, dtype=float)
    err = np.asarray(err, dtype=float)
    se = np.asarray(se, dtype=float)
    if not (L.ndim == err.ndim == se.ndim == 1 and L.size == err.size == se.size):
        raise ValueError("L, err and se must be 1-d arrays of the same length")
    if np.any(~np.isfinite(L)) or np.any(L <= 0):
        raise ValueError("L must hold positive numbers")
    if np.any(se < 0) or np.any(np.isnan(se)):
        raise ValueError("se must hold standard errors >= 0")
    return L, err, se


def _signed_points(L, err, se, L_min):
    L, err, se = _fit_arrays(L, err, se)
    keep = (L >= check_real("L_min", L_min, 0.0)) & np.isfinite(err)
    return L[keep], err[keep], se[keep], keep


def fit_two_term(L, err, se, *, L_min=1):
    r"""Fit the *signed* error :math:`e \approx C_1/L + C_2/L^2` by weighted least squares.

    Every point with ``L >= L_min`` enters (resolved or not: the model is fitted to the
    signed values, so an error compatible with zero is information, not a problem).  This
    is the model that first-order weak convergence with a smooth expansion in
    :math:`1/L` predicts (odd moments of the entries vanish, so no half-integer powers);
    the paper proves no rate, so the model is ours.

    Returns ``C1``, ``C1_se``, ``C2``, ``C2_se``, ``chi2``, ``dof`` (points - 2),
    ``p_value`` (chi-square survival; nan without residual freedom) and ``used``.
    """
    from scipy import stats

    x, e, s, used = _signed_points(L, err, se, L_min)
    out = {"C1": np.nan, "C1_se": np.nan, "C2": np.nan, "C2_se": np.nan, "chi2": np.nan,
           "dof": max(x.size - 2, 0), "p_value": np.nan, "used": used}
    if x.size < 2:
        return out
    c, cov, chi2 = _wls(np.column_stack([1.0 / x, 1.0 / x**2]), e, s)
    out.update(C1=float(c[0]), C2=float(c[1]), C1_se=float(math.sqrt(cov[0, 0])),
               C2_se=float(math.sqrt(cov[1, 1])))
    if out["dof"] > 0 and np.isfinite(chi2):
        out.update(chi2=chi2, p_value=float(stats.chi2.sf(chi2, out["dof"])))
    return out


def fit_corrected_order(L, err, se, *, L_min=1):
    r"""Fit the signed error :math:`e \approx C L^{-p} + D L^{-2}`: a power law of free
    order p plus the second-order term of the expansion.

    For each ``p`` of :data:`ORDER_GRID` (except 2, where the two terms coincide) the
    constants come from weighted least squares; the order is the ``p`` of smallest
    chi-square, and its standard error is half the width of the set where the chi-square
    is within :math:`\max(1, \chi^2_\nu)` of the minimum (the one-sigma profile
    interval, widened like :func:`fit_order` when the scatter exceeds the error bars;
    ``order_low``, ``order_high`` are its ends); nan when that set reaches the grid's end.
    Every point with ``L >= L_min`` enters; at least four are needed (one degree of
    freedom).  (The correction :math:`D L^{-p-1}` instead of :math:`D L^{-2}` makes the
    model degenerate: with :math:`C \to 0` its second term is itself a power law of any
    order, and on the committed run of this figure it then fits f = z at t = 1 best with
    p near 0.07.)

    Returns ``order``, ``order_se``, ``order_low``, ``order_high``, ``C``, ``D``,
    ``chi2``, ``dof`` (points - 3), ``p_value`` and ``used``.
    """
    from scipy import stats

    x, e, s, used = _signed_points(L, err, se, L_min)
    out = {"order": np.nan, "order_se": np.nan, "order_low": np.nan, "order_high": np.nan,
           "C": np.nan, "D": np.nan, "chi2": np.nan, "dof": max(x.size - 3, 0),
           "p_value": np.nan, "used": used}
    if x.size < 4 or not np.all(s > 0):
        return out
    grid = ORDER_GRID[np.abs(ORDER_GRID - 2.0) > 1e-9]
    w = 1.0 / s**2
    u = x[None, :] ** -grid[:, None]                 # (grid, points): the L^-p column
    v = x ** -2.0
    # the 2 x 2 normal equations for every p at once
    a11, a12, a22 = (w * u * u).sum(1), (w * u * v).sum(1), float((w * v * v).sum())
    b1, b2 = (w * u * e).sum(1), float((w * v * e).sum())
    det = a11 * a22 - a12 * a12
    C = (a22 * b1 - a12 * b2) / det
    D = (a11 * b2 - a12 * b1) / det
    chi2 = (w * (e[None, :] - C[:, None] * u - D[:, None] * v) ** 2).sum(1)
    k = int(np.argmin(chi2))
    dof = out["dof"]
    band = chi2 <= chi2[k] + max(1.0, chi2[k] / dof)
    lo, hi = int(np.argmax(band)), int(band.size - 1 - np.argmax(band[::-1]))
    out.update(order=float(grid[k]), C=float(C[k]), D=float(D[k]), chi2=float(chi2[k]),
               p_value=float(stats.chi2.sf(chi2[k], dof)))
    if lo > 0 and hi < band.size - 1 and bool(band[lo:hi + 1].all()):
        out.update(order_low=float(grid[lo]), order_high=float(grid[hi]),
                   order_se=float((grid[hi] - grid[lo]) / 2))
    return out


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


def _within_one(p, se) -> bool:
    """An order ``p`` within :data:`ORDER_AGREEMENT_SE` standard errors ``se`` of 1."""
    return bool(np.isfinite(p) and np.isfinite(se) and se > 0
                and abs(p - 1.0) <= ORDER_AGREEMENT_SE * se)


def _pure_fits(ds, used_L, snr):
    """The pure power law's test and the same fit without its smallest L:
    ``(tail, tail_L_min, pure_dof, pure_p, verdict_pure)`` (see :func:`summary`)."""
    from scipy import stats

    Ls = ds.L.values
    tail = {"order": float("nan"), "order_se": float("nan")}
    tail_L_min = used_L[1] if len(used_L) >= 3 else None
    if tail_L_min is not None:
        tail = fit_order(Ls, ds.weak_error.values, ds.weak_error_se.values,
                         min_snr=snr, L_min=tail_L_min)
    pure_dof = max(len(used_L) - 2, 0)
    chi2_red = float(ds.chi2_red)
    pure_p = (float(stats.chi2.sf(chi2_red * pure_dof, pure_dof))
              if pure_dof > 0 and np.isfinite(chi2_red) else float("nan"))
    order, order_se = float(ds.order), float(ds.order_se)
    if not np.isfinite(order):
        verdict_pure = "too_few_points"
    else:
        verdict_pure = "first_order" if _within_one(order, order_se) else "not_first_order"
    return tail, tail_L_min, pure_dof, pure_p, verdict_pure


def _headline_verdict(head, snr) -> str:
    """The verdict of :func:`summary` from the headline pair's two fits."""
    p, p_se = head["order_corrected"], head["order_corrected_se"]
    fits_ok = (np.isfinite(head["two_term_p"]) and head["two_term_p"] >= FIT_P_MIN
               and np.isfinite(head["corrected_p"]) and head["corrected_p"] >= FIT_P_MIN)
    if not (np.isfinite(p_se) and head["two_term_dof"] > 0):
        return "too_few_points"
    if not fits_ok:
        return "poor_fit"
    if not _within_one(p, p_se):
        return "not_first_order"
    if not abs(head["C1"]) >= snr * head["C1_se"]:
        return "first_term_unresolved"
    return "first_order"


def summary(ds) -> dict:
    r"""Numbers and verdicts the notebook quotes.

    **The order.**  The weak error is expected to expand as :math:`C_1/L + C_2/L^2 + \dots`
    (our expectation, not the paper's: it proves no rate), so the order is read from fits of
    the *signed* errors at ``L >= fit_L_min`` of one pair (f, t), the *headline* pair (the
    largest error at the largest L): the two-term model :func:`fit_two_term` (``C1``,
    ``C1_se``, ``C1_snr``, ``C2``, ``C2_se``, ``two_term_chi2``, ``two_term_dof``,
    ``two_term_p_value``; ``second_order_share_at_L_min``, the share of the model's error
    at ``fit_L_min`` that its second term carries) and the free-order model :func:`fit_corrected_order`
    (``order_corrected``, ``order_corrected_se``, ``order_corrected_low``/``_high``,
    ``order_corrected_z`` = (order - 1) / se, ``corrected_chi2``, ``corrected_dof``,
    ``corrected_p_value``).  ``verdict`` is

    * ``"first_order"``: both fits describe the data (p-value at least :data:`FIT_P_MIN`),
      the first-order constant is resolved (:math:`|C_1|` at least ``fit_min_snr``
      standard errors) and the free order is within :data:`ORDER_AGREEMENT_SE` standard
      errors of 1;
    * ``"not_first_order"``: both fits describe the data but the order is further from 1;
    * ``"first_term_unresolved"``: they describe the data, the order is near 1 but
      :math:`C_1` is not resolved;
    * ``"poor_fit"``: one of the fits has a p-value below :data:`FIT_P_MIN`;
    * ``"too_few_points"``: fewer than four points at ``L >= fit_L_min`` (or an unbounded
      order interval).

    Counted over all pairs: ``n_pairs``, ``n_pairs_two_term_fit`` (two-term p-value at
    least :data:`FIT_P_MIN`), ``n_pairs_C1_resolved``, ``n_pairs_order_within`` (free
    order within :data:`ORDER_AGREEMENT_SE` of 1), ``two_term_p_min``, ``C1_snr_min``.

    **The pure power law** of the dataset (:func:`fit_order` on :math:`\max_{f,t}|e|`
    over the resolved points; ``order``, ``order_se``, ``chi2_red``, ``order_z``), kept
    for comparison: ``pure_dof``, ``pure_p_value`` (its chi-square test), ``pure_fits``
    (p-value at least :data:`FIT_P_MIN`), ``verdict_pure`` (``"first_order"`` within
    :data:`ORDER_AGREEMENT_SE`, ``"not_first_order"``, ``"too_few_points"``), and the same
    fit without its smallest L (``order_tail``, ``order_tail_se``, ``tail_L_min``).

    Also: the run's ``beta``, ``d`` and :math:`\beta_c(d)` (``beta_c``), with
    ``both_poles_attract`` (``beta > beta_c``: the antipodal pole attracts too, Theorem 2);
    the smallest and largest L with their errors; the noise floors and the control
    variate's variance reductions, with ``cv_raises_variance_smallest_L`` (the reduction
    is below 1 there) and ``variance_increase_smallest_L`` (1 / reduction - 1); compute
    times; and ``per_pair``, one entry per (function, time): the range of
    :math:`L\,e` over ``L >= fit_L_min`` (``Le_min``, ``Le_max``, ``L_from``, ``L_to``),
    twice its largest standard error there (``two_se_max``), ``sign_change`` (the errors
    resolved at ``fit_min_snr`` standard errors in that range do not all have one sign),
    both fits' numbers, and the pure power law of that pair alone (``pure_order``,
    ``pure_order_se``, ``pure_n_fit``; nan when its fitted points change sign, since a fit
    of :math:`\log|e|` across a sign change means nothing: ``pure_sign_change``).
    """
    used = ds.fit_used.values
    Ls = ds.L.values
    beta, d = float(knob_attr(ds, "beta")), int(knob_attr(ds, "d"))
    beta_c = float(theory.critical_beta(d))
    snr = float(ds.attrs["fit_min_snr"])
    resolved = ds.weak_error_snr.values >= snr
    ratio = (ds.bias_se_plain / ds.bias_se).values
    order, order_se = float(ds.order), float(ds.order_se)
    used_L = [int(L) for L in Ls[used]]
    tail, tail_L_min, pure_dof, pure_p, verdict_pure = _pure_fits(ds, used_L, snr)
    chi2_red, within = float(ds.chi2_red), _within_one

    pairs = _per_pair(ds)
    # the headline pair: the largest error at the largest L
    last = np.abs(ds.bias.isel(L=-1)).values
    i, j = np.unravel_index(int(np.argmax(last)), last.shape)
    head = next(p for p in pairs if p["function"] == str(ds.function.values[i])
                and p["time"] == float(ds.time.values[j]))
    p, p_se, verdict = head["order_corrected"], head["order_corrected_se"], \
        _headline_verdict(head, snr)
    vr_small = float(np.nanmedian(ratio[..., 0] ** 2))
    two_p = [q["two_term_p"] for q in pairs if np.isfinite(q["two_term_p"])]
    c1_snr = [abs(q["C1"]) / q["C1_se"] for q in pairs if q["C1_se"] > 0]
    return {
        "verdict": verdict,
        "headline_function": head["function"], "headline_label": head["label"],
        "headline_time": head["time"],
        "order_corrected": p, "order_corrected_se": p_se,
        "order_corrected_low": head["order_corrected_low"],
        "order_corrected_high": head["order_corrected_high"],
        "order_corrected_z": float((p - 1.0) / p_se) if p_se > 0 else float("nan"),
        "corrected_chi2": head["corrected_chi2"], "corrected_dof": head["corrected_dof"],
        "corrected_p_value": head["corrected_p"],
        "C1": head["C1"], "C1_se": head["C1_se"],
        "C1_snr": float(abs(head["C1"]) / head["C1_se"]) if head["C1_se"] > 0 else float("nan"),
        "C2": head["C2"], "C2_se": head["C2_se"],
        "second_order_share_at_L_min": _second_share(head, float(ds.attrs["fit_L_min"])),
        "two_term_chi2": head["two_term_chi2"], "two_term_dof": head["two_term_dof"],
        "two_term_p_value": head["two_term_p"],
        "n_pairs": len(pairs),
        "n_pairs_two_term_fit": sum(q >= FIT_P_MIN for q in two_p),
        "n_pairs_C1_resolved": sum(q >= snr for q in c1_snr),
        "n_pairs_order_within": sum(within(q["order_corrected"], q["order_corrected_se"])
                                    for q in pairs),
        "two_term_p_min": float(min(two_p)) if two_p else float("nan"),
        "C1_snr_min": float(min(c1_snr)) if c1_snr else float("nan"),
        "verdict_pure": verdict_pure,
        "pure_dof": pure_dof, "pure_p_value": pure_p,
        "pure_fits": bool(np.isfinite(pure_p) and pure_p >= FIT_P_MIN),
        "order_z": float((order - 1.0) / order_se) if order_se > 0 else float("nan"),
        "order_tail": float(tail["order"]), "order_tail_se": float(tail["order_se"]),
        "tail_L_min": tail_L_min,
        "order": order,
        "order_se": order_se,
        "chi2_red": chi2_red,
        "L_used": used_L,
        "L_unresolved": [int(L) for L in Ls[~resolved]],
        "n_traj": int(ds.n_traj.max()),
        "weak_error": {int(L): float(e) for L, e in zip(Ls, ds.weak_error.values)},
        "weak_error_se": {int(L): float(e) for L, e in zip(Ls, ds.weak_error_se.values)},
        "noise_floor_largest_L": float(2 * ds.bias_se.isel(L=-1).max()),
        "noise_floor_plain_largest_L": float(2 * ds.bias_se_plain.isel(L=-1).max()),
        "variance_reduction_largest_L": float(np.nanmedian(ratio[..., -1] ** 2)),
        "variance_reduction_smallest_L": vr_small,
        "cv_raises_variance_smallest_L": bool(vr_small < 1.0),
        "variance_increase_smallest_L": float(1.0 / vr_small - 1.0),
        "max_reference_error": float(ds.reference_error.max()),
        "L_times_error_largest_L": float(Ls[-1] * ds.weak_error.values[-1]),
        "beta": beta, "d": d, "beta_c": beta_c, "both_poles_attract": bool(beta > beta_c),
        "has_chi2": bool(np.isfinite(chi2_red)),
        "fit_min_snr": snr, "fit_L_min": int(ds.attrs["fit_L_min"]),
        "L_smallest": int(Ls[0]), "L_largest": int(Ls[-1]),
        "weak_error_smallest_L": float(ds.weak_error.values[0]),
        "weak_error_largest_L": float(ds.weak_error.values[-1]),
        "weak_error_se_largest_L": float(ds.weak_error_se.values[-1]),
        "cell_time_total_s": float(ds.cell_time_s.sum()),
        "cell_time_largest_L_s": float(ds.cell_time_s.isel(L=-1)),
        "n_cells": int(ds.attrs.get("n_cells", 0)),
        "n_cells_cached": int(ds.attrs.get("n_cells_cached", 0)),
        "per_pair": pairs,
    }


def _second_share(pair, L):
    """The share of the two-term model's error at L that its second term carries."""
    first, second = pair["C1"] / L, pair["C2"] / L**2
    total = abs(first + second)
    return float(abs(second) / total) if total > 0 else float("nan")


def _per_pair(ds) -> list[dict]:
    """Per (function, time): panel (b) read in numbers (L e over L >= fit_L_min), the
    two-term and free-order fits of the signed errors, and the pure power law of the pair."""
    L_min = float(ds.attrs["fit_L_min"])
    late = [int(L) for L in ds.L.values if L >= L_min]
    snr = float(ds.attrs["fit_min_snr"])
    Ls = ds.L.values
    out = []
    for name in ds.function.values:
        for t in ds.time.values:
            b = ds.bias.sel(function=name, time=t)
            se = ds.bias_se.sel(function=name, time=t)
            in_range = (Ls >= L_min) & (np.abs(b.values) >= snr * se.values)
            signs = np.sign(b.values[in_range])
            two = fit_two_term(Ls, b.values, se.values, L_min=L_min)
            free = fit_corrected_order(Ls, b.values, se.values, L_min=L_min)
            pure = fit_order(Ls, np.abs(b.values), se.values, min_snr=snr, L_min=L_min)
            pure_signs = np.sign(b.values[pure["used"]])
            pure_change = bool(pure_signs.size > 1 and np.any(pure_signs != pure_signs[0]))
            entry = {"function": str(name), "time": float(t), "label": FUNCTIONS[str(name)][1],
                     "sign_change": bool(signs.size > 1 and np.any(signs != signs[0])),
                     "C1": two["C1"], "C1_se": two["C1_se"], "C2": two["C2"],
                     "C2_se": two["C2_se"], "two_term_chi2": two["chi2"],
                     "two_term_dof": int(two["dof"]), "two_term_p": two["p_value"],
                     "order_corrected": free["order"], "order_corrected_se": free["order_se"],
                     "order_corrected_low": free["order_low"],
                     "order_corrected_high": free["order_high"],
                     "corrected_chi2": free["chi2"], "corrected_dof": int(free["dof"]),
                     "corrected_p": free["p_value"],
                     "pure_sign_change": pure_change,
                     "pure_order": float("nan") if pure_change else float(pure["order"]),
                     "pure_order_se": float("nan") if pure_change else float(pure["order_se"]),
                     "pure_n_fit": int(pure["used"].sum())}
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
        ax.plot(xf, np.exp(float(ds.log_constant)) * xf ** (-order), color="0.65", ls="-",
                lw=1.0, label=rf"pure power law on $\max_{{f,t}}|e|$: order {order:.2f} "
                              rf"$\pm$ {order_se:.2f}")
    # the free-order fit C L^-p + D L^-2 of the pair with the largest error at the largest L
    last = np.abs(ds.bias.isel(L=-1)).values
    i, j = np.unravel_index(int(np.argmax(last)), last.shape)
    L_min = float(ds.attrs["fit_L_min"])
    free = fit_corrected_order(Ls, ds.bias.values[i, j], ds.bias_se.values[i, j], L_min=L_min)
    if np.isfinite(free["order"]) and np.isfinite(free["order_se"]):
        xf = np.geomspace(L_min / 1.5, Ls.max() * 1.5, 50)
        yf = np.abs(free["C"] * xf ** -free["order"] + free["D"] * xf ** -2.0)
        ax.plot(xf, yf, "k--", lw=1.2,
                label=rf"$C L^{{-p}} + D L^{{-2}}$ on $f = {FUNCTIONS[str(fns[i])][1]}$, "
                      rf"$t = {times[j]:g}$: $p$ = {free['order']:.3f} $\pm$ "
                      rf"{free['order_se']:.3f}" "\n" rf"($\chi^2$ = {free['chi2']:.1f} on "
                      f"{free['dof']} d.o.f., L >= {L_min:g})")
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
