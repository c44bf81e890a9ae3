r"""The paper's conjecture after Figure 7: antipodal structure of N >= 3 tokens is stable, not
merely metastable.  Tested at horizons where the two-cluster theory says it is decided.

Exact splits (:math:`m_1` tokens at one point, :math:`m_2` at its antipode, on the weighted
two-cluster chain) and uniform starts (Figure 7's set-up) run to :math:`T = 10^4`, recorded on
a logarithmic grid.  Per split the surviving fraction (still antipodal) is set against the
Kolmogorov solution of the two-cluster diffusion (:func:`two_clusters.antipodal_persistence`),
and its decay rate over the last decade of time is fitted with its interval: a split is
*metastable* where the rate is positive beyond the interval, *stable on this horizon* where
the interval's upper end is below ``RATE_BOUND`` (a lifetime above ten horizons).  Uniform
starts are followed split by split (the share of each minority size over time).
"""

from __future__ import annotations


import numpy as np
import xarray as xr

from ... import two_clusters
from ..._validation import check_real
from ...stats import exit_rate as tail_rate  # noqa: F401 (the page's name for it)
from ...stats import normal_quantile
from ...sweep import summed_attrs
from ...style import palette
from ..base import laid_out, log_time_grid
from ..knobs import integer, integers, real, reals, sequence_of
from ..spec import Figure
from ..words import listed, markdown_table
from . import fig7
from ..ours import clusters

_BASE = dict(splits=("1,2", "1,3", "2,2"), betas=(4.0, 6.0, 8.0), uniform_tokens=(3, 4), d=4, L=100,
             one_plus_z0=1e-4, tol=1e-3, seed=0)
SCALES = {
    "smoke": dict(_BASE, splits=("1,2", "2,2"), betas=(4.0,), n_traj=40, L=20, T=50.0,
                  t_min=1.0, n_times=10),
    "quick": dict(_BASE, n_traj=100, T=1000.0, t_min=1.0, n_times=20),
    "paper": dict(_BASE, n_traj=500, T=10_000.0, t_min=1.0, n_times=30),
}
#: Seconds per trajectory-layer (splits and uniform starts together), measured on the
#: committed paper run.
SECONDS_PER_WORK = 2.50e-7
#: The fitted window: the last decade of time, [T / 10, T].
WINDOW = 10.0
#: "Stable on this horizon": the rate's upper end below one over ten horizons.
RATE_BOUND_HORIZONS = 10.0
#: Two-sided level for the rate's interval, Bonferroni over the splits, betas and uniform
#: shares judged.
LEVEL = 0.95


def plan(knobs):
    """Refuses a time grid with fewer than two recorded times in the fitted window."""
    times = log_time_grid(knobs["T"], knobs["L"], knobs["n_times"], t_min=knobs["t_min"])
    if sum(t >= knobs["T"] / WINDOW for t in times) < 2:
        raise ValueError(f"t_min = {knobs['t_min']:g} and n_times = {knobs['n_times']} leave "
                         f"fewer than two recorded times in the fitted window [T/{WINDOW:g}, "
                         "T]; raise t_min or n_times")


