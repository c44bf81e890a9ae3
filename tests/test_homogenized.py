"""Limits of the random-attention model, each checked against an independent computation.

* the two-token coefficients with a fixed A = I are the main paper's (sde module);
* the quadrature has converged (a finer rule agrees);
* the coefficients are the one-step moments of the discrete model (Monte Carlo, fixed seed,
  tolerance 4.5 standard errors plus the O(eta^2) bias: false-alarm rate below 1e-4 per
  check, 4 checks);
* the Kolmogorov solver agrees with the main paper's at beta = 0 (where the models
  coincide), and the scale-function probability with the main paper's closed form;
* the simplex moments and drift at beta = 0 and the logistic law in closed form.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from stochastic_transformers.random_attention import homogenized as hm
from stochastic_transformers import sde, theory
from stochastic_transformers import simulate
from stochastic_transformers import ModelConfig, RunConfig


@pytest.mark.parametrize("beta", [0.3, 2.0, 7.0])
@pytest.mark.parametrize("d", [3, 6])
def test_fixed_identity_limit_is_the_main_papers_diffusion(beta, d):
    # The random-A formulas with the moments of a fixed A = I, q1 = q2 = tanh(beta(1-R)/2)/2
    # (so E[(q1 - q2)^2] = 0), are Lemma 4's coefficients in x = atanh R.
    xs = np.linspace(-30, 30, 61)
    one_minus = 2.0 / (1.0 + np.exp(np.clip(2.0 * xs, -700, 700)))  # 1 - R, exact at the pole
    q = 0.5 * np.tanh(0.5 * beta * one_minus)
    mu, nu2 = hm._coefficients_from_moments(xs, d, 1.0 + 4.0 * q * q, 2.0 * q * q, q * q, 0.0 * q)
    mu_ref, nu_ref = theory.atanh_coefficients(np.tanh(xs), beta, d, "softmax", 1.0)
    np.testing.assert_allclose(mu, mu_ref, atol=1e-13)
    np.testing.assert_allclose(nu2, nu_ref**2, atol=1e-13)
    fixed_mu, fixed_nu2 = hm.fixed_identity_coefficients(xs, beta, d)
    assert np.array_equal(fixed_mu, mu_ref) and np.array_equal(fixed_nu2, nu_ref * nu_ref)


def test_beta_zero_moments_are_exact():
    xs = np.array([-20.0, -1.0, 0.0, 2.0])
    e_p, e_sq, e_q1q2, e_dif = hm.pair_moments(xs, 0.0, 4)
    np.testing.assert_allclose(e_p, 1.0, atol=1e-14)
    np.testing.assert_allclose(e_sq, 0.0, atol=1e-14)
    np.testing.assert_allclose(e_dif, 0.0, atol=1e-14)


@pytest.mark.parametrize("beta,d", [(1.0, 4), (4.0, 3)])
def test_quadrature_has_converged(beta, d):
    xs = np.array([-30.0, -3.0, -0.7, 0.0, 0.4, 2.0, 30.0])
    a = hm.pair_coefficients(xs, beta, d)
    b = hm.pair_coefficients(xs, beta, d, n_normal=128, n_chi=64)
    np.testing.assert_allclose(a[0], b[0], atol=2e-4)
    np.testing.assert_allclose(a[1], b[1], atol=2e-4)


@pytest.mark.parametrize("z0", [0.3, -0.6])
def test_coefficients_are_the_one_step_moments_of_the_discrete_model(z0):
    """E[dR] and E[dR^2] over one layer of small step eta, divided by eps = eta^2."""
    beta, d, eta, n = 2.0, 4, 0.04, 400_000
    ds = simulate(ModelConfig(d=d, beta=beta, kind="random_attention", eta=eta),
                  RunConfig(n_tokens=2, n_traj=n, L=1, T=1, z0=z0, seed=7))
    dr = ds.gram.values[:, 0, 1] - z0
    eps = eta * eta
    x0 = math.atanh(z0)
    mu_x, nu2 = hm.pair_coefficients(np.array([x0]), beta, d)
    one_m = 1.0 - z0 * z0
    drift_r = one_m * (mu_x[0] - z0 * nu2[0])           # Ito for R = tanh X
    var_r = one_m**2 * nu2[0]
    mean, se = dr.mean() / eps, dr.std() / math.sqrt(n) / eps
    assert abs(mean - drift_r) < 4.5 * se + 0.05 * abs(drift_r) + 0.05
    sq = dr * dr / eps
    assert abs(sq.mean() - var_r) < 4.5 * sq.std() / math.sqrt(n) + 0.05 * var_r


def test_kolmogorov_at_beta_zero_is_the_main_papers():
    """At beta = 0 the random-A diffusion is the main paper's with sigma = 1 and tau = t."""
    mean, second, msd, err = hm.overlap_moments(np.array([0.5, 2.0]), 0.0, 4, z0=0.2)
    ref, ref_err = sde.overlap_expectation(lambda z: z, 0.2, np.array([0.5, 2.0]), 0.0, 4)
    np.testing.assert_allclose(mean, ref[:, 0], atol=1e-6)
    assert err.max() < 1e-5


