r"""Feedforward blocks, two tokens: an activation's even part forbids antipodal pairs (ours).

Two tokens, Gaussian values, :math:`B = I`, softmax, and a random feedforward block of
strength :math:`r` (:class:`stochastic_transformers.config.ModelConfig`, ``ff_*``).  In the
depth limit the block adds :math:`r\,\kappa(\langle x_i, x_j\rangle)` to the noise kernel
(:mod:`stochastic_transformers.feedforward`), and at :math:`Z = -1` the overlap's drift
becomes :math:`2r(d-1)E[\varphi_{\rm even}(g)^2]`: with ReLU or GELU (which have an even part)
-1 is an entrance boundary and can no longer be the pair's limit, while with an odd activation
(erf) it stays a fixed point that attracts above a threshold, lowered by the block for
d <= 11.  The figure draws the fraction of pairs within ``tol`` of -1 at
time T against beta, for r in ``rs`` and each activation, over the limit's probability of
the same event (:func:`stochastic_transformers.feedforward.antipodal_at`), and how close
to -1 the pairs come (a low quantile of :math:`1 + Z_T`).
"""

from __future__ import annotations

import numpy as np

from .. import feedforward, simulate
from ..activations import ACTIVATIONS
from ..classification import outcome_counts
from ..config import ModelConfig, RunConfig
from ..stats import agreement_z
from .base import (add_outcome_fractions, cell_threads, choices, cost_function, figure_sweep,
                   integer, knob_attr, laid_out, reals, resolve_scale, trajectory_layer_work)

ID = "ff_pairs"
#: Version of this module's cell outputs, folded into the sweep cache key.
CELL_VERSION = "1"
DESCRIPTION = ("feedforward blocks, two tokens: P(antipodal at T) vs beta for ReLU, GELU, erf "
               "blocks of strength r, with the limit (ours)")

_COMMON = dict(d=4, activations=("relu", "gelu", "erf"), attention="softmax", tol=1e-3,
               ff_width=8, seed=0)
SCALES = {
    "smoke": dict(_COMMON, rs=(0.0, 0.5), betas=(0.5, 2.0), n_traj=200, L=20, T=2.0),
    "quick": dict(_COMMON, rs=(0.0, 0.1, 0.5, 1.0), betas=tuple(np.linspace(0.0, 4.0, 9)),
                  n_traj=2000, L=100, T=10.0),
    "paper": dict(_COMMON, rs=(0.0, 0.1, 0.5, 1.0), betas=tuple(np.linspace(0.0, 4.0, 17)),
                  n_traj=10_000, L=100, T=10.0),
}
KNOB_SCHEMA = {
    "activations": choices(ACTIVATIONS),
    "rs": reals(0.0, distinct=True, increasing=True),
    "ff_width": integer(1, 4096),
}
#: Quantile of 1 + Z_T recorded per cell: how close to -1 the closest pairs come.
LOW_QUANTILE = 0.01


def cell(*, activation, r, beta, d, n_traj, L, T, attention, tol, ff_width, seed):
    """One (activation, r, beta) point: outcome counts of two tokens at T and the
    :data:`LOW_QUANTILE` and median of :math:`1 + Z_T`.  r = 0 is the paper's model
    (the activation is then unused)."""
    model = ModelConfig(d=d, beta=beta, attention=attention, ff_strength=r, ff_width=ff_width,
                        ff_activation=activation)
    ds = simulate(model, RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=T, seed=seed, tol=tol,
                                   stop_level=0.0, n_threads=cell_threads()))
    counts = outcome_counts(ds, tol=tol)
    gap = ds.one_plus_overlap.values
    return {"n_single": counts["single"], "n_antipodal": counts["antipodal"],
            "n_unclustered": counts["unclustered"], "n_traj": n_traj,
            "gap_low": float(np.quantile(gap, LOW_QUANTILE)),
            "gap_median": float(np.median(gap))}


def compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides):
    """Run the (activation, r, beta) sweep and attach the limit.

    Returns ``p_antipodal`` (with its Wilson band), ``p_single``, ``p_theory`` (the limit's
    :math:`P(1 + Z_T \\le \\mathrm{tol})` from a uniform start) with its numerical error
    ``p_theory_error``, ``p_long`` (the limit's long-time probability of -1), ``z_score``,
    ``gap_low`` and ``gap_median``.
    """
    knobs = resolve_scale(SCALES, scale, overrides, KNOB_SCHEMA)
    ds = figure_sweep(__name__, scale, {"activation": list(knobs["activations"]),
                                        "r": list(knobs["rs"]), "beta": list(knobs["betas"])},
                      fixed={k: knobs[k] for k in ("d", "n_traj", "L", "T", "attention", "tol",
                                                   "ff_width")},
                      seed=knobs["seed"], scheduler=scheduler, cache_dir=cache_dir,
                      progress=progress)
    return _finish(ds, scale)


#: Grid step in log(1 + Z) of the limit's Kolmogorov solve: its error there is about 3e-4
#: (:func:`stochastic_transformers.feedforward.antipodal_at`), a twentieth of a standard
#: error of the paper scale's fractions, at about a second a point.
THEORY_STEP = 0.04


def _limit(t, beta, d, r, activation, tol):
    """(P(1 + Z_t <= tol), its error, the long-time P(-1)) of the limit from a uniform start."""
    value, error = feedforward.antipodal_at(t, beta, d, r, activation, tol=tol, h=THEORY_STEP)
    return value, error, feedforward.antipodal_probability(beta, d, r, activation)


def _finish(ds, scale):
    ds = add_outcome_fractions(ds, ("antipodal", "single", "unclustered"))
    d, T, tol = (int(knob_attr(ds, "d")), float(knob_attr(ds, "T")), float(knob_attr(ds, "tol")))
    acts, rs, betas = ds.activation.values, ds.r.values, ds.beta.values
    limit = np.empty((acts.size, rs.size, betas.size, 3))
    for j, r in enumerate(rs):
        # Without the block (r = 0) the activation plays no part: one solve serves all.
        for i, act in enumerate(acts[:1] if r == 0 else acts):
            limit[i, j] = [_limit(T, float(b), d, float(r), str(act), tol) for b in betas]
        if r == 0:
            limit[1:, j] = limit[0, j]
    dims = ("activation", "r", "beta")
    ds["p_theory"] = (dims, limit[..., 0])
    ds["p_theory_error"] = (dims, limit[..., 1])
    ds["p_long"] = (dims, limit[..., 2])
    ds["z_score"] = agreement_z(ds.n_antipodal, ds.n_traj, ds.p_theory)
    ds.attrs.update(scale=scale, figure=ID, theory_step=THEORY_STEP)
    return ds


#: Seconds of simulation per trajectory-layer (the unit of :func:`work`), measured on the
#: committed paper run (results/ff_pairs_paper.nc: its cell time over its trajectory-layers,
#: on the project's 2-core machine; r = 0 cells run the block-free chain and cost less).
SECONDS_PER_WORK = 9.0e-7

work = trajectory_layer_work("activations", "rs", "betas")

cost = cost_function(__name__)


#: Limit probability above which a point counts as informative (with any point where a pair
#: was counted): below it both the limit and the run are essentially zero.
INFORMATIVE_P = 1e-6
#: Two-sided Poisson p-value below which the count of near-antipodal pairs with an
#: even-part block disagrees with the limit's expectation (false-alarm rate 0.1%).
COUNT_ALPHA = 1e-3


def _poisson_two_sided(observed: int, expected: float) -> float:
    """Two-sided p-value of ``observed`` for a Poisson law of mean ``expected`` (the sum
    of the probabilities no larger than that of ``observed``)."""
    from scipy import stats

    if expected <= 0.0:
        return 1.0 if observed == 0 else 0.0
    k = np.arange(0, int(max(observed, expected) * 4 + 50))
    pmf = stats.poisson.pmf(k, expected)
    return float(min(1.0, pmf[pmf <= stats.poisson.pmf(observed, expected) * (1 + 1e-9)].sum()))


