r"""N, d and beta together: when the follow-up's scalings slow the collapse, and when they do not.

The follow-up's table of data regimes ties the temperature to the dimension and the number of
tokens: the hemisphere (high-temperature) regime :math:`\beta = O(d^{-1/2})`, where the mean
overlap follows the logistic law :math:`\dot u = u(1-u)` on the clock :math:`t = d\tau` whatever
the number of tokens (its Theorem 3), and the simplex regime :math:`\beta^2 n/d = O(1)`,
:math:`\log n/d = o(1)`, where attention concentrates and the scalar dynamics slows (its
Theorem 2).  This figure runs N tokens from the simplex Gram matrix
(:math:`\gamma_0` = 0.1) in dimension d, one head, on the two scalings

* ``hemisphere``: :math:`\beta = b/\sqrt d`,
* ``simplex``: :math:`\beta = \sqrt{\kappa d/N}`,

for N from 4 to 64, and measures the clock :math:`t_{1/2}` at which the mean off-diagonal
overlap :math:`\gamma` reaches 1/2 (the collapse half-way), against the scalar dynamics of
:func:`stochastic_transformers.homogenized.simplex_path` (ours) and the logistic law
(:func:`stochastic_transformers.homogenized.logistic_half_time`).  The keys and queries have
:math:`\sigma_{qk} = 1`, so the scores spread by about :math:`\beta\sqrt d`: about b on the
hemisphere scaling, and :math:`d\sqrt{\kappa/N}` (64 down to 16 at d = 128) on the simplex
scaling.  A clustering *mitigated* by the scaling shows as a :math:`t_{1/2}` that grows with
N beyond the logistic law's.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ... import simulate
from ...config import ModelConfig, RunConfig
from ...homogenized import logistic_half_time, simplex_path, simplex_tokens
from ...stats import log_log_slope
from ..base import cell_threads, laid_out
from ..knobs import all_of, integer, integers, real
from ..spec import Figure
from .clock import on_schedule, schedule

SCALINGS = ("hemisphere", "simplex")
_BASE = dict(b=1.0, kappa=1.0, gamma0=0.1, t_max=16.0, n_times=33, seed=0)
SCALES = {
    "smoke": dict(_BASE, dims=(32,), Ns=(4, 8), t_max=8.0, n_layers=80, n_times=5, n_traj=20,
                  theory_samples=300),
    "quick": dict(_BASE, dims=(64,), Ns=(4, 8, 16, 32), n_layers=640, n_traj=100,
                  theory_samples=1500),
    "paper": dict(_BASE, dims=(128, 256), Ns=(4, 8, 16, 32, 64), n_layers=640, n_traj=400,
                  theory_samples=3000),
}
#: The collapse is *mitigated* by a scaling when t_1/2 grows with N faster than the logistic
#: law's (:func:`~stochastic_transformers.homogenized.logistic_half_time`, which itself rises
#: with N through the diagonal's share 1/N of the mean overlap): the slope of
#: log(t_1/2 / logistic t_1/2) against log N above 0 by GROWTH_Z standard errors (inflated by
#: the fit's chi^2 per degree of freedom when above 1).  A ratio that stays flat, at whatever
#: level (finite-temperature offsets), is not a slowing.
GROWTH_Z = 3.0
#: Seconds per token-dimension-trajectory-layer, measured on the committed paper run (1,905 s
#: of cell time over both dimensions).
SECONDS_PER_WORK = 7.82e-8


def beta_for(scaling, n_tokens, d, b, kappa):
    """The cell's beta: b / sqrt(d) (hemisphere) or sqrt(kappa d / N) (simplex)."""
    return b / math.sqrt(d) if scaling == "hemisphere" else math.sqrt(kappa * d / n_tokens)


def _below_dims(name, value, knobs):
    """The check of ``Ns``: every N below every d of ``dims`` (the simplex needs N + 1
    directions)."""
    bad = [n for n in value if n >= min(knobs["dims"])]
    if bad:
        raise ValueError(f"{name} must be below every d of dims (the simplex needs N + 1 "
                         f"directions; smallest d = {min(knobs['dims'])}); got {bad}")
    return value


def cell(*, scaling, n_tokens, d, b, kappa, gamma0, t_max, n_layers, n_times, n_traj, seed):
    """One (scaling, N): the mean off-diagonal overlap gamma(t) on t = d tau."""
    beta = beta_for(scaling, n_tokens, d, b, kappa)
    T, L, times = schedule(d, t_max, n_layers, n_times)
    ds = simulate(ModelConfig(d=d, beta=beta, kind="random_attention"),
                  RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=T, times=tuple(times),
                            x0=simplex_tokens(n_tokens, d, gamma0), seed=seed,
                            n_threads=cell_threads()))
    off = ~np.eye(n_tokens, dtype=bool)
    gam = ds.gram_t.values[:, :, off].mean(axis=2)       # (trajectory, time)
    return {"gamma_mean": gam.mean(axis=0),
            "gamma_se": gam.std(axis=0, ddof=1) / math.sqrt(n_traj), "beta": beta,
            "n_traj": n_traj}


