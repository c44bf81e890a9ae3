"""The two-token pages quote their numbers and verdicts from the figures' summaries."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from stochastic_transformers import theory
from stochastic_transformers.figures import fig8, overlap
from stochastic_transformers.figures.base import load_committed

ROOT = Path(__file__).resolve().parents[1]


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
