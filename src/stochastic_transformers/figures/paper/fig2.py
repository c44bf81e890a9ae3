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
    token), for 20 epochs (2 warm-up, learning rate 3e-3) and 10 seed pairs:
    enough pairs for a paired comparison with a confidence interval and a sign
    test.  The 20 runs train in about ten minutes on two CPU cores, once: every
    finished run is a checkpoint in ``cache_dir``.
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

import os
import time
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from ..stats import sign_test, t_interval
from .base import choices, integer, resolve_scale

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
              "warmup_epochs": 2, "seeds": 10, "lr": 3e-3, "device": "cpu"},
    "paper": {"dataset": "cifar10", "depth": 128, "width": 96, "patch_size": 4, "epochs": 300,
              "warmup_epochs": 8, "seeds": 5, "lr": 1e-3, "device": None, "data_dir": None},
}

#: A harder task made from the digits (200 training images instead of 1,437), run next to
#: each CPU scale as overrides of it: ``compute(scale, **HARDER_TASK[scale])``.  More
#: epochs, since an epoch is only two steps.
HARDER_TASK = {
    "smoke": {"dataset": "digits-small", "epochs": 2, "warmup_epochs": 1},
    "quick": {"dataset": "digits-small", "epochs": 60, "warmup_epochs": 6},
}


def harder_task(shown: str, *, cache_dir=None, progress=False, **overrides):
    """The harder task next to the shown result, or None where it has none (CIFAR-10).

    Beside the committed CPU study (``shown == STAND_IN[0]``) it is the committed
    ``results/fig2_cpu_small.nc``; beside the smoke and quick scales it is computed with
    :data:`HARDER_TASK`'s overrides on top of ``overrides`` (checkpoints in ``cache_dir``).
    """
    from .base import load_committed

    if shown == STAND_IN[0]:
        return load_committed(ID, STAND_IN_HARDER)
    if shown not in HARDER_TASK or overrides.get("dataset") is not None:
        return None
    return compute(shown, cache_dir=cache_dir, progress=progress,
                   **{**overrides, **HARDER_TASK[shown]})

#: The committed CPU study that the book shows in place of the paper scale (which needs
#: CIFAR-10 and a GPU): the quick settings with :data:`CPU_STUDY_SEEDS` seed pairs, on the
#: digits (``results/fig2_cpu.nc``) and on the harder task (``results/fig2_cpu_small.nc``),
#: made by ``OMP_NUM_THREADS=1 reproduce fig2 --scale quick --set seeds=30`` (and the
#: :data:`HARDER_TASK` overrides); see :func:`.base.obtain`.
STAND_IN = ("cpu", "CPU study (the quick settings with 30 seed pairs)")
CPU_STUDY_SEEDS = 30
#: The committed result of the harder task next to :data:`STAND_IN`.
STAND_IN_HARDER = "cpu_small"

#: Knobs of their own: a run's ``value_init`` and ``seed`` range over ``inits`` and
#: ``range(seeds)``.  The other knobs are the flat fields of ``training.TrainConfig``.
OWN_KNOBS = {"seeds": 5, "inits": INITS}
#: Flat fields of ``TrainConfig`` that are not knobs: the two that ``inits`` and ``seeds``
#: set, and ``betas`` (Adam's, fixed).
NOT_KNOBS = ("value_init", "seed", "betas")

_LABELS = {"identity": "identity V, shared by all layers (constant)",
           "gaussian": "Gaussian V, independent per layer (random)"}
_DATASET_NAMES = {"digits": "8x8 digits", "digits-small": "8x8 digits, 20 training images a class",
                  "cifar10": "CIFAR-10"}


#: What to install for this figure.
VIT_EXTRA = "pip install 'stochastic-transformers[vit]'  (PyTorch and scikit-learn)"


