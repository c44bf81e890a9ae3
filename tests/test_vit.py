"""The attention-only ViT of Figure 2: model, training loop, resumption, figure, notebook."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from stochastic_transformers import training, vit  # noqa: E402
from stochastic_transformers.figures import fig2  # noqa: E402
from stochastic_transformers.stats import detectable_gap  # noqa: E402
from stochastic_transformers.training import TrainConfig, train  # noqa: E402
from stochastic_transformers.vit import AttentionOnlyViT, ViTConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# A tiny run on the digits: a few seconds for all of its epochs.
TINY = dict(dataset="digits", depth=3, width=8, patch_size=4, epochs=3, warmup_epochs=1,
            lr=3e-3, device="cpu")


def small_model(value_init="gaussian", **kw):
    args = dict(depth=6, width=12, value_init=value_init, image_size=8, patch_size=2,
                channels=1, num_classes=10)
    return AttentionOnlyViT(ViTConfig(**{**args, **kw}),
                            generator=torch.Generator().manual_seed(0))


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("pool, tokens", [("cls", 17), ("mean", 16)])
def test_shapes_and_tokens_on_the_sphere(pool, tokens):
    model = small_model(pool=pool)
    images = torch.randn(5, 1, 8, 8)
    assert model(images).shape == (5, 10)
    x = model.features(images)
    assert x.shape == (5, tokens, 12) and model.num_tokens == tokens
    # RMS normalisation: every token has norm sqrt(d).
    torch.testing.assert_close(x.norm(dim=-1), torch.full((5, tokens), math.sqrt(12)))


def test_paper_configuration_shapes():
    model = AttentionOnlyViT(vit.PAPER_CONFIG, generator=torch.Generator().manual_seed(0))
    assert (model.depth, model.width) == (128, 96)
    assert model.values.shape == (128, 96, 96)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_query_key_shared_and_identity_value_shared():
    model = small_model("identity")
    names = dict(model.named_parameters())
    # One query, one key and one value matrix for the whole depth.
    assert names["query"].shape == names["key"].shape == (12, 12)
    assert names["values"].shape == (1, 12, 12)
    torch.testing.assert_close(model.values[0], torch.eye(12))
    ptrs = {model.value(n).data_ptr() for n in range(model.depth)}
    assert len(ptrs) == 1
    # Every block's gradient flows into the one shared matrix, and all of them train.
    model(torch.randn(4, 1, 8, 8)).sum().backward()
    for name in ("query", "key", "values"):
        assert names[name].grad is not None and names[name].grad.abs().sum() > 0
    gaussian = small_model("gaussian")
    assert gaussian.values.shape == (6, 12, 12)
    assert len({gaussian.value(n).data_ptr() for n in range(6)}) == 6
    assert all(p.requires_grad for p in gaussian.parameters())


def test_gaussian_values_initial_statistics():
    # 64 layers x 32 x 32 = 65,536 entries: the standard error of the mean is 0.004
    # and that of the standard deviation 0.003; the tolerances are 5 of them.
    for sigma in (1.0, 2.5):
        config = ViTConfig(depth=64, width=32, value_init="gaussian", sigma=sigma,
                           image_size=8, patch_size=4, channels=1)
        v = AttentionOnlyViT(config, generator=torch.Generator().manual_seed(1)).values.detach()
        assert abs(float(v.mean())) < 5 * sigma / 256
        assert abs(float(v.std()) / sigma - 1) < 5 / math.sqrt(2 * v.numel())
        # Independent layers: the correlation of two layers' entries is small.
        corr = np.corrcoef(v[0].flatten().numpy(), v[1].flatten().numpy())[0, 1]
        assert abs(corr) < 5 / math.sqrt(32 * 32)


def test_same_seed_differs_only_in_values():
    a, b = (training.build_model(TrainConfig.from_flat(value_init=init, **TINY).validate())
            for init in ("identity", "gaussian"))
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        if name != "values":
            assert torch.equal(pa, pb), name


def test_block_is_the_discrete_model_on_the_unit_sphere():
    # X_{n+1} = normalize(X_n + L^{-1/2} V A(X_n)) for u = x / sqrt(d), softmax attention
    # with scores sqrt(d) u_i^T Q^T K u_j.
    model = small_model("gaussian")
    d, L = model.width, model.depth
    u = torch.nn.functional.normalize(torch.randn(3, 7, d, dtype=torch.float64), dim=-1)
    model = model.double()
    with torch.no_grad():
        out = model.block(math.sqrt(d) * u, 2) / math.sqrt(d)
        q, k, v = model.query, model.key, model.value(2)
        scores = math.sqrt(d) * torch.einsum("bia,ca,cf,bjf->bij", u, q, k, u)
        attn = torch.softmax(scores, dim=-1) @ u
        expected = torch.nn.functional.normalize(u + (attn @ v.T) / math.sqrt(L), dim=-1)
    # (up to the 1e-6 that keeps the RMS normalisation away from a division by zero)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("value_init", ["identity", "gaussian"])
def test_one_step_lowers_the_loss(value_init):
    torch.manual_seed(0)
    model = small_model(value_init)
    images, labels = torch.randn(32, 1, 8, 8), torch.randint(0, 10, (32,))
    cfg = TrainConfig.from_flat(value_init=value_init, dataset="digits", lr=1e-4, device="cpu")
    opt = training._optimizer(model, cfg.validate())

    def loss():
        return torch.nn.functional.cross_entropy(model(images), labels)

    before = loss()
    opt.zero_grad()
    before.backward()
    opt.step()
    with torch.no_grad():
        assert float(loss()) < float(before)


def test_bad_model_input():
    with pytest.raises(ValueError, match="depth"):
        AttentionOnlyViT(ViTConfig(depth=0, width=8))
    with pytest.raises(ValueError, match="value_init"):
        AttentionOnlyViT(ViTConfig(depth=4, width=8, value_init="orthogonal"))
    with pytest.raises(ValueError, match="pool"):
        AttentionOnlyViT(ViTConfig(depth=4, width=8, pool="max"))
    with pytest.raises(ValueError, match="sigma"):
        AttentionOnlyViT(ViTConfig(depth=4, width=8, sigma=0.0))
    with pytest.raises(ValueError, match="patch_size"):
        AttentionOnlyViT(ViTConfig(depth=4, width=8, image_size=32, patch_size=5))
    with pytest.raises(ValueError, match="images must have shape"):
        small_model()(torch.randn(2, 3, 8, 8))


# --------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------
def test_learning_rate_schedule():
    lrs = [training.learning_rate(s, 100, 10, 1e-3, 1e-5) for s in range(100)]
    np.testing.assert_allclose(lrs[:10], 1e-3 * np.arange(1, 11) / 10)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))  # cosine decay after warm-up
    assert lrs[-1] < 2e-5
    assert training.learning_rate(100, 100, 10, 1e-3, 1e-5) == pytest.approx(1e-5)


@pytest.mark.parametrize("bad, match", [
    (dict(epochs=0), "epochs"), (dict(warmup_epochs=5), "warmup_epochs"),
    (dict(dataset="mnist"), "dataset"), (dict(value_init="ones"), "value_init"),
    (dict(augment=True), "augment"), (dict(lr=-1.0), "lr"), (dict(patch_size=3), "patch_size"),
    (dict(device="cpu", amp=True), "amp"), (dict(dataset="cifar10"), "data_dir"),
])
def test_bad_training_config(bad, match):
    with pytest.raises(ValueError, match=match):
        train(TrainConfig.from_flat(**{**TINY, **bad}), progress=False)


def test_cifar10_missing_or_corrupt_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="cifar-10-batches-py"):
        training.load_cifar10(tmp_path)
    folder = tmp_path / training.CIFAR10_FOLDER
    folder.mkdir()
    for name in training._CIFAR10_FILES:
        (folder / name).write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="corrupt"):
        training.load_cifar10(tmp_path)


def test_cifar10_download_only_when_asked(tmp_path, monkeypatch):
    import urllib.request

    calls = []

    def fake_urlretrieve(url, filename):
        calls.append(url)
        Path(filename).write_bytes(b"not the archive")

    monkeypatch.setattr(urllib.request, "urlretrieve", fake_urlretrieve)
    with pytest.raises(FileNotFoundError):
        training.load_cifar10(tmp_path)
    assert calls == []
    with pytest.raises(ValueError, match="MD5"):
        training.load_cifar10(tmp_path, download=True)
    assert calls == [training.CIFAR10_URL]


def test_cifar10_reader_on_a_fake_archive(tmp_path):
    import pickle

    folder = tmp_path / training.CIFAR10_FOLDER
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in training._CIFAR10_FILES:
        batch = {b"data": rng.integers(0, 256, (20, 3072), dtype=np.uint8),
                 b"labels": [int(v) for v in rng.integers(0, 10, 20)]}
        (folder / name).write_bytes(pickle.dumps(batch))
    data = training.load_cifar10(tmp_path)
    assert data.train_x.shape == (100, 3, 32, 32) and data.val_x.shape == (20, 3, 32, 32)
    assert data.train_x.dtype == torch.uint8 and data.prepare(data.val_x[:2]).dtype == torch.float32


_CHILD = textwrap.dedent("""
    import sys, time
    from stochastic_transformers.training import TrainConfig, train
    cfg = TrainConfig.from_flat(**eval(sys.argv[2]))
    # After the first epoch's checkpoint the run keeps going (slowly) until it is killed.
    train(cfg, checkpoint=sys.argv[1], progress=False,
          on_epoch_end=lambda epoch, acc: time.sleep(300) if epoch == 1 else None)
