"""The two-cluster reduction in the simulator: the weighted chain and the ``reduced`` path.

Tokens at one point receive the same update, so a configuration of two points stays one;
its state is the overlap of the two points (``attention.cluster_pair_layer``).  These tests
check that layer against a literal layer of the N-token map, the chains against the full
map in law (two-sample KS, fixed seeds, family-wise false-alarm rate 1e-3 over this
module), and the ``reduced`` path against the full map bit for bit before the merge.
"""

import math

import mpmath
import numpy as np
import pytest
from scipy import stats

from stochastic_transformers import attention as att
from stochastic_transformers import simulate
from stochastic_transformers.simulation import MERGE_ONE_MINUS_OVERLAP, full_method
from stochastic_transformers import configs_from_flat


def _frame_value_matrix(z, d, rng):
    """A d x d V whose action on e1, e2 is the chain's seven numbers in the frame (e1..e4)."""
    g11, g21, g12, g22, t11, t21, t22 = z
    v = rng.standard_normal((d, d))
    v[:, 0] = 0.0
    v[:, 1] = 0.0
    v[:4, 0] = (g11, g21, t11, 0.0)
    v[:4, 1] = (g12, g22, t21, t22)
    return v


def _two_point_tokens(s, c, m1, m2, d):
    x = np.zeros((m1 + m2, d))
    x[:m1, 0], x[:m1, 1] = c, -s
    x[m1:, 0], x[m1:, 1] = c, s
    return x


CASES = [(1, 2, 1.5, True), (1, 3, 0.7, False), (2, 3, 2.5, True), (3, 5, 1.0, False),
         (1, 7, 4.0, True), (2, 2, 1.2, False)]


@pytest.mark.parametrize("m1, m2, beta, softmax", CASES)
def test_cluster_layer_is_the_literal_layer_of_the_n_tokens(m1, m2, beta, softmax):
    rng = np.random.default_rng(m1 * 10 + m2)
    d = 6
    for _ in range(5):
        theta = rng.uniform(0.05, math.pi - 0.05)
        s, c = math.sin(theta / 2), math.cos(theta / 2)
        z = np.r_[rng.standard_normal(4), math.sqrt(rng.chisquare(d - 2)), rng.standard_normal(),
                  math.sqrt(rng.chisquare(d - 3))]
        kappa = 0.3
        s1, c1 = att.cluster_pair_layer(s, c, kappa, att.cluster_pair_weights(s, beta, softmax, m1, m2), z)
        x = _two_point_tokens(s, c, m1, m2, d)
        n = m1 + m2
        scratch = [np.empty((n, d)), np.empty((n, d)), np.empty((n, d)), np.empty(n), np.empty(n)]
        out, y, bx, w, scale = scratch
        att.layer_literal(x, _frame_value_matrix(z, d, rng), kappa, np.eye(d), beta, softmax,
                          out, y, bx, w, True, scale)
        gram = x @ x.T
        assert np.allclose(gram[:m1, :m1], 1.0) and np.allclose(gram[m1:, m1:], 1.0)
        np.testing.assert_allclose(c1 * c1 - s1 * s1, gram[0, -1], rtol=0, atol=1e-13)
        np.testing.assert_allclose(s1 * s1 + c1 * c1, 1.0, atol=1e-15)


def test_balanced_cluster_layer_is_the_two_token_layer():
    rng = np.random.default_rng(7)
    for softmax in (True, False):
        for s in (1e-12, 0.1, 0.5, 0.9, math.sqrt(1 - 1e-20)):
            c = math.sqrt(1.0 - s * s) if s < 0.99 else 1e-10
            z = np.r_[rng.standard_normal(4), 1.3, rng.standard_normal(), 0.8]
            for m in (1, 3):
                got = att.cluster_pair_layer(s, c, 0.2, att.cluster_pair_weights(s, 1.3, softmax, m, m), z)
                one, ksum, kdiff = att.pair_weights_scaled(s, 1.3, softmax)
                ref = att.pair_layer_stochastic_scaled(s, c, one, 0.2 * ksum, 0.2 * kdiff, z)
                np.testing.assert_allclose(got, ref, rtol=1e-12)


