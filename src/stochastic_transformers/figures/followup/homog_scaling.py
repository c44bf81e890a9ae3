r"""N, d and beta together: when the follow-up's scalings slow the collapse, and when they do not.

On the hemisphere scaling :math:`\beta = b/\sqrt d` the mean overlap follows the logistic law
on the clock :math:`t = d\tau` whatever N (the follow-up's Theorem 3); on the simplex scaling
:math:`\beta = \sqrt{\kappa d/N}` attention concentrates and the scalar dynamics slows (its
Theorem 2).  N tokens start from the simplex Gram matrix; the clock :math:`t_{1/2}` at which
the mean off-diagonal overlap reaches 1/2 is set against the scalar dynamics (``simplex_path``,
ours) and the logistic law.  A collapse is *mitigated* when :math:`t_{1/2}` grows with N
faster than the logistic law's.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ... import simulate
from ...config import ModelConfig, RunConfig
from ...random_attention.homogenized import logistic_half_time, simplex_path, simplex_tokens
from ...stats import log_log_slope
from ...style import palette
from ..base import cell_threads, laid_out
from ..knobs import all_of, integer, integers, real
from ..spec import Figure
from ..words import markdown_table
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
#: A scaling *mitigates* the collapse when the slope of log(t_1/2 / logistic t_1/2) in log N
#: is above 0 by GROWTH_Z s.e.: a flat ratio, at whatever level (an offset of finite
#: temperature), is not a slowing.
GROWTH_Z = 3.0
#: Seconds per token-dimension-trajectory-layer, measured on the committed paper run.
SECONDS_PER_WORK = 7.82e-8


def beta_for(scaling, n_tokens, d, b, kappa):
    """The cell's beta: b / sqrt(d) (hemisphere) or sqrt(kappa d / N) (simplex)."""
    return b / math.sqrt(d) if scaling == "hemisphere" else math.sqrt(kappa * d / n_tokens)


def _below_dims(name, value, knobs):
    """The check of ``Ns``: every N below every d (the simplex needs N + 1 directions)."""
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
    """The (scaling, N, d) sweep with the scalar dynamics of every cell (``gamma_theory``) and
    the half-way clocks: measured, of the scalar dynamics and of the logistic law."""
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
    for name, v in (("t_half", half), ("t_half_se", half_se), ("t_half_theory", half_theory)):
        ds[name] = (dims, v.reshape(shape))
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


def _scaling_summary(sub, ns, logistic):
    """One scaling at one d: t_1/2 and its ratio to the logistic law's, the slope of its log in
    log N over the finite points (s.e. inflated by the misfit), the verdict and the gaps."""
    half, se = sub.t_half.values, sub.t_half_se.values
    keep = np.isfinite(half) & np.isfinite(se) & (se > 0)
    rs, rse = float("nan"), float("nan")
    if keep.sum() >= 2:
        rs, rse, _ = log_log_slope(ns[keep], (half / logistic)[keep], (se / logistic)[keep],
                                   inflate=True)
    theory = sub.t_half_theory.values
    return dict(t_half=[float(v) for v in half], t_half_se=[float(v) for v in se],
                t_half_theory=[float(v) for v in theory],
                over_logistic=[float(v) for v in half / logistic],
                relative_growth=rs, relative_growth_se=rse,
                mitigated=bool(np.isfinite(rs) and rs > GROWTH_Z * rse),
                max_rel_gap=float(np.nanmax(np.abs(half / theory - 1))),
                max_abs_z_theory=float(np.nanmax(np.abs((half - theory) / se))))


def summary(ds) -> dict:
    """Per scaling, :func:`_scaling_summary` at every d (``by_d``) and at the largest
    (``scalings``), and whether the collapse is mitigated at every d."""
    ns, logistic = ds.n_tokens.values.astype(float), ds.t_half_logistic.values
    dims = [int(d) for d in ds.d.values]
    out = {"scalings": {}, "by_d": {}, "d": dims[-1], "dims": dims,
           "Ns": [int(n) for n in ns], "n_traj": int(ds.n_traj.max()),
           "t_half_logistic": [float(v) for v in logistic], "growth_z": GROWTH_Z,
           "b": float(ds.attrs["fixed_b"]), "kappa": float(ds.attrs["fixed_kappa"]),
           "gamma0": float(ds.attrs["fixed_gamma0"]), "mitigated_at_every_d": {}}
    for sc in map(str, ds.scaling.values):
        per_d = {d: _scaling_summary(ds.sel(scaling=sc, d=d), ns, logistic) for d in dims}
        out["by_d"][sc], out["scalings"][sc] = per_d, per_d[dims[-1]]
        out["mitigated_at_every_d"][sc] = all(v["mitigated"] for v in per_d.values())
    return out


def words(stats) -> dict:
    """The numbers the page and the chapter quote: the dimensions, the range of N and, per
    scaling at the largest d, t_1/2 at the first and last N and its ratio to the logistic
    law's (first, last, smallest, largest)."""
    out = {"dims_text": " and ".join(map(str, stats["dims"])),
           "N_min": stats["Ns"][0], "N_max": stats["Ns"][-1]}
    for name, sc in stats["scalings"].items():
        ratio = sc["over_logistic"]
        out.update({f"{name}_first": sc["t_half"][0], f"{name}_last": sc["t_half"][-1],
                    f"{name}_ratio_first": ratio[0], f"{name}_ratio_last": ratio[-1],
                    f"{name}_ratio_min": min(ratio), f"{name}_ratio_max": max(ratio)})
    return out


