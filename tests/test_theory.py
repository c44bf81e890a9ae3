"""Tests of the exact two-token theory (stochastic_transformers.theory).

The brute-force references below integrate the scale density directly in
x = atanh(z), by an ODE solver, from its defining formula
s(z) = exp(-int_0^z 2a/b^2): they share nothing with the module's angle
decomposition, Chebyshev series or Gauss rules.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy import integrate, special

from stochastic_transformers import theory as th


# ----------------------------------------------------------------- brute force
def _logcosh(x):
    x = abs(x)
    return x - math.log(2.0) + math.log1p(math.exp(-2.0 * x))


def _sech(x):
    x = abs(x)
    return 2.0 * math.exp(-x) / (1.0 + math.exp(-2.0 * x))


class _BruteScale:
    """Scale function of the overlap diffusion in x = atanh z, by a dense ODE solve.

    In x, s_x(x) = exp(-(d-2) I(x)) / cosh(x) with I' = sech(beta (1 - tanh x)).
    Beyond |x| = X the integrand is an exact exponential up to O(e^{-2X}), so the
    tails are added in closed form: rates d-1 at +inf and 1-kappa at -inf.
    """

    def __init__(self, beta, d, X=20.0):
        self.d = d
        kappa = (d - 2) * _sech(2 * beta)

        def rhs(x, y):
            return [_sech(beta * (1.0 - math.tanh(x))), math.exp(-(d - 2) * y[0] - _logcosh(x))]

        opts = dict(method="DOP853", rtol=1e-13, atol=1e-18, dense_output=True)
        self.up = integrate.solve_ivp(rhs, [0.0, X], [0.0, 0.0], **opts)
        self.dn = integrate.solve_ivp(rhs, [0.0, -X], [0.0, 0.0], **opts)
        self.S_plus = self.up.y[1, -1] + math.exp(-(d - 2) * self.up.y[0, -1] - _logcosh(X)) / (d - 1.0)
        self.S_minus = (
            self.dn.y[1, -1] - math.exp(-(d - 2) * self.dn.y[0, -1] - _logcosh(X)) / (1.0 - kappa)
            if kappa < 1
            else -math.inf
        )

    def S(self, x):
        return float(self.up.sol(x)[1] if x >= 0 else self.dn.sol(x)[1])

    def _s(self, x):
        sol = self.up.sol if x >= 0 else self.dn.sol
        return math.exp(-(self.d - 2) * sol(x)[0] - _logcosh(x))

    def tail_plus(self, x):
        """int_x^inf s_x, by quadrature of the tail itself (no cancellation)."""
        X = self.up.t[-1]
        return integrate.quad(self._s, x, X, epsabs=0, epsrel=1e-12, limit=200)[0] + (self.S_plus - self.up.y[1, -1])

    def tail_minus(self, x):
        """int_-inf^x s_x."""
        X = self.dn.t[-1]
        return integrate.quad(self._s, X, x, epsabs=0, epsrel=1e-12, limit=200)[0] + (self.dn.y[1, -1] - self.S_minus)

    def p_antipodal(self, z0):
        return (self.S_plus - self.S(math.atanh(z0))) / (self.S_plus - self.S_minus)


def _brute_average(beta, d, X=20.0):
    """Average over uniform tokens: int s_x(x) P(atanh Z0 < x) dx / int s_x, by one ODE."""
    kappa = (d - 2) * _sech(2 * beta)
    a = 0.5 * (d - 1)

    def rhs(x, y):
        s = math.exp(-(d - 2) * y[0] - _logcosh(x))
        return [_sech(beta * (1.0 - math.tanh(x))), s, s * special.betainc(a, a, special.expit(2 * x))]

    opts = dict(method="DOP853", rtol=1e-13, atol=1e-18)
    up = integrate.solve_ivp(rhs, [0.0, X], [0.0, 0.0, 0.0], **opts)
    dn = integrate.solve_ivp(rhs, [0.0, -X], [0.0, 0.0, 0.0], **opts)
    tail_p = math.exp(-(d - 2) * up.y[0, -1] - _logcosh(X)) / (d - 1.0)
    tail_m = math.exp(-(d - 2) * dn.y[0, -1] - _logcosh(X)) / (1.0 - kappa)
    total = up.y[1, -1] + tail_p - dn.y[1, -1] + tail_m
    return (up.y[2, -1] + tail_p - dn.y[2, -1]) / total  # the weight is ~1 at +inf, ~0 at -inf


# ----------------------------------------------------------------- closed forms
def test_critical_values():
    assert th.critical_beta(2) == 0.0
    assert th.critical_beta(3) == 0.0
    assert th.critical_beta(4) == pytest.approx(0.5 * math.acosh(2.0), rel=1e-15)
    ds = np.arange(3, 20)
    assert np.allclose(np.cosh(2 * th.critical_beta(ds)), ds - 2, rtol=1e-13)
    assert th.critical_epsilon(0.0) == pytest.approx(math.sqrt(2.0))
    assert np.allclose(th.critical_epsilon(np.array([1.0, 3.0])), np.sqrt(2 * np.exp([-1.0, -3.0])))


def test_attracting_boundary():
    for d in range(4, 12):
        bc = th.critical_beta(d)
        assert th.antipodal_attracting(bc + 1e-9, d)
        assert not th.antipodal_attracting(bc - 1e-9, d)
    assert all(th.antipodal_attracting(b, 2) for b in (0.0, 1.0, 10.0))
    assert not th.antipodal_attracting(0.0, 3) and th.antipodal_attracting(1e-6, 3)
    grid = th.antipodal_attracting(np.array([[0.1], [2.0]]), np.array([3, 8]))
    assert grid.tolist() == [[True, False], [True, True]]


def test_two_dimensions_closed_form():
    # d = 2: the scale density in the angle is constant, so P = theta0 / pi, average 1/2.
    z = np.linspace(-0.99, 0.99, 9)
    for beta in (0.0, 0.7, 5.0, 40.0):
        assert np.allclose(th.antipodal_probability(beta, 2, z0=z), np.arccos(z) / np.pi, atol=1e-13)
        assert th.antipodal_probability(beta, 2) == pytest.approx(0.5, abs=1e-13)


def test_beta_zero_and_non_attracting_give_exact_zero():
    for d in (3, 4, 7):
        assert th.antipodal_probability(0.0, d) == 0.0
    bc = th.critical_beta(6)
    assert th.antipodal_probability(bc - 1e-6, 6) == 0.0
    assert np.all(th.antipodal_probability(bc * 0.5, 6, z0=np.array([-0.999, 0.0, 0.9])) == 0.0)
    # the fixed points themselves
    assert th.antipodal_probability(1.0, 5, z0=1.0) == 0.0
    assert th.antipodal_probability(1.0, 5, z0=-1.0) == 1.0


def test_drift_closed_form_at_beta_zero():
    z = np.linspace(-1, 1, 11)
    # USA at beta = 0: a = (sigma^2/2)(1-z^2)(d-2-z), b = sigma (1-z^2).
    a = th.overlap_drift(z, 0.0, 5, "unnormalized", 2.0)
    b = th.overlap_diffusion(z, 0.0, 5, "unnormalized", 2.0)
    assert np.allclose(a, 2.0 * (1 - z**2) * (3 - z), atol=1e-14)
    assert np.allclose(b, 2.0 * (1 - z**2), atol=1e-14)
    # hybrid, eps = 0: the deterministic flow dz = e^{beta z}(1 - z^2) dt
    assert np.allclose(th.hybrid_overlap_drift(z, 1.3, 0.0), np.exp(1.3 * z) * (1 - z**2))
    assert np.all(th.hybrid_overlap_diffusion(z, 1.3, 0.0) == 0.0)


def _lemma_4(z, beta, d, attention, sigma):
    """Lemma 4's a(z) and b(z) written out as the paper states them (moderate beta only)."""
    e1, e2 = np.exp(beta * (1 + z)), np.exp(2 * beta) + np.exp(2 * beta * z)
    a = 0.25 * sigma**2 * (1 - z**2) * (2 * (d - 2) * e1 - z * e2)
    b = sigma * (1 - z**2) * np.sqrt(e2 / 2)
    if attention == "softmax":
        m = 4 / (np.exp(beta) + np.exp(beta * z)) ** 2
        a, b = a * m, b * np.sqrt(m)
    return a, b


