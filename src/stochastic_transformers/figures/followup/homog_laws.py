r"""Sub-Gaussian weights in the follow-up's model: which laws the limit forgets, and which it does not.

The follow-up's Theorem 1 assumes sub-Gaussian fluctuations only.  Its limit depends on the
weights through the mean field and the covariance of the increments.  For the values V that
covariance, :math:`\sigma^2 E_A\langle m_A(x_i), m_A(x_j)\rangle I`, involves only the variance of
V's entries: any law with the same variance has the same limit (as in the main paper's
universality).  For the key-query matrices it involves the whole law of the scores
:math:`\beta\langle W'^\top x_i, W^\top x_j\rangle`, which for Rademacher :math:`W, W'` is not
Gaussian at small d (a sum of d products of signs) and tends to it as d grows (central limit
theorem): the limit changes with the law of W, W', by an amount that should vanish with d.

Two tokens from uniform starts, centred weights, one head, :math:`\beta = b/\sqrt d`, run to
the clock :math:`t = d\tau` (on which the overlap moves at a rate free of d) in ``n_layers``
layers of step :math:`\eta = (\tau/\text{n\_layers})^{1/2}`: the overlap's mean and its law for
Gaussian weights, Rademacher V, Rademacher W and W', and all three Rademacher, each against the
Gaussian run (two-sample Kolmogorov-Smirnov test,
:func:`~stochastic_transformers.stats.ks_from_quantiles`) and the Gaussian limit
(:func:`stochastic_transformers.homogenized.overlap_moments`).
"""

from __future__ import annotations

import math

import numpy as np

from ... import simulate
from ...config import ModelConfig, RunConfig
from ...homogenized import overlap_moments
from ...stats import ks_from_quantiles
from ..base import cell_threads, laid_out
from ..knobs import integer, integers, real
from ..spec import Figure

#: law name -> (values, qk_law)
LAWS = {"gaussian": ("gaussian", "gaussian"), "rademacher_v": ("rademacher", "gaussian"),
        "rademacher_qk": ("gaussian", "rademacher"), "rademacher_all": ("rademacher", "rademacher")}
_BASE = dict(b=3.0, t=1.0, seed=0)
SCALES = {
    "smoke": dict(_BASE, dims=(3, 8), n_layers=16, n_traj=400),
    "quick": dict(_BASE, dims=(3, 6, 12, 24), n_layers=128, n_traj=4000),
    "paper": dict(_BASE, dims=(3, 6, 12, 24), n_layers=512, n_traj=40_000),
}
#: Level of the law tests (four dimensions times three laws: 12 tests, a family-wise false
#: alarm rate below 1.2e-3 when every law has the Gaussian's limit).
KS_ALPHA = 1e-4
#: A mean overlap agrees with the Gaussian limit when within this many standard errors.
AGREE_Z = 3.0
#: A difference of this many standard errors is seen four times in five by a test at 3
#: standard errors (3 + 0.84, the normal's 80% quantile): the smallest detectable size.
DETECTABLE_SE = 3.84
#: Levels of the quantiles a cell keeps of the overlap's law (the KS test needs the samples).
LEVELS = np.linspace(0.0, 1.0, 2001)
#: Seconds per trajectory-layer (two tokens, the four laws and dimensions together), measured
#: on the committed paper run (383 s of cell time; the literal map of the Rademacher laws
#: dominates at d = 24).
SECONDS_PER_WORK = 1.17e-6


def cell(*, law, d, b, t, n_layers, n_traj, seed):
    """One (law, d): the overlap at the clock t = d tau (and its mean)."""
    values, qk_law = LAWS[law]
    eta = math.sqrt(t / d / n_layers)               # n_layers * eta^2 = tau = t / d
    ds = simulate(ModelConfig(d=d, beta=b / math.sqrt(d), kind="random_attention",
                              values=values, qk_law=qk_law, eta=eta),
                  RunConfig(n_tokens=2, n_traj=n_traj, L=n_layers, T=1.0, seed=seed,
                            n_threads=cell_threads()))
    r = ds.gram.values[:, 0, 1]
    return {"mean": float(r.mean()), "mean_se": float(r.std(ddof=1) / math.sqrt(n_traj)),
            "quantiles": np.quantile(r, LEVELS), "n_traj": n_traj}