def _mp_layer_gaps(s, c, kappa, beta, softmax, m1, m2, z):
    """1 - z' and 1 + z' of the literal two-point layer, in 250-digit arithmetic."""
    mpmath.mp.dps = 250
    s, c, kappa, beta = map(mpmath.mpf, (s, c, kappa, beta))
    zz = c * c - s * s
    n = m1 + m2
    if softmax:
        p1 = m1 * mpmath.e**beta / (m1 * mpmath.e**beta + m2 * mpmath.e**(beta * zz))
        p2 = m2 * mpmath.e**beta / (m2 * mpmath.e**beta + m1 * mpmath.e**(beta * zz))
        q1, q2 = 1 - p1, 1 - p2
    else:
        p1, q1 = m1 * mpmath.e**beta / n, m2 * mpmath.e**(beta * zz) / n
        p2, q2 = m2 * mpmath.e**beta / n, m1 * mpmath.e**(beta * zz) / n
    g11, g21, g12, g22, t11, t21, t22 = [mpmath.mpf(float(v)) for v in z]
    vu = mpmath.matrix([g11, g21, t11, 0])
    vw = mpmath.matrix([g12, g22, t21, t22])
    y1 = mpmath.matrix([c, -s, 0, 0])
    y2 = mpmath.matrix([c, s, 0, 0])
    a1u, a1w = (p1 + q1) * c, (q1 - p1) * s
    a2u, a2w = (p2 + q2) * c, (p2 - q2) * s
    Y1 = y1 + kappa * (a1u * vu + a1w * vw)
    Y2 = y2 + kappa * (a2u * vu + a2w * vw)
    cos = sum(Y1[i] * Y2[i] for i in range(4)) / (mpmath.norm(Y1) * mpmath.norm(Y2))
    return float(1 - cos), float(1 + cos)


@pytest.mark.parametrize("pole", ["single", "antipodal"])
@pytest.mark.parametrize("softmax", [True, False])
def test_cluster_layer_keeps_relative_precision_near_both_poles(pole, softmax):
    """From gaps of 1e-12 down to 1e-100 the chain's 1 -+ z' match 250-digit arithmetic."""
    z = np.array([0.3, -1.1, 0.7, 0.2, 1.4, -0.5, 0.8])
    for gap in (1e-12, 1e-40, 1e-100):
        big = math.sqrt(1.0 - gap * gap)
        s, c = (gap, big) if pole == "single" else (big, gap)
        s1, c1 = att.cluster_pair_layer(s, c, 0.3, att.cluster_pair_weights(s, 2.0, softmax, 1, 3), z)
        minus, plus = _mp_layer_gaps(s, c, 0.3, 2.0, softmax, 1, 3, z)
        small, ref = (2 * s1 * s1, minus) if pole == "single" else (2 * c1 * c1, plus)
        np.testing.assert_allclose(small, ref, rtol=1e-10)


# ----------------------------------------------------------------------------- the chains

def test_balanced_split_of_two_is_the_two_token_chain_bit_for_bit():
    kw = dict(n_traj=300, L=20, T=5.0, seed=11)
    for attention in ("softmax", "unnormalized"):
        pair = simulate(*configs_from_flat(n_tokens=2, d=4, beta=2.0, attention=attention, **kw))
        split = simulate(*configs_from_flat(n_tokens=2, d=4, beta=2.0, attention=attention,
                                            split=(1, 1), **kw))
        assert split.attrs["method"] == "cluster_chain"
        np.testing.assert_array_equal(split.one_plus_overlap.values, pair.one_plus_overlap.values)
        np.testing.assert_array_equal(split.gram.values, pair.gram.values)
        np.testing.assert_array_equal(split.stopped_layer.values, pair.stopped_layer.values)


# (m1, m2, d, beta, attention): both KS tests of a case at level 1e-3 / (2 * len) each.
LAW_CASES = [(1, 2, 4, 2.0, "softmax"), (1, 3, 3, 1.0, "unnormalized"),
             (2, 3, 5, 1.5, "softmax"), (2, 2, 4, 1.0, "unnormalized")]


@pytest.mark.parametrize("m1, m2, d, beta, attention", LAW_CASES)
def test_cluster_chain_agrees_in_law_with_the_full_map(m1, m2, d, beta, attention):
    z0 = 0.2
    n = m1 + m2
    y = np.zeros((n, d))
    y[:m1, 0] = 1.0
    y[m1:, 0], y[m1:, 1] = z0, math.sqrt(1 - z0 * z0)
    common = dict(n_traj=3000, L=10, T=2.0, attention=attention, times=[0.5, 2.0])
    full = simulate(*configs_from_flat(n_tokens=n, d=d, beta=beta, x0=y, method="literal",
                                       seed=31, **common))
    chain = simulate(*configs_from_flat(n_tokens=n, d=d, beta=beta, split=(m1, m2), z0=z0,
                                        seed=32, **common))
    for k in range(2):
        a = np.clip(full.gram_t.values[:, k, 0, -1], -1 + 1e-9, 1 - 1e-9)
        b = np.clip(chain.gram_t.values[:, k, 0, -1], -1 + 1e-9, 1 - 1e-9)
        p = stats.ks_2samp(a, b).pvalue
        assert p > 1e-3 / (2 * len(LAW_CASES)), f"KS p = {p:.2e} at t = {common['times'][k]}"
    # the points stay points in the full map (within rounding) and in the chain exactly
    assert np.all(full.gram_t.values[:, :, 0, :m1] > 1 - 1e-12)
    assert np.all(chain.gram_t.values[:, :, 0, :m1] == 1.0)


# ----------------------------------------------------------------------------- reduced path

