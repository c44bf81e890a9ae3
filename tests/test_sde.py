"""Tests of the limit-SDE integrators and of the Kolmogorov reference (stochastic_transformers.sde).

Statistical tests use fixed seeds, so they are deterministic; the bands are
4 standard errors (a false-alarm rate of about 6e-5 per comparison for a correct
integrator with fresh seeds) plus a stated allowance for the O(dt) Euler bias,
measured at 4-10x the sample sizes used here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from stochastic_transformers import sde
from stochastic_transformers import theory as th


def _pairs(z0, n, d, seed):
    """n randomly rotated pairs of unit vectors with overlap z0, shape (n, 2, d)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, 2, d))
    X[:, 0, 0] = 1.0
    X[:, 1, 0] = z0
    X[:, 1, 1] = math.sqrt(1.0 - z0 * z0)
    Q, _ = np.linalg.qr(rng.standard_normal((n, d, d)))
    return np.einsum("pab,pnb->pna", Q, X)


# ------------------------------------------------------- Kolmogorov reference
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_kolmogorov_angle_is_a_martingale_in_d2(attention):
    # d = 2: the scale function is the angle itself, so E[arccos Z_t] = arccos z0 exactly.
    z0 = np.array([-0.6, 0.1, 0.8])
    v, e = sde.overlap_expectation(np.arccos, z0, np.array([0.5, 1.0]), 1.5, 2, attention)
    err = np.abs(v - np.arccos(z0)[None, :])
    assert np.all(err < 1e-7)
    assert np.all(err <= 10 * e + 1e-10)  # the estimate is honest


def test_kolmogorov_scale_function_is_a_martingale():
    # Both ends attract, so P(antipodal | z) is a bounded martingale: E[P(Z_t)] = P(z0).
    beta, d = 1.2, 4
    p = lambda z: th.antipodal_probability(beta, d, z0=np.clip(z, -1.0, 1.0))  # noqa: E731
    z0 = np.array([-0.5, 0.3])
    v, e = sde.overlap_expectation(p, z0, 2.0, beta, d, "softmax")
    err = np.abs(v[0] - p(z0))
    assert np.all(err < 1e-7)
    assert np.all(err <= 10 * e[0] + 1e-10)


def test_kolmogorov_deterministic_hybrid_closed_form():
    # eps = 0, beta = 0: dz/dt = 1 - z^2, so z(t) = tanh(atanh z0 + t).
    z0 = np.array([-0.7, 0.0, 0.4])
    v, e = sde.overlap_expectation(lambda z: z, z0, np.array([0.3, 2.0]), 0.0, 3, "unnormalized",
                                   model="hybrid", epsilon=0.0)
    exact = np.tanh(np.arctanh(z0)[None, :] + np.array([0.3, 2.0])[:, None])
    assert np.allclose(v, exact, atol=1e-10)
    # the Euler scheme in x is exact here (constant drift 1)
    z = sde.simulate_overlap_sde(0.0, 3, z0=z0, n_paths=3, T=2.0, dt=0.1, attention="unnormalized",
                                 model="hybrid", epsilon=0.0)
    assert np.allclose(z[-1], exact[-1], atol=1e-12)


@pytest.mark.parametrize(
    "beta,d,attention,z0",
    [(1.0, 3, "softmax", 0.2), (0.5, 4, "unnormalized", -0.3)],
)
def test_monte_carlo_agrees_with_kolmogorov(beta, d, attention, z0):
    ref, err = sde.overlap_expectation(lambda z: z, z0, 1.0, beta, d, attention)
    ref2, _ = sde.overlap_expectation(lambda z: z * z, z0, 1.0, beta, d, attention)
    assert err < 1e-6
    Z = sde.simulate_overlap_sde(beta, d, z0=z0, n_paths=40_000, T=1.0, dt=0.01, attention=attention, seed=11)[-1]
    # With 2e5 paths, |mean - ref| stayed below 0.0026 (about 1.5 standard errors) for
    # dt = 0.02, 0.01, 0.005, for both functions: Euler bias not resolved.  Allowance 0.004.
    for sample, want in ((Z, ref), (Z * Z, ref2)):
        se = sample.std() / math.sqrt(sample.size)
        assert abs(sample.mean() - want) < 4 * se + 0.004


