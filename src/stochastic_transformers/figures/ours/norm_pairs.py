r"""Other normalisations, two tokens on the sphere: where the antipodal phase begins (ours).

Two tokens, softmax, Gaussian values, through the paper's post-LN layer and the nGPT-style
layer :math:`X_i \leftarrow N(X_i + hN(VA_i))`, each with and without a causal mask
(:mod:`stochastic_transformers.normalizations`).  The figure draws the fraction of pairs
within ``tol`` of -1 at T against beta over the limit's probability at T
(:func:`~stochastic_transformers.normalizations.antipodal_at`), with each variant's
threshold: Theorem 2's :math:`\tfrac12\operatorname{arccosh}(d-2)`, the nGPT-style layer's
:math:`\tfrac12\operatorname{arccosh}(2d-5)` and its causal form; post-LN with the mask has
none, -1 being no fixed point there.
"""

from __future__ import annotations

import numpy as np
import scipy.stats

from ... import normalizations, simulate, theory
from ...classification import outcome_counts
from ...config import ModelConfig, RunConfig
from ...stats import agreement_z, z_digest
from ...style import palette
from ..base import add_outcome_fractions, cell_threads, knob_attr, laid_out, trajectory_layer_work
from ..knobs import choice, choices, integers
from ..spec import Figure
from ..words import markdown_table, verdict

#: The layers drawn: a normalisation on the sphere, then "_causal" for the masked form.
LAYERS = ("post", "ngpt", "post_causal", "ngpt_causal")
#: The other layers are built for softmax attention (the configuration refuses the rest).
_SOFTMAX = choice(("softmax",))
_COMMON = dict(layers=LAYERS, attention="softmax", tol=1e-3, seed=0)
SCALES = {"smoke": dict(_COMMON, d=(4, 8), betas=(0.5, 2.5), n_traj=200, L=20, T=2.0),
          "quick": dict(_COMMON, d=(4, 8), betas=tuple(np.linspace(0.0, 4.0, 9)), n_traj=2000,
                        L=100, T=100.0),
          "paper": dict(_COMMON, d=(4, 8), betas=tuple(np.linspace(0.0, 4.0, 17)),
                        n_traj=10_000, L=100, T=100.0)}


def layer_model(layer: str, *, d, beta, attention) -> ModelConfig:
    """The model of a layer name of :data:`LAYERS` (``"ngpt_causal"``: nGPT-style, masked)."""
    norm, _, mask = layer.partition("_")
    return ModelConfig(d=d, beta=beta, attention=attention, norm=norm, causal=bool(mask))


def threshold(layer: str, d: int) -> float:
    """The beta above which -1 attracts two tokens of ``layer`` (nan where none is known:
    post-LN with the mask, where -1 is not fixed, and pre- and peri-LN, whose unequal norms
    unfix it)."""
    norm, _, mask = layer.partition("_")
    if norm == "post":
        return float("nan") if mask else float(theory.critical_beta(d))
    if norm == "ngpt":
        return normalizations.critical_beta_ngpt(d, causal=bool(mask))
    return float("nan")


def cell(*, layer, d, beta, n_traj, L, T, attention, tol, seed):
    """One (layer, d, beta) point: outcome counts of ``n_traj`` two-token trajectories at T."""
    ds = simulate(layer_model(layer, d=d, beta=beta, attention=attention),
                  RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=T, seed=seed, tol=tol,
                            method="literal", n_threads=cell_threads()))
    counts = outcome_counts(ds, tol=tol)
    return {"n_single": counts["single"], "n_antipodal": counts["antipodal"],
            "n_unclustered": counts["unclustered"], "n_traj": n_traj}


#: Grid step in log(1 + Z) of the limit's Kolmogorov solve (its error estimate is returned
#: with it; at most 1e-3 at paper scale, a fifth of a standard error there).
THEORY_STEP = 0.04


def finish(ds, knobs):
    """The fractions with Wilson bands, the limit's :math:`P(1 + Z_T \\le \\mathrm{tol})`
    ``p_theory`` (error ``p_theory_error``), the deviations ``z_score`` and ``beta_c``."""
    ds = add_outcome_fractions(ds, ("antipodal", "single", "unclustered"))
    T, tol = float(knobs["T"]), float(knobs["tol"])
    shape = (ds.layer.size, ds.d.size, ds.beta.size)
    p, err = np.empty(shape), np.empty(shape)
    for i, layer in enumerate(ds.layer.values):
        norm, _, mask = str(layer).partition("_")
        for j, d in enumerate(ds.d.values):
            for k, b in enumerate(ds.beta.values):
                p[i, j, k], err[i, j, k] = normalizations.antipodal_at(
                    T, float(b), int(d), norm=norm, causal=bool(mask), tol=tol, h=THEORY_STEP)
    ds["p_theory"] = (("layer", "d", "beta"), p)
    ds["p_theory_error"] = (("layer", "d", "beta"), err)
    ds["beta_c"] = (("layer", "d"), np.array([[threshold(str(lay), int(d)) for d in ds.d.values]
                                              for lay in ds.layer.values]))
    ds["z_score"] = agreement_z(ds.n_antipodal, ds.n_traj, ds.p_theory)
    ds.attrs.update(theory_step=THEORY_STEP)
    return ds