def run(knobs, sweeps):
    """The (law, d) sweep, then each law against the Gaussian runs and the Gaussian limit."""
    ds = sweeps({"law": list(LAWS), "d": list(knobs["dims"])},
                fixed={k: knobs[k] for k in ("b", "t", "n_layers", "n_traj")},
                seed=knobs["seed"], output_dims={"quantiles": ("level",)},
                output_coords={"level": LEVELS})
    b, t = float(ds.attrs["fixed_b"]), float(ds.attrs["fixed_t"])
    dims = ds.d.values
    ds["limit_mean"] = (("d",), np.array([
        overlap_moments([t / int(d)], b / math.sqrt(int(d)), int(d))[0][0] for d in dims]))
    ds["z_limit"] = (ds["mean"] - ds.limit_mean) / ds.mean_se
    gauss = ds.sel(law="gaussian")
    ds["diff_gaussian"] = ds["mean"] - gauss["mean"]
    ds["diff_gaussian_se"] = np.sqrt(ds.mean_se ** 2 + gauss.mean_se ** 2)
    ks = np.array([[(0.0, 1.0) if law == "gaussian" else ks_from_quantiles(
        ds.quantiles.sel(law=law, d=d).values, gauss.quantiles.sel(d=d).values,
        int(ds.n_traj.max())) for d in dims] for law in ds.law.values])  # (law, d, stat/p)
    ds["ks_stat"] = (("law", "d"), ks[..., 0])
    ds["ks_p"] = (("law", "d"), ks[..., 1])
    ds.attrs.update(ks_alpha=KS_ALPHA)
    return ds


def work(knobs) -> float:
    """Trajectory-layers scheduled: n_traj * n_layers for each (law, d)."""
    return float(len(LAWS) * len(knobs["dims"]) * knobs["n_traj"] * knobs["n_layers"])


def measured_work(ds):
    """(seconds of simulation, trajectory-layers) of a computed dataset."""
    knobs = {"dims": list(ds.d.values), "n_traj": int(ds.n_traj.max()),
             "n_layers": int(ds.attrs["fixed_n_layers"])}
    return float(ds.attrs["cell_time_s"]), work(knobs)


def summary(ds) -> dict:
    """Per law: the largest |z| of the mean against the Gaussian limit, the KS p-values against
    the Gaussian runs per d, whether the law is told apart (some p below KS_ALPHA), and the
    difference of means from the Gaussian run per d with its s.e. (its trend in d)."""
    out = {"laws": {}, "dims": [int(d) for d in ds.d.values], "n_traj": int(ds.n_traj.max()),
           "b": float(ds.attrs["fixed_b"]), "t": float(ds.attrs["fixed_t"]),
           "n_layers": int(ds.attrs["fixed_n_layers"]),
           "ks_alpha": KS_ALPHA, "agree_z": AGREE_Z}
    for law in ds.law.values:
        sub = ds.sel(law=law)
        diff, diff_se = sub.diff_gaussian.values, sub.diff_gaussian_se.values
        apart = [] if law == "gaussian" else [int(d) for d, p in zip(ds.d.values, sub.ks_p.values)
                                              if p < KS_ALPHA]
        out["laws"][str(law)] = dict(
            max_abs_z_limit=float(np.max(np.abs(sub.z_limit.values))),
            on_limit=bool(np.max(np.abs(sub.z_limit.values)) <= AGREE_Z),
            ks_p=[float(v) for v in sub.ks_p.values], told_apart=bool(apart),
            told_apart_dims=apart, diff=[float(v) for v in diff],
            diff_se=[float(v) for v in diff_se],
            abs_z_diff=[float(abs(v)) for v in (diff / diff_se)])
    return out


