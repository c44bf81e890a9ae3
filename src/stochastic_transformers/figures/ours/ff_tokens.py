r"""Feedforward blocks, N tokens: no antipodal pairs with ReLU, more with erf (ours).

N tokens, softmax, d = 4, through the literal N-token map with a random feedforward block of
strength r.  Coinciding tokens receive the same block increment, so a two-point split stays one,
and the block adds :math:`2r(d-1)E[\varphi_{\rm even}(g)^2]` to its drift at -1.  The figure
counts, at T, the configurations with an antipodal pair and the sizes of the antipodal splits,
for the paper's model (r = 0) and with ReLU and erf blocks.
"""

from __future__ import annotations

import numpy as np

from ... import feedforward, simulate
from ...activations import ACTIVATIONS
from ...classification import has_antipodal_pair, is_clustered, n_clusters
from ...config import RunConfig
from ...simulation import full_method
from ...stats import two_proportion_z
from ...style import palette
from ..base import add_outcome_fractions, cell_threads, knob_attr, laid_out, trajectory_layer_work
from ..knobs import all_of, choices, integers
from ..spec import Figure
from ..words import markdown_table, signed, verdict
from .ff_pairs import BLOCK_SCHEMA, band_points, block_model, run_title

_COMMON = dict(d=4, activations=("relu", "erf"), attention="softmax", tol=1e-3, ff_width=8,
               seed=0, rs=(0.0, 0.5))
_FULL = dict(_COMMON, n_tokens=(4, 8), betas=(1.0, 2.0, 4.0), L=100, T=20.0)
SCALES = {"smoke": dict(_COMMON, n_tokens=(4,), betas=(2.0,), n_traj=100, L=20, T=2.0),
          "quick": dict(_FULL, n_traj=500), "paper": dict(_FULL, n_traj=2000)}
#: Largest split recorded (tokens in the smaller of two antipodal clusters).
MAX_SPLIT = 32


def cell(*, n_tokens, activation, r, beta, d, n_traj, L, T, attention, tol, ff_width, seed):
    """One (N, activation, r, beta) point: how many configurations at T have an antipodal
    pair, are clustered, are one cluster, and the sizes of their antipodal two-cluster
    splits; and the 1% quantile of 1 + (smallest pairwise overlap)."""
    model = block_model(d=d, beta=beta, attention=attention, r=r, ff_width=ff_width,
                        activation=activation)
    # r = 0 runs the N-token map itself (not the reduced path), like every other arm
    method = "literal" if r > 0 else full_method(n_tokens, d)
    ds = simulate(model, RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=T, seed=seed,
                                   tol=tol, method=method, n_threads=cell_threads()))
    g = ds.gram.values
    anti, clustered, k = has_antipodal_pair(g, tol), is_clustered(g, tol), n_clusters(g, tol)
    size0 = np.sum(g[:, 0, :] >= 1.0 - tol, axis=-1)
    smaller = np.minimum(size0, n_tokens - size0)
    two_antipodal = clustered & anti & (k == 2)
    splits = np.bincount(smaller[two_antipodal], minlength=MAX_SPLIT + 1)[:MAX_SPLIT + 1]
    return {"n_antipodal_pair": int(anti.sum()), "n_clustered": int(clustered.sum()),
            "n_single": int((clustered & (k == 1)).sum()), "n_two_antipodal": int(two_antipodal.sum()),
            "split_counts": splits.astype(np.int64), "n_traj": n_traj,
            "closest_low": float(np.quantile(1.0 + g.min(axis=(-2, -1)), 0.01))}


def run(knobs, sweeps):
    """The (N, activation, r, beta) sweep with ``split_counts`` along ``split``, the fractions
    ``p_antipodal_pair``, ``p_clustered``, ``p_single`` (Wilson bands) and ``balanced_share``
    (balanced splits among the antipodal two-cluster outcomes; NaN where there are none)."""
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


#: Seconds per trajectory-layer of the N-token maps, measured on the committed paper run
#: (results/ff_tokens_paper.nc, on the project's 2-core machine).
SECONDS_PER_WORK = 1.85e-6

#: Combined (Stouffer) z above which the odd block's excess of antipodal pairs counts as
#: shown, provided no single (N, beta) goes the other way by more than :data:`ODD_AGAINST_Z`.
ODD_COMBINED_Z, ODD_AGAINST_Z = 3.0, 2.0


def summary(ds) -> dict:
    """Per (N, beta) the antipodal-pair fractions and balanced shares without and with each
    block; ``even_block_no_pairs`` (no antipodal pair under an even-part block) with the
    least one-cluster share there; the odd block's two-proportion z over r = 0, their
    Stouffer combination and ``odd_block_more_pairs`` (:data:`ODD_COMBINED_Z`,
    :data:`ODD_AGAINST_Z`); at the largest beta, per (N, arm shown) with splits, the largest
    balanced share and the least z of its distance below one half (``top_*``)."""
    r_block = float(ds.r.max())
    out = {"r": r_block, "n_traj": int(ds.n_traj.values.max()), "T": float(knob_attr(ds, "T")),
           "L": int(knob_attr(ds, "L")), "rows": {}}
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
    top = ds.sel(beta=ds.beta.max())  # per (N, arm shown): balanced share, z below one half
    share = top.balanced_share.where((top.r > 0) | (top.activation == acts[0])).values
    ok, n = np.isfinite(share), top.split_counts.sum("split").values
    below = (0.5 - share[ok]) * 2 * np.sqrt(n[ok])
    out.update(top_beta=float(top.beta), top_n_settings=int(ok.sum()),
               top_balanced_max=float(share[ok].max()) if ok.any() else float("nan"),
               top_unbalanced_min_z=float(below.min()) if ok.any() else float("nan"))
    blocked = ds.sel(r=r_block)
    if even:
        out["even_pairs"] = int(blocked.n_antipodal_pair.sel(activation=even).sum())
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
        out.update(odd_gain_combined_z=combined, odd_gain_min_z=float(z.min()),
                   odd_gain_n_more=int(np.sum(z > 0)), odd_gain_n=int(z.size),
                   odd_block_more_pairs=bool(combined > ODD_COMBINED_Z and z.min() > -ODD_AGAINST_Z))
    return out


