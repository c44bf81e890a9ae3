"""The two-token pages quote their numbers and verdicts from the figures' summaries."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from stochastic_transformers import theory
from stochastic_transformers.figures import fig8, overlap
from stochastic_transformers.figures.base import load_committed

ROOT = Path(__file__).resolve().parents[2]


def test_fig8_thresholds_of_the_figure3_grid_are_the_theory():
    """The thresholds the regime paragraph quotes, whatever the run's grid of d."""
    grid = fig8._figure3_grid()
    dims = fig8.SCALES["paper"]["d"]
    assert (grid["d_min"], grid["d_max"]) == (min(dims), max(dims))
    for d in dims:
        assert grid["beta_c"][d] == pytest.approx(theory.critical_beta(d))
    last, beta = grid["regime_ii_last_d"], grid["regime_ii_beta"]
    assert grid["regime_ii_next_d"] == last + 1
    assert grid["beta_c_last"] < beta < grid["beta_c_next"]
    assert all(theory.antipodal_attracting(beta, d) for d in range(min(dims), last + 1))
    assert not theory.antipodal_attracting(beta, last + 1)


def test_fig8_verdicts_on_the_committed_result():
    """At paper scale the page and the chapter say that every point settles early."""
    ds = load_committed("fig8")
    if ds is None:
        pytest.skip("no committed fig8 result")
    s = fig8.summary(ds)
    assert s["settled_early"] and s["flat"] and s["agrees_with_theory"] and s["agrees_with_paper"]
    assert s["all_settled"] and s["max_settle_fraction"] == pytest.approx(s["max_settle"] / s["T"])
    assert s["t_half_trend"] == "all" and s["n_t_half_decreasing"] == s["n_betas"] == 3
    tr = s["transient_antipodal"]
    assert tr["visited"] and tr["reading"] == "transient"
    assert {p["attracting"] for p in s["per_beta"].values()} == {"none", "some", "all"}
    assert all(p["settled"] for p in s["per_beta"].values())


def test_fig8_verdicts_follow_their_thresholds():
    """The verdicts flip at the named module constants."""
    ds = load_committed("fig8")
    if ds is None:
        pytest.skip("no committed fig8 result")
    late = ds.late_change.copy()
    ds["late_change"] = late + 2 * fig8.FLAT_LATE_CHANGE
    s = fig8.summary(ds)
    assert not s["flat"] and not s["agrees_with_paper"]
    ds["late_change"] = late
    ds["settle_time"] = ds.settle_time.where(ds.d != ds.d.values[0], np.inf)
    s = fig8.summary(ds)
    assert not s["all_settled"] and not s["settled_early"] and not s["agrees_with_paper"]
    assert not s["per_beta"][float(ds.beta.values[0])]["settled"]


def test_overlap_counts_the_trajectories_within_the_tolerance():
    ds = overlap.compute("smoke")
    s = overlap.summary(ds)
    gaps = np.minimum(ds.one_minus_overlap.values, ds.one_plus_overlap.values)[:, -1]
    assert s["n_within_tol"] == int(np.sum(gaps <= overlap.TOL)) and s["tol"] == overlap.TOL
    assert s["n_single"] + s["n_antipodal"] == s["n_traj"]


@pytest.mark.parametrize("page", ["book/two_tokens.md", "notebooks/fig8_horizons.md",
                                  "notebooks/overlap_trajectories.md"])
def test_no_glue_role_leaves_its_key_to_the_last_colon(page):
    """myst-nb splits a glue:text target at its last ':', so a cross-page key without a
    format (``NB.ipynb::KEY``) would be read as key ``NB.ipynb:``; every such role names one."""
    text = (ROOT / page).read_text()
    for target in re.findall(r"\{glue:text\}`([^`]+)`", text):
        if "::" in target:
            assert ":" in target.split("::", 1)[1], target
    assert "Markdown(f" not in text


@pytest.mark.parametrize("beta, d", [(1.0, 4), (0.3, 6), (2.5, 9)])
def test_overlap_log_gap_rates_are_the_limit_of_lemma4_at_the_poles(beta, d):
    """The rates the overlap page draws: mu/g + nu^2/(2 g^2) near +1 and
    -(mu/h - nu^2/(2 h^2)) near -1, from the softmax coefficients of theory at a gap 1e-7."""
    g = 1e-7
    rates = overlap.log_gap_rates(beta, d)
    mu, nu = theory.overlap_drift(1 - g, beta, d), theory.overlap_diffusion(1 - g, beta, d)
    assert rates["single"] == pytest.approx(mu / g + 0.5 * nu**2 / g**2, rel=1e-6)
    mu, nu = theory.overlap_drift(-1 + g, beta, d), theory.overlap_diffusion(-1 + g, beta, d)
    assert rates["antipodal"] == pytest.approx(-(mu / g - 0.5 * nu**2 / g**2), rel=1e-6)
    # the antipodal rate is positive exactly where -1 attracts (Theorem 2)
    assert (rates["antipodal"] > 0) == theory.antipodal_attracting(beta, d)


def test_overlap_committed_rates_and_verdict():
    ds = load_committed("overlap")
    if ds is None:
        pytest.skip("no committed overlap result")
    s = overlap.summary(ds)
    for side in ("single", "antipodal"):
        assert s["rate"][side] == pytest.approx(s["rate_theory"][side], rel=0.1)
    assert overlap.phrases(s)["verdict"].startswith("As predicted: all 12 paths")


def test_fig3_verdict_on_the_committed_result():
    """The page's opening: the transition sits at beta_c(d) (no antipodal pair more than
    0.15 below it, some at every point more than 0.15 above it), with a resolved deficit."""
    from stochastic_transformers.figures import fig3

    ds = load_committed("fig3")
    if ds is None:
        pytest.skip("no committed fig3 result")
    s = fig3.summary(ds)
    assert s["n_positive_below"] == 0 and s["n_zero_above"] == 0
    assert s["n_near"] + s["n_far"] == s["n_informative"]
    words = fig3.phrases(s)
    assert words["verdict"].startswith("Reproduced:") and "deficit" in words["verdict"]
    assert "deficit" in words["far_reading"]
    ds["p_antipodal"] = ds.p_antipodal.where(ds.beta != ds.beta.values[0], 0.01)
    assert fig3.phrases(fig3.summary(ds))["verdict"].startswith("Not reproduced:")


def test_fig8_phrases_follow_the_verdicts():
    ds = load_committed("fig8")
    if ds is None:
        pytest.skip("no committed fig8 result")
    s = fig8.summary(ds)
    words = fig8.phrases(s)
    assert words["verdict"].startswith("Reproduced:")
    assert words["regime"] == {0.25: "no d", 1.2: "d = 4, 5, 6, 7", 3.0: "every d"}
    assert "transient" in words["transient"]
    ds["late_change"] = ds.late_change + 2 * fig8.FLAT_LATE_CHANGE
    words = fig8.phrases(fig8.summary(ds))
    assert words["verdict"].startswith("Partly reproduced:") and "still moves" in words["verdict"]