def run(knobs, sweeps):
    """The (scaling, N, d) sweep with the scalar dynamics of every cell (``gamma_theory``),
    the half-way clock measured (``t_half``, ``t_half_se``), of the scalar dynamics
    (``t_half_theory``) and of the logistic law (``t_half_logistic``, by N)."""
    t = np.linspace(0.0, knobs["t_max"], knobs["n_times"])
    fixed = {k: knobs[k] for k in ("b", "kappa", "gamma0", "t_max", "n_layers", "n_times",
                                   "n_traj")}
    grid = {"scaling": list(SCALINGS), "n_tokens": list(knobs["Ns"]), "d": list(knobs["dims"])}
    ds = sweeps(grid, fixed=fixed, seed=knobs["seed"], output_coords={"t": t},
                output_dims={"gamma_mean": ("t",), "gamma_se": ("t",)})
    g0, samples = knobs["gamma0"], knobs["theory_samples"]
    ds = ds.transpose("scaling", "n_tokens", "d", "t")
    dims = ("scaling", "n_tokens", "d")
    shape = tuple(ds.sizes[k] for k in dims)
    cells = [_half_times(t, g0, ds.sel(scaling=sc, n_tokens=n, d=d), samples)
             for sc, n, d in itertools.product(*(ds[k].values for k in dims))]
    path, half, half_se, half_theory = (np.array(v, dtype=float) for v in zip(*cells))
    ds["gamma_theory"] = (dims + ("t",), path.reshape(shape + (t.size,)))
    ds["t_half"] = (dims, half.reshape(shape))
    ds["t_half_se"] = (dims, half_se.reshape(shape))
    ds["t_half_theory"] = (dims, half_theory.reshape(shape))
    ds["t_half_logistic"] = (("n_tokens",), np.array([logistic_half_time(int(n), g0)
                                                     for n in ds.n_tokens.values]))
    ds.attrs.update(theory_samples=samples, t_half_logistic=math.log((1.0 - g0) / g0))
    return ds


def _half_times(t, gamma0, sub, samples):
    """One cell's scalar dynamics on ``t`` and its half-way clocks: ``(path, t_1/2 measured,
    its standard error, t_1/2 of the path)``; the standard error is the larger one of gamma
    at the two record times around the crossing over the slope between them."""
    path, _ = simplex_path(t, gamma0, int(sub.n_tokens), float(sub.beta), int(sub.d),
                           n_samples=samples)
    g, se = sub.gamma_mean.values, sub.gamma_se.values
    half, half_se = half_time(t, g), float("nan")
    if np.isfinite(half):
        m = np.searchsorted(t, half)
        half_se = float(max(se[m - 1], se[m]) / ((g[m] - g[m - 1]) / (t[m] - t[m - 1])))
    return path, half, half_se, half_time(t, path)


def half_time(t, gamma, level=0.5):
    """First t at which the (increasing) curve gamma reaches ``level``, by linear
    interpolation; nan if it never does."""
    above = np.flatnonzero(gamma >= level)
    if above.size == 0 or above[0] == 0:
        return float("nan")
    k = above[0]
    return float(t[k - 1] + (level - gamma[k - 1]) * (t[k] - t[k - 1]) / (gamma[k] - gamma[k - 1]))


def work(knobs) -> float:
    """Token-dimension-trajectory-layers: n_traj * n_layers * sum(Ns) * sum(dims) per scaling."""
    return float(len(SCALINGS) * knobs["n_traj"] * knobs["n_layers"] * sum(knobs["Ns"])
                 * sum(knobs["dims"]))


def measured_work(ds):
    """(seconds of simulation, work) of a computed dataset."""
    knobs = {"n_traj": int(ds.n_traj.max()), "n_layers": int(ds.attrs["fixed_n_layers"]),
             "Ns": [int(n) for n in ds.n_tokens.values], "dims": [int(d) for d in ds.d.values]}
    return float(ds.attrs["cell_time_s"]), work(knobs)


def _growth(ns, half, se):
    """Weighted slope of log t_1/2 against log N, its s.e. inflated by sqrt(chi^2 / dof) when
    the points scatter more than their errors (t_1/2 need not be a power of N: the slope is an
    average exponent), and that chi^2 / dof (:func:`.stats.log_log_slope`, finite points)."""
    keep = np.isfinite(half) & np.isfinite(se) & (se > 0)
    if keep.sum() < 2:
        return float("nan"), float("nan"), float("nan")
    return log_log_slope(ns[keep], half[keep], se[keep], inflate=True)


