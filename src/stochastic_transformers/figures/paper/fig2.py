"""Figure 2: a deep attention-only ViT trained with constant or random value matrices.

The paper (section 6) trains the ViT of :mod:`stochastic_transformers.vit` on CIFAR-10 with
one identity value matrix shared by all layers ("constant") and with an independent Gaussian
one per layer ("random"), and reports that the constant values degrade the accuracy.
Scales: ``smoke`` (seconds), ``quick`` (the paper's network on scikit-learn's 8 x 8 digits,
10 seed pairs, minutes on a CPU), ``paper`` (CIFAR-10, for a GPU; not timed); the book shows the
committed CPU study (:data:`STAND_IN`).  Seed ``s`` gives both arms the same embeddings, Q,
K, head and data order; every run is checkpointed after each epoch.
"""
from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.stats
import xarray as xr

from ...stats import paired_comparison, t_interval
from ..._validation import check_int
from ...style import palette
from ..knobs import choices, integer
from ..spec import Figure
from ..words import markdown_table

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

#: A harder task made from the digits (200 training images instead of 1,437; more epochs,
#: an epoch being two steps) beside each CPU scale: ``compute(scale, **HARDER_TASK[scale])``.
HARDER_TASK = {
    "smoke": {"dataset": "digits-small", "epochs": 2, "warmup_epochs": 1},
    "quick": {"dataset": "digits-small", "epochs": 60, "warmup_epochs": 6},
}

#: The committed CPU study shown in place of the paper scale: ``reproduce fig2 --scale quick
#: --set seeds=30`` on the digits (``results/fig2_cpu.nc``) and with :data:`HARDER_TASK`.
STAND_IN = ("cpu", "CPU study at the quick settings with 30 seed pairs")
STAND_IN_HARDER = "cpu_small"   # the committed harder task beside it


def harder_task(shown: str, *, cache_dir=None, progress=False, **overrides):
    """The harder task beside the shown result: the committed one beside the CPU study,
    else the shown scale with :data:`HARDER_TASK` on top of ``overrides``; None for CIFAR-10."""
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

_LABELS = {"identity": "constant: one identity V", "gaussian": "random: a Gaussian V a layer"}
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
    """The knobs no scale sets: every flat field of ``training.TrainConfig`` but
    :data:`NOT_KNOBS`, then :data:`OWN_KNOBS` (only these without PyTorch: computing then
    says what to install)."""
    try:
        training = _require_vit()
    except ModuleNotFoundError:
        return dict(OWN_KNOBS)
    defaults = {k: v for k, v in training.TrainConfig().flat().items() if k not in NOT_KNOBS}
    return {**defaults, **OWN_KNOBS}


def _warmup(name, value, knobs):
    """The check of ``warmup_epochs``: whole epochs, no more than the run has."""
    value = check_int(name, value, 0)
    if value > knobs["epochs"]:
        raise ValueError(f"{name} must be <= epochs ({knobs['epochs']}), got {value}: "
                         f"set {name} with epochs")
    return value


def configs(knobs) -> dict:
    """The figure's plan: the validated ``{(init, seed): TrainConfig}`` of every run
    (CIFAR-10's ``data_dir`` defaults to ``$STOCHASTIC_TRANSFORMERS_CIFAR10``, else ``data``)."""
    training = _require_vit()
    fields = {k: v for k, v in knobs.items() if k not in OWN_KNOBS}
    if fields["dataset"] == "cifar10" and fields["data_dir"] is None:
        fields["data_dir"] = os.environ.get(CIFAR10_ENV, "data")
    return {(init, s): training.TrainConfig.from_flat(value_init=init, seed=s, **fields).validate()
            for init in knobs["inits"] for s in range(knobs["seeds"])}