def _require_vit():
    """Import the training module, or say which extra is missing."""
    try:
        import sklearn  # noqa: F401 - the digits data set of the smoke and quick scales
        import torch  # noqa: F401

        from .. import training
    except ModuleNotFoundError as err:
        if err.name and err.name.split(".")[0] in ("torch", "sklearn"):
            raise ModuleNotFoundError(
                f"Figure 2 needs {err.name.split('.')[0]!r}, which is not installed: "
                f"{VIT_EXTRA}", name=err.name) from None
        raise
    return training


def knob_defaults() -> dict:
    """Knobs that ``compute`` accepts as overrides, with their defaults outside SCALES:
    every flat field of ``training.TrainConfig`` (:meth:`~..training.TrainConfig.flat`) but
    :data:`NOT_KNOBS`, then :data:`OWN_KNOBS`.  Needs the vit extra (PyTorch)."""
    training = _require_vit()
    defaults = {k: v for k, v in training.TrainConfig().flat().items() if k not in NOT_KNOBS}
    return {**defaults, **OWN_KNOBS}


def __getattr__(name):
    # ``KNOBS`` (what ``figures.knobs`` and ``--set`` read) is derived from TrainConfig, so it
    # needs torch; without the vit extra the module has no KNOBS, and compute says what to
    # install.
    if name == "KNOBS":
        try:
            return knob_defaults()
        except ModuleNotFoundError as err:
            raise AttributeError(f"fig2.KNOBS needs the vit extra: {VIT_EXTRA}") from err
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The knobs of this figure's own (:data:`OWN_KNOBS`) and the epochs, from which the
#: warm-up's default is derived; the other fields of the training configuration are checked
#: by ``training.TrainConfig.validate`` (as :func:`simulate` checks its parameters), here,
#: before any data is loaded.
KNOB_SCHEMA = {"seeds": integer(1, 1000), "epochs": integer(1, 100_000), "inits": choices(INITS)}


def _params(scale: str, overrides: dict) -> dict:
    training = _require_vit()
    knobs = knob_defaults()
    p = resolve_scale(SCALES, scale, overrides, KNOB_SCHEMA, defaults=knobs)
    if overrides.get("warmup_epochs") is None:  # a shorter run keeps a warm-up that fits in it
        p["warmup_epochs"] = min(p["warmup_epochs"], p["epochs"])
    if p["dataset"] == "cifar10" and p["data_dir"] is None:
        p["data_dir"] = os.environ.get(CIFAR10_ENV, "data")
    # Validate every run's configuration before any data is loaded or trained.
    fields = {k: p[k] for k in knobs if k not in OWN_KNOBS}
    p["configs"] = {(init, s): training.TrainConfig.from_flat(value_init=init, seed=s,
                                                              **fields).validate()
                    for init in p["inits"] for s in range(p["seeds"])}
    if p["dataset"] == "cifar10" and not p["download"] \
            and training.find_cifar10(p["data_dir"]) is None:
        raise FileNotFoundError(f"CIFAR-10 not found in {str(p['data_dir'])!r} (set data_dir= or "
                                f"${CIFAR10_ENV}). " + training.cifar10_help(p["data_dir"]))
    cfg = next(iter(p["configs"].values()))
    if p["dataset"] == "cifar10" and cfg.device == "cpu":
        warnings.warn("training the CIFAR-10 figure on the CPU: expect days, not hours "
                      "(see the module docstring)", stacklevel=3)
    return p