def summary(ds) -> dict:
    """Numbers the notebook quotes: the agreement with the limit (largest deviation, shares
    within 2 and 3 standard errors, mean deviation, over the points where the limit's
    probability exceeds 1e-6 or the count is not zero); for the activations with an even
    part and r > 0, the pairs counted within ``tol`` of -1 against the limit's expectation
    (a Poisson test, ``even_counts_match`` at :data:`COUNT_ALPHA`), whether the limit's
    long-time probability of -1 is zero for all of them (``even_long_zero``) and the
    closest approach by r; and the verdict ``odd_block_raises`` (erf at the largest r has
    more antipodal pairs than r = 0 at every beta at or above beta_c(d), beyond 3 standard
    errors of the difference, ``odd_gain_min_z`` the smallest margin)."""
    z = ds.z_score
    informative = ((ds.p_theory > INFORMATIVE_P) | (ds.n_antipodal > 0)).values
    zi = z.values[informative]
    blocked = ds.sel(r=ds.r[ds.r > 0])
    # All points together: counted pairs against the limit's expectation, in binomial
    # standard errors (a systematic deficit shows here before it shows point by point).
    p_all = ds.p_theory.values[informative]
    n_all = ds.n_traj.broadcast_like(ds.p_theory).values[informative]
    total_observed = float(ds.n_antipodal.values[informative].sum())
    total_expected = float((p_all * n_all).sum())
    total_se = float(np.sqrt((p_all * (1 - p_all) * n_all).sum()))
    even = [a for a in ds.activation.values if feedforward.even_part_energy(str(a)) > 0]
    odd = [a for a in ds.activation.values if feedforward.even_part_energy(str(a)) == 0]
    n_traj = int(ds.n_traj.values.max())
    out = {
        "max_abs_z": float(np.abs(zi).max()) if zi.size else 0.0,
        "share_within_2se": float((np.abs(zi) <= 2).mean()) if zi.size else float("nan"),
        "share_within_3se": float((np.abs(zi) <= 3).mean()) if zi.size else float("nan"),
        "mean_z": float(zi.mean()) if zi.size else float("nan"),
        "n_informative": int(informative.sum()),
        "informative_p": INFORMATIVE_P,
        "mean_z_se": float(zi.std(ddof=1) / np.sqrt(zi.size)) if zi.size > 1 else float("nan"),
        "total_observed": total_observed,
        "total_expected": total_expected,
        "total_z": (total_observed - total_expected) / total_se if total_se > 0 else 0.0,
        "total_relative": total_observed / total_expected - 1.0 if total_expected > 0 else 0.0,
        "n_points": int(z.size),
        "n_traj": n_traj,
        "L": int(knob_attr(ds, "L")),
        "T": float(knob_attr(ds, "T")),
        "d": int(knob_attr(ds, "d")),
        "tol": float(knob_attr(ds, "tol")),
        "r_max": float(ds.r.max()),
        "antipodal_with_block": {str(a): int(blocked.n_antipodal.sel(activation=a).sum())
                                 for a in ds.activation.values},
        "theory_with_block": {str(a): float((blocked.p_theory.sel(activation=a)
                                             * blocked.n_traj.sel(activation=a)).sum())
                              for a in ds.activation.values},
    }
    if even and blocked.r.size:
        sub = blocked.sel(activation=even)
        observed = int(sub.n_antipodal.sum())
        expected = float((sub.p_theory * sub.n_traj).sum())
        out["even_observed"] = observed
        out["even_pairs_total"] = int(sub.n_traj.sum())
        out["even_expected"] = expected
        out["even_count_p"] = _poisson_two_sided(observed, expected)
        out["even_counts_match"] = out["even_count_p"] > COUNT_ALPHA
        out["even_long_zero"] = bool(np.all(sub.p_long.values == 0.0))
        out["closest_even_by_r"] = {float(r): float(sub.gap_low.sel(r=r).min())
                                    for r in sub.r.values}
    if odd and 0.0 in ds.r.values and ds.r.size > 1:
        top = ds.sel(activation=odd[0], r=ds.r.max())
        base = ds.sel(activation=odd[0], r=0.0)
        above = ds.beta.values >= float(feedforward.critical_beta(out["d"], 0.0, str(odd[0])))
        diff = (top.p_antipodal - base.p_antipodal).values[above]
        se = np.sqrt((top.p_antipodal * (1 - top.p_antipodal) / top.n_traj
                      + base.p_antipodal * (1 - base.p_antipodal) / base.n_traj).values[above])
        out["odd_activation"] = str(odd[0])
        out["beta_c_no_block"] = float(feedforward.critical_beta(out["d"], 0.0, str(odd[0])))
        out["odd_gain_min_z"] = float(np.min(diff / np.maximum(se, 1e-12))) if diff.size else float("nan")
        out["odd_block_raises"] = bool(diff.size and out["odd_gain_min_z"] > 3.0)
    return out


