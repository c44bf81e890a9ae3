"""Claims of the many-token pages (Figures 6, 7, 9 and *Two clusters, exactly*) that a
reading of those pages questioned, each checked against the code, the committed results or
an independent computation.

- the paper's many-token experiments are in its section 6 ("Multiple Tokens Case"), not 5;
- Figure 6: panel (d) (mean number of clusters) equals 1 + P(antipodal pair) wherever panel
  (c) (fraction clustered) is 1, and is within (N - 1)(1 - P(clustered)) of it elsewhere;
- Figure 6: the balanced-split prediction is almost certain for each trajectory at the merge
  (what the z-score comparison can and cannot test), and the two-token reference curve is
  the exit probability of the proof of Theorem 2, not Theorem 2 itself;
- with two tokens, softmax and unnormalised attention give overlaps that are time changes of
  each other (same law of the outcome, not the same process);
- *Two clusters, exactly*: the hovering scale at the largest softmax beta and the share of
  1-vs-3 splits no longer antipodal at T, beta = 4;
- Figure 9: the hovering scale of the unbalanced splits of N = 8 tokens, with its prefactor;
- Figure 7: the discretisation check is reused only when it is the check of the run shown,
  and the page says when the two runs come from different simulation code.

Tolerances are stated at each assertion; nothing here simulates.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from stochastic_transformers import theory, two_clusters
from stochastic_transformers.classification import has_antipodal_pair, is_clustered, n_clusters
from stochastic_transformers.figures import clusters, fig6, fig7, fig9

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
PAGES = {name: ROOT / "notebooks" / f"{name}.md" for name in
         ("fig6_antipodal_pairs", "fig7_persistence", "clusters_two_point",
          "fig9_convergence_speed")}


def _committed(name):
    pytest.importorskip("xarray")
    from stochastic_transformers.figures import load_committed

    if not (RESULTS / f"{name}_paper.nc").is_file():
        pytest.skip(f"results/{name}_paper.nc is not committed")
    return load_committed(name)


def _text(name):
    return PAGES[name].read_text()


# --- where the paper says it --------------------------------------------------------------


def test_figures_6_and_7_are_cited_from_section_6():
    """The paper's 'Multiple Tokens Case' paragraph is in section 6 (Experimental Results);
    section 5 is the theory (Theorem 2, Proposition 1)."""
    paper = (ROOT.parent / "shared" / "papers" / "clustering-in-deep-stochastic-transformers.txt")
    if paper.is_file():
        text = paper.read_text()
        six, five = text.index("\n6 Experimental Results"), text.index("\n5 Clustering")
        assert five < six < text.index("Multiple Tokens Case")
    for source in (_text("fig6_antipodal_pairs"), _text("fig7_persistence"),
                   fig6.__doc__, fig7.__doc__):
        assert not re.search(r"[Ss]ection 5", source)
        assert re.search(r"[Ss]ection 6", source)


@pytest.fixture(scope="module")
def fig6_drawn():
    """Figure 6 drawn once from the committed result: its legend texts and panel titles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = fig6.plot(_committed("fig6"))
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() is not None
              for t in ax.get_legend().get_texts()]
    titles = [ax.get_title() for ax in fig.axes]
    plt.close(fig)
    return labels, titles


def test_two_token_probability_is_cited_from_the_proof_of_theorem_2(fig6_drawn):
    """Theorem 2 states only P(A_2) = 0 or > 0; the exit probability is in its proof (C.3)."""
    for name in ("fig6_antipodal_pairs", "clusters_two_point"):
        text = _text(name)
        assert "exact limit, Theorem 2" not in text and "probability of Theorem 2" not in text
        assert "proof of Theorem 2" in text and "C.3" in text
    labels, _ = fig6_drawn
    assert "N = 2, limit exit probability (proof of Thm 2)" in labels
    assert not any("exact limit" in s or s.endswith("(Thm 2)") for s in labels)


# --- Figure 6, panels (c) and (d) ------------------------------------------------------------