def test_long_time_antipodal_fraction_matches_theory():
    beta, d = 1.0, 3
    p = th.antipodal_probability(beta, d)
    Z = sde.simulate_overlap_sde(beta, d, z0=None, n_paths=20_000, T=10.0, dt=0.01,
                                 attention="unnormalized", seed=5)[-1]
    frac = np.mean(Z < 0.0)
    # Binomial 4-sigma band, plus 0.005 for Euler bias and the ~0.3% of paths that
    # have not yet settled at T = 10 (observed deviations: 0.0004 at dt = 0.01 and
    # 0.0023 at dt = 0.005, other seeds, same size).
    assert abs(frac - p) < 4 * math.sqrt(p * (1 - p) / Z.size) + 0.005
    assert np.mean(np.abs(Z) > 0.999) > 0.99


# ------------------------------------------------------------------ token SDE
def test_token_sde_two_tokens_match_the_overlap_diffusion():
    # Theorem 1's token SDE, projected Euler: its overlap follows Lemma 4's diffusion.
    X0 = _pairs(0.2, 10_000, 3, seed=1)
    G = sde.simulate_token_sde(X0, 1.0, T=1.0, dt=0.01, attention="softmax", seed=2)
    Z = G[-1, :, 0, 1]
    ref, _ = sde.overlap_expectation(lambda z: z, 0.2, 1.0, 1.0, 3, "softmax")
    # In five runs of 4e4-1e5 paths (dt 0.005-0.02) the mean sat within 0.0075 of the
    # reference, each within 2.2 standard errors, pooled -0.0017 +- 0.0011: no Euler
    # bias resolved.  Allowance 0.005 on top of 4 standard errors.
    assert abs(Z.mean() - ref) < 4 * Z.std() / math.sqrt(Z.size) + 0.005


@pytest.mark.parametrize("attention", ["unnormalized", "softmax"])
def test_hybrid_token_sde_matches_hybrid_overlap(attention):
    # Lemma 3's token SDE against Proposition 1's overlap SDE (USA) and our SA
    # analogue, and both against the Kolmogorov reference.
    beta, eps, z0 = 1.0, 1.3, 0.2
    ref, _ = sde.overlap_expectation(lambda z: z, z0, 1.0, beta, 3, attention, model="hybrid", epsilon=eps)
    G = sde.simulate_token_sde(_pairs(z0, 10_000, 3, seed=3), beta, T=1.0, dt=0.005, attention=attention,
                               model="hybrid", epsilon=eps, seed=4)
    Zt = G[-1, :, 0, 1]
    Zo = sde.simulate_overlap_sde(beta, 3, z0=z0, n_paths=10_000, T=1.0, dt=0.005, attention=attention,
                                  model="hybrid", epsilon=eps, seed=6)[-1]
    # At dt = 0.005 no Euler bias was resolved: |mean - ref| < 0.001 with standard
    # errors 0.001-0.003 (4e4 token paths, 1e5 overlap paths).  Allowance 0.004.
    for Z in (Zt, Zo):
        assert abs(Z.mean() - ref) < 4 * Z.std() / math.sqrt(Z.size) + 0.004


def test_hybrid_usa_outcome_switches_at_eps_c():
    beta = 1.0
    ec = th.critical_epsilon(beta)
    below = sde.simulate_overlap_sde(beta, 3, z0=None, n_paths=2000, T=30.0, dt=0.01, attention="unnormalized",
                                     model="hybrid", epsilon=0.7 * ec, seed=7)[-1]
    above = sde.simulate_overlap_sde(beta, 3, z0=None, n_paths=2000, T=30.0, dt=0.01, attention="unnormalized",
                                     model="hybrid", epsilon=1.4 * ec, seed=8)[-1]
    assert np.mean(below > 1 - 1e-3) > 0.99
    assert np.mean(above < -1 + 1e-3) > 0.99


