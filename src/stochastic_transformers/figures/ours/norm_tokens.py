r"""Other normalisations, N tokens at the paper's depth: outcomes beside post-LN (ours).

N tokens, softmax, Gaussian values, at the depth of the paper's Figure 6 (L = 100, T = 500),
through the six layers of :mod:`stochastic_transformers.normalizations` (post-LN, pre-LN,
peri-LN, nGPT-style, and the two layers on the sphere with a causal mask).  The figure draws,
against beta, the fraction of configurations with at least one antipodal pair of directions
(Figure 6's measure) and the fraction that are one cluster.  No limit law is known for N
tokens of these layers; each layer's two-token threshold is marked.
"""

from __future__ import annotations

import numpy as np

from ... import simulate
from ...classification import direction_gram, has_antipodal_pair, is_clustered, n_clusters
from ...config import RunConfig
from ...style import palette
from ..base import add_outcome_fractions, cell_threads, knob_attr, laid_out, trajectory_layer_work
from ..knobs import choices, integers
from ..spec import Figure
from ..words import markdown_table
from .norm_pairs import _SOFTMAX, layer_model, threshold

LAYERS = ("post", "pre", "peri", "ngpt", "post_causal", "ngpt_causal")
_COMMON = dict(layers=LAYERS, d=4, attention="softmax", tol=1e-3, seed=0)
SCALES = {"smoke": dict(_COMMON, n_tokens=(3,), betas=(1.0, 4.0), n_traj=50, L=10, T=2.0),
          "quick": dict(_COMMON, n_tokens=(3,), betas=tuple(np.arange(0.0, 9.0, 2.0)),
                        n_traj=400, L=100, T=100.0),
          "paper": dict(_COMMON, n_tokens=(3, 6), betas=tuple(np.arange(0.0, 9.0, 1.0)),
                        n_traj=1000, L=100, T=500.0)}


def cell(*, layer, n_tokens, beta, d, n_traj, L, T, attention, tol, seed):
    """One (layer, N, beta) point: configurations with an antipodal pair, of one cluster,
    clustered, and the mean number of clusters, all on the tokens' directions at T."""
    ds = simulate(layer_model(layer, d=d, beta=beta, attention=attention),
                  RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=T, seed=seed,
                            method="literal", n_threads=cell_threads()))
    gram = ds.gram.values
    if layer.partition("_")[0] in ("pre", "peri"):
        gram = direction_gram(gram)
    k = n_clusters(gram, tol)
    return {"n_antipodal_pair": int(has_antipodal_pair(gram, tol).sum()),
            "n_one_cluster": int(np.sum(k == 1)), "n_clustered": int(is_clustered(gram, tol).sum()),
            "mean_clusters": float(k.mean()), "n_traj": n_traj}


def finish(ds, knobs):
    """The fractions with their Wilson bands and each layer's two-token threshold."""
    ds = add_outcome_fractions(ds, ("antipodal_pair", "one_cluster", "clustered"))
    ds["beta_c"] = ("layer", np.array([threshold(str(lay), int(knobs["d"]))
                                       for lay in ds.layer.values]))
    return ds


#: Seconds of simulation per trajectory-layer, measured on the committed paper run
#: (results/norm_tokens_paper.nc: 5,192 s of cell time for 5.4e9 trajectory-layers, N = 3
#: and 6 together, while another run shared the 2-core machine).
SECONDS_PER_WORK = 9.6e-7


def summary(ds) -> dict:
    """By layer and N: the fractions at the largest beta, the first beta where an antipodal
    pair is seen in more than 5% of the configurations (nan if none), and the largest
    fraction with an antipodal pair."""
    out = {"n_traj": int(ds.n_traj.values.max()), "L": int(knob_attr(ds, "L")),
           "T": float(knob_attr(ds, "T")), "d": int(knob_attr(ds, "d")),
           "beta_max": float(ds.beta.max()), "by_layer": {}}
    for lay in ds.layer.values:
        for n in ds.n_tokens.values:
            sub = ds.sel(layer=lay, n_tokens=n)
            seen = sub.beta.values[sub.p_antipodal_pair.values > 0.05]
            top = sub.isel(beta=-1)
            out["by_layer"][f"{lay}, N = {int(n)}"] = {
                "antipodal_pair_from": float(seen[0]) if seen.size else float("nan"),
                "antipodal_pair_max": float(sub.p_antipodal_pair.max()),
                "one_cluster_at_max": float(top.p_one_cluster),
                "clustered_at_max": float(top.p_clustered)}
    return out


