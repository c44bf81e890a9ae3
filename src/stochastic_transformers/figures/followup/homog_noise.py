r"""Common against independent noise in the follow-up's model: what sharing the weights does to clustering.

The follow-up's chain applies one draw of the weights per layer and head to every token, so
the increments of different tokens are correlated through the kernel :math:`K[\mu](x, y)`: a
*common* noise, which its Section 5 contrasts with the idiosyncratic noise of diffusive
variants (K = 0 off the diagonal).  ``ModelConfig(noise="independent")`` draws every token's
own weights; the rest is the same model (centred Gaussian weights, one head,
:math:`\eta = L^{-1/2}`, time on the noise clock :math:`\tau`).  Two tokens: the mean overlap
and the share of antipodal pairs (:math:`1 + R <` tol) against the limit of each noise
(:func:`stochastic_transformers.random_attention.homogenized.overlap_moments` and ``antipodal_by``).  Eight
tokens: the mean pair overlap, the number of clusters
(:func:`stochastic_transformers.classification.n_clusters`) and the share of runs with an
antipodal pair.
"""

from __future__ import annotations

import math

import numpy as np

from ... import simulate
from ...classification import n_clusters
from ...config import ModelConfig, RunConfig
from ...random_attention.homogenized import antipodal_by, overlap_moments
from ..base import cell_threads, laid_out
from ..knobs import integer, real, reals
from ..spec import Figure

NOISES = ("common", "independent")
_BASE = dict(d=4, beta=1.0, many_tokens=8, tol=1e-3, taus=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
             seed=0)
SCALES = {
    "smoke": dict(_BASE, taus=(0.5, 2.0), L=16, n_pairs=200, n_many=50),
    "quick": dict(_BASE, L=64, n_pairs=2000, n_many=400),
    "paper": dict(_BASE, L=256, n_pairs=20_000, n_many=4000),
}
#: A point agrees with its limit when within this many standard errors (24 comparisons, two
#: statistics at six clocks for each noise: a family-wise false-alarm rate of about 1%).
AGREE_Z = 3.5
#: Seconds per trajectory-layer (both noises, two and eight tokens together, d = 4), measured
#: on the committed paper run (64 s of cell time).
SECONDS_PER_WORK = 3.24e-7


def cell(*, noise, n_tokens, d, beta, taus, L, n_traj, tol, seed):
    """One (noise, N): mean overlap, clusters and antipodal pairs at each clock ``taus``."""
    taus = np.asarray(taus, float)
    ds = simulate(ModelConfig(d=d, beta=beta, kind="random_attention", noise=noise),
                  RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=float(taus.max()),
                            times=tuple(taus), seed=seed, n_threads=cell_threads()))
    g = ds.gram_t.values                                  # (trajectory, time, N, N)
    iu = np.triu_indices(n_tokens, 1)
    pairs = g[:, :, iu[0], iu[1]]                         # (trajectory, time, pairs)
    per_run = {"mean_overlap": pairs.mean(axis=-1),       # mean overlap over the pairs i < j
               "antipodal": (np.min(1.0 + pairs, axis=-1) < tol).astype(float),
               "clusters": n_clusters(g, tol).astype(float)}
    out = {"n_traj": n_traj}
    for name, values in per_run.items():
        out[name] = values.mean(0)
        out[f"{name}_se"] = values.std(axis=0, ddof=1) / math.sqrt(n_traj)
    return out