def test_token_sde_invariants_and_times():
    rng = np.random.default_rng(0)
    X0 = rng.standard_normal((50, 4, 5))
    X0 /= np.linalg.norm(X0, axis=2, keepdims=True)
    times = [0.0, 0.25, 0.3]
    for model, eps in (("stochastic", 0.0), ("hybrid", 0.9)):
        G = sde.simulate_token_sde(X0, 2.0, T=0.3, dt=0.1, attention="unnormalized", model=model,
                                   epsilon=eps, seed=3, times=times)
        assert G.shape == (3, 50, 4, 4)
        assert np.allclose(G[0], np.einsum("pia,pja->pij", X0, X0))
        assert np.allclose(np.diagonal(G, axis1=2, axis2=3), 1.0, atol=1e-12)
        assert np.allclose(G, np.swapaxes(G, 2, 3))
        G2 = sde.simulate_token_sde(X0, 2.0, T=0.3, dt=0.1, attention="unnormalized", model=model,
                                    epsilon=eps, seed=3, times=times)
        assert np.array_equal(G, G2)


def test_overlap_sde_poles_times_and_seeds():
    Z = sde.simulate_overlap_sde(2.0, 5, z0=np.array([1.0, -1.0, 0.0]), n_paths=3, T=1.0, dt=0.01, seed=1,
                                 times=[0.0, 0.5, 1.0])
    assert Z.shape == (3, 3)
    assert np.all(Z[:, 0] == 1.0) and np.all(Z[:, 1] == -1.0) and Z[0, 2] == 0.0
    a = sde.simulate_overlap_sde(1.0, 4, z0=0.3, n_paths=10, T=0.37, dt=0.1, seed=9)
    b = sde.simulate_overlap_sde(1.0, 4, z0=0.3, n_paths=10, T=0.37, dt=0.1, seed=9)
    assert np.array_equal(a, b) and np.all(np.abs(a) <= 1.0)
    steps = sde._time_grid(1.0, 0.25, [0.5, 0.6, 1.0])[1]
    assert np.allclose(steps, [0.25, 0.25, 0.1, 0.2, 0.2])


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: sde.simulate_overlap_sde(-1.0, 3, z0=0.0, n_paths=2, T=1.0, dt=0.1), "beta"),
        (lambda: sde.simulate_overlap_sde(1.0, 1, z0=0.0, n_paths=2, T=1.0, dt=0.1), "d"),
        (lambda: sde.simulate_overlap_sde(1.0, 3, z0=0.0, n_paths=0, T=1.0, dt=0.1), "n_paths"),
        (lambda: sde.simulate_overlap_sde(1.0, 3, z0=0.0, n_paths=2, T=1.0, dt=0.0), "dt"),
        (lambda: sde.simulate_overlap_sde(1.0, 3, z0=0.0, n_paths=2, T=-1.0, dt=0.1), "T"),
        (lambda: sde.simulate_overlap_sde(1.0, 3, z0=1.5, n_paths=2, T=1.0, dt=0.1), "z0"),
        (lambda: sde.simulate_overlap_sde(1.0, 3, z0=0.0, n_paths=2, T=1.0, dt=0.1, times=[2.0]), "times"),
        (lambda: sde.simulate_overlap_sde(1.0, 3, z0=0.0, n_paths=2, T=1.0, dt=0.1, model="x"), "model"),
        (lambda: sde.simulate_overlap_sde(1.0, 3, z0=0.0, n_paths=2, T=1.0, dt=0.1, epsilon=-1), "epsilon"),
        (lambda: sde.overlap_expectation(lambda z: z, 0.0, 1.0, 1.0, 3, attention="relu"), "attention"),
        (lambda: sde.overlap_expectation(lambda z: z, 1.0, 1.0, 1.0, 3), "z0"),
        (lambda: sde.overlap_expectation(lambda z: z, 0.0, 0.0, 1.0, 3), "t"),
        (lambda: sde.overlap_expectation(lambda z: z, 0.0, 1.0, 1.0, 3, sigma=-2.0), "sigma"),
        (lambda: sde.overlap_expectation(None, 0.0, 1.0, 1.0, 3), "f"),
        (lambda: sde.simulate_token_sde(np.ones((2, 2, 3)), 1.0, T=1.0, dt=0.1), "X0"),
        (lambda: sde.simulate_token_sde(np.ones((2, 3)), 1.0, T=1.0, dt=0.1), "X0"),
        (lambda: sde.simulate_token_sde(np.full((2, 2, 3), np.nan), 1.0, T=1.0, dt=0.1), "X0"),
        (lambda: sde.simulate_overlap_sde(sde.INTEGRATOR_BETA_MAX + 1, 3, z0=0.0, n_paths=2, T=1.0,
                                          dt=0.1), "beta"),
        (lambda: sde.simulate_overlap_sde(1.0, 3, z0=[True, False], n_paths=2, T=1.0, dt=0.1), "z0"),
        (lambda: sde.simulate_overlap_sde(1.0, 3, z0=0.0, n_paths=2, T=1.0, dt=0.1,
                                          times=[0.5, np.nan]), "times"),
        (lambda: sde.overlap_expectation(lambda z: z, 0.0, 51.0, 1.0, 3), "t"),
        (lambda: sde.overlap_expectation(lambda z: z, [0.0, -1.0], 1.0, 1.0, 3), "z0"),
    ],
)
def test_invalid_inputs_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must"):
        call()


