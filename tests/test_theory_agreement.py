"""The simulator against the exact two-token limit theory, and early stopping.

The discrete model at depth scale L is not the limit diffusion: its long-time
antipodal probability differs from the limit one by a discretisation bias.  We
allow ALLOWANCE on top of the binomial interval; it was set from the measured bias
at L = 100 (Figure 3 at quick scale: mean deviation within -0.3 standard errors of
4,000 trajectories, i.e. |bias| < 0.005) with a factor-of-three margin.
"""

import numpy as np
import pytest

from stochastic_transformers import simulate, theory
from stochastic_transformers.classification import outcome_counts
from stochastic_transformers.stats import wilson_interval
from stochastic_transformers import ModelConfig, RunConfig, configs_from_flat

ALLOWANCE = 0.015
# Wilson 99.9% intervals: 4 cases, family-wise false-alarm rate < 0.4%.
LEVEL = 0.999


@pytest.mark.parametrize("beta, d", [(1.0, 4), (2.0, 4), (3.0, 7), (0.4, 5)])
def test_long_time_antipodal_fraction_matches_the_limit_curve(beta, d):
    n = 6000
    ds = simulate(ModelConfig(d=d, beta=beta),
                  RunConfig(n_tokens=2, n_traj=n, L=100, T=300.0, seed=17))
    counts = outcome_counts(ds)
    p_theory = float(theory.antipodal_probability(beta, d))
    lo, hi = wilson_interval(counts["antipodal"], n, level=LEVEL)
    assert lo - ALLOWANCE <= p_theory <= hi + ALLOWANCE, (counts, p_theory)
    assert counts["unclustered"] <= 0.01 * n


def test_d2_half_the_pairs_end_antipodal_for_every_beta():
    """On the circle both poles always attract and the limit gives exactly 1/2."""
    for beta in (0.0, 1.5):
        assert float(theory.antipodal_probability(beta, 2)) == pytest.approx(0.5, abs=1e-6)
        n = 4000
        counts = outcome_counts(simulate(ModelConfig(d=2, beta=beta),
                                         RunConfig(n_tokens=2, n_traj=n, L=100, T=100.0, seed=3)))
        lo, hi = wilson_interval(counts["antipodal"], n, level=LEVEL)
        assert lo - ALLOWANCE <= 0.5 <= hi + ALLOWANCE


def test_d3_antipodal_is_attracting_for_every_positive_beta():
    assert theory.critical_beta(3) == 0.0
    n = 3000
    counts = outcome_counts(simulate(ModelConfig(d=3, beta=1.0),
                                     RunConfig(n_tokens=2, n_traj=n, L=100, T=200.0, seed=5)))
    p = float(theory.antipodal_probability(1.0, 3))
    lo, hi = wilson_interval(counts["antipodal"], n, level=LEVEL)
    assert p > 0.1 and lo - ALLOWANCE <= p <= hi + ALLOWANCE


@pytest.mark.parametrize("beta, d", [(0.8, 4), (2.0, 6)])
def test_early_stopping_matches_running_every_trajectory_to_T(beta, d):
    """Same seed, same streams: the runs agree path by path up to each stop, so any
    difference in outcome is a trajectory that left its pole after we stopped it.
    The level is 1e-6 per trajectory in the limit; we allow 3 of 3,000 (binomial tail
    at rate 1e-4 is below 1e-5, leaving room for the discrete model's deviation)."""
    kw = dict(n_traj=3000, L=100, T=60.0, seed=21)
    full = simulate(*configs_from_flat(n_tokens=2, d=d, beta=beta, stop_level=0.0, **kw))
    fast = simulate(*configs_from_flat(n_tokens=2, d=d, beta=beta, **kw))
    assert fast.attrs["stop_level"] == 1e-6 and fast.attrs["stopped_fraction"] > 0.9
    assert full.attrs["stopped_fraction"] == 0.0
    from stochastic_transformers.classification import two_token_outcome

    a = two_token_outcome(full.one_minus_overlap.values, full.one_plus_overlap.values)
    b = two_token_outcome(fast.one_minus_overlap.values, fast.one_plus_overlap.values)
    assert np.sum(a != b) <= 3
    # and the stopped trajectories really sat deep inside their pole
    stopped = fast.stopped_layer.values >= 0
    gaps = np.minimum(fast.one_minus_overlap.values, fast.one_plus_overlap.values)[stopped]
    assert np.all(gaps < 1e-3)
