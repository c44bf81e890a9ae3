"""Figure 2: validation accuracy of a deep attention-only ViT, identity vs Gaussian values.

The paper (section 6, Figure 2) trains the attention-only Vision Transformer of
:mod:`stochastic_transformers.vit` on CIFAR-10 twice: with one value matrix
shared by all layers and initialised at the identity ("constant weights"), and
with an independent i.i.d. Gaussian value matrix per layer ("random weights").
The random initialisation reaches the higher validation accuracy.  The figure
shows the mean validation accuracy over seeds and the min-max band, per epoch.

Scales: ``smoke`` (seconds: a tiny network on the digits); ``quick``, the paper's network
(128 attention layers of width 96) on scikit-learn's 8 x 8 digits, 10 seed pairs for a paired
comparison (minutes on two cores, checkpointed in ``cache_dir``); ``paper``, the paper's
CIFAR-10 run (hours on one GPU; ``data_dir`` defaults to ``$STOCHASTIC_TRANSFORMERS_CIFAR10``).

The same seed gives both initialisations the same embeddings, Q, K, head and data order,
so that they differ only in the value matrices: seed ``s`` of one curve is paired with seed
``s`` of the other.  The runs are sequential (:func:`run`), each checkpointed after every
epoch, so a killed ``reproduce`` resumes where it stopped.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from ...stats import paired_comparison, t_interval
from ..._validation import check_int
from ..knobs import choices, integer
from ..spec import Figure

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

#: The committed CPU study the book shows in place of the paper scale (CIFAR-10 and a GPU):
#: ``OMP_NUM_THREADS=1 reproduce fig2 --scale quick --set seeds=30`` on the digits
#: (``results/fig2_cpu.nc``) and with :data:`HARDER_TASK` (``results/fig2_cpu_small.nc``).
STAND_IN = ("cpu", "CPU study (the quick settings with 30 seed pairs)")
STAND_IN_HARDER = "cpu_small"   # the committed harder task beside it


def harder_task(shown: str, *, cache_dir=None, progress=False, **overrides):
    """The harder task next to the shown result, or None where it has none (CIFAR-10): the
    committed ``results/fig2_cpu_small.nc`` beside the CPU study (``shown == STAND_IN[0]``),
    else the shown scale with :data:`HARDER_TASK`'s overrides on top of ``overrides``."""
    from ..base import load_committed

    if shown == STAND_IN[0]:
        return load_committed("fig2", STAND_IN_HARDER)
    if shown not in HARDER_TASK or overrides.get("dataset") is not None:
        return None
    return compute(shown, cache_dir=cache_dir, progress=progress,
                   **{**overrides, **HARDER_TASK[shown]})


#: Knobs of their own: a run's ``value_init`` and ``seed`` range over ``inits``, ``range(seeds)``.
OWN_KNOBS = {"seeds": 5, "inits": INITS}
#: Flat fields of ``training.TrainConfig`` that are not knobs (``betas``: Adam's, fixed).
NOT_KNOBS = ("value_init", "seed", "betas")

_LABELS = {"identity": "identity V, shared by all layers (constant)",
           "gaussian": "Gaussian V, independent per layer (random)"}
#: How the page and the plot name each task.
TASKS = {"digits": "the 8 x 8 digits", "digits-small": "the 200-image digits task",
         "cifar10": "CIFAR-10"}

VIT_EXTRA = "pip install 'stochastic-transformers[vit]'  (PyTorch and scikit-learn)"


def _require_vit():
    """Import the training module, or say which extra is missing."""
    try:
        import sklearn  # noqa: F401 - the digits data set of the smoke and quick scales
        import torch  # noqa: F401

        from ... import training
    except ModuleNotFoundError as err:
        if err.name and err.name.split(".")[0] in ("torch", "sklearn"):
            raise ModuleNotFoundError(
                f"Figure 2 needs {err.name.split('.')[0]!r}, which is not installed: "
                f"{VIT_EXTRA}", name=err.name) from None
        raise
    return training