def compute(scale: str = "quick", *, scheduler=None, cache_dir=None, progress: bool = True,
            **overrides) -> xr.Dataset:
    """Train both initialisations over ``seeds`` seeds; return ``val_accuracy(init, seed, epoch)``.

    ``overrides`` replace knobs of the scale (see :func:`knob_defaults`): ``depth``,
    ``width``, ``epochs``, ``seeds``, ``dataset``, ``data_dir``, ``device``, ...
    ``scheduler`` is ignored (the runs are sequential); ``cache_dir`` holds one
    checkpoint per run (``cache_dir/fig2/<init>-seed<s>-<hash>.pt``).
    """
    del scheduler  # the runs share one device; see the module docstring
    p = _params(scale, overrides)
    from ..training import load_data, train

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
             "width": p["width"], "patch_size": cfg0.vit.patch_size, "epochs": n_epochs,
             "warmup_epochs": p["warmup_epochs"], "seeds": p["seeds"],
             "batch_size": p["batch_size"], "optimizer": "AdamW", "lr": p["lr"],
             "min_lr": p["min_lr"], "weight_decay": p["weight_decay"],
             "betas": list(cfg0.betas), "schedule": "linear warm-up, then cosine decay",
             "sigma": p["sigma"], "pool": p["pool"], "augment": cfg0.augment,
             "device": cfg0.device, "amp": cfg0.amp, "compile": cfg0.compile,
             "train_size": int(len(data.train_y)), "val_size": int(len(data.val_y)),
             "torch_threads": int(_torch_threads()), "torch_version": _torch_version(),
             "wall_time_s": time.perf_counter() - start}
    coords = {"init": list(p["inits"]), "seed": seeds, "epoch": np.arange(1, n_epochs + 1)}
    dims = ("init", "seed", "epoch")
    return xr.Dataset(
        {"val_accuracy": (dims, acc, {"long_name": "validation accuracy", "units": "1"}),
         "train_loss": (dims, loss, {"long_name": "mean training cross-entropy of the epoch"}),
         "train_time": (("init", "seed"), wall,
                        {"long_name": "training time of the run in this call", "units": "s"})},
        coords=coords, attrs=attrs)


def parameter_counts(ds: xr.Dataset) -> dict[str, int]:
    """Trainable scalars of each arm's network, ``{init: count}``, from the dataset's settings.

    The constant arm has one value matrix tied across the layers, the random arm one per
    layer: the two networks differ by ``(depth - 1) * width**2`` parameters.
    """
    training = _require_vit()
    from ..vit import count_parameters

    a = ds.attrs
    counts = {}
    for init in ds["init"].values.tolist():
        cfg = training.TrainConfig.from_flat(
            value_init=init, seed=0, dataset=a["dataset"], depth=int(a["depth"]),
            width=int(a["width"]), patch_size=int(a["patch_size"]), epochs=int(a["epochs"]),
            warmup_epochs=int(a["warmup_epochs"]), sigma=float(a["sigma"]),
            pool=str(a["pool"])).validate()
        counts[init] = int(count_parameters(training.build_model(cfg)))
    return counts


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


#: Confidence level of the paired interval and significance level of the verdicts.
LEVEL = 0.95
#: Power at which :func:`summary` states the smallest mean gap the run would detect.
POWER = 0.8


def detectable_gap(sd: float, n: int, level: float = LEVEL, power: float = POWER) -> float:
    r"""Smallest true mean gap that a two-sided paired t test at ``level`` detects with
    probability ``power``, for ``n`` pairs of standard deviation ``sd``:
    :math:`(t_{(1+\text{level})/2,\,n-1} + t_{\text{power},\,n-1})\,\text{sd}/\sqrt n`
    (the usual approximation, which ignores the non-central t's skew)."""
    from scipy import stats

    if n < 2 or not np.isfinite(sd):
        return float("nan")
    return float((stats.t.ppf((1 + level) / 2, n - 1) + stats.t.ppf(power, n - 1))
                 * sd / np.sqrt(n))


def paired_gaps(ds: xr.Dataset) -> xr.DataArray:
    """Gaussian minus identity validation accuracy, seed by seed: ``gap(seed, epoch)``.

    Seed ``s`` of both initialisations shares embeddings, Q, K, head and data order,
    so each difference isolates the effect of the value matrices.
    """
    return ds["val_accuracy"].sel(init="gaussian") - ds["val_accuracy"].sel(init="identity")


