r"""Feedforward blocks, N tokens: no antipodal pairs with ReLU, more with erf (ours).

N tokens, Gaussian values, :math:`B = I`, softmax, d = 4, through the literal N-token map
with a random feedforward block of strength r (:mod:`stochastic_transformers.kernels.feedforward`).
Tokens that coincide receive the same block increment, so the two-cluster reduction of the
chapter "Many tokens" carries over with the block's kernel added: a two-point split of
:math:`m_1` and :math:`m_2` tokens is a two-point diffusion, and the block adds
:math:`2r(d-1)E[\varphi_{\rm even}(g)^2]` to its drift at -1 for every split
(:func:`stochastic_transformers.feedforward.boundary_at_minus_one`).  The figure counts, at
time T, the configurations with an antipodal pair, the clustered ones, and the sizes of the
antipodal splits, for the paper's model (r = 0) and with ReLU and erf blocks.
"""

from __future__ import annotations

import numpy as np

from ... import feedforward, simulate
from ...activations import ACTIVATIONS
from ...classification import has_antipodal_pair, is_clustered, n_clusters
from ...config import RunConfig
from ...simulation import full_method
from ...stats import two_proportion_z
from ..base import add_outcome_fractions, cell_threads, knob_attr, laid_out, trajectory_layer_work
from ..knobs import choices, integers
from ..spec import Figure
from .ff_pairs import BLOCK_SCHEMA, block_model, run_title

_COMMON = dict(d=4, activations=("relu", "erf"), attention="softmax", tol=1e-3, ff_width=8,
               seed=0)
SCALES = {
    "smoke": dict(_COMMON, n_tokens=(4,), rs=(0.0, 0.5), betas=(2.0,), n_traj=100, L=20, T=2.0),
    "quick": dict(_COMMON, n_tokens=(4, 8), rs=(0.0, 0.5), betas=(1.0, 2.0, 4.0), n_traj=500,
                  L=100, T=20.0),
    "paper": dict(_COMMON, n_tokens=(4, 8), rs=(0.0, 0.5), betas=(1.0, 2.0, 4.0), n_traj=2000,
                  L=100, T=20.0),
}
#: Largest split recorded (tokens in the smaller of two antipodal clusters).
MAX_SPLIT = 32


def cell(*, n_tokens, activation, r, beta, d, n_traj, L, T, attention, tol, ff_width, seed):
    """One (N, activation, r, beta) point: how many configurations at T have an antipodal
    pair, are clustered, are one cluster, and the sizes of their antipodal two-cluster
    splits; and the 1% quantile of 1 + (smallest pairwise overlap)."""
    model = block_model(d=d, beta=beta, attention=attention, r=r, ff_width=ff_width,
                        activation=activation)
    # r = 0 runs the N-token map itself (not the reduced path) so that every arm of the
    # figure is the same literal computation.
    method = "literal" if r > 0 else full_method(n_tokens, d)
    ds = simulate(model, RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=T, seed=seed,
                                   tol=tol, method=method, n_threads=cell_threads()))
    g = ds.gram.values
    anti = has_antipodal_pair(g, tol)
    clustered = is_clustered(g, tol)
    k = n_clusters(g, tol)
    size0 = np.sum(g[:, 0, :] >= 1.0 - tol, axis=-1)
    smaller = np.minimum(size0, n_tokens - size0)
    two_antipodal = clustered & anti & (k == 2)
    splits = np.bincount(smaller[two_antipodal], minlength=MAX_SPLIT + 1)[:MAX_SPLIT + 1]
    closest = 1.0 + g.min(axis=(-2, -1))
    return {"n_antipodal_pair": int(anti.sum()), "n_clustered": int(clustered.sum()),
            "n_single": int((clustered & (k == 1)).sum()), "n_two_antipodal": int(two_antipodal.sum()),
            "split_counts": splits.astype(np.int64), "n_traj": n_traj,
            "closest_low": float(np.quantile(closest, 0.01))}


