"""The attention-only ViT at initialisation as the paper's model: the horizon, the paper's
attention form, the directions in depth against the simulator, and the tokens' geometry."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

torch = pytest.importorskip("torch")

from stochastic_transformers import ModelConfig, RunConfig, simulate  # noqa: E402
from stochastic_transformers.classification import token_geometry  # noqa: E402
from stochastic_transformers.training import TrainConfig  # noqa: E402
from stochastic_transformers.vit import AttentionOnlyViT, ViTConfig, rms_normalize  # noqa: E402

DIGITS = dict(image_size=8, patch_size=2, channels=1, num_classes=10)


def _model(seed=0, **kw):
    return AttentionOnlyViT(ViTConfig(**{"depth": 6, "width": 12, **DIGITS, **kw}),
                            generator=torch.Generator().manual_seed(seed))


def _unit_tokens(n_tok, d, seed):
    u = torch.randn(n_tok, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return torch.nn.functional.normalize(u, dim=-1)


def test_the_default_horizon_keeps_the_papers_step_bit_for_bit():
    model = _model()
    x = math.sqrt(12) * _unit_tokens(5, 12, 1).float()[None]
    with torch.no_grad():
        update = model.attention(x) @ model.value(2).T
        expected = rms_normalize(x + update / math.sqrt(6))
        assert torch.equal(model.block(x, 2), expected)


def test_a_horizon_scales_the_residual_by_the_root_of_t_over_l():
    model = _model(horizon=9.0).double()
    x = math.sqrt(12) * _unit_tokens(5, 12, 1)[None]
    with torch.no_grad():
        update = model.attention(x) @ model.value(3).T
        expected = torch.nn.functional.normalize(x + math.sqrt(9.0 / 6) * update, dim=-1)
        out = torch.nn.functional.normalize(model.block(x, 3), dim=-1)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=2e-6)


def test_the_identity_attention_scores_beta_times_the_overlap_and_keeps_every_other_draw():
    paper, random = _model(qk_init="identity", beta=2.5), _model()
    d = 12
    torch.testing.assert_close(paper.bilinear(), 2.5 / d * torch.eye(d))
    u = _unit_tokens(4, d, 2).float()
    x = math.sqrt(d) * u
    scores = (x @ paper.bilinear()) @ x.T
    torch.testing.assert_close(scores, 2.5 * u @ u.T, rtol=1e-5, atol=1e-6)
    for name, p in random.named_parameters():
        if name not in ("query", "key"):
            assert torch.equal(p, dict(paper.named_parameters())[name]), name


def test_directions_in_depth_start_at_the_embedding_and_end_at_the_features():
    model = _model(qk_init="identity", beta=1.0)
    images = torch.rand(3, 1, 8, 8)
    u = model.directions_in_depth(images)
    assert u.shape == (3, 7, 17, 12)
    torch.testing.assert_close(u.norm(dim=-1), torch.ones(3, 7, 17))
    with torch.no_grad():
        torch.testing.assert_close(u[:, -1], torch.nn.functional.normalize(
            model.features(images), dim=-1))
        torch.testing.assert_close(u[:, 0], torch.nn.functional.normalize(
            model.embed(images), dim=-1))


def test_the_network_at_initialisation_is_the_papers_model_in_law():
    """From one start of 4 tokens (d = 5, beta = 2, T = 4, L = 8), the network's blocks with
    fresh Gaussian values (3,000 draws, float64) against 3,000 trajectories of the
    simulator: two-sample KS tests of two overlaps at the last layer, each at level 1e-4."""
    d, depth, n = 5, 8, 3000
    model = AttentionOnlyViT(ViTConfig(depth=depth, width=d, qk_init="identity", beta=2.0,
                                       horizon=4.0, **DIGITS)).double()
    u0 = _unit_tokens(4, d, 3)
    gen = torch.Generator().manual_seed(4)
    last = np.empty((n, 4, 4))
    with torch.no_grad():
        for t in range(n):
            model.values.copy_(torch.randn(depth, d, d, generator=gen, dtype=torch.float64))
            x = math.sqrt(d) * u0[None]
            for k in range(depth):
                x = model.block(x, k)
            y = torch.nn.functional.normalize(x[0], dim=-1)
            last[t] = (y @ y.T).numpy()
    ds = simulate(ModelConfig(d=d, beta=2.0), RunConfig(n_tokens=4, n_traj=n, L=depth // 4,
                                                        T=4.0, x0=u0.numpy(), seed=5,
                                                        method="literal"))
    for i, j in ((0, 1), (2, 3)):
        assert scipy.stats.ks_2samp(last[:, i, j], ds.gram.values[:, i, j]).pvalue > 1e-4


def test_token_geometry_of_known_configurations():
    e = np.eye(3)
    orthogonal = e @ e.T
    two_antipodal = np.array([[1, 1, -1, -1], [1, 1, -1, -1], [-1, -1, 1, 1], [-1, -1, 1, 1]],
                             dtype=float)
    g = token_geometry(np.stack([orthogonal, np.ones((3, 3))])[None])
    np.testing.assert_allclose(g["effective_rank"], [[3.0, 1.0]])
    np.testing.assert_allclose(g["mean_overlap"], [[0.0, 1.0]])
    assert g["n_clusters"].tolist() == [[3, 1]]
    g = token_geometry(two_antipodal)
    assert g["n_clusters"] == 2 and g["effective_rank"] == pytest.approx(1.0)
    assert g["antipodal_share"] == pytest.approx(8 / 12)
    assert g["mean_overlap"] == pytest.approx(-1 / 3)


@pytest.mark.parametrize("fields, name", [(dict(horizon=0.0), "horizon"),
                                          (dict(horizon=1e4), "horizon"),
                                          (dict(qk_init="eye"), "qk_init"),
                                          (dict(qk_init="identity", beta=-1.0), "beta"),
                                          (dict(beta=2.0), "beta")])
def test_the_new_fields_are_named_when_bad(fields, name):
    with pytest.raises(ValueError, match=name):
        ViTConfig(**fields).validate()


def test_the_new_fields_enter_the_key_only_away_from_their_defaults():
    base = TrainConfig.from_flat(dataset="digits", depth=3, width=8, device="cpu")
    assert not {"horizon", "qk_init", "beta"} & set(base.validate().key())
    paper = TrainConfig.from_flat(dataset="digits", depth=3, width=8, device="cpu",
                                  horizon=4.0, qk_init="identity", beta=2.0)
    assert {"horizon": 4.0, "qk_init": "identity", "beta": 2.0}.items() <= paper.validate().key().items()
    assert paper.key_hash() != base.key_hash()


def test_with_identity_values_the_network_is_the_deterministic_flow():
    """One identity V and the paper's attention: a block steps sqrt(T/L) along A, the flow's
    step 1/L' with L' = sqrt(L/T) = 4 here, so the network's last directions equal the hybrid
    model at epsilon = 0 run to L / L' (float64; up to the 1e-6 that keeps the RMS
    normalisation away from a division by zero, which shortens the tokens by a part in 1e6)."""
    model = AttentionOnlyViT(ViTConfig(depth=16, width=6, value_init="identity",
                                       qk_init="identity", beta=1.5, **DIGITS),
                             generator=torch.Generator().manual_seed(1)).double()
    u = model.directions_in_depth(torch.rand(5, 1, 8, 8, dtype=torch.float64))
    u0, last = u[:, 0].numpy(), u[:, -1].numpy()
    ds = simulate(ModelConfig(d=6, beta=1.5, kind="hybrid"),
                  RunConfig(n_tokens=u0.shape[1], n_traj=5, L=4, T=4.0, x0=u0, method="literal"))
    np.testing.assert_allclose(ds.gram.values, last @ last.transpose(0, 2, 1), atol=2e-6)


def _fake_study(gap, n_pairs=10, seed=0):
    """A train_phase dataset without training: one task, two arms, two horizons, whose
    Gaussian runs end ``gap`` above the identity ones in the first arm and below in the second."""
    import xarray as xr

    from stochastic_transformers.figures.ours import train_phase as tp

    rng = np.random.default_rng(seed)
    dims = ("task", "attention", "horizon", "init", "pair")
    shape = (1, 2, 2, 2, n_pairs)
    acc = 0.6 + 0.01 * rng.standard_normal(shape)
    acc[0, 0, :, 1] += gap
    acc[0, 1, :, 1] -= gap
    rank = np.broadcast_to(np.array([1.0, 3.0])[None, :, None, None, None], shape).copy()
    data = {"val_accuracy": (dims, acc), "first_loss": (dims, np.full(shape, 2.3))}
    for k in tp.GEOMETRY:
        data[f"init_{k}"] = (dims + ("layer",), np.repeat(rank[..., None], 3, axis=-1))
        data[f"model_{k}"] = (dims, rank)
    data["init_gradient"] = (dims + ("layer",), np.ones(shape + (3,)))
    ds = xr.Dataset(data, coords={"task": ["digits"], "attention": ["beta 0.5", "beta 3"],
                                  "horizon": [0.0625, 1.0], "init": list(tp.INITS),
                                  "pair": np.arange(n_pairs), "layer": np.arange(3)})
    ds.attrs.update(fixed_width=16, fixed_depth=2, fixed_patch_size=2)
    return tp, ds


def test_the_study_summary_finds_a_planted_gap_and_orders_the_cells():
    tp, ds = _fake_study(gap=0.05)
    stats = tp.summary(ds)
    planted = [k for k, c in stats["cells"].items() if c.get("held")]
    assert planted == ["digits, beta 0.5, T = 0.0625", "digits, beta 0.5, T = 1",
                       "digits, beta 3, T = 0.0625", "digits, beta 3, T = 1"]
    assert stats["cells"]["digits, beta 0.5, T = 1"]["phase"] == "below beta_c"
    assert stats["cells"]["digits, beta 3, T = 1"]["phase"] == "above beta_c"
    assert stats["initial"] == {"effective_rank": 2.0, "n_groups": 2.0, "n_tokens": 17}
    words = tp.phrases(stats)
    assert words["by_horizon"] == ("at T = 0.0625 the mean gap is negative in 1 of 2 cells, 1 of "
                                   "them after Holm's correction; at T = 1 the mean gap is "
                                   "negative in 1 of 2 cells, 1 of them after Holm's correction")
    # the planted gaps: +5 points below beta_c, -5 above, at both horizons
    side = stats["contrasts"]["digits"]["side"]
    assert side["gap"]["gap"] == pytest.approx(-0.10, abs=0.02) and side["gap"]["gap_high"] < 0
    horizon = stats["contrasts"]["digits"]["horizon"]["beta 0.5, gaussian"]
    assert abs(horizon["gap"]) < 0.02 and horizon["gap_low"] < 0 < horizon["gap_high"]
    assert "intervals below zero" in words["horizon_effect"] and "on digits" in words["side"]
    assert words["interaction"].startswith("between ")
    assert words["rank_text"].startswith("ρ = ")
    assert "digits, beta 3, T = 1" in tp.tables(stats)["cells"]
    none = tp.summary(_fake_study(gap=0.0)[1])
    assert not any(c["held"] for c in none["cells"].values())
    assert tp.phrases(none)["by_horizon"].count("0 of them") == 2


def _fake_width_study(step, slope, n_pairs=10, seed=0):
    """A train_width dataset without training: betas 1, 2, 3.5 at widths 16 and 64, whose gap
    (Gaussian minus identity) moves by ``step`` above beta_c(d) and by ``slope`` a unit of beta
    at both widths (the sharpness), with noise of 2 points a run."""
    import xarray as xr

    from stochastic_transformers.figures.ours import train_width as tw
    from stochastic_transformers.theory import critical_beta

    rng = np.random.default_rng(seed)
    betas, widths = [1.0, 2.0, 3.5], [16, 64]
    dims = ("task", "beta", "width", "init", "pair")
    shape = (1, 3, 2, 2, n_pairs)
    acc = 0.6 + 0.02 * rng.standard_normal(shape)
    for i, b in enumerate(betas):
        for j, w in enumerate(widths):
            acc[0, i, j, 1] += slope * b + (step if b > critical_beta(w) else 0.0)
    data = {"val_accuracy": (dims, acc), "first_loss": (dims, np.full(shape, 2.3))}
    for k in tp_geometry():
        data[f"init_{k}"] = (dims + ("layer",), np.zeros(shape + (3,)))
        data[f"model_{k}"] = (dims, np.zeros(shape))
    data["init_gradient"] = (dims + ("layer",), np.ones(shape + (3,)))
    ds = xr.Dataset(data, coords={"task": ["digits"], "beta": betas, "width": widths,
                                  "init": ["identity", "gaussian"], "pair": np.arange(n_pairs),
                                  "layer": np.arange(3)})
    ds.attrs.update(fixed_depth=2, fixed_noise_time=16.0)
    return tw, ds


def tp_geometry():
    from stochastic_transformers.figures.ours.train_phase import GEOMETRY
    return GEOMETRY


def test_the_width_study_tells_a_step_at_the_threshold_from_the_sharpness():
    # beta = 2 lies above beta_c(16) = 1.67 and below beta_c(64) = 2.41: each neighbouring
    # pair of betas crosses the threshold at one width only
    tw, ds = _fake_width_study(step=-0.10, slope=-0.05)
    stats = tw.summary(ds)
    assert list(stats["steps"]) == ["digits, β 1 → 2, crossed at d = 16",
                                    "digits, β 2 → 3.5, crossed at d = 64"]
    pooled = stats["pooled"]["digits"]
    assert pooled["gap"] == pytest.approx(-0.10, abs=0.02) and pooled["gap_high"] < 0
    assert stats["cells"]["digits, d = 64, β = 2"]["phase"] == "below beta_c"
    assert stats["cells"]["digits, d = 16, β = 2"]["phase"] == "above beta_c"
    words = tw.phrases(stats)
    assert words["pooled"].startswith("-11.3 points (-16.2 to -6.4) on digits") and "probability 80%" in words["pooled"]
    assert "d = 16, β = 3.5" in tw.tables(stats)["cells"]


def test_the_width_study_sees_no_step_in_a_sharpness_alone():
    """The false-alarm rate of the pooled interval (95%) on 200 studies whose gap follows
    the sharpness alone: about 5%, and below 10% (binomial, p < 1e-3 under 5%)."""
    tw = _fake_width_study(0.0, 0.0)[0]
    alarms = 0
    for seed in range(200):
        pooled = tw.summary(_fake_width_study(step=0.0, slope=-0.05, seed=seed)[1])["pooled"]
        alarms += pooled["digits"]["gap_low"] > 0 or pooled["digits"]["gap_high"] < 0
    assert alarms < 20
