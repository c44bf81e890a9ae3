"""Theory of the random feedforward block (``stochastic_transformers.feedforward``).

Each result is checked against an independent form: the kernels against Monte Carlo of the
compiled activations (fixed seed) and against one-dimensional quadrature, the coefficients
against ``theory`` at r = 0 (bit for bit) and against the kernel formula assembled here, the
pole exponents against numerical limits of the coefficients, the thresholds against
Theorem 2 and against the numbers of SPEC section 8, the scale-function probability
against ``theory.antipodal_probability`` and against an ODE integration of the scale
density, and the finite-time probability against ``two_clusters.antipodal_persistence``.
"""

import math

import numpy as np
import pytest
from scipy import integrate, special

from stochastic_transformers import feedforward as ff
from stochastic_transformers import theory
from stochastic_transformers import two_clusters
from stochastic_transformers.activations import ACTIVATIONS, ODD_ACTIVATIONS, evaluate

ZS = np.array([-0.9, -0.4, 0.0, 0.5, 0.95])


# ---------------------------------------------------------------------- the kernel
def test_kernel_matches_monte_carlo_of_the_compiled_activations():
    """E[phi(g1) phi(g2)] from 400,000 pairs, within 5 standard errors.

    25 comparisons (5 activations x 5 correlations); each exceeds 5 SE with probability
    5.7e-7 (normal approximation, n = 400,000), so the false-alarm rate of the test is
    below 1.5e-5.  The seed is fixed, so the outcome is reproducible.
    """
    rng = np.random.default_rng(20260521)
    n = 400_000
    g1, g3 = rng.standard_normal(n), rng.standard_normal(n)
    for act in ACTIVATIONS:
        a = evaluate(act, g1)
        for z in ZS:
            prod = a * evaluate(act, z * g1 + math.sqrt(1 - z * z) * g3)
            se = prod.std(ddof=1) / math.sqrt(n)
            assert abs(prod.mean() - ff.kernel(z, act)) <= 5 * se, (act, z)


def _one_dimensional(f):
    """E[f(g)] by adaptive quadrature against the normal density (independent of the rule)."""
    def weighted(x):
        return f(np.array([x]))[0] * math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)

    return integrate.quad(weighted, -np.inf, np.inf, epsabs=1e-14, epsrel=1e-13, limit=200)[0]


def test_kernel_at_one_is_the_second_moment():
    assert ff.kernel(1.0, "relu") == pytest.approx(0.5, abs=1e-15)
    assert ff.kernel(1.0, "identity") == 1.0
    assert ff.kernel(1.0, "erf") == pytest.approx(2 / math.pi * math.asin(2 / 3), abs=1e-15)
    for act in ("gelu", "tanh"):
        second = _one_dimensional(lambda x, a=act: evaluate(a, x) ** 2)
        assert ff.kernel(1.0, act) == pytest.approx(second, abs=1e-13)
        assert ff.kernel(-1.0, act) == pytest.approx(
            _one_dimensional(lambda x, a=act: evaluate(a, x) * evaluate(a, -x)), abs=1e-13)


def test_quadrature_reproduces_the_closed_forms():
    z = np.linspace(-1, 1, 41)
    np.testing.assert_allclose(ff.kernel_quadrature(z, "erf"), 2 / np.pi * np.arcsin(2 * z / 3),
                               rtol=0, atol=1e-14)
    np.testing.assert_allclose(ff.kernel_quadrature(z, "identity"), z, rtol=0, atol=1e-13)
    # ReLU is not smooth: the rule converges only like 1/order (the reason for the closed form).
    relu = ff.kernel(z, "relu")
    err80 = np.abs(ff.kernel_quadrature(z, "relu", order=80) - relu).max()
    err160 = np.abs(ff.kernel_quadrature(z, "relu") - relu).max()
    assert err160 < 1e-3 and err160 < 0.6 * err80


