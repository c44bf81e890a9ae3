"""The random-attention model (fresh V, W, W' every layer and head) in ``simulate``.

Law tests are two-sample Kolmogorov-Smirnov tests with fixed seeds.  Each runs at level
ALPHA = 1e-4; there are 9 such comparisons of equal laws below, so the family-wise
false-alarm rate is below 1e-3 (and, seeds being fixed, a pass or a failure is reproducible).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from stochastic_transformers.random_attention import normals_per_layer, noise_clock
from stochastic_transformers import ModelConfig, RunConfig, configs_from_flat, simulate

ALPHA = 1e-4


def _offdiag(ds, i=0, j=1):
    return ds.gram.values[:, i, j]


def _numpy_one_layer(x, beta, n_heads, eta, n, seed, sigma=1.0, sigma_qk=1.0):
    """One layer of the model from the definition, with full matrices (independent code)."""
    rng = np.random.default_rng(seed)
    N, d = x.shape
    u = np.zeros((n, N, d))
    for _ in range(n_heads):
        w = sigma_qk * rng.standard_normal((n, d, d))
        wp = sigma_qk * rng.standard_normal((n, d, d))
        v = sigma * rng.standard_normal((n, d, d))
        a = np.einsum("mab,mcb->mac", w, wp)                   # A = W W'^T
        s = beta * np.einsum("mab,ib,ja->mij", a, x, x)         # <A x_i, x_j>
        s -= s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        m = np.einsum("mij,ja->mia", p, x)
        u += np.einsum("mab,mib->mia", v, m)
    y = x[None] + (eta / n_heads) * u
    return y / np.linalg.norm(y, axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def start():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 4))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("method", ["literal", "subspace"])
def test_one_layer_matches_the_definition(start, method):
    """One large step from fixed tokens: both methods against an independent numpy draw."""
    n = 40_000
    ds = simulate(ModelConfig(d=4, beta=1.5, kind="random_attention", n_heads=2, eta=0.7),
                  RunConfig(n_tokens=3, n_traj=n, L=1, T=1, x0=start, method=method, seed=5))
    y = _numpy_one_layer(start, 1.5, 2, 0.7, n, seed=6)
    ref = np.einsum("mia,mja->mij", y, y)
    for i, j in ((0, 1), (1, 2)):
        assert stats.ks_2samp(ds.gram.values[:, i, j], ref[:, i, j]).pvalue > ALPHA


@pytest.mark.parametrize("n_tokens,d,n_heads,beta", [(5, 4, 2, 1.0), (3, 8, 3, 2.0), (2, 6, 1, 4.0)])
def test_subspace_equals_literal_in_law(n_tokens, d, n_heads, beta):
    """Many layers from uniform tokens (N > d, N < d, two tokens): the same law of overlaps."""
    kw = dict(n_traj=6000, L=16, T=1, model="random_attention", n_heads=n_heads, seed=3)
    lit = simulate(*configs_from_flat(n_tokens=n_tokens, d=d, beta=beta, method="literal", **kw))
    sub = simulate(*configs_from_flat(n_tokens=n_tokens, d=d, beta=beta, method="subspace",
                                      **{**kw, "seed": 4}))
    assert stats.ks_2samp(_offdiag(lit), _offdiag(sub)).pvalue > ALPHA


def test_beta_zero_is_the_main_papers_model():
    """At beta = 0 attention is uniform whatever A: one head is the main paper's model."""
    kw = dict(n_traj=8000, L=20, T=1)
    ra = simulate(*configs_from_flat(n_tokens=3, d=5, beta=0.0, model="random_attention", seed=1,
                                     **kw))
    main = simulate(*configs_from_flat(n_tokens=3, d=5, beta=0.0, model="stochastic",
                                       method="literal", seed=2, **kw))
    assert stats.ks_2samp(_offdiag(ra), _offdiag(main)).pvalue > ALPHA


def test_heads_at_beta_zero_average_their_noise():
    """At beta = 0, H heads give (eta/H) sum_h V_h xbar: one head with sigma / sqrt(H)."""
    kw = dict(n_traj=8000, L=20, T=1, model="random_attention")
    many = simulate(*configs_from_flat(n_tokens=3, d=5, beta=0.0, n_heads=4, seed=1, **kw))
    one = simulate(*configs_from_flat(n_tokens=3, d=5, beta=0.0, n_heads=1, sigma=0.5, seed=2,
                                      **kw))
    assert stats.ks_2samp(_offdiag(many), _offdiag(one)).pvalue > ALPHA
    assert many.attrs["noise_clock"] == pytest.approx(one.attrs["noise_clock"])


