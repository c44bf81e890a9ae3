r"""The phase or the sharpness (ours): two widths tell them apart in the study of training
from the phase at initialisation (:mod:`.train_phase`).

With one :math:`\beta` on each side of the two-token threshold, a change of the gap between
Gaussian and identity value matrices could come from the phase that :math:`\beta` against
:math:`\beta_c(d) = \operatorname{arccosh}(d - 2)/2` decides, or from the sharpness of the
attention itself.  The threshold moves with the width (1.67 at :math:`d = 16`, 2.41 at
:math:`d = 64`) and the sharpness does not, so a :math:`\beta` between the two thresholds sits
above it at one width and below it at the other.  Each width runs to the same
:math:`\sigma^2 d T` (``noise_time``; the horizon is ``noise_time / d``): the noise's drift of
the overlap is of order :math:`\sigma^2 d` (Lemma 4), so the tokens have moved as far at both
widths.  The runs are :func:`.train_phase.cell`'s, paired by seed as there.

The test (fixed before the run): for each pair of neighbouring :math:`\beta` that crosses the
threshold at one width and not at the other, the change of the gap across it at the crossing
width minus its change at the other width (``steps``); ``pooled`` averages them per seed
index.  If crossing :math:`\beta_c` moves the gap by :math:`\Delta`, each is :math:`\Delta`;
if the sharpness alone acts, alike at both widths, each is zero.  The draws of the two widths
are independent, so a difference across widths pairs two independent runs by their index.
"""

from __future__ import annotations

import numpy as np

from ...stats import paired_comparison
from ...style import palette
from ...theory import critical_beta
from ..base import laid_out
from ..knobs import choice, choices, integer, integers, real, reals
from ..spec import Figure
from .. import words
from ..paper.fig2 import LEVEL, POWER, holm
from . import train_phase
from .train_phase import GEOMETRY, INITS, _config, _points, _t_p, run_means

_COMMON = dict(patch_size=2, batch_size=128, lr=3e-3, tol=1e-2, noise_time=16.0,
               tasks=("digits",), seed=0)
SCALES = {
    "smoke": dict(_COMMON, depth=4, widths=(8, 16), betas=(1.0, 1.5), epochs=2, pairs=1,
                  tasks=("digits-small",)),
    "quick": dict(_COMMON, depth=16, widths=(16, 64), betas=(1.0, 2.0, 3.5), epochs=10, pairs=3),
    "paper": dict(_COMMON, depth=64, widths=(16, 64), betas=(1.0, 2.0, 3.5), epochs=30,
                  pairs=10),
}
_FIXED = ("depth", "patch_size", "epochs", "batch_size", "lr", "tol", "noise_time")


def cell(*, task, beta, width, init, pair, noise_time, depth, patch_size, epochs, batch_size,
         lr, tol, seed):
    """One run of :func:`.train_phase.cell` at the paper's attention ``beta`` and the horizon
    ``noise_time / width``."""
    return train_phase.cell(task=task, attention=f"beta {beta:g}", horizon=noise_time / width,
                            init=init, pair=pair, depth=depth, width=width,
                            patch_size=patch_size, epochs=epochs, batch_size=batch_size, lr=lr,
                            tol=tol, seed=seed)


def plan(knobs):
    """Every run's configuration validated before any compute (the horizon's range above
    all: ``noise_time / width``)."""
    for width in knobs["widths"]:
        for task in knobs["tasks"]:
            _config(task, f"beta {max(knobs['betas']):g}", knobs["noise_time"] / width, "gaussian",
                    0, width=width, **{k: knobs[k] for k in ("depth", "patch_size", "epochs",
                                                           "batch_size", "lr")})


def run(knobs, sweeps):
    """The sweep over task x beta x width x value law x seed pair (:func:`cell`)."""
    layered = [f"init_{k}" for k in GEOMETRY] + ["init_gradient"]
    return sweeps({"task": list(knobs["tasks"]), "beta": list(knobs["betas"]),
                   "width": list(knobs["widths"]), "init": list(INITS),
                   "pair": list(range(knobs["pairs"]))},
                  fixed={k: knobs[k] for k in _FIXED}, seed=knobs["seed"],
                  output_dims={k: ("layer",) for k in layered},
                  output_coords={"layer": np.arange(knobs["depth"] + 1)})


def work(knobs) -> float:
    """Width-blocks-epochs of training (:func:`.train_phase.work` at width 16 counts one run
    of 64 blocks and 30 epochs as 1,920; a width-64 run costs about three times as much)."""
    per_task = {"digits": 1.0, "digits-small": train_phase.SMALL_TASK_EPOCHS / 6.0}
    runs = len(knobs["betas"]) * len(INITS) * knobs["pairs"]
    return (runs * knobs["depth"] * knobs["epochs"] * sum(per_task[t] for t in knobs["tasks"])
            * sum(w / 16 for w in knobs["widths"]))