def knob_defaults() -> dict:
    """The knobs that no scale sets, with their defaults: every flat field of
    ``training.TrainConfig`` (:meth:`~..training.TrainConfig.flat`) but :data:`NOT_KNOBS`,
    then :data:`OWN_KNOBS`.  Without the vit extra (PyTorch) only :data:`OWN_KNOBS`: the
    scales still list their knobs, and computing says what to install."""
    try:
        training = _require_vit()
    except ModuleNotFoundError:
        return dict(OWN_KNOBS)
    defaults = {k: v for k, v in training.TrainConfig().flat().items() if k not in NOT_KNOBS}
    return {**defaults, **OWN_KNOBS}


def _warmup(name, value, knobs):
    """The check of ``warmup_epochs``: whole epochs, no more than the run has (a shorter
    run given with ``epochs`` alone is refused, not silently given a shorter warm-up)."""
    value = check_int(name, value, 0)
    if value > knobs["epochs"]:
        raise ValueError(f"{name} must be <= epochs ({knobs['epochs']}), got {value}: "
                         f"set {name} with epochs")
    return value


def configs(knobs) -> dict:
    """The validated training configuration of every run, ``{(init, seed): TrainConfig}``:
    every knob but :data:`OWN_KNOBS` goes to ``training.TrainConfig``, whose ``validate``
    checks it (CIFAR-10's ``data_dir`` defaults to ``$STOCHASTIC_TRANSFORMERS_CIFAR10``,
    else ``data``).  The plan of the figure: nothing is computed before it passes."""
    training = _require_vit()
    fields = {k: v for k, v in knobs.items() if k not in OWN_KNOBS}
    if fields["dataset"] == "cifar10" and fields["data_dir"] is None:
        fields["data_dir"] = os.environ.get(CIFAR10_ENV, "data")
    return {(init, s): training.TrainConfig.from_flat(value_init=init, seed=s, **fields).validate()
            for init in knobs["inits"] for s in range(knobs["seeds"])}


def run(knobs, sweeps) -> xr.Dataset:
    """Train both initialisations over ``seeds`` seeds; return ``val_accuracy(init, seed,
    epoch)``, ``train_loss`` and ``train_time(init, seed)``.

    The runs are sequential (they share one device): of ``sweeps`` only the cache folder
    and the progress flag are used, one checkpoint per run in
    ``cache_dir/fig2/<init>-seed<s>-<hash>.pt``.
    """
    import torch

    from ...training import cifar10_help, find_cifar10, load_data, train

    runs = configs(knobs)
    cfg0 = next(iter(runs.values()))
    if cfg0.dataset == "cifar10" and not cfg0.download and find_cifar10(cfg0.data_dir) is None:
        raise FileNotFoundError(f"CIFAR-10 not found in {str(cfg0.data_dir)!r} (set data_dir= "
                                f"or ${CIFAR10_ENV}). " + cifar10_help(cfg0.data_dir))
    data = load_data(cfg0.dataset, cfg0.data_dir, download=cfg0.download)
    if cfg0.dataset == "cifar10" and cfg0.device == "cpu":
        warnings.warn("training the CIFAR-10 figure on the CPU: expect days, not hours",
                      stacklevel=3)
    inits, seeds = list(knobs["inits"]), list(range(knobs["seeds"]))
    acc = np.full((len(inits), len(seeds), knobs["epochs"]), np.nan)
    loss = np.full_like(acc, np.nan)
    wall = np.zeros(acc.shape[:2])
    start = time.perf_counter()
    for (init, s), cfg in runs.items():
        ckpt = (None if sweeps.cache_dir is None else
                Path(sweeps.cache_dir) / "fig2" / f"{init}-seed{s}-{cfg.key_hash()}.pt")
        result = train(cfg, checkpoint=ckpt, progress=sweeps.progress, data=data)
        i = inits.index(init)
        acc[i, s], loss[i, s], wall[i, s] = result.val_accuracy, result.train_loss, \
            result.wall_time
    attrs = {k: knobs[k] for k in ("dataset", "depth", "width", "epochs", "warmup_epochs",
                                   "seeds", "batch_size", "lr", "min_lr", "weight_decay",
                                   "sigma", "pool")}
    attrs.update(patch_size=cfg0.vit.patch_size, optimizer="AdamW", betas=list(cfg0.betas),
                 schedule="linear warm-up, then cosine decay", augment=cfg0.augment,
                 device=cfg0.device, amp=cfg0.amp, compile=cfg0.compile,
                 train_size=int(len(data.train_y)), val_size=int(len(data.val_y)),
                 torch_threads=int(torch.get_num_threads()), torch_version=str(torch.__version__),
                 wall_time_s=time.perf_counter() - start)
    dims = ("init", "seed", "epoch")
    return xr.Dataset(
        {"val_accuracy": (dims, acc, {"long_name": "validation accuracy", "units": "1"}),
         "train_loss": (dims, loss, {"long_name": "mean training cross-entropy of the epoch"}),
         "train_time": (("init", "seed"), wall,
                        {"long_name": "training time of the run in this call", "units": "s"})},
        coords={"init": inits, "seed": seeds, "epoch": np.arange(1, knobs["epochs"] + 1)},
        attrs=attrs)


