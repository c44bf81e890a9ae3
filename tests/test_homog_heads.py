"""Many heads (figures.followup.homog_heads) and the linear-noise spread behind it
(random_attention.limits.head_output_moments, linear_noise_spread)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stochastic_transformers import simulate
from stochastic_transformers.config import ModelConfig, RunConfig
from stochastic_transformers.figures import homog_heads
from stochastic_transformers.random_attention import limits
from stochastic_transformers.random_attention.limits import (
    _attend, head_output_moments, linear_noise_covariance, linear_noise_spread,
    turning_mean_value, upper_hemisphere_tokens)

D, N = 3, 4


def _model(sigma=1.0, sigma_qk=1.0, n_heads=1, eta=0.05):
    return ModelConfig(d=D, beta=1.0, kind="random_attention", eta=eta, sigma=sigma,
                       sigma_qk=sigma_qk, mean_qk=1.0, n_heads=n_heads,
                       mean_v=turning_mean_value(D, 0.5, 1.0))


def test_fixed_keys_leave_only_the_value_noise_exactly():
    x = upper_hemisphere_tokens(N, D)
    c_a, c_v = head_output_moments(x, _model(sigma_qk=0.0))
    m = _attend(1.0 * x @ x.T, x)                     # A = I: the deterministic attention
    assert np.abs(c_a).max() < 1e-15
    np.testing.assert_allclose(c_v, np.einsum("ik,ab->iakb", m @ m.T, np.eye(D)), atol=1e-15)


def test_the_covariance_matches_direct_draws_of_the_weights():
    """C_A + sigma^2 C_V against the sample covariance of V m_A(x) over 100,000 direct draws
    of (V, W, W'): every entry within 5 s.e. (about 1e-4 false alarms over 144 entries)."""
    model, x = _model(sigma=0.7), upper_hemisphere_tokens(N, D)
    c_a, c_v = head_output_moments(x, model, n_samples=1 << 16, seed=5)
    want = (c_a + 0.49 * c_v).reshape(N * D, N * D)
    rng = np.random.default_rng(11)
    n = 100_000
    w, wp = rng.standard_normal((2, n, D, D))
    scores = x @ x.T + np.einsum("ia,sab,jc,scb->sij", x, wp, x, w)
    v = np.asarray(model.mean_v_matrix) + 0.7 * rng.standard_normal((n, D, D))
    out = np.einsum("sab,sib->sia", v, _attend(scores, x[None])).reshape(n, N * D)
    dev = out - out.mean(axis=0)
    prod = np.einsum("si,sj->sij", dev, dev)
    se = prod.std(axis=0) / math.sqrt(n)
    # the sample of the moments has its own error, about 1/sqrt(2^17) of the entries' size
    assert np.all(np.abs(prod.mean(axis=0) - want) <= 5 * se + 5e-3 * np.abs(want).max())


def test_one_layer_spread_is_the_one_step_covariance_of_the_chain():
    """After one layer S = eta^2 tr(P C P^T) / (N H): against the chain's own one-layer spread
    (literal method, 100,000 trajectories, eta = 0.002), within 4 s.e., at H = 1 and 8."""
    x0 = upper_hemisphere_tokens(N, D)
    (s_a, _), (s_v, _) = linear_noise_spread(x0, _model(sigma=0.0, eta=0.002), 1,
                                             n_samples=1 << 14, n_batches=4, seed=2)
    n = 100_000
    for heads in (1, 8):
        ds = simulate(_model(sigma=1.5, n_heads=heads, eta=0.002),
                      RunConfig(n_tokens=N, n_traj=n, L=1, T=1.0, seed=heads, method="literal",
                                x0=np.broadcast_to(x0, (n, N, D)).copy()))
        x = ds.tokens.values.reshape(n, N, D)
        dev = np.sum((x - x.mean(axis=0)) ** 2, axis=(1, 2)) / N
        want = (s_a + 1.5 ** 2 * s_v) / heads
        # the neglected terms are O(eta) relative to the spread: 1e-2 covers them
        assert abs(dev.mean() - want) <= 4 * dev.std() / math.sqrt(n) + 1e-2 * want


def test_the_propagated_covariance_matches_the_chain_and_needs_the_jacobian(monkeypatch):
    """After 32 layers (t = 2) with 64 heads, every entry of the chain's 12 x 12 covariance
    (4,000 trajectories) lies within 4.5 s.e. plus 2% of the largest entry of
    (Sigma_A + Sigma_V) / H (the 2% for the O(1/H) terms; about 5e-4 false alarms over the 78
    distinct entries).  The group turns, so the layers' Jacobians move the covariance between
    entries: with J = I the same check fails (the trace alone would hardly see it)."""
    x0, heads, n = upper_hemisphere_tokens(N, D), 64, 4000
    ds = simulate(_model(n_heads=heads, eta=1 / 16),
                  RunConfig(n_tokens=N, n_traj=n, L=32, T=1.0, seed=1,
                            x0=np.broadcast_to(x0, (n, N, D)).copy()))
    dev = ds.tokens.values.reshape(n, N * D)
    dev = dev - dev.mean(axis=0)
    prod = np.einsum("si,sj->sij", dev, dev)
    emp, se = prod.mean(axis=0), prod.std(axis=0) / math.sqrt(n)

    def within(jacobian_is_identity):
        if jacobian_is_identity:
            monkeypatch.setattr(limits, "_layer_jacobian", lambda step, x, h: np.eye(x.size))
        sigma = linear_noise_covariance(x0, _model(eta=1 / 16), 32, n_samples=512, n_batches=4)
        want = (sigma[0] + sigma[1]).mean(axis=0) / heads
        return np.all(np.abs(emp - want) <= 4.5 * se + 0.02 * np.abs(want).max())

    assert within(False)
    assert not within(True)


def test_the_spread_is_linear_in_sigma_squared_and_refuses_bad_input():
    x0 = upper_hemisphere_tokens(N, D)
    (s_a, s_a_se), (s_v, s_v_se) = linear_noise_spread(x0, _model(eta=0.1), 5, n_samples=256,
                                                       n_batches=4)
    assert s_a > 0 and s_v > 0 and s_a_se < 0.2 * s_a and s_v_se < 0.05 * s_v
    # fixed keys: no key noise, exact (one batch)
    (k_a, k_a_se), (_, k_v_se) = linear_noise_spread(x0, _model(eta=0.1, sigma_qk=0.0), 5)
    assert k_a == 0.0 and k_a_se == 0.0 and k_v_se == 0.0
    with pytest.raises(ValueError, match="n_layers"):
        linear_noise_spread(x0, _model(), 0)
    with pytest.raises(ValueError, match="n_batches"):
        linear_noise_spread(x0, _model(), 3, n_batches=1)
    with pytest.raises(ValueError, match="unit vectors"):
        linear_noise_spread(2 * x0, _model(), 3)


def test_the_figure_agrees_at_smoke_scale_and_checks_its_knobs_first():
    ds = homog_heads.compute("smoke", progress=False)
    s = homog_heads.summary(ds)
    assert [r["sigma"] for r in s["rows"]] == [0.0, 1.0, 4.0]
    noisy = s["rows"][-1]
    # one head at sigma = 4 is far from linear noise; sixteen are close to it
    assert noisy["ratio_one"] < 0.5 < noisy["ratio_most"]
    # from H = 4 to 16 at sigma = 4 the spread still falls slower than 1/H: only partly
    assert [r["inverse_h"] for r in s["rows"]] == [True, True, False]
    assert homog_heads.verdict_word(s) == "Partly reproduced"
    assert "not everywhere like 1/H" in homog_heads.phrases(s)["verdict"]
    for bad, match in ((dict(heads=(4, 2)), "heads"), (dict(sigmas=(-1.0,)), "sigmas"),
                       (dict(L=0), "L")):
        with pytest.raises(ValueError, match=match):
            homog_heads.compute("smoke", progress=False, **bad)