#: Seconds per unit of :func:`work`, measured on the committed paper run
#: (results/train_width_paper.nc: 10,914 s of cell time; for about 40 minutes of its 91 a
#: second job took one of the two cores, so a run alone is faster).
SECONDS_PER_WORK = 1.9e-2


def _crossings(betas, widths) -> list[tuple[float, float, int, int]]:
    """Neighbouring betas ``(b, b2)`` with the width that puts beta_c between them and the
    width that does not: the contrasts of the test."""
    out = []
    for b, b2 in zip(betas, betas[1:]):
        crossing = [w for w in widths if b < critical_beta(int(w)) < b2]
        if len(crossing) == 1:
            out += [(b, b2, crossing[0], w) for w in widths if w != crossing[0]]
    return out


def summary(ds) -> dict:
    """``beta_c`` by width; by task, width and beta (``cells``): the phase, the geometry at the
    last block at initialisation (network and model) and the accuracy and first-epoch loss
    per value law, the paired gap Gaussian minus identity (``paired_comparison``) with Holm's
    correction of its t test over the cells (``held``); ``steps`` (each crossing contrast,
    :func:`_crossings`) and ``pooled`` (their mean per seed index), by task."""
    widths, betas = [int(w) for w in ds.width.values], [float(b) for b in ds.beta.values]
    out = {"beta_c": {w: float(critical_beta(w)) for w in widths}, "widths": widths,
           "betas": betas, "pairs": int(ds.sizes["pair"]), "depth": int(ds.attrs["fixed_depth"]),
           "noise_time": float(ds.attrs["fixed_noise_time"]), "cells": {}, "steps": {},
           "pooled": {}}
    last = ds.isel(layer=-1)
    gap = last.val_accuracy.sel(init="gaussian") - last.val_accuracy.sel(init="identity")
    for task in ds.task.values:
        for w in widths:
            for b in betas:
                sub = last.sel(task=task, width=w, beta=b)
                row = {"phase": "above beta_c" if b > critical_beta(w) else "below beta_c"}
                for init in INITS:
                    row[init] = run_means(sub.sel(init=init))
                row.update(paired_comparison(gap.sel(task=task, width=w, beta=b).values, LEVEL,
                                             POWER))
                out["cells"][f"{task}, d = {w}, β = {b:g}"] = row
        steps = []
        for b, b2, crossing, other in _crossings(betas, widths):
            step = lambda w: (gap.sel(task=task, width=w, beta=b2)  # noqa: E731
                              - gap.sel(task=task, width=w, beta=b)).values
            steps.append(step(crossing) - step(other))
            out["steps"][f"{task}, β {b:g} → {b2:g}, crossed at d = {crossing}"] = (
                paired_comparison(steps[-1], LEVEL, POWER))
        if steps:
            out["pooled"][str(task)] = paired_comparison(np.mean(steps, axis=0), LEVEL, POWER)
    cells = list(out["cells"].values())
    for c, keep in zip(cells, holm([_t_p(c) for c in cells], 1.0 - LEVEL)):
        c["held"] = bool(keep)
    return out


def phrases(stats) -> dict[str, str]:
    """``answer``: whether crossing beta_c moves the gap, on each task (the pooled
    interval); ``pooled``: the test on each task, with its interval and the smallest change
    it could detect; ``steps``: each crossing contrast; ``phase``: the share of near-antipodal
    pairs at the last block at initialisation (Gaussian values) at each width and beta;
    ``thresholds``: beta_c at each width."""
    pooled = "; ".join(
        f"{_points(c)} on {task}, where {100 * c['detectable_gap']:.0f} points would be "
        f"detected with probability {POWER:.0%}" for task, c in stats["pooled"].items())
    steps = "; ".join(f"{key.split(', ', 1)[1]}: {_points(c)}" for key, c in stats["steps"].items())
    first = next(iter(stats["cells"])).split(",")[0]
    phase = "; ".join(f"at d = {w}, " + ", ".join(
        f"{stats['cells'][f'{first}, d = {w}, β = {b:g}']['gaussian']['antipodal_share']:.2f} "
        f"at β = {b:g}" for b in stats["betas"]) for w in stats["widths"])
    answer = {str(t): ("changes" if c["gap_low"] > 0 or c["gap_high"] < 0 else
                       "does not detectably change") for t, c in stats["pooled"].items()}
    thresholds = " and ".join(f"β_c = {b:.2f} at d = {w}" for w, b in stats["beta_c"].items())
    return {"thresholds": thresholds, "answer": "; ".join(f"on {t}, crossing β_c {a} the gap" for t, a in answer.items())
            or "the crossing is not measured",
            "pooled": pooled or "not measured (no β pair crosses β_c at one width only)",
            "steps": steps or "not measured", "phase": phase}