def test_antipodal_at_is_the_limit_at_finite_and_long_times():
    """P(Z_t <= -1 + tol) from uniform tokens: the scheme of homogenized.antipodal_by with the
    main paper's coefficients, bit for bit; falling towards zero where -1 repels (beta = 0
    at d = 4); and, long after the start, the T = infinity probability."""
    from stochastic_transformers import theory
    from stochastic_transformers.random_attention import homogenized

    ts = np.array([30.0, 10.0])
    p, err = sde.antipodal_at(ts, 0.75, 4, tol=1e-3, h=0.1)
    q, q_err = homogenized.antipodal_by(ts, 0.75, 4, model="stochastic", tol=1e-3, h=0.1)
    assert np.array_equal(p, q) and np.array_equal(err, q_err)
    p0, _ = sde.antipodal_at([10.0, 50.0], 0.0, 4, h=0.1)
    assert p0[1] < 1e-5 and p0[1] < p0[0] / 100
    p_long, err_long = sde.antipodal_at([400.0], 2.0, 4, tol=1e-3)
    assert p_long[0] == pytest.approx(float(theory.antipodal_probability(2.0, 4)), abs=2e-3)
    assert err_long[0] < 1e-3
    with pytest.raises(ValueError, match="beta"):
        sde.antipodal_at(1.0, sde.ANTIPODAL_BETA_MAX + 1, 4)
    with pytest.raises(ValueError, match="tol"):
        sde.antipodal_at(1.0, 1.0, 4, tol=0.0)


def test_uniform_overlap_density_is_the_law_of_two_uniform_points():
    # (1 + Z) / 2 ~ Beta((d-1)/2, (d-1)/2): the density in x = atanh z integrates to 1 and
    # its mean of tanh^2 is E Z^2 = 1/d.
    x = np.linspace(-30.0, 30.0, 60001)
    for d in (2, 4, 7):
        w = sde.uniform_overlap_density(x, d)
        assert np.trapezoid(w, x) == pytest.approx(1.0, abs=1e-9)
        assert np.trapezoid(w * np.tanh(x) ** 2, x) == pytest.approx(1.0 / d, abs=1e-9)