def _proposition_1(z, beta, eps, attention):
    """The hybrid overlap's a(z), b(z) (Proposition 1; SA with lambda = 2/(e^beta + e^{beta z}))."""
    lam = 1.0 if attention == "unnormalized" else 2 / (np.exp(beta) + np.exp(beta * z))
    ebz = np.exp(beta * z)
    a = ebz * (1 - z**2) * (lam - lam**2 * eps**2 * (np.exp(beta) / 2 + z * ebz))
    return a, lam * eps * ebz * (1 - z**2)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_coefficients_are_lemma_4_and_proposition_1(attention):
    # The z-forms come from the x-forms by Ito's formula; both must match the papers' formulas.
    z = np.linspace(-1, 1, 41)
    for beta, d, sigma in ((0.0, 2, 1.0), (1.1, 5, 0.7), (3.0, 9, 1.4)):
        a, b = _lemma_4(z, beta, d, attention, sigma)
        scale = np.max(np.abs(a))  # a changes sign: compare at the size of its terms
        np.testing.assert_allclose(th.overlap_drift(z, beta, d, attention, sigma), a,
                                   rtol=1e-13, atol=1e-14 * scale)
        np.testing.assert_allclose(th.overlap_diffusion(z, beta, d, attention, sigma), b,
                                   rtol=1e-13, atol=1e-300)
        for eps in (0.0, 0.8):
            a, b = _proposition_1(z, beta, eps, attention)
            np.testing.assert_allclose(th.hybrid_overlap_drift(z, beta, eps, attention), a,
                                       rtol=1e-13, atol=1e-14 * np.max(np.abs(a)))
            np.testing.assert_allclose(th.hybrid_overlap_diffusion(z, beta, eps, attention), b,
                                       rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("model", ["stochastic", "hybrid"])
def test_atanh_coefficients_follow_from_ito(attention, model):
    # mu = a/(1-z^2) + z b^2/(1-z^2)^2 and nu = b/(1-z^2), with a, b the papers' formulas.
    z = np.linspace(-0.95, 0.95, 15)
    for beta, d, sigma in ((0.0, 2, 1.0), (1.1, 5, 0.7), (3.0, 9, 1.4)):
        if model == "stochastic":
            a, b = _lemma_4(z, beta, d, attention, sigma)
        else:
            a, b = _proposition_1(z, beta, 0.8, attention)
        mu, nu = th.atanh_coefficients(z, beta, d, attention, sigma, model=model, epsilon=0.8)
        np.testing.assert_allclose(mu, a / (1 - z**2) + z * b**2 / (1 - z**2) ** 2,
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(nu, b / (1 - z**2), rtol=1e-12)


def test_atanh_coefficients_at_the_poles_and_large_beta():
    # Bounded at z = +-1 (the integrators evaluate them at tanh x = +-1 exactly), and the
    # softmax forms stay finite where e^{2 beta} overflows.
    mu, nu = th.atanh_coefficients(np.array([-1.0, 1.0]), 2.0, 4, "softmax", 1.0)
    assert np.all(np.isfinite(mu)) and np.all(nu > 0)
    q = math.exp(-4.0)  # e^{beta (z - 1)} at z = -1: mu(-1) = (2(d-2)q - (1+q^2))/(1+q)^2
    assert mu[0] == pytest.approx((4 * q - (1 + q * q)) / (1 + q) ** 2, rel=1e-14)
    # at z = 1, q = 1: mu = (2(d-2) + 2)/4 = (d-1)/2 and nu = 1
    assert mu[1] == pytest.approx(1.5, rel=1e-15) and nu[1] == pytest.approx(1.0, rel=1e-15)
    z = np.linspace(-0.9, 0.9, 7)
    a = th.overlap_drift(z, 400.0, 5, "softmax")
    b = th.overlap_diffusion(z, 400.0, 5, "softmax")
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    # beta -> inf with z < 1: q -> 0, a -> -z(1-z^2), b -> sqrt 2 (1-z^2)
    np.testing.assert_allclose(a, -z * (1 - z**2), rtol=1e-12)
    np.testing.assert_allclose(b, math.sqrt(2) * (1 - z**2), rtol=1e-12)
    assert isinstance(th.atanh_coefficients(0.2, 1.0, 3)[0], float)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_scale_ratio_is_attention_and_sigma_free(attention):
    # 2a/b^2 = [(d-2) sech(beta(1-z)) - z] / (1-z^2), whatever the attention and sigma.
    z = np.linspace(-0.95, 0.95, 21)
    for beta, d, sigma in ((0.3, 3, 1.0), (1.7, 6, 0.4), (4.0, 10, 2.5)):
        a = th.overlap_drift(z, beta, d, attention, sigma)
        b = th.overlap_diffusion(z, beta, d, attention, sigma)
        expected = ((d - 2) / np.cosh(beta * (1 - z)) - z) / (1 - z**2)
        assert np.allclose(2 * a / b**2, expected, rtol=1e-12)


def test_scale_density_against_its_definition():
    for beta, d in ((1.3, 5), (0.2, 3), (6.0, 12)):
        for z in (-0.9, -0.3, 0.5, 0.99):
            integral = integrate.quad(lambda y: 1 / ((1 - y * y) * np.cosh(beta * (1 - y))), 0, z,
                                      epsabs=1e-13, epsrel=1e-13, limit=200)[0]
            expected = (1 - z * z) ** -0.5 * math.exp(-(d - 2) * integral)
            assert th.scale_density(z, beta, d) == pytest.approx(expected, rel=1e-10)
    # log-derivative = -2a/b^2 (centred differences)
    beta, d, z, h = 2.0, 7, np.linspace(-0.8, 0.8, 9), 1e-5
    dlog = (np.log(th.scale_density(z + h, beta, d)) - np.log(th.scale_density(z - h, beta, d))) / (2 * h)
    a, b = th.overlap_drift(z, beta, d), th.overlap_diffusion(z, beta, d)
    assert np.allclose(dlog, -2 * a / b**2, rtol=1e-7)
    # endpoint behaviour: s ~ (1-z)^{(d-3)/2} at +1
    assert th.scale_density(1.0, 1.0, 5) == 0.0 and th.scale_density(1.0, 1.0, 2) == math.inf
    assert 0.0 < th.scale_density(1.0, 1.0, 3) < math.inf
    assert th.scale_density(-1.0, 1.0, 4) == math.inf


# ------------------------------------------------------- exit probabilities
CASES = [(0.05, 3), (0.7, 4), (1.0, 4), (2.0, 6), (3.0, 10), (12.0, 20), (50.0, 64), (1.2, 5)]


@pytest.mark.parametrize("beta,d", CASES)
def test_antipodal_probability_matches_brute_force(beta, d):
    # Brute force is accurate to ~1e-12; the module to ~1e-13.  Tolerance 1e-9.
    ref = _BruteScale(beta, d)
    z = np.array([-0.999999, -0.9, -0.3, 0.0, 0.4, 0.95, 0.999999])
    got = th.antipodal_probability(beta, d, z0=z)
    want = np.array([ref.p_antipodal(v) for v in z])
    assert np.max(np.abs(got - want)) < 1e-9
    assert th.antipodal_probability(beta, d) == pytest.approx(_brute_average(beta, d), abs=1e-9)


def test_monotonicity_and_limits():
    betas = np.linspace(0.0, 8.0, 41)
    grid = th.antipodal_probability(betas[:, None], np.arange(3, 12)[None, :])
    assert np.all(np.diff(grid, axis=0) >= -1e-14)  # more antipodal as beta grows
    assert np.all(np.diff(grid, axis=1) <= 1e-14)  # less antipodal as d grows
    z = np.linspace(-0.99, 0.99, 25)
    p = th.antipodal_probability(1.5, 5, z0=z)
    assert np.all(np.diff(p) < 0)  # closer to -1 means more likely antipodal
    # continuous transition at beta_c (d >= 4), and the beta -> infinity limit 1/2
    for d in (4, 7, 10):
        bc = th.critical_beta(d)
        assert 0.0 < th.antipodal_probability(bc + 1e-6, d) < 1e-5
        assert th.antipodal_probability(bc + 1e-6, d) < th.antipodal_probability(bc + 1e-3, d)
    assert th.antipodal_probability(1e4, 3) == pytest.approx(0.5, abs=0.01)


def test_grid_speed_200_by_7():
    betas = np.linspace(0.0, 50.0, 200)
    th._R_series.cache_clear()
    t0 = time.perf_counter()
    out = th.antipodal_probability(betas[:, None], np.arange(4, 11)[None, :])
    elapsed = time.perf_counter() - t0
    assert out.shape == (200, 7) and np.all((out >= 0) & (out <= 0.5))
    assert elapsed < 10.0  # about 0.6 s unloaded; generous for a shared machine


# -------------------------------------------------- escape and stopping angles
@pytest.mark.parametrize("beta,d", [(1.0, 4), (3.0, 10), (50.0, 64), (2.0, 2), (0.3, 3)])
def test_stopping_angles_are_level_sets(beta, d):
    for level in (1e-6, 1e-3):
        ts, ps = th.stopping_angles(beta, d, tol=1e-3, level=level)
        assert th.escape_probability(ts, beta, d, 1e-3, "single") == pytest.approx(level, rel=1e-6)
        assert th.escape_probability(ps, beta, d, 1e-3, "antipodal") == pytest.approx(level, rel=1e-6)
        # escape is increasing in the angle
        assert th.escape_probability(0.5 * ts, beta, d, 1e-3, "single") < level
        assert th.escape_probability(2.0 * ps, beta, d, 1e-3, "antipodal") > level


def test_stopping_angles_near_beta_c_are_tiny_but_resolved():
    bc = th.critical_beta(4)
    ts, ps = th.stopping_angles(bc + 0.05, 4)
    assert 0.0 < ps < 1e-60
    assert th.escape_probability(ps, bc + 0.05, 4, 1e-3, "antipodal") == pytest.approx(1e-6, rel=1e-6)
    # closer still: only the logarithm is representable
    lt, lp = th.stopping_angles(bc + 1e-6, 4, log=True)
    kappa = 2.0 / math.cosh(2 * (bc + 1e-6))
    # power law psi_stop ~ psi_tol * level^{1/(1-kappa)} (to leading order in the log)
    assert lp == pytest.approx(math.log(1e-6) / (1 - kappa), rel=1e-3)
    assert th.stopping_angles(bc + 1e-6, 4)[1] == 0.0
    # not attracting: never stop at the antipodal pole, escape is certain
    assert th.stopping_angles(bc - 1e-3, 4)[1] == 0.0
    assert th.stopping_angles(bc - 1e-3, 4, log=True)[1] == -math.inf
    assert th.escape_probability(1e-30, bc - 1e-3, 4, 1e-3, "antipodal") == 1.0


def test_escape_probability_closed_forms_and_power_laws():
    tol = 1e-3
    theta_tol = math.acos(1 - tol)
    # d = 2: H(theta) = theta, and -1 has kappa = 0, so both are linear.
    for pole in ("single", "antipodal"):
        assert th.escape_probability(0.25 * theta_tol, 3.0, 2, tol, pole) == pytest.approx(0.25, rel=1e-12)
        assert th.stopping_angles(3.0, 2, tol, 1e-4)[0] == pytest.approx(1e-4 * theta_tol, rel=1e-10)
    # at and beyond the boundary: 1; at the pole: 0
    assert np.all(th.escape_probability(np.array([theta_tol, 1.0, math.pi]), 1.0, 5, tol) == 1.0)
    assert th.escape_probability(0.0, 1.0, 5, tol) == 0.0
    # far inside, slopes d-1 and 1-kappa in log-log
    beta, d = 1.5, 6
    kappa = (d - 2) / math.cosh(2 * beta)
    p1, p2 = th.escape_probability(np.array([1e-60, 1e-59]), beta, d, tol, "single")
    assert math.log10(p2 / p1) == pytest.approx(d - 1, rel=1e-10)
    q1, q2 = th.escape_probability(np.array([1e-60, 1e-59]), beta, d, tol, "antipodal")
    assert math.log10(q2 / q1) == pytest.approx(1 - kappa, rel=1e-10)


@pytest.mark.parametrize("beta,d", [(1.0, 4), (4.0, 9)])
def test_escape_probability_matches_brute_force(beta, d):
    tol = 0.05
    ref = _BruteScale(beta, d)
    x_of_theta = lambda th_: math.atanh(math.cos(th_))  # noqa: E731
    theta_tol = math.acos(1 - tol)
    for frac in (0.1, 0.5, 0.9):
        theta = frac * theta_tol
        want = ref.tail_plus(x_of_theta(theta)) / ref.tail_plus(x_of_theta(theta_tol))
        assert th.escape_probability(theta, beta, d, tol, "single") == pytest.approx(want, rel=1e-9)
        psi = frac * theta_tol  # same boundary angle for the antipodal pole
        want = ref.tail_minus(-x_of_theta(psi)) / ref.tail_minus(-x_of_theta(theta_tol))
        assert th.escape_probability(psi, beta, d, tol, "antipodal") == pytest.approx(want, rel=1e-9)


# ------------------------------------------------------------------ hybrid model
def test_hybrid_usa_is_all_or_nothing():
    z = np.array([-0.9, -0.2, 0.0, 0.6, 0.99])
    for beta in (0.0, 0.5, 2.0, 5.0):
        ec = th.critical_epsilon(beta)
        assert np.all(th.hybrid_antipodal_probability(beta, 0.97 * ec, z0=z) == 0.0)
        assert np.all(th.hybrid_antipodal_probability(beta, 1.03 * ec, z0=z) == 1.0)
        assert th.hybrid_antipodal_probability(beta, 0.97 * ec, d=5) == 0.0
        assert th.hybrid_antipodal_probability(beta, 1.03 * ec, d=5) == 1.0
        assert th.hybrid_antipodal_probability(beta, 0.0) == 0.0
        # Why all-or-nothing: in x = atanh z, 2 mu / nu^2 has one sign on the whole
        # line, the sign of (2/eps^2 - e^beta).  Check it from the SDE's coefficients.
        for eps, sign in ((0.97 * ec, 1.0), (1.03 * ec, -1.0)):
            zz = np.linspace(-0.999, 0.999, 201)
            a = th.hybrid_overlap_drift(zz, beta, eps)
            b = th.hybrid_overlap_diffusion(zz, beta, eps)
            mu = a / (1 - zz**2) + zz * b**2 / (1 - zz**2) ** 2
            assert np.all(sign * mu > 0)


def test_hybrid_softmax_against_brute_scale():
    # SA hybrid: both ends attract for 1 + e^{-2 beta} < eps^2 < 2; compare with a direct
    # ODE integration of the scale density built from the SDE's own coefficients.
    beta, eps = 0.5, 1.3
    assert 1 + math.exp(-2 * beta) < eps**2 < 2

    def g(x):
        z = math.tanh(x)
        a = th.hybrid_overlap_drift(z, beta, eps, "softmax")
        b = th.hybrid_overlap_diffusion(z, beta, eps, "softmax")
        mu = a / (1 - z * z) + z * b * b / (1 - z * z) ** 2
        return 2 * mu / (b / (1 - z * z)) ** 2

    k = 1 / eps**2
    rate_p, rate_m = 2 * k - 1, -((k - 1) * math.exp(2 * beta) + k)  # limits of g at +-inf
    X = 12.0  # beyond, g is constant to ~e^{-24}; 1 - z^2 is still resolved in double
    rhs = lambda x, y: [g(x), math.exp(-y[0])]  # noqa: E731
    up = integrate.solve_ivp(rhs, [0, X], [0, 0], method="DOP853", rtol=1e-12, atol=1e-14, dense_output=True)
    dn = integrate.solve_ivp(rhs, [0, -X], [0, 0], method="DOP853", rtol=1e-12, atol=1e-14, dense_output=True)
    s_plus = up.y[1, -1] + math.exp(-up.y[0, -1]) / rate_p
    s_minus = dn.y[1, -1] - math.exp(-dn.y[0, -1]) / rate_m
    for z0 in (-0.5, 0.0, 0.5):
        x0 = math.atanh(z0)
        s0 = up.sol(x0)[1] if x0 >= 0 else dn.sol(x0)[1]
        want = (s_plus - s0) / (s_plus - s_minus)
        got = th.hybrid_antipodal_probability(beta, eps, z0=z0, attention="softmax")
        assert 0.05 < got < 0.95
        assert got == pytest.approx(want, abs=1e-8)
    assert th.hybrid_antipodal_probability(beta, 1.1, attention="softmax") == 0.0
    assert th.hybrid_antipodal_probability(beta, 1.5, attention="softmax") == 1.0


# --------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: th.critical_beta(1), "d"),
        (lambda: th.critical_beta(2.5), "d"),
        (lambda: th.critical_beta(np.array([3.0, 4.0])), "d"),
        (lambda: th.critical_epsilon(-1.0), "beta"),
        (lambda: th.antipodal_probability(-0.1, 4), "beta"),
        (lambda: th.antipodal_probability(float("nan"), 4), "beta"),
        (lambda: th.antipodal_probability(np.array([1.0, -1.0]), 4), "beta"),
        (lambda: th.antipodal_probability(1.0, 4, z0=1.5), "z0"),
        (lambda: th.antipodal_probability(1e5, 4), "beta"),
        (lambda: th.overlap_drift(0.0, 1.0, 4, attention="relu"), "attention"),
        (lambda: th.overlap_drift(0.0, 1.0, 4, sigma=0.0), "sigma"),
        (lambda: th.overlap_diffusion(2.0, 1.0, 4), "z"),
        (lambda: th.hybrid_overlap_drift(0.0, 1.0, -0.5), "epsilon"),
        (lambda: th.escape_probability(0.1, 1.0, 4, tol=0.0), "tol"),
        (lambda: th.escape_probability(0.1, 1.0, 4, pole="north"), "pole"),
        (lambda: th.escape_probability(-0.1, 1.0, 4), "angle"),
        (lambda: th.stopping_angles(1.0, 4, level=1.0), "level"),
        (lambda: th.stopping_angles(1.0, 4, tol=2.0), "tol"),
        (lambda: th.hybrid_antipodal_probability(1.0, 0.5, d=1), "d"),
        (lambda: th.scale_density(0.0, 1.0, 0), "d"),
    ],
)
def test_invalid_inputs_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must"):
        call()


