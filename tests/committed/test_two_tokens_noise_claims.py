"""Claims of the two-token and noise-clustering pages, checked against the code and data.

Figure 4 (the limit at the horizon, the approach rate to -1, undecided cells, seeds),
Figure 3 (the systematic deficit away from the thresholds), Figure 8 (the point nearest to
a threshold, the resolution of the half-clustering time), the overlap notebook (its
attention), and two statements of the chapters (where the Lemma 4 drift vanishes, the sign
of the Ito correction of Proposition 1's SDE).  Monte Carlo uses fixed seeds; each
tolerance is stated where it is used.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from stochastic_transformers import kolmogorov, sde, theory
from stochastic_transformers.figures import fig3, fig4, fig8, overlap
from stochastic_transformers.figures.base import load_committed


@pytest.fixture(scope="module")
def fig4_paper():
    ds = load_committed("fig4")
    if ds is None:
        pytest.skip("no committed fig4 result")
    return ds, fig4.summary(ds)


# ------------------------------------------------------------- Figure 4: rates near -1

@pytest.mark.parametrize("beta, eps", [(0.0, 0.3), (1.0, 0.8), (2.75, 0.45), (4.5, 0.3)])
def test_limit_rate_is_the_drift_of_atanh_z_at_minus_one(beta, eps):
    """e^-beta - eps^2/2 is the drift of X = atanh Z of Proposition 1's SDE at Z = -1."""
    mu, nu = theory.atanh_coefficients(-1.0, beta, 3, "unnormalized", model="hybrid",
                                       epsilon=eps)
    assert theory.hybrid_antipodal_rate(beta, eps) == pytest.approx(float(mu), rel=1e-12, abs=1e-15)
    assert float(nu) == pytest.approx(eps * math.exp(-beta))


@pytest.mark.parametrize("beta, eps", [(0.5, 1.5), (1.0, 0.8), (2.75, 0.45), (4.5, 0.3)])
def test_chain_rate_tends_to_the_limit_with_the_stated_1_over_L_term(beta, eps):
    """L (rate_L - rate) -> -1/2 + eps^2 (3e^b + e^-3b)/4 - 3 eps^4 (e^2b + e^-2b)/8: within
    2% of that constant at L = 1e5 (the next order is O(1/L) relative)."""
    limit = theory.hybrid_antipodal_rate(beta, eps)
    c = (-0.5 + 0.25 * eps**2 * (3 * math.exp(beta) + math.exp(-3 * beta))
         - 0.375 * eps**4 * (math.exp(2 * beta) + math.exp(-2 * beta)))
    L = 1e5
    assert L * (theory.hybrid_antipodal_rate(beta, eps, L) - limit) == pytest.approx(c, rel=0.02)


@pytest.mark.parametrize("beta, eps, L", [(2.75, 0.45, 100), (3.0, 1.0, 100), (4.5, 0.3, 1000)])
def test_chain_rate_is_the_mean_log_gap_factor(beta, eps, L):
    """The closed form against a Monte Carlo mean of the layer's log gap factor
    log|1 + w(a+b)| - log|1 + w(a-b)| (10^6 normal draws, seed 0; within 4 standard
    errors)."""
    a, b = math.exp(beta) / 2, math.exp(-beta) / 2
    xi = np.random.default_rng(0).standard_normal(1_000_000)
    w = 1.0 / L + eps * xi / math.sqrt(L)
    x = L * (np.log(np.abs(1 + w * (a + b))) - np.log(np.abs(1 + w * (a - b))))
    se = x.std() / math.sqrt(x.size)
    assert abs(theory.hybrid_antipodal_rate(beta, eps, L) - x.mean()) < 4 * se


def test_mean_log_abs_normal_closed_form():
    """E log|xi - r|: -(gamma + log 2)/2 at r = 0, and against quadrature elsewhere."""
    from scipy import integrate
    assert theory._mean_log_abs_normal(0.0) == pytest.approx(-(np.euler_gamma + math.log(2)) / 2,
                                                           rel=1e-12)
    for r in (0.7, 3.0, 25.0):
        f = lambda x: math.log(abs(x - r)) * math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
        quad = sum(integrate.quad(f, lo, hi, limit=200)[0]
                   for lo, hi in ((-40.0, r), (r, r + 40.0)))
        assert theory._mean_log_abs_normal(r) == pytest.approx(quad, rel=1e-8)