def run(knobs, sweeps) -> xr.Dataset:
    """Train both initialisations over ``seeds`` seeds, one run after the other (a checkpoint
    per run in ``cache_dir/fig2/``): ``val_accuracy(init, seed, epoch)``, ``train_loss``,
    ``train_time(init, seed)``."""
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
    loss, wall = np.full_like(acc, np.nan), np.zeros(acc.shape[:2])
    start = time.perf_counter()
    for (init, s), cfg in runs.items():
        ckpt = (None if sweeps.cache_dir is None else
                Path(sweeps.cache_dir) / "fig2" / f"{init}-seed{s}-{cfg.key_hash()}.pt")
        result = train(cfg, checkpoint=ckpt, progress=sweeps.progress, data=data)
        i = inits.index(init)
        acc[i, s], loss[i, s], wall[i, s] = result.val_accuracy, result.train_loss, result.wall_time
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


#: Confidence level of the paired interval (and significance level of the verdicts), and the
#: power at which :func:`summary` states the smallest mean gap the run would detect.
LEVEL, POWER = 0.95, 0.8


def paired_gaps(ds: xr.Dataset) -> xr.DataArray:
    """Gaussian minus identity validation accuracy, pair by pair: ``gap(seed, epoch)``."""
    return ds["val_accuracy"].sel(init="gaussian") - ds["val_accuracy"].sel(init="identity")


def summary(ds: xr.Dataset) -> dict:
    """The numbers and verdict of one task: per initialisation the ``mean``, ``min`` and
    ``max`` final accuracy over seeds; with both, the paired comparison of the final epoch,
    Gaussian minus identity, over ``n_seeds`` pairs
    (:func:`~stochastic_transformers.stats.paired_comparison`; ``verdict``:
    ``gaussian_better``, ``identity_better``, ``mixed``, ``no_detectable_difference`` or
    ``single_seed``; ``p_verdict``: the larger p of its two tests), and the same interval for
    the accuracy averaged over the epochs (``speed_gap*``: how fast each learns)."""
    final = ds["val_accuracy"].isel(epoch=-1)
    out: dict = {"dataset": str(ds.attrs.get("dataset", "unknown"))}
    for init in ds["init"].values.tolist():
        f = final.sel(init=init)
        out[init] = {"mean": float(f.mean()), "min": float(f.min()), "max": float(f.max())}
    if not {"identity", "gaussian"} <= set(out):
        return out
    gaps = paired_gaps(ds)
    out.update(paired_comparison(gaps.isel(epoch=-1).values, LEVEL, POWER))
    t_p = scipy.stats.ttest_1samp(gaps.isel(epoch=-1).values, 0.0).pvalue if out["n"] > 1 else 1
    out["p_verdict"] = max(float(np.nan_to_num(t_p, nan=1.0)), out["sign_test_p_two_sided"])
    out["n_seeds"] = out.pop("n")
    out["verdict"] = {"higher": "gaussian_better", "lower": "identity_better",
                      "single_pair": "single_seed"}.get(out["verdict"], out["verdict"])
    out["speed_gap"], out["speed_gap_low"], out["speed_gap_high"] = \
        t_interval(gaps.mean("epoch").values, LEVEL)
    return out


# ----------------------------------------------------------------------------- the page
def _points(x, signed: bool = True) -> str:
    """A fraction as points of accuracy (``+1.2``, never ``-0.0``); a dash if missing."""
    if x is None or not np.isfinite(x):
        return "–"
    value = round(100 * float(x), 1) + 0.0
    return (f"{value:+.1f}" if signed else f"{value:.1f}").replace("-", "−")


def _interval(s: dict, key: str = "gap") -> str:
    return f"{_points(s[key + '_low'])} to {_points(s[key + '_high'])}"


#: What each verdict of :func:`summary` says of one task.
SAYS = {"gaussian_better": "the random values train better",
        "identity_better": "the constant values train better",
        "mixed": "the t interval and the sign test disagree",
        "no_detectable_difference": "no difference is detected"}


def holm(pvalues, alpha: float) -> list[bool]:
    """Holm's step-down procedure: which of ``pvalues`` it rejects, family-wise level ``alpha``."""
    keep = [False] * len(pvalues)
    for rank, i in enumerate(np.argsort(pvalues)):
        if not pvalues[i] < alpha / (len(pvalues) - rank):
            break
        keep[i] = True
    return keep


