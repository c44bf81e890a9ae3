"""The feedforward block in the simulator: its fields, its literal map against a plain numpy
layer, its two-point chain against the literal map, the chain's precision at both poles.

Statistical comparisons are two-sample z-tests at |z| < 4.5 with fixed seeds: under the
null each has a false-alarm rate of 7e-6, about 2e-4 for the whole file.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from stochastic_transformers import ModelConfig, RunConfig, simulate
from stochastic_transformers.activations import ACTIVATIONS, ODD_ACTIVATIONS, evaluate

Z_MAX = 4.5


def _two_sample_z(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return (a.mean() - b.mean()) / se


@pytest.mark.parametrize("fields, name", [
    (dict(ff_strength=-0.1), "ff_strength"),
    (dict(ff_strength=1e300), "ff_strength"),
    (dict(ff_strength=0.5, ff_width=0), "ff_width"),
    (dict(ff_strength=0.5, ff_activation="sigmoid"), "ff_activation"),
    (dict(ff_strength=0.5, kind="hybrid", epsilon=0.1), "feedforward"),
])
def test_a_bad_feedforward_field_is_named(fields, name):
    with pytest.raises(ValueError, match=name):
        ModelConfig(d=4, beta=1.0, **fields)


def test_methods_and_stopping_that_do_not_carry_the_block_are_refused():
    model = ModelConfig(d=4, beta=1.0, ff_strength=0.5)
    for run in (RunConfig(n_tokens=3, n_traj=2, L=4, T=1, method="gaussian_dn"),
                RunConfig(n_tokens=3, n_traj=2, L=4, T=1, method="reduced"),
                RunConfig(n_tokens=2, n_traj=2, L=4, T=1, stop_level=1e-6)):
        with pytest.raises(ValueError, match="feedforward"):
            simulate(model, run)


def test_auto_picks_the_chain_for_two_points_and_the_literal_map_otherwise():
    model = ModelConfig(d=4, beta=1.0, ff_strength=0.5, ff_width=3)
    run = dict(n_traj=2, L=4, T=1)
    assert simulate(model, RunConfig(n_tokens=2, **run)).attrs["method"] == "overlap_chain"
    assert simulate(model, RunConfig(n_tokens=3, split=(2, 1), **run)).attrs["method"] \
        == "cluster_chain"
    assert simulate(model, RunConfig(n_tokens=3, **run)).attrs["method"] == "literal"
    ds = simulate(ModelConfig(d=4, beta=1.0, ff_strength=0.5, values="rademacher"),
                  RunConfig(n_tokens=2, **run))
    assert ds.attrs["method"] == "literal" and ds.attrs["ff_activation"] == "relu"


def _numpy_layer(x, beta, h, r, width, act, rng):
    """One layer of the block's model written plainly: softmax attention, B = I."""
    n_tok, d = x.shape
    logits = beta * x @ x.T
    w = np.exp(logits - logits.max(axis=1, keepdims=True))
    att = (w / w.sum(axis=1, keepdims=True)) @ x
    v = rng.standard_normal((d, d))
    w1 = rng.standard_normal((width, d))
    w2 = rng.standard_normal((d, width)) / math.sqrt(width)
    hidden = evaluate(act, x @ w1.T)                 # (N, m)
    y = x + h * (att @ v.T + math.sqrt(r) * hidden @ w2.T)
    return y / np.linalg.norm(y, axis=1, keepdims=True)


@pytest.mark.parametrize("act", ["relu", "erf"])
def test_one_literal_layer_has_the_law_of_a_plain_numpy_layer(act):
    rng = np.random.default_rng(11)
    x0 = rng.standard_normal((3, 3))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    beta, L, r, width, n = 1.2, 4, 0.7, 5, 20_000
    ds = simulate(ModelConfig(d=3, beta=beta, ff_strength=r, ff_width=width, ff_activation=act),
                  RunConfig(n_tokens=3, n_traj=n, L=L, T=1 / L, seed=2, x0=x0,
                            method="literal"))
    ref = np.stack([_numpy_layer(x0, beta, 1 / math.sqrt(L), r, width, act, rng)
                    for _ in range(n)])
    ref_gram = np.einsum("tia,tja->tij", ref, ref)
    for i, j in ((0, 1), (0, 2), (1, 2)):
        for power in (1, 2):
            z = _two_sample_z(ds.gram.values[:, i, j] ** power, ref_gram[:, i, j] ** power)
            assert abs(z) < Z_MAX, (i, j, power, z)


