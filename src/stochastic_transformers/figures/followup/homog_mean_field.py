r"""The follow-up's mean-field limit with common noise (its Proposition 4), measured.

As the number of tokens n grows, the empirical measure of the follow-up's particle system
tends to the solution of a conditional McKean-Vlasov equation: a random measure that depends
on the weights (the common noise) but not on the tokens' initial draws.  Two systems of n
tokens, drawn independently from the uniform law and driven by the same weights of every layer
(the same random stream: the literal method draws W, W', V in an order that does not depend on
the tokens), must then have empirical measures that approach each other; driven by independent
weights, they need not.  The squared energy distance of two independent samples of n points
from one law is of order 1/n, so the prediction is :math:`E\,\mathcal E_n(t) \propto 1/n` with
common weights and a plateau with independent ones.
"""

from __future__ import annotations

import math

import numpy as np

from ... import simulate
from ...config import ModelConfig, RunConfig
from ...stats import energy_distance, log_log_slope, normal_quantile, weighted_least_squares
from ...style import palette
from ..base import cell_threads, laid_out
from ..knobs import integer, integers, real, reals
from ..spec import Figure
from ..words import listed, markdown_table

_BASE = dict(d=4, beta=1.0, times=(0.5, 1.0, 2.0), L=100, seed=0)
SCALES = {
    "smoke": dict(_BASE, ns=(8, 16, 32), n_traj=10, L=20, times=(0.5, 1.0)),
    "quick": dict(_BASE, ns=(16, 32, 64, 128), n_traj=40),
    "paper": dict(_BASE, ns=(16, 32, 64, 128, 256, 512), n_traj=100),
}
#: Seconds per trajectory-layer-token^2 of the 3 systems, measured on the committed run (shared).
SECONDS_PER_WORK = 4.81e-8
LEVEL = 0.95


def _uniform(rng, shape):
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _check_segments(knobs):
    edges = (0.0, *knobs["times"])
    steps = [(t - s) * knobs["L"] for s, t in zip(edges, edges[1:])]
    bad = [t for t, k in zip(edges[1:], steps) if abs(k - round(k)) > 1e-9]
    if bad:
        raise ValueError(f"times must be whole numbers of layers apart (L = {knobs['L']} a unit "
                         f"of time); got {bad}")


def cell(*, n_tokens, n_traj, L, times, d, beta, seed):
    """One n: the energy distance between two systems from independent uniform starts, driven
    by common weights (``common``) and by independent ones (``independent``), at t = 0 and at
    every time of ``times`` (each system run segment by segment, the two common ones on the
    same seeds)."""
    model = ModelConfig(d=d, beta=beta, kind="random_attention")
    rng = np.random.default_rng(seed)
    a, b = _uniform(rng, (2, n_traj, n_tokens, d))
    c = b.copy()
    out = {k: np.empty(len(times) + 1) for k in ("common", "common_se", "independent",
                                                  "independent_se")}
    edges = (0.0, *times)
    for k in range(len(edges)):
        if k:
            run = dict(n_tokens=n_tokens, n_traj=n_traj, L=L, T=edges[k] - edges[k - 1],
                       method="literal", n_threads=cell_threads())
            a, b = (simulate(model, RunConfig(seed=seed + 1000 * k, x0=x, **run)).tokens.values
                    for x in (a, b))
            c = simulate(model, RunConfig(seed=seed + 1000 * k + 1, x0=c, **run)).tokens.values
        for name, other in (("common", b), ("independent", c)):
            e = energy_distance(a, other)
            out[name][k], out[f"{name}_se"][k] = e.mean(), e.std(ddof=1) / math.sqrt(n_traj)
    return {**out, "n_traj": n_traj}


def run(knobs, sweeps):
    """The sweep over n, every time recorded."""
    times = [float(t) for t in knobs["times"]]
    return sweeps({"n_tokens": list(knobs["ns"])}, seed=knobs["seed"],
                  fixed={"n_traj": knobs["n_traj"], "L": knobs["L"], "times": times,
                         "d": knobs["d"], "beta": knobs["beta"]},
                  output_dims={k: ("t",) for k in ("common", "common_se", "independent",
                                                    "independent_se")},
                  output_coords={"t": [0.0, *times]})


def work(knobs) -> float:
    """Trajectory-layer-token^2 of the three systems (attention is quadratic in n)."""
    return float(3 * knobs["n_traj"] * knobs["L"] * max(knobs["times"])
                 * sum(n * n for n in knobs["ns"]))


def _floor(n, e, se):
    """E(n) = a/n + b by weighted least squares: the floor b (the squared distance left as
    n -> infinity) with its s.e., inflated by the misfit."""
    X = np.stack([1.0 / n, np.ones_like(n)], axis=1)
    c, cov, chi2 = weighted_least_squares(X, e, se)
    return float(c[1]), math.sqrt(cov[1, 1] * max(1.0, chi2 / max(n.size - 2, 1)))


