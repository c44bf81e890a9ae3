"""Figure 2: validation accuracy of a deep attention-only ViT, identity vs Gaussian values.

The paper (section 6, Figure 2) trains the attention-only Vision Transformer of
:mod:`stochastic_transformers.vit` on CIFAR-10 twice: with one value matrix
shared by all layers and initialised at the identity ("constant weights"), and
with an independent i.i.d. Gaussian value matrix per layer ("random weights").
The random initialisation reaches the higher validation accuracy.  The figure
shows the mean validation accuracy over seeds and the min-max band, per epoch.

Scales
------
``smoke``
    a few seconds: a tiny network, two epochs, one seed, on the digits.
``quick``
    the paper's network (128 attention layers of width 96) on scikit-learn's
    8 x 8 digits, cut into four 4 x 4 patches (five tokens with the class
    token), for 20 epochs (2 warm-up, learning rate 3e-3) and 3 seeds: both
    initialisations train in about ten minutes on two CPU cores.
``paper``
    the paper's run: CIFAR-10, depth 128, width 96, 300 epochs (8 warm-up),
    batch 128, AutoAugment, 5 seeds.  Hours on one GPU.  The CIFAR-10 folder
    is ``data_dir``; by default the environment variable
    ``STOCHASTIC_TRANSFORMERS_CIFAR10``, else ``./data``.

The same seed gives both initialisations the same embeddings, Q, K, head and
data order, so that they differ only in the value matrices: seed ``s`` of one
curve is paired with seed ``s`` of the other.

The runs are sequential in this process (one GPU, or the CPU); ``scheduler`` is
accepted for the common figure interface and ignored.  With ``cache_dir`` every
run writes a checkpoint after each epoch, so a killed ``reproduce`` resumes
where it stopped and a finished run is not trained again.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from .._validation import check_choice, check_int

ID = "fig2"
DESCRIPTION = ("attention-only ViT, 128 layers: validation accuracy with identity (shared) vs "
               "Gaussian (per layer) value matrices")

#: Environment variable naming the CIFAR-10 folder of the paper scale.
CIFAR10_ENV = "STOCHASTIC_TRANSFORMERS_CIFAR10"

INITS = ("identity", "gaussian")

SCALES = {
    "smoke": {"dataset": "digits", "depth": 4, "width": 8, "patch_size": 4, "epochs": 2,
              "warmup_epochs": 1, "seeds": 1, "lr": 3e-3, "device": "cpu"},
    "quick": {"dataset": "digits", "depth": 128, "width": 96, "patch_size": 4, "epochs": 20,
              "warmup_epochs": 2, "seeds": 3, "lr": 3e-3, "device": "cpu"},
    "paper": {"dataset": "cifar10", "depth": 128, "width": 96, "patch_size": 4, "epochs": 300,
              "warmup_epochs": 8, "seeds": 5, "lr": 1e-3, "device": None, "data_dir": None},
}

#: Knobs that ``compute`` accepts as overrides, with their defaults outside SCALES.
KNOBS = {"dataset": "digits", "depth": 128, "width": 96, "patch_size": None, "epochs": 300,
         "warmup_epochs": 8, "seeds": 5, "inits": INITS, "device": None, "data_dir": None,
         "download": False, "lr": 1e-3, "min_lr": 1e-5, "weight_decay": 5e-5,
         "batch_size": 128, "sigma": 1.0, "pool": "cls", "augment": None, "amp": None,
         "compile": None, "num_workers": None}

_LABELS = {"identity": "identity V, shared by all layers (constant)",
           "gaussian": "Gaussian V, independent per layer (random)"}
_DATASET_NAMES = {"digits": "8x8 digits", "cifar10": "CIFAR-10"}


def _params(scale: str, overrides: dict) -> dict:
    from .. import training

    check_choice("scale", scale, tuple(SCALES))
    unknown = sorted(set(overrides) - set(KNOBS))
    if unknown:
        raise ValueError(f"overrides must be among {', '.join(KNOBS)}; got {', '.join(unknown)}")
    p = {**KNOBS, **SCALES[scale], **overrides}
    check_int("seeds", p["seeds"], 1, 1000)
    check_int("epochs", p["epochs"], 1, 100_000)
    if "warmup_epochs" not in overrides:  # a shorter run keeps a warm-up that fits in it
        p["warmup_epochs"] = min(p["warmup_epochs"], p["epochs"])
    inits = tuple(p["inits"]) if not isinstance(p["inits"], str) else (p["inits"],)
    if not inits or len(set(inits)) != len(inits):
        raise ValueError(f"inits must be distinct values among {INITS}, got {p['inits']!r}")
    for init in inits:
        check_choice("inits", init, INITS)
    p["inits"] = inits
    if p["dataset"] == "cifar10" and p["data_dir"] is None:
        p["data_dir"] = os.environ.get(CIFAR10_ENV, "data")
    # Validate every run's configuration before any data is loaded or trained.
    p["configs"] = {(init, s): _config(p, init, s).validate()
                    for init in inits for s in range(p["seeds"])}
    if p["dataset"] == "cifar10" and not p["download"] \
            and training._find_cifar10(p["data_dir"]) is None:
        raise FileNotFoundError(f"CIFAR-10 not found in {str(p['data_dir'])!r} (set data_dir= or "
                                f"${CIFAR10_ENV}). " + training._cifar10_help(p["data_dir"]))
    cfg = next(iter(p["configs"].values()))
    if p["dataset"] == "cifar10" and cfg.device == "cpu":
        warnings.warn("training the CIFAR-10 figure on the CPU: expect days, not hours "
                      "(see the module docstring)", stacklevel=3)
    return p


def _config(p: dict, init: str, seed: int):
    from ..training import TrainConfig

    fields = {k: p[k] for k in ("dataset", "depth", "width", "patch_size", "epochs",
                                "warmup_epochs", "device", "data_dir", "download", "lr",
                                "min_lr", "weight_decay", "batch_size", "sigma", "pool",
                                "augment", "amp", "compile", "num_workers")}
    return TrainConfig(value_init=init, seed=seed, **fields)


def compute(scale: str = "quick", *, scheduler=None, cache_dir=None, progress: bool = True,
            **overrides) -> xr.Dataset:
    """Train both initialisations over ``seeds`` seeds; return ``val_accuracy(init, seed, epoch)``.

    ``overrides`` replace knobs of the scale (see :data:`KNOBS`): ``depth``,
    ``width``, ``epochs``, ``seeds``, ``dataset``, ``data_dir``, ``device``, ...
    ``scheduler`` is ignored (the runs are sequential); ``cache_dir`` holds one
    checkpoint per run (``cache_dir/fig2/<init>-seed<s>-<hash>.pt``).
    """
    from ..training import load_data, train

    del scheduler  # the runs share one device; see the module docstring
    p = _params(scale, overrides)
    data = load_data(p["dataset"], p["data_dir"], download=p["download"])
    n_epochs, seeds = p["epochs"], list(range(p["seeds"]))
    acc = np.full((len(p["inits"]), len(seeds), n_epochs), np.nan)
    loss = np.full_like(acc, np.nan)
    wall = np.zeros((len(p["inits"]), len(seeds)))
    start = time.perf_counter()
    for i, init in enumerate(p["inits"]):
        for s in seeds:
            cfg = p["configs"][(init, s)]
            ckpt = None
            if cache_dir is not None:
                ckpt = Path(cache_dir) / ID / f"{init}-seed{s}-{cfg.key_hash()}.pt"
            result = train(cfg, checkpoint=ckpt, progress=progress, data=data)
            acc[i, s], loss[i, s], wall[i, s] = result.val_accuracy, result.train_loss, \
                result.wall_time
    cfg0 = p["configs"][(p["inits"][0], 0)]
    attrs = {"figure": ID, "scale": scale, "dataset": p["dataset"], "depth": p["depth"],
             "width": p["width"], "patch_size": cfg0.patch_size, "epochs": n_epochs,
             "warmup_epochs": p["warmup_epochs"], "seeds": p["seeds"],
             "batch_size": p["batch_size"], "optimizer": "AdamW", "lr": p["lr"],
             "min_lr": p["min_lr"], "weight_decay": p["weight_decay"],
             "betas": list(cfg0.betas), "schedule": "linear warm-up, then cosine decay",
             "sigma": p["sigma"], "pool": p["pool"], "augment": cfg0.augment,
             "device": cfg0.device, "amp": cfg0.amp, "compile": cfg0.compile,
             "train_size": int(len(data.train_y)), "val_size": int(len(data.val_y)),
             "wall_time_s": time.perf_counter() - start}
    coords = {"init": list(p["inits"]), "seed": seeds, "epoch": np.arange(1, n_epochs + 1)}
    dims = ("init", "seed", "epoch")
    return xr.Dataset(
        {"val_accuracy": (dims, acc, {"long_name": "validation accuracy", "units": "1"}),
         "train_loss": (dims, loss, {"long_name": "mean training cross-entropy of the epoch"}),
         "train_time": (("init", "seed"), wall,
                        {"long_name": "training time of the run in this call", "units": "s"})},
        coords=coords, attrs=attrs)


def summarize(ds: xr.Dataset) -> dict:
    """Final-epoch validation accuracy per initialisation, and the paired comparison.

    Returns ``{"identity": {...}, "gaussian": {...}, ...}`` where each init has
    ``mean``, ``min``, ``max`` (over seeds, final epoch), ``best_mean`` (the
    best epoch of the mean curve) and ``mean_over_epochs`` (the mean curve
    averaged over epochs: how fast it learns), plus, when both inits are present,
    ``gap`` (gaussian minus identity, final mean), ``wins`` (seeds where the
    Gaussian run ends higher than the identity run of the same seed), ``ties``,
    ``n_seeds``, ``sign_test_p`` (the one-sided sign-test probability of at least
    ``wins`` such seeds among the untied ones if the initialisation made no
    difference), ``ahead_from`` (the first epoch from which the Gaussian mean
    curve stays above the identity one to the end, ``None`` if it is not above
    at the end), ``separated`` (the two min-max bands do not overlap at the
    final epoch) and ``gaussian_better`` (``gap > 0``).
    """
    final = ds["val_accuracy"].isel(epoch=-1)
    out: dict = {}
    for init in ds["init"].values.tolist():
        f = final.sel(init=init)
        curve = ds["val_accuracy"].sel(init=init).mean("seed")
        out[init] = {"mean": float(f.mean()), "min": float(f.min()), "max": float(f.max()),
                     "best_mean": float(curve.max()), "mean_over_epochs": float(curve.mean())}
    if {"identity", "gaussian"} <= set(out):
        g, i = final.sel(init="gaussian"), final.sel(init="identity")
        out["gap"] = out["gaussian"]["mean"] - out["identity"]["mean"]
        out["wins"] = int((g > i).sum())
        out["ties"] = int((g == i).sum())
        out["n_seeds"] = int(ds.sizes["seed"])
        untied = out["n_seeds"] - out["ties"]
        out["sign_test_p"] = sum(math.comb(untied, k) for k in range(out["wins"], untied + 1)) \
            / 2 ** untied if untied else 1.0
        ahead = (ds["val_accuracy"].sel(init="gaussian").mean("seed")
                 > ds["val_accuracy"].sel(init="identity").mean("seed")).values
        behind = np.flatnonzero(~ahead)
        if not behind.size:
            out["ahead_from"] = int(ds["epoch"].values[0])
        elif behind[-1] == ahead.size - 1:
            out["ahead_from"] = None
        else:
            out["ahead_from"] = int(ds["epoch"].values[behind[-1] + 1])
        out["separated"] = bool(out["gaussian"]["min"] > out["identity"]["max"]
                                or out["identity"]["min"] > out["gaussian"]["max"])
        out["gaussian_better"] = bool(out["gap"] > 0)
    return out


def plot(ds: xr.Dataset):
    """Mean validation accuracy over seeds with a min-max band, one curve per initialisation."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from ..style import palette

    colors = dict(zip(INITS, palette(2)))
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    epochs = ds["epoch"].values
    acc = 100 * ds["val_accuracy"]
    n_seeds = ds.sizes["seed"]
    for init in ds["init"].values.tolist():
        a = acc.sel(init=init)
        mean, lo, hi = a.mean("seed"), a.min("seed"), a.max("seed")
        label = f"{_LABELS.get(init, init)}: {float(mean[-1]):.1f}%"
        ax.plot(epochs, mean, color=colors.get(init), lw=1.8, label=label)
        if n_seeds > 1:
            ax.fill_between(epochs, lo, hi, color=colors.get(init), alpha=0.22, lw=0)
    a = ds.attrs
    name = _DATASET_NAMES.get(a.get("dataset"), a.get("dataset"))
    band = (f"mean over {n_seeds} seeds, shaded: min to max over seeds" if n_seeds > 1
            else "one seed")
    ax.set(xlabel="epoch", ylabel="validation accuracy (%)",
           xlim=(epochs[0] - 0.5 if len(epochs) == 1 else epochs[0], epochs[-1]))
    ax.set_title(f"Attention-only ViT on {name}: {a.get('depth')} layers, width "
                 f"{a.get('width')}\n{band}", fontsize="medium")
    ax.legend(loc="lower right", title="value matrices (final mean)", fontsize="small",
              title_fontsize="small")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="y", alpha=0.3)
    return fig
