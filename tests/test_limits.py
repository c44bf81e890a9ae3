"""The non-centred random-attention model and its limits (mean field, ODE I, ODE II, SDE).

Statistical checks use fixed seeds.  Mean comparisons are z-tests at |z| <= Z = 4.5 (a
two-sided false-alarm rate of 7e-6 each; about 40 of them below, so the family-wise rate is
below 3e-4); law comparisons are two-sample Kolmogorov-Smirnov tests at level ALPHA = 1e-4
(4 of them).  Orders of convergence are read from ratios of deterministic errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from stochastic_transformers import ModelConfig, RunConfig, simulate
from stochastic_transformers.random_attention import limits
from stochastic_transformers.figures import homog_limits
from stochastic_transformers.stats import log_log_slope, t_equivalent

Z = 4.5
ALPHA = 1e-4


def _turning_mean(d=3, attract=0.5, turn=1.0):
    return limits.turning_mean_value(d, attract, turn)


@pytest.fixture(scope="module")
def x0():
    return limits.upper_hemisphere_tokens(4, 3)


def _model(**kw):
    base = dict(d=3, beta=1.0, kind="random_attention", eta=0.1, mean_v=_turning_mean(),
                mean_qk=1.0)
    return ModelConfig(**{**base, **kw})


def _one_step(model, x0, n, seed, method="literal"):
    ds = simulate(model, RunConfig(n_tokens=x0.shape[0], n_traj=n, L=1, T=1, seed=seed,
                                   x0=np.broadcast_to(x0, (n, *x0.shape)).copy(), method=method))
    return ds.tokens.values


# ---- the model ----------------------------------------------------------------------------

def test_centred_model_is_unchanged_bit_for_bit(x0):
    """Zero means take the centred arithmetic: explicit zeros give the same bits."""
    kw = dict(d=3, beta=1.0, kind="random_attention", eta=0.2)
    run = RunConfig(n_tokens=4, n_traj=20, L=6, T=1, seed=2)
    a = simulate(ModelConfig(**kw), run)
    b = simulate(ModelConfig(**kw, mean_v=np.zeros((3, 3)), mean_qk=0.0), run)
    np.testing.assert_array_equal(a.tokens.values, b.tokens.values)


@pytest.mark.parametrize("method", ["literal", "subspace"])
def test_means_enter_the_step_as_defined(x0, method):
    """One step with sigma = sigma_qk = 0 is x + (eta/H) Vbar sum_h softmax(beta <Abar x_i, x_j>) x_j,
    normalised (independent numpy)."""
    abar = np.array([[1.0, 0.3, 0.0], [0.0, 0.5, 0.2], [0.1, 0.0, 2.0]])
    model = _model(sigma=0.0, sigma_qk=0.0, mean_qk=tuple(map(tuple, abar)), n_heads=2, eta=0.3)
    y = _one_step(model, x0, 2, 0, method)[0]
    s = model.beta * (x0 @ abar.T) @ x0.T                # s_ij = beta <Abar x_i, x_j>
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    ref = x0 + 0.3 * (p @ x0) @ model.mean_v_matrix.T     # two identical heads: (eta/2) * 2
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(y, ref, atol=1e-13)


def test_subspace_equals_literal_with_means(x0):
    """With means and Gaussian fluctuations, the two exact methods agree in law."""
    model = _model(sigma=0.8, sigma_qk=0.7, n_heads=2)
    run = dict(n_tokens=4, n_traj=6000, L=10, T=1)
    lit = simulate(model, RunConfig(**run, seed=1, method="literal"))
    sub = simulate(model, RunConfig(**run, seed=2, method="subspace"))
    for i, j in ((0, 1), (2, 3)):
        assert stats.ks_2samp(lit.gram.values[:, i, j], sub.gram.values[:, i, j]).pvalue > ALPHA


def test_rademacher_weights_run_literal_with_the_right_variance(x0):
    """Rademacher V, W, W': auto runs the literal map, and at beta = 0 one step has the same
    mean and second moment as the Gaussian model's (both depend on the entries' variance)."""
    kw = dict(beta=0.0, sigma=0.9, eta=0.3, mean_v=0.0, mean_qk=0.0)
    n = 60_000
    rad = simulate(_model(values="rademacher", qk_law="rademacher", **kw),
                   RunConfig(n_tokens=4, n_traj=n, L=1, T=1, seed=4,
                             x0=np.broadcast_to(x0, (n, 4, 3)).copy()))
    assert rad.attrs["method"] == "literal" and rad.attrs["qk_law"] == "rademacher"
    gau = _one_step(_model(**kw), x0, n, 5)
    r, g = rad.tokens.values, gau
    # the unnormalised step u = sigma V xbar has E u u^T = sigma^2 |xbar|^2 I whatever the law;
    # after normalisation the second moments of the coordinates agree to O(eta^4 kurtosis)
    for a in range(3):
        d1 = r[:, 0, a] - x0[0, a]
        d2 = g[:, 0, a] - x0[0, a]
        z = (d1.mean() - d2.mean()) / math.sqrt(d1.var() / n + d2.var() / n)
        assert abs(z) < Z
        q1, q2 = d1 ** 2, d2 ** 2
        z2 = (q1.mean() - q2.mean()) / math.sqrt(q1.var() / n + q2.var() / n)
        assert abs(z2) < Z


# ---- the mean field and the drift -------------------------------------------------------

@pytest.mark.parametrize("qk_law", ["gaussian", "rademacher"])
def test_mean_field_is_the_mean_step(x0, qk_law):
    """(E x_1 - x_0) / eta -> b(X) as eta -> 0: at eta = 1e-3 the O(eta) part is below the
    noise, and the Monte Carlo field's own error is included in the z-score."""
    model = _model(sigma=0.0, sigma_qk=0.7, beta=2.0, eta=1e-3, qk_law=qk_law)
    n = 100_000
    inc = (_one_step(model, x0, n, 7) - x0) / model.eta
    b, se = limits.mean_field(x0, model, n_samples=20_000, return_se=True)
    b = limits.drift(x0, model, n_samples=20_000)
    z = (inc.mean(0) - b) / np.sqrt(inc.var(0) / n + se ** 2)
    assert np.max(np.abs(z)) < Z