def test_figure_6_panel_letters_match_the_plot(fig6_drawn):
    _, titles = fig6_drawn
    assert any(t.startswith("(c) every pair together or antipodal") for t in titles)
    assert any(t.startswith("(d) clusters") for t in titles)
    text = " ".join(_text("fig6_antipodal_pairs").split())
    assert ("panel (d) is close to $1 + P(\\text{antipodal pair})$ wherever panel (c) is close "
            "to 1") in text


def test_clustered_configurations_have_one_cluster_plus_one_per_antipodal_pair():
    """The identity behind panel (d) = 1 + P: a clustered configuration (every pair within
    1e-3 of +-1) has two clusters exactly when it has an antipodal pair.  Random clustered
    configurations: every token +-v plus a small perturbation, seed 0."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(3, 9))
        v = rng.normal(size=4)
        v /= np.linalg.norm(v)
        signs = rng.choice([-1.0, 1.0], size=n) if rng.random() < 0.7 else np.ones(n)
        x = signs[:, None] * v + 1e-4 * rng.normal(size=(n, 4))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        g = x @ x.T
        assert is_clustered(g, 1e-3)
        assert n_clusters(g, 1e-3) == 1 + int(has_antipodal_pair(g, 1e-3))


def test_figure_6_mean_clusters_is_one_plus_the_antipodal_fraction():
    """On the committed run: |mean clusters - (1 + P)| <= (N - 1)(1 - P(clustered)) at every
    point (exact bound: an unclustered configuration has 1 to N clusters), and equality to
    1e-12 where every trajectory is clustered (all N at beta = 8)."""
    ds = _committed("fig6")
    for n in ds.n_tokens.values:
        sub = ds.sel(n_tokens=n)
        gap = np.abs(sub.mean_n_clusters.values - 1.0 - sub.p_antipodal_pair.values)
        bound = (int(n) - 1) * (1.0 - sub.p_clustered.values)
        assert np.all(gap <= bound + 1e-12)
        full = sub.p_clustered.values == 1.0
        assert np.all(gap[full] <= 1e-12)
        assert bool(full[-1])


# --- Figure 6, what the balanced comparison tests ------------------------------------------


def test_balanced_prediction_is_almost_certain_at_the_merge():
    """The committed run: the mean of p(1 - p) over balanced splits is at most 0.0069 (the
    N = 8 value is 0.0068) and no predicted count has a standard error above 3.5
    trajectories; the summary's fields are those numbers, recomputed here from the counts."""
    ds = _committed("fig6")
    s = fig6.summary(ds)
    pq, se = [], []
    for n in (4, 8):
        sub = ds.sel(n_tokens=n)
        nb, var = sub.n_balanced.values, sub.predicted_var_balanced.values
        has = nb > 0
        pq.append(np.max(var[has] / nb[has]))
        se.append(math.sqrt(np.max(var[has])))
        assert s["per_n"][n]["balanced_mean_pq_max"] == pytest.approx(pq[-1], rel=1e-12)
        assert s["per_n"][n]["balanced_se_max"] == pytest.approx(se[-1], rel=1e-12)
    assert s["balanced_mean_pq_max"] == pytest.approx(max(pq), rel=1e-12) and max(pq) < 0.0069
    assert s["balanced_se_max"] == pytest.approx(max(se), rel=1e-12) and max(se) < 3.5
    assert s["balanced_prediction_sharp"] is True
    assert s["balanced_mean_pq_max"] <= fig6.BALANCED_SHARP_PQ
    assert "What this comparison tests is narrow" in fig6.phrases(s)["balanced_reading"]
    assert "{glue:md}`fig6.balanced_reading:myst`" in _text("fig6_antipodal_pairs")


def test_balanced_sharpness_is_none_without_an_even_n():
    """Odd N only (the smoke scale): no balanced split, no verdict."""
    ds = _committed("fig6").sel(n_tokens=[3, 5])
    s = fig6.summary(ds)
    assert s["balanced_prediction_sharp"] is None and math.isnan(s["balanced_mean_pq_max"])


# --- two tokens: softmax is a time change of unnormalised attention --------------------------