def phrases(stats) -> dict:
    """The page's words and derived numbers: ``apart_text`` (which laws the KS tests tell
    apart from the Gaussian weights, at which d), ``max_z_diff`` (the largest difference of
    means in standard errors), ``min_detectable``/``max_detectable`` (the differences of
    :data:`DETECTABLE_SE` standard errors), ``detectable_se`` and ``dims_text``."""
    others = {law: v for law, v in stats["laws"].items() if law != "gaussian"}
    apart = "; ".join(f"{law.replace('_', ' ')} is told apart at d = "
                      + ", ".join(str(d) for d in v["told_apart_dims"])
                      for law, v in stats["laws"].items() if v["told_apart"])
    return {"apart_text": apart or "no Rademacher law is told apart from the Gaussian weights "
                                   "at any d",
            "max_z_diff": max(max(v["abs_z_diff"]) for v in stats["laws"].values()),
            "min_detectable": DETECTABLE_SE * min(min(v["diff_se"]) for v in others.values()),
            "max_detectable": DETECTABLE_SE * max(max(v["diff_se"]) for v in others.values()),
            "detectable_se": DETECTABLE_SE,
            "dims_text": ", ".join(str(d) for d in stats["dims"])}


def plot(ds):
    """(a) mean overlap against d for every law, with the Gaussian limit; (b) its difference
    from the Gaussian run."""
    import matplotlib.pyplot as plt

    s = summary(ds)
    fig, (ax, axb) = plt.subplots(1, 2, figsize=(11, 4.2))
    dims = ds.d.values
    marks = {"gaussian": "o", "rademacher_v": "s", "rademacher_qk": "^", "rademacher_all": "D"}
    colours = dict(zip(marks, ("#4c78a8", "#f58518", "#54a24b", "#e45756")))
    for law in ds.law.values:
        sub, law = ds.sel(law=law), str(law)
        style = dict(ms=5, capsize=2, color=colours[law], label=law.replace("_", " "))
        ax.errorbar(dims, sub["mean"], yerr=2 * sub.mean_se, fmt=marks[law], **style)
        if law != "gaussian":
            axb.errorbar(dims, sub.diff_gaussian, yerr=2 * sub.diff_gaussian_se,
                         fmt=marks[law] + "-", lw=0.8, **style)
    ax.plot(dims, ds.limit_mean, "k--", lw=1, label="Gaussian limit")
    ax.set(ylabel=r"$E R$ at $t = d\tau$",
           title=fr"two tokens, $\beta = {s['b']:g}/\sqrt{{d}}$, $t$ = {s['t']:g} "
                 f"({s['n_traj']:,} pairs, {s['n_layers']} layers)")
    axb.axhline(0.0, color="0.5", lw=0.8)
    axb.set(ylabel="E R minus the Gaussian run's",
            title="difference from Gaussian weights (bars 2 s.e.)")
    for a in (ax, axb):
        a.set(xscale="log", xlabel="d")
        a.set_xticks(dims)
        a.set_xticklabels([str(int(d)) for d in dims])
        a.minorticks_off()
        a.legend()
    return laid_out(fig)


FIGURE = Figure(
    "homog_laws", source="followup",
    description="random keys and queries with Rademacher weights: the limit forgets the law of "
                "V but not that of W, W' (until d is large)",
    scales=SCALES,
    schema={"b": real(0.0, 10.0), "t": real(0.0, 16.0, strict_min=True),
            "dims": integers(3, 64), "n_layers": integer(1, 1 << 14), "n_traj": integer(2)},
    cell=cell, run=run,
    work=work, seconds_per_work=SECONDS_PER_WORK, measured_work=measured_work,
    summary=summary, plot=plot)
compute, cost = FIGURE.compute, FIGURE.cost
