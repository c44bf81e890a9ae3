"""The statistics the figures use (the end of stochastic_transformers.stats): fractions of a
sweep's counts with their Wilson bands, the homogeneity test of several laws, the
two-proportion z, and the paired comparison (Student-t interval, sign test)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr
from scipy import stats as sps

from stochastic_transformers import stats


def _counts():
    """A small sweep-like dataset: hits out of trials over (p, n)."""
    hits = np.array([[0, 3, 9], [2, 10, 40]])
    trials = np.array([[10, 20, 50], [10, 20, 50]])
    return xr.Dataset({"hits": (("p", "n"), hits), "trials": (("p", "n"), trials)},
                      coords={"p": [0.1, 0.5], "n": [10, 20, 50]})


def test_add_fraction_adds_the_fraction_and_its_wilson_band():
    ds = stats.add_fraction(_counts(), "hits", "trials", "frac")
    low, high = stats.wilson_interval(ds["hits"].values, ds["trials"].values)
    np.testing.assert_array_equal(ds["frac_low"].values, low)
    np.testing.assert_array_equal(ds["frac_high"].values, high)
    np.testing.assert_allclose(ds["frac"].values, ds["hits"].values / ds["trials"].values)
    assert np.all((ds["frac_low"] <= ds["frac"]) & (ds["frac"] <= ds["frac_high"]))
    assert ds["frac"].attrs["long_name"] == "hits / trials"
    # a shared number of trials broadcasts like the variable would
    by_number = stats.add_fraction(ds.sel(n=[10]), "hits", 10, "f10")
    np.testing.assert_array_equal(by_number["f10"].values, ds["frac"].sel(n=[10]).values)
    with pytest.raises(ValueError, match="^count_var"):
        stats.add_fraction(ds, "nope", "trials", "f")
    with pytest.raises(ValueError, match="^name"):
        stats.add_fraction(ds, "hits", "trials", "not a name")
    with pytest.raises(ValueError, match="^total_var"):
        stats.add_fraction(ds, "hits", 2.5, "f")


def test_add_fraction_where_masks_what_is_not_defined():
    ds = _counts()
    ds["trials"] = ds.trials.where(ds.n != 20, 0)       # no trials in one column
    ds["hits"] = ds.hits.where(ds.n != 20, 0)
    defined = ds.trials > 0
    out = stats.add_fraction_where(ds, "hits", "trials", "frac", defined)
    assert "trials_or_one" not in out
    for name in ("frac", "frac_low", "frac_high"):
        assert np.all(np.isnan(out[name].sel(n=20)))
    full = stats.add_fraction(ds.sel(n=[10, 50]), "hits", "trials", "frac")
    for name in ("frac", "frac_low", "frac_high"):
        np.testing.assert_array_equal(out[name].sel(n=[10, 50]).values, full[name].values)


def test_homogeneity_test_matches_scipy():
    k = np.array([[30, 0, 12], [45, 0, 10], [38, 0, 15]])
    n = np.array([[200, 100, 50], [210, 100, 50], [190, 100, 50]])
    stat, dof, p = stats.homogeneity_test(k, n)
    for j in (0, 2):
        table = np.column_stack([k[:, j], n[:, j] - k[:, j]])
        ref = sps.chi2_contingency(table, correction=False)
        assert stat[j] == pytest.approx(ref.statistic, rel=1e-12)
        assert p[j] == pytest.approx(ref.pvalue, rel=1e-10)
        assert dof[j] == 2
    assert stat[1] == 0 and dof[1] == 0 and p[1] == 1.0
    # equal proportions: statistic 0
    stat, dof, p = stats.homogeneity_test(np.array([10, 20]), np.array([100, 200]))
    assert stat == pytest.approx(0.0, abs=1e-12) and p == pytest.approx(1.0)
    with pytest.raises(ValueError, match="counts"):
        stats.homogeneity_test(np.array([5, 300]), np.array([100, 200]))


def test_two_proportion_z():
    z = stats.two_proportion_z(60, 100, 40, 100)
    assert z == pytest.approx(0.2 / math.sqrt(0.5 * 0.5 * 0.02))
    assert stats.two_proportion_z(0, 10, 0, 20) == 0.0


def test_t_interval_matches_scipy():
    x = np.array([0.05, 0.10, 0.02, 0.07])
    mean, low, high = stats.t_interval(x, 0.9)
    ref = sps.t.interval(0.9, x.size - 1, loc=x.mean(), scale=sps.sem(x))
    assert mean == pytest.approx(x.mean())
    assert (low, high) == pytest.approx(ref, rel=1e-12)
    assert stats.t_interval([0.3]) == (0.3, -math.inf, math.inf)


def test_sign_test_matches_scipy():
    for wins, losses in ((9, 1), (7, 3), (5, 5), (0, 10), (10, 0)):
        one, two = stats.sign_test(wins, losses)
        assert one == pytest.approx(sps.binomtest(wins, wins + losses, 0.5,
                                                  alternative="greater").pvalue)
        assert two == pytest.approx(sps.binomtest(wins, wins + losses, 0.5).pvalue)
    assert stats.sign_test(0, 0) == (1.0, 1.0)
