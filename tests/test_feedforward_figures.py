"""The feedforward figures' own logic, and the statements of the chapter "Feedforward blocks"
that are not glued from a notebook."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from stochastic_transformers import feedforward
from stochastic_transformers.figures import ff_threshold

CHAPTER = Path(__file__).resolve().parents[1] / "book" / "feedforward.md"


def _sech2(beta):
    return np.cosh(beta) ** -2.0


def test_the_fitted_root_recovers_the_formulas_root_and_its_delta_method_error():
    betas = np.linspace(0.0, 1.6, 17)
    se = np.full_like(betas, 0.1)
    # The limit's exponent itself (affine in sech^2 beta): the root is the formula's, exactly.
    for d, r in ((4, 0.5), (4, 1.0), (6, 0.0), (6, 4.0)):
        rate = np.array([feedforward.boundary_at_minus_one(b, d, r, "erf")["exponent"]
                         for b in betas])
        root, root_se = ff_threshold.fitted_root(betas, rate, se)
        assert root == pytest.approx(feedforward.critical_beta(d, r, "erf"), abs=1e-12)
    rate = 3.0 * (_sech2(betas) - _sech2(0.73))
    root, root_se = ff_threshold.fitted_root(betas, rate, se)
    assert root == pytest.approx(0.73, abs=1e-12)
    # The fit uses 0.6, 0.7 | 0.8, 0.9; the line's error at u0 is se * sqrt(1/n + (u0 -
    # mean)^2 / Suu), divided by the slope 3 and by |du/dbeta| = 2 u0 sqrt(1 - u0).
    u, u0 = _sech2(np.array([0.6, 0.7, 0.8, 0.9])), _sech2(0.73)
    err_u = 0.1 * math.sqrt(1 / 4 + (u0 - u.mean()) ** 2 / np.sum((u - u.mean()) ** 2)) / 3
    assert root_se == pytest.approx(err_u / (2 * u0 * math.sqrt(1 - u0)), rel=1e-9)
    assert all(math.isnan(v) for v in ff_threshold.fitted_root(betas, rate + 10.0, se))


def test_the_fitted_root_is_unbiased_under_noise():
    # 2,000 noisy replicates of the same curve: the roots' spread matches the delta method
    # and their mean sits on the truth (tolerances 4 standard errors of each statistic).
    rng = np.random.default_rng(0)
    betas = np.linspace(0.0, 1.6, 17)
    se = np.full_like(betas, 0.05)
    roots, errs = [], []
    for _ in range(2000):
        noise = rng.normal(0, 0.05, betas.size)
        root, err = ff_threshold.fitted_root(betas, 3.0 * (_sech2(betas) - _sech2(0.73)) + noise, se)
        roots.append(root)
        errs.append(err)
    roots = np.array(roots)
    assert abs(roots.mean() - 0.73) < 4 * roots.std() / math.sqrt(roots.size)
    assert roots.std() == pytest.approx(np.mean(errs), rel=4 * math.sqrt(0.5 / roots.size) + 0.05)


def _threshold_run(shift):
    """A constructed ff_threshold dataset: the formula's exponents with a 1/L bias (removed
    exactly by the extrapolation) plus ``shift``, standard errors 0.01."""
    import xarray as xr

    d, rs, betas, Ls = [4], [0.0, 0.5, 1.0], np.linspace(0.0, 1.6, 17), [100, 400]
    exact = np.array([[[feedforward.boundary_at_minus_one(b, 4, r, "erf")["exponent"]
                        for b in betas] for r in rs]])
    exponent = exact[..., None] + shift + 5.0 / np.array(Ls)
    ds = xr.Dataset({"exponent": (("d", "r", "beta", "L"), exponent),
                     "exponent_se": (("d", "r", "beta", "L"), np.full(exponent.shape, 0.01)),
                     "gap_max": (("d", "r", "beta", "L"), np.full(exponent.shape, 1e-4)),
                     "n_traj": (("d", "r", "beta", "L"), np.full(exponent.shape, 1000))},
                    coords={"d": d, "r": rs, "beta": betas, "L": Ls},
                    attrs={"fixed_T": 1.0, "fixed_gap0": 1e-12})
    return ff_threshold.summary(ff_threshold.finish(ds, {"activation": "erf"}))


def test_the_threshold_verdict_goes_either_way():
    ok, off = _threshold_run(0.0), _threshold_run(0.1)
    assert ok["thresholds_agree"] and ok["max_abs_threshold_z"] < 1e-6 and ok["n_thresholds"] == 3
    assert ok["threshold_chi2_p"] == pytest.approx(1.0)
    assert not off["thresholds_agree"] and off["threshold_chi2_p"] < 1e-6
    assert ff_threshold.phrases(ok)["verdict"].startswith("Confirmed: all 3 measured")
    assert "not every measured threshold" in ff_threshold.phrases(off)["verdict"]


def test_the_pairs_z_uses_the_expected_counts_error_and_leaves_out_the_small_points():
    from stochastic_transformers.figures import ff_pairs

    n = np.full(4, 1000.0)
    z, left_out = ff_pairs.calibrated_z(np.array([60, 3, 990, 492]), n,
                                        np.array([0.05, 0.002, 0.998, 0.5]))
    assert left_out == 2 and z.size == 2
    assert z[0] == pytest.approx(10 / math.sqrt(1000 * 0.05 * 0.95))
    assert z[1] == pytest.approx(-8 / math.sqrt(1000 * 0.5 * 0.5))
    # calibrated where points expect 5 to 50 pairs: a perfect match passes the verdict's test
    rng = np.random.default_rng(1)
    p = rng.uniform(0.0005, 0.005, 4000)
    z, _ = ff_pairs.calibrated_z(rng.binomial(10_000, p), np.full(p.size, 10_000.0), p)
    share = float(np.mean(np.abs(z) <= 2))
    assert 0.94 < share < 0.97
    assert ff_pairs.follows_limit({"n_informative": z.size, "share_within_2se": share})[0]
    z_off, _ = ff_pairs.calibrated_z(rng.binomial(10_000, 1.3 * p), np.full(p.size, 10_000.0), p)
    assert not ff_pairs.follows_limit({"n_informative": z.size,
                                       "share_within_2se": float(np.mean(np.abs(z_off) <= 2))})[0]


def test_an_erf_block_lowers_the_threshold_up_to_d_11_and_raises_it_from_d_12():
    for d in range(4, 12):
        assert feedforward.critical_beta(d, 1.0, "erf") < feedforward.critical_beta(d, 0.0, "erf")
    for d in (12, 16):
        assert feedforward.critical_beta(d, 1.0, "erf") > feedforward.critical_beta(d, 0.0, "erf")
    assert "from\n$d = 12$ on" in CHAPTER.read_text() or "from $d = 12$ on" in CHAPTER.read_text()


def test_the_chapter_quotes_the_quadrature_order_and_the_relu_scale():
    text = CHAPTER.read_text()
    assert f"{feedforward.QUADRATURE_ORDER} nodes" in text
    # "r of order 1 / kappa(1), that is r = 2 for ReLU"
    assert 1.0 / float(feedforward.kernel(1.0, "relu")) == pytest.approx(2.0)
    assert re.search(r"r \\approx 2\$ for ReLU", text)


@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_an_even_part_makes_minus_one_an_entrance_for_every_split(act):
    for m1, m2 in ((1, 1), (2, 1), (3, 5)):
        b = feedforward.boundary_at_minus_one(2.0, 4, 0.5, act, m1=m1, m2=m2)
        assert b["kind"] == "entrance" and b["drift"] > 0


@pytest.mark.parametrize("act, first_d, least_r", [("erf", 12, 10), ("tanh", 15, 14),
                                                   ("gelu", 31, 33)])
def test_plus_one_repels_only_from_the_dimension_and_strength_the_chapter_gives(act, first_d, least_r):
    def repels(d, r):
        return feedforward.boundary_at_plus_one(1.0, d, r, act)["kind"] == "repelling"

    huge = 1e6
    assert not repels(first_d - 1, huge) and repels(first_d, huge)
    # The strength needed, (d - 1) / c(d), falls towards 1 / (E phi'^2 - E phi^2) as d grows:
    # "about" the chapter's integer (within 5%), and never below it by more than that.
    assert not repels(10**6, 0.95 * least_r)
    assert repels(10**6, 1.05 * least_r)
    text = CHAPTER.read_text()
    assert f"from $d = {first_d}$" in text and f"{least_r} ({act if act != 'gelu' else 'GELU'})" in text


def test_the_figures_threshold_is_nan_where_minus_one_attracts_at_every_beta():
    # erf, d = 4: a block of strength 4 makes -1 attract at beta = 0 already (the figure's
    # r = 4 column has no threshold); a weaker one only lowers the threshold
    assert feedforward.attracts_at_every_beta(4, 4.0, "erf")
    assert math.isnan(ff_threshold.theory_threshold(4, 4.0, "erf"))
    assert ff_threshold.theory_threshold(4, 0.5, "erf") == feedforward.critical_beta(4, 0.5, "erf")
    assert 0 < ff_threshold.theory_threshold(4, 0.5, "erf") < ff_threshold.theory_threshold(4, 0.0, "erf")


def test_the_feedforward_verdicts_follow_their_checks():
    from stochastic_transformers.figures import ff_pairs, ff_tokens

    assert ff_pairs.verdict([(True, "a", "not a"), (True, "b", "not b")]) == "Confirmed: a; b."
    assert ff_pairs.verdict([(True, "a", "not a"), (False, "b", "not b")]) == \
        "Partly confirmed: a; not b."
    assert ff_pairs.verdict([(False, "a", "not a")]) == "Not confirmed: not a."
    # A few points beyond 2 standard errors are what a perfect match gives; many are not.
    assert ff_pairs.follows_limit({"n_informative": 12, "share_within_2se": 10 / 12})[0]
    assert not ff_pairs.follows_limit({"n_informative": 158, "share_within_2se": 0.85})[0]
    stats = {"even_block_no_pairs": False, "even_pairs": 3, "odd_block_more_pairs": True,
             "odd_gain_n_more": 5, "odd_gain_n": 6, "odd_gain_combined_z": 7.4}
    text = ff_tokens.phrases(stats)["verdict"]
    assert text.startswith("Partly confirmed: 3 configurations")
    assert "at 5 of 6 points (combined z 7.4)" in text


def test_the_feedforward_tables_show_no_nan_and_name_the_missing_threshold():
    from stochastic_transformers.figures import ff_tokens

    nan = float("nan")
    rows = {"4_4": {"theory": nan, "measured": nan, "se": nan, "z": nan},
            "6_4": {"theory": 0.342, "measured": 0.34, "se": 0.011, "z": -0.02}}
    table = ff_threshold.tables({"thresholds": rows, "by_L": {100: {
        "mean_bias": 0.07, "share_within_2se": 0.66, "max_abs_z": 11.3}},
        "share_limit_within_2se": 0.94, "max_abs_limit_z": 3.8})["thresholds"]
    assert "none: −1 attracts at every β" in table and "| +0.0 |" in table
    row = {"none": 0.06, "relu": 0.0, "erf": 0.1, "none_balanced": 1.0, "relu_balanced": nan,
           "erf_balanced": nan}
    fractions = ff_tokens.tables({"rows": {"4_1": row, "4_2": dict(row, erf_balanced=0.5)},
                                  "odd_gain_z": {"4_1": -0.01, "4_2": 2.5}})["fractions"]
    assert "balanced share, relu" not in fractions and "balanced share, erf" in fractions
    for text in (table, fractions):
        assert "nan" not in text.lower() and "-0.0" not in text


def test_the_tokens_balanced_share_is_judged_per_setting_at_the_largest_beta():
    import xarray as xr

    from stochastic_transformers.figures import ff_tokens

    def run(balanced):
        # N = 4 at beta = 1, 4; splits at beta = 4 of 100: `balanced` 2-2, the rest 1-3 (the
        # r = 0 erf arm, a second copy of the paper's model the page does not show, is all
        # balanced and must be ignored)
        dims, shape = ("n_tokens", "activation", "r", "beta"), (1, 2, 2, 2)
        splits = np.zeros(shape + (ff_tokens.MAX_SPLIT + 1,))
        splits[..., 2] = 100.0
        splits[0, :, :, 1, 2], splits[0, :, :, 1, 1] = balanced, 100 - balanced
        splits[0, 1, 0, 1, 2], splits[0, 1, 0, 1, 1] = 100, 0
        ds = xr.Dataset({"split_counts": (dims + ("split",), splits),
                         "n_antipodal_pair": (dims, np.full(shape, 100)),
                         "n_single": (dims, np.full(shape, 900)), "n_traj": (dims, np.full(shape, 1000))},
                        coords={"n_tokens": [4], "activation": ["relu", "erf"], "r": [0.0, 0.5],
                                "beta": [1.0, 4.0]}, attrs={"fixed_T": 20.0, "fixed_L": 100})
        ds = ff_tokens.add_outcome_fractions(ds, ("antipodal_pair", "single"))
        ds["balanced_share"] = (dims, splits[..., 2] / splits.sum(-1))
        return ff_tokens.summary(ds)

    s = run(30)
    # settings shown: no block (relu, r = 0), relu and erf at r = 0.5 -> 3 at beta = 4
    assert s["top_beta"] == 4.0 and s["top_n_settings"] == 3
    assert s["top_balanced_max"] == pytest.approx(0.3)
    assert s["top_unbalanced_min_z"] == pytest.approx(0.2 * 2 * 10)
    assert run(60)["top_unbalanced_min_z"] < 0
