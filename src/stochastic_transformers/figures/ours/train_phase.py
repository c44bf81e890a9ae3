r"""Training from the phase at initialisation (ours): does the noise-induced phase of the
paper's model predict how the attention-only ViT of Figure 2 trains?

The network starts as the paper's model (``qk_init="identity"``: scores
:math:`\beta\langle u_i, u_j\rangle`, Theorem 2's :math:`B = I`) or with Figure 2's random
:math:`Q, K`, with one identity value matrix or a Gaussian one a block, and its blocks cover
the time ``horizon`` of the model (:class:`~stochastic_transformers.vit.ViTConfig`).  Every
run measures, before training, the geometry of its tokens in depth on validation images
(:func:`~stochastic_transformers.classification.token_geometry`) and the gradient's norm in
depth, and beside them what the paper's model predicts from the same initial tokens (the
simulator, for the identity attention); then it trains, with paired seeds: seed ``s`` gives
both value laws the same embeddings, attention, head and data order.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.stats

from ... import simulate
from ...classification import token_geometry
from ...config import ModelConfig, RunConfig
from ...stats import paired_comparison
from ...style import palette
from ...theory import critical_beta
from ..base import laid_out
from ..knobs import choice, choices, integer, real, reals
from ..spec import Figure
from .. import words
from ..paper.fig2 import LEVEL, POWER, _require_vit, holm

#: The value laws compared, and the statistics of the tokens' geometry.
INITS = ("identity", "gaussian")
GEOMETRY = ("mean_overlap", "antipodal_share", "n_clusters", "effective_rank")
#: Validation images on which the geometry at initialisation is measured.
N_PROBE = 100
_COMMON = dict(width=16, patch_size=2, batch_size=128, lr=3e-3, tol=1e-2, random_qk=True,
               tasks=("digits", "digits-small"), seed=0)
SCALES = {
    "smoke": dict(_COMMON, depth=4, betas=(0.5,), horizons=(1.0,), epochs=2, pairs=1,
                  random_qk=False, tasks=("digits-small",)),
    "quick": dict(_COMMON, depth=16, betas=(0.5, 3.0), horizons=(0.0625, 1.0), epochs=10,
                  pairs=3),
    "paper": dict(_COMMON, depth=64, betas=(0.5, 3.0), horizons=(0.0625, 1.0), epochs=30,
                  pairs=10),
}
#: Epochs of the 200-image task for one epoch of the full digits (its epoch is two steps).
SMALL_TASK_EPOCHS = 2


def attention_arms(knobs) -> list[str]:
    """The grid's attention arms: ``"beta B"`` for the paper's form, ``"random"`` for Q, K."""
    return [f"beta {b:g}" for b in knobs["betas"]] + (["random"] if knobs["random_qk"] else [])


def _config(task, attention, horizon, init, pair, *, depth, width, patch_size, epochs,
            batch_size, lr):
    """The TrainConfig of one run."""
    from ...training import TrainConfig

    qk = ({} if attention == "random" else
          dict(qk_init="identity", beta=float(attention.split()[1])))
    scale = SMALL_TASK_EPOCHS if task == "digits-small" else 1
    return TrainConfig.from_flat(dataset=task, depth=depth, width=width, patch_size=patch_size,
                                 epochs=epochs * scale, warmup_epochs=max(1, epochs * scale // 10),
                                 batch_size=batch_size, lr=lr, device="cpu", value_init=init,
                                 seed=pair, horizon=horizon, **qk).validate()


def _model_prediction(cfg, u0, tol, seed):
    """The geometry at the last block that the paper's model predicts from the initial
    directions ``u0`` (images, N, d): the stochastic model (Gaussian values) or its
    deterministic flow (identity values, where the depth over the horizon must be a square:
    a block of step sqrt(T/L) is a flow step 1/L' with L' = sqrt(L/T)); nan where neither
    applies (random attention, or no whole L')."""
    vit = cfg.vit
    nan = {k: math.nan for k in GEOMETRY}
    layers = vit.depth / vit.horizon
    if vit.qk_init != "identity":
        return nan
    if vit.value_init == "gaussian" and abs(layers - round(layers)) < 1e-9:
        model, L = ModelConfig(d=vit.width, beta=vit.beta, sigma=vit.sigma), round(layers)
    elif vit.value_init == "identity" and abs(math.sqrt(layers) - round(math.sqrt(layers))) < 1e-9:
        model, L = ModelConfig(d=vit.width, beta=vit.beta, kind="hybrid"), round(math.sqrt(layers))
    else:
        return nan
    ds = simulate(model, RunConfig(n_tokens=u0.shape[1], n_traj=u0.shape[0], L=L,
                                   T=vit.depth / L, x0=u0, seed=seed, method="literal"))
    return {k: float(np.mean(v)) for k, v in token_geometry(ds.gram.values, tol).items()}


def cell(*, task, attention, horizon, init, pair, depth, width, patch_size, epochs, batch_size,
         lr, tol, seed):
    """One run: the geometry in depth at initialisation (validation images), the model's
    prediction at the last block, the gradient's norm in depth, then the training curves."""
    _require_vit()
    import torch

    from ...training import build_model, load_data, train

    cfg = _config(task, attention, horizon, init, pair, depth=depth, width=width,
                  patch_size=patch_size, epochs=epochs, batch_size=batch_size, lr=lr)
    data = load_data(task)
    model = build_model(cfg)
    probe_x, probe_y = data.val_x[:N_PROBE], data.val_y[:N_PROBE]
    u = model.directions_in_depth(probe_x).double()          # (images, L + 1, N, d)
    geometry = token_geometry((u @ u.transpose(-1, -2)).numpy(), tol)
    out = {f"init_{k}": v.mean(axis=0) for k, v in geometry.items()}   # (layer,)
    predicted = _model_prediction(cfg, u[:, 0].numpy(), tol, seed)
    out.update({f"model_{k}": v for k, v in predicted.items()})
    # One thread, set after the simulator: numba's OpenMP layer resets the count that torch
    # reads, and two threads a worker would oversubscribe the cores and change the rounding.
    torch.set_num_threads(1)
    out["init_gradient"] = model.gradient_norms_in_depth(probe_x, probe_y).double().numpy()
    result = train(cfg, progress=False, data=data)
    out.update(val_accuracy=result.val_accuracy[-1], first_loss=result.train_loss[0],
               best_accuracy=float(np.max(result.val_accuracy)), train_time=result.wall_time)
    return out


def run(knobs, sweeps):
    """The sweep over task x attention x horizon x value law x seed pair (:func:`cell`)."""
    layered = [f"init_{k}" for k in GEOMETRY] + ["init_gradient"]
    return sweeps({"task": list(knobs["tasks"]), "attention": attention_arms(knobs),
                   "horizon": list(knobs["horizons"]), "init": list(INITS),
                   "pair": list(range(knobs["pairs"]))},
                  fixed={k: knobs[k] for k in ("depth", "width", "patch_size", "epochs",
                                               "batch_size", "lr", "tol")},
                  seed=knobs["seed"], output_dims={k: ("layer",) for k in layered},
                  output_coords={"layer": np.arange(knobs["depth"] + 1)})


def work(knobs) -> float:
    """Block-epochs of training over all runs (the small task's epochs are two steps, not
    twelve: it counts for a sixth of the full digits' epoch)."""
    per_task = {"digits": 1.0, "digits-small": SMALL_TASK_EPOCHS / 6.0}
    runs = len(attention_arms(knobs)) * len(knobs["horizons"]) * len(INITS) * knobs["pairs"]
    return runs * knobs["depth"] * knobs["epochs"] * sum(per_task[t] for t in knobs["tasks"])


#: Seconds per block-epoch at width 16, measured on the committed paper run
#: (results/train_phase_paper.nc: 3,380 s of cell time for 307,200 block-epochs).
SECONDS_PER_WORK = 1.1e-2


def _phase(attention, width) -> str:
    """Where the arm's beta sits against the two-token threshold of Theorem 2."""
    if attention == "random":
        return "random Q, K"
    beta = float(attention.split()[1])
    return "above beta_c" if beta > critical_beta(int(width)) else "below beta_c"


def summary(ds) -> dict:
    """``initial``: the embedded tokens' mean effective rank and number of groups (before the
    first block; ``n_tokens`` with the class token).  By task, attention arm and horizon: the
    geometry at the last block at initialisation
    (network and model, per value law), the gradient's norm at the embedding over its norm
    at the last block (``gradient_ratio``), the final accuracy and first-epoch loss per value
    law, and the paired gap Gaussian minus identity (``paired_comparison``) with Holm's
    correction of its paired t test over all the cells (``held``; the intervals are not
    adjusted); ``rank_accuracy`` (exploratory: the cells share their seeds) and
    ``contrasts`` (:func:`_contrasts`)."""
    width = int(ds.attrs["fixed_width"])
    out = {"beta_c": float(critical_beta(width)), "width": width, "depth": int(ds.attrs["fixed_depth"]),
           "pairs": int(ds.sizes["pair"]), "cells": {}}
    first = ds.isel(layer=0)
    out["initial"] = {"effective_rank": float(first.init_effective_rank.mean()),
                      "n_groups": float(first.init_n_clusters.mean()),
                      # the tasks are the digits' 8 x 8 images; one class token
                      "n_tokens": (8 // int(ds.attrs["fixed_patch_size"])) ** 2 + 1}
    last = ds.isel(layer=-1)
    for task in ds.task.values:
        for arm in ds.attention.values:
            for T in ds.horizon.values:
                sub = last.sel(task=task, attention=arm, horizon=T)
                row = {"phase": _phase(str(arm), width)}
                for init in INITS:
                    one = sub.sel(init=init)
                    grad = ds.init_gradient.sel(task=task, attention=arm, horizon=T, init=init)
                    row[init] = {**run_means(one), "gradient_ratio": float(
                        (grad.isel(layer=0) / grad.isel(layer=-1)).mean())}
                gaps = (sub.val_accuracy.sel(init="gaussian") - sub.val_accuracy.sel(init="identity"))
                row.update(paired_comparison(gaps.values, LEVEL, POWER))
                out["cells"][f"{task}, {arm}, T = {float(T):g}"] = row
    cells = list(out["cells"].values())
    for c, keep in zip(cells, holm([_t_p(c) for c in cells], 1.0 - LEVEL)):
        c["held"] = bool(keep)
    out["rank_accuracy"] = {str(task): _rank_accuracy(out["cells"], str(task))
                            for task in ds.task.values}
    out["contrasts"] = {str(task): _contrasts(last.sel(task=task), width) for task in ds.task.values}
    return out


def run_means(one) -> dict:
    """Means over the seed pairs of one cell and value law at the last block: the final
    accuracy, the first-epoch loss, and the geometry at initialisation (network, model)."""
    return {"accuracy": float(one.val_accuracy.mean()), "first_loss": float(one.first_loss.mean()),
            **{k: float(one[f"init_{k}"].mean()) for k in GEOMETRY},
            **{f"model_{k}": float(one[f"model_{k}"].mean()) for k in GEOMETRY}}


def _contrasts(last, width) -> dict:
    """Paired contrasts of one task's final accuracy (the runs of a seed pair share every
    draw but the values): ``horizon`` (longest minus shortest horizon, per arm and value law)
    and ``side`` (at the longest horizon, above minus below beta_c: the Gaussian values'
    accuracy, and their gap to the identity values) and ``interaction`` (per arm, the gap at the
    longest horizon minus the gap at the shortest), each a ``paired_comparison``."""
    acc = last.val_accuracy
    T0, T1 = float(acc.horizon.min()), float(acc.horizon.max())
    out = {"horizon": {}, "side": {}}
    out["interaction"] = {}
    if T1 > T0:
        for arm in acc.attention.values:
            for init in INITS:
                diff = acc.sel(attention=arm, init=init)
                out["horizon"][f"{arm}, {init}"] = paired_comparison(
                    (diff.sel(horizon=T1) - diff.sel(horizon=T0)).values, LEVEL, POWER)
            gap = acc.sel(attention=arm, init="gaussian") - acc.sel(attention=arm, init="identity")
            out["interaction"][str(arm)] = paired_comparison(
                (gap.sel(horizon=T1) - gap.sel(horizon=T0)).values, LEVEL, POWER)
    sides = {_phase(str(a), width): a for a in acc.attention.values}
    if {"below beta_c", "above beta_c"} <= set(sides):
        at = acc.sel(horizon=T1)
        above, below = (at.sel(attention=sides[k]) for k in ("above beta_c", "below beta_c"))
        gap = lambda x: x.sel(init="gaussian") - x.sel(init="identity")  # noqa: E731
        out["side"] = {"gaussian": paired_comparison(
                           (above.sel(init="gaussian") - below.sel(init="gaussian")).values,
                           LEVEL, POWER),
                       "gap": paired_comparison((gap(above) - gap(below)).values, LEVEL, POWER)}
    return out


def _rank_accuracy(cells, task) -> dict:
    """Spearman's correlation, over the task's cells (attention x horizon x value law), of
    the effective rank at the last block at initialisation with the final accuracy."""
    pairs = [(c[init]["effective_rank"], c[init]["accuracy"])
             for key, c in cells.items() if key.startswith(task + ",") for init in INITS]
    rho, p = scipy.stats.spearmanr(*zip(*pairs)) if len(pairs) > 2 else (math.nan, math.nan)
    return {"rho": float(rho), "p": float(p), "n_cells": len(pairs)}


def _points(c, key="gap") -> str:
    """A paired comparison's mean and interval in points of accuracy."""
    return (f"{100 * c[key]:+.1f} points ({100 * c[key + '_low']:+.1f} to "
            f"{100 * c[key + '_high']:+.1f})")


def phrases(stats) -> dict[str, str]:
    """The page's words, each from ``stats``: ``by_horizon``, per horizon, in how many cells the mean gap (Gaussian minus
    identity) is negative and how many of these hold; ``horizon_effect``, each task's paired
    change of accuracy from the shortest to the longest horizon, per value law (its range over
    the arms); ``side``, each task's paired contrast above minus below beta_c at the longest
    horizon; ``interaction``, each task's range over the arms of the gap's change from the
    shortest to the longest horizon; ``rank_text``, Spearman's correlation on each task
    (nominal p: the points share seeds); ``collapse``, the first
    task's first arm at the longest horizon."""
    cells = stats["cells"]
    horizons = sorted({float(k.rsplit("= ", 1)[1]) for k in cells})
    def at(T):
        return [c for k, c in cells.items() if float(k.rsplit("= ", 1)[1]) == T]

    by_horizon = "; ".join(
        f"at T = {T:g} the mean gap is negative in {sum(c['gap'] < 0 for c in at(T))} of "
        f"{len(at(T))} cells, {sum(c['gap'] < 0 and c['held'] for c in at(T))} of them after "
        "Holm's correction" for T in dict.fromkeys((horizons[0], horizons[-1])))
    effect, side, interaction = [], [], []
    for task, con in stats["contrasts"].items():
        for init in INITS:
            runs = [c for k, c in con["horizon"].items() if k.endswith(init)]
            if runs:
                lo, hi = (100 * f(c["gap"] for c in runs) for f in (min, max))
                below, above = (sum(c["gap_high"] < 0 for c in runs),
                                sum(c["gap_low"] > 0 for c in runs))
                effect.append(f"{init.capitalize()} values on {task}: mean changes between "
                              f"{lo:+.1f} and {hi:+.1f} points across the {len(runs)} arms "
                              f"({below} intervals below zero, {above} above)")
        if con["interaction"]:
            inter = con["interaction"].values()
            lo, hi = (100 * f(c["gap"] for c in inter) for f in (min, max))
            worst = max(_t_p(c) for c in inter)
            interaction.append(f"between {lo:+.1f} and {hi:+.1f} points on {task} (every "
                               f"paired t test p ≤ {worst:.2g})")
        if con["side"]:
            side.append(f"{_points(con['side']['gaussian'])} for the Gaussian values' "
                        f"accuracy and {_points(con['side']['gap'])} for their gap on {task}")
    rank = "; ".join(f"ρ = {r['rho']:.2f} (nominal p = {r['p']:.2g}) on {task}"
                     for task, r in stats["rank_accuracy"].items())
    return {"by_horizon": by_horizon,
            "horizon_effect": "; ".join(effect) if effect else "not measured (one horizon)",
            "side": "; ".join(side) if side else "not measured (no β on each side of β_c)",
            "interaction": "; ".join(interaction) if interaction else "not measured",
            "rank_text": rank, "collapse": _collapse(cells, horizons)}


def _collapse(cells, horizons) -> str:
    """The first task's first arm at the longest horizon: the effective rank and the accuracy
    with each value law, and the identity values' accuracy at the shortest horizon."""
    first = next(iter(cells)).rsplit(", T = ", 1)[0]
    long, short = (cells[f"{first}, T = {T:g}"] for T in (horizons[-1], horizons[0]))
    i, g = long["identity"], long["gaussian"]
    return (f"in {first}, at T = {horizons[-1]:g} the tokens end with the effective rank "
            f"{i['effective_rank']:.2f} with one identity value matrix and "
            f"{g['effective_rank']:.2f} with Gaussian ones; the first network reaches "
            f"{i['accuracy']:.0%} (and {short['identity']['accuracy']:.0%} at "
            f"T = {horizons[0]:g}), the second {g['accuracy']:.0%}")


def _t_p(cell_stats) -> float:
    """Two-sided p of the t test implied by the interval (1 if it cannot be formed)."""
    n, sd = cell_stats["n"], cell_stats["gap_sd"]
    if n < 2 or not np.isfinite(sd) or sd == 0:
        return 1.0
    return float(2 * scipy.stats.t.sf(abs(cell_stats["gap"]) / (sd / math.sqrt(n)), n - 1))


def tables(stats) -> dict[str, str]:
    """One row a cell: the phase, the geometry at initialisation and the training outcome."""
    head = ["task, attention, horizon", "phase", "groups at the last block (identity / "
            "Gaussian V)", "effective rank", "gradient, embedding over last block",
            "final accuracy (identity / Gaussian)", "gap, Gaussian − identity (95% interval)",
            "detectable gap"]
    rows = []
    for key, c in stats["cells"].items():
        i, g = c["identity"], c["gaussian"]
        rows.append([key, c["phase"], f"{i['n_clusters']:.1f} / {g['n_clusters']:.1f}",
                     f"{i['effective_rank']:.2f} / {g['effective_rank']:.2f}",
                     f"{i['gradient_ratio']:.2g} / {g['gradient_ratio']:.2g}",
                     f"{i['accuracy']:.0%} / {g['accuracy']:.0%}",
                     f"{c['gap']:+.1%} ({c['gap_low']:+.1%} to {c['gap_high']:+.1%})"
                     + (" *" if c.get("held") else ""), f"{c['detectable_gap']:.0%}"])
    return {"cells": words.markdown_table(head, rows)}


def plot(ds, task=None):
    """Left and middle, for one task (default the first): the effective rank of the tokens in
    depth at initialisation at the shortest and the longest horizon (a colour per attention
    arm; solid identity V, dashed Gaussian V; at the last block the simulator from the same
    initial tokens, + the flow, x the stochastic model).  Right: every cell's paired gap,
    Gaussian minus identity, with its 95% interval (filled: holds after Holm's correction)."""
    import matplotlib.pyplot as plt

    task = str(ds.task.values[0]) if task is None else task
    sub = ds.sel(task=task)
    arms, horizons = list(sub.attention.values), sorted(float(T) for T in sub.horizon.values)
    colours = dict(zip(arms, palette(len(arms))))
    fig, axes = plt.subplots(1, 3, figsize=(8.4, 3.8), sharey=False,
                             gridspec_kw={"width_ratios": (1, 1, 1.4)})
    for ax, T in zip(axes[:2], dict.fromkeys((horizons[0], horizons[-1]))):
        for arm in arms:
            for init, style, mark in zip(INITS, ("-", "--"), ("+", "x")):
                one = sub.sel(attention=arm, horizon=T, init=init)
                ax.plot(sub.layer, one.init_effective_rank.mean("pair"), style, lw=1.2,
                        color=colours[arm], label=str(arm) if init == "identity" else None)
                ax.plot(sub.layer[-1], one.model_effective_rank.mean("pair"), mark, ms=7,
                        color=colours[arm])
        ax.set(xlabel="block", title=f"initialisation, T = {T:g}")
    if len(horizons) == 1:   # one horizon (the smoke scale): the middle panel has nothing
        axes[1].set_axis_off()
    axes[0].set_ylabel(f"effective rank ({task})")
    keys = [axes[1].plot([], [], style, marker=mark, color="0.3")[0]
            for style, mark in zip(("-", "--"), ("+", "x"))]
    axes[0].legend(loc="lower left")
    axes[1].legend(keys, [f"{init} V, simulator {mark}" for init, mark in zip(INITS, "+x")],
                   loc="upper right")
    stats = summary(ds)
    for key, c in stats["cells"].items():
        task_, arm, T = key.split(", ")
        x = (arms.index(arm) + 0.4 * (horizons.index(float(T.split("= ")[1])) - 0.5)
             + (0.08 if task_ != task else -0.08))
        axes[2].errorbar(x, 100 * c["gap"], yerr=[[100 * (c["gap"] - c["gap_low"])],
                         [100 * (c["gap_high"] - c["gap"])]], fmt="o" if task_ == task else "s",
                         ms=4, capsize=2, color=colours.get(arm, "0.3"),
                         mfc=None if c["held"] else "white")
    axes[2].axhline(0, color="0.5", lw=0.8)
    axes[2].set_xticks(range(len(arms)), [str(a).replace("beta", "β") for a in arms])
    axes[2].set(ylabel="Gaussian − identity (points)", title="paired gap (● digits, ■ small)",
                xlabel=f"in each arm: T = {horizons[0]:g} left, {horizons[-1]:g} right")
    pairs = ds.sizes["pair"]
    return laid_out(fig, f"Attention-only ViT, {int(ds.attrs['fixed_depth'])} blocks of width "
                         f"{int(ds.attrs['fixed_width'])}, {pairs} seed pair"
                         f"{'s' if pairs > 1 else ''} a cell")


FIGURE = Figure.declared(
    globals(), "train_phase", source="ours",
    description="training from the phase at initialisation: the ViT's geometry in depth "
                "against the paper's model, and the accuracy it reaches (ours)",
    schema={"betas": reals(0.0, 50.0), "horizons": reals(0.0, 1000.0, strict_min=True),
            "tasks": choices(("digits", "digits-small")), "pairs": integer(1, 1000),
            "depth": integer(1, 4096), "width": integer(2, 4096), "epochs": integer(1, 10_000),
            "tol": real(0.0, 1.0, strict_min=True), "patch_size": choice((1, 2, 4, 8)),
            "batch_size": integer(1, 100_000), "lr": real(0.0, 1.0, strict_min=True),
            "random_qk": choice((False, True))})
compute, cost = FIGURE.compute, FIGURE.cost