def _scaling_summary(sub, ns, logistic):
    """The numbers of one scaling at one d (``sub``: its t_half, ... over n_tokens;
    ``logistic``: the logistic t_1/2 for each N)."""
    s, se, chi2 = _growth(ns, sub.t_half.values, sub.t_half_se.values)
    half = sub.t_half.values
    rs, rse, rchi2 = _growth(ns, half / logistic, sub.t_half_se.values / logistic)
    gap = np.abs(sub.gamma_mean - sub.gamma_theory).max("t").values
    local = np.diff(np.log(half)) / np.diff(np.log(ns))
    z_theory = (sub.t_half.values - sub.t_half_theory.values) / sub.t_half_se.values
    return dict(
        t_half=[float(v) for v in sub.t_half.values],
        t_half_se=[float(v) for v in sub.t_half_se.values],
        t_half_theory=[float(v) for v in sub.t_half_theory.values],
        beta=[float(v) for v in sub.beta.values], growth=s, growth_se=se, growth_chi2=chi2,
        local_exponents=[float(v) for v in local],
        over_logistic=[float(v) for v in half / logistic],
        relative_growth=rs, relative_growth_se=rse, relative_growth_chi2=rchi2,
        mitigated=bool(np.isfinite(rs) and rs > GROWTH_Z * rse),
        z_theory=[float(v) for v in z_theory],
        max_rel_gap=float(np.nanmax(np.abs(sub.t_half.values / sub.t_half_theory.values - 1))),
        runs_slower=bool(np.all(sub.t_half.values > sub.t_half_theory.values)),
        max_abs_z_theory=float(np.nanmax(np.abs(z_theory))),
        n_unreached=int(np.sum(~np.isfinite(sub.t_half.values))),
        max_gap=float(gap.max()), max_gap_at_n=int(ns[int(np.argmax(gap))]))


def summary(ds) -> dict:
    """Per scaling, at the largest d (``scalings``) and at every d (``by_d``): t_1/2 for every
    N (measured, s.e., scalar dynamics), the growth exponent of t_1/2 in N and whether the
    collapse is mitigated (:data:`GROWTH_Z`), the gaps to the scalar dynamics.
    ``mitigated_at_every_d``: per scaling, the verdict holds at every d."""
    ns = ds.n_tokens.values.astype(float)
    logistic = ds.t_half_logistic.values
    dims = [int(d) for d in ds.d.values]
    out = {"scalings": {}, "by_d": {}, "d": dims[-1], "dims": dims, "d_min": dims[0],
           "Ns": [int(n) for n in ns], "n_traj": int(ds.n_traj.max()), "t_max": float(ds.t.max()),
           "t_half_logistic": [float(v) for v in logistic],
           "t_half_logistic_limit": float(ds.attrs["t_half_logistic"]), "growth_z": GROWTH_Z,
           "b": float(ds.attrs["fixed_b"]), "kappa": float(ds.attrs["fixed_kappa"]),
           "gamma0": float(ds.attrs["fixed_gamma0"]), "mitigated_at_every_d": {}}
    for sc in ds.scaling.values:
        per_d = {d: _scaling_summary(ds.sel(scaling=sc, d=d), ns, logistic) for d in dims}
        out["by_d"][str(sc)] = per_d
        out["scalings"][str(sc)] = per_d[dims[-1]]
        out["mitigated_at_every_d"][str(sc)] = all(v["mitigated"] for v in per_d.values())
    return out


def words(stats) -> dict:
    """The page's plain words and numbers: per scaling at the largest d, t_1/2 at the first
    and last N, its ratio to the logistic law's and the verdict; lists and verdicts' wording."""
    every_d = (stats["mitigated_at_every_d"]["simplex"]
               and not any(v["mitigated"] for v in stats["by_d"]["hemisphere"].values()))
    out = {"dims_text": " and ".join(str(d) for d in stats["dims"]),
           "N_min": stats["Ns"][0], "N_max": stats["Ns"][-1],
           "local_text": ", ".join(f"{v:.2f}" for v in
                                   stats["scalings"]["simplex"]["local_exponents"]),
           "every_d_text": ("the same two verdicts hold at every d of the run" if every_d else
                            "the verdicts are not the same at every d of the run"),
           "slower_text": ("the runs are the slower at every N on both scalings"
                           if all(sc["runs_slower"] for sc in stats["scalings"].values()) else
                           "the runs are not always on the same side of it")}
    for name, sc in stats["scalings"].items():
        ratio = sc["over_logistic"]
        out.update({f"{name}_first": sc["t_half"][0], f"{name}_last": sc["t_half"][-1],
                    f"{name}_ratio_first": ratio[0], f"{name}_ratio_last": ratio[-1],
                    f"{name}_ratio_min": min(ratio), f"{name}_ratio_max": max(ratio),
                    f"{name}_verdict": ("slows the collapse as N grows" if sc["mitigated"] else
                                        "does not slow the collapse beyond the logistic "
                                        "law's")})
    return out


