"""Tests of the backward Kolmogorov solver (stochastic_transformers.kolmogorov).

Each piece against something independent of it: the band storage against dense
products, the stencils against polynomials they must differentiate exactly, the Pade
approximant against scipy's and against the exponential, the stepping against
``scipy.linalg.expm`` of the same matrix, and the whole solver against closed forms of
constant-coefficient equations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import interpolate, linalg

from stochastic_transformers import kolmogorov as kol


def _dense(ab):
    """The (n, n) matrix stored in LAPACK (2, 2) band form: entry (i, i + k) at ab[2 - k, i + k]."""
    n = ab.shape[1]
    out = np.zeros((n, n))
    for k in range(-2, 3):
        for i in range(max(0, -k), min(n, n - k)):
            out[i, i + k] = ab[2 - k, i + k]
    return out


def _generator(n, lo=-2.0, hi=2.0):
    """A grid and the generator of a diffusion with varying coefficients on it."""
    xs = np.linspace(lo, hi, n)
    mu = np.sin(xs)
    half_nu2 = 0.3 + 0.2 * np.cos(xs) ** 2
    return xs, kol.banded_generator(xs[1] - xs[0], mu, half_nu2), mu, half_nu2


# ------------------------------------------------------------------ band storage
def test_banded_matvec_is_the_dense_product():
    rng = np.random.default_rng(0)
    ab = rng.standard_normal((5, 9))
    u = rng.standard_normal(9)
    np.testing.assert_allclose(kol.banded_matvec(ab, u), _dense(ab) @ u, rtol=1e-14, atol=1e-14)


def test_generator_stencils_are_exact_on_polynomials():
    xs, ab, mu, q = _generator(21)
    # quartic: the 5-point stencils inside are exact
    u, du, d2u = xs**4 - xs**3 + 2 * xs, 4 * xs**3 - 3 * xs**2 + 2, 12 * xs**2 - 6 * xs
    Lu = kol.banded_matvec(ab, u)
    np.testing.assert_allclose(Lu[2:-2], (mu * du + q * d2u)[2:-2], rtol=1e-11, atol=1e-11)
    # quadratic: the 3-point stencils next to the ends are exact too
    u, du, d2u = xs**2 - xs, 2 * xs - 1, 2 + 0 * xs
    Lu = kol.banded_matvec(ab, u)
    np.testing.assert_allclose(Lu[1:-1], (mu * du + q * d2u)[1:-1], rtol=1e-11, atol=1e-11)
    # Dirichlet ends: zero rows, and the rows sum to zero (constants are harmonic)
    dense = _dense(ab)
    assert np.all(dense[0] == 0.0) and np.all(dense[-1] == 0.0)
    np.testing.assert_allclose(dense.sum(axis=1), 0.0, atol=1e-10)


# ------------------------------------------------------------ Pade approximant
def _pade_value(z):
    """R(z) for real z from the kept poles and (doubled) residues."""
    poles, residues, _ = kol.pade_poles()
    z = np.asarray(z, dtype=float)[..., None]
    return np.sum(residues / (z - poles), axis=-1).real


def test_pade_poles_give_scipys_approximant():
    taylor = [1.0 / math.factorial(j) for j in range(8)]
    p, q = interpolate.pade(taylor, 4, 3)  # denominator degree 4, numerator degree 3
    z = np.linspace(-50.0, 1.0, 103)
    np.testing.assert_allclose(_pade_value(z), p(z) / q(z), rtol=1e-11, atol=1e-14)
    poles, residues, order = kol.pade_poles()
    assert order == 7 and len(poles) == 2  # two conjugate pairs, one solve each
    assert _pade_value(0.0) == pytest.approx(1.0, abs=1e-12)  # residues from np.roots


def test_pade_is_order_seven_and_l_stable():
    # local error e^z - R(z) ~ C z^8, C = 3! 4! / (7! 8!): halving z divides it by about 2^8
    err = [abs(_pade_value(z) - math.exp(z)) for z in (-0.5, -0.25)]
    assert 150.0 < err[0] / err[1] < 300.0
    assert err[1] == pytest.approx(math.factorial(3) * math.factorial(4) * 0.25**8
                                   / (math.factorial(7) * math.factorial(8)), rel=0.3)
    # L-stability: |R| <= 1 on the negative axis and R(-inf) = 0
    assert np.all(np.abs(_pade_value(-np.geomspace(1e-3, 1e8, 60))) <= 1.0)
    assert abs(_pade_value(-1e10)) < 1e-9
    # A-stability on the imaginary axis, from the full set of poles (conjugates restored)
    poles, residues, _ = kol.pade_poles()
    pairs = np.abs(poles.imag) > 1e-12
    all_poles = np.concatenate([poles, np.conj(poles[pairs])])
    all_res = np.concatenate([np.where(pairs, residues / 2, residues),
                              np.conj(residues[pairs] / 2)])
    y = 1j * np.linspace(-100.0, 100.0, 401)
    assert np.all(np.abs(np.sum(all_res / (y[:, None] - all_poles), axis=1)) <= 1.0 + 1e-12)


def test_pade_step_against_expm_on_a_small_banded_matrix():
    xs, ab, _, _ = _generator(12)
    A = _dense(ab)
    u = np.exp(-xs**2)
    # against the same rational function applied densely: equal up to rounding
    taylor = [1.0 / math.factorial(j) for j in range(8)]
    p, q = interpolate.pade(taylor, 4, 3)
    for dt in (0.01, 0.3):
        M = dt * A
        P = sum(c * np.linalg.matrix_power(M, j) for j, c in enumerate(p.coeffs[::-1]))
        Q = sum(c * np.linalg.matrix_power(M, j) for j, c in enumerate(q.coeffs[::-1]))
        np.testing.assert_allclose(kol.pade_step(ab, u, dt), np.linalg.solve(Q, P @ u),
                                   rtol=1e-10, atol=1e-12)
    # against the exponential: local error O(dt^8) once dt |A| < 1 (here |A| is about 17)
    errs = [np.max(np.abs(kol.pade_step(ab, u, dt) - linalg.expm(dt * A) @ u))
            for dt in (0.1, 0.05)]
    assert errs[1] < 1e-10
    assert errs[0] / errs[1] > 100.0


# ------------------------------------------------------------ adaptive stepping
@pytest.mark.parametrize("rtol", [1e-6, 1e-10])
def test_propagate_meets_its_tolerance(rtol):
    # The only error against expm of the same matrix is the time stepping's.
    xs, ab, _, _ = _generator(80)
    A = _dense(ab)
    u0 = 2.0 * np.exp(-4 * xs**2)
    ts = np.array([0.05, 0.4, 3.0])
    u = kol.propagate(ab, u0, ts, rtol)
    assert u.shape == (xs.size, ts.size)
    for j, t in enumerate(ts):
        exact = linalg.expm(t * A) @ u0
        assert np.max(np.abs(u[:, j] - exact)) <= rtol * np.max(np.abs(u0))
    # the ends are frozen (Dirichlet), up to rounding (R(0) = 1 to 4e-14)
    np.testing.assert_allclose(u[[0, -1]], u0[[0, -1], None] * np.ones(ts.size), rtol=0,
                               atol=1e-13 * np.max(np.abs(u0)))


# ------------------------------------------------------- constant coefficients
def test_heat_equation_sine_mode():
    # u_t = D u_xx on [0, pi], u = 0 at both ends, u(0) = sin x: u = e^{-D t} sin x exactly.
    D, ts = 0.7, np.array([0.5, 2.0])
    errors = []
    for n in (51, 101):
        xs = np.linspace(0.0, math.pi, n)
        u = kol.solve_backward(np.sin(xs), xs, ts, np.zeros(n), np.full(n, D), 1e-12)
        errors.append(np.max(np.abs(u - np.exp(-D * ts) * np.sin(xs)[:, None])))
    assert errors[1] < 1e-6
    assert errors[0] / errors[1] > 6.0  # 4th order inside, 2nd next to the ends


def test_advection_diffusion_of_a_gaussian():
    # dX = c dt + sqrt(2 D) dB: E[exp(-X_t^2 / 2 s^2) | X_0 = x] in closed form.
    c, D, s = 0.8, 0.5, 1.0
    ts = np.array([0.3, 1.0, 2.5])
    var = s * s + 2 * D * ts
    errors = []
    for n in (561, 1121):
        xs = np.linspace(-14.0, 14.0, n)
        u = kol.solve_backward(np.exp(-xs**2 / (2 * s * s)), xs, ts, np.full(n, c), np.full(n, D),
                               1e-11)
        exact = s / np.sqrt(var) * np.exp(-(xs[:, None] + c * ts) ** 2 / (2 * var))
        errors.append(np.max(np.abs(u - exact)))
    assert errors[1] < 2e-8
    assert 12.0 < errors[0] / errors[1] < 20.0  # fourth order in h


def test_gradient_table_is_the_x_derivative_of_the_solution():
    # u(s, z) = e^{-s} z, so u_x(s, x) = e^{-s} sech^2 x; centred differences of step 0.05
    # err by about dx^2 |u_xxx| / 6 < 2e-3 inside, first order at the two ends.
    def expectation(f, z0s, ss):
        return np.exp(-ss)[:, None] * f(z0s)[None, :], None

    table, x_lo = kol.gradient_table(expectation, [lambda z: z, lambda z: 2 * z], 1.0)
    xs = np.arange(-kol.GRADIENT_X_MAX, kol.GRADIENT_X_MAX + kol.GRADIENT_DX / 2, kol.GRADIENT_DX)
    ss = np.arange(table.shape[1]) * kol.GRADIENT_DS
    assert table.shape == (2, math.ceil(1.0 / kol.GRADIENT_DS) + 2, xs.size)
    assert x_lo == -kol.GRADIENT_X_MAX and table.flags.c_contiguous
    exact = np.exp(-ss)[:, None] / np.cosh(xs)[None, :] ** 2
    assert np.max(np.abs(table[0, :, 1:-1] - exact[:, 1:-1])) < 2e-3
    np.testing.assert_allclose(table[1], 2 * table[0], rtol=1e-14, atol=0)


def test_start_averages_of_a_brownian_motion():
    # dX = dB: E[X_t^2 | X_0 = x] = x^2 + t, exact for the 4th-order stencils; averaged over
    # a start law far from the frozen ends, and times in any order.
    ts = np.array([2.0, 0.5])

    def weights(xs):
        w = np.exp(-xs**2 / 2)
        w /= w.sum()
        return w, w * xs

    (mean, cross), error = kol.start_averages(lambda xs: (np.zeros_like(xs), np.ones_like(xs)),
                                              lambda xs: xs**2, weights, ts, 20.0, 0.05)
    xs = np.linspace(-20.0, 20.0, 801)
    w = weights(xs)[0]
    np.testing.assert_allclose(mean, w @ xs**2 + ts, rtol=0, atol=1e-9)
    assert np.max(np.abs(cross)) < 1e-12 and np.all(error < 1e-9)