# --------------------------------------------------------------------------------------
# Two-cluster reduction (SPEC section 6; ours, not the paper's)
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("m", [1, 3])
def test_balanced_two_cluster_coefficients_are_lemma_4(attention, m):
    z = np.linspace(-0.999, 0.999, 41)
    for beta, d in ((0.0, 3), (1.5, 4), (4.0, 7)):
        drift, diff2 = th.two_cluster_coefficients(z, beta, d, m, m, attention=attention,
                                                   sigma=1.3)
        np.testing.assert_allclose(drift, th.overlap_drift(z, beta, d, attention, 1.3),
                                   rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(diff2, th.overlap_diffusion(z, beta, d, attention, 1.3) ** 2,
                                   rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_unbalanced_split_is_pushed_off_the_antipodal_pole(attention):
    """At z = -1 the drift is sigma^2 (d - 1)(alpha1 - alpha2)^2 / 2 > 0 (alpha = p - q)."""
    beta, d, m1, m2 = 1.5, 4, 1, 3
    drift, diff2 = th.two_cluster_coefficients(-1.0, beta, d, m1, m2, attention=attention)
    p1, q1, p2, q2 = th.two_cluster_weights(-1.0, beta, m1, m2, attention)
    gap = (p1 - q1) - (p2 - q2)
    assert drift == pytest.approx(0.5 * (d - 1) * gap**2, rel=1e-12) and drift > 0
    assert diff2 == 0.0
    # s^2 ~ 2 sigma^2 (alpha1 - alpha2)^2 (1 + z) near -1: the squared-Bessel scaling
    eps = 1e-7
    _, diff2_near = th.two_cluster_coefficients(-1.0 + eps, beta, d, m1, m2, attention=attention)
    assert diff2_near / eps == pytest.approx(2.0 * gap**2, rel=1e-5)


def _one_step_moments(z, beta, d, m1, m2, attention, L, n_pairs, seed):
    """Mean and variance of (Z' - Z) * L over one layer of the discrete model, with V and
    -V antithetic pairs, for a two-point configuration (a direct numpy computation)."""
    rng = np.random.default_rng(seed)
    y1 = np.zeros(d)
    y1[0] = 1.0
    y2 = np.zeros(d)
    y2[0], y2[1] = z, np.sqrt(1.0 - z * z)
    x = np.array([y1] * m1 + [y2] * m2)                       # (N, d)
    logits = beta * x @ x.T
    if attention == "softmax":
        w = np.exp(logits - logits.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
    else:
        w = np.exp(logits) / len(x)
    att = w @ x                                                 # (N, d)
    a1, a2 = att[0], att[-1]
    h = 1.0 / np.sqrt(L)
    out = []
    for sign in (1.0, -1.0):
        rng_s = np.random.default_rng(seed)                     # the same V, then -V
        v = sign * rng_s.standard_normal((n_pairs, d, d))
        u1 = y1 + h * v @ a1
        u2 = y2 + h * v @ a2
        z_new = np.einsum("ta,ta->t", u1, u2) / (np.linalg.norm(u1, axis=1)
                                                 * np.linalg.norm(u2, axis=1))
        out.append(z_new)
    del rng
    inc = (np.stack(out) - z) * L                               # (2, n_pairs)
    mean_pairs = inc.mean(axis=0)                               # antithetic average
    drift = mean_pairs.mean()
    drift_se = mean_pairs.std(ddof=1) / np.sqrt(n_pairs)
    # the antithetic half-difference keeps the odd orders in h: its second moment is
    # s^2 / L + O(1 / L^2), while that of Z' - Z carries an O(L^{-3/2}) bias
    half_diff = 0.5 * (out[0] - out[1])
    var = (half_diff**2).mean() * L
    return drift, drift_se, var


@pytest.mark.slow
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("m1, m2", [(1, 1), (1, 3), (2, 3)])
def test_two_cluster_coefficients_match_one_step_moments(attention, m1, m2):
    """One layer at L = 20,000 from a two-point configuration, 100,000 antithetic pairs:
    drift within 4 standard errors (false-alarm rate about 6e-5 per check, 18 checks);
    variance within 1.5% (sampling error about 0.5%; the estimator's bias is O(1/L): with
    unnormalised attention it is 2% at L = 2000 and 0.3% at L = 8000, measured)."""
    beta, d, L = 1.5, 4, 20_000
    for k, z in enumerate((-0.9, -0.3, 0.5)):
        drift, se, var = _one_step_moments(z, beta, d, m1, m2, attention, L, 100_000,
                                           seed=1000 + k)
        mu, s2 = th.two_cluster_coefficients(z, beta, d, m1, m2, attention=attention)
        assert abs(drift - mu) <= 4 * se, (z, drift, mu, se)
        assert var == pytest.approx(s2, rel=0.015), (z, var, s2)


@pytest.mark.parametrize("kwargs, name", [(dict(m1=0), "m1"), (dict(m2=1.5), "m2"),
                                          (dict(d=1), "d"), (dict(attention="x"), "attention")])
def test_two_cluster_coefficients_name_a_bad_parameter(kwargs, name):
    args = dict(z=0.3, beta=1.0, d=4, m1=1, m2=3)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        th.two_cluster_coefficients(args.pop("z"), args.pop("beta"), args.pop("d"),
                                    args.pop("m1"), args.pop("m2"), **args)


# ------------------------------------------------------- the hybrid model: the discrete chain
@pytest.mark.parametrize("beta", [0.0, 0.7, 2.5, 4.0])
def test_hybrid_antipodal_rate_changes_sign_at_the_critical_epsilon(beta):
    """The limit's drift of atanh Z at -1 is the SDE's (atanh_coefficients at z = -1) and is
    negative (the pair approaches -1) exactly where hybrid_antipodal_probability is 1."""
    ec = th.critical_epsilon(beta)
    for eps in (0.0, 0.9 * ec, 1.1 * ec, 3.0 * ec):
        rate = th.hybrid_antipodal_rate(beta, eps)
        mu, _ = th.atanh_coefficients(-1.0, beta, 3, "unnormalized", model="hybrid", epsilon=eps)
        assert rate == pytest.approx(mu, rel=1e-12, abs=1e-15)
        assert (rate < 0) == (th.hybrid_antipodal_probability(beta, eps) == 1.0)


@pytest.mark.parametrize("beta, eps", [(0.5, 0.4), (2.0, 0.3), (3.0, 0.2)])
def test_hybrid_antipodal_rate_of_the_chain_tends_to_the_limit(beta, eps):
    """rate_L - rate is O(1/L) (the constant of the docstring's expansion, within a factor 2
    at L = 1e6); without noise the chain's rate is the deterministic one, and a tiny noise
    moves it by about eps^2 / 2."""
    limit = th.hybrid_antipodal_rate(beta, eps)
    c = (-0.5 + 0.25 * eps**2 * (3 * math.exp(beta) + math.exp(-3 * beta))
         - 0.375 * eps**4 * (math.exp(2 * beta) + math.exp(-2 * beta)))
    L = 1e6
    assert abs(th.hybrid_antipodal_rate(beta, eps, L) - limit) <= 2 * abs(c) / L
    det = th.hybrid_antipodal_rate(beta, 0.0, 100)
    assert det == pytest.approx(100 * (math.log1p(math.cosh(beta) / 100)
                                       - math.log1p(math.sinh(beta) / 100)), rel=1e-14)
    assert th.hybrid_antipodal_rate(beta, 1e-3, 100) == pytest.approx(det - 5e-7, abs=2e-7)


def test_mean_log_abs_normal_at_large_offsets():
    """E log|xi - r| = log r - 1/(2 r^2) - 3/(4 r^4) + O(r^-6) for large r."""
    for r in (8.0, 25.0, 60.0):
        asymptotic = math.log(r) - 0.5 / r**2 - 0.75 / r**4
        assert th._mean_log_abs_normal(r) == pytest.approx(asymptotic, abs=20 / r**6)
        assert th._mean_log_abs_normal(-r) == pytest.approx(th._mean_log_abs_normal(r), rel=1e-14)


def test_hybrid_step_size_is_eps_e_beta_over_2_sqrt_L_and_checks_its_arguments():
    got = th.hybrid_step_size(np.array([0.0, 2.0])[:, None], np.array([0.5, 1.0]), 100)
    np.testing.assert_allclose(got, np.array([[1.0], [math.exp(2)]]) * [0.5, 1.0] / 20,
                               rtol=1e-15)
    assert isinstance(th.hybrid_step_size(1.0, 0.5, 25), float)
    for bad, name in (((1.0, 0.5, 0), "L"), ((-1.0, 0.5, 10), "beta"), ((1.0, -0.5, 10), "epsilon")):
        with pytest.raises(ValueError, match=name):
            th.hybrid_step_size(*bad)
    with pytest.raises(ValueError, match="L"):
        th.hybrid_antipodal_rate(1.0, 0.5, 0.0)