#: Seconds of simulation per trajectory-layer (literal two-token map), measured on the
#: committed paper run (results/norm_pairs_paper.nc: 8,732 s of cell time for 1.36e10
#: trajectory-layers, while other runs shared the 2-core machine; alone, about 1.1e-7).
SECONDS_PER_WORK = 6.4e-7
#: Limit probability above which a point is informative (as is any with a pair counted):
#: below it a point expects no pair and agrees trivially.
INFORMATIVE_P = 1e-6
#: False-alarm rate of the agreement check: it fails when more points lie beyond 2 standard
#: errors than a perfect match (each with probability 4.6%) gives with this probability.
AGREE_ALPHA = 1e-3


def summary(ds) -> dict:
    """The deviations from the limit at T over the informative points (the limit above
    :data:`INFORMATIVE_P`, or a pair counted), the number beyond 2 standard errors and its binomial p-value under a perfect
    match, the largest numerical error of the limit, and the thresholds by layer and d."""
    informative = ((ds.p_theory > INFORMATIVE_P) | (ds.n_antipodal > 0)).values
    z = ds.z_score.values[informative]
    digest = z_digest(z)
    outside = int(np.sum(np.abs(z) > 2.0))
    p_out = float(scipy.stats.binom.sf(outside - 1, z.size, 2 * scipy.stats.norm.sf(2.0))) \
        if z.size else 1.0
    return {"n_informative": digest["n"], "max_abs_z": digest["max_abs_z"],
            "mean_z": digest["mean_z"], "share_within_2se": digest["share_within"],
            "n_outside_2se": outside, "outside_p": p_out, "agrees": bool(p_out > AGREE_ALPHA),
            "theory_error_max": float(ds.p_theory_error.max()),
            "n_traj": int(ds.n_traj.values.max()), "L": int(knob_attr(ds, "L")),
            "T": float(knob_attr(ds, "T")),
            "beta_c": {str(lay): {int(d): float(ds.beta_c.sel(layer=lay, d=d))
                                  for d in ds.d.values} for lay in ds.layer.values}}


def phrases(stats) -> dict[str, str]:
    """``verdict``: whether the simulated fractions follow each layer's limit at T."""
    tally = (f"{stats['n_outside_2se']} of {stats['n_informative']} points beyond 2 standard "
             f"errors, binomial p = {stats['outside_p']:.2g} against a perfect match")
    return {"verdict": verdict([(stats["agrees"], f"the fractions at T follow each layer's "
                                 f"limit ({tally})", f"the fractions at T do not follow the "
                                 f"limits ({tally})")], words=("Derived and confirmed",
                                                                "Partly confirmed",
                                                                "Not confirmed"))}


def tables(stats) -> dict[str, str]:
    """The thresholds by layer and d (Markdown)."""
    ds_ = sorted(next(iter(stats["beta_c"].values())))
    rows = [[lay] + [("none" if not np.isfinite(v[d]) else f"{v[d]:.3f}") for d in ds_]
            for lay, v in stats["beta_c"].items()]
    return {"thresholds": markdown_table(["layer"] + [f"β_c, d = {d}" for d in ds_], rows,
                                         numeric=True)}


def plot(ds):
    """One panel per d: P(antipodal at T) against beta for each layer, points with 95%
    bands over the limit's curve, and each layer's threshold dashed."""
    import matplotlib.pyplot as plt

    layers, dims = [str(x) for x in ds.layer.values], ds.d.values
    colours = palette(len(layers))
    fig, axes = plt.subplots(1, dims.size, figsize=(3.6 * dims.size + 0.4, 3.8), sharey=True,
                             squeeze=False)
    top = max(0.05, float(ds.p_antipodal_high.max()) + 0.03)
    for ax, d in zip(axes[0], dims):
        for colour, layer in zip(colours, layers):
            sub = ds.sel(layer=layer, d=d)
            p = sub.p_antipodal.values
            err = np.vstack([p - sub.p_antipodal_low.values, sub.p_antipodal_high.values - p])
            ax.errorbar(sub.beta, p, yerr=err, fmt="o", ms=3, capsize=2, lw=1, color=colour,
                        label=layer.replace("_", " + "))
            ax.plot(sub.beta, sub.p_theory, color=colour, lw=1.2)
            bc = float(sub.beta_c)
            if np.isfinite(bc):
                ax.axvline(bc, color=colour, ls="--", lw=0.9)
        ax.set(title=f"d = {int(d)}", xlabel=r"$\beta$", ylim=(-0.01, top))
    axes[0, 0].set_ylabel(r"$P(1 + Z_T \leq \mathrm{tol})$")
    # Below the panels: inside, the legend would cover the thresholds or the points.
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="lower center", ncol=len(layers))
    return laid_out(fig, f"Two tokens on the sphere (L = {int(knob_attr(ds, 'L'))}, "
                         f"T = {float(knob_attr(ds, 'T')):g}, {int(ds.n_traj.values.max()):,} "
                         "trajectories per point)", rect=(0, 0.07, 1, 1))


FIGURE = Figure.declared(
    globals(), "norm_pairs", source="ours",
    description="other normalisations, two tokens: P(antipodal at T) vs beta for post-LN and "
                "nGPT-style layers, with and without a causal mask, with their limits (ours)",
    schema={"layers": choices(LAYERS), "d": integers(3), "attention": _SOFTMAX},
    grid={"layer": "layers", "d": "d", "beta": "betas"},
    fixed=("n_traj", "L", "T", "attention", "tol"),
    work=trajectory_layer_work("layers", "d", "betas"))
compute, cost = FIGURE.compute, FIGURE.cost
