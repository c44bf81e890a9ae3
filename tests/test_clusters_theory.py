"""Theory of two-cluster configurations (``stochastic_transformers.two_clusters``).

Every formula is checked against an independent form: the coefficients against
``theory.two_cluster_coefficients`` and their limits at -1, the boundary classes against
Theorem 2, the Kolmogorov persistence against the two-token exit probability and against
the weighted chain (fixed seed; the Monte Carlo check's false-alarm rate is below 1e-3).
"""

import math

import numpy as np
import pytest

from stochastic_transformers import simulate, theory
from stochastic_transformers import two_clusters as clusters
from stochastic_transformers import ModelConfig, RunConfig

SPLITS = [(1, 1), (1, 2), (1, 3), (2, 3), (3, 5)]


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("m1, m2", SPLITS)
def test_antipodal_coefficients_are_the_two_cluster_coefficients(m1, m2, attention):
    z = np.linspace(-0.99, 0.99, 23)
    for beta in (0.0, 1.5, 4.0):
        mu, s2 = theory.two_cluster_coefficients(z, beta, 4, m1, m2, attention=attention)
        mu_v, s2_v = clusters.antipodal_coefficients(1 + z, beta, 4, m1, m2, attention=attention)
        scale = max(1.0, float(np.max(np.abs(mu))))
        np.testing.assert_allclose(mu_v, mu, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(s2_v, s2, rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("m1, m2", [(1, 2), (1, 3), (2, 3)])
def test_coefficients_at_minus_one_are_a_squared_bessel_process(m1, m2, attention):
    """mu(-1) = (d-1) sigma^2 gap^2 / 2 and s^2 ~ 2 sigma^2 gap^2 v, to full precision at v = 1e-30."""
    for beta, d, sigma in ((1.0, 4, 1.0), (6.0, 5, 0.7)):
        gap2 = clusters.hovering_scale(beta, m1, m2, attention=attention)
        mu, s2 = clusters.antipodal_coefficients(1e-30, beta, d, m1, m2, attention=attention,
                                                 sigma=sigma)
        np.testing.assert_allclose(mu, 0.5 * (d - 1) * sigma**2 * gap2, rtol=1e-10)
        np.testing.assert_allclose(s2 / 1e-30, 2 * sigma**2 * gap2, rtol=1e-10)


def test_hovering_scale_closed_forms():
    for m1, m2 in ((1, 2), (1, 3), (2, 3), (3, 1)):
        n = m1 + m2
        for beta in (0.5, 2.0):
            np.testing.assert_allclose(
                clusters.hovering_scale(beta, m1, m2, attention="unnormalized"),
                (2 * (m1 - m2) * math.cosh(beta) / n) ** 2, rtol=1e-12)
        approx = (2 * math.exp(-20.0) * (m1 / m2 - m2 / m1)) ** 2  # softmax, large beta
        np.testing.assert_allclose(clusters.hovering_scale(10.0, m1, m2), approx, rtol=1e-7)
        assert clusters.hovering_scale(3.0, m1, m1) == 0.0


@pytest.mark.parametrize("d", [3, 4, 6, 9])
def test_balanced_splits_obey_theorem_2(d):
    """-1 attracts a balanced split iff d - 2 < cosh(2 beta); +1 attracts every split."""
    beta_c = theory.critical_beta(d)
    for m in (1, 2, 3):
        for attention in ("softmax", "unnormalized"):
            for beta in (0.3 * beta_c, 0.9 * beta_c, 1.1 * beta_c, beta_c + 1.0):
                out = clusters.boundaries(beta, d, m, m, attention=attention)
                assert out["antipodal"] == ("attracting" if beta > beta_c else "repelling"), (m, beta)
                assert out["single"] == "attracting"
    for m1, m2 in ((1, 2), (2, 5)):
        out = clusters.boundaries(2.0, d, m1, m2)
        assert out["antipodal"].startswith("entrance") and out["bessel_dimension"] == d - 1
        assert out["single"] == "attracting" and not out["balanced"]
    assert clusters.boundaries(2.0, 2, 1, 2)["antipodal"].startswith("reflecting")


def test_hovering_depth_is_proportional_to_the_scale_as_it_vanishes():
    ratios = [clusters.hovering_depth(beta, 4, 1, 2)[0] / clusters.hovering_scale(beta, 1, 2)
              for beta in (5.0, 6.0, 7.0)]
    np.testing.assert_allclose(ratios, ratios[-1], rtol=0.02)
    assert 0.1 < ratios[-1] < 10
    with pytest.raises(ValueError, match="balanced"):
        clusters.hovering_depth(3.0, 4, 2, 2)


def test_persistence_of_a_balanced_split_tends_to_theorem_2():
    """From z0 = 0 the long-time P(1 + Z_t <= tol) is the two-token exit probability."""
    for beta in (1.5, 3.0):
        p, err = clusters.antipodal_persistence(60.0, 1.0, beta, 4, 2, 2)
        assert err < 1e-3
        np.testing.assert_allclose(p, theory.antipodal_probability(beta, 4, z0=0.0), atol=3e-3)


def test_persistence_agrees_with_the_weighted_chain():
    """Softmax 1 vs 3, beta = 3, from 1 + Z0 = 2e-4: the chain at L = 400 against the PDE.

    4000 trajectories: a standard error of at most 0.008; the bound 4 SE + 0.01
    (discretisation at L = 400) has a false-alarm rate below 1e-4 per time.
    """
    times = np.array([1.0, 5.0, 20.0])
    pred, err = clusters.antipodal_persistence(times, np.array([2e-4]), 3.0, 4, 1, 3)
    ds = simulate(ModelConfig(d=4, beta=3.0),
                  RunConfig(n_tokens=4, n_traj=4000, L=400, T=20.0, split=(1, 3), z0=-1 + 2e-4,
                            times=times, seed=12))
    frac = (ds.one_plus_overlap_t.values <= 1e-3).mean(axis=0)
    se = np.sqrt(pred[:, 0] * (1 - pred[:, 0]) / 4000)
    assert np.all(np.abs(frac - pred[:, 0]) <= 4 * se + 0.01), (frac, pred[:, 0])
    assert np.all(err < 1e-3)


@pytest.mark.parametrize("kwargs, name", [
    (dict(m1=0), "m1"), (dict(beta=-1.0), "beta"), (dict(attention="x"), "attention"),
    (dict(d=1), "d"), (dict(tol=0.0), "tol"), (dict(one_plus_z0=0.0), "one_plus_z0"),
    (dict(t=-1.0), "t")])
def test_bad_arguments_name_the_parameter(kwargs, name):
    args = {**dict(t=1.0, one_plus_z0=1e-4, beta=2.0, d=4, m1=1, m2=2), **kwargs}
    with pytest.raises(ValueError, match=name):
        clusters.antipodal_persistence(**args)


def test_persistence_of_merged_interpolates_the_kolmogorov_solution():
    v = np.array([2e-4, 5e-3, 0.3])
    tau = np.array([[0.0, 1.0, 7.0], [0.0, 1.0, 7.0], [0.0, 1.0, 7.0]])
    got = clusters.persistence_of_merged(tau, v, 3.0, 4, 1, 3)
    ref, _ = clusters.antipodal_persistence(np.array([1.0, 7.0]), v, 3.0, 4, 1, 3)
    np.testing.assert_array_equal(got[:, 0], [1.0, 0.0, 0.0])  # the indicator at tau = 0
    np.testing.assert_allclose(got[:, 1:], ref.T, atol=5e-3)


def test_split_predictions_are_the_persistence_scale_and_median_depth():
    times = np.array([0.5, 2.0])
    pred, err, scale, depth = clusters.split_predictions(times, 1e-4, 3.0, 4, 1, 3, tol=1e-3)
    ref, ref_err = clusters.antipodal_persistence(times, np.array([1e-4]), 3.0, 4, 1, 3)
    np.testing.assert_array_equal(pred, ref[:, 0])
    np.testing.assert_array_equal(err, ref_err[:, 0])
    assert scale == clusters.hovering_scale(3.0, 1, 3)
    assert depth == clusters.hovering_depth(3.0, 4, 1, 3)[0]
    # a balanced split is two tokens: no hovering scale, no depth
    _, _, scale, depth = clusters.split_predictions(times, 1e-4, 3.0, 4, 2, 2)
    assert scale == 0.0 and math.isnan(depth)


def test_plus_one_exponent_error_is_small_and_counts_every_case():
    grid = {"d": (3, 7), "m1": (1, 4), "m2": (2,), "beta": (0.0, 3.0)}
    worst, cases = clusters.plus_one_exponent_error(grid)
    assert cases == 2 * 2 * 2 * 1 * 2
    assert 0.0 <= worst < 2e-5
    # one case by hand: the exponent at +1 is -(d - 1) a12(1), e^{2 beta} unnormalised
    got = clusters.boundaries(3.0, 7, 4, 2, attention="unnormalized")["single_exponent"]
    assert got == pytest.approx(-6 * math.exp(6.0), rel=2e-5)
