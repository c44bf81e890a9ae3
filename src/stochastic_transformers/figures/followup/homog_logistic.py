r"""Logistic growth of the mean overlap at high temperature (the follow-up's Theorem 3).

N tokens, uniform on :math:`S^{d-1}`, in the random-attention model with one head and
:math:`\beta = b/\sqrt d` (:math:`\sigma_{qk} = 1`).  The follow-up's Theorem 3 says that the
mean overlap :math:`m(t) = \frac1{N^2}\sum_{ij}\langle x_i, x_j\rangle` follows
:math:`u(t) = u_0/(u_0 + (1-u_0)e^{-t})` with :math:`u_0 = m(0)`, in its time
normalisation, as d grows.  We derived that normalisation: at :math:`\beta = 0` the drift
of :math:`m` on the noise clock :math:`\tau` is
:math:`m[(d-1)(1-m) - \frac1{N^2}\sum_{ij}(1-R_{ij}^2)] = d\,m(1-m) + O(1)` and the quadratic
variation of its martingale part is :math:`O(1)` per unit of :math:`\tau`, so on
:math:`t = d\tau` the mean of :math:`m` follows the logistic law up to :math:`O(1/d)` and
each trajectory up to fluctuations of order :math:`d^{-1/2}`
(:mod:`stochastic_transformers.random_attention.homogenized`).  For the main paper's parametrisation
(:math:`\eta = L^{-1/2}`, H = 1, :math:`\sigma = 1`), :math:`\tau = T`: the figure runs to
:math:`T = t_{\max}/d`.

Each trajectory is compared with the logistic curve from its own :math:`m(0)`; the
statistic is the mean of :math:`m(t) - u(t; m(0))` over trajectories, in standard errors,
and its largest size over t, against d.  At :math:`\beta = 0` it shrinks like 1/d.  At a fixed
:math:`b > 0` the attention moments do not depend on d, so the mean overlap tends to the
b-dependent simplex law instead, and the gap to the logistic curve levels off at a floor of
order :math:`b^4` (book/random_attention.md derives it); the logistic law
is the limit :math:`b \to 0`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ... import simulate
from ...config import ModelConfig, RunConfig
from ...random_attention.homogenized import logistic, logistic_floor
from ..base import cell_threads, laid_out
from ..knobs import all_of, integers
from ..spec import Figure
from .clock import (CLOCK_SCHEMA, clock_sweeps, decay_exponent, gap_table, label_gap_axes,
                    measured_work, on_schedule, plot_refinement, refinement_summary, schedule,
                    with_refinement, work)
from ..words import listed, signed

_BASE = dict(n_tokens=8, bs=(0.0, 0.5, 1.0), t_max=6.0, n_layers=300, n_times=31, seed=0)
SCALES = {
    "smoke": dict(_BASE, d=(8, 16), bs=(0.0, 1.0), n_traj=50, n_layers=60, n_times=7),
    "quick": dict(_BASE, d=(8, 32, 128), n_traj=1000),
    "paper": dict(_BASE, d=(8, 16, 32, 64, 128), n_traj=10_000),
}
#: The follow-up's rate: the largest |E[m(t) - u(t)]| decays like d^RATE; the verdict asks
#: the fitted exponent to be within RATE_TOL of it.
RATE, RATE_TOL = -1.0, 0.25
#: Seconds of simulation per token-dimension-trajectory-layer, measured on the committed
#: paper run (612 s of cell time, one thread a worker).
SECONDS_PER_WORK = 1.84e-8
#: The score spreads b at which the summary computes the floor of the gap at fixed b (the
#: distance of the d -> infinity simplex law from the logistic law), whatever the run's bs.
FLOOR_BS = (0.5, 1.0)
#: Monte Carlo samples of the floor (its standard error is a few percent at b = 1).
FLOOR_SAMPLES = 100_000
_OUTPUTS = ("m_mean", "m_q10", "m_q90", "u_mean", "gap_mean", "gap_se")


def cell(*, d, b, n_tokens, n_traj, t_max, n_layers, n_times, seed):
    """One (d, b): mean overlap m(t) of every trajectory on t = d tau, against its logistic."""
    T, L, times = schedule(d, t_max, n_layers, n_times)
    ds = simulate(ModelConfig(d=d, beta=b / math.sqrt(d), kind="random_attention"),
                  RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=T, times=times, seed=seed,
                            n_threads=cell_threads()))
    m = ds.gram_t.values.mean(axis=(2, 3))                   # (trajectory, time)
    t = times * d
    u = np.array([logistic(t, m0) for m0 in m[:, 0]])            # each from its own m(0)
    gap = m - u
    return {"m_mean": m.mean(axis=0), "m_q10": np.quantile(m, 0.1, axis=0),
            "m_q90": np.quantile(m, 0.9, axis=0), "u_mean": u.mean(axis=0),
            "gap_mean": gap.mean(axis=0), "gap_se": gap.std(axis=0, ddof=1) / math.sqrt(n_traj),
            "n_traj": n_traj}


def run(knobs, sweeps):
    """The (d, b) sweep on the clock t = d tau and its depth refinement at the largest d and
    the first b, with ``z_gap`` (the mean gap in standard errors) and ``max_abs_gap``."""
    fixed = {k: knobs[k] for k in ("n_tokens", "n_traj", "t_max", "n_layers", "n_times")}
    ds, refine = clock_sweeps(sweeps, knobs, fixed, _OUTPUTS, refine_b=knobs["bs"][0])
    ds["z_gap"] = ds.gap_mean / ds.gap_se
    ds["max_abs_gap"] = np.abs(ds.gap_mean).max("t")
    return with_refinement(ds, refine, np.abs(refine.gap_mean).max("t").values)


@functools.lru_cache(maxsize=16)
def floor(b, n_tokens, t_max):
    """``(floor, standard error)``: :func:`stochastic_transformers.random_attention.homogenized.logistic_floor`
    with :data:`FLOOR_SAMPLES` samples and seed 0 (cached: it takes about a second)."""
    return logistic_floor(b, n_tokens, t_max, n_samples=FLOOR_SAMPLES, seed=0)


def summary(ds) -> dict:
    """Largest |E[m - u]| per (d, b), its decay exponent in d, and the verdicts.

    ``slope[b]``: least-squares slope of log max|E[m - u]| against log d;
    ``rate_verdict[b]``: it is within :data:`RATE_TOL` of the follow-up's :data:`RATE`.
    ``d_times_gap[b]``: d max|E[m - u]|, about constant if the rate is 1/d; its values at
    the smallest and largest d (``d_times_gap_first``, ``d_times_gap_last``), its ``rise``
    between them and the ``extra_rise`` of each b over the smallest b.  The deviation at a
    given d is a systematic O(1/d) bias, so its z-scores grow with the number of
    trajectories; they are reported (``max_z_at_large_d``), not used as a verdict.
    ``spread_slope[b]``: slope of log of the largest 10%-90% spread of m against log d (the
    martingale part: -1/2 expected).  ``below_logistic``: at every (d, b) the mean overlap
    is below the logistic curve where the two are farthest apart.  ``gap_grows_with_b``:
    at every d the gap at the largest b exceeds the gap at the smallest;
    ``slows_fall_with_b``: its exponent is less negative there.  The floor at fixed b and
    the step's share: :func:`_floor_and_step`.
    """
    out = {"d": [int(v) for v in ds.d.values], "b": [float(v) for v in ds.b.values],
           "n_traj": int(ds.n_traj.max()), "n_tokens": int(ds.attrs["fixed_n_tokens"])}
    per_b = {float(b): _per_b(ds.sel(b=b)) for b in ds.b.values}
    for key in ("max_abs_gap", "slope", "rate_verdict", "d_times_gap", "max_z_at_large_d",
                "d_times_gap_first", "d_times_gap_last", "rise", "spread_slope"):
        out[key] = {b: v[key] for b, v in per_b.items()}
    b_lo, b_hi = out["b"][0], out["b"][-1]
    out.update(d_min=out["d"][0], d_max=out["d"][-1], b_min=b_lo, b_max=b_hi,
               below_logistic=all(v["below"] for v in per_b.values()))
    for key in ("slope", "spread_slope"):
        out[f"{key}_min"], out[f"{key}_max"] = min(out[key].values()), max(out[key].values())
    out.update(min_z_at_large_d=min(out["max_z_at_large_d"].values()),
               gap_grows_with_b=bool(np.all(np.array(out["max_abs_gap"][b_hi])
                                            > np.array(out["max_abs_gap"][b_lo]))),
               slows_fall_with_b=bool(out["slope"][b_hi] > out["slope"][b_lo]))
    out["extra_rise"] = {b: out["rise"][b] - out["rise"][b_lo] for b in out["b"][1:]}
    out["m0"] = float(ds.m_mean.isel(t=0).mean())
    return _floor_and_step(ds, out)


def _per_b(sub) -> dict:
    """The entries of :func:`summary` at one b (``sub``: the dataset at that b)."""
    g = sub.max_abs_gap.values
    d_gap = [float(v) for v in g * sub.d.values]
    slope = decay_exponent(sub.d.values, g)
    gap = sub.gap_mean.transpose("d", "t").values
    at = np.argmax(np.abs(gap), axis=1)
    return {"max_abs_gap": [float(v) for v in g], "slope": slope,
            "rate_verdict": bool(abs(slope - RATE) <= RATE_TOL), "d_times_gap": d_gap,
            "d_times_gap_first": d_gap[0], "d_times_gap_last": d_gap[-1],
            "rise": d_gap[-1] - d_gap[0],
            "max_z_at_large_d": float(np.abs(sub.z_gap.isel(d=-1)).max()),
            "spread_slope": decay_exponent(sub.d.values, (sub.m_q90 - sub.m_q10).max("t").values),
            "below": bool(np.all(gap[np.arange(gap.shape[0]), at] < 0))}


def _floor_and_step(ds, out) -> dict:
    """``out`` with the floor of the gap at fixed b and the depth refinement's share.

    ``floor[b]`` (b in :data:`FLOOR_BS` and the largest b of the run): the gap's floor at
    fixed b (:func:`floor`), ``floor_rel_2se[b]`` two standard errors of it relative to it;
    ``floor_rise[b]``: what that floor adds to d times the gap over the run's range of d;
    ``floor_explains_most[b]`` (each b > the smallest with a floor): that is more than half
    the ``extra_rise`` of b.
    ``step``: the depth refinement's share of the rise at its b.  ``gap``: what the step adds to
    the largest gap at the refined d (the gap minus its extrapolation to infinite depth); the
    step on the clock t is t_max/n_layers at every d, so, taking that part to be the same at
    every d (our reading, checked at one d only), ``rise`` = gap (d_max - d_min) is what it adds
    to d times the gap over the run's range, ``share`` that over the ``measured_rise`` of the
    refined b, ``explains_most`` share > 1/2, and ``corrected_first``/``corrected_last``
    d times the gap with it removed at the smallest d and at the refined d.
    """
    b_hi, span = out["b"][-1], out["d_max"] - out["d_min"]
    out["floor"], out["floor_rel_2se"] = {}, {}
    for b in sorted(set(FLOOR_BS) | ({b_hi} if b_hi > 0 else set())):
        value, se = floor(float(b), out["n_tokens"], float(ds.attrs["fixed_t_max"]))
        out["floor"][float(b)], out["floor_rel_2se"][float(b)] = value, 2 * se / value
    out["floor_rise"] = {b: v * span for b, v in out["floor"].items()}
    out["floor_explains_most"] = {b: bool(out["floor_rise"][b] > 0.5 * extra > 0)
                                  for b, extra in out["extra_rise"].items() if b in out["floor"]}
    out["refine"] = ref = refinement_summary(ds)
    step_gap = ref["max_abs_gap"][0] - ref["extrapolated_gap"]
    b_ref = min(out["b"], key=lambda v: abs(v - ref["b"]))
    step_rise, measured = step_gap * span, out["rise"][b_ref]
    out["step"] = {"b": b_ref, "gap": step_gap, "rise": step_rise, "measured_rise": measured,
                   "share": step_rise / measured if measured > 0 else float("nan"),
                   "explains_most": bool(measured > 0 and step_rise > 0.5 * measured),
                   "corrected_first": out["d_min"] * (out["max_abs_gap"][b_ref][0] - step_gap),
                   "corrected_last": ref["d"] * ref["extrapolated_gap"]}
    return out


def phrases(stats) -> dict[str, str]:
    """The page's words (Markdown): the verdict (does the distance to the logistic law fall
    like 1/d, and on which side of the law is the mean?), the band's rate and the step's
    share of the gap."""
    held = list(stats["rate_verdict"].values())
    word = ("Reproduced" if all(held) else "Partly reproduced" if any(held)
            else "Not reproduced")
    rate = ("falls roughly like $1/d$" if all(held) else
            "falls like $1/d$ only for some $\\beta\\sqrt d$" if any(held) else
            "does not fall like $1/d$")
    z = stats["min_z_at_large_d"]
    side = (f"the mean lags behind the curve at every $d$, by {z:.0f} standard errors or more "
            f"at $d$ = {stats['d_max']}" + (": a bias of order $1/d$, not noise" if z > 4 else "")
            if stats["below_logistic"] else "the mean is not always on the same side of the curve")
    spread = sorted(stats["spread_slope"].values())
    ref, step = stats["refine"], stats["step"]
    return {"verdict": (
        f"**{word}:** as $d$ grows from {stats['d_min']} to {stats['d_max']} the largest "
        f"distance between the mean overlap and the logistic curve {rate} (fitted exponents "
        f"{listed([signed(v) for v in stats['slope'].values()], 's')} for $\\beta\\sqrt d$ = "
        f"{listed(stats['b'], 'g')}); {side}."),
        "band": f"{signed(spread[0])} to {signed(spread[-1])}",
        "step": (
            f"Rerun at $d$ = {ref['d']}, $\\beta\\sqrt d$ = {ref['b']:g}, with "
            f"{ref['n_layers'][0]} and {ref['n_layers'][1]} layers, the largest distance is "
            f"{ref['max_abs_gap'][0]:.4f} and {ref['max_abs_gap'][1]:.4f}; extrapolated to "
            f"infinite depth (first order in the step) it is {ref['extrapolated_gap']:.4f}, so "
            f"the step makes {max(ref['discretisation_share'], 0.0):.0%} of it. If the "
            f"step adds the same {step['gap']:.4f} at every $d$ (our reading: it is "
            "$t_{\\max}/n_{\\rm layers}$ on the clock $t$ whatever $d$), it changes $d$ times "
            f"the distance by {signed(step['rise'])} over the range of $d$, against a measured "
            f"change of {signed(step['measured_rise'])}; without it $d$ times the "
            f"distance is {step['corrected_first']:.2f} at $d$ = {stats['d_min']} and "
            f"{step['corrected_last']:.2f} at $d$ = {ref['d']}.")}


def table(stats) -> str:
    """The largest gap per (b, d), its exponent in d and the rate verdict, as Markdown."""
    return gap_table(stats, "$\\beta\\sqrt d$", "slope",
                     lambda b: "about 1/d" if stats["rate_verdict"][b] else "**not 1/d**")


def plot(ds):
    """(top) m(t) at the first b for each d: mean, 10-90% band, logistic; (bottom) the
    largest distance to the logistic law against d, with the depth refinement."""
    import matplotlib.pyplot as plt

    from ...style import palette

    fig, (ax, axr) = plt.subplots(2, 1, figsize=(7.0, 7.4))
    colours = palette(ds.sizes["d"])
    b0 = ds.b.values[0]
    for colour, d in zip(colours, ds.d.values):
        sub = ds.sel(d=d, b=b0)
        ax.fill_between(ds.t, sub.m_q10, sub.m_q90, color=colour, alpha=0.15, lw=0)
        ax.plot(ds.t, sub.m_mean, "o", ms=3, color=colour, label=f"d = {int(d)}")
        ax.plot(ds.t, sub.u_mean, color=colour, lw=1)
    ax.plot([], [], color="0.3", lw=1, label="logistic $u(t)$ from each $m(0)$")
    ax.set(xlabel=r"$t = d\,\tau$", ylabel=r"mean overlap $m(t)$",
           title=f"N = {ds.attrs['fixed_n_tokens']}, $\\beta\\sqrt{{d}}$ = {b0:g} "
                 "(bands: 10-90% of trajectories)")
    ax.legend(loc="lower right", ncol=2)
    for colour, b in zip(palette(ds.sizes["b"]), ds.b.values):
        axr.plot(ds.d, ds.max_abs_gap.sel(b=b), "o-", color=colour,
                 label=fr"$\beta\sqrt{{d}}$ = {b:g}")
    dd = ds.d.values.astype(float)
    plot_refinement(axr, ds, palette(ds.sizes["b"])[0])
    ref = float(ds.sel(b=ds.b.values[0]).max_abs_gap.values[0])
    axr.plot(dd, ref * dd[0] / dd, color="0.5", ls=":", label=r"$\propto 1/d$")
    label_gap_axes(axr, ds, ylabel=r"$\max_t |E[m(t) - u(t)]|$",
                   title=f"distance to the logistic law ({int(ds.n_traj.max()):,} trajectories "
                         "a point)")
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_logistic", source="followup",
    description="random keys and queries, high temperature: the mean overlap against the "
                "logistic law for d = 8..128 (follow-up's Theorem 3)",
    # those of the clock t, and the dimensions, each of which must give a schedule
    schema={**CLOCK_SCHEMA, "d": all_of(integers(3), on_schedule)})
compute, cost = FIGURE.compute, FIGURE.cost