def test_small_steps_do_not_make_the_rates_agree():
    """At the paper's L = 100 two small-step cells just above the curve approach -1 about
    1.8 times as fast as the limit (the figure's reference cells 2.5/0.5 and 3/0.4); at
    L = 1000 they are within 10% of it."""
    for beta, eps in ((2.5, 0.5), (3.0, 0.4)):
        assert float(theory.hybrid_step_size(beta, eps, 100)) < fig4.SMALL_STEP
        ratio = theory.hybrid_antipodal_rate(beta, eps, 100) / theory.hybrid_antipodal_rate(beta, eps)
        assert 1.7 < ratio < 1.85
        assert abs(theory.hybrid_antipodal_rate(beta, eps, 1000) / theory.hybrid_antipodal_rate(beta, eps) - 1) < 0.1


# ------------------------------------------------------------- Figure 4: the limit at T

def _limit_antipodal_pde(beta, eps, T, tol=1e-3, h=0.025):
    """P(1 + Z_T <= tol) of the limit from a uniform start in d = 3 (z0 uniform on [-1, 1]):
    backward Kolmogorov equation in x = atanh z with the indicator as data, on
    [-16, 45] (the upper end: above the curve the drift at +1 points inwards, and the
    excursions there decay like exp(-(1 - (eps_c/eps)^2) x)); the threshold read off the
    grid by the node sums (error O(h) times the density there)."""
    xs = np.arange(-16.0, 45.0 + h / 2, h)
    mu, nu = theory.atanh_coefficients(np.tanh(xs), beta, 3, "unnormalized", model="hybrid",
                                       epsilon=eps)
    u0 = (xs <= math.atanh(-1 + tol)).astype(float)
    u = kolmogorov.solve_backward(u0, xs, np.array([T]), mu, 0.5 * nu**2, 1e-5)[:, 0]
    dens = 0.5 / np.cosh(xs) ** 2 * h
    return float(dens @ u)


def test_limit_outcome_agrees_with_the_kolmogorov_equation():
    """fig4.limit_outcome (Euler-Maruyama, 4,000 paths) against the backward equation at a
    reference cell (beta 2.5, eps 0.5, T 50): within 4 standard errors plus 0.005 for
    Euler's bias and the grid."""
    mc = fig4.limit_outcome(2.5, 0.5, 50.0)
    pde = _limit_antipodal_pde(2.5, 0.5, 50.0)
    se = math.sqrt(max(pde * (1 - pde), 1e-4) / fig4.LIMIT_PATHS)
    assert abs(mc["antipodal"] - pde) < 4 * se + 0.005
    assert mc["unclustered"] > 0.9 and pde < 0.1


def test_reference_cells_are_the_first_above_the_band(fig4_paper):
    ds, _ = fig4_paper
    np.testing.assert_allclose(
        fig4.reference_cells(ds),
        [(2.5, 0.5), (3.0, 0.4), (3.5, 0.35), (4.0, 0.25), (4.5, 0.2), (5.0, 0.15)], atol=1e-9)


def test_figure4_limit_has_not_clustered_just_above_the_curve(fig4_paper):
    """The page: at every reference cell the limit is undecided at T = 50; at the two
    small-step cells of L = 100 the map shows the antipodal pair in most trajectories
    (the limit in at most 10%); at L = 1000 every reference cell is undecided."""
    _, s = fig4_paper
    ref = s["reference"]
    assert ref["n"] == 6 and ref["n_limit_undecided"] == 6
    assert ref["limit_unclustered_min"] > 0.9
    assert ref["n_ahead_small_step"] == 2
    assert ref["ahead_antipodal_min"] > 0.6 and ref["ahead_limit_antipodal_max"] < 0.1
    assert ref["n_undecided_last"] == 6
    assert s["limit_undecided_near_curve"] and s["ahead_small_step"]