@pytest.mark.parametrize("act", ["relu", "gelu", "erf"])
@pytest.mark.parametrize("split", [None, (2, 1)])
def test_the_two_point_chain_has_the_law_of_the_literal_map(act, split):
    model = ModelConfig(d=4, beta=1.5, ff_strength=0.5, ff_width=4, ff_activation=act)
    n, L, T, z0 = 4000, 20, 1.0, 0.3
    chain_run = RunConfig(n_tokens=2 if split is None else sum(split), n_traj=n, L=L, T=T,
                          seed=5, z0=z0, split=split)
    chain = simulate(model, chain_run)
    # The literal map from the same two-point start (tokens of a point coincide).
    u, w = np.eye(4)[0], np.eye(4)[1]
    y1 = u
    y2 = z0 * u + math.sqrt(1 - z0 * z0) * w
    points = [y1] * (1 if split is None else split[0]) + [y2] * (1 if split is None else split[1])
    literal = simulate(model, RunConfig(n_tokens=len(points), n_traj=n, L=L, T=T, seed=6,
                                        x0=np.array(points), method="literal"))
    j = 1 if split is None else split[0]
    for power in (1, 2):
        z = _two_sample_z(chain.gram.values[:, 0, j] ** power,
                          literal.gram.values[:, 0, j] ** power)
        assert abs(z) < Z_MAX, (power, z)
    if split is not None:   # tokens of one point stay together in the literal map
        np.testing.assert_allclose(literal.gram.values[:, 0, 1], 1.0, atol=1e-12)


def _one_layer_ratio(act, size, pole):
    """1 - Z (pole +1) or 1 + Z (pole -1) after one chain layer, over its starting value."""
    model = ModelConfig(d=4, beta=1.5, ff_strength=0.5, ff_width=8, ff_activation=act)
    s, c = (size, math.sqrt(1 - size * size)) if pole == 1 else (math.sqrt(1 - size * size), size)
    x0 = np.array([[c, -s, 0, 0], [c, s, 0, 0]])
    ds = simulate(model, RunConfig(n_tokens=2, n_traj=200, L=100, T=0.01, seed=3, x0=x0))
    if pole == 1:
        return ds.one_minus_overlap.values / (2 * size * size)
    return ds.one_plus_overlap.values / (2 * size * size)


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_the_chain_keeps_its_relative_precision_at_plus_one(act):
    # Near +1 the relative change of 1 - Z over a layer depends on s only at order s^2:
    # at s = 1e-7 and 2e-7 (same seed, same draws) the ratios agree to about 4e-14, where a
    # difference computed by cancellation would leave errors near 1e-16 / s = 1e-9.
    a, b = _one_layer_ratio(act, 1e-7, 1), _one_layer_ratio(act, 2e-7, 1)
    assert np.all(a > 0) and np.max(np.abs(a / b - 1)) < 1e-12


@pytest.mark.parametrize("act", ODD_ACTIVATIONS)
def test_the_chain_keeps_its_relative_precision_at_minus_one(act):
    # An odd activation keeps -1 reachable; at c = 1e-30 and 1e-150 the ratios must agree
    # to rounding.
    a, b = _one_layer_ratio(act, 1e-30, -1), _one_layer_ratio(act, 1e-150, -1)
    assert np.max(np.abs(a / b - 1)) < 1e-12


