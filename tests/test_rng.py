"""The in-kernel random streams: distributions, independence, stream separation.

Fixed seeds make every test deterministic; each distribution test uses a KS or
chi-square test at level 1e-4, so the family of tests below has a false-alarm rate
(the chance that a correct generator fails for a random seed) below 0.2%.
"""

import numpy as np
import numba as nb
import pytest
from scipy import stats

from stochastic_transformers import rng

ALPHA = 1e-4


def _stream(seed, index=0):
    state = np.zeros(4, dtype=np.uint64)
    key0, key1 = rng.stream_keys(seed)
    rng.seed_stream(state, key0, key1, index)
    return state


@nb.njit
def _chi2_many(state, dof, out):
    for i in range(out.size):
        out[i] = rng.chi2(state, dof)


@nb.njit
def _uniform_many(state, out):
    for i in range(out.size):
        out[i] = rng.uniform(state)


def test_ziggurat_tables_close_the_recursion():
    x = rng.ZIG_W * 2.0**52
    assert x[1] == pytest.approx(rng.ZIG_R)
    assert np.all(np.diff(x[1:]) < 0)
    # The top strip must end at f = 1 exactly when the recursion closes.
    top = x[255] * (1.0 - np.exp(-0.5 * x[255] ** 2))
    area = rng.ZIG_R * np.exp(-0.5 * rng.ZIG_R**2) + np.sqrt(np.pi / 2) * \
        __import__("math").erfc(rng.ZIG_R / np.sqrt(2))
    assert top == pytest.approx(area, rel=1e-9)


def test_normals_have_the_normal_law():
    out = np.empty(1_000_000)
    rng.fill_normals(_stream(11), out)
    assert stats.kstest(out, "norm").pvalue > ALPHA
    # the tail beyond r (about 0.026% of draws) goes through the slow path
    beyond = np.mean(np.abs(out) > rng.ZIG_R)
    expected = 2 * stats.norm.sf(rng.ZIG_R)
    assert abs(beyond - expected) < 5 * np.sqrt(expected / out.size)
    # moments: mean, variance, kurtosis within 5 standard errors
    n = out.size
    assert abs(out.mean()) < 5 / np.sqrt(n)
    assert abs(out.var() - 1) < 5 * np.sqrt(2 / n)
    assert abs(stats.kurtosis(out)) < 5 * np.sqrt(24 / n)


def test_uniforms_are_uniform_and_successive_draws_uncorrelated():
    out = np.empty(500_000)
    _uniform_many(_stream(12), out)
    assert stats.kstest(out, "uniform").pvalue > ALPHA
    r = np.corrcoef(out[:-1], out[1:])[0, 1]
    assert abs(r) < 5 / np.sqrt(out.size)


@pytest.mark.parametrize("dof", [1, 2, 3, 5, 8, 33, 40])
def test_chi_square_law(dof):
    out = np.empty(200_000)
    _chi2_many(_stream(13 + dof), dof, out)
    assert stats.kstest(out, "chi2", args=(dof,)).pvalue > ALPHA


def test_gamma_law():
    out = np.empty(200_000)
    rng.fill_gammas(_stream(14), 2.5, out)
    assert stats.kstest(out, "gamma", args=(2.5,)).pvalue > ALPHA


def test_streams_differ_and_are_uncorrelated():
    a, b = np.empty(200_000), np.empty(200_000)
    rng.fill_normals(_stream(5, 0), a)
    rng.fill_normals(_stream(5, 1), b)
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / np.sqrt(a.size)
    c = np.empty(200_000)
    rng.fill_normals(_stream(6, 0), c)
    assert abs(np.corrcoef(a, c)[0, 1]) < 5 / np.sqrt(a.size)


def test_stream_is_a_function_of_seed_and_index_only():
    a, b = np.empty(100), np.empty(100)
    rng.fill_normals(_stream(7, 123), a)
    rng.fill_normals(_stream(7, 123), b)
    np.testing.assert_array_equal(a, b)