def phrases(stats: dict, small: dict | None = None) -> dict[str, str]:
    """The page's words from the task shown (``stats``) and the harder one (``small``):
    ``claim`` (``reproduced``, ``partly reproduced`` or ``not reproduced``: the random
    values end ahead on every task, on some (Holm over the tasks) or none; ``not tested``
    with one seed pair) and ``verdict_text`` (Markdown: the claim with each task's gap)."""
    tasks = [s for s in (stats, small) if s is not None and "verdict" in s]
    if not tasks or any(s["verdict"] == "single_seed" for s in tasks):
        return {"claim": "not tested", "verdict_text": "**not tested**: one seed pair (or one "
                "initialisation) cannot tell the effect of the value matrices from the seeds' "
                "spread."}
    held = holm([s.get("p_verdict", 1.0) for s in tasks], 1.0 - LEVEL)
    better = [s["verdict"] == "gaussian_better" for s in tasks]
    claim = "reproduced" if all(better) else "partly reproduced" if any(
        b and h for b, h in zip(better, held)) else "not reproduced"
    gaps = [f"{_points(s['gap'])} points ({LEVEL:.0%} interval {_interval(s)}) on "
            f"{TASKS.get(s['dataset'], 'this task')}, where {SAYS[s['verdict']]}"
            + (f" ({s['wins']} pairs favour the random values, {s['losses']} the constant ones)"
               if s["verdict"] == "mixed" else "")
            + (f" at {LEVEL:.0%} for this task alone, not after Holm's correction over the "
               f"{len(tasks)} tasks (p = {s['p_verdict']:.2g})"
               if s["verdict"] in ("gaussian_better", "identity_better") and not h else "")
            for s, h in zip(tasks, held)]
    return {"claim": claim, "verdict_text": f"**{claim}**: over {stats['n_seeds']} seed pairs, "
            "the gap in final validation accuracy, random minus constant, is "
            + "; and ".join(gaps) + "."}


def stats_table(stats: dict, small: dict | None = None) -> str:
    """The statistics of each task with several seed pairs, a column a task."""
    tasks = [s for s in (stats, small) if s is not None and s.get("verdict") in SAYS]
    if not tasks:
        return "One seed pair: no paired statistics."

    def accuracy(init):
        return lambda s: "{} ({}–{})".format(*(_points(s[init][k], False)
                                                for k in ("mean", "min", "max")))

    rows = [("final accuracy, constant (%): mean (min–max)", accuracy("identity")),
            ("final accuracy, random (%): mean (min–max)", accuracy("gaussian")),
            ("paired gap, random − constant (points)", lambda s: _points(s["gap"])),
            (f"its {LEVEL:.0%} interval (Student t)", _interval),
            ("pairs: random ahead / behind / level",
             lambda s: f"{s['wins']} / {s['losses']} / {s['ties']}"),
            ("sign test, two-sided p", lambda s: f"{s['sign_test_p_two_sided']:.2g}"),
            ("larger p of the two tests (Holm over the tasks)", lambda s: f"{s['p_verdict']:.2g}"),
            (f"smallest mean gap found with power {POWER:.0%}",
             lambda s: _points(s["detectable_gap"], False)),
            ("gap of the accuracy averaged over the epochs",
             lambda s: f"{_points(s['speed_gap'])} ({_interval(s, 'speed_gap')})"),
            ("verdict", lambda s: SAYS[s["verdict"]])]
    return markdown_table(["", *(TASKS.get(s["dataset"], "this task") for s in tasks)],
                          [[label, *map(fn, tasks)] for label, fn in rows])


# ----------------------------------------------------------------------------- the figure
def _band(values) -> np.ndarray:
    """(epoch, 3): mean over seeds of ``values(seed, epoch)`` and its Student-t interval."""
    return np.array([t_interval(values.isel(epoch=k).values, LEVEL)
                     for k in range(values.sizes["epoch"])])