def summary(ds) -> dict:
    """Per time: the slope of log E in log n and the floor b of E = a/n + b, with common and
    with independent weights (s.e. inflated by the misfit), and ``ratio``, independent over
    common at the largest n; ``vanishes``: the common floor within ``z_level`` s.e. of 0;
    ``stays``: the independent floor above 0 by more than ``z_level`` s.e.  The level is
    two-sided 5% with Bonferroni over the floors judged (two per time t > 0)."""
    n = ds.n_tokens.values.astype(float)
    z = normal_quantile(1.0 - (1.0 - LEVEL) / (2 * (ds.sizes["t"] - 1)))
    rows = []
    for t in ds.t.values:
        sub = ds.sel(t=t)
        row = {"t": float(t)}
        for name in ("common", "independent"):
            e, se = sub[name].values, sub[f"{name}_se"].values
            slope, slope_se, _ = log_log_slope(n, e, se, inflate=True)
            b, b_se = _floor(n, e, se)
            row.update({f"{name}_slope": slope, f"{name}_slope_se": slope_se,
                        f"{name}_floor": b, f"{name}_floor_se": b_se})
        big = sub.isel(n_tokens=-1)
        row["ratio"] = float(big.independent / big.common)
        row["vanishes"] = abs(row["common_floor"]) <= z * row["common_floor_se"]
        row["stays"] = row["independent_floor"] > z * row["independent_floor_se"]
        rows.append(row)
    late = [r for r in rows if r["t"] > 0]
    return {"rows": rows, "z_level": z, "n_min": int(n.min()), "n_max": int(n.max()),
            "n_traj": int(ds.n_traj.max()), "d": int(ds.attrs["fixed_d"]),
            "beta": float(ds.attrs["fixed_beta"]), "eta": 1.0 / math.sqrt(ds.attrs["fixed_L"]),
            "vanishes_at": [r["t"] for r in late if r["vanishes"]],
            "stays_at": [r["t"] for r in late if r["stays"]], "n_times": len(late),
            "ratio_min": min(r["ratio"] for r in late)}


def verdict_word(stats) -> str:
    """Reproduced where at every t the common floor vanishes and the independent one stays;
    partly where at some t; not reproduced otherwise (the scorecard's word too)."""
    both = set(stats["vanishes_at"]) & set(stats["stays_at"])
    return ("Reproduced" if len(both) == stats["n_times"] else "Partly reproduced" if both
            else "Not reproduced")


def phrases(stats) -> dict:
    """The verdict on Proposition 4 and the table of slopes and floors."""
    gone, kept = stats["vanishes_at"], stats["stays_at"]
    rest = [r["t"] for r in stats["rows"] if r["t"] > 0 and r["t"] not in gone]
    verdict = (f"**{verdict_word(stats)}**, on the discrete chain: with common weights the "
               "squared energy distance between two systems has, as $n$ grows, a floor "
               "consistent with 0 " + (f"at $t$ = {listed(gone, 'g')}" if gone else
                                      "at no recorded time")
               + "".join(f" (at $t$ = {r['t']:g} its floor is {r['common_floor']:.3f} ± "
                         f"{r['common_floor_se']:.3f} over $n \\le$ {stats['n_max']})"
                         for r in stats["rows"] if r["t"] in rest)
               + "; with independent weights it keeps a floor "
               + (f"at $t$ = {listed(kept, 'g')}" if kept else "at no recorded time")
               + f", and at n = {stats['n_max']} it is {stats['ratio_min']:.1f} times the common "
               "one or more.")
    table = markdown_table(
        ("t", "slope, common", "floor, common", "slope, independent", "floor, independent",
         "ratio at largest n"),
        [[f"{r['t']:g}", f"{r['common_slope']:.2f} ± {r['common_slope_se']:.2f}",
          f"{r['common_floor']:.4f} ± {r['common_floor_se']:.4f}",
          f"{r['independent_slope']:.2f} ± {r['independent_slope_se']:.2f}",
          f"{r['independent_floor']:.4f} ± {r['independent_floor_se']:.4f}",
          f"{r['ratio']:.1f}"] for r in stats["rows"]], numeric=True)
    return {"verdict": verdict, "table": table}


def plot(ds):
    """The squared energy distance against n, common weights (filled) and independent
    (open), one colour per time, bars 2 s.e.; dotted, the 1/n through t = 0."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    n = ds.n_tokens.values
    for colour, t in zip(palette(ds.sizes["t"]), ds.t.values):
        sub = ds.sel(t=t)
        for name, fill in (("common", colour), ("independent", "white")):
            ax.errorbar(n, sub[name], yerr=2 * sub[f"{name}_se"], fmt="o-", ms=4, lw=1,
                        color=colour, mfc=fill, capsize=2,
                        label=f"t = {t:g}" if name == "common" else None)
    ref = ds.sel(t=0.0).common.values[0] * n[0] / n
    ax.plot(n, ref, color="0.4", ls=":", lw=1, label="1/n")
    ax.plot([], [], "o", color="0.3", label="common weights")
    ax.plot([], [], "o", color="0.3", mfc="white", label="independent weights")
    ax.set_xscale("log")
    ax.set_xticks(n, [str(v) for v in n], minor=False)
    ax.set_xticks([], minor=True)
    ax.set(yscale="log", xlabel="tokens n",
           ylabel="squared energy distance of the two systems",
           title=f"two systems from independent uniform starts, d = {int(ds.attrs['fixed_d'])}, "
                 f"β = {float(ds.attrs['fixed_beta']):g}")
    ax.legend(ncol=2, loc="lower left")
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_mean_field", source="followup",
    description="the mean-field limit with common noise (Proposition 4): two n-token systems "
                "driven by the same weights approach each other; by independent ones, not "
                "(energy distance against n, its floor)",
    schema={"ns": integers(2, 4096, distinct=True), "beta": real(0.0, 20.0),
            "d": integer(2, 64), "times": reals(0.0, 100.0, strict_min=True, increasing=True)},
    plan=_check_segments)
compute, cost = FIGURE.compute, FIGURE.cost