def phrases(stats) -> dict[str, str]:
    """``onsets``: from which beta each layer on the sphere shows antipodal pairs, for the
    smallest N (``onset_n``); ``off_sphere``: the clustered shares of pre- and peri-LN at the
    largest beta, for that N."""
    rows = stats["by_layer"]
    n = min(int(key.rsplit("= ", 1)[1]) for key in rows)
    names = {"post": "post-LN", "ngpt": "the nGPT-style layer",
             "post_causal": "post-LN with the mask", "ngpt_causal": "the nGPT-style layer with it"}
    def onset(lay):
        beta = rows[f"{lay}, N = {n}"]["antipodal_pair_from"]
        return f"β = {beta:g}" if np.isfinite(beta) else "no β of the grid"

    onsets = [f"{onset(lay)} for {name}" for lay, name in names.items()
              if f"{lay}, N = {n}" in rows]
    off = [f"{rows[f'{lay}, N = {n}']['clustered_at_max']:.0%} for {lay}-LN"
           for lay in ("pre", "peri") if f"{lay}, N = {n}" in rows]
    return {"onset_n": n, "onsets": ", ".join(onsets) if onsets else "–",
            "off_sphere": " and ".join(off) if off else "–"}


def tables(stats) -> dict[str, str]:
    """The summary by layer and N (Markdown)."""
    rows = [[key, "none" if not np.isfinite(v["antipodal_pair_from"]) else
             f"{v['antipodal_pair_from']:g}", f"{v['antipodal_pair_max']:.2f}",
             f"{v['clustered_at_max']:.2f}", f"{v['one_cluster_at_max']:.2f}"]
            for key, v in stats["by_layer"].items()]
    head = ["layer", "β from which > 5% have an antipodal pair", "largest share with one",
            f"clustered at β = {stats['beta_max']:g}", f"one group at β = {stats['beta_max']:g}"]
    return {"outcomes": markdown_table(head, rows, numeric=True)}


def plot(ds):
    """Two rows (antipodal pair, one group) and one column per N; a colour per layer."""
    import matplotlib.pyplot as plt

    layers, ns = [str(x) for x in ds.layer.values], ds.n_tokens.values
    colours = palette(len(layers))
    fig, axes = plt.subplots(2, ns.size, figsize=(3.8 * ns.size + 0.6, 6.4), sharex=True,
                             sharey="row", squeeze=False)
    for j, n in enumerate(ns):
        for row, name in enumerate(("p_antipodal_pair", "p_one_cluster")):
            ax = axes[row, j]
            for colour, layer in zip(colours, layers):
                sub = ds.sel(layer=layer, n_tokens=n)
                p = sub[name].values
                err = np.vstack([p - sub[f"{name}_low"].values, sub[f"{name}_high"].values - p])
                ax.errorbar(sub.beta, p, yerr=err, fmt="o-", ms=3, lw=0.9, capsize=2,
                            color=colour, label=layer.replace("_", " + "))
                if row == 0 and np.isfinite(float(sub.beta_c)):
                    ax.axvline(float(sub.beta_c), color=colour, ls="--", lw=0.8)
            ax.set(ylim=(-0.02, 1.02), title=f"N = {int(n)}" if row == 0 else None)
        axes[1, j].set_xlabel(r"$\beta$")
    axes[0, 0].set_ylabel("an antipodal pair at T")
    axes[1, 0].set_ylabel("one group at T")
    axes[1, -1].legend(loc="upper right")
    return laid_out(fig, f"N tokens at depth T = {float(knob_attr(ds, 'T')):g} (d = "
                         f"{int(knob_attr(ds, 'd'))}, L = {int(knob_attr(ds, 'L'))}, "
                         f"{int(ds.n_traj.values.max()):,} trajectories per point)")


FIGURE = Figure.declared(
    globals(), "norm_tokens", source="ours",
    description="other normalisations, N tokens at the paper's depth: antipodal pairs and one "
                "cluster vs beta under six layers (ours)",
    schema={"layers": choices(LAYERS), "n_tokens": integers(3), "attention": _SOFTMAX},
    grid={"layer": "layers", "n_tokens": "n_tokens", "beta": "betas"},
    fixed=("d", "n_traj", "L", "T", "attention", "tol"),
    work=trajectory_layer_work("layers", "n_tokens", "betas"))
compute, cost = FIGURE.compute, FIGURE.cost