def plot(ds):
    """One panel per activation: P(antipodal at T) against beta for each r (points with
    95% bands over the limit's curve); a last panel with the closest approach to -1."""
    import matplotlib.pyplot as plt

    from ..style import palette

    acts = [str(a) for a in ds.activation.values]
    colours = palette(ds.r.size)
    fig, axes = plt.subplots(1, len(acts) + 1, figsize=(3.1 * (len(acts) + 1), 3.4),
                             sharex=True)
    top = max(0.05, float(ds.p_antipodal_high.max()) + 0.03, float(ds.p_theory.max()) + 0.03)
    for ax, act in zip(axes, acts):
        for colour, r in zip(colours, ds.r.values):
            sub = ds.sel(activation=act, r=r)
            p = sub.p_antipodal.values
            err = np.vstack([p - sub.p_antipodal_low.values, sub.p_antipodal_high.values - p])
            ax.errorbar(sub.beta, p, yerr=err, fmt="o", ms=3, color=colour, capsize=2, lw=1,
                        label=f"r = {r:g}")
            ax.plot(sub.beta, sub.p_theory, color=colour, lw=1.2)
        ax.set_title(f"{act} block", fontsize=10)
        ax.set_xlabel(r"$\beta$")
        ax.set_ylim(-0.01, top)
    axes[0].set_ylabel(r"$P(1 + Z_T \leq \mathrm{tol})$")
    axes[0].legend(fontsize=8, loc="upper left")
    ax = axes[-1]
    for act, marker in zip(acts, "os^v"):
        for colour, r in zip(colours, ds.r.values):
            if r == 0 and act != acts[0]:
                continue
            sub = ds.sel(activation=act, r=r)
            # r = 0 is the paper's model, whatever the activation: its own marker.
            ax.semilogy(sub.beta, sub.gap_low, marker="x" if r == 0 else marker, ms=3, lw=0.8,
                        color=colour,
                        label="no block" if r == 0 else (f"{act}" if r == ds.r.values[-1] else None))
    ax.axhline(float(knob_attr(ds, "tol")), color="0.4", ls="--", lw=0.8)
    ax.set_title(f"closest pairs: {LOW_QUANTILE:.0%} quantile", fontsize=10)
    ax.set_ylabel(r"$1 + Z_T$")
    ax.set_xlabel(r"$\beta$")
    ax.legend(fontsize=8, loc="center right")
    n = int(ds.n_traj.values.max())
    return laid_out(fig, f"Two tokens with a feedforward block (d = {int(knob_attr(ds, 'd'))}, "
                         f"L = {int(knob_attr(ds, 'L'))}, T = {float(knob_attr(ds, 'T')):g}, "
                         f"{n:,} trajectories per point)")