def test_random_keys_change_the_law():
    """A check that can fail: at beta = 4 the random-K,Q model is not the main paper's."""
    kw = dict(n_traj=4000, L=20, T=2)
    ra = simulate(*configs_from_flat(n_tokens=2, d=4, beta=4.0, model="random_attention", seed=1,
                                     **kw))
    main = simulate(*configs_from_flat(n_tokens=2, d=4, beta=4.0, model="stochastic",
                                       method="literal", seed=2, **kw))
    assert stats.ks_2samp(_offdiag(ra), _offdiag(main)).pvalue < 1e-10


def test_bits_do_not_depend_on_threads_or_slicing():
    kw = dict(n_traj=30, L=8, T=1, model="random_attention", n_heads=3, seed=9)
    a = simulate(*configs_from_flat(n_tokens=4, d=6, beta=2.0, n_threads=1, **kw))
    b = simulate(*configs_from_flat(n_tokens=4, d=6, beta=2.0, n_threads=2, **kw))
    np.testing.assert_array_equal(a.tokens.values, b.tokens.values)
    part = simulate(*configs_from_flat(n_tokens=4, d=6, beta=2.0, n_threads=2,
                                       first_trajectory=10, **{**kw, "n_traj": 20}))
    np.testing.assert_array_equal(a.tokens.values[10:], part.tokens.values)


def test_records_and_attributes():
    ds = simulate(ModelConfig(d=4, beta=1.0, kind="random_attention", n_heads=2, sigma=0.5,
                              eta=0.1),
                  RunConfig(n_tokens=3, n_traj=5, L=10, T=2, times=[0.0, 1.0, 2.0], seed=0))
    assert ds.attrs["method"] == "subspace"
    assert ds.attrs["noise_clock"] == pytest.approx(20 * 0.1**2 * 0.25 / 2)
    np.testing.assert_allclose(ds.gram_t.values[:, -1], ds.gram.values, atol=1e-12)
    np.testing.assert_allclose(np.diagonal(ds.gram_t.values, axis1=2, axis2=3), 1.0, atol=1e-12)
    default = simulate(ModelConfig(d=4, beta=1.0, kind="random_attention"),
                       RunConfig(n_tokens=3, n_traj=2, L=25, T=1))
    assert default.attrs["eta"] == pytest.approx(0.2)
    assert noise_clock(25, 0.2) == pytest.approx(1.0)


def test_fewer_random_numbers():
    assert normals_per_layer(8, 16, 4, "literal") == 3072
    assert normals_per_layer(8, 16, 4, "subspace") == 4 * (36 + 64) + 16 * 8


@pytest.mark.parametrize("kwargs,match", [
    (dict(n_heads=0), "n_heads"),
    (dict(sigma_qk=-1.0), "sigma_qk"),
    (dict(qk_law="uniform"), "qk_law"),
    (dict(mean_v=np.ones((3, 3))), "mean_v"),
    (dict(mean_qk=float("nan")), "mean_qk"),
    (dict(values="rademacher", method="subspace"), "Gaussian fluctuations"),
    (dict(eta=-1.0), "eta"),
    (dict(attention="unnormalized"), "softmax"),
    (dict(values="uniform"), "gaussian"),
    (dict(B=np.eye(4)), "B and split"),
    (dict(stop_level=1e-6), "stop_level"),
    (dict(method="reduced"), "subspace"),
    (dict(epsilon=0.1), "epsilon"),
])
def test_bad_combinations_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate(*configs_from_flat(n_tokens=3, d=4, beta=1.0, n_traj=2, L=4, T=1,
                                    model="random_attention", **kwargs))


@pytest.mark.parametrize("kwargs", [dict(n_heads=2), dict(sigma_qk=0.5), dict(eta=0.1),
                                    dict(mean_v=0.5), dict(qk_law="rademacher")])
def test_random_attention_knobs_belong_to_that_model(kwargs):
    with pytest.raises(ValueError, match="random_attention"):
        simulate(*configs_from_flat(n_tokens=3, d=4, beta=1.0, n_traj=2, L=4, T=1, **kwargs))
    with pytest.raises(ValueError, match="subspace"):
        simulate(ModelConfig(d=4, beta=1.0),
                 RunConfig(n_tokens=3, n_traj=2, L=4, T=1, method="subspace"))


def test_two_token_start_at_given_overlap():
    ds = simulate(ModelConfig(d=5, beta=1.0, kind="random_attention"),
                  RunConfig(n_tokens=2, n_traj=50, L=4, T=1, z0=-0.3, times=[0.0], seed=1))
    np.testing.assert_allclose(ds.gram_t.values[:, 0, 0, 1], -0.3, atol=1e-12)
    assert math.isfinite(float(ds.gram.values.sum()))