def tables(stats) -> dict[str, str]:
    """One row a cell: the phase, the geometry and the training outcome with its power."""
    head = ["task, width, β", "phase", "antipodal share (network / model)",
            "first-epoch loss (identity / Gaussian)", "final accuracy (identity / Gaussian)",
            "gap, Gaussian − identity (95% interval)", "detectable gap"]
    rows = []
    for key, c in stats["cells"].items():
        i, g = c["identity"], c["gaussian"]
        rows.append([key, c["phase"], f"{g['antipodal_share']:.2f} / {g['model_antipodal_share']:.2f}",
                     f"{i['first_loss']:.2f} / {g['first_loss']:.2f}",
                     f"{i['accuracy']:.0%} / {g['accuracy']:.0%}",
                     f"{c['gap']:+.1%} ({c['gap_low']:+.1%} to {c['gap_high']:+.1%})"
                     + (" *" if c.get("held") else ""), f"{c['detectable_gap']:.0%}"])
    return {"cells": words.markdown_table(head, rows)}


def plot(ds, task=None):
    """For one task (default the first), against beta, a colour per width with beta_c(d)
    dotted: left, the share of near-antipodal pairs at the last block at initialisation with
    Gaussian values (x: the simulator from the same tokens); right, the paired gap Gaussian
    minus identity with its 95% interval (filled: holds after Holm's correction)."""
    import matplotlib.pyplot as plt

    stats = summary(ds)
    task = str(ds.task.values[0]) if task is None else task
    widths, betas = stats["widths"], np.array(stats["betas"])
    colours = dict(zip(widths, palette(len(widths))))
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.6))
    for k, w in enumerate(widths):
        rows = [stats["cells"][f"{task}, d = {w}, β = {b:g}"] for b in betas]
        shift = 0.04 * (k - (len(widths) - 1) / 2)
        axes[0].plot(betas, [c["gaussian"]["antipodal_share"] for c in rows], "o-",
                     color=colours[w], label=f"d = {w}")
        axes[0].plot(betas, [c["gaussian"]["model_antipodal_share"] for c in rows], "x", ms=8,
                     color=colours[w])
        for b, c in zip(betas, rows):
            axes[1].errorbar(b + shift, 100 * c["gap"], yerr=[[100 * (c["gap"] - c["gap_low"])],
                             [100 * (c["gap_high"] - c["gap"])]], fmt="o", capsize=2,
                             color=colours[w], mfc=None if c["held"] else "white")
        for ax in axes:
            ax.axvline(stats["beta_c"][w], ls=":", color=colours[w])
    axes[0].plot([], [], "x", color="0.3", label="simulator")
    axes[0].plot([], [], ":", color="0.3", label=r"$\beta_c(d)$")
    axes[0].set(xlabel=r"$\beta$", ylabel="near-antipodal share, last block",
                title="initialisation, Gaussian V")
    axes[0].legend(loc="upper left")
    axes[1].axhline(0, color="0.5", lw=0.8)
    axes[1].legend([axes[1].plot([], [], "o", color="0.3", mfc=m)[0] for m in (None, "white")],
                   ["holds after Holm", "does not"], loc="lower left")
    axes[1].set(xlabel=r"$\beta$ (dotted: $\beta_c(d)$)",
                ylabel="Gaussian − identity (accuracy points)",
                title=f"paired gap after training ({task})")
    pairs = stats["pairs"]
    return laid_out(fig, f"Attention-only ViT, {stats['depth']} blocks, "
                         f"$\\sigma^2 dT$ = {stats['noise_time']:g}, {pairs} seed pair"
                         f"{'s' if pairs > 1 else ''} a cell")


FIGURE = Figure.declared(
    globals(), "train_width", source="ours",
    description="training from the phase at initialisation at two widths: the phase of "
                "Theorem 2 against the sharpness of the attention (ours)",
    schema={"betas": reals(0.0, 50.0, distinct=True, sort=True),
            "widths": integers(2, 4096, distinct=True, sort=True),
            "noise_time": real(0.0, 1e5, strict_min=True),
            "tasks": choices(("digits", "digits-small")), "pairs": integer(1, 1000),
            "depth": integer(1, 4096), "epochs": integer(1, 10_000),
            "tol": real(0.0, 1.0, strict_min=True), "patch_size": choice((1, 2, 4, 8)),
            "batch_size": integer(1, 100_000), "lr": real(0.0, 1.0, strict_min=True)})
compute, cost = FIGURE.compute, FIGURE.cost