def run(knobs, sweeps):
    """Both noises at two tokens and at ``many_tokens`` (part ``many``; its variables with the
    prefix ``many_``), with the two-token limits of both noises."""
    series = ("mean_overlap", "mean_overlap_se", "antipodal", "antipodal_se", "clusters",
              "clusters_se")
    common = dict(d=knobs["d"], beta=knobs["beta"], taus=tuple(knobs["taus"]), L=knobs["L"],
                  tol=knobs["tol"])
    parts = {}
    for part, n_tokens, n_traj, seed in ((None, 2, "n_pairs", 0),
                                         ("many", knobs["many_tokens"], "n_many", 1)):
        parts[part] = sweeps({"noise": list(NOISES)},
                             fixed=dict(common, n_tokens=n_tokens, n_traj=knobs[n_traj]),
                             seed=knobs["seed"] + seed, part=part,
                             output_dims={k: ("tau",) for k in series},
                             output_coords={"tau": np.asarray(knobs["taus"], float)})
    pairs, many = parts[None], parts["many"]
    ds = pairs.copy()
    for name in many.data_vars:
        ds[f"many_{name}"] = many[name]
    for noise, model in (("common", "random_attention"),
                         ("independent", "random_attention_independent")):
        mean, _, _, err = overlap_moments(ds.tau.values, knobs["beta"], knobs["d"], model=model)
        anti, err_a = antipodal_by(ds.tau.values, knobs["beta"], knobs["d"], model=model,
                                   tol=knobs["tol"])
        ds[f"limit_mean_{noise}"] = (("tau",), mean)
        ds[f"limit_antipodal_{noise}"] = (("tau",), anti)
        ds.attrs[f"limit_error_{noise}"] = float(max(np.max(err), np.max(err_a)))
    ds.attrs.update(many_tokens=knobs["many_tokens"], n_many=knobs["n_many"],
                    n_pairs=knobs["n_pairs"],
                    cell_time_s=sum(float(p.attrs.get("cell_time_s", 0.0)) for p in parts.values()))
    return ds


def work(knobs) -> float:
    """Trajectory-layers scheduled, a layer of the independent model counted N times (it
    draws every token's own weights): layers * (n_pairs (1 + 2) + n_many (1 + N))."""
    layers = knobs["L"] * max(knobs["taus"])
    return float(layers * (3 * knobs["n_pairs"] + knobs["n_many"] * (1 + knobs["many_tokens"])))


def measured_work(ds):
    """(seconds of simulation, trajectory-layers) of a computed dataset."""
    knobs = {"L": int(ds.attrs["fixed_L"]), "taus": list(ds.tau.values),
             "n_pairs": int(ds.attrs["n_pairs"]), "n_many": int(ds.attrs["n_many"]),
             "many_tokens": int(ds.attrs["many_tokens"])}
    return float(ds.attrs["cell_time_s"]), work(knobs)


def _pair_agreement(ds, noise):
    """The largest |z| of the two-token mean overlap and antipodal probability of ``noise``
    against its limit.  The antipodal probability's s.e. is at least the binomial one of the
    limit's value, and the limit's own error (for independent noise, the leak of the grid's
    ends) is added in quadrature."""
    sub, limit = ds.sel(noise=noise), ds[f"limit_antipodal_{noise}"].values
    error = float(ds.attrs[f"limit_error_{noise}"])
    zm = (sub.mean_overlap - ds[f"limit_mean_{noise}"]) / sub.mean_overlap_se
    se_a = np.maximum(sub.antipodal_se.values,
                      np.sqrt(np.maximum(limit, 1e-12) * (1 - limit) / float(sub.n_traj)))
    za = (sub.antipodal.values - limit) / np.hypot(se_a, error)
    out = dict(max_abs_z_mean=float(np.max(np.abs(zm.values))),
               max_abs_z_antipodal=float(np.max(np.abs(za))), limit_error=error)
    out["agree"] = bool(max(out["max_abs_z_mean"], out["max_abs_z_antipodal"]) <= AGREE_Z)
    return out


def summary(ds) -> dict:
    """``pairs``: for each noise :func:`_pair_agreement` (``agree``: both |z| within
    :data:`AGREE_Z`); ``contrast``: for each noise at the longest clock, the two-token mean
    overlap and antipodal share, and at N tokens the mean overlap, clusters and antipodal share."""
    out = {"pairs": {noise: _pair_agreement(ds, noise) for noise in NOISES}, "contrast": {}}
    for noise in NOISES:
        last = ds.sel(noise=noise).isel(tau=-1)
        out["contrast"][noise] = dict(
            pair_mean=float(last.mean_overlap), pair_antipodal=float(last.antipodal),
            pair_limit_mean=float(ds[f"limit_mean_{noise}"].values[-1]),
            many_mean=float(last.many_mean_overlap), many_mean_se=float(last.many_mean_overlap_se),
            many_clusters=float(last.many_clusters), many_clusters_se=float(last.many_clusters_se),
            many_antipodal=float(last.many_antipodal))
    out.update(tau_max=float(ds.tau.max()), d=int(ds.attrs["fixed_d"]),
               beta=float(ds.attrs["fixed_beta"]), many_tokens=int(ds.attrs["many_tokens"]),
               n_pairs=int(ds.attrs["n_pairs"]), n_many=int(ds.attrs["n_many"]),
               tol=float(ds.attrs["fixed_tol"]), agree_z=AGREE_Z,
               all_agree=all(v["agree"] for v in out["pairs"].values()))
    return out