def summary(ds: xr.Dataset) -> dict:
    """Every number and verdict the notebook quotes.

    Per initialisation: ``mean``, ``min``, ``max`` (over seeds, final epoch),
    ``best_mean`` (best epoch of the mean curve), ``mean_over_epochs`` (the mean
    curve averaged over epochs: how fast it learns).  With both initialisations,
    the paired comparison of the final epoch: ``gap`` (mean of the seed-by-seed
    differences, Gaussian minus identity), ``gap_low``/``gap_high`` (its
    :data:`LEVEL` Student-t interval), ``gap_sd``, ``detectable_gap`` (the smallest true
    mean gap this number of pairs detects with probability :data:`POWER`,
    :func:`detectable_gap`), ``wins``/``losses``/``ties``,
    ``sign_test_p`` (one-sided: at least ``wins`` wins among the untied pairs if
    the initialisation made no difference) and ``sign_test_p_two_sided``; the
    same interval for the mean over epochs (``speed_gap*``); ``ahead_from``
    (first epoch from which the Gaussian mean curve stays above the identity one,
    ``None`` if it is not above at the end); ``separated`` (the min-max bands do
    not overlap at the final epoch); and ``verdict``:

    ``"gaussian_better"`` / ``"identity_better"``
        the interval excludes 0 on that side and the two-sided sign test is
        below ``1 - LEVEL`` on the same side;
    ``"no_detectable_difference"``
        neither test rejects a zero gap;
    ``"mixed"``
        one test rejects and the other does not (few pairs, or heavy tails: one
        diverged run can move the mean without moving the signs);
    ``"single_seed"``
        one pair: no comparison is possible.
    """
    final = ds["val_accuracy"].isel(epoch=-1)
    out: dict = {}
    for init in ds["init"].values.tolist():
        f = final.sel(init=init)
        curve = ds["val_accuracy"].sel(init=init).mean("seed")
        out[init] = {"mean": float(f.mean()), "min": float(f.min()), "max": float(f.max()),
                     "best_mean": float(curve.max()), "mean_over_epochs": float(curve.mean())}
    if not {"identity", "gaussian"} <= set(out):
        return out
    gaps = paired_gaps(ds)
    final_gap = gaps.isel(epoch=-1).values
    n = int(final_gap.size)
    out["n_seeds"] = n
    out["gap"], out["gap_low"], out["gap_high"] = t_interval(final_gap, LEVEL)
    out["gap_sd"] = float(final_gap.std(ddof=1)) if n > 1 else float("nan")
    out["detectable_gap"] = detectable_gap(out["gap_sd"], n)
    out["speed_gap"], out["speed_gap_low"], out["speed_gap_high"] = \
        t_interval(gaps.mean("epoch").values, LEVEL)
    out["wins"] = int((final_gap > 0).sum())
    out["losses"] = int((final_gap < 0).sum())
    out["ties"] = int((final_gap == 0).sum())
    out["sign_test_p"], out["sign_test_p_two_sided"] = sign_test(out["wins"], out["losses"])
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
    alpha = 1.0 - LEVEL
    t_rejects = bool(out["gap_low"] > 0 or out["gap_high"] < 0)
    sign_rejects = bool(out["sign_test_p_two_sided"] < alpha)
    if n < 2:
        out["verdict"] = "single_seed"
    elif t_rejects and sign_rejects and (out["gap"] > 0) == (out["wins"] > out["losses"]):
        out["verdict"] = "gaussian_better" if out["gap"] > 0 else "identity_better"
    elif t_rejects or sign_rejects:
        out["verdict"] = "mixed"
    else:
        out["verdict"] = "no_detectable_difference"
    return out


#: The former name of :func:`summary`.
summarize = summary