def test_exit_probability_reproduces_the_main_papers_closed_form():
    beta, d = 2.0, 4

    def mu(x):
        return hm.fixed_identity_coefficients(x, beta, d)[0]

    def nu2(x):
        return hm.fixed_identity_coefficients(x, beta, d)[1]

    assert mu(np.array([-30.0]))[0] < 0
    p = hm._exit_probability(mu, nu2, 24.0, d, None)
    assert p == pytest.approx(float(theory.antipodal_probability(beta, d)), abs=1e-5)
    p0 = hm._exit_probability(mu, nu2, 24.0, d, -0.5)
    assert p0 == pytest.approx(float(theory.antipodal_probability(beta, d, z0=-0.5)), abs=1e-5)


def test_antipodal_attraction_with_random_keys():
    """d = 3: -1 attracts at every beta > 0; d = 4: never on this beta grid (ours)."""
    assert all(hm.antipodal_attracting(b, 3) < 0 for b in (0.25, 1.0, 4.0))
    assert all(hm.antipodal_attracting(b, 4) > 0 for b in (0.25, 1.0, 4.0))
    assert hm.antipodal_limit(1.0, 4) == 0.0
    assert 0.0 < hm.antipodal_limit(2.0, 3) < 0.5


def test_uniform_overlap_density_integrates_to_one():
    xs = np.linspace(-25, 25, 20001)
    for d in (3, 4, 9):
        assert np.trapezoid(hm.uniform_overlap_density(xs, d), xs) == pytest.approx(1.0, abs=1e-8)


def test_logistic_law():
    t = np.linspace(0, 5, 11)
    u = hm.logistic(t, 0.1)
    assert u[0] == pytest.approx(0.1)
    du = np.gradient(u, t)
    np.testing.assert_allclose(du[1:-1], (u * (1 - u))[1:-1], rtol=0.05)


def test_simplex_at_beta_zero():
    f, g, fse, gse = hm.simplex_moments(np.array([0.0, 0.5]), 6, 0.0, 8, n_samples=100)
    np.testing.assert_allclose(f, 1 / 6, atol=1e-12)
    np.testing.assert_allclose(g, 1 / 6, atol=1e-12)
    # the simplex drift at beta = 0 is m-logistic: m = gamma + (1 - gamma)/n
    gam = np.array([0.2, 0.6])
    b = hm.simplex_drift(gam, 1 / 6, 1 / 6, 8)
    m = gam + (1 - gam) / 6
    exact = (1 - gam) * (m * (8 - 2 + gam**2) - 7 * gam * m) / (1 - gam)
    np.testing.assert_allclose(b, exact, rtol=1e-12)


def test_bad_parameters():
    with pytest.raises(ValueError, match="beta"):
        hm.pair_coefficients(np.array([0.0]), -1.0, 4)
    with pytest.raises(ValueError, match="sigma_qk"):
        hm.pair_coefficients(np.array([0.0]), 1.0, 4, sigma_qk=0.0)
    with pytest.raises(ValueError, match="beta \\* sigma_qk"):
        hm.pair_coefficients(np.array([0.0]), 30.0, 4)
    with pytest.raises(ValueError, match="tau"):
        hm.overlap_moments(np.array([-1.0]), 1.0, 4)
    with pytest.raises(ValueError, match="gamma"):
        hm.simplex_moments(np.array([1.5]), 4, 1.0, 4)


def test_simplex_start_and_its_logistic_half_time():
    """The simplex tokens have the simplex Gram matrix; the logistic half time is where the
    logistic law from their mean overlap puts gamma at 1/2, and tends to log((1-g0)/g0)."""
    x = hm.simplex_tokens(5, 8, 0.3)
    np.testing.assert_allclose(x @ x.T, 0.7 * np.eye(5) + 0.3, atol=1e-14)
    for n, g0 in ((4, 0.1), (64, 0.3)):
        m = hm.logistic(hm.logistic_half_time(n, g0), 1 / n + (1 - 1 / n) * g0)
        assert (m - 1 / n) / (1 - 1 / n) == pytest.approx(0.5, abs=1e-12)
    assert hm.logistic_half_time(10**9, 0.1) == pytest.approx(math.log(9), rel=1e-6)
