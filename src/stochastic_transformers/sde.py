r"""Integrators of the depth limits (Theorem 1, Lemmas 2-3) and a Kolmogorov reference.

Four tools, all for the continuous-time limits rather than the discrete model:

* :func:`simulate_overlap_sde`: Euler-Maruyama for the two-token overlap diffusion
  (Lemma 4; Proposition 1 for the hybrid model), in :math:`x = \operatorname{atanh} Z`.
* :func:`overlap_expectation`: :math:`E[f(Z_t)\mid Z_0 = z_0]` for that diffusion by
  solving the backward Kolmogorov equation, with an error estimate; the reference of
  weak-error studies of the discrete model.
* :func:`simulate_token_sde`: Euler-Maruyama for N tokens of the limit SDEs, projected
  back onto the sphere after each step.
* :func:`antipodal_at`: the overlap diffusion's antipodal fraction at finite times from
  uniform tokens, what the discrete model run to a horizon converges to.

Why :math:`x = \operatorname{atanh} z`.  Both coefficients of the overlap diffusion
carry the factor :math:`1 - z^2` (the poles are fixed points), so in x they are smooth,
bounded and tend to constants at :math:`\pm\infty`
(:func:`stochastic_transformers.theory.atanh_coefficients` defines them): X is a Brownian
motion with drift far out, Z = tanh X never leaves [-1, 1], and Euler-Maruyama has its
textbook weak order 1.  The backward equation is solved by
:mod:`stochastic_transformers.kolmogorov`.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from scipy import integrate, interpolate, special

from . import kolmogorov
from .attention import attention_paths_last
from ._validation import (ATTENTIONS, check_choice, check_int, check_real, check_real_array,
                          check_times, check_tol)
from .theory import OVERLAP_MODELS, _atanh_coefficients

__all__ = ["simulate_overlap_sde", "overlap_expectation", "simulate_token_sde", "antipodal_at",
           "uniform_overlap_density"]

#: Largest beta the integrators accept (simulate_overlap_sde, overlap_expectation,
#: simulate_token_sde).  With USA the drift and squared diffusion in x, and the token
#: SDE's |A_i|^2, grow like e^{2 beta}: at beta = 300 that is 4e260, a factor of about
#: 5e47 below the largest double (e^{2 beta} itself overflows at beta = 355), room for
#: what multiplies it: sigma^2 and the 1/h^2 of the Kolmogorov grid, whose step
#: 0.05 / (1 + beta) shrinks with beta.  SA stays finite for every beta; one bound
#: serves both attention types so that their calls accept the same parameters.
INTEGRATOR_BETA_MAX = 300.0


def _validate_common(beta, d, attention, sigma, model, epsilon):
    beta = check_real("beta", beta, 0.0, INTEGRATOR_BETA_MAX)
    d = check_int("d", d, 2)
    check_choice("attention", attention, ATTENTIONS)
    sigma = check_real("sigma", sigma, 0.0, strict_min=True)
    check_choice("model", model, OVERLAP_MODELS)
    epsilon = check_real("epsilon", epsilon, 0.0)
    return beta, d, sigma, epsilon


def _time_grid(T, dt, times):
    r"""Step sizes and the indices at which to record.

    Between consecutive requested times the interval is cut into
    :math:`\lceil \Delta/dt\rceil` equal steps, so ``dt`` is the largest step and
    times that are multiples of ``dt`` are reached with steps of exactly ``dt``.
    """
    T = check_real("T", T, 0.0)
    dt = check_real("dt", dt, 0.0, strict_min=True)
    if times is None:
        times = np.array([T])
    else:
        times = np.atleast_1d(check_real_array("times", times, 0.0))
        if times.ndim != 1 or times.size == 0:
            raise ValueError("times must be a non-empty 1-D array of finite numbers in [0, T]")
        if np.any(times > T * (1 + 1e-12)):
            raise ValueError(f"times must lie in [0, T] = [0, {T}]")
        if np.any(np.diff(times) < 0.0):
            raise ValueError("times must be non-decreasing")
    steps, record, prev = [], [], 0.0
    for t in times:
        gap = t - prev
        if gap > 0:
            n = max(1, int(math.ceil(gap / dt - 1e-9)))
            steps.extend([gap / n] * n)
        record.append(len(steps))
        prev = t
    return times, np.asarray(steps), np.asarray(record)


# ------------------------------------------------------------------------ overlap SDE
def simulate_overlap_sde(beta, d, *, z0, n_paths, T, dt, attention="softmax", sigma=1.0,
                         model="stochastic", epsilon=0.0, times=None, seed=0):
    r"""Euler-Maruyama for the two-token overlap diffusion, in :math:`x = \operatorname{atanh} z`.

    Integrates :math:`dX = \mu(X)\,dt + \nu(X)\,dB` (module docstring), i.e.
    Lemma 4 (``model="stochastic"``) or Proposition 1 (``model="hybrid"``, USA; the
    SA hybrid is our own Ito computation, see
    :func:`stochastic_transformers.theory.hybrid_overlap_drift`), and returns
    :math:`Z = \tanh X`:

    .. math::

        X_{k+1} = X_k + \mu(\tanh X_k)\,h_k + \nu(\tanh X_k)\sqrt{h_k}\,\xi_k,
        \qquad \xi_k \sim N(0, 1).

    Parameters
    ----------
    beta : float, 0 <= beta <= INTEGRATOR_BETA_MAX (300)
    d : int >= 2
    z0 : float, array of shape (n_paths,), or None
        Initial overlap(s) in [-1, 1]; ``None`` draws the overlap of two independent
        uniform tokens on :math:`S^{d-1}`, :math:`z_0 = 2\,\mathrm{Beta}(\tfrac{d-1}2,\tfrac{d-1}2) - 1`.
        ``z0 = +-1`` stays there (the poles are fixed points).
    n_paths : int >= 1
    T : float >= 0
    dt : float > 0
        Largest time step (see ``times``).
    attention : {"softmax", "unnormalized"}
    sigma : float > 0
        Value-matrix standard deviation (stochastic model only).
    model : {"stochastic", "hybrid"}
    epsilon : float >= 0
        Noise amplitude of the hybrid model (ignored by the stochastic model).
    times : array of float in [0, T], non-decreasing, optional
        Recording times (default: T only).  Between consecutive times the
        interval is cut into ``ceil(gap / dt)`` equal steps.
    seed : int or numpy SeedSequence-compatible
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    ndarray of shape (len(times), n_paths)
        The overlaps :math:`Z` at the requested times.  (Near the poles
        :math:`1 \mp Z \approx 2e^{\mp 2X}` falls below double precision once
        :math:`|X| > 19`, so Z then reads exactly +-1.)
    """
    beta, d, sigma, epsilon = _validate_common(beta, d, attention, sigma, model, epsilon)
    n_paths = check_int("n_paths", n_paths, 1)
    times, steps, record = _time_grid(T, dt, times)
    rng = np.random.default_rng(seed)
    if z0 is None:
        a = 0.5 * (d - 1)
        z = 2.0 * rng.beta(a, a, size=n_paths) - 1.0
    else:
        z = check_real_array("z0", z0, -1.0, 1.0)
        if z.ndim > 1 or (z.ndim == 1 and z.size != n_paths):
            raise ValueError(f"z0 must be a scalar or have shape (n_paths,) = ({n_paths},)")
        z = np.broadcast_to(z, (n_paths,)).copy()
    with np.errstate(divide="ignore"):
        x = np.arctanh(z)

    def step(x, h):
        mu, nu = _atanh_coefficients(np.tanh(x), beta, d, attention, sigma, model, epsilon)
        return x + mu * h + nu * math.sqrt(h) * rng.standard_normal(n_paths)

    return _recorded(x, steps, record, step, np.tanh, np.empty((len(times), n_paths)))


def _recorded(x, steps, record, step, observe, out):
    """Advance ``x = step(x, h)`` over ``steps``; ``out[k] = observe(x)`` after ``record[k]``
    steps (the indices of :func:`_time_grid`).  Returns ``out``."""
    k_rec = 0
    for k in range(len(steps) + 1):
        if k:
            x = step(x, steps[k - 1])
        while k_rec < len(record) and record[k_rec] == k:
            out[k_rec] = observe(x)
            k_rec += 1
    return out


# ------------------------------------------------------------- Kolmogorov reference
def _domain(beta, d, attention, sigma, model, epsilon, t, x_in):
    r"""Truncated x-domain [x_lo, x_hi] outside which the paths that matter never go.

    Beyond :math:`|x| = x_{in}` the test function is constant up to
    :math:`2\,\mathrm{Lip}(f)e^{-2x_{in}}`, so a Dirichlet end at :math:`x_{in}+\ell`
    only errs on paths that reach it *and* come back inside by time t.  With
    constant coefficients out there this costs at most :math:`e^{-c\ell}` when the drift
    points outwards (:math:`c = 2|\mu_\infty|/\nu_\infty^2`), and in any case at most
    the Gaussian tail of travelling :math:`\ell` in time t against at most the
    largest outward drift; :math:`\ell` is the smaller of the two lengths that make
    this below :math:`e^{-32}`.
    """
    zs = np.linspace(-1.0, 1.0, 4001)
    mu, nu = _atanh_coefficients(zs, beta, d, attention, sigma, model, epsilon)
    nu_max = float(nu.max())
    lengths = {}
    # Left end: x -> -inf is z = -1 (index 0), outward means mu < 0; right end mirrored.
    for side, index, outward_sign in (("lo", 0, -1.0), ("hi", -1, 1.0)):
        m_inf, n_inf = float(mu[index]), float(nu[index])
        out_max = max(0.0, float(np.max(outward_sign * mu)))
        gauss = out_max * t + nu_max * math.sqrt(2.0 * 32.0 * t)
        c_out = 2.0 * outward_sign * m_inf / n_inf**2 if n_inf**2 > 0.0 else 0.0
        expo = 32.0 / c_out if c_out > 0.0 else math.inf
        lengths[side] = min(gauss, expo) + 1.0
    return -(x_in + lengths["lo"]), x_in + lengths["hi"]


def _overlap_backward(f, xs, ts, beta, d, attention, sigma, model, epsilon, rtol):
    r""":math:`E[f(Z_t) \mid Z_0 = \tanh x_i]` on the grid ``xs`` of x, shape (n_x, n_t).

    :func:`stochastic_transformers.kolmogorov.solve_backward` with the overlap's
    coefficients in x and the data :math:`f(\tanh x)`.
    """
    u0 = np.asarray(f(np.tanh(xs)), dtype=float)
    if u0.shape != xs.shape:
        raise ValueError("f must map an array of overlaps to an array of the same shape")
    mu, nu = _atanh_coefficients(np.tanh(xs), beta, d, attention, sigma, model, epsilon)
    return kolmogorov.solve_backward(u0, xs, ts, mu, 0.5 * nu**2, rtol)


#: The most points a grid of the overlap's Kolmogorov solution may have (a few minutes).
KOLMOGOROV_MAX_POINTS = 400_000


def check_kolmogorov_grid(beta, d, attention, sigma, t, x_max, refinements=2) -> int:
    """A dry run of :func:`overlap_expectation` (default step) for the starts
    :math:`|x| \le` ``x_max`` up to the time ``t``: the points of its coarsest grid, or a
    ValueError where ``refinements`` halvings of the step would pass
    :data:`KOLMOGOROV_MAX_POINTS`.  Nothing is solved."""
    beta = float(beta)
    lo, hi = _domain(beta, int(d), attention, float(sigma), "stochastic", 0.0, float(t),
                     max(18.0, float(x_max) + 2.0))
    n = int(math.ceil((hi - lo) / (0.05 / (1.0 + beta)))) + 1
    finest = 2**refinements * (n - 1) + 1
    if finest > KOLMOGOROV_MAX_POINTS:
        raise ValueError(f"beta = {beta:g} and sigma = {float(sigma):g} to the time {float(t):g} "
                         f"need a Kolmogorov grid of {n:,} points, refined to {finest:,} (at "
                         f"most {KOLMOGOROV_MAX_POINTS:,}); lower beta, sigma or the time")
    return n


def _refined_expectation(f, x0s, t_sorted, h0, atol, beta, d, attention, sigma, model,
                         epsilon):
    """The Kolmogorov solution at ``x0s`` on nested grids, refined from step ``h0`` until the
    Richardson estimate is below ``atol``: ``(values, errors)`` of shape (len(t), len(x0s))."""
    x_in = max(18.0, float(np.max(np.abs(x0s))) + 2.0)
    lo, hi = _domain(beta, d, attention, sigma, model, epsilon, float(t_sorted[-1]), x_in)
    previous = None
    n = int(math.ceil((hi - lo) / h0)) + 1
    for level in range(4):
        # Nested grids (exact ratio 2) so that Richardson's (16 u_{h/2} - u_h)/15 applies.
        if n > KOLMOGOROV_MAX_POINTS:
            raise ValueError(
                f"the Kolmogorov grid would need {n} points (beta={beta}, t={t_sorted[-1]}); "
                "reduce t or beta, or raise h"
            )
        xs = np.linspace(lo, hi, n)
        u = _overlap_backward(f, xs, t_sorted, beta, d, attention, sigma, model, epsilon,
                              atol / 10.0)
        current = np.stack([interpolate.CubicSpline(xs, u[:, j])(x0s)
                            for j in range(len(t_sorted))])
        if previous is not None:
            values = (16.0 * current - previous) / 15.0
            errors = np.abs(current - previous) / 15.0
            if np.all(errors < atol):
                break
        previous = current
        n = 2 * n - 1
    else:
        warnings.warn(
            f"overlap_expectation: error estimate {errors.max():.2e} above atol={atol:.1e} "
            "after 4 grid levels",
            RuntimeWarning,
            stacklevel=3,
        )
    return values, errors


def overlap_expectation(
    f,
    z0,
    t,
    beta,
    d,
    attention="softmax",
    sigma=1.0,
    *,
    model="stochastic",
    epsilon=0.0,
    h=None,
    atol=1e-8,
):
    r"""Deterministic reference for :math:`E[f(Z_t)\mid Z_0 = z_0]` for the overlap diffusion.

    Solves the backward Kolmogorov equation
    :math:`u_t = a\,u_z + \tfrac12 b^2 u_{zz}`, :math:`u(0,\cdot) = f`, in
    :math:`x = \operatorname{atanh} z`, where it reads
    :math:`u_t = \mu u_x + \tfrac12\nu^2 u_{xx}` with smooth bounded coefficients
    (module docstring) and :math:`E[f(Z_t)\mid z_0] = u(t, \operatorname{atanh} z_0)`.

    Space: 4th-order centred differences on a uniform grid of a truncated domain
    (see ``_domain``: the truncation error is below about :math:`e^{-32}\|f\|`).
    Time: the L-stable (3, 4) Pade approximant of the exponential (order 7), with
    adaptive step doubling (local error per step below ``atol/100``; see
    :func:`stochastic_transformers.kolmogorov.propagate`).  The grid is halved (nested
    grids) until the Richardson
    estimate :math:`|u_{h/2} - u_h|/15` of the error of the finer solution is below
    ``atol``; the returned value is the extrapolation :math:`(16u_{h/2} - u_h)/15`,
    whose error is asymptotically much smaller than that estimate.  The answer is
    read off the grid by a cubic spline, whose :math:`O(h^4)` error is part of what
    the refinement measures.  A few seconds for moderate parameters (more for USA at
    large :math:`\beta`, whose coefficients grow like :math:`e^{2\beta}`).

    Parameters
    ----------
    f : callable
        Vectorised test function of the overlap, ``f(z_array) -> array``, smooth on
        [-1, 1] (e.g. ``lambda z: z``, ``lambda z: z**2``).
    z0 : float or 1-D array in (-1, 1)
    t : float or 1-D array, > 0 and <= 50
    beta : float, 0 <= beta <= INTEGRATOR_BETA_MAX (300)
    d : int >= 2
    attention : {"softmax", "unnormalized"}
    sigma : float > 0
    model : {"stochastic", "hybrid"}
        ``"hybrid"`` with ``epsilon = 0`` is the deterministic flow
        :math:`\dot z = a(z)`, integrated by an ODE solver (error estimate from two
        tolerances).
    epsilon : float >= 0
    h : float, optional
        Coarsest grid step (default ``0.05 / (1 + beta)``, as the coefficients vary on
        the scale :math:`1/\beta` near the origin).
    atol : float > 0
        Target for the refinement test.

    Returns
    -------
    value : ndarray of shape (len(t), len(z0)), or float for scalar inputs
    error : same shape, the error estimate
    """
    beta, d, sigma, epsilon = _validate_common(beta, d, attention, sigma, model, epsilon)
    if not callable(f):
        raise ValueError("f must be a callable f(z_array) -> array")
    atol = check_real("atol", atol, 0.0, strict_min=True)
    z0s = np.atleast_1d(check_real_array("z0", z0, -1.0, 1.0, strict_min=True, strict_max=True))
    ts = np.atleast_1d(check_real_array("t", t, 0.0, 50.0, strict_min=True))
    if z0s.ndim != 1:
        raise ValueError("z0 must be a scalar or 1-D array in the open interval (-1, 1)")
    if ts.ndim != 1:
        raise ValueError("t must be a scalar or 1-D array in (0, 50]")
    scalar = np.ndim(z0) == 0 and np.ndim(t) == 0
    order = np.argsort(ts)
    t_sorted = ts[order]

    if model == "hybrid" and epsilon == 0.0:
        values, errors = _deterministic_expectation(f, z0s, t_sorted, beta, attention)
    else:
        h0 = check_real("h", h, 0.0, 1.0, strict_min=True) if h is not None else 0.05 / (1.0 + beta)
        values, errors = _refined_expectation(f, np.arctanh(z0s), t_sorted, h0, atol, beta, d,
                                              attention, sigma, model, epsilon)
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    values, errors = values[inv], errors[inv]
    if scalar:
        return float(values[0, 0]), float(errors[0, 0])
    return values, errors


def _deterministic_expectation(f, z0s, ts, beta, attention):
    """Hybrid model with epsilon = 0: Z follows the ODE dz/dt = a(z); f is evaluated on it."""

    def rhs(_t, x):
        # In x = atanh z the flow dx/dt = mu(tanh x) is bounded and never reaches +-inf.
        mu, _ = _atanh_coefficients(np.tanh(x), beta, 2, attention, 1.0, "hybrid", 0.0)
        return mu

    res = []
    for rtol in (1e-10, 1e-12):
        sol = integrate.solve_ivp(
            rhs, (0.0, float(ts[-1])), np.arctanh(z0s), method="DOP853", t_eval=ts, rtol=rtol, atol=rtol
        )
        res.append(np.asarray(f(np.tanh(sol.y.T)), dtype=float))
    return res[1], np.abs(res[1] - res[0])


# ------------------------------------------------------------------------- token SDE
def simulate_token_sde(X0, beta, *, T, dt, attention="softmax", sigma=1.0, model="stochastic",
                       epsilon=0.0, seed=0, times=None):
    r"""Euler-Maruyama for N tokens of the limit SDEs, with projection onto the sphere.

    ``model="stochastic"`` (Theorem 1), with :math:`W` a :math:`d\times d` matrix of
    independent Brownian motions common to all tokens:

    .. math::

        dY^i = \frac{(1-d)\sigma^2}{2}|A_i|^2 Y^i\,dt + \sigma P_{Y^i}[dW\,A_i].

    ``model="hybrid"`` (Lemma 3), with a scalar Brownian motion :math:`B` common to
    all tokens and :math:`F(x, a) = -\langle x, a\rangle P_x a - \tfrac12|P_x a|^2 x`:

    .. math::

        dY^i = \bigl(\varepsilon^2 F(Y^i, A_i) + P_{Y^i}A_i\bigr)dt + \varepsilon P_{Y^i}A_i\,dB.

    Here :math:`P_x = I - xx^\top`, :math:`A_i = A_\beta(Y^i, Y)` with :math:`B = Q^\top K = I`:
    softmax :math:`\sum_j \mathrm{softmax}_j(\beta\langle Y^i, Y^j\rangle) Y^j` or
    unnormalised :math:`\frac1N\sum_j e^{\beta\langle Y^i, Y^j\rangle}Y^j`.  Each step is
    an Euler-Maruyama step followed by :math:`Y \mapsto Y/|Y|`.

    Parameters
    ----------
    X0 : array of shape (n_paths, N, d)
        Initial unit vectors (renormalised; rejected if a norm is off by > 1e-6).
    beta : float, 0 <= beta <= INTEGRATOR_BETA_MAX (300)
    T, dt, times : as in :func:`simulate_overlap_sde`
    attention : {"softmax", "unnormalized"}
    sigma : float > 0
    model : {"stochastic", "hybrid"}
    epsilon : float >= 0
    seed : int

    Returns
    -------
    ndarray of shape (len(times), n_paths, N, N)
        Gram matrices :math:`\langle Y^i_t, Y^j_t\rangle`.
    """
    X0 = check_real_array("X0", X0)
    if X0.ndim != 3 or X0.shape[1] < 1 or X0.shape[2] < 2:
        raise ValueError("X0 must have shape (n_paths, N, d) with N >= 1 and d >= 2")
    d = X0.shape[2]
    beta, d, sigma, epsilon = _validate_common(beta, d, attention, sigma, model, epsilon)
    norms = np.linalg.norm(X0, axis=2, keepdims=True)
    if np.any(np.abs(norms - 1.0) > 1e-6):
        raise ValueError("X0 must contain unit vectors (norms within 1e-6 of 1)")
    times, steps, record = _time_grid(T, dt, times)
    rng = np.random.default_rng(seed)
    Y = np.ascontiguousarray((X0 / norms).transpose(1, 2, 0))  # (N, d, P)
    P = Y.shape[2]

    def step(Y, h):
        A = attention_paths_last(Y, beta, attention)
        if model == "stochastic":
            dW = rng.standard_normal((d, d, P)) * math.sqrt(h)
            noise = np.einsum("abp,ibp->iap", dW, A)
            noise -= np.sum(noise * Y, axis=1, keepdims=True) * Y
            drift = (0.5 * (1 - d) * sigma**2) * np.sum(A * A, axis=1, keepdims=True) * Y
            Y = Y + drift * h + sigma * noise
        else:
            ya = np.sum(Y * A, axis=1, keepdims=True)
            PA = A - ya * Y
            F = -ya * PA - 0.5 * np.sum(PA * PA, axis=1, keepdims=True) * Y
            dB = rng.standard_normal(P) * math.sqrt(h)
            Y = Y + (epsilon**2 * F + PA) * h + epsilon * PA * dB
        # The exact SDE keeps |Y| = 1 (the Ito drift cancels the noise's quadratic
        # variation), but an Euler step leaves the sphere by O(h); projecting back
        # keeps the tokens where attention is defined, changes the step only along
        # the normal, and keeps weak order 1 (projected Euler-Maruyama).
        return Y / np.sqrt(np.sum(Y * Y, axis=1, keepdims=True))

    return _recorded(Y, steps, record, step, lambda Y: np.einsum("iap,jap->pij", Y, Y),
                     np.empty((len(times), P, Y.shape[0], Y.shape[0])))


# --------------------------------------------------------- antipodal at a finite time
def uniform_overlap_density(x, d):
    r"""Density in :math:`x = \operatorname{atanh} Z` of the overlap of two independent uniform
    points of :math:`S^{d-1}`: :math:`c_d\,(1 - Z^2)^{(d-1)/2} = c_d \cosh^{1-d} x`, with
    :math:`c_d = \Gamma(\tfrac d2)/(\sqrt\pi\,\Gamma(\tfrac{d-1}2))`."""
    d = check_int("d", d, 2)
    y = np.abs(np.asarray(x, dtype=float))
    log_c = special.gammaln(d / 2.0) - 0.5 * math.log(math.pi) - special.gammaln((d - 1) / 2.0)
    log_cosh = y + np.log1p(np.exp(-2.0 * y)) - math.log(2.0)
    return np.exp(log_c - (d - 1) * log_cosh)


#: Half-width of the x = atanh z domain of :func:`antipodal_at`: the coefficients are
#: constant to double precision well before it, and the density of the start is below 1e-60.
ANTIPODAL_X_MAX = 24.0
#: Largest beta :func:`antipodal_at` accepts: its spline of the coefficients resolves the
#: attention's switch (at :math:`1 - z \sim 1/\beta`) to 6e-5 or better up to beta = 20; beyond,
#: the switch moves into the spline's sparse tail and its error grows (2e-3 at beta = 300).
ANTIPODAL_BETA_MAX = 20.0


@functools.lru_cache(maxsize=64)
def _splined_coefficients(beta, d, attention, sigma):
    """The overlap's :math:`\\mu` and :math:`\\nu^2` in x, tabulated on [-24, 24] (dense where
    the attention switches, |x| < 3) and splined: cheap on every grid of a refinement."""
    xs = np.unique(np.concatenate([np.linspace(-ANTIPODAL_X_MAX, -3.0, 43),
                                   np.linspace(-3.0, 3.0, 241),
                                   np.linspace(3.0, ANTIPODAL_X_MAX, 43)]))
    mu, nu = _atanh_coefficients(np.tanh(xs), beta, d, attention, sigma)
    return interpolate.CubicSpline(xs, mu), interpolate.CubicSpline(xs, nu * nu)


def antipodal_at(t, beta, d, *, tol=1e-3, attention="softmax", sigma=1.0, h=None):
    r"""The limit's antipodal fraction at finite times: :math:`P(Z_t \le -1 + \mathrm{tol})`
    for the two-token overlap diffusion (Lemma 4) from two independent uniform tokens.

    What the discrete model at a horizon :math:`T` converges to (Theorem 1 is weak
    convergence on compact time intervals); as :math:`t \to \infty` it tends to
    :func:`stochastic_transformers.theory.antipodal_probability`.  It is the backward
    Kolmogorov equation with the indicator of :math:`x \le \operatorname{atanh}(-1 +
    \mathrm{tol})` as data, in :math:`x = \operatorname{atanh} z` on
    :math:`[-24, 24]` (:data:`ANTIPODAL_X_MAX`; the poles are fixed points), averaged over
    :func:`uniform_overlap_density` (:func:`stochastic_transformers.kolmogorov.start_averages`,
    grid steps ``2 h`` and ``h``, ``h`` by default :math:`0.05/\max(1, \beta)`).  The scheme
    and its numbers are those of
    :func:`stochastic_transformers.random_attention.homogenized.antipodal_by` with ``model="stochastic"``
    (tested bit for bit); its error estimate is the largest change under the halving of the
    probability and of :math:`E[Z_0\,1\{Z_t \le -1 + \mathrm{tol}\}]`.

    Returns ``(p, error)``, arrays over ``t`` (> 0, any order); ``beta`` at most
    :data:`ANTIPODAL_BETA_MAX`.
    """
    beta, d, sigma, _ = _validate_common(beta, d, attention, sigma, "stochastic", 0.0)
    beta = check_real("beta", beta, 0.0, ANTIPODAL_BETA_MAX)
    tol = check_tol(tol)
    ts = check_times("t", t)
    h = min(0.05, 0.05 / max(1.0, beta)) if h is None else check_real("h", h, 0.0, 1.0,
                                                                      strict_min=True)
    mu, nu2 = _splined_coefficients(beta, d, attention, sigma)
    x_tol = math.atanh(-1.0 + tol)

    def weights(xs):
        w = uniform_overlap_density(xs, d)
        w = w / w.sum()
        return w, w * np.tanh(xs)

    (p, _), error = kolmogorov.start_averages(lambda xs: (mu(xs), nu2(xs)),
                                              lambda xs: (xs < x_tol).astype(float), weights,
                                              ts, ANTIPODAL_X_MAX, h)
    return p, error