def parameter_counts(ds: xr.Dataset) -> dict[str, int]:
    """Trainable scalars of each arm's network, ``{init: count}``, from the dataset's settings.

    The constant arm has one value matrix tied across the layers, the random arm one per
    layer: the two networks differ by ``(depth - 1) * width**2`` parameters.
    """
    training = _require_vit()
    from ...vit import AttentionOnlyViT, count_parameters

    a = ds.attrs
    channels, size = training.IMAGE_SHAPES[a["dataset"]]
    return {init: int(count_parameters(AttentionOnlyViT(
        value_init=init, depth=int(a["depth"]), width=int(a["width"]),
        patch_size=int(a["patch_size"]), image_size=size, channels=channels,
        num_classes=training.NUM_CLASSES, pool=str(a["pool"]))))
        for init in ds["init"].values.tolist()}


#: Confidence level of the paired interval and significance level of the verdicts.
LEVEL = 0.95
#: Power at which :func:`summary` states the smallest mean gap the run would detect.
POWER = 0.8


def paired_gaps(ds: xr.Dataset) -> xr.DataArray:
    """Gaussian minus identity validation accuracy, seed by seed: ``gap(seed, epoch)``.

    Seed ``s`` of both initialisations shares embeddings, Q, K, head and data order,
    so each difference isolates the effect of the value matrices.
    """
    return ds["val_accuracy"].sel(init="gaussian") - ds["val_accuracy"].sel(init="identity")


def _ahead_from(ds: xr.Dataset):
    """First epoch from which the Gaussian mean curve stays above the identity one (None if
    it is not above at the end)."""
    gauss, ident = (ds["val_accuracy"].sel(init=i).mean("seed") for i in ("gaussian", "identity"))
    behind = np.flatnonzero(~(gauss > ident).values)
    if not behind.size:
        return int(ds["epoch"].values[0])
    return None if behind[-1] == ds.sizes["epoch"] - 1 else int(ds["epoch"].values[behind[-1] + 1])


