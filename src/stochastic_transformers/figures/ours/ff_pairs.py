r"""Feedforward blocks, two tokens: an activation's even part forbids antipodal pairs (ours).

Two tokens, softmax and a random feedforward block of strength :math:`r`
(:mod:`stochastic_transformers.feedforward`).  With ReLU or GELU (even part not zero) -1 is an
entrance boundary of the limit's overlap; with erf (odd) it stays a fixed point.  The figure
draws the fraction of pairs within ``tol`` of -1 at T against beta over the limit's probability
(:func:`~stochastic_transformers.feedforward.antipodal_at`), and how near -1 the closest come.
"""

from __future__ import annotations

import numpy as np

from ... import feedforward, simulate
from ..._validation import EXP_BETA_MAX, FF_STRENGTH_MAX
from ...activations import ACTIVATIONS
from ...classification import outcome_counts
from ...config import ModelConfig, RunConfig
from ...stats import poisson_two_sided, z_digest
from ...style import palette
from ..base import add_outcome_fractions, cell_threads, knob_attr, laid_out, trajectory_layer_work
from ..knobs import choices, integer, reals
from ..spec import Figure
from ..words import markdown_table, signed, verdict

_COMMON = dict(d=4, activations=("relu", "gelu", "erf"), attention="softmax", tol=1e-3,
               ff_width=8, seed=0)
SCALES = {"smoke": dict(_COMMON, rs=(0.0, 0.5), betas=(0.5, 2.0), n_traj=200, L=20, T=2.0),
          "quick": dict(_COMMON, rs=(0.0, 0.1, 0.5, 1.0), betas=tuple(np.linspace(0.0, 4.0, 9)),
                        n_traj=2000, L=100, T=10.0),
          "paper": dict(_COMMON, rs=(0.0, 0.1, 0.5, 1.0), betas=tuple(np.linspace(0.0, 4.0, 17)),
                        n_traj=10_000, L=100, T=10.0)}
#: The knobs of the block, checked alike by every feedforward figure: its strengths and width.
BLOCK_SCHEMA = {"betas": reals(0.0, EXP_BETA_MAX),
                "rs": reals(0.0, FF_STRENGTH_MAX, distinct=True, increasing=True),
                "ff_width": integer(1, 4096)}
#: Quantile of 1 + Z_T recorded per cell: how close to -1 the closest pairs come.
LOW_QUANTILE = 0.01


def block_model(*, d, beta, attention, r, ff_width, activation) -> ModelConfig:
    """The paper's layer with a random feedforward block of strength ``r`` (none at r = 0)."""
    return ModelConfig(d=d, beta=beta, attention=attention, ff_strength=r, ff_width=ff_width,
                       ff_activation=activation)


def run_title(what, ds) -> str:
    """The title of a feedforward figure: ``what`` and the run's d, L, T and trajectories."""
    return (f"{what} (d = {int(knob_attr(ds, 'd'))}, L = {int(knob_attr(ds, 'L'))}, "
            f"T = {float(knob_attr(ds, 'T')):g}, {int(ds.n_traj.values.max()):,} trajectories "
            "per point)")


def band_points(ax, sub, name, **style):
    """``sub[name]`` against beta, with its 95% Wilson band (``name_low``, ``name_high``)."""
    p = sub[name].values
    err = np.vstack([p - sub[f"{name}_low"].values, sub[f"{name}_high"].values - p])
    ax.errorbar(sub.beta, p, yerr=err, fmt="o", capsize=2, lw=1, **style)


def cell(*, activation, r, beta, d, n_traj, L, T, attention, tol, ff_width, seed):
    """One (activation, r, beta) point: outcome counts of two tokens at T and the
    :data:`LOW_QUANTILE` and median of :math:`1 + Z_T`.  r = 0 is the paper's model
    (the activation is then unused)."""
    model = block_model(d=d, beta=beta, attention=attention, r=r, ff_width=ff_width,
                        activation=activation)
    ds = simulate(model, RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=T, seed=seed, tol=tol,
                                   stop_level=0.0, n_threads=cell_threads()))
    counts = outcome_counts(ds, tol=tol)
    gap = ds.one_plus_overlap.values
    return {"n_single": counts["single"], "n_antipodal": counts["antipodal"],
            "n_unclustered": counts["unclustered"], "n_traj": n_traj,
            "gap_low": float(np.quantile(gap, LOW_QUANTILE)),
            "gap_median": float(np.median(gap))}


#: Grid step in log(1 + Z) of the limit's Kolmogorov solve: its error there is about 3e-4,
#: a twentieth of a standard error of the paper scale's fractions, at about a second a point.
THEORY_STEP = 0.04


