r"""Figure 9 (appendix D.2): convergence speed, stochastic model against the deterministic flow.

N tokens on :math:`S^{d-1}` (default N = 8, d = 4), softmax attention, :math:`B = Q^\top K = I`.
Two dynamics start from the **same** i.i.d. uniform tokens: the *deterministic* attention
flow, the hybrid model (paper eq. 7) at :math:`\varepsilon = 0`, i.e. Euler steps
:math:`X^i_{n+1} = \operatorname{normalize}(X^i_n + L^{-1} A_\beta(X^i_n, X_n))`, and the
*stochastic* model (paper eq. 4), a fresh Gaussian value matrix per layer shared by all
tokens, :math:`X^i_{n+1} = \operatorname{normalize}(X^i_n + L^{-1/2} V_{n+1} A_\beta(X^i_n, X_n))`.
The paper reports comparable rates at small beta, and at large beta a metastable
deterministic flow (several clusters for a long time, Geshkovski et al. 2024) against a
stochastic model that is not.  The metrics come from the Gram matrix on a log-spaced time
grid: :func:`clustering_gap`, the groups of tokens together at ``tol``, whether and when a
trajectory is clustered, and :func:`longest_plateau`.
"""

from __future__ import annotations

import numpy as np

from ... import simulate, two_clusters
from ..._validation import EXP_BETA_MAX, check_int
from ...classification import has_antipodal_pair, is_clustered, n_clusters
from ...config import configs_from_flat
from ...simulation import full_method
from ...style import palette
from ..base import (add_outcome_fractions, cell_threads, knob_attr, laid_out, log_time_grid,
                    on_time_axis)
from ..knobs import integer, reals
from ..spec import Figure
from ..words import markdown_table

_BASE = dict(betas=(1.0, 5.0), n_tokens=8, d=4, attention="softmax", tol=1e-3, seed=0)
SCALES = {
    "smoke": dict(_BASE, n_traj=8, block_size=4, L=20, T=20.0, n_times=25),
    "quick": dict(_BASE, n_traj=64, block_size=16, L=100, T=500.0, n_times=80),
    "paper": dict(_BASE, n_traj=1000, block_size=50, L=100, T=1000.0, n_times=100),
}
#: Model labels, in the order of the ``model`` dimension.
MODELS = ("deterministic", "stochastic")
#: Trajectories drawn as thin lines, per model and beta.
N_SHOW = 12
#: Floor of the gap on the log axis (double precision resolves overlaps to ~1e-16).
GAP_FLOOR = 1e-16


def _block_size(name, value, knobs):
    """``block_size``: trajectories a sweep cell runs, a divisor of n_traj."""
    block = check_int(name, value, 1)
    if knobs["n_traj"] % block:
        raise ValueError(f"{name} must divide n_traj; got {name}={block}, "
                         f"n_traj={knobs['n_traj']}")
    return block


def clustering_gap(gram):
    r"""The clustering gap :math:`\max_{i<j}\min(1 - G_{ij}, 1 + G_{ij})` of Gram arrays
    (..., N, N), N >= 2: 0 exactly on clustered configurations (every pair together or
    antipodal), at most 1 (an orthogonal pair); clustered at ``tol`` iff it is <= ``tol``.
    Rounding can push an overlap a hair past +-1, so the gap is clipped at 0."""
    gram = np.asarray(gram, dtype=float)
    if gram.ndim < 2 or gram.shape[-1] != gram.shape[-2] or gram.shape[-1] < 2:
        raise ValueError(f"gram must have shape (..., N, N) with N >= 2; got {gram.shape}")
    i, j = np.triu_indices(gram.shape[-1], 1)
    z = gram[..., i, j]
    return np.maximum(np.max(np.minimum(1.0 - z, 1.0 + z), axis=-1), 0.0)