def phrases(stats) -> dict:
    """The page's Markdown: the ``verdict`` (does the simplex scaling slow the collapse with N
    at every d, and the hemisphere scaling at none?) and the ``table`` of t_1/2 (measured ± s.e.,
    scalar dynamics) for every N, scaling and d beside the logistic law's."""
    simplex = stats["mitigated_at_every_d"]["simplex"]
    hemi = not any(v["mitigated"] for v in stats["by_d"]["hemisphere"].values())
    word = ("Reproduced" if simplex and hemi else
            "Partly reproduced" if simplex or hemi else "Not reproduced")
    cols = [(name, d, sc) for name, per_d in stats["by_d"].items() for d, sc in per_d.items()]
    rows = [[n, f"{stats['t_half_logistic'][k]:.2f}"] + [
        f"{sc['t_half'][k]:.2f} ± {sc['t_half_se'][k]:.2f} ({sc['t_half_theory'][k]:.2f})"
        if math.isfinite(sc["t_half"][k]) else None for _, _, sc in cols]
            for k, n in enumerate(stats["Ns"])]
    return {"verdict": f"**{word}**: at $d$ = {' and '.join(map(str, stats['dims']))}, with "
                       "$\\sigma_{qk} = 1$ (so that the simplex scaling's scores spread widely), "
                       f"the simplex scaling {'slows' if simplex else 'does not always slow'} the "
                       "collapse as $N$ grows, and the hemisphere scaling "
                       f"{'does not' if hemi else 'does too at some $d$'}.",
            "table": markdown_table(["$N$", "logistic"] + [f"{name}, $d$ = {d}"
                                                           for name, d, _ in cols], rows,
                                    caption="$t_{1/2}$ measured ± s.e. (scalar dynamics):")}


def plot(ds):
    """(a, b) gamma(t) for every N on both scalings at the largest d, with the scalar dynamics;
    (c) t_1/2 against N: measured (filled at the largest d, open below) and of the scalar
    dynamics (dashed at the largest d, dotted below), with the logistic law's."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    fig, axes = plt.subplot_mosaic([["hemisphere", "simplex"], ["half", "half"]],
                                   figsize=(7.6, 7.6))
    big, ns, ax = ds.isel(d=-1), ds.n_tokens.values, axes["half"]
    dims = [int(d) for d in ds.d.values]
    for panel, sc, mk, colour in zip("ab", ds.scaling.values, "os", ("#4c78a8", "#f58518")):
        for c, n in zip(palette(ds.sizes["n_tokens"]), ns):
            sub = big.sel(scaling=sc, n_tokens=n)
            axes[sc].errorbar(ds.t, sub.gamma_mean, yerr=2 * sub.gamma_se, fmt="o", ms=2.5,
                              color=c, lw=0.7, capsize=1, label=f"N = {int(n)}")
            axes[sc].plot(ds.t, sub.gamma_theory, color=c, lw=1)
        axes[sc].axhline(0.5, color="0.6", lw=0.7, ls=":")
        name = r"$\beta = b/\sqrt{d}$" if sc == "hemisphere" else r"$\beta = \sqrt{\kappa d/N}$"
        axes[sc].set(xlabel=r"$t = d\tau$", ylabel=r"$\gamma(t)$", ylim=(0, 1),
                     title=f"({panel}) {sc}: {name}, d = {int(big.d)}")
        axes[sc].legend(loc="lower right")
        for d in dims:
            sub, last = ds.sel(scaling=sc, d=d), d == dims[-1]
            ax.errorbar(ns, sub.t_half, yerr=2 * sub.t_half_se, fmt=mk, capsize=2, ms=5,
                        color=colour, mfc=colour if last else "white")
            ax.plot(ns, sub.t_half_theory, ls="--" if last else ":", lw=1, color=colour)
        ax.plot([], [], marker=mk, ls="", color=colour, label=str(sc))
    ax.plot(ns, ds.t_half_logistic, color="0.4", lw=0.8, ls="-.", label="logistic law")
    for shown, ls, face in ((dims[-1:], "--", "0.3"), (dims[:-1], ":", "white")):
        if shown:
            ax.plot([], [], marker="o", ls=ls, color="0.3", mfc=face,
                    label=", ".join(f"d = {d}" for d in shown))
    ax.legend(loc="upper left", ncol=2, title="points: runs; lines: scalar dynamics")
    ax.set(xscale="log", yscale="log", xlabel="tokens N", ylabel=r"$t_{1/2}$",
           title="(c) the collapse half-way (bars 2 s.e.)")
    ax.set_xticks(ns, [str(int(n)) for n in ns])
    ax.set_yticks([1, 2, 4, 8, 16], ["1", "2", "4", "8", "16"])
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_formatter(NullFormatter())
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_scaling", source="followup",
    description="random keys and queries: the collapse time as N grows with beta on the "
                "follow-up's scalings (hemisphere beta ~ d^-1/2, simplex beta^2 N / d fixed)",
    # dims last but Ns: each d must give a schedule (t_max, n_layers, n_times), exceed every N
    schema={"b": real(0.0, 20.0), "kappa": real(0.0, 100.0, strict_min=True),
            "gamma0": real(0.0, 0.45), "t_max": real(0.0, 200.0, strict_min=True),
            "n_times": integer(3, 201), "n_layers": integer(1), "n_traj": integer(2),
            "theory_samples": integer(100), "dims": all_of(integers(3, 1024), on_schedule),
            "Ns": all_of(integers(2, 256), _below_dims)})
compute, cost = FIGURE.compute, FIGURE.cost