def test_figure4_depth_check_point_is_antipodal_in_the_limit_at_T(fig4_paper):
    """At (3, 1) the limit itself is antipodal at T = 50 (so the depth check compares with
    the right reference)."""
    _, s = fig4_paper
    assert s["check_limit"]["antipodal"] > 0.99 and s["check_limit_reached"]


def test_figure4_counts_undecided_cells_on_neither_side(fig4_paper):
    """Undecided cells (unclustered fraction above one half) are neither agreeing nor
    wrong; no decided small-step cell is wrong at either depth; the 0-0 tie at
    beta 3.875, eps 0.25, L 1000 is undecided."""
    ds, s = fig4_paper
    for L, sub in s["by_L"].items():
        assert sub["n_agree"] + sub["n_wrong"] + sub["n_undecided"] == sub["n_away"]
        assert sub["n_wrong_small_step"] == 0
    assert (s["by_L"][100]["n_undecided"], s["by_L"][1000]["n_undecided"]) == (4, 36)
    assert any(abs(b - 3.875) < 1e-9 and abs(e - 0.25) < 1e-9
               for b, e in s["by_L"][1000]["undecided_cells"])
    tie = ds.sel(L=1000, beta=3.875, epsilon=0.25, method="nearest")
    assert float(tie.p_unclustered) > 0.99
    assert (s["fixed_by_depth"] + s["undecided_by_depth"] + s["still_wrong"]
            == s["by_L"][100]["n_wrong"])


def test_figure4_chapter_words_hold_for_the_committed_result(fig4_paper):
    """noise_clustering.md wraps fixed words around its glued numbers: at L = 100 the map is
    partly reproduced (55% of the decided cells on the predicted side), every miss lies above
    the curve where the steps are large, and the map at L = 1000 has a larger share."""
    _, s = fig4_paper
    assert s["verdict"] == "partly reproduced" and round(s["share_agree"], 2) == 0.55
    assert s["n_wrong"] == s["n_wrong_large_step_above"] > 0
    assert s["last"]["n_wrong"] == s["last"]["n_wrong_large_step_above"]
    assert s["last"]["share_agree"] > s["share_agree"]


def test_figure4_predicted_step_is_the_hybrid_antipodal_probability(fig4_paper):
    """The map's p_antipodal_theory (eps / eps_c > 1) is Proposition 1's outcome law,
    theory.hybrid_antipodal_probability, at every cell of the committed grid."""
    ds, _ = fig4_paper
    want = [[theory.hybrid_antipodal_probability(float(b), float(e)) for e in ds.epsilon.values]
            for b in ds.beta.values]
    np.testing.assert_array_equal(ds.p_antipodal_theory.transpose("beta", "epsilon").values, want)


def test_figure4_depths_have_independent_seeds(fig4_paper):
    """The two maps do not share their trajectories' seeds (the page says independent)."""
    ds, _ = fig4_paper
    seeds = ds.cell_seed.values
    assert not np.any(seeds[0] == seeds[1])


# ------------------------------------------------------------- Figure 3

def test_figure3_far_points_show_a_deficit():
    """The page's far reading says 'deficit': away from beta_c the simulation has fewer
    antipodal pairs than the limit curve, resolved beyond the stated threshold."""
    ds = load_committed("fig3")
    if ds is None:
        pytest.skip("no committed fig3 result")
    s = fig3.summary(ds)
    assert s["far_bias_resolved"] and s["far_mean_bias"] < 0 and s["far_mean_z"] < 0


# ------------------------------------------------------------- Figure 8

def test_figure8_nearest_point_to_a_threshold():
    """The point of the committed run nearest to its threshold is beta = 1.2 at d = 8,
    0.039 below beta_c(8) = arccosh(6)/2; the only other within 0.1 is beta = 1.2 at d = 7
    (the page: a few points near a threshold)."""
    ds = load_committed("fig8")
    if ds is None:
        pytest.skip("no committed fig8 result")
    s = fig8.summary(ds)
    cl = s["closest_threshold"]
    assert (cl["beta"], cl["d"]) == (1.2, 8)
    assert cl["distance"] == pytest.approx(1.2 - 0.5 * math.acosh(6), abs=1e-12)
    gaps = np.abs(ds.beta.values[:, None] - ds.beta_c.values[None, :])
    near = np.argwhere(gaps < 0.1)
    assert sorted((float(ds.beta.values[i]), int(ds.d.values[j])) for i, j in near) == [
        (1.2, 7), (1.2, 8)]
    # t_half is read off a log grid about 14% apart: ties in d are a grid effect
    assert 0.12 < s["t_half_grid_step"] < 0.16
    t = ds.time.values
    lo, hi = s["t_half_range"]
    inside = (t[1:] >= lo) & (t[:-1] <= hi) & (t[:-1] > 0)
    assert s["t_half_grid_step"] == pytest.approx(float(np.max(t[1:][inside] / t[:-1][inside]) - 1))