@pytest.mark.parametrize("n_tokens, beta, attention", [(3, 3.0, "softmax"), (5, 0.5, "softmax"),
                                                       (4, 1.0, "unnormalized")])
def test_reduced_path_is_the_full_map_bit_for_bit_until_the_merge(n_tokens, beta, attention):
    times = np.arange(0, 31) * 1.0
    kw = dict(n_traj=60, L=20, T=30.0, attention=attention, times=times, seed=5)
    red = simulate(*configs_from_flat(n_tokens=n_tokens, d=4, beta=beta, **kw))
    full = simulate(*configs_from_flat(n_tokens=n_tokens, d=4, beta=beta,
                                       method=full_method(n_tokens, 4), **kw))
    assert red.attrs["method"] == "reduced"
    layers = np.rint(times * 20).astype(int)
    merged = red.merge_layer.values
    assert np.any(merged >= 0), "no trajectory merged: the test checks nothing"
    for t in range(60):
        before = (layers < merged[t]) if merged[t] >= 0 else np.ones_like(layers, bool)
        np.testing.assert_array_equal(red.gram_t.values[t, before], full.gram_t.values[t, before])
    never = merged < 0
    np.testing.assert_array_equal(red.gram.values[never], full.gram.values[never])
    one = red.merge_points.values == 1
    assert np.all(red.gram.values[one] == 1.0)
    two = red.merge_points.values == 2
    assert np.all((red.merge_m1.values[two] >= 1) & (red.merge_m1.values[two] < n_tokens))
    assert np.all(red.merge_one_minus_overlap.values[two] > MERGE_ONE_MINUS_OVERLAP)


def test_reduced_path_same_bits_whatever_threads_and_slicing():
    kw = dict(n_traj=40, L=20, T=20.0, seed=5, times=[1.0, 20.0])
    whole = simulate(*configs_from_flat(n_tokens=4, d=4, beta=2.0, n_threads=2, **kw))
    single = simulate(*configs_from_flat(n_tokens=4, d=4, beta=2.0, n_threads=1, **kw))
    np.testing.assert_array_equal(whole.gram_t.values, single.gram_t.values)
    np.testing.assert_array_equal(whole.merge_layer.values, single.merge_layer.values)
    tail = simulate(*configs_from_flat(n_tokens=4, d=4, beta=2.0, **{**kw, "n_traj": 15},
                                       first_trajectory=25))
    np.testing.assert_array_equal(whole.gram_t.values[25:], tail.gram_t.values)
    chain = dict(n_traj=40, L=20, T=5.0, seed=5, split=(1, 2), times=[1.0, 5.0])
    np.testing.assert_array_equal(simulate(*configs_from_flat(n_tokens=3, d=4, beta=2.0,
                                                              n_threads=2, **chain)).gram_t.values,
                                  simulate(*configs_from_flat(n_tokens=3, d=4, beta=2.0,
                                                              n_threads=1, **chain)).gram_t.values)


@pytest.mark.parametrize("kwargs, match", [
    (dict(split=(1, 1)), "add up"),
    (dict(split=(0, 3)), "split"),
    (dict(split="12"), "split"),
    (dict(split=(1, 2), method="literal"), "x0"),
    (dict(split=(1, 2), values="uniform"), "cluster_chain"),
    (dict(method="cluster_chain"), "split"),
    (dict(method="reduced", values="rademacher"), "reduced"),
    (dict(split=(1, 2), x0=np.eye(3, 4)), "x0"),
    (dict(z0=0.5), "split"),
])
def test_bad_two_point_requests_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate(*configs_from_flat(n_tokens=3, d=4, beta=1.0, n_traj=2, L=2, T=1.0, **kwargs))


@pytest.mark.parametrize("n_tokens, beta, attention", [(4, 3.0, "softmax"), (3, 1.0, "unnormalized"),
                                                       (5, 5.0, "softmax")])
def test_merging_coinciding_tokens_changes_no_outcome(n_tokens, beta, attention):
    """``snap`` is the literal map with merged tokens made to coincide exactly: with the same
    random numbers, its classification at T differs from the literal map's only through
    the merge.  Allowed: at most 1 trajectory in 300 (with tokens 1e-8 apart, the chance
    that the merge matters is far smaller; the slack covers a borderline overlap)."""
    from stochastic_transformers.classification import has_antipodal_pair, is_clustered

    kw = dict(n_traj=300, L=50, T=60.0, attention=attention, seed=9)
    full = simulate(*configs_from_flat(n_tokens=n_tokens, d=4, beta=beta, method="literal", **kw))
    snap = simulate(*configs_from_flat(n_tokens=n_tokens, d=4, beta=beta, method="snap", **kw))
    assert np.sum(snap.merge_layer.values >= 0) > 100, "too few merges: the test checks little"
    for classify in (has_antipodal_pair, is_clustered):
        a, b = classify(full.gram.values), classify(snap.gram.values)
        assert np.sum(a != b) <= 1, classify.__name__