def test_mean_field_is_exact_without_key_noise(x0):
    """sigma_qk = 0: F = Vbar softmax(beta <Abar x_i, x_j>) x_j, with zero standard error, and the
    Monte Carlo field tends to it as sigma_qk -> 0."""
    model = _model(sigma_qk=0.0)
    f, se = limits.mean_field(x0, model, return_se=True)
    assert np.all(se == 0.0)
    s = x0 @ x0.T
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(f, (p @ x0) @ model.mean_v_matrix.T, atol=1e-14)
    near = limits.mean_field(x0, _model(sigma_qk=1e-4), n_samples=64)
    np.testing.assert_allclose(near, f, atol=1e-6)


def test_centred_values_have_no_drift(x0):
    assert np.all(limits.drift(x0, _model(mean_v=0.0, sigma_qk=0.5), n_samples=16) == 0.0)


# ---- ODE II: the modified drift ------------------------------------------------------------

def _chain_step(x, model, eta):
    y = x + eta * limits.mean_field(x, model)
    return y / np.linalg.norm(y, axis=-1, keepdims=True)


def test_modified_drift_matches_one_step_to_third_order(x0):
    """Local error of each ODE against one normalised Euler step: O(eta^2) for ODE I and for
    the printed ODE II (the field has a normal part here), O(eta^3) for ours."""
    model = _model(sigma=0.0, sigma_qk=0.0)
    errs = {k: [] for k in ("ode1", "printed", "ours")}
    etas = (0.04, 0.02, 0.01)
    for eta in etas:
        y = _chain_step(x0, model, eta)
        errs["ode1"].append(np.abs(limits.ode_path(x0, model, [0, eta])[-1] - y).max())
        for form in ("printed", "ours"):
            errs[form].append(np.abs(limits.ode_path(x0, model, [0, eta], eta=eta,
                                                     form=form)[-1] - y).max())
    order = {k: math.log2(v[-2] / v[-1]) for k, v in errs.items()}
    assert order["ode1"] == pytest.approx(2.0, abs=0.15)
    assert order["printed"] == pytest.approx(2.0, abs=0.15)
    assert order["ours"] == pytest.approx(3.0, abs=0.15)