def run(knobs, sweeps):
    """Two sweeps on one log time grid: the splits (``clusters.cell``) and the uniform starts
    (``fig7.cell``); then the Kolmogorov prediction of every split (``predicted``)."""
    times = [float(x) for x in log_time_grid(knobs["T"], knobs["L"], knobs["n_times"],
                                             t_min=knobs["t_min"])]
    common = {k: knobs[k] for k in ("n_traj", "L", "T", "d", "tol")}
    splits = sweeps({"split": list(knobs["splits"]), "beta_index": list(range(len(knobs["betas"])))},
                    part="splits", cell=clusters.cell, seed=knobs["seed"],
                    fixed={**common, "times": times, "attention": "softmax",
                           "betas_softmax": list(knobs["betas"]), "betas_unnormalized": [],
                           "one_plus_z0": knobs["one_plus_z0"]},
                    output_dims={"n_antipodal": ("time",), "median_depth": ("time",)},
                    output_coords={"time": times})
    splits = splits.drop_vars("beta").assign_coords(beta_index=list(knobs["betas"])).rename(
        beta_index="beta")
    # one sweep per number of tokens (minority sizes differ), nan-padded on concatenation
    parts = [sweeps({"beta": list(knobs["betas"])}, part="uniform", cell=fig7.cell,
                    seed=knobs["seed"] + 1,
                    fixed={**common, "times": times, "n_tokens": n, "attention": "softmax"},
                    output_dims={**{v: ("time",) for v in fig7._PER_TIME},
                                 **{v: ("time", "minority") for v in fig7._PER_SPLIT}},
                    output_coords={"time": times, "minority": list(range(1, n // 2 + 1))})
             for n in knobs["uniform_tokens"]]
    uniform = xr.concat(parts, dim="uniform_tokens", join="outer").assign_coords(
        uniform_tokens=list(knobs["uniform_tokens"]))
    ds = splits[["n_antipodal"]].rename(n_antipodal="n_split_antipodal")
    ds["n_split_traj"] = splits.n_traj
    for name in ("n_antipodal_pair", "n_split"):
        ds[f"uniform_{name}"] = uniform[name]
    ds["uniform_n_traj"] = uniform.n_traj
    pred = np.empty((ds.sizes["split"], ds.sizes["beta"], ds.sizes["time"]))
    for i, s in enumerate(ds.split.values):
        for j, b in enumerate(ds.beta.values):
            pred[i, j] = two_clusters.antipodal_persistence(
                np.asarray(times), knobs["one_plus_z0"], float(b), knobs["d"],
                *clusters.parse_split(s), tol=knobs["tol"])[0][:, 0]
    ds["predicted"] = (("split", "beta", "time"), pred)
    ds.attrs.update({f"fixed_{k}": v for k, v in knobs.items() if np.isscalar(v)})
    # the counts and times of every sweep, not the first one's alone, and what the uniform
    # sweeps ran
    ds.attrs.update(summed_attrs([splits, *parts]), uniform_sweep_seed=knobs["seed"] + 1,
                    uniform_cell_function=parts[0].attrs["cell_function"],
                    fixed_uniform_tokens=list(knobs["uniform_tokens"]))
    return ds


def work(knobs) -> float:
    """Trajectory-layers of the splits and the uniform starts."""
    return float(knobs["n_traj"] * knobs["L"] * knobs["T"] * len(knobs["betas"])
                 * (len(knobs["splits"]) + len(knobs["uniform_tokens"])))


def _label(low, high, bound):
    if low > 0:
        return "metastable"
    return "stable on this horizon" if high < bound else "undecided"


def summary(ds) -> dict:
    """Per split and beta: the surviving fraction at T, the exit rate over the last decade
    with its interval, the theory's rate there and the exits it expects, the label, and the
    largest |z| of the counts against the Kolmogorov prediction; per N and beta the uniform
    starts' split shares; ``by_n``: per N, the betas at which every split is metastable."""
    T, n_traj = float(ds.time.max()), int(ds.n_split_traj.max())
    t_from, bound = T / WINDOW, 1.0 / (RATE_BOUND_HORIZONS * T)
    shares = [(int(N), m) for N in ds.uniform_tokens.values for m in range(1, int(N) // 2 + 1)]
    n_judged = ds.sizes["beta"] * (ds.sizes["split"] + len(shares))
    z = normal_quantile(1.0 - (1.0 - LEVEL) / n_judged)
    t = ds.time.values
    late = t >= t_from
    rows = []
    for s in ds.split.values:
        for b in ds.beta.values:
            sub = ds.sel(split=s, beta=b)
            n = int(sub.n_split_traj)
            count, pred = sub.n_split_antipodal.values, sub.predicted.values
            rate, low, high, exits = tail_rate(t, count, t_from, z)
            theory = max(-np.polyfit(t[late], np.log(np.maximum(pred[late], 1e-300)), 1)[0], 0)
            exposure = float(np.sum(count[late][:-1] * np.diff(t[late])))
            zs = (count - n * pred) / np.sqrt(np.maximum(n * pred * (1 - pred), 0.25))
            rows.append(dict(split=str(s), n_tokens=sum(clusters.parse_split(s)), beta=float(b),
                             final=float(count[-1] / n), predicted_final=float(pred[-1]),
                             rate=rate, low=low, high=high, exits=exits,
                             theory_rate=float(theory), expected_exits=theory * exposure,
                             z_theory=(rate - theory) * 2 * z / (high - low) if exits else 0.0,
                             label=_label(low, high, bound), max_abs_z=float(np.abs(zs).max())))
    at = int(np.searchsorted(t, t_from))
    uniform = []
    for N, m in shares:
        for b in ds.beta.values:
            sub = ds.sel(beta=b, uniform_tokens=N)
            n = int(sub.uniform_n_traj)
            count = sub.uniform_n_split.sel(minority=m).values.astype(int)
            rate, low, high, exits = tail_rate(t, count, t_from, z)
            uniform.append(dict(n_tokens=N, beta=float(b), minority=m, share_T=count[-1] / n,
                                share_early=float(count[at] / n), rate=rate, low=low,
                                high=high, label=_label(low, high, bound)))
    by_n = {}
    for N in sorted({r["n_tokens"] for r in rows}):
        own = [r for r in rows if r["n_tokens"] == N]
        by_n[N] = [b for b in sorted({r["beta"] for r in own})
                   if all(r["label"] == "metastable" for r in own if r["beta"] == b)]
    quiet = [r for r in rows if r["label"] != "metastable" and r["theory_rate"] > 0]
    meta = [r for r in rows if r["label"] == "metastable"]
    return {"rows": rows, "uniform": uniform, "T": T, "t_from": t_from, "t_at": float(t[at]),
            "rate_bound": bound, "uniform_tokens": [int(N) for N in ds.uniform_tokens.values],
            "z_level": z, "n_judged": n_judged, "n_traj": n_traj, "by_n": by_n,
            "max_expected_quiet": max((r["expected_exits"] for r in quiet), default=0.0),
            "max_z_theory": max((abs(r["z_theory"]) for r in meta), default=0.0),
            "balanced_stable": all(r["label"] == "stable on this horizon" for r in rows
                                   if len(set(r["split"].split(","))) == 1)}


def verdict_word(stats) -> str:
    """Not reproduced where no N keeps a lasting antipodal state at some beta; disputed where
    some N does not; partly where some split is metastable; reproduced otherwise (the
    scorecard's word too)."""
    if stats["by_n"] and all(stats["by_n"].values()):
        return "Not reproduced"
    if any(stats["by_n"].values()):
        return "Disputed"
    return "Partly reproduced" if any(r["label"] == "metastable" for r in stats["rows"]) \
        else "Reproduced"


def _pm(rate, low, high):
    """The fitted rate and its interval (the lower end clipped at 0)."""
    return f"{rate:.1e} [{low:.1e}, {high:.1e}]"


def phrases(stats) -> dict:
    """The verdict on the conjecture per number of tokens, the uniform starts, the table."""
    parts = []
    for N, betas in stats["by_n"].items():
        own = [r for r in stats["rows"] if r["n_tokens"] == N]
        meta = [r for r in own if r["label"] == "metastable"]
        stay = [r for r in own if r["label"] == "stable on this horizon"
                and len(set(r["split"].split(","))) == 1]
        text = f"for N = {N} " + (
            f"every antipodal split leaves at $\\beta$ = {listed(betas, 'g')}" if betas else
            ("the balanced split stays" if stay else "no split is shown to leave"))
        if meta and not betas:
            text += " while " + ", ".join(sorted({r["split"].replace(",", "–") for r in meta})) \
                + " leaves at $\\beta$ = " + listed(sorted({r["beta"] for r in meta}), "g")
        parts.append(text)
    verdict = (f"**{verdict_word(stats)}**: " + "; ".join(parts) + ". Where a split leaves, its "
               f"rate agrees with the two-cluster theory's (within {stats['max_z_theory']:.1f} "
               "s.e.). Where no departure is detected, the theory still predicts departures, "
               f"too rare to see: at most {stats['max_expected_quiet']:.1f} exits expected "
               "in this run.")
    uniform = "; ".join(
        f"for N = {u['n_tokens']} at $\\beta$ = {u['beta']:g} the "
        f"{u['minority']}–{u['n_tokens'] - u['minority']} "
        f"split holds {u['share_early']:.0%} of the runs at $t$ = {stats['t_at']:.0f} and "
        f"{u['share_T']:.0%} at $T$"
        + (f", leaving at rate {_pm(u['rate'], u['low'], u['high'])}"
           if u["label"] == "metastable" else "")
        for u in stats["uniform"])
    rows = [[r["split"].replace(",", "–"), f"{r['beta']:g}", f"{r['final']:.3f}",
             f"{r['predicted_final']:.3f}", f"{r['exits']:.0f}",
             _pm(r["rate"], r["low"], r["high"]) if r["exits"] else f"below {r['high']:.1e}",
             f"{r['theory_rate']:.1e}", r["label"], f"{r['max_abs_z']:.1f}"]
            for r in stats["rows"]]
    table = markdown_table(("split", "β", "antipodal at T", "theory", "exits in window",
                            "exit rate", "theory's rate", "label", "largest deviation (s.e.)"),
                           rows)
    return {"verdict": verdict, "uniform": uniform + ".", "table": table}


def plot(ds):
    """(a) surviving fraction of each split against time, the theory dashed; (b) uniform
    starts: share of each split against time."""
    import matplotlib.pyplot as plt

    fig, (ax, axu) = plt.subplots(2, 1, figsize=(7.0, 8.4))
    colours = dict(zip(ds.split.values, palette(ds.sizes["split"])))   # colour: split
    markers = dict(zip(ds.beta.values, "o^sDv"))                          # marker: beta
    for s, b in [(s, b) for b in ds.beta.values for s in ds.split.values]:
        sub, colour = ds.sel(split=s, beta=b), colours[s]
        n = float(sub.n_split_traj)
        frac = sub.n_split_antipodal / n
        se = np.sqrt(np.maximum(frac * (1 - frac), 1.0 / n) / n)
        ax.errorbar(ds.time, frac, yerr=2 * se, fmt=markers[b], ms=3, color=colour, capsize=1.5,
                    lw=0.8, label=f"split {s.replace(',', '–')}, β = {b:g}")
        ax.plot(ds.time, sub.predicted, color=colour, ls="--", lw=1)
    ax.set(xscale="log", xlabel="time t", ylabel="fraction still antipodal",
           title="(a) exact splits (dashed: two-cluster diffusion)")
    ax.legend(ncol=2, loc="lower left")
    for colour, b in zip(palette(ds.sizes["beta"]), ds.beta.values):
        for N, ls in zip(ds.uniform_tokens.values, (":", "-", "-.")):
            sub = ds.sel(beta=b, uniform_tokens=N)
            for m, mk in zip(range(1, int(N) // 2 + 1), "o^sv"):
                axu.plot(ds.time, sub.uniform_n_split.sel(minority=m) / sub.uniform_n_traj,
                         marker=mk, ms=3, color=colour, lw=1, ls=ls,
                         label=f"β = {b:g}, N = {int(N)}, split {m}–{int(N) - m}")
    axu.set(xscale="log", xlabel="time t", ylabel="share of trajectories",
            title="(b) " + " and ".join(str(int(N)) for N in ds.uniform_tokens.values)
            + " tokens from a uniform start")
    axu.legend(ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "persistence_long", source="paper",
    description="the conjecture after Figure 7: antipodal splits followed to T = 10^4, decay "
                "rates against the two-cluster diffusion",
    schema={"splits": sequence_of(clusters._split, distinct=True),
            "betas": reals(0.0, 20.0, strict_min=True),
            "uniform_tokens": integers(3, 16, distinct=True, increasing=True),
            "one_plus_z0": lambda name, value, knobs: check_real(
                name, value, clusters.ONE_PLUS_Z0_MIN, 2.0, strict_max=True),
            "t_min": lambda name, value, knobs: check_real(name, value, 0.0, knobs["T"],
                                                           strict_min=True, strict_max=True),
            "n_times": integer(4)})
compute, cost = FIGURE.compute, FIGURE.cost