def test_near_a_threshold_the_limit_still_changes_with_the_horizon():
    """d = 4, beta = 0.625 (just below beta_c(4) = 0.658): the limit's fraction within 1e-3
    of -1 falls from t = 50 to t = 200 (Euler-Maruyama of Lemma 4, softmax, 8,000 paths,
    dt = 0.05, seed 3; by more than 4 standard errors of the difference)."""
    z = sde.simulate_overlap_sde(0.625, 4, z0=None, n_paths=8000, T=200.0, dt=0.05,
                                 attention="softmax", times=[50.0, 200.0], seed=3)
    p50, p200 = np.mean(1 + z[0] <= 1e-3), np.mean(1 + z[1] <= 1e-3)
    se = math.sqrt((p50 + p200) / 8000)
    assert p50 - p200 > 4 * se


# ------------------------------------------------------------- overlap notebook

def test_overlap_notebook_uses_softmax_and_no_knob_changes_it():
    assert overlap._BASE["attention"] == "softmax" and "attention" not in overlap.FIGURE.schema
    s = overlap.summary(overlap.compute("smoke"))
    assert s["attention"] == "softmax"


# ------------------------------------------------------------- chapters

def test_lemma4_drift_vanishes_inside_for_d4_beta4():
    """two_tokens.md: the drift (sigma^2/2)(1-Z^2)e^{b(1+Z)}[(d-2) - Z cosh(b(1-Z))] (USA)
    vanishes at two overlaps in (0, 1/2) for d = 4, beta = 4, while the diffusion
    coefficient stays positive inside."""
    z = np.linspace(-0.999, 0.999, 20001)
    drift = np.asarray(theory.overlap_drift(z, 4.0, 4, "unnormalized"))
    ours = 0.5 * (1 - z**2) * np.exp(4.0 * (1 + z)) * (2.0 - z * np.cosh(4.0 * (1 - z)))
    np.testing.assert_allclose(drift, ours, rtol=1e-10, atol=1e-12 * np.abs(ours).max())
    roots = z[:-1][np.sign(drift[:-1]) != np.sign(drift[1:])]
    assert len(roots) == 2 and np.all((roots > 0) & (roots < 0.5))
    assert roots == pytest.approx([0.12, 0.47], abs=0.02)
    assert np.all(np.asarray(theory.overlap_diffusion(z, 4.0, 4, "unnormalized")) > 0)


@pytest.mark.parametrize("beta, lowers", [(0.0, False), (0.3, False), (0.36, True),
                                          (1.0, True), (3.0, True)])
def test_ito_correction_lowers_the_drift_only_above_half_log_two(beta, lowers):
    """noise_clustering.md: the Ito term -eps^2 e^{bZ}(1-Z^2)(e^b/2 + Z e^{bZ}) of
    Proposition 1's SDE is negative at every interior Z iff beta > ln(2)/2 = 0.347."""
    z = np.linspace(-0.9999, 0.9999, 40001)
    eps = 0.7
    corr = (np.asarray(theory.hybrid_overlap_drift(z, beta, eps))
            - np.asarray(theory.hybrid_overlap_drift(z, beta, 0.0)))
    ours = -eps**2 * np.exp(beta * z) * (1 - z**2) * (np.exp(beta) / 2 + z * np.exp(beta * z))
    np.testing.assert_allclose(corr, ours, atol=1e-12)
    assert bool(np.all(corr < 0)) is lowers
    assert (beta > 0.5 * math.log(2)) is lowers