def finish(ds, knobs):
    """The fractions with Wilson bands; the limit's :math:`P(1 + Z_T \\le \\mathrm{tol})` from
    a uniform start ``p_theory`` (numerical error ``p_theory_error``), its long-time
    probability of -1 ``p_long``."""
    ds = add_outcome_fractions(ds, ("antipodal", "single", "unclustered"))
    d, T, tol = knobs["d"], float(knobs["T"]), float(knobs["tol"])
    acts, rs, betas = ds.activation.values, ds.r.values, ds.beta.values
    limit = np.empty((acts.size, rs.size, betas.size, 3))
    for j, r in enumerate(rs):
        # Without the block (r = 0) the activation plays no part: one solve serves all.
        for i, act in enumerate(acts[:1] if r == 0 else acts):
            for k, b in enumerate(betas):
                value, error = feedforward.antipodal_at(T, float(b), d, float(r), str(act),
                                                        tol=tol, h=THEORY_STEP)
                limit[i, j, k] = value, error, feedforward.antipodal_probability(
                    float(b), d, float(r), str(act))
        if r == 0:
            limit[1:, j] = limit[0, j]
    dims = ("activation", "r", "beta")
    for n, name in enumerate(("p_theory", "p_theory_error", "p_long")):
        ds[name] = (dims, limit[..., n])
    ds.attrs.update(theory_step=THEORY_STEP)
    return ds


#: Seconds of simulation per trajectory-layer, measured on the committed paper run
#: (results/ff_pairs_paper.nc, 2-core machine; r = 0 cells run the block-free chain).
SECONDS_PER_WORK = 9.0e-7

#: Limit probability above which a point is informative (as is any with a pair counted).
INFORMATIVE_P = 1e-6
#: Poisson p-value below which the even-part blocks' count near -1 disagrees with the limit.
COUNT_ALPHA = 1e-3
#: False-alarm rate of :func:`follows_limit`: it fails when more points lie beyond 2 standard
#: errors than a perfect match (each with probability 4.6%) gives with this probability.
AGREE_ALPHA = 1e-3
#: Fewest pairs (and non-pairs) a point must expect to be compared point by point.
MIN_EXPECTED = 5.0


def calibrated_z(count, n, p):
    """The z-scores (k - np) / sqrt(np(1 - p)) of the points expecting at least
    :data:`MIN_EXPECTED` pairs and non-pairs (nearly normal there), and how many are left out."""
    e = n * p
    keep = np.minimum(e, n - e) >= MIN_EXPECTED
    return (count - e)[keep] / np.sqrt(e * (1 - p))[keep], int((~keep).sum())


