"""The follow-up's mean-field limit with common noise (figures.followup.homog_mean_field)."""

from __future__ import annotations

import numpy as np
import pytest

from stochastic_transformers import simulate
from stochastic_transformers.config import ModelConfig, RunConfig
from stochastic_transformers.figures import homog_mean_field as mf


def _uniform(rng, shape):
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_energy_distance_vanishes_on_equal_sets_and_falls_like_one_over_n():
    rng = np.random.default_rng(0)
    a = _uniform(rng, (5, 40, 3))
    assert np.allclose(mf.energy_distance(a, a), 0.0, atol=1e-12)
    assert np.allclose(mf.energy_distance(a, a[:, ::-1]), 0.0, atol=1e-12)
    b = _uniform(rng, (5, 40, 3))
    assert np.allclose(mf.energy_distance(a, b), mf.energy_distance(b, a))
    # two independent samples of one law: n E is about constant (400 pairs per n)
    means = [n * mf.energy_distance(*_uniform(rng, (2, 400, n, 3))).mean() for n in (10, 80)]
    assert means[1] == pytest.approx(means[0], rel=0.15)


def test_the_same_seed_shares_the_weights_whatever_the_tokens():
    """Literal method: a permuted start on the same seed ends permuted (the same W, W', V act
    on both); on another seed it does not."""
    model = ModelConfig(d=4, beta=1.0, kind="random_attention")
    x = _uniform(np.random.default_rng(1), (3, 6, 4))
    perm = [5, 2, 0, 1, 4, 3]
    run = dict(n_tokens=6, n_traj=3, L=20, T=1.0, method="literal")
    a = simulate(model, RunConfig(seed=3, x0=x, **run)).tokens.values
    b = simulate(model, RunConfig(seed=3, x0=x[:, perm], **run)).tokens.values
    c = simulate(model, RunConfig(seed=4, x0=x[:, perm], **run)).tokens.values
    np.testing.assert_allclose(b, a[:, perm], atol=1e-10)
    assert np.abs(c - a[:, perm]).max() > 0.1


def test_segments_must_be_whole_layers():
    with pytest.raises(ValueError, match="whole numbers of layers"):
        mf.compute("smoke", times=(0.33, 1.0), progress=False)
    with pytest.raises(ValueError, match="times"):
        mf.compute("smoke", times=(1.0, 0.5), progress=False)