def first_time(mask, times):
    """First recorded time where ``mask`` (time last) is True; ``inf`` where never."""
    mask, times = on_time_axis("mask", mask, times, dtype=bool)
    out = np.where(mask.any(axis=-1), times[np.argmax(mask, axis=-1)], np.inf)
    return out if out.ndim else float(out)


def longest_plateau(counts, clustered, times, n_tokens):
    """Longest time spent in one intermediate state, per trajectory (time last): a maximal
    run of recorded times with a constant number of groups ``counts`` between 2 and
    ``n_tokens - 1`` while not ``clustered``, from its first to its last recorded time (a
    lower bound on the true stay); 0 where there is none."""
    counts = np.asarray(counts)
    clustered = np.asarray(clustered, dtype=bool)
    times = np.asarray(times, dtype=float)
    n_tokens = check_int("n_tokens", n_tokens, 2)
    if counts.shape != clustered.shape or counts.shape[-1:] != times.shape:
        raise ValueError("counts and clustered must have one shape, with the time axis last "
                         f"({times.size} times); got {counts.shape} and {clustered.shape}")
    inter = (counts >= 2) & (counts < n_tokens) & ~clustered
    best = np.zeros(counts.shape[:-1])
    start = np.full(best.shape, np.nan)
    prev = np.full(best.shape, -1, dtype=np.int64)
    for s in range(times.size):
        k, ok = counts[..., s], inter[..., s]
        start = np.where(ok & ((k != prev) | np.isnan(start)), times[s], start)
        start = np.where(ok, start, np.nan)
        best = np.maximum(best, np.where(ok, times[s] - np.where(ok, start, 0.0), 0.0))
        prev = np.where(ok, k, -1)
    return best if best.ndim else float(best)


def cell(*, beta, block, block_size, n_tokens, d, L, T, n_times, attention, tol, seed):
    """One block of ``block_size`` initial configurations at one beta, run by both models:
    arrays (model, member, time) of the clustering gap, the number of groups, whether the
    configuration is clustered, and whether it has an antipodal pair."""
    times = log_time_grid(T, L, n_times)
    x0 = np.random.default_rng(seed).standard_normal((block_size, n_tokens, d))
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    out = {"gap": [], "n_clusters": [], "clustered": [], "antipodal_pair": []}
    for model in MODELS:
        # The stochastic model runs the full N-token map at every layer (not the reduced
        # path): the clustering gap this figure measures goes below the merge threshold.
        kwargs = (dict(model="hybrid", epsilon=0.0) if model == "deterministic"
                  else dict(model="stochastic", method=full_method(n_tokens, d)))
        ds = simulate(*configs_from_flat(n_tokens=n_tokens, d=d, beta=beta, n_traj=block_size,
                                         L=L, T=T, attention=attention, seed=seed, times=times,
                                         x0=x0, n_threads=cell_threads(), **kwargs))
        g = ds.gram_t.values  # (member, time, N, N)
        out["gap"].append(clustering_gap(g))
        out["n_clusters"].append(n_clusters(g, tol).astype(np.int16))
        out["clustered"].append(is_clustered(g, tol))
        out["antipodal_pair"].append(has_antipodal_pair(g, tol))
    return {k: np.stack(v) for k, v in out.items()}


_OUTPUTS = ("gap", "n_clusters", "clustered", "antipodal_pair")