@pytest.mark.parametrize("act", ["gelu", "tanh"])
def test_quadrature_is_converged_for_the_smooth_activations(act):
    z = np.linspace(-1, 1, 21)
    np.testing.assert_allclose(ff.kernel(z, act), ff.kernel_quadrature(z, act, order=300),
                               rtol=0, atol=1e-14)


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_kernel_derivative_is_the_slope_of_the_kernel(act):
    z, h = np.array([-0.6, 0.0, 0.3, 0.8]), 1e-4
    slope = (ff.kernel(z + h, act) - ff.kernel(z - h, act)) / (2 * h)
    np.testing.assert_allclose(ff.kernel_derivative(z, act), slope, rtol=0, atol=1e-7)


def test_kernel_derivative_at_one_is_price_s_formula():
    assert ff.kernel_derivative(1.0, "relu") == 0.5
    assert ff.kernel_derivative(-1.0, "relu") == 0.0
    assert ff.kernel_derivative(1.0, "erf") == pytest.approx(4 / (math.pi * math.sqrt(5)),
                                                             rel=1e-15)
    # GELU and tanh: E[phi'(g)^2], phi' by differences of the compiled activation.
    for act in ("gelu", "tanh"):
        def d_phi(x, a=act):
            return (evaluate(a, x + 1e-5) - evaluate(a, x - 1e-5)) / 2e-5

        assert ff.kernel_derivative(1.0, act) == pytest.approx(
            _one_dimensional(lambda x: d_phi(x) ** 2), abs=1e-9)
    # The same quadrature applied to erf' reproduces the closed form.
    quad = ff._quadrature(np.array([-1.0, 0.2, 1.0]), lambda x: ff._derivative("erf", x),
                          ff.QUADRATURE_ORDER)
    exact = ff.kernel_derivative(np.array([-1.0, 0.2, 1.0]), "erf")
    np.testing.assert_allclose(quad, exact, rtol=0, atol=1e-11)


def test_even_part_energy():
    for act in ODD_ACTIVATIONS:
        assert ff.even_part_energy(act) == 0.0
    assert ff.even_part_energy("relu") == 0.25
    even = lambda x: 0.5 * (evaluate("gelu", x) + evaluate("gelu", -x))  # noqa: E731
    assert ff.even_part_energy("gelu") == pytest.approx(_one_dimensional(lambda x: even(x) ** 2),
                                                        abs=1e-13)
    for act in ACTIVATIONS:
        half_sum = 0.5 * (ff.kernel(1.0, act) + ff.kernel(-1.0, act))
        assert ff.even_part_energy(act) == pytest.approx(half_sum, abs=1e-14)


@pytest.mark.parametrize("act", ["relu", "erf", "identity"])
def test_kernel_sums_keep_their_relative_precision(act):
    """kappa(1) + kappa(-1 + v) by the closed forms against the cancellation-free quadrature."""
    v = np.array([1e-30, 1e-12, 1e-6, 1e-3, 0.1, 0.7, 1.0, 1.5, 2.0])
    got = ff._kernel_sum(v, act)
    if act == "relu":
        # The quadrature of relu is only good to 1e-3, and the sum tends to 1/2 (no
        # cancellation to avoid): the plain form is the reference.
        np.testing.assert_allclose(got, 0.5 + ff.kernel(v - 1, act), rtol=1e-14)
        return
    np.testing.assert_allclose(got, ff._quadrature_pair(v, act), rtol=1e-13)
    np.testing.assert_allclose(got[4:], ff.kernel(1.0, act) + ff.kernel(v[4:] - 1, act),
                               rtol=1e-14)