def summary(ds) -> dict:
    """The deviations from the limit (:func:`calibrated_z`) over the informative points, one by
    one and all together (``total_*``: a systematic deficit shows in the total first); with a
    block, pairs counted and expected by activation; for the even-part blocks the Poisson
    p-value of their count near -1 and the closest approach by r; for the odd block the least
    z of its gain over r = 0 at every beta from Theorem 2's threshold (and its Bonferroni p)."""
    from scipy.stats import norm

    informative = ((ds.p_theory > INFORMATIVE_P) | (ds.n_antipodal > 0)).values
    p_all = ds.p_theory.values[informative]
    n_all = ds.n_traj.broadcast_like(ds.p_theory).values[informative]
    zi, n_left_out = calibrated_z(ds.n_antipodal.values[informative], n_all, p_all)
    digest, digest_3 = z_digest(zi, within=2.0), z_digest(zi, within=3.0)
    observed = float(ds.n_antipodal.values[informative].sum())
    expected = float((p_all * n_all).sum())
    se = float(np.sqrt((p_all * (1 - p_all) * n_all).sum()))
    blocked = ds.sel(r=ds.r[ds.r > 0])
    acts = [str(a) for a in ds.activation.values]
    even = [a for a in acts if feedforward.even_part_energy(a) > 0]
    odd = [a for a in acts if feedforward.even_part_energy(a) == 0]
    out = {"max_abs_z": digest["max_abs_z"] if zi.size else 0.0,
           "share_within_2se": digest["share_within"],
           "share_within_3se": digest_3["share_within"], "mean_z": digest["mean_z"],
           "n_informative": int(zi.size), "n_left_out": n_left_out, "informative_p": INFORMATIVE_P,
           "total_observed": observed, "total_expected": expected,
           "total_z": (observed - expected) / se if se > 0 else 0.0,
           "total_relative": observed / expected - 1.0 if expected > 0 else 0.0,
           "n_traj": int(ds.n_traj.values.max()), "L": int(knob_attr(ds, "L")),
           "T": float(knob_attr(ds, "T")), "r_max": float(ds.r.max()),
           "antipodal_with_block": {a: int(blocked.n_antipodal.sel(activation=a).sum())
                                    for a in acts},
           "theory_with_block": {a: float((blocked.p_theory * blocked.n_traj).sel(activation=a)
                                          .sum()) for a in acts}}
    if even and blocked.r.size:
        sub = blocked.sel(activation=even)
        p = poisson_two_sided(int(sub.n_antipodal.sum()), float((sub.p_theory * sub.n_traj).sum()))
        out.update(even_count_p=p, even_counts_match=p > COUNT_ALPHA,
                   even_long_zero=bool(np.all(sub.p_long.values == 0.0)),
                   closest_even_by_r={float(r): float(sub.gap_low.sel(r=r).min())
                                      for r in sub.r.values})
    if odd and 0.0 in ds.r.values and ds.r.size > 1:
        top, base = ds.sel(activation=odd[0], r=ds.r.max()), ds.sel(activation=odd[0], r=0.0)
        beta_c = float(feedforward.critical_beta(int(knob_attr(ds, "d")), 0.0, odd[0]))
        above = ds.beta.values >= beta_c
        diff = (top.p_antipodal - base.p_antipodal).values[above]
        se = np.sqrt((top.p_antipodal * (1 - top.p_antipodal) / top.n_traj
                      + base.p_antipodal * (1 - base.p_antipodal) / base.n_traj).values[above])
        gain = float(np.min(diff / np.maximum(se, 1e-12))) if diff.size else float("nan")
        out.update(odd_activation=odd[0], beta_c_no_block=beta_c, odd_gain_min_z=gain,
                   odd_n_above=int(diff.size), odd_bonferroni_p=float(min(1, diff.size * norm.sf(gain))),
                   odd_block_raises=bool(diff.size and gain > 3.0))
    return out


def follows_limit(stats) -> tuple[bool, int, float]:
    """Whether few enough points lie beyond 2 standard errors (see :data:`AGREE_ALPHA`), how
    many do, and the probability that a perfect match (each point 4.6%) puts as many there."""
    from scipy.stats import binom, norm

    n = stats["n_informative"]
    outside = round(n * (1.0 - stats["share_within_2se"])) if n else 0
    p = float(binom.sf(outside - 1, n, 2 * norm.sf(2.0)))
    return bool(n) and p > AGREE_ALPHA, outside, p


def phrases(stats) -> dict[str, str]:
    """The page's plain-text findings, which the chapter quotes too: ``verdict``, ``total``
    (all informative points against the limit) and ``closest`` (how near -1 the closest 1%
    of pairs come with an even-part block, by r)."""
    agree, outside, p = follows_limit(stats)
    tally = (f"{outside} of {stats['n_informative']} comparisons beyond 2 standard errors, "
             f"binomial p = {p:.2g} against a perfect match")
    checks = [(agree, f"point by point the fractions at T are consistent with "
               f"the limit's curves ({tally})", f"point by point the fractions at T are not "
               f"consistent with the limit's curves ({tally})")]
    if "even_counts_match" in stats:
        checks.append((stats["even_long_zero"] and stats["even_counts_match"],
                       "with ReLU and GELU blocks the limit never ends at −1, and the count of "
                       f"pairs near it at T is consistent with the limit's expectation (Poisson p "
                       f"= {stats['even_count_p']:.2f})", "with ReLU and GELU blocks the "
                       "pairs near −1 at T are not what the limit expects"))
    if "odd_block_raises" in stats:
        act = stats["odd_activation"]
        checks.append((stats["odd_block_raises"], f"an {act} block raises the antipodal "
                       f"fraction at each of the {stats['odd_n_above']} values of β above "
                       f"Theorem 2's threshold, by at least {stats['odd_gain_min_z']:.1f} standard "
                       f"errors each (Bonferroni p = {stats['odd_bonferroni_p']:.1g})", "this run "
                       f"does not resolve the {act} block's gain at every β above Theorem 2's "
                       "threshold"))
    z, rel = signed(stats["total_z"], 1), stats["total_relative"]
    total = (f"a deficit of {-rel:.1%} ({z} standard errors), of the sign, though not "
             "measured to be of the size, of the finite-depth bias on the threshold page"
             if stats["total_z"] < -3 else
             f"{'an excess' if stats['total_z'] > 3 else 'no clear difference'}: "
             f"{signed(100 * rel, 1)}% ({z} standard errors)")
    closest = stats.get("closest_even_by_r", {})
    pooled = (f" Pooled over every point, though, the fractions show {total}." if
              abs(stats["total_z"]) > 3 else "")
    return {"verdict": verdict(checks) + pooled, "total": total,
            "closest": ", ".join(f"{v:.2g} at r = {r:g}" for r, v in closest.items()) or "–"}