def summary(ds: xr.Dataset) -> dict:
    """Every number and verdict the notebook quotes.

    Per initialisation: ``mean``, ``min``, ``max`` (over seeds, final epoch), ``best_mean``
    (best epoch of the mean curve), ``mean_over_epochs`` (how fast it learns).  With both,
    the paired comparison of the final epoch, Gaussian minus identity, over ``n_seeds``
    pairs (:func:`~stochastic_transformers.stats.paired_comparison` at :data:`LEVEL` and
    :data:`POWER`: ``gap``, its interval, ``wins``, the sign test, ...; ``verdict``:
    ``gaussian_better``, ``identity_better``, ``mixed``, ``no_detectable_difference`` or
    ``single_seed``); the same interval for the mean over epochs (``speed_gap*``);
    ``ahead_from`` (:func:`_ahead_from`) and ``separated`` (the min-max bands do not overlap
    at the final epoch).
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
    out.update(paired_comparison(gaps.isel(epoch=-1).values, LEVEL, POWER))
    out["n_seeds"] = out.pop("n")
    out["verdict"] = {"higher": "gaussian_better", "lower": "identity_better",
                      "single_pair": "single_seed"}.get(out["verdict"], out["verdict"])
    out["speed_gap"], out["speed_gap_low"], out["speed_gap_high"] = \
        t_interval(gaps.mean("epoch").values, LEVEL)
    out["ahead_from"] = _ahead_from(ds)
    out["separated"] = bool(out["gaussian"]["min"] > out["identity"]["max"]
                            or out["identity"]["min"] > out["gaussian"]["max"])
    out["gaussian_better"] = bool(out["gap"] > 0)
    return out


#: The page's words for each verdict of :func:`summary` (Markdown).
VERDICT_TEXT = {
    "gaussian_better": "**This agrees with the paper**: the random initialisation ends ahead, "
                       "the interval excludes zero and the sign test agrees.",
    "identity_better": "**This does not agree with the paper**: here the identity "
                       "initialisation ends ahead, the interval excludes zero and the sign test "
                       "agrees.",
    "mixed": "The t interval and the sign test, which asks only how many pairs favour one "
             "side, disagree at 5%: one rejects a zero gap and the other does not, so the "
             "evidence is not conclusive at this number of pairs.",
    "no_detectable_difference": "**No difference is detected on this task**: the 95% interval "
                                "contains zero and the sign test does not reject, and mean gaps "
                                "outside the interval are excluded at 95% confidence.",
    "single_seed": "With a single seed this cannot separate the effect of the initialisation "
                   "from the seed-to-seed spread.",
}


def _course(ds, stats) -> str:
    """How the two mean curves run over the epochs, from ``ahead_from``."""
    if stats.get("ahead_from") is None:
        return "its mean curve is not above the identity one at the last epoch"
    if stats["ahead_from"] == int(ds["epoch"][0]):
        return "its mean curve is above the identity one at every epoch"
    return ("the identity network starts ahead, and the random one's mean curve stays above "
            f"it from epoch {stats['ahead_from']} to the end")


def page(ds, stats, small=None) -> tuple[dict, dict]:
    """What the page says about one result (``ds`` with its :func:`summary` ``stats``):
    ``(values, phrases)``.  ``values``: the summary, ``task``, ``epochs``, ``train_size``,
    ``one_image`` (the accuracy one validation image is worth) and ``course`` (how the mean
    curves run; empty for one pair).  ``phrases`` (Markdown): ``verdict_text``
    (:data:`VERDICT_TEXT`) and, given the harder task's summary ``small``,
    ``both_verdicts``.  ``ds`` None (a CIFAR-10 run has no harder task): nan gaps over 0
    pairs, and a verdict text that says so."""
    if ds is None:
        nan = float("nan")
        return ({"gap": nan, "gap_low": nan, "gap_high": nan, "n_seeds": 0},
                {"verdict_text": "There is no harder task next to a CIFAR-10 run."})
    a = ds.attrs
    values = {**stats, "task": TASKS[a["dataset"]], "epochs": int(a["epochs"]),
              "train_size": int(a["train_size"]), "one_image": 1.0 / int(a["val_size"]),
              "course": _course(ds, stats) if stats.get("n_seeds", 1) > 1 else ""}
    phrases = {"verdict_text": VERDICT_TEXT[stats["verdict"]]}
    if small is not None:
        phrases["both_verdicts"] = (f"On the full digits the verdict is "
                                    f"*{stats['verdict'].replace('_', ' ')}*; on the 200-image "
                                    f"task it is *{small['verdict'].replace('_', ' ')}*.")
    return values, phrases


def _interval_by_epoch(values) -> np.ndarray:
    """(epoch, 3): the mean over seeds of ``values(seed, epoch)`` and its :data:`LEVEL`
    Student-t interval, epoch by epoch."""
    return np.array([t_interval(values.isel(epoch=k).values, LEVEL)
                     for k in range(values.sizes["epoch"])])


def plot(ds: xr.Dataset):
    """Left: mean validation accuracy over seeds, its 95% interval and the min-max band.
    Right (with both initialisations and several seeds): the paired gap per epoch,
    Gaussian minus identity, with its 95% interval and every seed pair."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from ...style import palette

    colors = dict(zip(INITS, palette(2)))
    n_seeds = ds.sizes["seed"]
    paired = {"identity", "gaussian"} <= set(ds["init"].values.tolist()) and n_seeds > 1
    fig, axes = plt.subplots(1, 2 if paired else 1, figsize=(11.5 if paired else 6.4, 4.4),
                             layout="constrained", squeeze=False)
    ax = axes[0, 0]
    epochs = ds["epoch"].values
    acc = 100 * ds["val_accuracy"]
    for init in ds["init"].values.tolist():
        a, c = acc.sel(init=init), colors.get(init)
        mean = a.mean("seed")
        ax.plot(epochs, mean, color=c, lw=1.8,
                label=f"{_LABELS.get(init, init)}: {float(mean[-1]):.1f}%")
        if n_seeds > 1:
            ax.fill_between(epochs, a.min("seed"), a.max("seed"), color=c, alpha=0.12, lw=0)
            ci = _interval_by_epoch(a)
            ax.fill_between(epochs, ci[:, 1], ci[:, 2], color=c, alpha=0.35, lw=0)
    a = ds.attrs
    name = TASKS.get(a.get("dataset"), a.get("dataset"))
    band = (f"mean of {n_seeds} seeds; bands: 95% interval (dark), min-max (light)"
            if n_seeds > 1 else "one seed")
    ax.set(xlabel="epoch", ylabel="validation accuracy (%)",
           xlim=(epochs[0] - 0.5 if len(epochs) == 1 else epochs[0], epochs[-1]),
           title=f"Attention-only ViT on {name}: {a.get('depth')} layers, width "
                 f"{a.get('width')}\n{band}")
    ax.legend(loc="lower right", title="value matrices (final mean)")
    if paired:
        ax2 = axes[0, 1]
        gaps = 100 * paired_gaps(ds)
        for s in range(n_seeds):
            ax2.plot(epochs, gaps.isel(seed=s), color="0.6", lw=0.7, alpha=0.7,
                     label="one seed pair" if s == 0 else None)
        ci = _interval_by_epoch(gaps)
        ax2.fill_between(epochs, ci[:, 1], ci[:, 2], color=colors["gaussian"], alpha=0.3, lw=0,
                         label="95% interval of the mean gap")
        ax2.plot(epochs, ci[:, 0], color=colors["gaussian"], lw=1.8, label="mean gap")
        ax2.axhline(0, color="k", lw=0.8)
        ax2.set(xlabel="epoch", ylabel="Gaussian minus identity (points)",
                xlim=(epochs[0], epochs[-1]), title=f"paired gap, Gaussian minus identity\n"
                f"({n_seeds} pairs, each sharing data order, embeddings, Q, K)")
        ax2.legend(loc="best")
    for axis in axes.ravel():
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.grid(axis="y", alpha=0.3)
    return fig


FIGURE = Figure(
    "fig2", source="paper",
    description="attention-only ViT, 128 layers: validation accuracy with identity (shared) vs "
                "Gaussian (per layer) value matrices",
    scales=SCALES, defaults=knob_defaults, stand_in=STAND_IN,
    # the epochs before the warm-up that fits in them; the training fields: the plan
    schema={"seeds": integer(1, 1000), "epochs": integer(1, 100_000), "inits": choices(INITS),
            "warmup_epochs": _warmup},
    plan=configs, run=run, summary=summary, plot=plot)
compute, cost = FIGURE.compute, FIGURE.cost