def test_forms_agree_for_a_tangent_field(x0):
    """With F tangent (a pure turn, beta = 0 and Vbar skew, tokens equal), c = 0 and the two
    forms coincide."""
    model = _model(mean_v=_turning_mean(attract=0.0), beta=0.0, sigma_qk=0.0)
    x = np.broadcast_to(x0[:1], (2, 3))
    a = limits.modified_drift(x, model, 0.1, form="ours")
    b = limits.modified_drift(x, model, 0.1, form="printed")
    np.testing.assert_allclose(a, b, atol=1e-9)


def test_deterministic_chain_follows_ode2_globally(x0):
    """Noise-free chain (sigma = sigma_qk = 0) over t = 4: distance to ODE I falls like eta,
    to ODE II (ours) like eta^2."""
    dists = {"ode1": [], "ode2": []}
    for L in (40, 80, 160):
        eta = 4.0 / L
        model = _model(sigma=0.0, sigma_qk=0.0, eta=eta)
        y = simulate(model, RunConfig(n_tokens=4, n_traj=1, L=L, T=1, x0=x0[None])).tokens.values[0]
        dists["ode1"].append(np.abs(limits.ode_path(x0, model, [0, 4.0])[-1] - y).max())
        dists["ode2"].append(np.abs(limits.ode_path(x0, model, [0, 4.0], eta=eta)[-1] - y).max())
    assert math.log2(dists["ode1"][-2] / dists["ode1"][-1]) == pytest.approx(1.0, abs=0.15)
    assert math.log2(dists["ode2"][-2] / dists["ode2"][-1]) == pytest.approx(2.0, abs=0.25)


# ---- the SDE ------------------------------------------------------------------------------

def test_sde_matches_the_diffusive_chain(x0):
    """Diffusive cell (eta = 1/16, sigma^2 eta t = 1 at t = 2): the chain and the SDE scheme
    agree on the mean and the spread of phi = mean first coordinate, and on the law of one
    overlap."""
    eta = 1.0 / 16
    model = _model(eta=eta, sigma=math.sqrt(1.0 / (eta * 2.0)), sigma_qk=0.0)
    n, L = 4000, 32
    chain = simulate(model, RunConfig(n_tokens=4, n_traj=n, L=L, T=1, seed=3,
                                      x0=np.broadcast_to(x0, (n, 4, 3)).copy())).tokens.values
    sde = limits.sde_paths(x0, model, eta, [0.0, L * eta], n, substeps=4, seed=4)[-1]
    a, b = chain[..., 0].mean(-1), sde[..., 0].mean(-1)
    z = (a.mean() - b.mean()) / math.sqrt(a.var() / n + b.var() / n)
    assert abs(z) < Z
    ga = np.einsum("pa,pa->p", chain[:, 0], chain[:, 1])
    gb = np.einsum("pa,pa->p", sde[:, 0], sde[:, 1])
    assert stats.ks_2samp(ga, gb).pvalue > ALPHA
    # a check that can fail: without its noise the SDE is far from this chain
    quiet = limits.sde_paths(x0, _model(eta=eta, sigma=0.0, sigma_qk=0.0), eta, [L * eta], 2)[-1]
    assert abs(quiet[..., 0].mean() - a.mean()) > 10 * math.sqrt(a.var() / n)


def test_sde_times_and_validation(x0):
    model = _model(sigma=0.5, sigma_qk=0.0)
    out = limits.sde_paths(x0, model, 0.1, [0.0, 0.25, 0.5], 3, substeps=3)
    assert out.shape == (3, 3, 4, 3)
    np.testing.assert_allclose(out[0], np.broadcast_to(x0, (3, 4, 3)))
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, atol=1e-12)
    with pytest.raises(ValueError, match="x0"):
        limits.sde_paths(2 * x0, model, 0.1, [1.0], 3)
    with pytest.raises(ValueError, match="eta"):
        limits.sde_paths(x0, model, 0.0, [1.0], 3)
    with pytest.raises(ValueError, match="kind='random_attention'"):
        limits.drift(x0, ModelConfig(d=3, beta=1.0))
    with pytest.raises(ValueError, match="form"):
        limits.modified_drift(x0, model, 0.1, form="other")


