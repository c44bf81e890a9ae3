"""The numbers that the chapter "Many tokens" (book/many_tokens.md) and its pages quote by glue.

The chapter and the pages Figure 6, Figure 7, *Two clusters, exactly* and Figure 9 take their
numbers from the figures' ``summary()`` and from :func:`two_clusters.chapter_numbers` at build time.
These tests check those computations: against independent implementations where the number
comes from the theory, and, for the fixed wording that the chapter wraps around the glued
numbers (a cross-page glue cannot change the words), that the committed paper-scale results
still say what the words say.  The last test checks that every cross-page role of those pages
names a format, without which myst-nb misreads ``PAGE.ipynb::KEY``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from stochastic_transformers import two_clusters
from stochastic_transformers.figures import clusters, fig6, fig7, fig9
from test_prose_claims import _balanced_like_part, _median_q

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"


def _committed(name):
    pytest.importorskip("xarray")
    from stochastic_transformers.figures import load_committed

    if not (RESULTS / f"{name}_paper.nc").is_file():
        pytest.skip(f"results/{name}_paper.nc is not committed")
    return load_committed(name)


# --- the reduced diffusion: two_clusters and two_clusters.chapter_numbers ----------------


@pytest.mark.parametrize("beta", [0.5, 1.0, 2.0, 5.0, 12.0])
@pytest.mark.parametrize("split", [(1, 2), (1, 3), (2, 3), (3, 1)])
def test_balanced_like_exponent_matches_an_independent_formula(beta, split):
    lam, ell = two_clusters.balanced_like_exponent(beta, 4, *split)
    lam_ref, ell_ref = _balanced_like_part(beta, 4, *split)
    assert lam == pytest.approx(lam_ref, rel=1e-12, abs=1e-12)
    assert ell == pytest.approx(ell_ref, rel=1e-12)


def test_balanced_like_exponent_is_the_frozen_coefficients_limit():
    """mu/v - s^2/(2 v^2) and s^2/v^2 of antipodal_coefficients where g^2 << v << 1."""
    for attention, beta in (("softmax", 6.0), ("unnormalized", 0.0)):
        v = 1e-5
        mu, s2 = two_clusters.antipodal_coefficients(v, beta, 4, 2, 2, attention=attention)
        lam, ell = two_clusters.balanced_like_exponent(beta, 4, 2, 2, attention=attention)
        assert s2 / v**2 == pytest.approx(ell, rel=1e-4)
        assert mu / v - s2 / (2 * v * v) == pytest.approx(lam, rel=1e-4, abs=1e-4)
        # balanced: lambda is the exponent that boundaries() reports at -1
        got = two_clusters.boundaries(beta, 4, 2, 2, attention=attention)["antipodal_exponent"]
        assert got == pytest.approx(lam, rel=1e-3, abs=1e-3)


def test_frozen_hovering_quantile_matches_an_independent_quadrature():
    for lam, ell in ((-2.0, 8.0), (-1.0, 6.0), *(_balanced_like_part(5.0, 4, 1, 3),)):
        assert two_clusters.frozen_hovering_quantile(4, lam, ell)[0] == pytest.approx(
            _median_q(4, lam, ell), rel=2e-3)
    # and it is the large-beta limit of hovering_depth / hovering_scale
    ratio = (two_clusters.hovering_depth(8.0, 4, 1, 3)[0]
             / two_clusters.hovering_scale(8.0, 1, 3))
    lam, ell = two_clusters.balanced_like_exponent(8.0, 4, 1, 3)
    assert ratio == pytest.approx(two_clusters.frozen_hovering_quantile(4, lam, ell)[0], rel=0.01)


def test_theory_numbers_are_the_chapters_hovering_statements():
    """The statements of book/many_tokens.md (item *Hovering* and the proof of item 3),
    recomputed by this file's own formulas and the library's primitives."""
    th = two_clusters.chapter_numbers(d=4, tol=1e-3)
    for beta in (1.0, 2.0):
        rates = [2 * abs(lam) / ell for lam, ell in
                 (_balanced_like_part(beta, 4, *s) for s in two_clusters.CHAPTER_SPLITS)]
        assert th["per_beta"][beta]["two_lam_over_ell"] == pytest.approx(np.mean(rates), rel=1e-9)
    assert th["per_beta"][1.0]["two_lam_over_ell"] == pytest.approx(0.22, abs=0.005)
    assert th["per_beta"][2.0]["two_lam_over_ell"] == pytest.approx(0.45, abs=0.005)
    large = th["large_beta"]
    assert large["lam"] == pytest.approx(-2.0, abs=1e-6) and large["ell"] == pytest.approx(8.0, abs=1e-6)
    assert large["median_q"] == pytest.approx(_median_q(4, -2.0, 8.0), rel=2e-3)
    assert large["two_lam_over_ell"] == pytest.approx(0.5, abs=1e-6)
    scales = {b: [two_clusters.hovering_scale(b, *s) for s in two_clusters.CHAPTER_SPLITS]
              for b in two_clusters.CHAPTER_BETAS}
    for b in two_clusters.CHAPTER_BETAS:
        assert th["per_beta"][b]["scale_min"] == min(scales[b])
        assert th["per_beta"][b]["scale_max"] == max(scales[b])
    deep = [b for b in two_clusters.CHAPTER_BETAS if b >= two_clusters.DEEP_BETA]
    assert th["deep"]["scale_max"] == max(max(scales[b]) for b in deep)
    assert th["deep"]["scale_max"] <= 2e-4
    assert 0.65 < th["deep"]["ratio_min"] and th["deep"]["ratio_max"] < 1.3
    assert 0.002 < th["shallow"]["ratio_min"] and th["shallow"]["ratio_max"] < 0.37
    # the chapter says the scale at beta = 2 is "not below the tolerance by any margin"
    assert th["per_beta"][2.0]["scale_min"] > th["tol"] / 2
    plus = th["plus_one"]
    assert plus["n_cases"] == 2 * math.prod(len(v) for v in two_clusters.PLUS_ONE_GRID.values())
    assert 0 < plus["max_rel_error"] < 2e-5


# --- the committed results behind the chapter's fixed wording --------------------------------


def test_figure_7_summary_says_what_the_chapter_says():
    """book/many_tokens.md, Figure 7: the fraction stays put at the other betas, falls at the
    beta with the most losses; the net loss is all in the unequal splits; the equal ones stay.
    The numbers are those test_prose_claims reads from the committed result."""
    s = fig7.summary(_committed("fig7"))
    assert s["scale"] == "paper" and s["n_tokens"] == 4 and s["d"] == 4
    assert s["t_ref"] == pytest.approx(56.3)
    most = s["most_lost"]
    assert s["most_lost_beta"] == most["beta"] == 4.0
    assert (most["p_ref"], most["p_final"]) == (pytest.approx(0.651, abs=5e-4),
                                               pytest.approx(0.550, abs=5e-4))
    assert (most["lost"], most["gained"], most["net_loss"]) == (1089, 83, 1006)
    assert most["unbalanced_drop"] == most["net_loss"] and most["balanced_holds"] is True
    assert (most["split_ref"], most["split_final"]) == ({1: 3898, 2: 2612}, {1: 2892, 2: 2612})
    others = s["others"]
    assert others["max_dev_max"] <= fig7.LEVEL_TOL
    assert others["t_level_max"] <= 30.0          # "levels off by t = 30" before it was glued
    for b in (6.0, 8.0):
        assert s["per_beta"][b]["t_level"] <= others["t_level_max"]
    assert s["t_clustered_95_max"] < s["T"] / 10


def test_clusters_summary_says_what_the_page_says():
    """Page *Two clusters, exactly*, after the figure: at beta = 2 most 1-vs-3 splits have
    broken up by t ~ 1, at beta = 4 a few percent by T; unbalanced splits with unnormalised
    attention break up at once; the depth at the largest softmax beta is of order 1e-8."""
    s = clusters.summary(_committed("clusters"))
    assert s["t_early"] == pytest.approx(1.1)
    assert s["cells"][("softmax", "1,3", 2.0)]["p_early"] < 0.5
    assert s["cells"][("softmax", "1,3", 4.0)]["p_final"] > 0.9
    hover = s["hover_largest_softmax"]
    assert hover["beta"] == 5.0 and 1e-9 < hover["scale_min"] < hover["scale_max"] < 1e-7
    assert s["n_splits"] == 5
    assert s["unbalanced_leave"]
    # the page's verdict (clusters.phrases), with the committed run's unnormalised miss and
    # the rerun of tests/committed/test_results.py (explain_worst) that explains it
    miss = {"split": "2,3", "beta": 2.0, "z": 17.4, "t_worst": 0.01, "t_check": 1.1,
            "check": {100: 18.1, 400: 2.4, 1600: 1.5}, "explained": True}
    verdict = clusters.phrases(s, {"unnormalized": miss})["verdict"]
    assert verdict.startswith("**Confirmed for softmax:** with softmax attention every split")
    assert "within 4 standard errors of the limit (largest |z| 3.8)" in verdict
    assert "it is the discretisation's, not the reduction's" in verdict
    beyond = s["persist_n_beyond_by_attention"]["unnormalized"]
    assert beyond > 1 and f"the {beyond - 1} other cells beyond that bound were not rerun" in verdict
    assert clusters.phrases(s, {"unnormalized": {**miss, "explained": False}})[
        "verdict"].startswith("**Partly confirmed:**")
    assert s["depth_agree"] and s["depth_n_cells"] == len(s["depth_ratios"]) > 0


def test_verdicts_behind_the_chapters_words():
    """Figure 6: the probability is zero at small beta and positive later for every N, and even
    N have antipodal pairs from smaller beta on than odd N (parity).
    Figure 9: comparable rates at small beta; at large beta the stochastic model is faster,
    the deterministic flow has plateaus and the stochastic one none."""
    s6 = fig6.summary(_committed("fig6"))
    assert s6["even_onset_earlier"] is True and s6["odd_all_unbalanced"] is True
    for row in s6["per_n"].values():          # zero at small beta, positive later, every N
        assert row["p_at_beta0"] == 0.0 and np.isfinite(row["first_beta_positive"])
    v = fig9.summary(_committed("fig9"))["verdicts"]
    assert v["comparable_small"] and v["one_cluster_small"] and v["faster_large"]
    assert v["deterministic_plateaus"] and v["stochastic_no_plateau"]


# --- the pages' roles ------------------------------------------------------------------------

_PAGES = ("book/many_tokens.md", "notebooks/fig6_antipodal_pairs.md",
          "notebooks/fig7_persistence.md", "notebooks/clusters_two_point.md",
          "notebooks/fig9_convergence_speed.md")


@pytest.mark.parametrize("page", _PAGES)
def test_cross_page_glue_roles_name_a_format(page):
    """myst-nb splits ``{glue:text}`PAGE.ipynb::KEY``` at its last colon, so a cross-page
    role without a format (``...::KEY:s`` for text) reads a wrong key."""
    text = (ROOT / page).read_text()
    for target in re.findall(r"\{glue:text\}`([^`]+)`", text):
        if "::" in target:
            assert ":" in target.split("::", 1)[1], target
    assert not re.search(r"\{glue(:md|:any)?\}`[^`]*::", text), "glue:md works on its own page only"


def _page_keys(stem):
    """The glue keys that notebooks/STEM.md quotes on its own page (formats stripped)."""
    text = (ROOT / "notebooks" / f"{stem}.md").read_text()
    return {m.group(1).split(":")[0]
            for m in re.finditer(r"\{glue(?::(?:text|md|any))?\}`([^`]+)`", text)}


def test_figure_6_and_7_pages_take_every_key_from_package_code():
    """Every key the pages quote comes from the figure's page_values() or phrases() (and the
    glue call's source and elapsed_text), computed on the committed results; the verdict
    sentences are the ones the page states for them."""
    from stochastic_transformers.notebooks import glue_values

    def glued(prefix, values, phrases):
        keys = set(glue_values(prefix, values, _glue=lambda *a, **k: None))
        return keys | {f"{prefix}.{k}" for k in (*phrases, "source", "elapsed_text")}

    source = "the committed paper-scale result"
    ds6 = _committed("fig6")
    s6 = fig6.summary(ds6)
    phrases6 = fig6.phrases(s6)
    assert _page_keys("fig6_antipodal_pairs") <= glued("fig6", s6, phrases6)
    assert phrases6["parity_reading"].startswith("The onset depends on the parity")
    assert s6["verdict"] == "reproduced"
    assert phrases6["onset"].startswith("for every $N$ the 95% band of the fraction leaves zero")
    ds7 = _committed("fig7")
    s7 = fig7.summary(ds7)
    check, _ = fig7.discretisation_check(ds7, s7["most_lost_beta"], source)
    phrases7 = fig7.phrases(s7, ds7, check)
    text7 = (ROOT / "notebooks" / "fig7_persistence.md").read_text()
    tables7 = {f"fig7.{k}" for k in re.findall(r"\{glue:md\} fig7\.(\S+)", text7)}
    assert tables7 == {"fig7.table", "fig7.merged_table", "fig7.check"}
    assert _page_keys("fig7_persistence") | tables7 <= glued(
        "fig7", {**s7, "paper_cpu_min": fig7.cost("paper") / 60}, phrases7)
    # the opening's verdict on the committed run: early clustering, the fall at beta = 4
    assert phrases7["verdict"] == (
        "**Partly reproduced:** 95% of the trajectories are clustered by $t$ = 9.81 at every "
        "$\\beta$, and from $t$ = 56 on the fraction with an antipodal pair stays within 0.5 "
        "points of its value at $T$ at $\\beta$ = 6 and 8, but not at $\\beta$ = 4.")
    assert "the losses belong to the dynamics" in phrases7["check"]
    assert "simulation code version 1" in phrases7["check"]    # the check predates the reduced path
