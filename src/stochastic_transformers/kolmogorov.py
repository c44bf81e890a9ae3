r"""Backward Kolmogorov equations of one-dimensional diffusions, on a grid.

For :math:`dX = \mu(X)\,dt + \nu(X)\,dB`, the function
:math:`u(t, x) = E[f(X_t)\mid X_0 = x]` solves the backward equation

.. math::

    \partial_t u = \mathcal L u = \mu\,\partial_x u + \tfrac12\nu^2\,\partial_x^2 u,
    \qquad u(0, \cdot) = f.

On a grid :math:`\mathcal L` becomes a banded matrix :math:`L` (:func:`banded_generator`)
and :math:`u(t) = e^{tL}u(0)`, which is applied by steps of an L-stable rational
approximation of the exponential (:func:`pade_poles`, :func:`pade_step`) with adaptive
step-size control (:func:`propagate`).  :func:`solve_backward` chains the two.

This is the deterministic reference behind :func:`stochastic_transformers.sde.overlap_expectation`
(the two-token overlap in :math:`x = \operatorname{atanh} z`),
:func:`stochastic_transformers.random_attention.homogenized.overlap_moments` (the random-attention limit) and
:func:`stochastic_transformers.two_clusters.antipodal_persistence` (the two-cluster overlap in
:math:`\log(1 + z)`, with the second-order generator :func:`log_gap_generator` in the same
band storage).
:func:`start_averages` averages a solution over laws of the start on two nested grids (the
main model's antipodal fraction at finite times, :func:`stochastic_transformers.sde.antipodal_at`),
and :func:`gradient_table` tabulates the derivative of a solution (the weak-error study's
control variate, :mod:`stochastic_transformers.kernels.control_variate`).

Band storage.  Every matrix here has at most two diagonals on each side and is stored as
LAPACK expects it for :func:`scipy.linalg.solve_banded` with ``(l, u) = (2, 2)``: an
array ``ab`` of shape (5, n) with ``ab[2 - k, i + k]`` holding the entry :math:`(i, i+k)`,
:math:`k = -2, \dots, 2`.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import linalg, special

__all__ = ["banded_generator", "banded_matvec", "pade_poles", "pade_step", "propagate",
           "solve_backward", "log_gap_grid", "log_gap_generator", "log_gap_solution",
           "at_log_gaps", "uniform_start_average", "start_averages",
           "gradient_table"]


def banded_generator(h, mu, half_nu2):
    r"""4th-order finite-difference matrix of :math:`\mu\partial_x + \tfrac12\nu^2\partial_x^2`.

    On a uniform grid :math:`x_i = x_0 + ih`, :math:`i = 0, \dots, n-1`, with the
    coefficients ``mu`` :math:`= \mu(x_i)` and ``half_nu2`` :math:`= \tfrac12\nu^2(x_i)`
    given at its points:

    * inside (:math:`2 \le i \le n-3`), the centred 5-point stencils, exact for
      polynomials of degree 4,

      .. math::

          u'_i \approx \frac{u_{i-2} - 8u_{i-1} + 8u_{i+1} - u_{i+2}}{12h},\qquad
          u''_i \approx \frac{-u_{i-2} + 16u_{i-1} - 30u_i + 16u_{i+1} - u_{i+2}}{12h^2},

      with truncation errors :math:`-\tfrac{h^4}{30}u^{(5)}` and :math:`-\tfrac{h^4}{90}u^{(6)}`;
    * next to the ends (:math:`i = 1, n-2`), the centred 3-point stencils
      :math:`(u_{i+1} - u_{i-1})/2h` and :math:`(u_{i-1} - 2u_i + u_{i+1})/h^2` (second order);
    * at the ends (:math:`i = 0, n-1`), zero rows: the values there stay frozen at
      :math:`u(0, x_{end})`, a Dirichlet condition.  Callers put the ends where the
      process does not go, or where it is absorbed (a fixed point of the diffusion).

    Returns the matrix in band storage (module docstring), shape (5, n).
    """
    mu = np.asarray(mu, dtype=float)
    half_nu2 = np.asarray(half_nu2, dtype=float)
    n = len(mu)
    diags = {k: np.zeros(n) for k in (-2, -1, 0, 1, 2)}
    inner = np.arange(2, n - 2)
    m, q = mu[inner], half_nu2[inner]
    diags[-2][inner] = m / (12 * h) - q / (12 * h * h)
    diags[-1][inner] = -8 * m / (12 * h) + 16 * q / (12 * h * h)
    diags[0][inner] = -30 * q / (12 * h * h)
    diags[1][inner] = 8 * m / (12 * h) + 16 * q / (12 * h * h)
    diags[2][inner] = -m / (12 * h) - q / (12 * h * h)
    for i in (1, n - 2):
        diags[-1][i] = -mu[i] / (2 * h) + half_nu2[i] / (h * h)
        diags[0][i] = -2 * half_nu2[i] / (h * h)
        diags[1][i] = mu[i] / (2 * h) + half_nu2[i] / (h * h)
    ab = np.zeros((5, n))
    for k, v in diags.items():
        ab[2 - k] = np.roll(v, k)  # rows with i + k outside [0, n) are zero anyway
    return ab


def banded_matvec(ab, u):
    r"""The product :math:`Lu` of a matrix in band storage (module docstring) with a vector.

    :math:`(Lu)_i = \sum_{k=-2}^{2} L_{i,i+k}\,u_{i+k}`, the entry :math:`L_{i,i+k}` being
    ``ab[2 - k, i + k]``.
    """
    out = ab[2] * u
    out[:-1] += ab[1, 1:] * u[1:]
    out[:-2] += ab[0, 2:] * u[2:]
    out[1:] += ab[3, :-1] * u[:-1]
    out[2:] += ab[4, :-2] * u[:-2]
    return out


@functools.lru_cache(maxsize=None)
def pade_poles(k=4):
    r"""Poles and residues of the (k-1, k) Pade approximant of :math:`e^z`, and its order.

    The approximant is :math:`R = P/Q` with

    .. math::

        P(z) = \sum_{j=0}^{k-1}\frac{(2k-1-j)!\,(k-1)!}{(2k-1)!\,j!\,(k-1-j)!}z^j,\qquad
        Q(z) = \sum_{j=0}^{k}(-1)^j\frac{(2k-1-j)!\,k!}{(2k-1)!\,j!\,(k-j)!}z^j,

    the rational function of these degrees closest to :math:`e^z` at 0:
    :math:`R(z) - e^z = O(z^{2k})`, so one step of size :math:`\Delta t` has local error
    :math:`O(\Delta t^{2k})` and the scheme has order :math:`2k - 1`.  It is L-stable:
    :math:`|R(z)| \le 1` on the left half-plane (A-stable) and :math:`R(-\infty) = 0`, so the
    stiff high-frequency modes of a fine-grid generator are damped rather than
    amplified, whatever the step.

    Since :math:`\deg P < \deg Q`, :math:`R(z) = \sum_i c_i/(z - r_i)` over the roots
    :math:`r_i` of Q, with residues :math:`c_i = P(r_i)/Q'(r_i)`.  The roots come in
    conjugate pairs (with conjugate residues), and for a real matrix and vector the two
    terms of a pair are conjugate: one of each pair is kept with its residue doubled,
    and the real part is taken (:func:`pade_step`).

    Returns ``(poles, residues, order)``: the kept poles, their (doubled where paired)
    residues, and :math:`2k - 1`.
    """
    f = math.factorial
    P = [f(2 * k - 1 - j) * f(k - 1) / (f(2 * k - 1) * f(j) * f(k - 1 - j)) for j in range(k)]
    Q = [(-1) ** j * f(2 * k - 1 - j) * f(k) / (f(2 * k - 1) * f(j) * f(k - j)) for j in range(k + 1)]
    roots = np.roots(Q[::-1])
    dQ = np.polynomial.polynomial.polyder(Q)
    res = np.polynomial.polynomial.polyval(roots, P) / np.polynomial.polynomial.polyval(roots, dQ)
    # Keep one pole of each conjugate pair (and real ones): R u = sum Re(w_i c_i (dt L - r_i)^-1 u).
    keep = roots.imag >= -1e-12
    weight = np.where(np.abs(roots.imag) > 1e-12, 2.0, 1.0)
    return roots[keep], (res * weight)[keep], 2 * k - 1


def pade_step(ab, u, dt):
    r"""One step :math:`u \mapsto R(\Delta t\,L)\,u` of the L-stable (3, 4) Pade scheme (order 7).

    With the partial fractions of :func:`pade_poles`,

    .. math::

        R(\Delta t\,L)\,u = \operatorname{Re}\sum_i c_i\,(\Delta t\,L - r_i I)^{-1}u,

    two complex banded solves (one per conjugate pair of poles), each :math:`O(n)`.
    ``ab`` is :math:`L` in band storage.
    """
    poles, residues, _ = pade_poles()
    out = np.zeros_like(u)
    for r, c in zip(poles, residues):
        m = (dt * ab).astype(complex)
        m[2] -= r
        out += (c * linalg.solve_banded((2, 2), m, u, overwrite_ab=True, check_finite=False)).real
    return out


def propagate(ab, u0, ts, rtol):
    r"""Values of :math:`e^{tL}u_0` at the sorted times ``ts``, by adaptive Pade steps.

    Step doubling controls the step size.  A step of size :math:`\Delta t` gives
    :math:`u_1 = R(\Delta t L)u`, two of size :math:`\Delta t/2` give
    :math:`u_2 = R(\tfrac{\Delta t}2 L)^2 u`; for a scheme of order p = 7 their difference
    is :math:`(2^p - 1)` times the local error of :math:`u_2`, to leading order.

    * The step is accepted when :math:`\|u_2 - u_1\|_\infty \le \max(\mathrm{tol},
      \mathrm{floor})` with :math:`\mathrm{tol} = \mathrm{rtol}\cdot\max(1, \|u_0\|_\infty)/10`
      and the rounding floor :math:`10^{-13}\max(1, \|u_0\|_\infty)`; the solution moves to
      the Richardson value :math:`u_2 + (u_2 - u_1)/(2^p - 1)`, whose error is of higher
      order still.
    * Accepted or not, the next step is :math:`\Delta t\cdot\min(2, \max(0.2,
      0.9\,(\mathrm{tol}/\mathrm{err})^{1/(p+1)}))`, the standard controller for a local
      error :math:`\propto \Delta t^{p+1}`; the first step is :math:`10^{-3}` of the last time.
      Steps are cut to land on each requested time exactly.

    So ``rtol`` bounds the error committed per step, relative to the larger of 1 and the
    data's max norm, with a safety factor 10.  The semigroup of a Markov generator
    contracts the max norm (and the discrete one nearly so), so the local errors add up
    rather than grow: the global error is at most the number of steps times the local
    one, and a 7th-order scheme takes few steps.  The operator is linear and constant in
    time, so each step is a sum of shifted banded solves (:func:`pade_step`).

    Returns an array of shape ``(len(u0), len(ts))``.
    """
    scale = rtol * max(1.0, float(np.max(np.abs(u0))))
    tol = 0.1 * scale
    floor = 1e-13 * max(1.0, float(np.max(np.abs(u0))))
    t_end = float(ts[-1])
    _, _, order = pade_poles()
    out = np.empty((len(u0), len(ts)))
    u = u0.copy()
    t = 0.0
    dt = 1e-3 * t_end
    for j, target in enumerate(ts):
        while t < target:
            step = min(dt, target - t)
            one = pade_step(ab, u, step)
            half = pade_step(ab, pade_step(ab, u, 0.5 * step), 0.5 * step)
            err = float(np.max(np.abs(half - one)))
            if err <= max(tol, floor):
                u = half + (half - one) / (2.0**order - 1.0)
                t = target if step == target - t else t + step
            factor = 0.9 * (max(tol, floor) / max(err, 1e-300)) ** (1.0 / (order + 1))
            dt = step * min(2.0, max(0.2, factor))
        out[:, j] = u
    return out


def solve_backward(u0, xs, ts, mu, half_nu2, rtol):
    r""":math:`u(t, x_i) = E[f(X_t)\mid X_0 = x_i]` on a uniform grid, at the sorted times ``ts``.

    ``u0`` :math:`= f(x_i)`, ``mu`` :math:`= \mu(x_i)` and ``half_nu2``
    :math:`= \tfrac12\nu^2(x_i)` are given on the grid ``xs``; the generator is
    :func:`banded_generator` (frozen ends) and the exponential :func:`propagate` with
    its ``rtol``.  Returns an array of shape ``(len(xs), len(ts))``.
    """
    ab = banded_generator(xs[1] - xs[0], mu, half_nu2)
    return propagate(ab, np.asarray(u0, dtype=float), ts, rtol)


def log_gap_grid(depth_scale, tol, v_min, h):
    r"""The grid in :math:`y = \log(1 + Z)` of a probability :math:`P(1 + Z_t \le \mathrm{tol})`
    and its initial values, for the overlap of two points near -1.

    The bottom :math:`v_{lo}` lies a factor 1e6 below the depth ``depth_scale`` at which
    the overlap hovers when -1 is not a fixed point (1e-30 when it is, ``depth_scale`` <= 0),
    below ``tol`` and a factor 1e3 below the smallest start ``v_min`` (never below 1e-290);
    the top is :math:`\log(2 - 10^{-8})`.  The initial values are the indicator of
    :math:`y \le \log\mathrm{tol}` averaged over each cell, and 0 at the top (absorbing).
    Returns ``(y, u0)``.
    """
    v_lo = min(1e-6 * depth_scale if depth_scale > 0 else 1e-30, 1e-6 * tol, 1e-3 * v_min)
    v_lo = max(v_lo, 1e-290)
    y_hi = math.log(2.0 - 1e-8)
    n = int(math.ceil((y_hi - math.log(v_lo)) / h)) + 1
    y = np.linspace(math.log(v_lo), y_hi, n)
    dy = y[1] - y[0]
    u0 = np.clip((math.log(tol) - (y - 0.5 * dy)) / dy, 0.0, 1.0)  # cell averages
    u0[-1] = 0.0
    return y, u0


def log_gap_generator(y, mu, s2, top_absorbs=True):
    r"""Second-order finite-difference generator of :math:`y = \log(1+Z)`, in band storage.

    :math:`\mathcal Lu = (\mu/v - s^2/2v^2)\,u_y + \tfrac12(s^2/v^2)\,u_{yy}` (Ito's formula for
    :math:`\log v`, ``mu`` and ``s2`` the overlap's drift and squared diffusion at
    :math:`v = e^y`); reflecting at the bottom (ghost point :math:`u_{-1} = u_1`), where the
    process does not go or, at an attracting -1, goes and stays.  At the top, next to +1:
    Dirichlet (frozen at the initial value 0: merged points stay merged) when
    ``top_absorbs``, else reflecting like the bottom.
    """
    h = y[1] - y[0]
    v = np.exp(y)
    drift = mu / v - 0.5 * s2 / v**2
    half = 0.5 * s2 / v**2
    lower = half / h**2 - drift / (2 * h)
    upper = half / h**2 + drift / (2 * h)
    diag = -2.0 * half / h**2
    lower[0], upper[0] = 0.0, 2.0 * half[0] / h**2
    if top_absorbs:
        lower[-1] = upper[-1] = diag[-1] = 0.0
    else:
        lower[-1], upper[-1] = 2.0 * half[-1] / h**2, 0.0
    ab = np.zeros((5, len(y)))
    ab[1, 1:] = upper[:-1]   # entry (i, i + 1)
    ab[2] = diag
    ab[3, :-1] = lower[1:]   # entry (i, i - 1)
    return ab


def log_gap_solution(coefficients, depth_scale, tol, v_min, h, ts, top_absorbs=True, rtol=1e-7):
    r""":math:`u(t_k, y_i) = P(1 + Z_{t_k} \le \mathrm{tol} \mid y_0 = y_i)` on the grid of
    :func:`log_gap_grid` (step ``h``): :func:`log_gap_generator` of the coefficients
    ``coefficients(v) -> (mu, s2)`` at :math:`v = e^y`, propagated by :func:`propagate` to
    the times ``ts`` in any order (columns in the order of ``ts``, clipped to [0, 1]).
    Returns ``(y, u)``, u of shape ``(len(y), len(ts))``."""
    y, u0 = log_gap_grid(depth_scale, tol, v_min, h)
    ab = log_gap_generator(y, *coefficients(np.exp(y)), top_absorbs)
    order = np.argsort(ts)
    u = propagate(ab, u0, np.asarray(ts)[order], rtol)
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    return y, np.clip(u[:, inv], 0.0, 1.0)


def uniform_start_average(y, u, d):
    r""":math:`\sum_i u_i\,P(Z_0 \in \text{cell } i)` on the grid ``y`` of :math:`\log(1+Z)`,
    for the overlap of two independent uniform tokens of :math:`S^{d-1}`:
    :math:`(1+Z_0)/2 \sim \mathrm{Beta}(a, a)`, :math:`a = (d-1)/2`."""
    a = 0.5 * (d - 1.0)
    edges = np.exp(0.5 * (y[1:] + y[:-1]))
    cdf = np.concatenate([[0.0], special.betainc(a, a, 0.5 * edges), [1.0]])
    return np.diff(cdf) @ u


def at_log_gaps(y, u, v):
    r"""The columns of a solution ``u`` on the grid ``y`` splined at :math:`y = \log v`, clipped
    to [0, 1]: shape ``(u.shape[1], len(v))``."""
    from scipy import interpolate

    return np.clip(np.stack([interpolate.CubicSpline(y, u[:, j])(np.log(v))
                             for j in range(u.shape[1])]), 0.0, 1.0)


def start_averages(coefficients, data, weights, ts, x_max, h, rtol=1e-9):
    r"""Averages over the start of :math:`u(t, x) = E[f(X_t)\mid X_0 = x]`, on two nested grids.

    The diffusion :math:`dX = \mu\,dt + \nu\,dB` has ``coefficients(xs) -> (mu, nu2)``
    (:math:`\mu` and :math:`\nu^2` at the points ``xs``); its backward equation with data
    ``data(xs)`` :math:`= f` is solved on :math:`[-x_{max}, x_{max}]` (frozen ends,
    :func:`banded_generator`; put them where the process does not go or is absorbed) by
    :func:`propagate` with ``rtol``, on grids of step ``2 h`` and ``h``.  Each row
    :math:`w` of ``weights(xs)`` (a law of the start on the grid, or such a law times a
    function of the start) gives the average :math:`\sum_i w_i\,u(t, x_i)`.

    Returns ``(averages, error)``: the averages on the finer grid, shape
    ``(len(weights), len(ts))``, and the largest change of any of them under the halving,
    shape ``(len(ts),)``; times in the order of ``ts``.
    """
    order = np.argsort(ts)
    levels = []
    for step in (2 * h, h):
        xs = np.linspace(-x_max, x_max, int(round(2 * x_max / step)) + 1)
        mu, nu2 = coefficients(xs)
        u = propagate(banded_generator(xs[1] - xs[0], mu, 0.5 * nu2),
                      np.asarray(data(xs), dtype=float), np.asarray(ts)[order], rtol)
        levels.append(np.array([w @ u for w in weights(xs)]))
    inv = np.argsort(order)   # the sorted times back to the order of ts
    return levels[1][:, inv], np.max(np.abs(levels[1] - levels[0]), axis=0)[inv]


#: The grid of :func:`gradient_table`: remaining times :math:`s = j\,\Delta s` and
#: :math:`x = \operatorname{atanh} z` in :math:`[-x_{max}, x_{max}]` with step
#: :math:`\Delta x`.  Fine enough for the weak-error study's control variate, whose mean is
#: zero whatever the table and whose variance alone depends on it.
GRADIENT_DS = 1.0 / 32.0
GRADIENT_DX = 0.05
GRADIENT_X_MAX = 9.0


def gradient_table(expectation, fs, t_max, ds=GRADIENT_DS, dx=GRADIENT_DX, x_max=GRADIENT_X_MAX):
    r"""The derivative :math:`u_x(s, x) = \partial_x u(s, \tanh x)` of the backward solutions
    :math:`u(s, z) = E[f(Z_s)\mid Z_0 = z]` of an overlap diffusion, tabulated for every
    :math:`f` of ``fs``.

    ``expectation(f, z0s, ss) -> (values, errors)`` gives :math:`u` at the overlaps ``z0s``
    and the times ``ss > 0``, values of shape ``(len(ss), len(z0s))``
    (:func:`stochastic_transformers.sde.overlap_expectation` with the model's parameters);
    at :math:`s = 0`, :math:`u = f`.  The grid is :math:`s_j = j\,\Delta s` for
    :math:`j = 0, \dots, \lceil t_{max}/\Delta s\rceil + 1` and :math:`x_i = -x_{max} +
    i\,\Delta x`; the derivative is :func:`numpy.gradient`'s (second-order centred
    differences, one-sided at the ends).

    Returns ``(table, x_lo)``: the table of shape ``(len(fs), n_s, n_x)`` (C-contiguous)
    and :math:`x_0 = -x_{max}`.
    """
    xs = np.arange(-x_max, x_max + dx / 2, dx)
    ss = np.arange(int(math.ceil(t_max / ds - 1e-9)) + 2) * ds
    tables = []
    for f in fs:
        u, _ = expectation(f, np.tanh(xs), ss[1:])
        u = np.vstack([f(np.tanh(xs))[None, :], u])
        tables.append(np.gradient(u, xs, axis=1))
    return np.ascontiguousarray(np.stack(tables)), float(xs[0])
