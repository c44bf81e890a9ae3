"""The configuration of the ViT of Figure 2: ViTConfig, its place in TrainConfig, fig2's knobs.

The cache keys are pinned: every checkpoint of Figure 2 is stored under its run's
``key_hash``, so a change of any of these hashes would retrain (and orphan) every run.
"""

from __future__ import annotations

import dataclasses
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from stochastic_transformers import training, vit  # noqa: E402
from stochastic_transformers.figures import fig2  # noqa: E402
from stochastic_transformers.training import TrainConfig  # noqa: E402
from stochastic_transformers.vit import AttentionOnlyViT, ViTConfig  # noqa: E402

TINY = dict(dataset="digits", depth=3, width=8, patch_size=4, epochs=3, warmup_epochs=1,
            lr=3e-3, device="cpu")

#: The key hashes before ViTConfig existed (computed at commit 21438c0).
PINNED = {
    ("smoke", None, "identity", 0): "520b5c0e2ab6",
    ("smoke", None, "gaussian", 0): "9241ffdcb84c",
    ("smoke", "harder", "gaussian", 0): "4f153609ebad",
    ("quick", None, "identity", 0): "6bedfdc4f9b5",
    ("quick", None, "gaussian", 9): "94f0464caf38",
    ("quick", "harder", "identity", 0): "909d75920e4e",
    ("quick", "harder", "gaussian", 9): "d6e68a681ab3",
    ("paper", None, "identity", 0): "f4f85cddf2d0",
    ("paper", None, "gaussian", 4): "81c4ef75526b",
}
#: The names of the key (the flat configuration before ViTConfig).
KEY_NAMES = {"value_init", "seed", "dataset", "depth", "width", "sigma", "patch_size", "pool",
             "epochs", "warmup_epochs", "batch_size", "lr", "min_lr", "weight_decay", "betas",
             "augment"}


def test_the_cache_keys_of_fig2_are_unchanged(tmp_path):
    folder = tmp_path / training.CIFAR10_FOLDER
    folder.mkdir()
    for name in training._CIFAR10_FILES:  # present, never read
        (folder / name).write_bytes(b"")
    for (scale, task, init, seed), expected in PINNED.items():
        overrides = dict(fig2.HARDER_TASK[scale]) if task else {}
        if scale == "paper":
            overrides["data_dir"] = str(tmp_path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the paper scale on the CPU
            cfg = fig2.configs(fig2.FIGURE.knobs(scale, overrides))[(init, seed)]
        assert cfg.key_hash() == expected, (scale, task, init, seed)
        assert set(cfg.key()) == KEY_NAMES


def test_the_cache_keys_of_the_test_configurations_are_unchanged():
    cfg = TrainConfig.from_flat(value_init="gaussian", seed=3, **TINY)
    assert cfg.key_hash() == "4403300900cc"
    small = TrainConfig.from_flat(dataset="digits-small", depth=2, width=8, epochs=1,
                                  warmup_epochs=0, device="cpu")
    assert small.key_hash() == "048fc44b942f"
    # The key does not depend on how the config is run, nor on the spelling of the network.
    same = dataclasses.replace(TrainConfig(vit=ViTConfig(depth=3, width=8, patch_size=4)),
                               dataset="digits", epochs=3, warmup_epochs=1, lr=3e-3, seed=3,
                               num_workers=0)
    assert same.key_hash() == cfg.key_hash()


def test_flat_names_round_trip_and_replace_overrides():
    cfg = TrainConfig.from_flat(value_init="identity", seed=2, pool="mean", **TINY)
    assert cfg.vit == ViTConfig(depth=3, width=8, value_init="identity", patch_size=4,
                                pool="mean")
    assert TrainConfig.from_flat(**cfg.flat()) == cfg
    # the execution fields, and the later network fields at their defaults
    assert set(cfg.flat()) - set(cfg.key()) == (set(training._EXECUTION_FIELDS)
                                                | set(training._LATER_VIT_FIELDS))
    deeper = dataclasses.replace(cfg, vit=dataclasses.replace(cfg.vit, depth=5))
    assert deeper.flat() == {**cfg.flat(), "depth": 5}
    with pytest.raises(ValueError, match="image_size"):  # a data field, not a flat name
        TrainConfig.from_flat(image_size=8)
    with pytest.raises(ValueError, match="depht"):
        TrainConfig.from_flat(depht=3)


def test_validate_fits_the_network_to_the_data_set():
    cfg = TrainConfig.from_flat(**TINY).validate()
    assert (cfg.vit.image_size, cfg.vit.channels, cfg.vit.num_classes) == (8, 1, 10)
    assert cfg.vit == cfg.vit.validate()
    default_patch = TrainConfig.from_flat(**{**TINY, "patch_size": None}).validate()
    assert default_patch.vit.patch_size == training.DEFAULT_PATCH["digits"] == 2
    with pytest.raises(ValueError, match="vit.image_size must be 8"):
        TrainConfig(vit=ViTConfig(depth=3, width=8, image_size=16), dataset="digits",
                    device="cpu").validate()
    with pytest.raises(ValueError, match="vit must be a ViTConfig"):
        TrainConfig(vit={"depth": 3}, dataset="digits", device="cpu").validate()


@pytest.mark.parametrize("bad, match", [
    (dict(depth=0), "depth must be an integer >= 1 and <= 4096"),
    (dict(depth=4097), "depth"), (dict(width=2.5), "width"),
    (dict(value_init="ones"), "value_init must be one of 'identity', 'gaussian'"),
    (dict(sigma=0.0), "sigma must be > 0.0"), (dict(image_size=0), "image_size"),
    (dict(patch_size=5), "patch_size must divide image_size=32"),
    (dict(patch_size=64), "patch_size must be an integer >= 1 and <= 32"),
    (dict(channels=0), "channels"), (dict(num_classes=1), "num_classes must be an integer >= 2"),
    (dict(pool="max"), "pool"),
])
def test_vit_config_names_the_bad_field(bad, match):
    with pytest.raises(ValueError, match=match):
        ViTConfig(**bad).validate()
    with pytest.raises(ValueError, match=match):
        AttentionOnlyViT(ViTConfig(**bad))


def test_the_model_takes_its_config_whole():
    assert vit.PAPER_CONFIG == ViTConfig() and vit.PAPER_CONFIG.validate().patch_size == 4
    fields = dict(depth=2, width=6, patch_size=4, image_size=8, channels=1, num_classes=3)
    a = AttentionOnlyViT(ViTConfig(**fields), generator=torch.Generator().manual_seed(0))
    b = AttentionOnlyViT(generator=torch.Generator().manual_seed(0), **fields)
    assert a.config == b.config == ViTConfig(**fields)
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(pa, pb), name
    with pytest.raises(ValueError, match="fields must be among"):
        AttentionOnlyViT(depht=2)
    with pytest.raises(ValueError, match="config must be a ViTConfig"):
        AttentionOnlyViT({"depth": 2})


def test_fig2_knobs_are_the_flat_fields_of_the_training_config():
    knobs = fig2.FIGURE.default_knobs()
    assert set(knobs) == (set(TrainConfig().flat()) - set(fig2.NOT_KNOBS)) | set(fig2.OWN_KNOBS)
    assert knobs["depth"] == ViTConfig.depth and knobs["lr"] == TrainConfig.lr
    assert knobs["patch_size"] is None and knobs["inits"] == fig2.INITS
    with pytest.raises(AttributeError):
        fig2.NO_SUCH_NAME  # noqa: B018