def table(stats):
    """t_1/2 measured and of the scalar dynamics for every scaling, d and N (a DataFrame)."""
    import pandas as pd

    return pd.DataFrame([
        {"scaling": name, "d": d, "N": n, "β": f"{b:.3g}", "t½ measured": f"{t:.2f} ± {se:.2f}",
         "t½ scalar dynamics": f"{th:.2f}"}
        for name, per_d in stats["by_d"].items() for d, sc in per_d.items()
        for n, b, t, se, th in zip(stats["Ns"], sc["beta"], sc["t_half"], sc["t_half_se"],
                                   sc["t_half_theory"])])


def plot(ds):
    """(a) gamma(t) for every N on both scalings with the scalar dynamics; (b) t_1/2 against N."""
    import matplotlib.pyplot as plt

    from ...style import palette

    s = summary(ds)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), gridspec_kw={"width_ratios": [1, 1, 1]})
    colours = palette(ds.sizes["n_tokens"])
    big = ds.isel(d=-1)
    for ax, sc in zip(axes[:2], ds.scaling.values):
        for colour, n in zip(colours, ds.n_tokens.values):
            sub = big.sel(scaling=sc, n_tokens=n)
            ax.errorbar(ds.t, sub.gamma_mean, yerr=2 * sub.gamma_se, fmt="o", ms=2.5,
                        color=colour, lw=0.7, capsize=1, label=f"N = {int(n)}")
            ax.plot(ds.t, sub.gamma_theory, color=colour, lw=1)
        ax.axhline(0.5, color="0.6", lw=0.7, ls=":")
        name = (r"hemisphere: $\beta = b/\sqrt{d}$, b = " + f"{s['b']:g}" if sc == "hemisphere"
                else r"simplex: $\beta = \sqrt{\kappa d/N}$, $\kappa$ = " + f"{s['kappa']:g}")
        ax.set(xlabel=r"$t = d\tau$", ylabel=r"$\gamma(t)$", ylim=(0, 1),
               title=f"{name} (d = {s['d']})")
        ax.legend(loc="lower right")
    ax = axes[2]
    ns = ds.n_tokens.values
    for sc, mk, colour in zip(ds.scaling.values, ("o", "s"), ("#4c78a8", "#f58518")):
        for k, d in enumerate(ds.d.values):
            sub = ds.sel(scaling=sc, d=d)
            last = k == ds.sizes["d"] - 1
            ax.errorbar(ns, sub.t_half, yerr=2 * sub.t_half_se, fmt=mk, capsize=2, ms=5,
                        color=colour, mfc=colour if last else "white",
                        label=f"{sc}, d = {int(d)}: measured")
            ax.plot(ns, sub.t_half_theory, ls="--" if last else ":", lw=1, color=colour,
                    label=f"{sc}, d = {int(d)}: scalar dynamics")
    ax.plot(ns, s["t_half_logistic"], color="0.4", lw=0.8, ls=":", label="logistic law")
    ax.set(xscale="log", yscale="log", xlabel="tokens N", ylabel=r"$t_{1/2}$",
           title=f"collapse half-way ({s['n_traj']:,} runs a point; bars 2 s.e.)")
    from matplotlib.ticker import NullFormatter

    ax.set_xticks(ns, [str(int(n)) for n in ns])
    ax.set_yticks([1, 2, 4, 8, 16], ["1", "2", "4", "8", "16"])
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_formatter(NullFormatter())
    ax.legend()
    return laid_out(fig)


FIGURE = Figure(
    "homog_scaling", source="followup",
    description="random keys and queries: the collapse time as N grows with beta on the "
                "follow-up's scalings (hemisphere beta ~ d^-1/2, simplex beta^2 N / d fixed)",
    scales=SCALES,
    # dims last but Ns: each d must give a schedule (t_max, n_layers, n_times) and exceed
    # every N
    schema={"b": real(0.0, 20.0), "kappa": real(0.0, 100.0, strict_min=True),
            "gamma0": real(0.0, 0.45), "t_max": real(0.0, 200.0, strict_min=True),
            "n_times": integer(3, 201), "n_layers": integer(1), "n_traj": integer(2),
            "theory_samples": integer(100), "dims": all_of(integers(3, 1024), on_schedule),
            "Ns": all_of(integers(2, 256), _below_dims)},
    cell=cell, run=run,
    work=work, seconds_per_work=SECONDS_PER_WORK, measured_work=measured_work,
    summary=summary, plot=plot)
compute, cost = FIGURE.compute, FIGURE.cost