def _accuracy_panel(ax, ds, colors) -> None:
    epochs, acc = ds["epoch"].values, 100 * ds["val_accuracy"]
    for init in ds["init"].values.tolist():
        a, c = acc.sel(init=init), colors.get(init)
        mean = a.mean("seed")
        ax.plot(epochs, mean, color=c, lw=1.6,
                label=f"{_LABELS.get(init, init)}: {float(mean[-1]):.1f}%")
        if ds.sizes["seed"] > 1:
            ax.fill_between(epochs, a.min("seed"), a.max("seed"), color=c, alpha=0.12, lw=0)
            ax.fill_between(epochs, *_band(a)[:, 1:].T, color=c, alpha=0.35, lw=0)
    ax.set(xlabel="epoch", ylabel="validation accuracy (%)",
           xlim=(epochs[0] - 0.5 if len(epochs) == 1 else epochs[0], epochs[-1]),
           title=TASKS.get(ds.attrs.get("dataset"), "").removeprefix("the ") + ": accuracy")
    ax.legend(loc="lower right", title="value matrices (final mean)")


def _gap_panel(ax, ds, color) -> None:
    epochs, gaps = ds["epoch"].values, 100 * paired_gaps(ds)
    for s in range(ds.sizes["seed"]):
        ax.plot(epochs, gaps.isel(seed=s), color="0.6", lw=0.6, alpha=0.6,
                label="one seed pair" if s == 0 else None)
    ci = _band(gaps)
    ax.fill_between(epochs, ci[:, 1], ci[:, 2], color=color, alpha=0.3, lw=0,
                    label=f"{LEVEL:.0%} interval")
    ax.plot(epochs, ci[:, 0], color=color, lw=1.6, label="mean gap")
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xlabel="epoch", ylabel="random − constant (points)", xlim=(epochs[0], epochs[-1]),
           title=f"paired gap, {ds.sizes['seed']} pairs")
    ax.legend(loc="lower right")


def plot(ds: xr.Dataset, small: xr.Dataset | None = None):
    """One row per task (``ds``, then ``small`` if given): left, the mean validation accuracy
    of each initialisation over seeds, its 95% interval (dark) and min-max band (light);
    right (both arms, several seeds), the paired gap per epoch, random minus constant: every
    seed pair, the mean and its 95% interval."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    colors = dict(zip(INITS, palette(2)))
    shown = [r for r in (ds, small) if r is not None]
    paired = [set(INITS) <= set(r["init"].values.tolist()) and r.sizes["seed"] > 1 for r in shown]
    ncols = 2 if any(paired) else 1
    fig, axes = plt.subplots(len(shown), ncols, figsize=(8.0 if ncols == 2 else 5.0,
                             3.4 * len(shown)), layout="constrained", squeeze=False)
    for row, result, both in zip(axes, shown, paired):
        _accuracy_panel(row[0], result, colors)
        if both:
            _gap_panel(row[1], result, colors["gaussian"])
        elif ncols == 2:
            row[1].set_axis_off()
    for axis in axes.ravel():
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.grid(axis="y", alpha=0.3)
    fig.suptitle(f"Attention-only ViT, {ds.attrs.get('depth')} layers of width "
                 f"{ds.attrs.get('width')}: constant against random value matrices")
    return fig


FIGURE = Figure.declared(
    globals(), "fig2", source="paper",
    description="attention-only ViT, 128 layers: validation accuracy with identity (shared) vs "
                "Gaussian (per layer) value matrices",
    defaults=knob_defaults, stand_in=STAND_IN,
    # the epochs before the warm-up that fits in them; the training fields: the plan
    schema={"seeds": integer(1, 1000), "epochs": integer(1, 100_000), "inits": choices(INITS),
            "warmup_epochs": _warmup},
    plan=configs)
compute, cost = FIGURE.compute, FIGURE.cost
