r"""Two tokens: the overlap chain with a martingale control variate (the weak-error study).

The chain is the one of :mod:`.pair` (stochastic model, Gaussian values, :math:`B = I`, no
early stopping), drawing the same random numbers in the same order, so that its overlaps are
``simulate``'s bit for bit.  Along the way it sums, for each test function :math:`f` and
each recording layer, an estimate of zero that removes most of the noise of
:math:`f(Z^L_{tL})`.

Write one layer (:func:`stochastic_transformers.attention.pair_layer_stochastic`) as a
function of its seven random numbers; to first order in :math:`h = L^{-1/2}` only two of
them move the overlap:

.. math::

    Z_{n+1} - Z_n = (1 - Z_n^2)\,h\sigma\bigl((a+b)\,g_{11} - (a-b)\,g_{22}\bigr)
                    + O(h^2),

with :math:`a, b` the self and cross attention weights and :math:`g_{11}, g_{22}`
independent standard normals drawn for layer :math:`n+1`, hence independent of
:math:`Z_n`.  With :math:`u_x(s, x) = \partial_x u(s, \tanh x)` the derivative of the
Kolmogorov solution :math:`u(s, z) = E[f(Z_s)\mid Z_0 = z]` of the limit in
:math:`x = \operatorname{atanh} z`,

.. math::

    C_{f,t} = \sum_{n < tL} u_x\bigl(t - \tfrac{n+1}{L}, \operatorname{atanh} Z_n\bigr)\,
              h\sigma\bigl((a+b)\,g_{11} - (a-b)\,g_{22}\bigr)_{n+1}

is a sum of martingale increments, so :math:`E[C_{f,t}] = 0` **exactly** under the
discrete model, whatever the accuracy of :math:`u_x` (only the variance depends on it).
:math:`f(Z^L_{tL}) - C_{f,t}` is therefore an unbiased estimator of
:math:`E f(Z^L_{tL})`; it removes the first-order noise, and its variance is :math:`O(1/L)`
instead of :math:`O(1)` (measured: :math:`\approx 1.1/L` for :math:`f = z`).  The table of
:math:`u_x` is :func:`stochastic_transformers.kolmogorov.gradient_table`.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .. import attention as _att
from .. import rng as _rng
from .._jit import JIT_PARALLEL
from .common import draw_pair_noise


@nb.njit(**JIT_PARALLEL)
def control_variate_kernel(key0, key1, first, n, d, beta, softmax, h, sigma, s0, c0, rec, phi,
                           ds, x_lo, dx, z_out, cv_out):
    """Run ``n`` overlap-chain trajectories and accumulate the martingale control variates.

    Draws exactly what :mod:`.pair` draws (stochastic model, no early stopping), in the
    same order, so ``z_out`` equals simulate's overlaps bit for bit.  ``rec`` (sorted,
    >= 1) are the recording layers; ``phi[f, j, i]`` is :math:`u_x` of test function f at
    remaining time ``j * ds`` and ``x = x_lo + i * dx``, read by bilinear interpolation.
    ``cv_out[t, f, k]`` is the control variate of :math:`f(Z_{rec[k]})`.
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
        cv_out[t] = cv


def run_chain(n, *, L, times, table, beta, d, softmax=True, sigma=1.0, z0=0.0, seed=0,
              first_trajectory=0, n_threads=None):
    """Overlaps ``Z[n, time]`` of ``n`` chains from ``z0`` and their control variates
    ``C[n, f, time]`` at ``times`` (increasing positive multiples of 1/L).

    ``table`` is ``(phi, x_lo, ds, dx)``: :math:`u_x` of each test function on its grid
    (:func:`stochastic_transformers.kolmogorov.gradient_table`).  The overlaps are those of
    ``simulate`` with the same seed and trajectories, bit for bit.
    """
    times = np.asarray(times, dtype=float)
    rec = np.rint(times * L).astype(np.int64)
    if np.any(rec < 1) or np.any(np.abs(rec - times * L) > 1e-9 * L) or np.any(np.diff(rec) <= 0):
        raise ValueError(f"times must be increasing positive multiples of 1/L = 1/{L}; got {times}")
    phi, x_lo, ds, dx = table
    key0, key1 = _rng.stream_keys(seed)
    z_out, cv_out = np.empty((n, rec.size)), np.empty((n, phi.shape[0], rec.size))
    with _att.numba_threads(n_threads):  # restored after the call, as in simulate()
        control_variate_kernel(key0, key1, first_trajectory, n, d, float(beta), softmax,
                               1.0 / math.sqrt(L), float(sigma), math.sqrt((1.0 - z0) / 2.0),
                               math.sqrt((1.0 + z0) / 2.0), rec, phi, ds, x_lo, dx, z_out,
                               cv_out)
    return z_out, cv_out