def phrases(stats) -> dict:
    """The page's Markdown: ``verdict``, whether both two-token chains follow their limits
    and whether common noise leaves N tokens in fewer clusters than independent noise (by
    more than :data:`AGREE_Z` standard errors)."""
    c, i = (stats["contrast"][noise] for noise in NOISES)
    ok = stats["all_agree"]
    gathers = i["many_clusters"] - c["many_clusters"] > AGREE_Z * math.hypot(
        c["many_clusters_se"], i["many_clusters_se"])
    word = "Reproduced" if ok and gathers else "Partly reproduced" if ok or gathers else \
        "Not reproduced"
    return {"verdict": f"**{word}**: " + (
        "both two-token chains follow their limits at every clock" if ok else
        "not every two-token chain follows its limit") + (
        f"; with {stats['many_tokens']} tokens, common noise leaves {c['many_clusters']:.2f} "
        f"clusters on average at $\\tau$ = {stats['tau_max']:g} and independent noise "
        f"{i['many_clusters']:.2f}") + ("." if gathers else ", not fewer by a margin the runs "
                                              "resolve.")}


def plot(ds):
    """(a) two tokens with the limits; (b) many tokens: mean overlap and clusters."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    s = summary(ds)
    fig, (ax, axb) = plt.subplots(1, 2, figsize=(8.0, 4.4))
    tau, n = ds.tau.values, s["many_tokens"]
    for noise, c in zip(NOISES, ("#4c78a8", "#f58518")):
        sub = ds.sel(noise=noise)
        bars = dict(color=c, ms=4, capsize=2)
        ax.errorbar(tau, sub.mean_overlap, yerr=2 * sub.mean_overlap_se, fmt="o", **bars,
                    label=f"{noise}: mean overlap")
        ax.plot(tau, ds[f"limit_mean_{noise}"], color=c, lw=1)
        ax.errorbar(tau, sub.antipodal, yerr=2 * sub.antipodal_se, fmt="s", mfc="white", **bars,
                    label=f"{noise}: P(antipodal)")
        ax.plot(tau, ds[f"limit_antipodal_{noise}"], color=c, lw=1, ls="--")
        axb.errorbar(tau, sub.many_mean_overlap, yerr=2 * sub.many_mean_overlap_se, fmt="o-",
                     lw=1, **bars, label=f"{noise}: mean overlap")
        axb.errorbar(tau, sub.many_clusters / n, yerr=2 * sub.many_clusters_se / n, fmt="s--",
                     mfc="white", lw=1, **bars, label=f"{noise}: clusters / N")
    ax.set(ylabel="mean overlap;  P(antipodal)", title="(a) two tokens; lines: limits")
    axb.set(ylabel="mean pair overlap;  clusters / N", title=f"(b) {n} tokens")
    for a in (ax, axb):
        a.set(xscale="log", xlabel=r"noise clock $\tau$")
        a.set_xticks(tau)
        a.xaxis.set_major_formatter(ScalarFormatter())
        a.xaxis.set_minor_formatter(NullFormatter())
        a.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2))
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_noise", source="followup",
    description="random keys and queries: common noise (shared weights) against independent "
                "noise (each token its own), overlaps, clusters and antipodal pairs",
    schema={"d": integer(3, 64), "beta": real(0.0, 20.0), "many_tokens": integer(3, 64),
            "tol": real(0.0, 0.5, strict_min=True), "taus": reals(0.0, 64.0, strict_min=True),
            "L": integer(1, 1 << 14), "n_pairs": integer(2), "n_many": integer(2)})
compute, cost = FIGURE.compute, FIGURE.cost