def tables(stats) -> dict[str, str]:
    """The page's folded tables (Markdown): ``counts`` (pairs within ``tol`` of -1 at T with
    a block, counted and expected, by activation) and ``agreement`` (the deviations)."""
    counts = markdown_table(
        ["block (all r > 0)", "pairs within tol of −1 at T", "expected by the limit"],
        [[act, f"{n:,}", f"{stats['theory_with_block'][act]:,.1f}"]
         for act, n in stats["antipodal_with_block"].items()], numeric=True)
    agreement = markdown_table(["comparisons", stats["n_informative"]], [
        [f"points left out (expecting fewer than {MIN_EXPECTED:g} pairs)", stats["n_left_out"]],
        ["within 2 standard errors", f"{stats['share_within_2se']:.0%}"],
        ["within 3 standard errors", f"{stats['share_within_3se']:.0%}"],
        ["largest deviation (standard errors)", f"{stats['max_abs_z']:.1f}"],
        ["mean deviation (standard errors)", signed(stats["mean_z"])],
        ["antipodal pairs, counted / expected",
         f"{stats['total_observed']:,.0f} / {stats['total_expected']:,.0f}"]], numeric=True)
    return {"counts": counts, "agreement": agreement}


def plot(ds):
    """One panel per activation, P(antipodal at T) against beta for each r (points with 95%
    bands over the limit's curve), and a last panel with the closest approach to -1."""
    import matplotlib.pyplot as plt

    acts, rs = [str(a) for a in ds.activation.values], ds.r.values
    colours = palette(rs.size)
    rows = (len(acts) + 2) // 2
    fig, grid = plt.subplots(rows, 2, figsize=(8.0, 3.1 * rows + 0.4), sharex=True,
                             squeeze=False)
    axes = grid.ravel()
    top = max(0.05, float(ds.p_antipodal_high.max()) + 0.03, float(ds.p_theory.max()) + 0.03)
    for i, (ax, act) in enumerate(zip(axes, acts)):
        for colour, r in zip(colours, rs):
            sub = ds.sel(activation=act, r=r)
            band_points(ax, sub, "p_antipodal", ms=3, color=colour, label=f"r = {r:g}")
            ax.plot(sub.beta, sub.p_theory, color=colour, lw=1.2)
        ax.set(title=f"{act} block", ylim=(-0.01, top),
               ylabel=r"$P(1 + Z_T \leq \mathrm{tol})$" if i % 2 == 0 else "")
    axes[0].legend(loc="upper left")
    ax = axes[len(acts)]
    for act, marker in zip(acts, "os^v"):
        for colour, r in zip(colours, rs):
            if r == 0 and act != acts[0]:
                continue  # r = 0 is the paper's model, whatever the activation: drawn once
            ax.semilogy(ds.beta, ds.gap_low.sel(activation=act, r=r), ms=3, lw=0.8,
                        marker="x" if r == 0 else marker, color=colour,
                        label="no block" if r == 0 else (act if r == rs[-1] else None))
    ax.axhline(float(knob_attr(ds, "tol")), color="0.4", ls="--", lw=0.8)
    ax.set(title=f"closest pairs: {LOW_QUANTILE:.0%} quantile of $1 + Z_T$", ylabel=r"$1 + Z_T$")
    ax.legend(loc="center right")
    for ax in axes[len(acts) + 1:]:
        ax.set_visible(False)
    for ax in grid[-1]:
        ax.set_xlabel(r"$\beta$")
        ax.xaxis.set_tick_params(labelbottom=True)
    return laid_out(fig, run_title("Two tokens with a feedforward block", ds))


FIGURE = Figure.declared(
    globals(), "ff_pairs", source="ours",
    description="feedforward blocks, two tokens: P(antipodal at T) vs beta for ReLU, GELU, erf "
                "blocks of strength r, with the limit (ours)",
    schema={"activations": choices(ACTIVATIONS), **BLOCK_SCHEMA},
    grid={"activation": "activations", "r": "rs", "beta": "betas"},
    fixed=("d", "n_traj", "L", "T", "attention", "tol", "ff_width"),
    work=trajectory_layer_work("activations", "rs", "betas"))
compute, cost = FIGURE.compute, FIGURE.cost