@pytest.mark.parametrize("method, n_tokens", [("overlap_chain", 2), ("literal", 3)])
def test_same_seed_same_bits_whatever_the_threads_and_the_cut(method, n_tokens):
    model = ModelConfig(d=4, beta=1.0, ff_strength=0.3, ff_width=6, ff_activation="gelu")
    run = dict(n_tokens=n_tokens, L=10, T=1, seed=9, method=method)
    whole = simulate(model, RunConfig(n_traj=40, n_threads=2, **run))
    one_thread = simulate(model, RunConfig(n_traj=40, n_threads=1, **run))
    tail = simulate(model, RunConfig(n_traj=15, first_trajectory=25, n_threads=1, **run))
    np.testing.assert_array_equal(whole.gram.values, one_thread.gram.values)
    np.testing.assert_array_equal(whole.gram.values[25:], tail.gram.values)


@pytest.mark.parametrize("act", ["relu", "gelu", "erf"])
@pytest.mark.parametrize("split", [None, (2, 1)])
def test_one_chain_step_has_the_limit_drift_and_variance(act, split):
    # One layer at L = 2000 from a fixed overlap: E[dZ] = mu(Z)/L and Var[dZ] = s^2(Z)/L up to
    # O(1/L) relative corrections (odd moments of the symmetric noise vanish), far below the
    # 4.5 standard errors allowed here (200,000 draws).
    from stochastic_transformers import feedforward

    d, beta, r, L, n = 4, 1.5, 0.5, 2000, 200_000
    m1, m2 = (1, 1) if split is None else split
    model = ModelConfig(d=d, beta=beta, ff_strength=r, ff_width=16, ff_activation=act)
    for z0 in (-0.9, -0.3, 0.5, 0.95):
        ds = simulate(model, RunConfig(n_tokens=m1 + m2, n_traj=n, L=L, T=1 / L, seed=4,
                                       z0=z0, split=split))
        dz = (ds.one_plus_overlap.values - 1.0) - z0
        mu, s2 = feedforward.coefficients(z0, beta, d, r, act, m1=m1, m2=m2)
        z_mean = (dz.mean() - mu / L) / (dz.std(ddof=1) / math.sqrt(n))
        dev2 = (dz - dz.mean()) ** 2
        z_var = (dev2.mean() - s2 / L) / (dev2.std(ddof=1) / math.sqrt(n))
        assert abs(z_mean) < Z_MAX and abs(z_var) < Z_MAX, (z0, z_mean, z_var)


@pytest.mark.parametrize("act", ["relu", "erf"])
def test_the_mean_overlap_after_a_short_time_follows_the_limit_drift(act):
    # Over one layer the drift is buried in the noise; over t = 0.05 (20 layers at L = 400)
    # the mean overlap moves by mu t, and E[Z_t] = z0 + mu t + (t^2 / 2)(mu mu' + s^2 mu'' / 2)
    # + O(t^3) + O(1/L).  100,000 trajectories resolve the block's part of mu: the drift
    # without the block is rejected where the block changes it.
    from stochastic_transformers import feedforward

    d, beta, r, L, t, n = 4, 1.5, 2.0, 400, 0.05, 100_000
    model = ModelConfig(d=d, beta=beta, ff_strength=r, ff_width=8, ff_activation=act)

    def predicted(z0, strength):
        def mu(z):
            return feedforward.coefficients(z, beta, d, strength, act)[0]
        step = 1e-4
        m, up, down = mu(z0), mu(z0 + step), mu(z0 - step)
        s2 = feedforward.coefficients(z0, beta, d, strength, act)[1]
        slope, curve = (up - down) / (2 * step), (up - 2 * m + down) / step**2
        return z0 + m * t + 0.5 * t * t * (m * slope + 0.5 * s2 * curve)

    rejected = 0
    for z0 in (-0.6, 0.0, 0.6):
        ds = simulate(model, RunConfig(n_tokens=2, n_traj=n, L=L, T=t, seed=7, z0=z0))
        z = ds.one_plus_overlap.values - 1.0
        se = z.std(ddof=1) / math.sqrt(n)
        assert abs(z.mean() - predicted(z0, r)) < Z_MAX * se, z0
        rejected += abs(z.mean() - predicted(z0, 0.0)) > Z_MAX * se
    assert rejected >= 2
