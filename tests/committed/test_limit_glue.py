"""The verdicts and numbers that the pages of Figure 1, Theorem 1, universality and Figure 4
quote through glue: each is computed by the figure's ``summary()`` by the rule its docstring
states, and every key a page quotes exists.

Hand-made datasets keep these fast; the committed paper results are used where present.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from stochastic_transformers import theory
from stochastic_transformers.figures import fig1, fig4, thm1, universality
from stochastic_transformers.notebooks import glue_values

ROOT = Path(__file__).resolve().parents[2]
ROLE = re.compile(r"\{glue(?::(?:text|md|any))?\}`([^`]+)`")


def _keys(stem):
    """The glue keys that notebooks/STEM.md quotes (its format stripped)."""
    text = (ROOT / "notebooks" / f"{stem}.md").read_text()
    return {m.group(1).split(":")[0] for m in ROLE.finditer(text)}


def _glued(prefix, stats):
    return set(glue_values(prefix, stats, _glue=lambda *a, **k: None))


# ----------------------------------------------------------------------------- fig1
def test_fig1_outward_verdict_follows_the_radial_component():
    ds = fig1.compute("smoke")
    s = fig1.summary(ds)
    # beta = 1: the self term e^beta outweighs every inward pull (>= -2/e), so outward
    assert s["field_points_outward"] is True and s["min_radial"] > 0
    # beta = 0, both tokens at 0 deg: at 180 deg the radial part is (1 - 2) / 3 < 0
    s0 = fig1.summary(fig1.compute("smoke", beta=0.0, token_angles=(0.0, 0.0)))
    assert s0["field_points_outward"] is False
    assert s0["min_radial"] == pytest.approx(-1 / 3, abs=1e-3)


def test_fig1_page_keys_are_glued():
    stats = fig1.summary(fig1.compute("smoke"))
    page = {**stats, **fig1.phrases(stats)}
    assert _keys("fig1_attention_field") <= _glued("fig1", page)


def test_fig1_verdict_follows_the_summary():
    """The opening verdict says reproduced exactly when the field points outwards and its
    projection is tangent; the midpoint reading gives the reason the summary computes."""
    s = fig1.summary(fig1.compute("smoke"))
    assert fig1.phrases(s)["verdict"].startswith("Reproduced:")
    assert fig1.phrases(s)["midpoint_reading"].startswith("repels")  # 60 deg > phi* = 51.8 deg
    s0 = fig1.summary(fig1.compute("smoke", beta=0.0, token_angles=(0.0, 0.0)))
    assert fig1.phrases(s0)["verdict"].startswith("Partly reproduced:")
    close = fig1.summary(fig1.compute("quick", token_angles=(30.0, -30.0)))
    assert fig1.phrases(close)["midpoint_reading"].startswith("attracts: a token placed")


# ----------------------------------------------------------------------------- fig4
def _fig4_map(p_a_deep):
    """The constructed map of test_figures_two_tokens, with the deeper map given."""
    betas, eps = np.array([0.0, 4.0]), np.array([0.0, 2.0])
    p_a = np.array([[[0.0, 1.0], [0.0, 0.1]], p_a_deep])
    ds = xr.Dataset({"p_antipodal": (("L", "beta", "epsilon"), p_a),
                     "p_single": (("L", "beta", "epsilon"), 1.0 - p_a),
                     "p_unclustered": (("L", "beta", "epsilon"), np.zeros_like(p_a)),
                     "epsilon_c": (("beta",), np.asarray(theory.critical_epsilon(betas))),
                     "depth_p_antipodal": (("check_L",), np.array([0.2, 0.95])),
                     "depth_p_single": (("check_L",), np.array([0.8, 0.05]))},
                    coords={"L": [100, 1000], "beta": betas, "epsilon": eps,
                            "check_L": [100, 1000]})
    ds["dominant_antipodal"] = ds.p_antipodal > ds.p_single
    ds["step_size"] = (("L", "beta", "epsilon"), theory.hybrid_step_size(
        betas[None, :, None], eps[None, None, :], np.array([100, 1000])[:, None, None]))
    return ds


def test_fig4_depth_reading_and_step_verdicts():
    # L = 100: the large-step cell above the curve (beta 4, eps 2) merges: wrong
    s = fig4.summary(_fig4_map([[0.0, 1.0], [0.0, 0.8]]))
    assert (s["L_first"], s["L_last"]) == (100, 1000)
    assert s["depth_reading"] == "all_fixed"
    assert s["large_step_merges"] and s["n_wrong_large_step_above"] == 1
    assert s["small_step_agree"] and s["n_wrong_small_step"] == 0
    assert "wrong_cells" not in s["last"] and s["last"]["n_wrong"] == 0
    assert (s["depth_check_single_first"], s["depth_check_single_last"]) == (0.8, 0.05)
    s = fig4.summary(_fig4_map([[0.0, 1.0], [0.0, 0.1]]))
    assert s["depth_reading"] == "none_fixed" and s["still_wrong"] == 1
    s = fig4.summary(_fig4_map([[0.0, 1.0], [0.0, 0.1]]).isel(L=[0]))
    assert s["depth_reading"] == "single_depth"
    # nothing wrong at the first depth
    ds = _fig4_map([[0.0, 1.0], [0.0, 0.8]])
    ds["p_antipodal"][0, 1, 1] = 0.9
    ds["p_single"] = 1.0 - ds.p_antipodal
    ds["dominant_antipodal"] = ds.p_antipodal > ds.p_single
    s = fig4.summary(ds)
    assert s["depth_reading"] == "none_wrong" and not s["large_step_merges"]


def test_fig4_page_keys_exist_on_the_constructed_map():
    stats = fig4.summary(_fig4_map([[0.0, 1.0], [0.0, 0.8]]))
    values, phrases = fig4.page_values(stats), fig4.phrases(stats)
    assert not {"wrong_cells", "undecided_cells"} & (set(values) | set(values["by_L"][100]))
    assert "cells" not in values["reference"]
    assert {"misses", "deeper", "depth", "horizon"} <= set(phrases)
    own = {"fig4.source", "fig4.elapsed_text"} | {f"fig4.{k}" for k in phrases}
    assert _keys("fig4_noise_threshold") <= _glued("fig4", values) | own


def test_fig4_verdict_follows_its_rule():
    """'partly reproduced' where the small-step cells agree and some large-step cell does not;
    'reproduced' where every decided cell agrees."""
    s = fig4.summary(_fig4_map([[0.0, 1.0], [0.0, 0.8]]))
    assert s["share_agree"] == 0.75 and s["small_step_agree"]
    assert s["verdict"] == "partly reproduced"
    assert "every miss lies above the curve" in fig4.phrases(s)["misses"]
    assert fig4.phrases(s)["deeper"].startswith("At $L$ = 1000 that share rises to **100%**")
    ds = _fig4_map([[0.0, 1.0], [0.0, 0.8]])
    ds["p_antipodal"][0, 1, 1] = 0.9
    ds["p_single"] = 1.0 - ds.p_antipodal
    ds["dominant_antipodal"] = ds.p_antipodal > ds.p_single
    assert fig4.summary(ds)["verdict"] == "reproduced"


def test_fig4_step_example_is_the_formula():
    # the page: at beta = 4, eps = 0.5 and L = 100 the step's random part is e^4/40, about 1.4
    assert float(theory.hybrid_step_size(4.0, 0.5, 100)) == pytest.approx(0.5 * math.exp(4) / 20)
    assert round(float(theory.hybrid_step_size(4.0, 0.5, 100)), 1) == 1.4
    assert "$e^4/40 \\approx 1.4$" in (ROOT / "notebooks" / "fig4_noise_threshold.md").read_text()


# ----------------------------------------------------------------------------- thm1
def test_thm1_summary_fields_on_the_committed_result():
    path = ROOT / "results" / "thm1_paper.nc"
    if not path.is_file():
        pytest.skip("thm1_paper.nc is not committed")
    ds = xr.open_dataset(path)
    s = thm1.summary(ds)
    assert s["beta_c"] == pytest.approx(0.5 * math.acosh(2.0))
    assert s["both_poles_attract"] is True
    assert (s["L_smallest"], s["L_largest"]) == (int(ds.L[0]), int(ds.L[-1]))
    assert s["weak_error_largest_L"] == s["weak_error"][s["L_largest"]]
    assert len(s["per_pair"]) == ds.function.size * ds.time.size
    for pair in s["per_pair"]:
        b = ds.bias.sel(function=pair["function"], time=pair["time"])
        late = b.L.values >= s["fit_L_min"]
        le = (b * b.L).values[late]
        assert (pair["Le_min"], pair["Le_max"]) == (le.min(), le.max())
    # every key but the source comes from the summary and the page's phrases
    page = {**s, **thm1.phrases(s)}
    assert _keys("thm1_weak_convergence") <= _glued("thm1", page) | {"thm1.source"}


# ----------------------------------------------------------------------------- universality
def test_universality_laws_agree_verdict(universality_dataset):
    same = universality_dataset([[5, 120, 300]] * 3, horizon_counts=[5, 3, 1])
    s = universality.summary(same)
    assert s["laws_agree"] is True and s["p_total"] > universality.ALPHA
    assert s["horizon_decays"] == {0.5: True} and s["horizon_laws_agree"] == {0.5: True}
    assert s["has_beta_above_c"] and s["beta_c"] == pytest.approx(0.5 * math.acosh(2.0))
    assert s["conv_L_first"] == 5 and s["conv_L_last"] == s["L"]
    apart = universality_dataset([[5, 120, 300], [5, 120, 300], [5, 200, 300]],
                                 horizon_counts=[5, 5, 5])
    s = universality.summary(apart)
    assert s["laws_agree"] is False
    assert s["min_p_between_bonferroni"] <= universality.ALPHA
    assert s["horizon_decays"] == {0.5: False}


def test_universality_page_keys_exist_in_a_paper_scale_summary(universality_dataset):
    """The page's keys are computed whenever the scale runs the L sweep and the horizon
    check (every scale does), whatever the betas."""
    s = universality.summary(universality_dataset([[5, 120, 300]] * 3,
                                                  horizon_counts=[5, 3, 1]))
    # every key but the source comes from the summary and the page's phrases
    page = {**s, **universality.phrases(s)}
    assert _keys("universality_value_laws") <= _glued("universality", page) | {
        "universality.source"}
    paper = universality.SCALES["paper"]
    assert paper["convergence_beta"] is not None and paper["convergence_Ls"]
    assert any(0 < b < theory.critical_beta(paper["d"]) for b in paper["betas"])
    assert any(b > theory.critical_beta(paper["d"]) for b in paper["betas"])