def phrases(stats) -> dict[str, str]:
    """The page's plain-text verdict, which the chapter quotes too: ``verdict``."""
    checks = []
    if "even_block_no_pairs" in stats:
        checks.append((stats["even_block_no_pairs"], "not one configuration with a ReLU block "
                       "has an antipodal pair at T", f"{stats['even_pairs']:,} configurations "
                       "with a ReLU block still have an antipodal pair at T"))
    if "odd_block_more_pairs" in stats:
        checks.append((stats["odd_block_more_pairs"], "an erf block gives more configurations "
                       f"with an antipodal pair than the paper's model at "
                       f"{stats['odd_gain_n_more']} of {stats['odd_gain_n']} points (combined z "
                       f"{stats['odd_gain_combined_z']:.1f})", "this run does not "
                       "show that an erf block gives more configurations with an antipodal pair"))
    return {"verdict": verdict(checks)}


def tables(stats) -> dict[str, str]:
    """The page's folded table (Markdown) ``fractions``: by (N, beta), the fraction of
    configurations with an antipodal pair without a block and with each, the share of balanced
    splits among the antipodal two-cluster outcomes (only for arms that have any), and the
    two-proportion z of the odd block's excess."""
    rows, gains = stats["rows"], stats.get("odd_gain_z", {})
    arms = [k for k in next(iter(rows.values())) if not k.endswith("_balanced")]
    balanced = [f"{a}_balanced" for a in arms
                if any(np.isfinite(row[f"{a}_balanced"]) for row in rows.values())]
    name = {a: "no block" if a == "none" else a for a in arms}
    head = (["N, β"] + [f"antipodal pair, {name[a]}" for a in arms]
            + [f"balanced share, {name[a[:-9]]}" for a in balanced]
            + (["z of the erf excess"] if gains else []))
    body = [[key.replace("_", ", ")] + [None if np.isnan(row[a]) else f"{row[a]:.3f}"
                                        for a in arms + balanced]
            + ([signed(gains[key], 1)] if gains else []) for key, row in rows.items()]
    return {"fractions": markdown_table(head, body, numeric=True)}


def plot(ds):
    """Top: fraction with an antipodal pair against beta, per N, for the paper's model and
    each block.  Bottom: the sizes of the antipodal splits at the largest beta."""
    import matplotlib.pyplot as plt

    acts = [str(a) for a in ds.activation.values]
    r_block = float(ds.r.max())
    arms = [("no block (r = 0)", acts[0], 0.0)] + [(f"{a} block (r = {r_block:g})", a, r_block)
                                                    for a in acts]
    colours = palette(len(arms))
    fig, (ax, axs) = plt.subplots(2, 1, figsize=(7.2, 7.4))
    for colour, (label, act, r) in zip(colours, arms):
        for ls, n in zip(("-", "--", ":"), ds.n_tokens.values):
            band_points(ax, ds.sel(n_tokens=n, activation=act, r=r), "p_antipodal_pair", ls=ls,
                        ms=3, color=colour, label=f"{label}, N = {int(n)}")
    ax.set(xlabel=r"$\beta$", ylabel="P(an antipodal pair at T)", ylim=(-0.02, 1.02))
    ax.legend(ncol=2)
    top, width, n_max = float(ds.beta.max()), 0.8 / len(arms), int(ds.n_tokens.max())
    sizes = np.arange(1, n_max // 2 + 1)
    for i, (colour, (label, act, r)) in enumerate(zip(colours, arms)):
        sub = ds.sel(n_tokens=n_max, activation=act, r=r, beta=top)
        axs.bar(sizes + (i - (len(arms) - 1) / 2) * width,
                sub.split_counts.values[sizes] / max(int(sub.n_traj), 1),
                width=width, color=colour, label=label)
    axs.set(xticks=sizes, xlabel=f"tokens in the smaller cluster (N = {n_max})",
            ylabel="share of trajectories", title=rf"antipodal two-cluster splits at $\beta$ = {top:g}")
    axs.legend()
    return laid_out(fig, run_title("N tokens with a feedforward block", ds))


def _with_the_block_off(name, values, knobs):
    """The strengths must hold r = 0: every row compares the block with the layer without it."""
    if 0.0 not in values:
        raise ValueError(f"{name} must hold 0 (the layer without the block); got {values}")
    return values


FIGURE = Figure.declared(
    globals(), "ff_tokens", source="ours",
    description="feedforward blocks, N = 4 and 8 tokens: antipodal pairs and their splits with "
                "ReLU and erf blocks against the paper's model (ours)",
    schema={"n_tokens": integers(3, 64), "activations": choices(ACTIVATIONS), **BLOCK_SCHEMA,
            "rs": all_of(BLOCK_SCHEMA["rs"], _with_the_block_off)},
    work=trajectory_layer_work("n_tokens", "activations", "rs", "betas"))
compute, cost = FIGURE.compute, FIGURE.cost