def run(knobs, sweeps):
    """Both models over (beta, block of trajectories), then :func:`finish`."""
    raw = sweeps({"beta": list(knobs["betas"]),
                  "block": list(range(knobs["n_traj"] // knobs["block_size"]))},
                 fixed={k: knobs[k] for k in ("block_size", "n_tokens", "d", "L", "T", "n_times",
                                              "attention", "tol")},
                 seed=knobs["seed"], output_dims={k: ("model", "member", "time") for k in _OUTPUTS},
                 output_coords={"model": list(MODELS), "time": log_time_grid(
                     knobs["T"], knobs["L"], knobs["n_times"])})
    return finish(raw)


def finish(raw):
    """The blocks joined into trajectories (model, beta, trajectory, time), with per
    trajectory ``t_clustered`` and ``longest_plateau``, and per (model, beta, time)
    ``p_clustered``, ``p_antipodal_pair`` (Wilson bands), ``median_gap``, ``gap_q25``,
    ``gap_q75`` and ``mean_n_clusters``."""
    import xarray as xr

    n_tokens, times = int(raw.attrs["fixed_n_tokens"]), raw.time.values
    n_traj = raw.sizes["block"] * raw.sizes["member"]
    data = {var: (("model", "beta", "trajectory", "time"),
                  raw[var].transpose("model", "beta", "block", "member", "time").values
                  .reshape(len(MODELS), raw.sizes["beta"], n_traj, times.size))
            for var in _OUTPUTS}
    ds = xr.Dataset(data, coords={"model": list(MODELS), "beta": raw.beta.values,
                                  "trajectory": np.arange(n_traj), "time": times})
    ds["cell_seed"] = raw.cell_seed
    ds.attrs.update(raw.attrs)
    ds["n_traj"] = n_traj
    ds["n_clustered"] = ds.clustered.sum("trajectory")
    ds["n_antipodal_pair"] = ds.antipodal_pair.sum("trajectory")
    ds = add_outcome_fractions(ds, ("clustered", "antipodal_pair"), total=n_traj)
    ds["median_gap"] = (("model", "beta", "time"), np.median(ds.gap.values, axis=2))
    ds["gap_q25"] = (("model", "beta", "time"), np.quantile(ds.gap.values, 0.25, axis=2))
    ds["gap_q75"] = (("model", "beta", "time"), np.quantile(ds.gap.values, 0.75, axis=2))
    ds["mean_n_clusters"] = ds.n_clusters.astype(float).mean("trajectory")
    ds["t_clustered"] = (("model", "beta", "trajectory"), first_time(ds.clustered.values, times))
    ds["longest_plateau"] = (("model", "beta", "trajectory"), longest_plateau(
        ds.n_clusters.values, ds.clustered.values, times, n_tokens))
    ds.attrs.update(metric="clustering gap max_{i<j} min(1 - G_ij, 1 + G_ij); clustered iff <= tol")
    return ds


#: Rates are "comparable" when the ratio of median times to cluster is within this factor.
COMPARABLE_FACTOR = 3.0
#: The stochastic model is "markedly faster" at large beta when the deterministic median
#: time to cluster is at least this many times longer (or infinite).
FASTER_FACTOR = 3.0
#: Deterministic "plateaus": median longest stay at least this many times the stochastic
#: one, and half of the trajectories with a stay longer than PLATEAU_LONG.
PLATEAU_RATIO = 5.0
PLATEAU_LONG = 10.0
#: The stochastic model has "no plateaus" when at most this share stays longer than PLATEAU_LONG.
NO_PLATEAU_SHARE = 0.05
#: Mostly one cluster: mean number of groups at T at most this.
ONE_CLUSTER_MEAN = 1.5
#: Hovering: the large-beta median clustering gap at T exceeds the small-beta one by this
#: factor, with most trajectories clustered.
HOVER_FACTOR = 1e3


def _verdicts(by, b_small, b_large):
    """The comparisons with the paper's claims at the smallest and the largest beta."""
    det_s, sto_s = by[("deterministic", b_small)], by[("stochastic", b_small)]
    det_l, sto_l = by[("deterministic", b_large)], by[("stochastic", b_large)]
    r_small, r_large = (det["median_t_clustered"] / sto["median_t_clustered"]
                        if np.isfinite(det["median_t_clustered"]) and sto["median_t_clustered"] > 0
                        else None
                        for det, sto in ((det_s, sto_s), (det_l, sto_l)))
    return {
        "beta_small": b_small, "beta_large": b_large,
        "ratio_small": r_small, "ratio_large": r_large,
        "comparable_small": r_small is not None
        and 1 / COMPARABLE_FACTOR <= r_small <= COMPARABLE_FACTOR,
        "faster_large": r_large is None or r_large >= FASTER_FACTOR,
        "deterministic_plateaus": det_l["median_longest_plateau"]
        >= PLATEAU_RATIO * max(sto_l["median_longest_plateau"], 1e-9)
        and det_l["share_plateau_over_10"] >= 0.5,
        "stochastic_no_plateau": sto_l["share_plateau_over_10"] <= NO_PLATEAU_SHARE,
        "one_cluster_small": max(det_s["mean_n_clusters_T"], sto_s["mean_n_clusters_T"])
        <= ONE_CLUSTER_MEAN,
        "stochastic_hovers": sto_l["p_clustered_T"] > 0.5
        and sto_l["median_gap_T"] > HOVER_FACTOR * max(sto_s["median_gap_T"], 1e-16),
    }


def summary(ds) -> dict:
    r"""Numbers the page quotes: per (model, beta) in ``by``; ``verdicts``, the comparisons
    with the paper's claims at the smallest and the largest beta (thresholds above); and
    ``hover_scale``, the range of the hovering depth :math:`(\alpha_1-\alpha_2)^2`
    (:func:`two_clusters.hovering_scale`; with softmax about
    :math:`4e^{-4\beta}(m/(N-m) - (N-m)/m)^2`) over the unbalanced splits m vs N - m at the
    largest beta (``min``, ``max``, and ``m_min``, ``m_max`` the smaller groups giving them)."""
    out = {"T": float(ds.time.values[-1]), "n_traj": int(ds.sizes["trajectory"]),
           "n_tokens": int(knob_attr(ds, "n_tokens")), "d": int(ds.attrs["fixed_d"]),
           "tol": float(knob_attr(ds, "tol")), "by": {}}
    for m in ds.model.values:
        for b in ds.beta.values:
            s = ds.sel(model=m, beta=b)
            t_cl, stay = s.t_clustered.values, s.longest_plateau.values
            out["by"][(str(m), float(b))] = {
                # order statistics, not interpolation: t_cl is inf where never clustered
                "median_t_clustered": float(np.quantile(t_cl, 0.5, method="inverted_cdf")),
                "q90_t_clustered": float(np.quantile(t_cl, 0.9, method="inverted_cdf")),
                "p_clustered_T": float(s.p_clustered.values[-1]),
                "p_antipodal_pair_T": float(s.p_antipodal_pair.values[-1]),
                "median_longest_plateau": float(np.median(stay)),
                "max_longest_plateau": float(np.max(stay)),
                "share_plateau_over_10": float(np.mean(stay > PLATEAU_LONG)),
                "mean_n_clusters_T": float(s.mean_n_clusters.values[-1]),
                "median_gap_T": float(s.median_gap.values[-1])}
    betas = [float(b) for b in ds.beta.values]
    if len(betas) >= 2 and set(MODELS) <= {str(m) for m in ds.model.values}:
        out["verdicts"] = _verdicts(out["by"], min(betas), max(betas))
    # the unbalanced splits (n_tokens >= 3 leaves at least one)
    n, beta = out["n_tokens"], max(betas)
    scales = {m: two_clusters.hovering_scale(beta, m, n - m, attention=str(
        ds.attrs.get("fixed_attention", "softmax"))) for m in range(1, (n + 1) // 2) if 2 * m != n}
    m_lo, m_hi = min(scales, key=scales.get), max(scales, key=scales.get)
    out["hover_scale"] = {"beta": beta, "min": scales[m_lo], "max": scales[m_hi],
                          "m_min": int(m_lo), "m_max": int(m_hi)}
    return out


#: The paper's claims of appendix D.2, as the verdicts of :func:`summary` that test them.
CLAIMS = {"comparable_small": "comparable rates at small $\\beta$",
          "one_cluster_small": "mostly one cluster at small $\\beta$",
          "faster_large": "a markedly faster stochastic model at large $\\beta$",
          "deterministic_plateaus": "a metastable deterministic flow",
          "stochastic_no_plateau": "no metastability of the stochastic model"}


def _when(x) -> str:
    return f"{x:.3g}" if np.isfinite(x) else "later than $T$"


def phrases(stats) -> dict[str, str]:
    """The page's words: ``verdict`` (every claim of :data:`CLAIMS`, or those we do not
    see), ``speeds`` (the median times to cluster, which may be later than T), ``gap_reading``
    (whether the stochastic model's gap hovers at large beta) and the ``table``."""
    v, by = stats["verdicts"], stats["by"]
    missed = [words for key, words in CLAIMS.items() if not v[key]]
    head = ("**Reproduced.**" if not missed else "**Not reproduced.**"
            if len(missed) == len(CLAIMS) else
            "**Partly reproduced:** we do not see " + "; ".join(missed) + ".")
    t = {(m, k): _when(by[(m, v[f"beta_{k}"])]["median_t_clustered"]) for m in MODELS
         for k in ("small", "large")}
    sto = by[("stochastic", v["beta_large"])]
    speeds = (f"the median time to cluster is {t['deterministic', 'small']} for the deterministic "
              f"flow against {t['stochastic', 'small']} for the stochastic model at $\\beta$ = "
              f"{v['beta_small']:g}, and {t['deterministic', 'large']} against "
              f"{t['stochastic', 'large']} at $\\beta$ = {v['beta_large']:g}.")
    gap = (f"levels off, at {sto['median_gap_T']:.1e} at $T$, instead of falling to rounding "
           "level" if v["stochastic_hovers"] else f"is {sto['median_gap_T']:.1e} at $T$, not "
           "clearly above its small-$\\beta$ value") + (
        f"; {sto['p_antipodal_pair_T']:.0%} of its trajectories")
    rows = [[f"{b:g}", m, f"{s['p_clustered_T']:.0%}", _when(s["median_t_clustered"]),
             _when(s["q90_t_clustered"]), f"{s['median_longest_plateau']:.3g}",
             f"{s['max_longest_plateau']:.3g}", f"{s['share_plateau_over_10']:.1%}",
             f"{s['mean_n_clusters_T']:.2f}", f"{s['p_antipodal_pair_T']:.1%}"]
            for (m, b), s in sorted(by.items(), key=lambda item: item[0][::-1])]
    table = markdown_table(["$\\beta$", "dynamics", "clustered at $T$", "median time to cluster",
                            "90% by", "median longest plateau", "longest", "plateau > 10",
                            "mean groups at $T$", "antipodal pair at $T$"], rows)
    return {"verdict": head, "speeds": speeds, "gap_reading": gap, "table": table}


#: Seconds of simulation per token-trajectory-layer (:func:`work`, both models), measured
#: on the committed paper run (results/fig9_paper.nc: 384 s of cell time for 3.2e9
#: token-trajectory-layers, N = 8, on the project's 2-core machine).
SECONDS_PER_WORK = 1.2e-7


def work(knobs) -> float:
    """Token-trajectory-layers of a run, both models: 2 n_traj N L T n_betas (linear in N,
    which slightly underestimates for larger N: attention costs N^2)."""
    return float(2 * knobs["n_traj"] * knobs["n_tokens"] * knobs["L"] * knobs["T"]
                 * len(knobs["betas"]))


def plot(ds, n_show=N_SHOW):
    """Rows: clustering gap, number of groups, fraction clustered; one column per beta.
    Thin lines are single runs, thick ones the median gap (band: quartiles), the mean
    number of groups and the fraction clustered (Wilson band)."""
    import matplotlib.pyplot as plt

    colours = dict(zip(MODELS, palette(10)[:2]))
    labels = {"deterministic": r"deterministic flow ($\varepsilon = 0$)",
              "stochastic": "stochastic model"}
    t = ds.time.values
    shown = t > 0
    ts = t[shown]
    tol, n_tok = float(knob_attr(ds, "tol")), int(knob_attr(ds, "n_tokens"))
    n_show = min(n_show, ds.sizes["trajectory"])
    jitter = np.linspace(-0.18, 0.18, n_show) if n_show > 1 else np.zeros(1)
    fig, axes = plt.subplots(3, ds.sizes["beta"], figsize=(8.0, 8.0), sharex=True, sharey="row",
                             squeeze=False)
    for col, b in enumerate(ds.beta.values):
        ax_gap, ax_k, ax_p = axes[:, col]
        for m in MODELS:
            s, c = ds.sel(model=m, beta=b).isel(time=shown), colours[m]
            gap = np.maximum(s.gap.values[:n_show], GAP_FLOOR)
            k = s.n_clusters.values[:n_show] + jitter[:, None] + (0.06 if m == MODELS[1] else -0.06)
            for row in range(n_show):
                ax_gap.plot(ts, gap[row], color=c, lw=0.6, alpha=0.45)
                ax_k.step(ts, k[row], where="post", color=c, lw=0.6, alpha=0.45)
            ax_gap.fill_between(ts, np.maximum(s.gap_q25.values, GAP_FLOOR),
                                np.maximum(s.gap_q75.values, GAP_FLOOR), color=c, alpha=0.15, lw=0)
            ax_gap.plot(ts, np.maximum(s.median_gap.values, GAP_FLOOR), color=c, lw=2.4)
            ax_k.plot(ts, s.mean_n_clusters.values, color=c, lw=2.4)
            ax_p.fill_between(ts, s.p_clustered_low.values, s.p_clustered_high.values, color=c,
                              alpha=0.25, lw=0)
            ax_p.plot(ts, s.p_clustered.values, color=c, lw=2)
        ax_gap.axhline(tol, color="0.3", ls="--", lw=1)
        ax_gap.set(yscale="log", ylim=(GAP_FLOOR / 3, 3.0), title=rf"$\beta$ = {b:g}")
        ax_k.set(ylim=(0.5, n_tok + 0.5), yticks=range(1, n_tok + 1, max(1, n_tok // 4)))
        # nothing happens in the first tenth of a time unit
        ax_p.set(ylim=(-0.02, 1.02), xscale="log", xlabel="time $t$",
                 xlim=(max(0.1, float(ts[0])), float(t[-1]) * 1.15))
    for ax, name in zip(axes[:, 0], (r"clustering gap $\delta$", "number of groups",
                                     "fraction clustered")):
        ax.set_ylabel(name)
    axes[0, 0].legend([plt.Line2D([], [], color="0.3", ls="--", lw=1)], [f"tolerance {tol:g}"],
                      loc="lower left")
    handles = [plt.Line2D([], [], color=colours[m], lw=2.4) for m in MODELS] + [
        plt.Line2D([], [], color="0.5", lw=0.6), plt.Line2D([], [], color="0.5", lw=2.4)]
    fig.legend(handles, [labels[m] for m in MODELS] + [
        f"{n_show} single runs each", "median (gap) or mean (groups)"],
        loc="upper center", bbox_to_anchor=(0.5, 0.965), ncol=2)
    return laid_out(fig, f"N = {n_tok}, d = {int(ds.attrs['fixed_d'])}, "
                    f"{ds.sizes['trajectory']:,} trajectories per model, same initial tokens",
                    rect=(0, 0, 1, 0.925))


FIGURE = Figure.declared(
    globals(), "fig9", source="paper",
    description="N >= 3 tokens: convergence of the stochastic model vs the deterministic flow, "
                "small and large beta (App. D.2)",
    # at least three tokens (two are Figure 8's), one dimension, blocks that divide n_traj
    schema={"n_tokens": integer(3), "d": integer(2), "block_size": _block_size,
            "betas": reals(0.0, EXP_BETA_MAX)})
compute, cost = FIGURE.compute, FIGURE.cost
