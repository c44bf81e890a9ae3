"""Tests of the many-token figures (fig1, fig6, fig7) and the classification they rely on.

The classification is checked on hand-built configurations of N >= 3 tokens whose
answers are known; each figure's ``compute`` runs at smoke scale (seconds) and must
return its documented variables with sane values; bad knobs must raise a ValueError
that names them.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from stochastic_transformers.classification import (  # noqa: E402
    antipodal,
    has_antipodal_pair,
    is_clustered,
    n_clusters,
    together,
)
from stochastic_transformers.attention import (  # noqa: E402
    attention_paths_last,
    tangent_projection,
)
from stochastic_transformers.figures import fig1, fig6, fig7  # noqa: E402

TOL = 1e-3


def gram_of(x):
    x = np.asarray(x, dtype=float)
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return x @ x.T


def circle(*angles_rad):
    return np.array([[math.cos(a), math.sin(a)] for a in angles_rad])


def angle_for_overlap(z):
    return math.acos(z)


# ----------------------------------------------------------------------------- classification

def test_two_together_one_antipodal():
    e1 = np.array([1.0, 0.0, 0.0])
    g = gram_of([e1, e1, -e1])
    assert is_clustered(g)
    assert has_antipodal_pair(g)
    assert n_clusters(g) == 2
    assert together(g)[0, 1] and not together(g)[0, 2]
    assert antipodal(g)[0, 2] and antipodal(g)[1, 2] and not antipodal(g)[0, 1]


def test_single_cluster_of_five():
    rng = np.random.default_rng(1)
    base = rng.standard_normal(4)
    base /= np.linalg.norm(base)
    tokens = base + 1e-4 * rng.standard_normal((5, 4))  # all within ~1e-8 of each other
    g = gram_of(tokens)
    assert is_clustered(g) and not has_antipodal_pair(g)
    assert n_clusters(g) == 1


def test_unclustered_orthonormal_frame():
    g = gram_of(np.eye(3))
    assert not is_clustered(g)
    assert not has_antipodal_pair(g)
    assert n_clusters(g) == 3


def test_pair_together_third_orthogonal():
    g = gram_of([[1, 0, 0], [1, 0, 0], [0, 1, 0]])
    assert not is_clustered(g) and not has_antipodal_pair(g)
    assert n_clusters(g) == 2


def test_two_orthogonal_antipodal_pairs():
    e1, e2 = np.eye(3)[:2]
    g = gram_of([e1, -e1, e2, -e2])
    assert has_antipodal_pair(g)
    assert not is_clustered(g)  # e1 and e2 are neither together nor antipodal
    assert n_clusters(g) == 4


def test_two_groups_of_three_antipodal():
    e = np.array([0.0, 0.0, 1.0, 0.0])
    g = gram_of([e, e, -e, e, -e, -e])
    assert is_clustered(g) and has_antipodal_pair(g)
    assert n_clusters(g) == 2


def test_chain_of_together_pairs_is_one_component_but_not_clustered():
    # Consecutive tokens are together (overlap 1 - 0.6 tol) but the ends are not
    # (angle doubled: overlap about 1 - 2.4 tol), so the "together" graph is a path.
    delta = angle_for_overlap(1.0 - 0.6 * TOL)
    g = gram_of(circle(0.0, delta, 2 * delta))
    assert together(g)[0, 1] and together(g)[1, 2] and not together(g)[0, 2]
    assert n_clusters(g) == 1
    assert not is_clustered(g)


@pytest.mark.parametrize("factor, inside", [(0.999, True), (1.001, False)])
def test_antipodal_tolerance_edge(factor, inside):
    theta = angle_for_overlap(-1.0 + factor * TOL)
    g = gram_of(circle(0.0, 0.0, theta))  # two together + one near-opposite
    assert has_antipodal_pair(g, TOL) == inside
    assert is_clustered(g, TOL) == inside
    assert n_clusters(g, TOL) == 2


@pytest.mark.parametrize("factor, inside", [(0.999, True), (1.001, False)])
def test_together_tolerance_edge(factor, inside):
    theta = angle_for_overlap(1.0 - factor * TOL)
    g = gram_of(circle(0.0, theta, math.pi))
    assert together(g, TOL)[0, 1] == inside
    assert n_clusters(g, TOL) == (2 if inside else 3)
    # token 3 is exactly antipodal to token 1; its overlap with token 2 is -1 + factor * tol
    assert antipodal(g, TOL)[0, 2] and antipodal(g, TOL)[1, 2] == inside
    assert has_antipodal_pair(g, TOL)
    assert is_clustered(g, TOL) == inside


def test_exact_boundary_overlaps_count_as_settled():
    g = np.array([[1.0, 1.0 - TOL, -1.0 + TOL],
                  [1.0 - TOL, 1.0, -1.0 + TOL],
                  [-1.0 + TOL, -1.0 + TOL, 1.0]])
    assert is_clustered(g, TOL) and has_antipodal_pair(g, TOL) and n_clusters(g, TOL) == 2


def test_batched_configurations():
    e1 = np.array([1.0, 0.0, 0.0])
    batch = np.stack([gram_of([e1, e1, -e1]), gram_of(np.eye(3)), gram_of([e1, e1, e1])])
    batch = np.stack([batch, batch[::-1]])  # shape (2, 3, 3, 3)
    np.testing.assert_array_equal(is_clustered(batch), [[1, 0, 1], [1, 0, 1]])
    np.testing.assert_array_equal(has_antipodal_pair(batch), [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(n_clusters(batch), [[2, 3, 1], [1, 3, 2]])


# ----------------------------------------------------------------------------- fig1

def attention_field(x, tokens, beta, attention="unnormalized"):
    """The attention each point of ``x`` (P, d) receives from the sequence (x, tokens...)."""
    seq = np.empty((len(tokens) + 1, x.shape[1], x.shape[0]))
    seq[0], seq[1:] = x.T, np.asarray(tokens)[:, :, None]
    return attention_paths_last(seq, beta, attention)[0].T


@pytest.mark.parametrize("d", [2, 5])
def test_tangent_projection_is_orthogonal_to_x(d):
    rng = np.random.default_rng(d)
    x = rng.standard_normal((50, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    tokens = rng.standard_normal((2, d))
    tokens /= np.linalg.norm(tokens, axis=-1, keepdims=True)
    a = attention_field(x, tokens, 1.3)
    p = tangent_projection(x, a)
    assert np.max(np.abs(np.sum(p * x, axis=-1))) < 1e-13
    # the projection removes exactly the radial part
    np.testing.assert_allclose(a - p, np.sum(a * x, axis=-1, keepdims=True) * x, atol=1e-14)


def test_attention_field_formula_and_softmax_direction():
    x = circle(0.3)
    tokens = circle(1.0, 2.5)
    beta = 1.0
    expected = (math.exp(beta) * x[0] + math.exp(beta * math.cos(0.7)) * tokens[0]
                + math.exp(beta * math.cos(2.2)) * tokens[1]) / 3
    np.testing.assert_allclose(attention_field(x, tokens, beta)[0], expected, rtol=1e-14)
    soft = attention_field(x, tokens, beta, "softmax")[0]
    cross = soft[0] * expected[1] - soft[1] * expected[0]
    assert abs(cross) < 1e-14 and soft @ expected > 0  # same direction, other length


def test_fig1_compute_smoke():
    ds = fig1.compute("smoke")
    for var in ("position", "field", "tangent_field", "radial", "tangential", "radial_fine",
                "tangential_fine", "tokens", "rest_angle", "rest_stable"):
        assert var in ds, var
    assert ds.sizes["theta"] == fig1.SCALES["smoke"]["n_arrows"]
    np.testing.assert_allclose(np.linalg.norm(ds.position.values, axis=-1), 1.0)
    dots = np.sum(ds.tangent_field.values * ds.position.values, axis=-1)
    assert np.max(np.abs(dots)) < 1e-13
    s = fig1.summary(ds)
    assert s["min_radial"] > 0  # at beta = 1 the self term makes the field point outwards
    assert len(s["stable_rest"]) >= 1 and len(s["unstable_rest"]) >= 1
    assert len(s["stable_rest"]) == len(s["unstable_rest"])  # they alternate on a circle
    fig = fig1.plot(ds)
    assert len(fig.axes) == 2
    plt.close(fig)


def test_fig1_symmetric_close_tokens_attract_to_their_midpoint():
    ds = fig1.compute("smoke", token_angles=(30.0, -30.0), n_fine=3600)
    stable = np.asarray(fig1.summary(ds)["stable_rest"])
    dist = np.minimum(np.abs(stable), np.abs(360.0 - stable))
    assert np.min(dist) < 0.2


@pytest.mark.parametrize("knob, value", [("beta", -1.0), ("n_arrows", 2), ("token_angles", (0.0,)),
                                         ("attention", "linear"), ("n_fine", 3)])
def test_fig1_invalid_knobs(knob, value):
    with pytest.raises(ValueError, match=knob):
        fig1.compute("smoke", **{knob: value})


# ----------------------------------------------------------------------------- fig6

def _check_fraction(ds, name):
    p, lo, hi = (ds[name].values, ds[f"{name}_low"].values, ds[f"{name}_high"].values)
    assert np.all((p >= 0) & (p <= 1))
    assert np.all(lo <= p + 1e-15) and np.all(p <= hi + 1e-15)
    assert np.all((lo >= 0) & (hi <= 1))


def test_fig6_compute_smoke():
    ds = fig6.compute("smoke", progress=False)
    sc = fig6.SCALES["smoke"]
    assert ds.p_antipodal_pair.dims == ("n_tokens", "beta")
    assert list(ds.n_tokens.values) == list(sc["n_tokens"])
    np.testing.assert_allclose(ds.beta.values, sc["betas"])
    for name in ("p_antipodal_pair", "p_clustered", "p_two_clusters"):
        _check_fraction(ds, name)
    assert np.all(ds.n_clustered_antipodal <= np.minimum(ds.n_clustered, ds.n_antipodal_pair))
    assert np.all(ds.mean_n_clusters >= 1)
    assert np.all(ds.mean_n_clusters <= ds.n_tokens)
    assert np.all(ds.n_traj == sc["n_traj"])
    # beta = 0: every token receives the same average, antipodal pairs do not attract
    assert np.all(ds.p_antipodal_pair.sel(beta=0.0) <= 0.05)
    assert np.all((ds.p_two_token_theory >= 0) & (ds.p_two_token_theory <= 1))
    s = fig6.summary(ds)
    assert set(s["per_n"]) == set(sc["n_tokens"])
    assert fig6.FIGURE.cost("paper", ds) > 0    # projected from this run's measured rate
    # the reduction's bookkeeping: every merged trajectory is counted once
    merged = ds.n_merged_one + ds.n_balanced + ds.n_unbalanced
    assert np.all(merged <= ds.n_traj) and np.all(merged.sel(beta=0.0) > 0)
    assert np.all(ds.n_antipodal_balanced <= ds.n_balanced)
    assert np.all(ds.n_antipodal_unbalanced <= ds.n_unbalanced)
    assert np.all(ds.n_antipodal_balanced + ds.n_antipodal_unbalanced <= ds.n_antipodal_pair)
    assert np.all(ds.n_balanced.sel(n_tokens=[n for n in sc["n_tokens"] if n % 2]) == 0)
    assert np.all(ds.predicted_antipodal_balanced <= ds.n_balanced + 1e-9)
    assert s["odd_all_unbalanced"] and s["balanced_agree"] is None  # smoke: odd N only
    fig = fig6.plot(ds)
    assert len(fig.axes) == 4
    plt.close(fig)


def test_fig6_balanced_splits_agree_with_their_limit_prediction():
    """N = 4 at beta = 3: the balanced merges end antipodal as Theorem 2 predicts from the
    overlap at the merge (T = 50: a few of those near the boundary may still move)."""
    ds = fig6.compute("smoke", progress=False, n_tokens=(4,), betas=(3.0,), n_traj=300, L=50,
                      T=50.0)
    s = fig6.summary(ds)
    assert int(ds.n_balanced.sum()) > 30
    assert s["balanced_agree"], s["per_n"][4]


@pytest.mark.parametrize("knob, value", [("n_tokens", (1, 3)), ("betas", (-0.5,)),
                                         ("betas", ()), ("n_traj", 0), ("attention", "relu"),
                                         ("tol", 2.0), ("T", -1.0), ("L", 0), ("d", 1),
                                         ("n_tokens", (3, 3))])
def test_fig6_invalid_knobs(knob, value):
    with pytest.raises(ValueError, match=knob):
        fig6.compute("smoke", progress=False, **{knob: value})


def test_fig6_unknown_knob_and_scale():
    with pytest.raises(ValueError, match="n_trajectories"):
        fig6.compute("smoke", progress=False, n_trajectories=5)
    with pytest.raises(ValueError, match="scale"):
        fig6.compute("huge", progress=False)


# ----------------------------------------------------------------------------- fig7

def test_fig7_time_grid():
    from stochastic_transformers.figures.base import log_time_grid

    t = log_time_grid(500.0, 100, 40, t_min=0.1)
    assert t[-1] == 500.0 and t[0] == pytest.approx(0.1)
    assert np.all(np.diff(t) > 0)
    np.testing.assert_allclose(np.asarray(t) * 100, np.rint(np.asarray(t) * 100), atol=1e-9)


def test_fig7_compute_smoke():
    ds = fig7.compute("smoke", progress=False)
    sc = fig7.SCALES["smoke"]
    assert ds.p_antipodal_pair.dims == ("beta", "time")
    np.testing.assert_allclose(ds.beta.values, sc["betas"])
    assert ds.time.values[-1] == sc["T"]
    for name in ("p_antipodal_pair", "p_clustered", "p_unsettled", "p_lost", "p_gained"):
        _check_fraction(ds, name)
    # bookkeeping identities of the per-trajectory counts
    last = ds.isel(time=-1)
    assert np.all(last.n_unsettled == 0) and np.all(last.n_lost == 0) and np.all(last.n_gained == 0)
    np.testing.assert_array_equal(ds.n_antipodal_pair - last.n_antipodal_pair,
                                  ds.n_lost - ds.n_gained)
    assert np.all(ds.n_unsettled >= ds.n_lost + ds.n_gained)
    assert np.all(ds.n_unsettled.diff("time") <= 0)  # a survival curve
    assert np.all((ds.mean_n_clusters >= 1) & (ds.mean_n_clusters <= sc["n_tokens"]))
    # two-group splits: at most the trajectories that are clustered with an antipodal pair
    assert list(ds.minority.values) == list(range(1, sc["n_tokens"] // 2 + 1))
    assert np.all(ds.n_split.sum("minority") <= np.minimum(ds.n_clustered, ds.n_antipodal_pair))
    _check_fraction(ds, "p_split")
    s = fig7.summary(ds)
    assert set(s["per_beta"]) == set(sc["betas"])
    words = fig7.phrases(s)           # the page's verdict and tables, at any scale
    assert words["verdict"].startswith("**") and words["table"].count("\n") == 1 + len(sc["betas"])
    # merged splits: counts grow with time, antipodal ones and predictions stay within them
    assert np.all(ds.n_merged_split.diff("time") >= 0)
    assert np.all(ds.n_antipodal_merged_split <= ds.n_merged_split)
    assert np.all((ds.predicted_merged_split >= 0)
                  & (ds.predicted_merged_split <= ds.n_merged_split + 1e-9))
    fig = fig7.plot(ds)
    assert len(fig.axes) == 4
    plt.close(fig)


@pytest.mark.parametrize("knob, value", [("betas", (-1.0,)), ("n_tokens", 1), ("t_min", 50.0),
                                         ("t_min", 0.0), ("n_times", 1), ("attention", "x"),
                                         ("n_traj", -3), ("seed", -1)])
def test_fig7_invalid_knobs(knob, value):
    with pytest.raises(ValueError, match=knob):
        fig7.compute("smoke", progress=False, **{knob: value})


# ----------------------------------------------------------------------------- clusters

def test_clusters_compute_smoke():
    from stochastic_transformers.figures import clusters

    ds = clusters.compute("smoke", progress=False)
    sc = clusters.SCALES["smoke"]
    assert set(ds.split.values) == set(sc["splits"])
    assert set(ds.attention.values) == {"softmax", "unnormalized"}
    _check_fraction(ds.sel(attention="softmax"), "p_antipodal")
    assert np.all((ds.p_predicted >= 0) & (ds.p_predicted <= 1) | np.isnan(ds.p_predicted))
    s = clusters.summary(ds)
    assert s["persist_agree"] and s["unbalanced_leave"]
    assert len(s["cells"]) == len(sc["splits"]) * (len(sc["betas_softmax"])
                                                   + len(sc["betas_unnormalized"]))
    # a balanced split is two tokens: Theorem 2's limit is in [0, 1] for each
    assert all(0 <= p <= 1 for p in s["balanced_limit"].values())
    words = clusters.phrases(s, {})   # no attention misses the limit here
    assert words["verdict"].startswith("**Confirmed:**") and "nan" not in words["table"]
    fig = clusters.plot(ds)
    assert len(fig.axes) == 4
    plt.close(fig)


@pytest.mark.parametrize("knob, value", [("splits", ("1,0",)), ("splits", ("12",)),
                                         ("splits", ()), ("betas_softmax", (-1.0,)),
                                         ("betas_unnormalized", (9.0,)), ("one_plus_z0", 0.5),
                                         ("n_traj", 0), ("T", -1.0)])
def test_clusters_invalid_knobs(knob, value):
    from stochastic_transformers.figures import clusters

    with pytest.raises(ValueError, match=knob):
        clusters.compute("smoke", progress=False, **{knob: value})
