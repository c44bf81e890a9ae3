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


def test_binomial_z_is_the_normal_score_where_the_prediction_is_informative():
    count = np.array([30, 55, 0, 100])
    p = np.array([0.3, 0.5, 1e-4, 1.0])
    z = stats.binomial_z(count, 100, p)
    np.testing.assert_allclose(z[:2], [0.0, 5 / 5.0], rtol=1e-12)
    assert np.all(np.isnan(z[2:]))   # outside (1e-3, 1 - 1e-3): no score
    da = xr.DataArray(count, dims="t")
    got = stats.binomial_z(da, 100, xr.DataArray(p, dims="t"))
    assert got.dims == ("t",)
    np.testing.assert_array_equal(got.values, z)


def test_relative_drop_and_its_binomial_standard_error():
    assert stats.relative_drop(100, 80) == (pytest.approx(0.2), pytest.approx(0.04))
    drop, se = stats.relative_drop(50, 60)      # the count grew: a negative drop, no spread
    assert drop == pytest.approx(-0.2) and se == 0.0
    assert all(math.isnan(x) for x in stats.relative_drop(0, 0))
    # the standard error is the spread of the drop when each item is lost with probability q
    lost = np.random.default_rng(0).binomial(400, 0.3, size=20_000) / 400
    assert stats.relative_drop(400, 280)[1] == pytest.approx(lost.std(), rel=0.03)


def test_difference_z():
    assert stats.difference_z(0.3, 0.03, 0.1, 0.04) == pytest.approx(4.0)
    assert stats.difference_z(0.1, 0.0, 0.1, 0.0) == 0.0
    assert stats.difference_z(0.1, 0.03, 0.3, 0.04) == pytest.approx(-4.0)


def test_pooled_mean_se_is_the_whole_sample_s():
    import xarray as xr

    from stochastic_transformers.stats import pooled_mean_se

    rng = np.random.default_rng(5)
    x = rng.normal(1.0, 2.0, 1000)
    blocks = np.split(x, [100, 350, 351, 800])
    means = xr.DataArray([b.mean() for b in blocks], dims="block")
    m2s = xr.DataArray([((b - b.mean()) ** 2).sum() for b in blocks], dims="block")
    counts = xr.DataArray([float(b.size) for b in blocks], dims="block")
    mean, se, n = pooled_mean_se(means, m2s, counts, "block")
    assert float(n) == x.size
    assert float(mean) == pytest.approx(x.mean(), rel=1e-13)
    assert float(se) == pytest.approx(x.std(ddof=1) / np.sqrt(x.size), rel=1e-12)


def test_paired_comparison_is_the_t_interval_and_the_sign_test_of_the_gaps():
    rng = np.random.default_rng(11)
    gaps = rng.normal(0.02, 0.01, 12)
    gaps[3] = 0.0
    c = stats.paired_comparison(gaps, 0.95, 0.8)
    mean, low, high = stats.t_interval(gaps, 0.95)
    assert (c["n"], c["gap"], c["gap_low"], c["gap_high"]) == (12, mean, low, high)
    assert c["gap_sd"] == pytest.approx(np.std(gaps, ddof=1), rel=1e-14)
    assert (c["wins"], c["losses"], c["ties"]) == (11, 0, 1)
    assert (c["sign_test_p"], c["sign_test_p_two_sided"]) == stats.sign_test(11, 0)
    assert c["detectable_gap"] == stats.detectable_gap(c["gap_sd"], 12, 0.95, 0.8)
    assert c["verdict"] == "higher"
    assert stats.paired_comparison(-gaps)["verdict"] == "lower"
    assert stats.paired_comparison(gaps - gaps.mean())["verdict"] == "no_detectable_difference"
    assert stats.paired_comparison([0.3])["verdict"] == "single_pair"


def test_detectable_gap_is_the_sum_of_two_t_quantiles_in_standard_errors():
    # a large sample: the t quantiles tend to the normal ones, 1.96 + 0.84 standard errors
    n, sd = 10_000, 0.5
    expected = (sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) * sd / math.sqrt(n)
    assert stats.detectable_gap(sd, n) == pytest.approx(expected, rel=1e-3)
    assert math.isnan(stats.detectable_gap(sd, 1)) and math.isnan(stats.detectable_gap(np.nan, 5))


def test_poisson_two_sided_sums_the_counts_no_more_likely_than_the_observed():
    # independently: every count up to 200, those at most as likely as the observed one
    k = np.arange(200)
    for observed, expected in ((7, 3.0), (0, 2.5), (3, 3.0), (40, 20.0)):
        pmf = sps.poisson.pmf(k, expected)
        want = pmf[pmf <= sps.poisson.pmf(observed, expected) * (1 + 1e-9)].sum()
        assert stats.poisson_two_sided(observed, expected) == pytest.approx(min(1.0, want),
                                                                           rel=1e-9)
    # the mode is as likely as anything: p = 1; no expectation: p is 1 or 0
    assert stats.poisson_two_sided(3, 3.5) == pytest.approx(1.0)
    assert stats.poisson_two_sided(0, 0.0) == 1.0 and stats.poisson_two_sided(2, 0.0) == 0.0
