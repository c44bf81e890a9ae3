"""The conjecture after Figure 7 at long horizons (figures.paper.persistence_long): the tail
rate, the labels and the knobs."""

from __future__ import annotations

import numpy as np
import pytest

from stochastic_transformers.figures import persistence_long as pl


def test_tail_rate_recovers_an_exponential_decay():
    """Counts of 100,000 trajectories surviving at rate 3e-4 (binomial draws, fixed seed):
    the fitted rate is within 4 of its standard errors of the truth."""
    rng = np.random.default_rng(0)
    t = np.geomspace(1.0, 1e4, 30)
    n = 100_000
    counts = rng.binomial(n, 0.9 * np.exp(-3e-4 * t))
    rate, se = pl.tail_rate(t, counts, n, 1e3)
    assert abs(rate - 3e-4) < 4 * se and se < 3e-5


def test_labels_follow_the_interval():
    bound = 1e-5
    assert pl._label(1e-3, 1e-4, 3.0, bound) == "metastable"
    assert pl._label(1e-7, 1e-6, 3.0, bound) == "stable on this horizon"
    assert pl._label(1e-5, 1e-5, 3.0, bound) == "undecided"


def test_a_flat_count_is_stable_and_a_falling_one_metastable():
    t = np.geomspace(1.0, 1e4, 30)
    flat, se_flat = pl.tail_rate(t, np.full(t.size, 495), 500, 1e3)
    falling, se_fall = pl.tail_rate(t, np.round(500 * np.exp(-4e-4 * t)), 500, 1e3)
    z = 3.0
    assert pl._label(flat, se_flat, z, 1e-5) == "stable on this horizon"
    assert pl._label(falling, se_fall, z, 1e-5) == "metastable"


def test_bad_splits_are_named_before_compute():
    with pytest.raises(ValueError, match="splits"):
        pl.compute("smoke", splits=("1,0",), progress=False)
    with pytest.raises(ValueError, match="betas"):
        pl.compute("smoke", betas=(-1.0,), progress=False)
