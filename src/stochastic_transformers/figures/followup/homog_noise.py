r"""Common against independent noise in the follow-up's model: what sharing the weights does.

One draw of the weights per layer and head moves every token (a *common* noise, correlated
through the kernel :math:`K[\mu](x, y)`); ``noise="independent"`` draws every token's own
(K = 0 off the diagonal), in the same model (centred Gaussian weights, one head,
:math:`\eta = L^{-1/2}`, time on the noise clock :math:`\tau`).  Two tokens are set against
each noise's limit; eight give the mean pair overlap, the clusters and the antipodal share.
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
from ..words import verdict

NOISES = ("common", "independent")
_BASE = dict(d=4, beta=1.0, many_tokens=8, tol=1e-3, taus=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
             seed=0)
SCALES = {
    "smoke": dict(_BASE, taus=(0.5, 2.0), L=16, n_pairs=200, n_many=50),
    "quick": dict(_BASE, L=64, n_pairs=2000, n_many=400),
    "paper": dict(_BASE, L=256, n_pairs=20_000, n_many=4000),
}
#: A point agrees with its limit within AGREE_Z s.e. (24 comparisons: a family-wise false
#: alarm rate of about 1%).  SECONDS_PER_WORK: measured on the committed paper run.
AGREE_Z, SECONDS_PER_WORK = 3.5, 3.24e-7


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
    """Both noises at two tokens and at ``many_tokens`` (part ``many``, its variables prefixed
    ``many_``), with the two-token limits of both noises."""
    series = [f"{k}{se}" for k in ("mean_overlap", "antipodal", "clusters") for se in ("", "_se")]
    common = {k: knobs[k] for k in ("d", "beta", "L", "tol")}
    parts = {part: sweeps({"noise": list(NOISES)},
                          fixed=dict(common, taus=tuple(knobs["taus"]), n_tokens=n_tokens,
                                     n_traj=knobs[n_traj]),
                          seed=knobs["seed"] + seed, part=part,
                          output_dims={k: ("tau",) for k in series},
                          output_coords={"tau": np.asarray(knobs["taus"], float)})
             for part, n_tokens, n_traj, seed in ((None, 2, "n_pairs", 0),
                                                  ("many", knobs["many_tokens"], "n_many", 1))}
    ds = parts[None].copy()
    for name in parts["many"].data_vars:
        ds[f"many_{name}"] = parts["many"][name]
    for noise, model in zip(NOISES, ("random_attention", "random_attention_independent")):
        mean, _, _, err = overlap_moments(ds.tau.values, knobs["beta"], knobs["d"], model=model)
        anti, err_a = antipodal_by(ds.tau.values, knobs["beta"], knobs["d"], model=model,
                                   tol=knobs["tol"])
        ds[f"limit_mean_{noise}"] = (("tau",), mean)
        ds[f"limit_antipodal_{noise}"] = (("tau",), anti)
        ds.attrs[f"limit_error_{noise}"] = float(max(np.max(err), np.max(err_a)))
    ds.attrs.update({k: knobs[k] for k in ("many_tokens", "n_many", "n_pairs")},
                    cell_time_s=sum(float(p.attrs.get("cell_time_s", 0.0)) for p in parts.values()))
    return ds


def work(knobs) -> float:
    """Trajectory-layers, an independent layer counted N times (every token draws its own)."""
    layers = knobs["L"] * max(knobs["taus"])
    return float(layers * (3 * knobs["n_pairs"] + knobs["n_many"] * (1 + knobs["many_tokens"])))


def summary(ds) -> dict:
    """Per noise, ``pairs``: the largest |z| of the two-token mean overlap and antipodal share
    against the limit and whether both are within AGREE_Z; ``contrast``: at the longest clock,
    two tokens (mean overlap, antipodal share) and N (mean overlap, clusters, antipodal)."""
    out = {"pairs": {}, "contrast": {}}
    for noise in NOISES:
        sub, limit = ds.sel(noise=noise), ds[f"limit_antipodal_{noise}"].values
        zm = (sub.mean_overlap - ds[f"limit_mean_{noise}"]) / sub.mean_overlap_se
        # the antipodal s.e. is at least the binomial one of the limit's value, and the limit's
        # own error (for independent noise, the leak of the grid's ends) adds in quadrature
        se_a = np.maximum(sub.antipodal_se.values,
                          np.sqrt(np.maximum(limit, 1e-12) * (1 - limit) / float(sub.n_traj)))
        za = (sub.antipodal.values - limit) / np.hypot(se_a, ds.attrs[f"limit_error_{noise}"])
        pair = out["pairs"][noise] = dict(max_abs_z_mean=float(np.max(np.abs(zm.values))),
                                          max_abs_z_antipodal=float(np.max(np.abs(za))))
        pair["agree"] = bool(max(pair.values()) <= AGREE_Z)
        last = sub.isel(tau=-1)
        out["contrast"][noise] = dict(
            pair_mean=float(last.mean_overlap), pair_antipodal=float(last.antipodal),
            pair_limit_mean=float(ds[f"limit_mean_{noise}"].values[-1]),
            many_mean=float(last.many_mean_overlap), many_clusters=float(last.many_clusters),
            many_clusters_se=float(last.many_clusters_se),
            many_antipodal=float(last.many_antipodal))
    out.update(tau_max=float(ds.tau.max()), d=int(ds.attrs["fixed_d"]),
               beta=float(ds.attrs["fixed_beta"]), many_tokens=int(ds.attrs["many_tokens"]),
               n_pairs=int(ds.attrs["n_pairs"]), n_many=int(ds.attrs["n_many"]),
               tol=float(ds.attrs["fixed_tol"]), agree_z=AGREE_Z)
    return out


def phrases(stats) -> dict:
    """The ``verdict``: do both two-token chains follow their limits, and does common noise
    leave N tokens in fewer clusters than independent noise (by AGREE_Z s.e.)?"""
    c, i = (stats["contrast"][noise] for noise in NOISES)
    gathers = i["many_clusters"] - c["many_clusters"] > AGREE_Z * math.hypot(
        c["many_clusters_se"], i["many_clusters_se"])
    clusters = (f"with {stats['many_tokens']} tokens, common noise leaves "
                f"{c['many_clusters']:.2f} clusters on average at $\\tau$ = "
                f"{stats['tau_max']:g} and independent noise {i['many_clusters']:.2f}")
    return {"verdict": verdict(
        [(all(v["agree"] for v in stats["pairs"].values()),
          "both two-token chains follow their limits at every clock",
          "not every two-token chain follows its limit"),
         (gathers, clusters, clusters + ", not fewer by a margin the runs resolve")],
        ("**Reproduced**", "**Partly reproduced**", "**Not reproduced**"))}


def plot(ds):
    """(a) two tokens with the limits; (b) many tokens: mean overlap and clusters."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    fig, (ax, axb) = plt.subplots(1, 2, figsize=(8.0, 4.4))
    tau, n = ds.tau.values, int(ds.attrs["many_tokens"])
    for noise, c in zip(NOISES, ("#4c78a8", "#f58518")):
        sub = ds.sel(noise=noise)
        for a, y, se, fmt, what, scale in (
                (ax, sub.mean_overlap, sub.mean_overlap_se, "o", "mean overlap", 1),
                (ax, sub.antipodal, sub.antipodal_se, "s", "P(antipodal)", 1),
                (axb, sub.many_mean_overlap, sub.many_mean_overlap_se, "o-", "mean overlap", 1),
                (axb, sub.many_clusters, sub.many_clusters_se, "s--", "clusters / N", n)):
            a.errorbar(tau, y / scale, yerr=2 * se / scale, fmt=fmt, color=c, ms=4, capsize=2,
                       mfc="white" if "s" in fmt else None, lw=1 if a is axb else None,
                       label=f"{noise}: {what}")
        ax.plot(tau, ds[f"limit_mean_{noise}"], color=c, lw=1)
        ax.plot(tau, ds[f"limit_antipodal_{noise}"], color=c, lw=1, ls="--")
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