def _coefficients(z, beta, d, attention):
    """mu and s^2 of the two-token overlap from the chapter's formulas (m1 = m2 = 1)."""
    e1, ez = math.exp(beta), np.exp(beta * z)
    if attention == "softmax":
        p, q = e1 / (e1 + ez), ez / (e1 + ez)
    else:
        p, q = e1 / 2, ez / 2
    a11 = p * p + q * q + 2 * p * q * z
    a12 = (p * p + q * q) * z + 2 * p * q
    mu = (1 - d) / 2 * 2 * a11 * z + a12 * (d - 2 + z * z)
    s2 = (1 - z * z) * (2 * a11 - 2 * z * a12)
    return mu, s2


@pytest.mark.parametrize("beta", [0.3, 1.0, 3.0, 8.0])
def test_two_token_softmax_is_a_time_change_of_unnormalised(beta):
    """Drift and squared diffusion of the softmax overlap are the unnormalised ones times
    c(z) = 4/(e^beta + e^{beta z})^2, to 1e-12 relative, so 2 mu / s^2 (the scale function,
    hence the exit probability) is the same, while c varies with z (a genuine time change,
    not a constant rescaling)."""
    z = np.linspace(-0.999, 0.999, 41)
    c = 4.0 / (math.exp(beta) + np.exp(beta * z)) ** 2
    mu_s, s2_s = _coefficients(z, beta, 4, "softmax")
    mu_u, s2_u = _coefficients(z, beta, 4, "unnormalized")
    np.testing.assert_allclose(mu_s, c * mu_u, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(s2_s, c * s2_u, rtol=1e-12)
    np.testing.assert_allclose(2 * mu_s / s2_s, 2 * mu_u / s2_u, rtol=1e-10, atol=1e-12)
    # the library's coefficients are the chapter's
    for att, (mu, s2) in (("softmax", (mu_s, s2_s)), ("unnormalized", (mu_u, s2_u))):
        got_mu, got_s2 = theory.two_cluster_coefficients(z, beta, 4, 1, 1, attention=att)
        np.testing.assert_allclose(got_mu, mu, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got_s2, s2, rtol=1e-10, atol=1e-12)
    assert c.max() / c.min() > 1.0 + 1e-3
    text = " ".join(_text("fig6_antipodal_pairs").split())
    assert "same limit law" not in text and "same law of the final outcome" in text
    assert "time change" in text


# --- Two clusters, exactly ------------------------------------------------------------------


def test_hovering_scale_at_the_largest_softmax_beta():
    """The committed run: (alpha1 - alpha2)^2 at beta = 5 runs from 5.7e-9 (2 vs 3) to
    5.9e-8 (1 vs 3), within 2% of the closed form (2 e^{-2 beta}(m1/m2 - m2/m1))^2; the page
    glues that range rather than typing it."""
    s = clusters.summary(_committed("clusters"))
    hover = s["hover_largest_softmax"]
    assert hover["beta"] == 5.0
    closed = {(m1, m2): (2 * math.exp(-10.0) * (m1 / m2 - m2 / m1)) ** 2
              for m1, m2 in ((1, 2), (1, 3), (2, 3))}
    assert hover["scale_min"] == pytest.approx(closed[(2, 3)], rel=0.02)
    assert hover["scale_max"] == pytest.approx(closed[(1, 3)], rel=0.02)
    assert 5.5e-9 < hover["scale_min"] < 6e-9 and 5.7e-8 < hover["scale_max"] < 6e-8
    text = _text("clusters_two_point")
    assert "{glue:text}`clusters.hover_largest_softmax.scale_min" in text
    assert "10^{-8}$ to $10^{-9}" not in text


def test_unbalanced_splits_leave_slowly_at_beta_4():
    """The committed run, softmax 1 vs 3: at beta = 2 about 90% are no longer antipodal at
    t = 1.1 (most have broken up); at beta = 4, 6.5% are no longer antipodal at T (a few
    percent, not 'almost none'), against 0.5% of the balanced 1 vs 1."""
    s = clusters.summary(_committed("clusters"))
    c2, c4 = s["cells"][("softmax", "1,3", 2.0)], s["cells"][("softmax", "1,3", 4.0)]
    assert c2["most_left_early"] is True and c2["left_early"] == pytest.approx(0.901, abs=5e-3)
    assert c4["left_final"] == pytest.approx(1 - c4["p_final"], abs=1e-15)
    assert 0.06 < c4["left_final"] < 0.07
    assert s["cells"][("softmax", "1,1", 4.0)]["left_final"] < 0.01
    text = " ".join(_text("clusters_two_point").split())
    assert "almost none" not in text
    assert "{glue:text}`clusters.cells.softmax-1,3-4.left_final:.0%`" in text


# --- Figure 9 ---------------------------------------------------------------------------------


def test_figure_9_hovering_scale_carries_the_split_prefactor():
    """N = 8, beta = 5: (alpha1 - alpha2)^2 = 4 e^{-4 beta}(m1/m2 - m2/m1)^2 to 0.1% for the
    splits 3 vs 5, 2 vs 6, 1 vs 7 (prefactors 4.55, 28.4, 188); the summary's range is
    9.4e-9 (3 vs 5) to 3.9e-7 (1 vs 7), not e^{-4 beta} = 2.1e-9."""
    s = fig9.summary(_committed("fig9"))
    hover = s["hover_scale"]
    assert hover["beta"] == 5.0 and s["n_tokens"] == 8
    approx = {m: 4 * math.exp(-20.0) * (m / (8 - m) - (8 - m) / m) ** 2 for m in (1, 2, 3)}
    exact = {m: two_clusters.hovering_scale(5.0, m, 8 - m) for m in (1, 2, 3)}
    for m in (1, 2, 3):
        assert exact[m] == pytest.approx(approx[m], rel=1e-3)
    assert (hover["m_min"], hover["m_max"]) == (3, 1)
    assert hover["min"] == exact[3] and hover["max"] == exact[1]
    assert 9.3e-9 < hover["min"] < 9.5e-9 and 3.8e-7 < hover["max"] < 3.95e-7
    assert "hover_order" not in s
    text = _text("fig9_convergence_speed")
    assert "hover_order" not in text and s["verdicts"]["stochastic_hovers"]
    assert "4e^{-4\\beta}(m_1/m_2 - m_2/m_1)^2" in text   # the page's words
    assert "{glue:text}`fig9.hover_scale.min:.1e`" in text


# --- Figure 7, the discretisation check --------------------------------------------------------


def test_figure_7_check_is_reused_only_when_it_matches_the_run():
    """The committed check is the check of the committed run (beta 4, L 400 = 4 x 100, 5,000
    = 10,000 / 2 trajectories, the other settings equal) but comes from the simulation code
    before the reduced path; any mismatch of beta, L or n_traj makes it unusable."""
    main, check = _committed("fig7"), _committed("fig7_check")
    m = fig7.check_matches(main, check, 4.0)
    assert m["usable"] is True and m["same_code"] is False
    assert (m["reduced"], m["reduced_check"]) == (True, False)
    assert m["code_version"].startswith("2+") and m["code_version_check"].startswith("1+")
    assert fig7.check_matches(main, check, 6.0)["usable"] is False
    other_l = check.copy()
    other_l.attrs = {**check.attrs, "fixed_L": 200}
    assert fig7.check_matches(main, other_l, 4.0)["usable"] is False
    other_n = check.assign(n_traj=check.n_traj * 2)
    assert fig7.check_matches(main, other_n, 4.0)["usable"] is False
    other_tol = check.copy()
    other_tol.attrs = {**check.attrs, "fixed_tol": 1e-2}
    assert fig7.check_matches(main, other_tol, 4.0)["usable"] is False
    assert fig7.check_matches(main, main, 4.0)["same_code"] is True
    # the page's check: the committed one where it matches the run shown, recomputed otherwise
    reused, seconds = fig7.discretisation_check(main, 4.0, "the committed paper-scale result")
    assert reused.identical(check) and seconds == float(check.attrs["cell_time_s"])
    text = _text("fig7_persistence")
    assert 'fig7.discretisation_check(ds, stats["most_lost_beta"], source' in text
    assert ":::{glue:md} fig7.check\n" in text
    words = fig7.phrases(fig7.summary(main), main, check)["check"]
    assert "comes from simulation code version 1, which ran the full $N$-token map" in words