def run(knobs, sweeps):
    """The (N, activation, r, beta) sweep, each cell's ``split_counts`` along ``split``; its
    counts with fractions ``p_antipodal_pair``, ``p_clustered``, ``p_single`` (Wilson bands),
    and ``balanced_share``: the share of balanced splits (m1 = m2) among the antipodal
    two-cluster outcomes (NaN where there are none)."""
    ds = sweeps({"n_tokens": list(knobs["n_tokens"]), "activation": list(knobs["activations"]),
                 "r": list(knobs["rs"]), "beta": list(knobs["betas"])},
                fixed={k: knobs[k] for k in ("d", "n_traj", "L", "T", "attention", "tol",
                                             "ff_width")},
                seed=knobs["seed"], output_dims={"split_counts": ("split",)},
                output_coords={"split": np.arange(MAX_SPLIT + 1)})
    ds = add_outcome_fractions(ds, ("antipodal_pair", "clustered", "single"))
    n_split = ds.split_counts.sum("split")
    ds["balanced_share"] = (ds.split_counts.sel(split=ds.n_tokens // 2)
                            .where(n_split > 0) / n_split.where(n_split > 0))
    return ds


#: Seconds per trajectory-layer of the N-token maps (the literal map with the block, the
#: d*N or literal map without), measured on the committed paper run
#: (results/ff_tokens_paper.nc, on the project's 2-core machine).
SECONDS_PER_WORK = 1.85e-6

#: Combined (Stouffer) z above which the odd block's excess of antipodal pairs over the
#: paper's model counts as shown, provided no single (N, beta) goes the other way by more
#: than :data:`ODD_AGAINST_Z`.
ODD_COMBINED_Z = 3.0
ODD_AGAINST_Z = 2.0


def summary(ds) -> dict:
    """Numbers the notebook quotes, per N and beta: the antipodal-pair fraction of the
    paper's model and with each block, the share of balanced splits among antipodal
    two-cluster outcomes; the verdict ``even_block_no_pairs`` (not one configuration with
    an antipodal pair under a block whose activation has an even part) with the smallest
    share of one-cluster outcomes there (``even_single_min``); and, for the odd block, the
    two-proportion z of its excess of antipodal pairs over r = 0 at every (N, beta), their
    Stouffer combination, and the verdict ``odd_block_more_pairs`` (combined z above
    :data:`ODD_COMBINED_Z` and no point below -:data:`ODD_AGAINST_Z`)."""
    r_block = float(ds.r.max())
    out = {"r": r_block, "n_traj": int(ds.n_traj.values.max()), "T": float(knob_attr(ds, "T")),
           "L": int(knob_attr(ds, "L")), "d": int(knob_attr(ds, "d")), "rows": {},
           "n_tokens": [int(n) for n in ds.n_tokens.values],
           "betas": [float(b) for b in ds.beta.values]}
    acts = [str(a) for a in ds.activation.values]
    even = [a for a in acts if feedforward.even_part_energy(a) > 0]
    odd = [a for a in acts if a not in even]
    for n in ds.n_tokens.values:
        for beta in ds.beta.values:
            base = ds.sel(n_tokens=n, beta=beta, activation=acts[0], r=0.0)
            row = {"none": float(base.p_antipodal_pair),
                   "none_balanced": float(base.balanced_share)}
            for a in acts:
                sub = ds.sel(n_tokens=n, beta=beta, activation=a, r=r_block)
                row[a] = float(sub.p_antipodal_pair)
                row[f"{a}_balanced"] = float(sub.balanced_share)
            out["rows"][f"{int(n)}_{float(beta):g}"] = row
    blocked = ds.sel(r=r_block)
    if even:
        out["even_pairs"] = int(blocked.n_antipodal_pair.sel(activation=even).sum())
        out["even_configs"] = int(blocked.n_traj.sel(activation=even).sum())
        out["even_single_min"] = float(blocked.p_single.sel(activation=even).min())
        out["even_block_no_pairs"] = out["even_pairs"] == 0
    if odd:
        arm, zero = ds.sel(activation=odd[0], r=r_block), ds.sel(activation=odd[0], r=0.0)
        z = np.asarray(two_proportion_z(arm.n_antipodal_pair, arm.n_traj,
                                        zero.n_antipodal_pair, zero.n_traj), dtype=float)
        out["odd_gain_z"] = {f"{int(n)}_{float(b):g}": float(z[i, j])
                             for i, n in enumerate(arm.n_tokens.values)
                             for j, b in enumerate(arm.beta.values)}
        combined = float(z.sum() / np.sqrt(z.size))
        out["odd_gain_combined_z"] = combined
        out["odd_gain_min_z"] = float(z.min())
        out["odd_block_more_pairs"] = bool(combined > ODD_COMBINED_Z and z.min() > -ODD_AGAINST_Z)
    return out


def page_values(stats) -> dict:
    """Plain values the page glues beside :func:`summary`: ``word_odd``, which the chapter
    quotes (a cross-page glue carries text only)."""
    return {"word_odd": "more" if stats.get("odd_block_more_pairs") else "not clearly more"}


def phrases(stats) -> dict[str, str]:
    """The page's data-dependent phrases (Markdown): ``even_verdict`` and ``odd_verdict``."""
    gains = ", ".join(f"N = {k.split('_')[0]}, $\\beta$ = {k.split('_')[1]}: {v:+.1f}"
                      for k, v in stats.get("odd_gain_z", {}).items())
    return {
        "even_verdict": (
            f"Not one of the {stats['even_configs']:,} configurations with a ReLU block has an "
            "antipodal pair at $T$, and at every $(N, \\beta)$ at least "
            f"{stats['even_single_min']:.1%} of them have become one cluster."
            if stats.get("even_block_no_pairs") else
            f"{stats.get('even_pairs', 0):,} configurations with a ReLU block have an antipodal "
            "pair at $T$: against the limit's exclusion, to be explained."),
        "odd_verdict": (
            ("The erf block gives more configurations with an antipodal pair than the paper's "
             "model: " if stats.get("odd_block_more_pairs") else
             "This run does not show that the erf block gives more configurations with an "
             "antipodal pair than the paper's model: ")
            + f"the two-proportion z of its excess is {gains}, "
            f"{stats.get('odd_gain_combined_z', float('nan')):.1f} combined (Stouffer; the "
            f"verdict needs more than {ODD_COMBINED_Z:g} and no point below "
            f"-{ODD_AGAINST_Z:g}).")}


def table(stats):
    """By (N, beta): the fraction of configurations with an antipodal pair without a block
    and with each, and the share of balanced splits among the antipodal two-cluster
    outcomes (a DataFrame)."""
    import pandas as pd

    rows = []
    for key, row in stats["rows"].items():
        acts = [k for k in row if k != "none" and not k.endswith("_balanced")]
        n, beta = key.split("_")
        rows.append({"N": int(n), "beta": float(beta), "no block": row["none"],
                     **{f"{a} block": row[a] for a in acts},
                     "balanced share, no block": row["none_balanced"],
                     **{f"balanced share, {a}": row[f"{a}_balanced"] for a in acts}})
    return pd.DataFrame(rows).set_index(["N", "beta"]).round(3)


def plot(ds):
    """Left: fraction with an antipodal pair against beta, per N, for the paper's model and
    each block.  Right: the sizes of the antipodal splits at the largest beta."""
    import matplotlib.pyplot as plt

    from ...style import palette

    acts = [str(a) for a in ds.activation.values]
    r_block = float(ds.r.max())
    arms = [("no block (r = 0)", acts[0], 0.0)] + [(f"{a} block (r = {r_block:g})", a, r_block)
                                                    for a in acts]
    colours = palette(len(arms))
    fig, (ax, axs) = plt.subplots(1, 2, figsize=(9.6, 3.8))
    for colour, (label, act, r) in zip(colours, arms):
        for ls, n in zip(("-", "--", ":"), ds.n_tokens.values):
            sub = ds.sel(n_tokens=n, activation=act, r=r)
            p = sub.p_antipodal_pair.values
            err = np.vstack([p - sub.p_antipodal_pair_low.values,
                             sub.p_antipodal_pair_high.values - p])
            ax.errorbar(sub.beta, p, yerr=err, fmt="o", ls=ls, ms=3, lw=1, capsize=2,
                        color=colour, label=f"{label}, N = {int(n)}")
    ax.set_xlabel(r"$\beta$")
    ax.set_ylabel("P(an antipodal pair at T)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend()
    top = float(ds.beta.max())
    width = 0.8 / len(arms)
    n_max = int(ds.n_tokens.max())
    for i, (colour, (label, act, r)) in enumerate(zip(colours, arms)):
        sub = ds.sel(n_tokens=n_max, activation=act, r=r, beta=top)
        counts = sub.split_counts.values[1:n_max // 2 + 1]
        share = counts / max(int(sub.n_traj), 1)
        axs.bar(np.arange(1, n_max // 2 + 1) + (i - (len(arms) - 1) / 2) * width, share,
                width=width, color=colour, label=label)
    axs.set_xticks(np.arange(1, n_max // 2 + 1))
    axs.set_xlabel(f"tokens in the smaller cluster (N = {n_max})")
    axs.set_ylabel("share of trajectories")
    axs.set_title(rf"antipodal two-cluster splits at $\beta$ = {top:g}")
    axs.legend()
    return laid_out(fig, run_title("N tokens with a feedforward block", ds))


FIGURE = Figure(
    "ff_tokens", source="ours",
    description="feedforward blocks, N = 4 and 8 tokens: antipodal pairs and their splits with "
                "ReLU and erf blocks against the paper's model (ours)",
    scales=SCALES,
    schema={"n_tokens": integers(3, 64), "activations": choices(ACTIVATIONS), **BLOCK_SCHEMA},
    cell=cell, run=run,
    work=trajectory_layer_work("n_tokens", "activations", "rs", "betas"),
    seconds_per_work=SECONDS_PER_WORK, summary=summary, plot=plot)
compute, cost = FIGURE.compute, FIGURE.cost
