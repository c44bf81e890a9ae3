r"""Theorem 1 and Lemmas 2-3 across cases: the discrete model's weak convergence in depth.

For each case (model, attention, N, beta) N tokens start uniform on :math:`S^{d-1}` and run
to time t at depth scales L that double.  The test functions are the mean pairwise overlap
:math:`\bar m = \binom N2^{-1}\sum_{i<j}\langle x_i, x_j\rangle` and its square at t.  The
models: the paper's (random values, Theorem 1), the deterministic flow (the hybrid model at
:math:`\varepsilon = 0`, Lemma 2) and the hybrid model at :math:`\varepsilon > 0` (Lemma 3).

No reference is needed to see convergence: the successive differences
:math:`D(L) = E f(X^L_t) - E f(X^{2L}_t)` of a sequence that converges like :math:`CL^{-p}`
fall like :math:`L^{-p}` (:math:`D = C(1 - 2^{-p})L^{-p}`), and :math:`p` is fitted on the
differences that stand out of their noise (:func:`~stochastic_transformers.stats.fit_order`).
The limit is extrapolated at first order from the two largest L (:math:`2E_{2L} - E_L`,
biased where the order is not 1); for N = 2 the mean overlap is the overlap diffusion's, whose
exact expectation (the backward Kolmogorov equation, or the flow's ODE, averaged over the
uniform start) checks it.  For N = 3 and 8 only convergence, not the limit, is tested.
The theorems prove convergence and no rate; that the rate is 1/L (an Euler-type step) is our
expectation.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import xarray as xr

from ... import simulate
from ..._validation import ATTENTIONS
from ...config import ModelConfig, RunConfig
from ...sde import overlap_expectation
from ...stats import fit_order, normal_quantile, pooled_mean_se
from ...style import palette
from ..base import cell_threads, laid_out
from ..knobs import all_of, choices, integer, integers, real, reals, whole_layers
from ..spec import Figure
from ..words import markdown_table

#: The models: the paper's (Theorem 1), the flow (Lemma 2) and the hybrid model (Lemma 3).
MODELS = ("stochastic", "flow", "hybrid")
LABELS = {"stochastic": "random values (Theorem 1)", "flow": "flow, ε = 0 (Lemma 2)",
          "hybrid": "hybrid, ε > 0 (Lemma 3)"}
#: Test functions of the mean pairwise overlap.
FUNCTIONS = {"m": lambda m: m, "m2": lambda m: m * m}
#: Trajectories per sweep cell.
BLOCK_SIZE = 250_000

_BASE = dict(models=MODELS, attentions=ATTENTIONS, ns=(2, 3, 8), betas=(0.5, 1.0, 4.0),
             epsilon=1.0, d=4, t=1.0, seed=0)
SCALES = {
    "smoke": dict(_BASE, models=("stochastic", "hybrid"), attentions=("softmax",), ns=(2, 3),
                  betas=(1.0,), Ls=(4, 8, 16), n_traj=4_000),
    "quick": dict(_BASE, Ls=(4, 8, 16, 32), n_traj=20_000),
    "paper": dict(_BASE, Ls=(4, 8, 16, 32, 64), n_traj=1_000_000),
}
#: Seconds per trajectory-layer, measured on the committed paper run (5,327 s of cell time,
#: the cores shared with another run).
SECONDS_PER_WORK = 7.96e-7
#: Two-sided level of every interval the verdicts read, Bonferroni over the tests made.
LEVEL = 0.95
#: The order is fitted on the differences from L = FIT_L_MIN on (the smallest L is far from
#: the limit where attention is large) that stand MIN_SNR standard errors out of zero.
FIT_L_MIN, MIN_SNR = 8, 3.0


def work(knobs) -> float:
    """Trajectory-layers scheduled: n_traj trajectories of t L layers per case and L."""
    cases = math.prod(len(knobs[k]) for k in ("models", "attentions", "ns", "betas"))
    return float(knobs["n_traj"] * knobs["t"] * sum(knobs["Ls"]) * cases)


def _doubling(name, values, knobs):
    """Depth scales that double from one to the next (the differences need L and 2L)."""
    if any(b != 2 * a for a, b in zip(values, values[1:])):
        raise ValueError(f"{name} must double from one value to the next; got {values}")
    return values


def cell(*, model, attention, n_tokens, beta, L, block, n_traj, epsilon, d, t, seed):
    """One block of trajectories at depth scale L: ``mean`` and ``m2`` (mean and centred sum
    of squares) of each test function of the mean pairwise overlap at t, and ``count``."""
    n = min(BLOCK_SIZE, n_traj - block * BLOCK_SIZE)
    kind = "stochastic" if model == "stochastic" else "hybrid"
    eps = epsilon if model == "hybrid" else 0.0
    config = ModelConfig(d=d, beta=beta, attention=attention, kind=kind, epsilon=eps)
    gram = simulate(config, RunConfig(n_tokens=n_tokens, n_traj=n, L=L, T=t, seed=seed,
                                      stop_level=0.0, n_threads=cell_threads())).gram.values
    m = gram[:, *np.triu_indices(n_tokens, 1)].mean(axis=1)      # (trajectory,)
    f = np.stack([fn(m) for fn in FUNCTIONS.values()])            # (function, trajectory)
    return {"mean": f.mean(1), "m2": ((f - f.mean(1, keepdims=True)) ** 2).sum(1),
            "count": np.full(len(FUNCTIONS), float(n))}


def run(knobs, sweeps):
    """The sweep over (model, attention, N, beta, L, block), pooled over blocks."""
    grid = {"model": list(knobs["models"]), "attention": list(knobs["attentions"]),
            "n_tokens": list(knobs["ns"]), "beta": list(knobs["betas"]), "L": list(knobs["Ls"]),
            "block": list(range(-(-knobs["n_traj"] // BLOCK_SIZE)))}
    raw = sweeps(grid, fixed={k: knobs[k] for k in ("n_traj", "epsilon", "d", "t")},
                 seed=knobs["seed"], output_dims={v: ("function",) for v in ("mean", "m2", "count")},
                 output_coords={"function": list(FUNCTIONS)})
    mean, se, n = pooled_mean_se(raw["mean"], raw["m2"], raw["count"], "block")
    ds = xr.Dataset({"mean": mean, "se": se, "n_traj": n})
    ds.attrs.update(raw.attrs)
    return ds


@functools.lru_cache(maxsize=64)
def reference(function, model, attention, beta, d, t, epsilon, n_nodes=256):
    """E f(Z_t) of the two-token overlap diffusion from the uniform start, f(z) = z or z^2:
    the backward Kolmogorov solution (the ODE's for the flow) averaged over the start's
    density :math:`\\propto (1 - z^2)^{(d-3)/2}` by Gauss-Jacobi quadrature (enough nodes
    for the unnormalised flow at beta = 4, whose outcome is steep in the start: tested)."""
    from scipy.special import roots_jacobi

    z, w = roots_jacobi(n_nodes, (d - 3) / 2, (d - 3) / 2)
    z = np.clip(z, -1 + 1e-12, 1 - 1e-12)
    u, _ = overlap_expectation(FUNCTIONS[function], z, [t], beta, d, attention,
                               model="stochastic" if model == "stochastic" else "hybrid",
                               epsilon=epsilon if model == "hybrid" else 0.0, atol=1e-6)
    return float(np.sum(w * u[0]) / np.sum(w))


def step_bound(model, attention, beta, epsilon, L) -> float:
    r"""The scale of one layer's move of a token at depth scale L: the bound on the
    attention's norm (1 for softmax, :math:`e^\beta` unnormalised) times the layer's noise
    (:math:`1/\sqrt L`; :math:`\varepsilon/\sqrt L` for the hybrid model) or, for the flow,
    its step 1/L (a Gaussian V adds a factor of order :math:`\sqrt d`).  The limit describes
    the chain where this is small."""
    size = 1.0 if attention == "softmax" else math.exp(beta)
    return size * (1.0 / L if model == "flow" else
                   (epsilon if model == "hybrid" else 1.0) / math.sqrt(L))


def _case(sub, z, min_snr, L_min) -> dict:
    """One case and function: the differences, the order of those from ``L_min`` on, and
    the limit extrapolated at first order from the two largest L."""
    L, y, se = sub.L.values.astype(float), sub["mean"].values, sub.se.values
    diff, diff_se = y[:-1] - y[1:], np.hypot(se[:-1], se[1:])
    fit = fit_order(L[:-1], diff, diff_se, min_snr=min_snr, L_min=L_min)
    order, order_se, n_fit = float(fit["order"]), float(fit["order_se"]), int(np.sum(fit["used"]))
    # Converging: the differences that stand out share one sign and fall at a positive rate
    # beyond its interval (three of them), or the last one is within noise (fewer).
    used = diff[np.asarray(fit["used"])]
    one_sign = bool(np.all(used > 0) or np.all(used < 0))
    converges = one_sign and (order - z * order_se > 0 if n_fit >= 3
                              else abs(diff[-1]) <= z * diff_se[-1])
    grows = n_fit >= 3 and one_sign and order + z * order_se < 0
    return {"diff": diff.tolist(), "diff_se": diff_se.tolist(), "order": order,
            "order_se": order_se, "n_fit": n_fit,
            "limit": float(2 * y[-1] - y[-2]), "limit_se": float(math.hypot(2 * se[-1], se[-2])),
            "converges": bool(converges), "grows": bool(grows),
            "order_one": bool(np.isfinite(order_se) and abs(order - 1) <= z * order_se)}


def summary(ds) -> dict:
    """Per case and function (keys ``model/attention/N/beta/function``) the differences, the
    order of their decay, the limit, and for N = 2 the exact reference with the limit's z;
    the verdict flags per model (every case converges; every N = 2 limit agrees) and the
    count of orders consistent with 1.  Every interval is Bonferroni over the cases."""
    cases = [(m, a, int(n), float(b), f) for m in ds.model.values for a in ds.attention.values
             for n in ds.n_tokens.values for b in ds.beta.values for f in ds.function.values]
    z = normal_quantile(1 - (1 - LEVEL) / len(cases))                  # two-sided
    d, t, eps = (float(ds.attrs[f"fixed_{k}"]) for k in ("d", "t", "epsilon"))
    out = {"cases": {}, "z": z, "Ls": [int(v) for v in ds.L.values],
           "n_traj": int(ds.n_traj.min()), "d": int(d), "t": t, "epsilon": eps}
    for m, a, n, b, f in cases:
        one = _case(ds.sel(model=m, attention=a, n_tokens=n, beta=b, function=f), z,
                    MIN_SNR, FIT_L_MIN)
        one["step"] = step_bound(m, a, b, eps, out["Ls"][-1])
        if n == 2:
            one["reference"] = reference(f, m, a, b, int(d), t, eps)
            one["limit_z"] = (one["limit"] - one["reference"]) / one["limit_se"]
            one["agrees"] = bool(abs(one["limit_z"]) <= z)
        out["cases"][f"{m}/{a}/{n}/{b:g}/{f}"] = one
    for v in out["cases"].values():
        v["holds"] = v["converges"] and v.get("agrees", True)
    # Per model and attention: case-functions that converge (with the exact limit where it is
    # known), whose differences grow, and N = 2 limits that agree.
    out["groups"] = {}
    for m in ds.model.values:
        for a in ds.attention.values:
            vs = [v for k, v in out["cases"].items() if k.startswith(f"{m}/{a}/")]
            out["groups"][f"{m}/{a}"] = {
                "n": len(vs), "holds": sum(v["holds"] for v in vs),
                "grows": sum(v["grows"] for v in vs),
                "n_exact": sum("agrees" in v for v in vs),
                "agrees": sum(v.get("agrees", False) for v in vs),
                "max_step": max(v["step"] for v in vs)}
    out["by_model"] = {m: {key: sum(g[key] for k, g in out["groups"].items()
                                    if k.startswith(m + "/"))
                           for key in ("n", "holds", "grows", "n_exact", "agrees")}
                       for m in ds.model.values}
    fitted = [v for v in out["cases"].values() if np.isfinite(v["order_se"]) and v["holds"]]
    out.update(n_cases=len(cases), n_fitted=len(fitted),
               max_step=max(v["step"] for v in out["cases"].values()),
               max_step_softmax=max(v["step"] for k, v in out["cases"].items()
                                    if "/softmax/" in k and not k.startswith("flow/")),
               n_order_one=sum(v["order_one"] for v in fitted),
               order_min=min((v["order"] for v in fitted), default=float("nan")),
               order_max=max((v["order"] for v in fitted), default=float("nan")))
    return out


def verdict_word(stats, model) -> str:
    """Reproduced where every case-function converges (and, for N = 2, to the exact limit),
    not reproduced where none does, partly reproduced between."""
    m = stats["by_model"][model]
    return ("Reproduced" if m["holds"] == m["n"] else "Not reproduced" if m["holds"] == 0
            else "Partly reproduced")


def phrases(stats) -> dict[str, str]:
    """The page's verdict (Markdown): per model the word and the counts, per attention."""
    parts = []
    for model in stats["by_model"]:
        per = [f"{g['holds']} of {g['n']} {key.split('/')[1]}" for key, g in
               stats["groups"].items() if key.startswith(model + "/")]
        parts.append(f"{LABELS[model]}: **{verdict_word(stats, model).lower()}** "
                     f"(settled: {', '.join(per)})")
    text = "; ".join(parts)
    return {"verdict": text[0].upper() + text[1:] + ". A case-function has settled when its "
            "successive differences keep one sign and fall and, for two tokens, its "
            "extrapolated limit is the exact one."}


def table(stats) -> str:
    """Per case-function: the step scale, the order of the differences with its interval
    (where three stand out), whether they converge, for N = 2 the limit's z, and whether it
    counts (converges, to the exact limit where known)."""
    rows = []
    for key, v in stats["cases"].items():
        m, a, n, b, f = key.split("/")
        half = stats["z"] * v["order_se"]
        order = (f"{v['order']:.2f} [{v['order'] - half:.2f}, {v['order'] + half:.2f}]"
                 if np.isfinite(half) else "")
        rows.append([m, a, n, b, "m̄" if f == "m" else "m̄²", f"{v['step']:.3g}", order,
                     "yes" if v["converges"] else "grows" if v["grows"] else "no",
                     f"{v['limit_z']:+.1f}" if "limit_z" in v else "",
                     "yes" if v["holds"] else "**no**"])
    return markdown_table(["model", "attention", "N", "β", "f", "step scale",
                           "order of D(L) [interval]", "converges", "z of the limit", "counts"],
                          rows)


def plot(ds, stats=None):
    """(top) N = 2: |E m(t) - exact| against L per model, with a 1/L line; (bottom) the
    fitted order of the successive differences of the mean overlap per case (bars: the
    Bonferroni interval; open: the case has not settled), with 1 marked."""
    import matplotlib.pyplot as plt

    stats = summary(ds) if stats is None else stats
    models, L = list(ds.model.values), ds.L.values.astype(float)
    cases = [(a, float(b)) for a in ds.attention.values for b in ds.beta.values]
    colours = dict(zip(cases, palette(len(cases))))
    fig, axes = plt.subplots(2, len(models), figsize=(7.0, 5.8), squeeze=False,
                             sharey="row")
    for col, m in enumerate(models):
        ax, axo = axes[:, col]
        for k, (a, b) in enumerate(cases):
            label = f"{'softmax' if a == 'softmax' else 'unnorm.'}, β = {b:g}"
            if 2 in ds.n_tokens.values:
                v = stats["cases"][f"{m}/{a}/2/{b:g}/m"]
                sub = ds.sel(model=m, attention=a, n_tokens=2, beta=b, function="m")
                ax.errorbar(L, np.maximum(np.abs(sub["mean"].values - v["reference"]), 1e-5),
                            2 * sub.se.values, fmt="o-", ms=3, lw=1, color=colours[a, b],
                            label=label)
            for x, n in enumerate(ds.n_tokens.values):
                v = stats["cases"][f"{m}/{a}/{int(n)}/{b:g}/m"]
                if np.isfinite(v["order_se"]):
                    axo.errorbar(x + 0.1 * (k - (len(cases) - 1) / 2), v["order"],
                                 stats["z"] * v["order_se"], fmt="o", ms=3, lw=1,
                                 color=colours[a, b], mfc=None if v["holds"] else "white")
        ax.plot(L, 0.05 * L[0] / L, ":", color="0.4", label="∝ 1/L")
        ax.set(xscale="log", yscale="log", xlabel="L", title=LABELS[m])
        ax.set_xticks(L, [str(int(v)) for v in L])
        ax.xaxis.set_minor_locator(plt.NullLocator())
        axo.axhline(1.0, color="0.5", lw=0.8)
        axo.set(xticks=range(ds.sizes["n_tokens"]), xlabel="N",
                xlim=(-0.5, ds.sizes["n_tokens"] - 0.5),
                xticklabels=[str(int(n)) for n in ds.n_tokens.values])
    axes[0, 0].set_ylabel("|E m̄(t) − exact|, N = 2")
    axes[1, 0].set_ylabel("order of D(L), m̄")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4)
    return laid_out(fig, rect=(0, 0.09, 1, 1))


FIGURE = Figure.declared(
    globals(), "weak_order", source="paper",
    description="Theorem 1 and Lemmas 2-3 across N, beta and attention: weak convergence in "
                "depth of the mean pairwise overlap",
    schema={"models": choices(MODELS), "attentions": choices(ATTENTIONS),
            "ns": integers(2, 16), "betas": reals(0.0, 8.0), "epsilon": real(0.0, 4.0),
            "d": integer(2, 64), "t": real(0.0, 10.0, strict_min=True), "n_traj": integer(2),
            "Ls": all_of(integers(1, 4096, increasing=True), _doubling, whole_layers("t", "Ls"))})
compute, cost = FIGURE.compute, FIGURE.cost