def training_flops(config: dict | None = None, *, n_images: int = 50_000) -> dict:
    """Floating-point operations of one training run, counted from the network's shape.

    Per layer and image, with ``n`` tokens of width ``d``: the query-key product and
    the value product cost ``2 n d^2`` multiply-adds each, the scores and the
    weighted average ``n^2 d`` each; a multiply-add is 2 FLOP, and a training step
    (forward and backward) about 3 forward passes.  ``config`` holds ``depth``,
    ``width``, ``patch_size``, ``epochs`` (default: the paper scale); CIFAR-10
    images are 32 x 32.  An estimate of the work, not a measurement of time.
    """
    p = dict(SCALES["paper"]) if config is None else dict(config)
    depth, d = int(p["depth"]), int(p["width"])
    tokens = (32 // int(p["patch_size"])) ** 2 + 1
    per_layer = 2 * (2 * tokens * d * d + 2 * tokens * tokens * d)
    forward = depth * per_layer
    train = 3 * forward * n_images * int(p["epochs"])
    return {"tokens": tokens, "forward_flops_per_image": float(forward),
            "train_flops_per_run": float(train)}


def plot(ds: xr.Dataset):
    """Left: mean validation accuracy over seeds, its 95% interval and the min-max band.
    Right (with both initialisations and several seeds): the paired gap per epoch,
    Gaussian minus identity, with its 95% interval and every seed pair."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from ..style import palette

    colors = dict(zip(INITS, palette(2)))
    n_seeds = ds.sizes["seed"]
    paired = {"identity", "gaussian"} <= set(ds["init"].values.tolist()) and n_seeds > 1
    fig, axes = plt.subplots(1, 2 if paired else 1, figsize=(11.5 if paired else 6.4, 4.4),
                             layout="constrained", squeeze=False)
    ax = axes[0, 0]
    epochs = ds["epoch"].values
    acc = 100 * ds["val_accuracy"]
    for init in ds["init"].values.tolist():
        a = acc.sel(init=init)
        mean, lo, hi = a.mean("seed"), a.min("seed"), a.max("seed")
        label = f"{_LABELS.get(init, init)}: {float(mean[-1]):.1f}%"
        ax.plot(epochs, mean, color=colors.get(init), lw=1.8, label=label)
        if n_seeds > 1:
            ax.fill_between(epochs, lo, hi, color=colors.get(init), alpha=0.12, lw=0)
            ci = np.array([t_interval(a.isel(epoch=k).values, LEVEL)[1:] for k in range(len(epochs))])
            ax.fill_between(epochs, ci[:, 0], ci[:, 1], color=colors.get(init), alpha=0.35, lw=0)
    a = ds.attrs
    name = _DATASET_NAMES.get(a.get("dataset"), a.get("dataset"))
    band = (f"mean of {n_seeds} seeds; bands: 95% interval (dark), min-max (light)"
            if n_seeds > 1 else "one seed")
    ax.set(xlabel="epoch", ylabel="validation accuracy (%)",
           xlim=(epochs[0] - 0.5 if len(epochs) == 1 else epochs[0], epochs[-1]))
    ax.set_title(f"Attention-only ViT on {name}: {a.get('depth')} layers, width "
                 f"{a.get('width')}\n{band}", fontsize="medium")
    ax.legend(loc="lower right", title="value matrices (final mean)", fontsize="small",
              title_fontsize="small")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="y", alpha=0.3)
    if paired:
        ax2 = axes[0, 1]
        gaps = 100 * paired_gaps(ds)
        for s in range(n_seeds):
            ax2.plot(epochs, gaps.isel(seed=s), color="0.6", lw=0.7, alpha=0.7,
                     label="one seed pair" if s == 0 else None)
        ci = np.array([t_interval(gaps.isel(epoch=k).values, LEVEL) for k in range(len(epochs))])
        ax2.fill_between(epochs, ci[:, 1], ci[:, 2], color=colors["gaussian"], alpha=0.3, lw=0,
                         label="95% interval of the mean gap")
        ax2.plot(epochs, ci[:, 0], color=colors["gaussian"], lw=1.8, label="mean gap")
        ax2.axhline(0, color="k", lw=0.8)
        ax2.set(xlabel="epoch", ylabel="Gaussian minus identity (points)",
                xlim=(epochs[0], epochs[-1]))
        ax2.set_title(f"paired gap, Gaussian minus identity\n({n_seeds} pairs, each sharing "
                      f"data order, embeddings, Q, K)", fontsize="medium")
        ax2.legend(loc="best", fontsize="small")
        ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax2.grid(axis="y", alpha=0.3)
    return fig