""")


def test_killed_run_resumes_to_the_uninterrupted_state(tmp_path):
    cfg = TrainConfig.from_flat(value_init="gaussian", seed=3, **TINY)
    ckpt = tmp_path / "run.pt"
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(ckpt), repr(TINY | {
        "value_init": "gaussian", "seed": 3})], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not ckpt.exists():
            assert child.poll() is None, "the training subprocess ended before its checkpoint"
            assert time.monotonic() < deadline, "no checkpoint after 120 s"
            time.sleep(0.05)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert [p.name for p in tmp_path.iterdir()] == ["run.pt"]  # no torn temporary file

    resumed = train(cfg, checkpoint=ckpt, progress=False)
    assert resumed.resumed_from == 1 and resumed.finished
    reference = train(cfg, progress=False)
    np.testing.assert_array_equal(resumed.val_accuracy, reference.val_accuracy)
    np.testing.assert_array_equal(resumed.train_loss, reference.train_loss)
    ref_state = reference.model.state_dict()
    for name, value in resumed.model.state_dict().items():
        assert torch.equal(value, ref_state[name]), name
    # A finished checkpoint is returned as is; another configuration is refused.
    again = train(cfg, checkpoint=ckpt, progress=False)
    assert again.resumed_from == 3 and again.wall_time == 0.0
    np.testing.assert_array_equal(again.val_accuracy, reference.val_accuracy)
    with pytest.raises(ValueError, match="another configuration"):
        train(TrainConfig.from_flat(value_init="gaussian", seed=4, **TINY), checkpoint=ckpt,
              progress=False)


# --------------------------------------------------------------------------------------
# The figure and the notebook
# --------------------------------------------------------------------------------------
def test_fig2_smoke_compute_plot_and_cache(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    assert fig2.FIGURE.id == "fig2" and set(fig2.SCALES) == {"smoke", "quick", "paper"}
    paper = fig2.SCALES["paper"]
    assert (paper["depth"], paper["width"], paper["epochs"], paper["seeds"]) == (128, 96, 300, 5)
    ds = fig2.compute("smoke", cache_dir=tmp_path, progress=False)
    acc = ds["val_accuracy"]
    assert acc.dims == ("init", "seed", "epoch")
    assert list(ds["init"].values) == ["identity", "gaussian"]
    assert acc.shape == (2, fig2.SCALES["smoke"]["seeds"], fig2.SCALES["smoke"]["epochs"])
    assert bool(((acc >= 0) & (acc <= 1)).all())
    again = fig2.compute("smoke", cache_dir=tmp_path, progress=False)  # from the checkpoints
    np.testing.assert_array_equal(again["val_accuracy"], acc)
    assert float(again["train_time"].sum()) == 0.0
    summary = fig2.summary(ds)
    assert {"identity", "gaussian", "gap", "wins", "verdict"} <= set(summary)
    fig = fig2.plot(ds)
    assert fig.axes[0].get_xlabel() == "epoch"
    fig.savefig(tmp_path / "fig2.png")


def test_fig2_summary_of_a_known_dataset():
    import xarray as xr

    acc = np.array([[[0.5, 0.6, 0.7], [0.5, 0.6, 0.8]],     # identity, seeds 0 and 1
                    [[0.3, 0.7, 0.75], [0.4, 0.5, 0.9]]])   # gaussian
    ds = xr.Dataset({"val_accuracy": (("init", "seed", "epoch"), acc)},
                    coords={"init": ["identity", "gaussian"], "seed": [0, 1],
                            "epoch": [1, 2, 3]})
    s = fig2.summary(ds)
    assert s["identity"]["mean"] == pytest.approx(0.75)
    assert s["gaussian"]["min"] == pytest.approx(0.75) and s["gaussian"]["max"] == 0.9
    assert s["gap"] == pytest.approx(0.075)
    assert (s["wins"], s["ties"], s["n_seeds"]) == (2, 0, 2)
    assert s["sign_test_p"] == pytest.approx(0.25)
    # the accuracy averaged over the epochs: gaps -0.05/3 and -0.1/3 for the two pairs
    assert s["speed_gap"] == pytest.approx(-0.025)
    # paired gaps 0.05 and 0.10: mean 0.075, sd 0.0354, t(0.975, 1) = 12.706
    half = 12.7062047 * np.std([0.05, 0.10], ddof=1) / np.sqrt(2)
    assert s["gap_low"] == pytest.approx(0.075 - half, rel=1e-6)
    assert s["gap_high"] == pytest.approx(0.075 + half, rel=1e-6)
    assert s["verdict"] == "no_detectable_difference"  # two pairs cannot exclude zero


@pytest.mark.parametrize("gaps, verdict", [
    ([0.02, 0.03, 0.01, 0.02, 0.04, 0.03, 0.02, 0.01, 0.03, 0.02], "gaussian_better"),
    ([-0.02, -0.03, -0.01, -0.02, -0.04, -0.03, -0.02, -0.01, -0.03, -0.02], "identity_better"),
    ([0.02, -0.03, 0.01, -0.02, 0.04, -0.03, 0.02, -0.01, 0.00, 0.01], "no_detectable_difference"),
    ([0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, -0.001, -0.001, -0.001], "mixed"),
    ([0.05], "single_seed"),
    # 29 tiny wins and one diverged run: the sign test rejects, the t interval does not.
    ([0.001] * 29 + [-0.5], "mixed"),
])
def test_fig2_verdicts_follow_interval_and_sign_test(gaps, verdict):
    import xarray as xr

    gaps = np.asarray(gaps)
    ident = np.full((gaps.size, 2), 0.8)
    gauss = ident + gaps[:, None]
    ds = xr.Dataset({"val_accuracy": (("init", "seed", "epoch"), np.stack([ident, gauss]))},
                    coords={"init": ["identity", "gaussian"], "seed": np.arange(gaps.size),
                            "epoch": [1, 2]})
    s = fig2.summary(ds)
    assert s["verdict"] == verdict
    assert s["wins"] + s["losses"] + s["ties"] == gaps.size
    assert s["gap"] == pytest.approx(gaps.mean())


def _paired(gaps, dataset="digits"):
    import xarray as xr

    gaps = np.asarray(gaps, dtype=float)
    ident = np.full((gaps.size, 2), 0.8)
    return xr.Dataset({"val_accuracy": (("init", "seed", "epoch"),
                                        np.stack([ident, ident + gaps[:, None]]))},
                      coords={"init": ["identity", "gaussian"], "seed": np.arange(gaps.size),
                              "epoch": [1, 2]}, attrs={"dataset": dataset})


def test_fig2_phrases_say_whether_the_claim_holds():
    better = fig2.summary(_paired([0.02, 0.03, 0.01, 0.02, 0.04, 0.03, 0.02, 0.01, 0.03, 0.02]))
    worse = fig2.summary(_paired(-np.array([0.02, 0.03, 0.01, 0.02, 0.04, 0.03, 0.02, 0.01,
                                            0.03, 0.02]), "digits-small"))
    level = fig2.summary(_paired([0.02, -0.03, 0.01, -0.02, 0.04, -0.03, 0.02, -0.01, 0.0,
                                  0.01], "digits-small"))
    mixed = fig2.summary(_paired([0.03] * 7 + [-0.001] * 3))
    assert fig2.phrases(better, better)["claim"] == "reproduced"
    assert fig2.phrases(better, level)["claim"] == "partly reproduced"
    words = fig2.phrases(mixed, worse)
    assert words["claim"] == "not reproduced"
    assert words["verdict_text"].startswith("**not reproduced**: over 10 seed pairs")
    assert "(7 pairs favour the random values, 3 the constant ones)" in words["verdict_text"]
    assert "on the 200-image digits task, where the constant values train better." in \
        words["verdict_text"]
    single = fig2.summary(_paired([0.05]))
    assert fig2.phrases(single, better)["claim"] == "not tested"
    assert fig2.stats_table(single) == "One seed pair: no paired statistics."
    table = fig2.stats_table(mixed, worse)
    assert table.splitlines()[0] == "|  | the 8 x 8 digits | the 200-image digits task |"
    assert "| pairs: random ahead / behind / level | 7 / 3 / 0 | 0 / 10 / 0 |" in table


def test_fig2_holm_correction_over_the_tasks():
    assert fig2.holm([0.01, 0.04], 0.05) == [True, True]     # 0.01 < 0.025, then 0.04 < 0.05
    assert fig2.holm([0.04, 0.001], 0.05) == [True, True]
    assert fig2.holm([0.03, 0.04], 0.05) == [False, False]   # 0.03 > 0.025 stops at once
    assert fig2.holm([0.001, 0.2], 0.05) == [True, False]
    # 8 wins, 1 loss, 1 tie: two-sided sign test p = 2 * 10 / 512, the larger of the two p's
    weak = fig2.summary(_paired([0.03] * 8 + [-0.001, 0.0]))
    assert weak["verdict"] == "gaussian_better"
    assert weak["p_verdict"] == pytest.approx(20 / 512)
    level = fig2.summary(_paired([0.02, -0.03, 0.01, -0.02, 0.04, -0.03, 0.02, -0.01, 0.0,
                                  0.01], "digits-small"))
    assert fig2.phrases(weak, weak)["claim"] == "reproduced"   # every task: no correction
    words = fig2.phrases(weak, level)                          # some task: Holm's correction
    assert words["claim"] == "not reproduced"
    assert "not after Holm's correction over the 2 tasks (p = 0.039)" in words["verdict_text"]
    strong = fig2.summary(_paired([0.02, 0.03, 0.01, 0.02, 0.04, 0.03, 0.02, 0.01, 0.03, 0.02]))
    assert fig2.phrases(strong, level)["claim"] == "partly reproduced"
    assert "Holm" not in fig2.phrases(strong, level)["verdict_text"]


def test_fig2_points_are_never_minus_zero_or_nan():
    tiny = fig2.summary(_paired([-1e-5] * 10 + [1e-5] * 9))
    text = fig2.phrases(tiny)["verdict_text"] + fig2.stats_table(tiny)
    assert "-0.0" not in text and "\u22120.0" not in text and "nan" not in text.lower()
    assert fig2._points(float("nan")) == "–" and fig2._points(-0.0004) == "+0.0"


def test_fig2_flop_model_counts_the_paper_network():
    paper = fig2.SCALES["paper"]
    f = training.training_flops(paper["depth"], paper["width"], paper["patch_size"],
                                paper["epochs"])
    assert f["tokens"] == 65  # 8 x 8 patches of 4 x 4 pixels and the class token
    per_layer = 2 * (2 * 65 * 96 * 96 + 2 * 65 * 65 * 96)
    assert f["forward_flops_per_image"] == 128 * per_layer
    assert f["train_flops_per_run"] == 3 * 128 * per_layer * 50_000 * 300


def test_cpu_training_is_bitwise_repeatable_and_restores_torch_mode():
    cfg = TrainConfig.from_flat(dataset="digits", depth=3, width=8, patch_size=4, epochs=2,
                                warmup_epochs=1, seed=4, device="cpu", value_init="gaussian")
    before = torch.are_deterministic_algorithms_enabled()
    a = training.train(cfg, progress=False)
    b = training.train(cfg, progress=False)
    np.testing.assert_array_equal(a.train_loss, b.train_loss)
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)
    assert torch.are_deterministic_algorithms_enabled() == before


def test_fig2_bad_overrides(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="overrides"):
        fig2.compute("smoke", progress=False, depht=3)
    with pytest.raises(ValueError, match="seeds"):
        fig2.compute("smoke", progress=False, seeds=0)
    with pytest.raises(ValueError, match="width"):
        fig2.compute("smoke", progress=False, width=0)
    with pytest.raises(ValueError, match="scale"):
        fig2.compute("huge", progress=False)
    monkeypatch.delenv(fig2.CIFAR10_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match="cifar-10-batches-py"):
        fig2.compute("paper", progress=False, data_dir=str(tmp_path))


@pytest.mark.notebooks
def test_notebook_executes_at_smoke_scale(tmp_path):
    papermill = pytest.importorskip("papermill")
    jupytext = pytest.importorskip("jupytext")
    notebooks = ROOT / "notebooks"
    source = notebooks / "fig2_vit_training.md"
    nb = jupytext.read(source)
    ipynb = tmp_path / "fig2_vit_training.ipynb"
    jupytext.write(nb, ipynb)
    out = tmp_path / "executed.ipynb"
    papermill.execute_notebook(str(ipynb), str(out), parameters={"scale": "smoke"},
                               cwd=str(notebooks), progress_bar=False, kernel_name="python3")
    text = out.read_text()
    assert "Figure 2" in text and "image/png" in text


def test_fig2_without_the_vit_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)  # as if scikit-learn were missing
    with pytest.raises(ModuleNotFoundError, match=r"stochastic-transformers\[vit\]"):
        fig2.compute("smoke", progress=False)
    res = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['sklearn'] = None; "
         "from stochastic_transformers.cli import main; sys.exit(main(['reproduce', 'fig2', "
         "'--scale', 'smoke', '--out', 'unused']))"], capture_output=True, text=True)
    assert res.returncode == 2
    assert "stochastic-transformers[vit]" in res.stderr and "Traceback" not in res.stderr


def test_digits_small_keeps_twenty_training_images_a_class_and_the_same_validation_set():
    full, small = training.load_data("digits"), training.load_data("digits-small")
    assert small.name == "digits-small" and len(small.train_y) == 200
    assert torch.bincount(small.train_y).tolist() == [20] * 10
    assert torch.equal(full.val_y, small.val_y)
    cfg = TrainConfig.from_flat(dataset="digits-small", depth=2, width=8, epochs=1,
                                warmup_epochs=0, device="cpu").validate()
    assert cfg.vit.patch_size == training.DEFAULT_PATCH["digits-small"]


def test_detectable_gap_has_its_stated_power():
    """At the gap stats.detectable_gap names, a two-sided paired t test at 5% rejects in about
    80% of Monte Carlo replicates (normal gaps, 30 pairs, 4,000 replicates: standard error of
    the rejection rate 0.0063; tolerance 0.03, about 4.7 SE; the formula's own approximation
    error at 30 pairs is below 0.01)."""
    from scipy import stats

    n, sd = 30, 0.02
    gap = detectable_gap(sd, n, fig2.LEVEL, fig2.POWER)
    rng = np.random.default_rng(20261203)
    samples = rng.normal(gap, sd, size=(4000, n))
    p = stats.ttest_1samp(samples, 0.0, axis=1).pvalue
    assert np.mean(p < 0.05) == pytest.approx(fig2.POWER, abs=0.03)
    assert np.isnan(detectable_gap(sd, 1))


def test_obtain_shows_the_committed_stand_in_when_no_paper_result(monkeypatch):
    """Figure 2 has no paper-scale file (CIFAR-10); the default page shows the CPU study."""
    import xarray as xr

    from stochastic_transformers import figures
    from stochastic_transformers.figures import base

    study = xr.Dataset({"val_accuracy": (("init", "seed", "epoch"), np.zeros((2, 2, 1)))},
                       attrs={"git_commit": "abcdef123456", "wall_time_s": 12.0})
    files = {("fig2", "cpu"): study}
    monkeypatch.setattr(base, "load_committed",
                        lambda fig_id, scale="paper": files.get((fig_id, scale)))
    monkeypatch.setattr(figures.Figure, "compute", lambda *a, **k: pytest.fail("nothing may train"))
    ds, source = figures.obtain(fig2, "paper")
    assert ds.attrs["shown_scale"] == "cpu"
    assert "results/fig2_cpu.nc" in source and "abcdef1" in source
    files[("fig2", "cpu_small")] = study
    assert fig2.harder_task("cpu") is study