# ---------------------------------------------------------------- the coefficients
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("m1, m2", [(1, 1), (1, 3), (2, 2)])
def test_r_zero_is_the_theory_exactly(m1, m2, attention):
    z = np.linspace(-1, 1, 17)
    for act in ACTIVATIONS:
        got = ff.coefficients(z, 1.7, 5, 0.0, act, m1, m2, attention, 0.8)
        ref = theory.two_cluster_coefficients(z, 1.7, 5, m1, m2, attention=attention, sigma=0.8)
        np.testing.assert_array_equal(got[0], ref[0])
        np.testing.assert_array_equal(got[1], ref[1])
    if m1 == m2 == 1:
        mu, s2 = ff.coefficients(z, 1.7, 5, 0.0, "relu", attention=attention, sigma=0.8)
        a = theory.overlap_drift(z, 1.7, 5, attention, 0.8)
        b = theory.overlap_diffusion(z, 1.7, 5, attention, 0.8)
        np.testing.assert_allclose(mu, a, rtol=0, atol=1e-13)
        np.testing.assert_allclose(s2, b * b, rtol=0, atol=1e-13)


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_coefficients_are_the_kernel_formula(act):
    """mu = -(d-1)/2 (K11+K22) z + K12 (d-2+z^2), s^2 = (1-z^2)(K11+K22-2zK12), assembled here."""
    z = np.linspace(-0.99, 0.99, 9)
    for attention, m1, m2 in (("softmax", 1, 3), ("unnormalized", 2, 1)):
        beta, d, r, sigma = 1.3, 6, 0.7, 1.2
        p1, q1, p2, q2 = theory.two_cluster_weights(z, beta, m1, m2, attention)
        a11 = p1**2 + q1**2 + 2 * p1 * q1 * z
        a22 = p2**2 + q2**2 + 2 * p2 * q2 * z
        a12 = (p1 * p2 + q1 * q2) * z + p1 * q2 + q1 * p2
        k1 = ff.kernel(1.0, act)
        K11, K22 = sigma**2 * a11 + r * k1, sigma**2 * a22 + r * k1
        K12 = sigma**2 * a12 + r * ff.kernel(z, act)
        mu, s2 = ff.coefficients(z, beta, d, r, act, m1, m2, attention, sigma)
        np.testing.assert_allclose(mu, -(d - 1) / 2 * (K11 + K22) * z + K12 * (d - 2 + z * z),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(s2, (1 - z * z) * (K11 + K22 - 2 * z * K12), rtol=1e-12,
                                   atol=1e-12)


def test_identity_block_alone_is_a_random_linear_map():
    z = np.linspace(-1, 1, 21)
    for d, r in ((2, 0.3), (4, 1.0), (9, 5.0)):
        mu, s2 = ff.block_coefficients(z, d, r, "identity")
        np.testing.assert_allclose(mu, -r * z * (1 - z * z), rtol=0, atol=1e-14 * r)
        np.testing.assert_allclose(s2, 2 * r * (1 - z * z) ** 2, rtol=0, atol=1e-14 * r)
    # r large: the attention terms become negligible next to the block.
    r = 1e6
    mu, s2 = ff.coefficients(z, 2.0, 4, r, "identity")
    np.testing.assert_allclose(mu / r, -z * (1 - z * z), rtol=0, atol=1e-5)
    np.testing.assert_allclose(s2 / r, 2 * (1 - z * z) ** 2, rtol=0, atol=1e-5)


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_coefficients_near_minus_one_keep_their_precision(act):
    """The v-forms used by the numerics equal the plain formulas, and stay exact at tiny v."""
    v = np.array([1e-3, 0.05, 0.5, 1.0, 1.7])
    for m1, m2 in ((1, 1), (1, 2)):
        args = (2.0, 4, 0.6, act, m1, m2, "softmax", 1.0)
        mu_v, s2_v = ff._coefficients_v(v, *args)
        mu, s2 = ff.coefficients(v - 1, *args)
        np.testing.assert_allclose(mu_v, mu, rtol=0, atol=1e-12)
        np.testing.assert_allclose(s2_v, s2, rtol=0, atol=1e-12)
    if act in ODD_ACTIVATIONS:  # mu ~ A v, s^2 ~ B v^2 with lambda = A - B/2 at v = 1e-25
        w = 1e-25
        mu, s2 = ff._coefficients_v(np.array([w]), 2.0, 4, 0.6, act, 1, 1, "softmax", 1.0)
        lam = ff.boundary_at_minus_one(2.0, 4, 0.6, act)["exponent"]
        assert mu[0] / w - s2[0] / (2 * w * w) == pytest.approx(lam, rel=1e-10)


# ----------------------------------------------------------------------- the poles
def _limit_minus(w, *args):
    mu, s2 = ff.coefficients(-1 + w, *args)
    return mu / w - s2 / (2 * w * w)


def _limit_plus(u, *args):
    mu, s2 = ff.coefficients(1 - u, *args)
    return -mu / u - s2 / (2 * u * u)


@pytest.mark.parametrize("act", ODD_ACTIVATIONS)
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_exponents_are_the_limits_of_the_coefficients(act, attention):
    """lambda_-+ in closed form against the formula at w = 1e-6 (an O(w) difference)."""
    for beta, d, r, m in ((0.4, 4, 0.5, 1), (1.0, 6, 4.0, 2), (2.0, 3, 0.1, 1), (0.7, 14, 30.0, 1)):
        args = (beta, d, r, act, m, m, attention, 1.0)
        lam = ff.boundary_at_minus_one(*args)["exponent"]
        num = _limit_minus(1e-6, *args)
        assert np.sign(num) == np.sign(lam)
        assert num == pytest.approx(lam, rel=1e-4, abs=1e-5)
        lam_p = ff.boundary_at_plus_one(*args)["exponent"]
        num_p = _limit_plus(1e-6, *args)
        assert np.sign(num_p) == np.sign(lam_p)
        assert num_p == pytest.approx(lam_p, rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_plus_one_exponent_for_every_activation_and_split(act):
    for m1, m2, attention in ((1, 3, "softmax"), (2, 1, "unnormalized"), (1, 1, "softmax")):
        args = (1.1, 5, 0.8, act, m1, m2, attention, 0.9)
        assert _limit_plus(1e-6, *args) == pytest.approx(
            ff.boundary_at_plus_one(*args)["exponent"], rel=1e-4)


def test_plus_one_repels_only_when_minus_one_does():
    # erf with d = 20: (d-3) kappa'(1) > (d-1) kappa(1), so a strong block repels +1 ...
    assert ff.boundary_at_plus_one(2.0, 20, 50.0, "erf")["kind"] == "repelling"
    assert ff.boundary_at_plus_one(2.0, 20, 5.0, "erf")["attracting"]
    for act in ("relu", "identity"):  # ... never with relu (-r) or the identity (-2r)
        assert ff.boundary_at_plus_one(0.0, 50, 1e4, act)["attracting"]
    # ... and lambda_- > lambda_+ whenever -1 is a fixed point and d >= 3.
    for act in ODD_ACTIVATIONS:
        for beta in (0.0, 0.5, 3.0):
            for d in (3, 6, 20):
                for r in (0.0, 1.0, 50.0):
                    for attention in ("softmax", "unnormalized"):
                        args = (beta, d, r, act, 1, 1, attention, 1.0)
                        assert (ff.boundary_at_minus_one(*args)["exponent"]
                                > ff.boundary_at_plus_one(*args)["exponent"])
    assert ff.antipodal_probability(2.0, 20, 50.0, "erf") == 0.0


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_even_part_makes_minus_one_an_entrance(act):
    """mu(-1) = 2 r (d-1) E[phi_even^2] > 0 and s^2 ~ 8 r E[phi_even^2] (1+Z): squared Bessel."""
    energy = ff.even_part_energy(act)
    for beta, d, r in ((0.5, 4, 0.3), (3.0, 7, 2.0)):
        out = ff.boundary_at_minus_one(beta, d, r, act)
        assert out["kind"] == "entrance" and not out["attracting"]
        assert out["bessel_dimension"] == d - 1
        mu, s2 = ff.coefficients(-1.0, beta, d, r, act)
        assert out["drift"] == pytest.approx(2 * r * (d - 1) * energy, rel=1e-12)
        assert mu == pytest.approx(out["drift"], rel=1e-12)
        w = 1e-8
        s2 = ff._coefficients_v(np.array([w]), beta, d, r, act, 1, 1, "softmax", 1.0)[1][0]
        assert s2 / w == pytest.approx(8 * r * energy, rel=1e-6)
    assert ff.boundary_at_minus_one(1.0, 2, 0.3, act)["kind"] == "reflecting"
    # Unbalanced split: the attention adds sigma^2 (alpha1 - alpha2)^2 / 2 to k + c.
    gap2 = two_clusters.hovering_scale(1.0, 1, 3)
    out = ff.boundary_at_minus_one(1.0, 5, 0.4, act, 1, 3, "softmax", 1.3)
    assert out["drift"] == pytest.approx(4 * (1.3**2 * gap2 / 2 + 0.8 * energy), rel=1e-12)
    assert ff.coefficients(-1.0, 1.0, 5, 0.4, act, 1, 3, "softmax", 1.3)[0] == pytest.approx(
        out["drift"], rel=1e-10)


def test_unbalanced_split_is_an_entrance_even_for_odd_activations():
    out = ff.boundary_at_minus_one(2.0, 4, 0.5, "erf", 1, 2)
    assert out["kind"] == "entrance" and math.isnan(out["exponent"])
    assert ff.antipodal_probability(2.0, 4, 0.5, "erf", m1=1, m2=2) == 0.0


# ---------------------------------------------------------------- critical beta
def test_critical_beta_at_r_zero_is_theorem_2():
    for d in range(3, 16):
        for act in ODD_ACTIVATIONS:
            for attention in ("softmax", "unnormalized"):
                got = ff.critical_beta(d, 0.0, act, attention)
                assert got == pytest.approx(theory.critical_beta(d), abs=1e-10)
    # d = 2: -1 attracts at every beta; both return 0.0 by the same convention (issue 29).
    assert ff.critical_beta(2, 0.0, "erf") == theory.critical_beta(2) == 0.0
    assert ff.attracts_at_every_beta(2, 0.0, "erf")


SPEC_ERF = {  # SPEC section 8, softmax, sigma = 1
    4: {0.0: 0.6585, 0.1: 0.6228, 0.5: 0.4755, 1.0: 0.2469, 4.0: None},
    6: {0.0: 1.0317, 0.1: 1.0121, 0.5: 0.9370, 1.0: 0.8493, 4.0: 0.3419},
    10: {0.0: 1.3843, 0.1: 1.3788, 0.5: 1.3572, 1.0: 1.3312, 4.0: 1.1923},
}


def test_critical_beta_reproduces_the_spec_erf_numbers():
    for d, row in SPEC_ERF.items():
        for r, want in row.items():
            got = ff.critical_beta(d, r, "erf")
            if want is None:
                assert got == 0.0 and ff.attracts_at_every_beta(d, r, "erf")
                assert ff.boundary_at_minus_one(0.0, d, r, "erf")["attracting"]
            else:
                assert abs(got - want) <= 1e-4, (d, r, got)


@pytest.mark.parametrize("act", ODD_ACTIVATIONS)
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_critical_beta_is_the_root_of_the_exponent(act, attention):
    for d, r in ((4, 0.2), (6, 1.0), (10, 2.5)):
        beta_c = ff.critical_beta(d, r, act, attention)
        if not 0 < beta_c < math.inf:
            continue
        def lam(b):
            return ff.boundary_at_minus_one(b, d, r, act, attention=attention)["exponent"]

        assert abs(lam(beta_c)) < 1e-10
        assert lam(beta_c + 0.01) < 0 < lam(beta_c - 0.01)


def test_critical_beta_edge_cases():
    assert ff.critical_beta(4, 0.5, "identity") == 0.0  # lambda(0) = (d-3) - 2r = 0
    assert ff.critical_beta(4, 1.0, "identity") == 0.0  # attracts at every beta (issue 29)
    assert ff.attracts_at_every_beta(4, 1.0, "identity")
    # erf at d = 20 has c > 0: a strong block keeps softmax pairs from ever attracting.
    assert ff.critical_beta(20, 30.0, "erf") == math.inf
    assert 0 < ff.critical_beta(20, 30.0, "erf", "unnormalized") < math.inf


# ------------------------------------------------------- long-time probability
@pytest.mark.parametrize("beta", [0.8, 2.5])
@pytest.mark.parametrize("d", [3, 4, 7])
def test_antipodal_probability_at_r_zero_is_the_theory(beta, d):
    z0 = np.array([-0.999999, -0.5, 0.0, 0.7, 0.999])
    np.testing.assert_allclose(ff.antipodal_probability(beta, d, 0.0, "tanh"),
                               theory.antipodal_probability(beta, d), rtol=0, atol=1e-8)
    np.testing.assert_allclose(ff.antipodal_probability(beta, d, 0.0, "erf", z0=z0),
                               theory.antipodal_probability(beta, d, z0=z0), rtol=0, atol=1e-8)


def test_antipodal_probability_near_the_threshold():
    beta_c = theory.critical_beta(5)
    for eps in (1e-3, 0.1):
        assert ff.antipodal_probability(beta_c + eps, 5, 0.0, "identity") == pytest.approx(
            theory.antipodal_probability(beta_c + eps, 5), abs=1e-9)
    beta_c = ff.critical_beta(5, 0.5, "erf")
    assert ff.antipodal_probability(beta_c - 1e-3, 5, 0.5, "erf") == 0.0
    assert 0 < ff.antipodal_probability(beta_c + 1e-3, 5, 0.5, "erf") < 1e-3


@pytest.mark.parametrize("act", ["erf", "tanh", "identity"])
def test_antipodal_probability_against_a_direct_integration(act):
    """The scale density in x = atanh z from the plain coefficients, by scipy's Simpson rules.

    A truncated domain [-16, 10] (the density there is below 1e-6 and 1e-10 of its peak),
    no tail model, no v-forms: an independent route to the same numbers.
    """
    beta, d, r = 2.0, 4, 0.5
    a = 0.5 * (d - 1)
    x = np.linspace(-16.0, 10.0, 2_601)
    z = np.tanh(x)
    mu, s2 = ff.coefficients(z, beta, d, r, act)
    g = 2 * mu * (1 - z * z) / s2 + 2 * z
    log_s = -integrate.cumulative_simpson(g, x=x, initial=0.0)
    s = np.exp(log_s - log_s.max())
    G = special.betainc(a, a, special.expit(2 * x))
    total = integrate.simpson(s, x=x)
    assert ff.antipodal_probability(beta, d, r, act) == pytest.approx(
        integrate.simpson(s * G, x=x) / total, abs=2e-6)
    above = x >= 0
    assert ff.antipodal_probability(beta, d, r, act, z0=0.0) == pytest.approx(
        integrate.simpson(s[above], x=x[above]) / total, abs=2e-6)


def test_antipodal_probability_special_cases():
    z0 = np.array([-1.0, -0.3, 1.0])
    assert ff.antipodal_probability(2.0, 4, 0.5, "relu") == 0.0
    np.testing.assert_array_equal(ff.antipodal_probability(2.0, 4, 0.5, "gelu", z0=z0), 0.0)
    below = ff.antipodal_probability(0.3, 4, 0.1, "erf", z0=z0)  # beta < beta_c: fixed, repelling
    np.testing.assert_array_equal(below, [1.0, 0.0, 0.0])
    above = ff.antipodal_probability(2.0, 4, 0.5, "erf", z0=z0)
    assert above[0] == 1.0 and above[2] == 0.0 and 0 < above[1] < 1
    # The block changes the answer; odd noise helps antipodal pairs at d = 4.
    assert ff.antipodal_probability(2.0, 4, 0.5, "erf") > theory.antipodal_probability(2.0, 4)


# -------------------------------------------------------------- finite time
def test_antipodal_at_r_zero_is_the_two_cluster_persistence():
    t = np.array([1.0, 5.0, 20.0])
    got, err = ff.antipodal_at(t, 2.0, 4, 0.0, "erf", z0=np.array([0.0, -0.5]))
    ref, _ = two_clusters.antipodal_persistence(t, np.array([1.0, 0.5]), 2.0, 4, 1, 1)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9)
    assert np.all(err < 1e-3)


@pytest.mark.parametrize("act", ["erf", "identity"])
def test_antipodal_at_large_time_is_the_long_time_probability(act):
    value, err = ff.antipodal_at(60.0, 2.0, 4, 0.5, act, z0=0.0)
    assert err < 1e-3
    assert value == pytest.approx(ff.antipodal_probability(2.0, 4, 0.5, act, z0=0.0), abs=1e-3)
    value, err = ff.antipodal_at(60.0, 2.0, 4, 0.5, act)
    assert err < 1e-3
    assert value == pytest.approx(ff.antipodal_probability(2.0, 4, 0.5, act), abs=1e-3)


def test_relu_pairs_hover_and_never_settle_antipodal():
    """SPEC: with ReLU (r = 0.5, d = 4, beta = 2) no pair is within 1e-3 of -1 at T = 5."""
    t = np.array([1.0, 5.0, 20.0, 60.0])
    relu, err = ff.antipodal_at(t, 2.0, 4, 0.5, "relu", z0=np.array([0.0]))
    plain, _ = ff.antipodal_at(t, 2.0, 4, 0.0, "relu", z0=np.array([0.0]))
    assert np.all(err < 1e-4)
    assert np.all(relu[:, 0] < 1e-3)
    assert np.all(plain[1:, 0] > 0.15)  # without the block a quarter of the pairs settle
    assert np.all(np.diff(relu[1:, 0]) <= 0)  # and with it, those near -1 leave in the end
    # A weak block: the pair hovers at 1 + Z ~ mu(-1)/|lambda| ~ tol for a while, then leaves.
    t = np.array([5.0, 200.0])
    weak, err = ff.antipodal_at(t, 2.0, 4, 1e-3, "relu", z0=np.array([0.0]))
    assert np.all(err < 1e-3)
    assert 0.02 < weak[0, 0] < plain[1, 0] - 0.05 and weak[1, 0] < 0.01


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("call, name", [
    (lambda: ff.coefficients(0.0, 1.0, 4, -0.1, "erf"), "r"),
    (lambda: ff.coefficients(0.0, 1.0, 4, 0.1, "swish"), "activation"),
    (lambda: ff.coefficients(0.0, 1.0, 1, 0.1, "erf"), "d"),
    (lambda: ff.coefficients(1.5, 1.0, 4, 0.1, "erf"), "z"),
    (lambda: ff.coefficients(0.0, -1.0, 4, 0.1, "erf"), "beta"),
    (lambda: ff.coefficients(0.0, 1.0, 4, 0.1, "erf", m1=0), "m1"),
    (lambda: ff.coefficients(0.0, 1.0, 4, 0.1, "erf", attention="linear"), "attention"),
    (lambda: ff.coefficients(0.0, 1.0, 4, 0.1, "erf", sigma=0.0), "sigma"),
    (lambda: ff.kernel(0.5, "sigmoid"), "activation"),
    (lambda: ff.kernel(-1.1, "relu"), "z"),
    (lambda: ff.kernel_quadrature(0.5, "tanh", order=1), "order"),
    (lambda: ff.critical_beta(4, 0.5, "relu"), "activation"),
    (lambda: ff.critical_beta(1, 0.5, "erf"), "d"),
    (lambda: ff.critical_beta(4, -1.0, "erf"), "r"),
    (lambda: ff.boundary_at_minus_one(1.0, 4, -1.0, "erf"), "r"),
    (lambda: ff.antipodal_probability(1.0, 4, 0.5, "erf", z0=2.0), "z0"),
    (lambda: ff.antipodal_probability(1.0, 4, -0.5, "erf"), "r"),
    (lambda: ff.antipodal_at(0.0, 1.0, 4, 0.5, "erf"), "t"),
    (lambda: ff.antipodal_at(1.0, 1.0, 4, 0.5, "erf", tol=0.0), "tol"),
    (lambda: ff.antipodal_at(1.0, 1.0, 4, 0.5, "erf", z0=-1.0), "z0"),
    (lambda: ff.even_part_energy("softplus"), "activation"),
])
def test_bad_arguments_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        call()
