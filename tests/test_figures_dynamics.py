"""Figures 8 and 9 (appendix D): the metrics on hand-built configurations, the smoke-scale
datasets, and the checks of their knobs."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np

from stochastic_transformers.figures.base import log_time_grid
import pytest

from stochastic_transformers import theory
from stochastic_transformers.classification import is_clustered
from stochastic_transformers.figures import fig8, fig9


def _gram(x):
    x = np.asarray(x, dtype=float)
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return np.einsum("...ia,...ja->...ij", x, x)


# ----------------------------------------------------------------------------- metrics


def test_clustering_gap_on_hand_built_configurations():
    v = np.array([0.6, 0.0, 0.8, 0.0])
    e1, e2 = np.eye(4)[0], np.eye(4)[1]
    # one cluster, and an antipodal pair of clusters (3 tokens at v, 2 at -v): gap 0
    assert fig9.clustering_gap(_gram([v] * 5)) == pytest.approx(0.0, abs=1e-15)
    assert fig9.clustering_gap(_gram([v, v, -v, v, -v])) == pytest.approx(0.0, abs=1e-15)
    # an orthogonal pair is as far as possible from both poles
    assert fig9.clustering_gap(_gram([e1, e2])) == pytest.approx(1.0)
    # three tokens at 120 degrees in a plane: every overlap is -1/2, gap min(3/2, 1/2)
    angles = 2 * np.pi * np.arange(3) / 3
    tri = np.stack([np.cos(angles), np.sin(angles), 0 * angles], axis=1)
    assert fig9.clustering_gap(_gram(tri)) == pytest.approx(0.5)
    # a cluster with one token tilted by theta, and one tilted by pi - theta: 1 - cos(theta)
    th = 0.3
    tilt = math.cos(th) * e1 + math.sin(th) * e2
    assert fig9.clustering_gap(_gram([e1, e1, tilt])) == pytest.approx(1 - math.cos(th))
    assert fig9.clustering_gap(_gram([e1, -e1, -tilt])) == pytest.approx(1 - math.cos(th))
    # leading axes are kept; an overlap rounded past 1 gives 0, not a negative gap
    stack = np.stack([_gram([e1, e2]), _gram([e1, e1])])
    np.testing.assert_allclose(fig9.clustering_gap(stack[None]), [[1.0, 0.0]], atol=1e-15)
    over = np.array([[1.0, 1.0 + 1e-15], [1.0 + 1e-15, 1.0]])
    assert fig9.clustering_gap(over) == 0.0
    with pytest.raises(ValueError, match="gram"):
        fig9.clustering_gap(np.ones((3, 2)))


def test_clustering_gap_agrees_with_is_clustered():
    rng = np.random.default_rng(1)
    # configurations near +-v with spreads across the tolerance
    v = rng.standard_normal((200, 1, 4))
    signs = rng.choice([-1.0, 1.0], size=(200, 5, 1))
    noise = rng.standard_normal((200, 5, 4)) * 10 ** rng.uniform(-3.5, -0.5, (200, 1, 1))
    g = _gram(signs * v / np.linalg.norm(v, axis=-1, keepdims=True) + noise)
    gap = fig9.clustering_gap(g)
    for tol in (1e-3, 1e-2):
        clear = np.abs(gap - tol) > 1e-12  # exclude rounding ties at the boundary
        assert clear.all()
        np.testing.assert_array_equal((gap <= tol)[clear], is_clustered(g, tol)[clear])
        assert 0 < np.mean(gap <= tol) < 1


def test_first_time_and_longest_plateau():
    times = np.arange(9.0)
    mask = np.array([[0, 0, 1, 0, 1, 0, 0, 0, 0], [0] * 9], dtype=bool)
    np.testing.assert_array_equal(fig9.first_time(mask, times), [2.0, np.inf])
    assert fig9.first_time(mask[0], times) == 2.0
    # 8 tokens: 8 groups (nothing merged: not a plateau), 5 for one record, 3 for three
    # records (length 2), 2 for two (length 1), then clustered as 2 groups (excluded).
    counts = np.array([8, 8, 5, 3, 3, 3, 2, 2, 2])
    clustered = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1], dtype=bool)
    assert fig9.longest_plateau(counts, clustered, times, 8) == pytest.approx(2.0)
    # the run of 2 groups ends where the configuration becomes clustered
    late = np.array([8, 2, 2, 2, 2, 2, 2, 1, 1])
    assert fig9.longest_plateau(late, np.zeros(9, bool), times, 8) == pytest.approx(5.0)
    late_cl = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1], dtype=bool)
    assert fig9.longest_plateau(late, late_cl, times, 8) == pytest.approx(1.0)
    # a count that changes and comes back starts a new run; uneven times are respected
    flip = np.array([3, 3, 4, 3, 3, 3, 3, 1, 1])
    uneven = np.array([0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 17.0, 18.0, 19.0])
    assert fig9.longest_plateau(flip, np.zeros(9, bool), uneven, 8) == pytest.approx(13.0)
    # never intermediate: 0; leading axes are kept
    stack = np.stack([counts, np.full(9, 8), flip])
    out = fig9.longest_plateau(stack, np.zeros((3, 9), bool), times, 8)
    np.testing.assert_allclose(out, [2.0, 0.0, 3.0])
    with pytest.raises(ValueError, match="time axis"):
        fig9.longest_plateau(counts[:5], clustered[:5], times, 8)


def test_log_time_grid():
    t = log_time_grid(100.0, 100, 60)
    assert t[0] == 0.0 and t[1] == pytest.approx(0.01) and t[-1] == 100.0
    assert np.all(np.diff(t) > 0) and 50 <= t.size <= 60
    np.testing.assert_allclose(t * 100, np.rint(t * 100), atol=1e-9)
    assert log_time_grid(2.0, 1, 10).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match=r"T \* L"):
        log_time_grid(0.015, 20, 10)
    with pytest.raises(ValueError, match="n_times"):
        log_time_grid(1.0, 20, 1)


def test_settle_time():
    times = np.arange(6.0)
    p = np.array([1.0, 0.5, 0.005, 0.02, 0.0, 0.0])
    assert fig8.settle_time(p, times) == 4.0  # the dip at t = 2 does not count
    assert fig8.settle_time(p, times, level=0.5) == 1.0
    assert fig8.settle_time(np.zeros(6), times) == 0.0
    np.testing.assert_array_equal(
        fig8.settle_time(np.stack([p, np.full(6, 0.3)]), times), [4.0, np.inf])
    with pytest.raises(ValueError, match="time axis"):
        fig8.settle_time(p[:3], times)


# ----------------------------------------------------------------------------- smoke runs


@pytest.fixture(scope="module")
def ds8():
    return fig8.compute("smoke", progress=False)


@pytest.fixture(scope="module")
def ds9():
    return fig9.compute("smoke", progress=False)


def _check_band(ds, name):
    p, lo, hi = ds[name].values, ds[f"{name}_low"].values, ds[f"{name}_high"].values
    assert np.all((p >= 0) & (p <= 1))
    assert np.all(lo <= p + 1e-12) and np.all(p <= hi + 1e-12)
    assert np.all(lo >= 0) and np.all(hi <= 1)


def test_fig8_smoke_dataset(ds8):
    knobs = fig8.SCALES["smoke"]
    assert dict(ds8.sizes)["beta"] == len(knobs["betas"]) and ds8.d.values.tolist() == list(knobs["d"])
    np.testing.assert_allclose(ds8.time.values, log_time_grid(knobs["T"], knobs["L"],
                                                                   knobs["n_times"]))
    for name in ("p_unclustered", "p_single", "p_antipodal"):
        assert ds8[name].dims == ("beta", "d", "time")
        _check_band(ds8, name)
    total = ds8.p_unclustered + ds8.p_single + ds8.p_antipodal
    np.testing.assert_allclose(total.values, 1.0, atol=1e-12)
    assert np.all(ds8.n_unclustered.isel(time=0).values == knobs["n_traj"])
    # every pair clusters within T except, possibly, where -1 barely attracts
    assert float(ds8.p_unclustered.isel(time=-1).max()) < 0.2
    for b in ds8.beta.values:
        for d in ds8.d.values:
            assert float(ds8.p_antipodal_limit.sel(beta=b, d=d)) == pytest.approx(
                theory.antipodal_probability(b, int(d)))
    # the three regimes of the default betas over d = (4, 8): none, some, all attract
    assert ds8.n_attracting.values.tolist() == [0, 1, 2]
    assert np.all(ds8.p_antipodal.sel(beta=fig8.BETAS[0]).isel(time=-1).values <= 0.05)
    s = fig8.summary(ds8)
    assert s["n_points"] == 6 and s["T"] == knobs["T"]
    assert fig8.cost("paper", ds8) > 0
    assert fig8.plot(ds8) is not None


def test_fig9_smoke_dataset(ds9):
    knobs = fig9.SCALES["smoke"]
    assert ds9.model.values.tolist() == list(fig9.MODELS)
    assert ds9.sizes["trajectory"] == knobs["n_traj"]
    for name in ("gap", "n_clusters", "clustered", "antipodal_pair"):
        assert ds9[name].dims == ("model", "beta", "trajectory", "time")
    gap = ds9.gap.values
    assert np.all((gap >= 0) & (gap <= 1))
    ncl = ds9.n_clusters.values
    assert np.all((ncl >= 1) & (ncl <= knobs["n_tokens"]))
    # clustered configurations are one cluster or an antipodal pair of clusters
    assert np.all(ncl[ds9.clustered.values] <= 2)
    # the same initial tokens for both models
    np.testing.assert_array_equal(ds9.gap.isel(time=0, model=0).values,
                                  ds9.gap.isel(time=0, model=1).values)
    clear = np.abs(gap - knobs["tol"]) > 1e-12
    np.testing.assert_array_equal((gap <= knobs["tol"])[clear], ds9.clustered.values[clear])
    for name in ("p_clustered", "p_antipodal_pair"):
        assert ds9[name].dims == ("model", "beta", "time")
        _check_band(ds9, name)
    assert np.all(ds9.gap_q25.values <= ds9.median_gap.values)
    assert np.all(ds9.median_gap.values <= ds9.gap_q75.values)
    # t_clustered is a time at which the trajectory is clustered, or inf
    t_cl = ds9.t_clustered.values
    finite = np.isfinite(t_cl)
    assert finite.any()
    idx = np.searchsorted(ds9.time.values, t_cl[finite])
    assert np.all(ds9.clustered.values[finite, :][np.arange(idx.size), idx])
    assert np.all(ds9.longest_plateau.values >= 0)
    assert np.all(ds9.longest_plateau.values <= ds9.time.values[-1])
    s = fig9.summary(ds9)
    assert set(s["by"]) == {(m, float(b)) for m in fig9.MODELS for b in knobs["betas"]}
    assert fig9.cost("paper", ds9) > 0
    words = fig9.phrases(s)           # the page's verdict and table
    assert words["verdict"].startswith("**") and words["table"].count("\n") == 1 + 2 * len(knobs["betas"])
    assert fig9.plot(ds9) is not None


# ----------------------------------------------------------------------------- knobs


@pytest.mark.parametrize("module, overrides, name", [
    (fig8, dict(betas=(-1.0,)), "betas"),
    (fig8, dict(betas=()), "betas"),
    (fig8, dict(d=(1, 4)), "d must"),
    (fig8, dict(n_traj=0), "n_traj"),
    (fig8, dict(T=0.015), r"T \* L"),
    (fig8, dict(L=0), "L"),
    (fig8, dict(n_times=1), "n_times"),
    (fig8, dict(attention="linear"), "attention"),
    (fig8, dict(tol=0.0), "tol"),
    (fig8, dict(horizon=5.0), "horizon"),
    (fig9, dict(n_tokens=2), "n_tokens"),
    (fig9, dict(betas=(1.0, -2.0)), "betas"),
    (fig9, dict(block_size=3), "block_size"),
    (fig9, dict(n_traj=0), "n_traj"),
    (fig9, dict(d=1), "d must"),
    (fig9, dict(T=-1.0), "T must"),
    (fig9, dict(attention="linear"), "attention"),
    (fig9, dict(tol=2.0), "tol"),
    (fig9, dict(seed=-1), "seed"),
    (fig9, dict(models=("x",)), "models"),
])
def test_invalid_knobs_name_themselves(module, overrides, name):
    with pytest.raises(ValueError, match=name):
        module.compute("smoke", progress=False, **overrides)
    with pytest.raises(ValueError, match="scale"):
        module.compute("huge", progress=False)