# ---- the map of limits ---------------------------------------------------------------------

def test_the_turning_group_gathers_turns_and_starts_in_the_upper_hemisphere():
    """V-bar = vI + wJ acts on e_1 as v e_1 + w e_2; the tokens are unit vectors with a last
    coordinate of at least 1/2 before normalising; phi is the mean first coordinate."""
    vbar = np.array(limits.turning_mean_value(3, 0.5, 1.0))
    np.testing.assert_array_equal(vbar @ np.eye(3)[0], [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(vbar + vbar.T, np.eye(3))       # J is antisymmetric
    x = limits.upper_hemisphere_tokens(4, 3)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=0, atol=1e-15)
    assert np.all(x[:, -1] > 0)
    np.testing.assert_array_equal(x, limits.upper_hemisphere_tokens(4, 3))
    assert limits.phase(x) == pytest.approx(sum(x[i, 0] for i in range(4)) / 4, abs=1e-15)
    model = limits.turning_group(3, 1.0, 0.5, 1.0, eta=0.25, sigma=2.0)
    assert (model.eta, model.sigma, model.sigma_qk) == (0.25, 2.0, 0.0)
    np.testing.assert_array_equal(model.mean_v_matrix, vbar)
    with pytest.raises(ValueError, match="turn"):
        limits.turning_mean_value(3, 0.5, float("nan"))


def test_expected_labels_follow_the_corollaries():
    e = limits.expected_limit
    assert [e(0.75, -1), e(0.5, -1), e(0.4, -0.5), e(0.3, -1), e(0.6, 0), e(0.3, 0),
            e(0.4, 0.5)] == ["ode1", "ode2", "ode2", "none", "sde", "open", "noise"]


def test_labels_are_the_first_fitting_candidate(tmp_path):
    """The smoke map: every label is the first candidate that fits, and the fits follow the
    rule (distance within Z_FIT s.e. at the deepest L, or a falling trend)."""
    ds = homog_limits.compute("smoke", progress=False, cache_dir=tmp_path)
    for g in ds.gamma.values:
        for nu in ds.nu.values:
            cell = ds.sel(gamma=g, nu=nu)
            fits = [bool(cell[f"fits_{c}"]) for c in homog_limits.CANDIDATES]
            want = homog_limits.CANDIDATES[fits.index(True)] if any(fits) else "none"
            assert str(cell.label.values) == want
            deep = cell.isel(L=-1)
            for c in homog_limits.CANDIDATES:
                _, _, chi2 = log_log_slope(cell.L.values, np.maximum(cell[f"dist_{c}"].values, 1e-300),
                                           np.maximum(cell[f"dist_{c}_se"].values, 1e-300))
                crit = homog_limits.Z_SLOPE if chi2 <= 1 else t_equivalent(homog_limits.Z_SLOPE, cell.L.size - 2)
                rule = (float(deep[f"dist_{c}"]) <= homog_limits.Z_FIT * float(deep[f"dist_{c}_se"])
                        or float(cell[f"slope_{c}"]) + crit
                        * float(cell[f"slope_{c}_se"]) < -homog_limits.SLOPE_MIN)
                assert bool(cell[f"fits_{c}"]) == rule
    s = homog_limits.summary(ds)
    assert s["n_cells"] == 4 and s["n_agree"] + len(s["disagree"]) == 4


def _map(sde_z, substeps):
    """A constructed 2 x 2 map: (0.3, -1) where nothing fits, (0.3, 0) on the SDE but with no
    definite prediction, (0.6, -1) on ODE I and (0.6, 0) whose SDE distance is sde_z s.e. at
    every L."""
    import xarray as xr

    shape, far = (2, 2, 3, 3), np.ones((2, 2, 3, 3))
    chain, se = np.zeros(shape), np.full(shape, 0.01)
    sde, odes = far.copy(), far.copy()
    sde[0, 1] = 0.005
    sde[1, 1] = sde_z * 0.01 * math.sqrt(2.0)
    ode1 = odes.copy()
    ode1[1, 0] = 0.005
    dims = ("gamma", "nu", "L", "fraction")
    ds = xr.Dataset({"chain": (dims, chain), "chain_se": (dims, se), "sde": (dims, sde),
                     "sde_se": (dims, se), "ode1": (dims, ode1), "ode2": (dims, odes),
                     "ode2_printed": (dims, odes),
                     "t_L": (dims[:3], np.ones(shape[:3])),
                     "n_traj": (dims[:3], np.ones(shape[:3]))},
                    coords={"gamma": [0.3, 0.6], "nu": [-1.0, 0.0], "L": [64, 256, 1024],
                            "fraction": [0.0, 0.5, 1.0]})
    ds.attrs["fixed_substeps"] = substeps
    return homog_limits.summary(ds)


def test_map_names_cells_by_elimination_and_within_the_sde_bias():
    s = _map(3.5, substeps=4)             # 3.5 * 4/3 = 4.7 s.e.: beyond Z_FIT
    assert (s["n_definite"], s["n_definite_agree"]) == (3, 3)
    assert [(r["gamma"], r["nu"]) for r in s["open"]] == [(0.3, 0.0)]
    assert [(r["gamma"], r["nu"]) for r in s["by_elimination"]] == [(0.3, -1.0)]
    assert [(r["gamma"], r["nu"]) for r in s["sde_within_bias"]] == [(0.6, 0.0)]
    assert "possible bias" in homog_limits.phrases(s)["caveats"]
    s = _map(3.5, substeps=8)             # 3.5 * 8/7 = 4.0 s.e.: within Z_FIT
    assert s["sde_within_bias"] == [] and "bias" not in homog_limits.phrases(s)["caveats"]
    assert _map(5.0, substeps=8)["n_definite_agree"] == 2     # the SDE no longer fits


def test_a_misfit_slope_meets_the_t_quantile_of_its_residual_dof():
    # one residual dof: the one-sided Bonferroni level of Z_SLOPE is cot(pi p) for Cauchy's t
    p = 0.5 * math.erfc(homog_limits.Z_SLOPE / math.sqrt(2.0))
    assert t_equivalent(homog_limits.Z_SLOPE, 1) == pytest.approx(1 / math.tan(math.pi * p),
                                                                   rel=1e-9)
    assert t_equivalent(homog_limits.Z_SLOPE, 10_000) == pytest.approx(homog_limits.Z_SLOPE,
                                                                        rel=1e-3)


def test_segments_must_divide_the_depth():
    with pytest.raises(ValueError, match="multiples of n_times"):
        homog_limits.compute("smoke", Ls=(20, 64), progress=False)


# ---- independent noise ---------------------------------------------------------------------

def test_independent_noise_decorrelates_the_increments(x0):
    """One small step: the increments of two tokens are correlated under common noise and not
    under independent noise (z-tests on the mean of <u_1, u_2>; the normalisation's
    second-order part, correlated under both, is O(eta^4) against O(eta^2))."""
    n = 40_000
    cross = {}
    for noise in ("common", "independent"):
        y = _one_step(_model(mean_v=0.0, mean_qk=0.0, sigma_qk=1.0, beta=1.5, eta=0.01,
                             noise=noise), x0, n, 8, method="auto")
        s = np.sum((y[:, 0] - x0[0]) * (y[:, 1] - x0[1]), axis=-1)
        cross[noise] = s.mean() / (s.std() / math.sqrt(n))
    assert cross["common"] > 10 * Z ** 0.5
    assert abs(cross["independent"]) < Z


def test_independent_noise_runs_literal_and_keeps_its_bits():
    kw = dict(d=4, beta=1.0, kind="random_attention", noise="independent", mean_v=0.3)
    run = dict(n_tokens=3, n_traj=12, L=5, T=1, seed=4)
    a = simulate(ModelConfig(**kw), RunConfig(**run, n_threads=1))
    b = simulate(ModelConfig(**kw), RunConfig(**run, n_threads=2))
    assert a.attrs["method"] == "literal" and a.attrs["noise"] == "independent"
    np.testing.assert_array_equal(a.tokens.values, b.tokens.values)
    with pytest.raises(ValueError, match="noise='common'"):
        simulate(ModelConfig(**kw), RunConfig(**run, method="subspace"))
    with pytest.raises(ValueError, match="noise"):
        ModelConfig(d=4, beta=1.0, kind="random_attention", noise="private")


def test_independent_pair_limit_matches_the_chain():
    """Two tokens, d = 4, beta = 1, independent noise: the mean and second moment of the
    overlap at tau = 1 against the limit diffusion (ours)."""
    from stochastic_transformers.random_attention.homogenized import overlap_moments

    n = 12_000
    ds = simulate(ModelConfig(d=4, beta=1.0, kind="random_attention", noise="independent"),
                  RunConfig(n_tokens=2, n_traj=n, L=200, T=1, seed=6))
    r = ds.gram.values[:, 0, 1]
    mean, second, _, err = overlap_moments([1.0], 1.0, 4, model="random_attention_independent")
    assert err[0] < 1e-4
    assert abs(r.mean() - mean[0]) < Z * r.std() / math.sqrt(n)
    assert abs((r ** 2).mean() - second[0]) < Z * (r ** 2).std() / math.sqrt(n)


def test_clusters_are_connected_groups():
    from stochastic_transformers.classification import n_clusters

    g = np.eye(4)
    g[0, 1] = g[1, 0] = 1.0 - 1e-6      # 0 ~ 1
    g[1, 2] = g[2, 1] = 1.0 - 1e-6      # 1 ~ 2, so 0, 1, 2 are one group
    assert n_clusters(g[None], 1e-3).tolist() == [2]
    assert n_clusters(np.eye(4)[None], 1e-3).tolist() == [4]


def test_noise_and_rate_pages_compute_at_smoke(tmp_path):
    from stochastic_transformers.figures import homog_noise, homog_rate

    s = homog_noise.summary(homog_noise.compute("smoke", progress=False, cache_dir=tmp_path))
    assert set(s["pairs"]) == {"common", "independent"}
    assert s["contrast"]["independent"]["many_antipodal"] == 0.0
    ds = homog_rate.compute("smoke", progress=False, cache_dir=tmp_path)
    r = homog_rate.summary(ds)
    assert set(r["orders"]) == {"ode1", "ode2", "ode2_printed", "diffusive"}
    # the SDE scheme's bias C h, C = 2 (E phi(eta) - E phi(eta / 2)) / eta at the last pair
    bias = 2 * ds.attrs["sde_step"] * 2.0 ** ds.k_pair.values[-1] * float(ds.diff_pair[-1])
    assert r["limit"]["sde_bias"] == pytest.approx(bias)
    ds.attrs["sde_mean"] = float(ds.richardson[-1]) + bias      # exactly the biased reference
    assert homog_rate.summary(ds)["limit"]["z_debiased"] == pytest.approx(0.0, abs=1e-9)
    ds.attrs["sde_mean"] = float(ds.richardson[-1]) + bias + 10 * float(ds.richardson_se[-1])
    assert abs(homog_rate.summary(ds)["limit"]["z_debiased"]) > 3


def test_order_fit_recovers_a_power():
    from stochastic_transformers.stats import log_log_slope, t_equivalent

    eta = 2.0 ** -np.arange(3, 9)
    order, se, _ = log_log_slope(eta, 0.3 * eta ** 2)
    assert order == pytest.approx(2.0, abs=1e-12) and se < 1e-10
    order, se, _ = log_log_slope(eta, -0.1 * eta, 1e-4 * np.ones(eta.size))
    assert order == pytest.approx(1.0, abs=1e-9)


# ---- the slow-motion two-point motion (book: prop-slow-long-time) ----------------------------

def _euler_overlap(kappa, r0, tau, n, steps, seed):
    """dR = -kappa R (1 - R^2) dtau + sqrt(2) (1 - R^2) dB by Euler steps in R (clipped to
    (-1, 1)): an integration independent of the atanh form being checked."""
    rng = np.random.default_rng(seed)
    r = np.full(n, r0)
    h = tau / steps
    for _ in range(steps):
        q = 1.0 - r * r
        r = r - kappa * r * q * h + math.sqrt(2.0 * h) * q * rng.standard_normal(n)
        r = np.clip(r, -1.0 + 1e-15, 1.0 - 1e-15)
    return r


def test_slow_motion_overlap_is_tanh_of_a_brownian_motion():
    """kappa = 2: atanh R_tau ~ N(atanh R_0, 2 tau) (KS test; Euler bias O(h) below its power)."""
    x0, tau = math.atanh(0.3), 0.5
    r = _euler_overlap(2.0, 0.3, tau, 20_000, 2000, 1)
    x = np.arctanh(r)
    assert stats.kstest(x, "norm", args=(x0, math.sqrt(2 * tau))).pvalue > ALPHA


def test_slow_motion_with_the_printed_drift_settles_at_a_pole():
    """kappa = 1: R -> +1 with probability 1/2 + arctan(sinh x0) / pi (z-test at a long clock,
    where the undecided paths are few)."""
    r0 = 0.3
    r = _euler_overlap(1.0, r0, 8.0, 8000, 8000, 2)
    p = 0.5 + math.atan(math.sinh(math.atanh(r0))) / math.pi
    up = (r > 0).mean()
    assert np.mean(np.abs(r) > 0.99) > 0.9
    assert abs(up - p) < Z * math.sqrt(p * (1 - p) / r.size)


# ---- N, d and beta; Rademacher weights ------------------------------------------------------

def test_half_time_and_scalings():
    from stochastic_transformers.figures.followup.homog_scaling import beta_for, half_time

    t = np.linspace(0.0, 4.0, 5)
    assert half_time(t, np.array([0.1, 0.3, 0.7, 0.9, 1.0])) == pytest.approx(1.5)
    assert math.isnan(half_time(t, np.full(5, 0.2)))
    assert beta_for("hemisphere", 8, 64, 1.0, 1.0) == pytest.approx(1 / 8)
    assert beta_for("simplex", 16, 64, 1.0, 1.0) ** 2 * 16 / 64 == pytest.approx(1.0)


def test_ks_from_quantiles_matches_the_samples():
    """The KS statistic from 2001 quantiles is the samples' to within the grid's resolution."""
    from stochastic_transformers.stats import ks_from_quantiles

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(20_000), rng.standard_normal(20_000) + 0.03
    levels = np.linspace(0.0, 1.0, 2001)
    stat, p = ks_from_quantiles(np.quantile(a, levels), np.quantile(b, levels), a.size)
    ref = stats.ks_2samp(a, b)
    assert stat == pytest.approx(ref.statistic, abs=1e-3)
    assert p == pytest.approx(ref.pvalue, rel=0.5)


def test_scaling_and_laws_pages_compute_at_smoke(tmp_path):
    from stochastic_transformers.figures import homog_laws, homog_scaling

    s = homog_scaling.summary(homog_scaling.compute("smoke", progress=False, cache_dir=tmp_path))
    assert set(s["scalings"]) == {"hemisphere", "simplex"}
    with pytest.raises(ValueError, match="below every d"):
        homog_scaling.compute("smoke", Ns=(4, 40), progress=False, cache_dir=tmp_path)
    assert set(s["by_d"]["simplex"]) == {32}
    law = homog_laws.summary(homog_laws.compute("smoke", progress=False, cache_dir=tmp_path))
    assert law["laws"]["gaussian"]["ks_p"] == [1.0, 1.0]


def _laws(z):
    """A constructed homog_laws result: every law on the Gaussian run but all-Rademacher weights
    at d = 3, z standard errors (of 0.005) above it."""
    import xarray as xr

    from stochastic_transformers.figures import homog_laws

    laws, dims = list(homog_laws.LAWS), [3, 6]
    diff = np.zeros((4, 2))
    diff[3, 0] = z * 0.005
    grid = ("law", "d")
    ds = xr.Dataset({"diff_gaussian": (grid, diff),
                     "diff_gaussian_se": (grid, np.full((4, 2), 0.005)),
                     "z_limit": (grid, np.zeros((4, 2))), "ks_p": (grid, np.ones((4, 2))),
                     "n_traj": (grid, np.full((4, 2), 100))}, coords={"law": laws, "d": dims})
    ds.attrs.update(fixed_b=3.0, fixed_t=1.0, fixed_n_layers=8)
    s = homog_laws.summary(ds)
    return s, homog_laws.phrases(s)


def test_laws_largest_difference_and_its_control():
    s, words = _laws(2.5)
    m = s["largest"]
    assert (m["law"], m["d"], m["n_tests"]) == ("rademacher_all", 3, 6)
    assert m["p"] == pytest.approx(2 * stats.norm.sf(2.5))
    assert m["p_bonferroni"] == pytest.approx(6 * m["p"])
    assert m["p_within_law"] == pytest.approx(2 * m["p"])
    assert m["upper95"] == pytest.approx(0.0125 + 1.96 * 0.005)
    assert "not significant at 5% ($p$ = 0.075) after" in words["largest"]
    assert "for the dimensions of that law alone" not in words["largest"]  # post hoc
    assert "exceeds" in words["largest"]
    assert "resolve no difference" in words["verdict"]
    s, words = _laws(4.5)
    assert "not significant" not in words["largest"]
    assert "makes a difference" in words["verdict"]


def test_sde_noise_is_centred_with_random_keys(x0):
    """With sigma_qk > 0 and a coarse Monte Carlo field (16 pairs) the scheme's tangent mean
    displacement over one chain step is the drift of that field: the noise adds no bias of
    its own (drawn around the field, it would add the field's Monte Carlo error times
    sqrt(substeps) - 1)."""
    # eta = 1e-3: the normalisation's second-order terms (of relative size eta) stay below the
    # noise, and the bias this test guards against does not shrink with eta
    model = _model(sigma=0.0, sigma_qk=0.7, beta=2.0, eta=1e-3)
    n = 20_000
    y = limits.sde_paths(x0, model, 1e-3, [0.0, 1e-3], n, substeps=16, seed=3,
                         drift_correction=False, n_samples=16)[-1]
    disp = (y - x0) / 1e-3
    tangent = disp - np.sum(disp * x0, axis=-1, keepdims=True) * x0
    b = limits.drift(x0, model, n_samples=16)
    z = (tangent.mean(0) - b) / np.sqrt(tangent.var(0) / n)
    assert np.max(np.abs(z)) < Z
    with pytest.raises(ValueError, match="common-noise"):
        limits.sde_paths(x0, _model(noise="independent"), 0.01, [0.01], 2)


def test_bad_knobs_and_scales_are_named():
    from stochastic_transformers.figures import homog_rate

    with pytest.raises(ValueError, match="t_final"):
        homog_rate.compute("smoke", t_final=0.3, progress=False)
    with pytest.raises(ValueError, match="sigma_qk"):
        ModelConfig(d=3, beta=1.0, kind="random_attention", sigma_qk=1e200)


def test_log_log_slope_weighted_unweighted_and_inflated():
    from stochastic_transformers.stats import log_log_slope, t_equivalent

    x = np.array([1.0, 2.0, 4.0, 8.0])
    slope, se, chi2 = log_log_slope(x, 3.0 * x ** 1.5)
    assert slope == pytest.approx(1.5) and se < 1e-10 and math.isnan(chi2)
    y = 2.0 * x * np.array([1.0, 1.1, 0.9, 1.0])       # scatter of 10% against 1% errors
    s0, se0, chi0 = log_log_slope(x, y, 0.01 * y)
    s1, se1, chi1 = log_log_slope(x, y, 0.01 * y, inflate=True)
    assert s0 == s1 and chi0 == chi1 > 10 and se1 == pytest.approx(se0 * math.sqrt(chi0))
