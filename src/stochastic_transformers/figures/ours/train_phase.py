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


#: Seconds per block-epoch at width 16 (measured: 0.6 s an epoch of the digits at depth 64).
SECONDS_PER_WORK = 1.0e-2


def _phase(attention, width) -> str:
    """Where the arm's beta sits against the two-token threshold of Theorem 2."""
    if attention == "random":
        return "random Q, K"
    beta = float(attention.split()[1])
    return "above beta_c" if beta > critical_beta(int(width)) else "below beta_c"


def summary(ds) -> dict:
    """By task, attention arm and horizon: the geometry at the last block at initialisation
    (network and model, per value law), the final accuracy and first-epoch loss per value
    law, and the paired gap Gaussian minus identity (``paired_comparison``) with Holm's
    correction over all the cells (``held``)."""
    width = int(ds.attrs["fixed_width"])
    out = {"beta_c": float(critical_beta(width)), "width": width, "depth": int(ds.attrs["fixed_depth"]),
           "pairs": int(ds.sizes["pair"]), "cells": {}}
    last = ds.isel(layer=-1)
    for task in ds.task.values:
        for arm in ds.attention.values:
            for T in ds.horizon.values:
                sub = last.sel(task=task, attention=arm, horizon=T)
                row = {"phase": _phase(str(arm), width)}
                for init in INITS:
                    one = sub.sel(init=init)
                    row[init] = {"accuracy": float(one.val_accuracy.mean()),
                                 "first_loss": float(one.first_loss.mean()),
                                 **{k: float(one[f"init_{k}"].mean()) for k in GEOMETRY},
                                 **{f"model_{k}": float(one[f"model_{k}"].mean()) for k in GEOMETRY}}
                gaps = (sub.val_accuracy.sel(init="gaussian") - sub.val_accuracy.sel(init="identity"))
                row.update(paired_comparison(gaps.values, LEVEL, POWER))
                out["cells"][f"{task}, {arm}, T = {float(T):g}"] = row
    cells = list(out["cells"].values())
    p = [max(c["sign_test_p_two_sided"], _t_p(c)) for c in cells]
    for c, keep in zip(cells, holm(p, 1.0 - LEVEL)):
        c["held"] = bool(keep)
    return out


def _t_p(cell_stats) -> float:
    """Two-sided p of the t test implied by the interval (1 if it cannot be formed)."""
    import scipy.stats

    n, sd = cell_stats["n"], cell_stats["gap_sd"]
    if n < 2 or not np.isfinite(sd) or sd == 0:
        return 1.0
    return float(2 * scipy.stats.t.sf(abs(cell_stats["gap"]) / (sd / math.sqrt(n)), n - 1))


def tables(stats) -> dict[str, str]:
    """One row a cell: the phase, the geometry at initialisation and the training outcome."""
    head = ["task, attention, horizon", "phase", "clusters at the last block (identity / "
            "Gaussian V)", "effective rank", "final accuracy (identity / Gaussian)",
            "gap, Gaussian − identity (95% interval)"]
    rows = []
    for key, c in stats["cells"].items():
        i, g = c["identity"], c["gaussian"]
        rows.append([key, c["phase"], f"{i['n_clusters']:.1f} / {g['n_clusters']:.1f}",
                     f"{i['effective_rank']:.2f} / {g['effective_rank']:.2f}",
                     f"{i['accuracy']:.0%} / {g['accuracy']:.0%}",
                     f"{c['gap']:+.1%} ({c['gap_low']:+.1%} to {c['gap_high']:+.1%})"
                     + (" *" if c.get("held") else "")])
    return {"cells": words.markdown_table(head, rows)}


def plot(ds):
    """Left, the effective rank of the tokens in depth at initialisation (digits, each arm and
    horizon; solid identity V, dashed Gaussian V); right, the final accuracy of every run
    against the effective rank at the last block."""
    import matplotlib.pyplot as plt

    sub = ds.sel(task=ds.task.values[0])
    arms = [(a, T) for a in sub.attention.values for T in sub.horizon.values]
    colours = palette(len(arms))
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.4, 3.6))
    for colour, (arm, T) in zip(colours, arms):
        for init, style in zip(INITS, ("-", "--")):
            rank = sub.init_effective_rank.sel(attention=arm, horizon=T, init=init).mean("pair")
            left.plot(sub.layer, rank, style, color=colour, lw=1.2,
                      label=f"{arm}, T = {float(T):g}" if init == "identity" else None)
        for init, marker in zip(INITS, ("o", "^")):
            cell_ = ds.sel(attention=arm, horizon=T, init=init).isel(layer=-1)
            right.scatter(cell_.init_effective_rank.values.ravel(), cell_.val_accuracy.values.ravel(),
                          s=14, marker=marker, color=colour, alpha=0.7)
    left.set(xlabel="block", ylabel="effective rank of the tokens",
             title="at initialisation (digits)")
    left.legend(loc="upper right")
    right.set(xscale="log", xlabel="effective rank at the last block, at initialisation",
              ylabel="final validation accuracy", title="after training (o identity, ^ Gaussian V)")
    return laid_out(fig, f"Attention-only ViT, {int(ds.attrs['fixed_depth'])} blocks of width "
                         f"{int(ds.attrs['fixed_width'])}, {ds.sizes['pair']} seed pairs a cell")


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
