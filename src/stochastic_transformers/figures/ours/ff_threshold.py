r"""Feedforward blocks: the antipodal threshold :math:`\beta_c(d, r)` of an odd block (ours).

With an odd activation (erf) -1 stays a fixed point of the two-token overlap, and near it
:math:`\log(1 + Z)` moves like a Brownian motion with drift :math:`\lambda_-(\beta, d, r)`
(:func:`stochastic_transformers.feedforward.boundary_at_minus_one`): -1 attracts iff
:math:`\lambda_- < 0`, above :func:`stochastic_transformers.feedforward.critical_beta`.  The
chain measures :math:`\lambda_-` from :math:`1 + Z_0 = ` ``gap0`` at depth scales ``Ls``
:math:`= (L, 4L)`, extrapolated to :math:`(4\hat\lambda_{4L} - \hat\lambda_L)/3` (a layer's
noise is symmetric, so the bias is :math:`O(1/L)`); the measured threshold is the root of a
straight line in :math:`\mathrm{sech}^2\beta`, in which the limit's exponent is affine, through
the extrapolated exponents (:func:`fitted_root`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ... import feedforward, simulate
from ...activations import ODD_ACTIVATIONS
from ...config import RunConfig
from ...stats import weighted_least_squares, z_digest
from ...style import palette
from ..base import cell_threads, knob_attr, laid_out
from ..knobs import all_of, choice, integer, integers, real, whole_layers
from ..spec import Figure
from ..words import markdown_table, signed, verdict
from .ff_pairs import BLOCK_SCHEMA, block_model


def _coarse_and_fine(name, value, knobs):
    """Two depth scales, the second four times the first (the extrapolation's ratio)."""
    if len(value) != 2 or value[1] != 4 * value[0]:
        raise ValueError(f"{name} must be two depth scales (L, 4L); got {value!r}")
    return value


_COMMON = dict(activation="erf", attention="softmax", ff_width=8, gap0=1e-12, seed=0)
SCALES = {
    "smoke": dict(_COMMON, d=(4,), rs=(0.0, 1.0), betas=(0.2, 0.6, 1.0), n_traj=200, Ls=(20, 80),
                  T=0.5),
    "quick": dict(_COMMON, d=(4, 6), rs=(0.0, 0.5, 1.0, 4.0), betas=tuple(np.round(
        np.linspace(0.0, 1.6, 9), 2)), n_traj=2000, Ls=(100, 400), T=1.0),
    "paper": dict(_COMMON, d=(4, 6), rs=(0.0, 0.1, 0.5, 1.0, 4.0), betas=tuple(np.round(
        np.linspace(0.0, 1.6, 17), 2)), n_traj=10_000, Ls=(100, 400), T=1.0)}
#: Points on each side of the change of sign used by the straight-line fit of the root.
FIT_POINTS = 2
#: |z| of the measured threshold against the theory below which a (d, r) agrees.
AGREE_Z = 3.0


def cell(*, d, r, beta, activation, n_traj, L, T, attention, ff_width, gap0, seed):
    """One (d, r, beta) point: mean and standard error of the exponent
    :math:`[\\log(1+Z_T) - \\log(1+Z_0)]/T` from :math:`1 + Z_0 = ` ``gap0``."""
    c, s = math.sqrt(gap0 / 2.0), math.sqrt(1.0 - gap0 / 2.0)
    x0 = np.zeros((2, d))
    x0[:, :2] = [(c, -s), (c, s)]
    model = block_model(d=d, beta=beta, attention=attention, r=r, ff_width=ff_width,
                        activation=activation)
    ds = simulate(model, RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=T, seed=seed, x0=x0,
                                   stop_level=0.0, n_threads=cell_threads()))
    rate = (np.log(ds.one_plus_overlap.values) - math.log(gap0)) / T
    return {"exponent": float(rate.mean()), "exponent_se": float(rate.std(ddof=1) / math.sqrt(n_traj)),
            "gap_max": float(ds.one_plus_overlap.values.max()), "n_traj": n_traj}


def fitted_root(betas, rate, se, points=FIT_POINTS):
    """Root in beta of a weighted straight line (:func:`stats.weighted_least_squares`) in
    u = sech^2 beta, in which the limit's exponent is affine, through the ``points`` values on
    each side of the first change of sign of ``rate``, and its standard error by the delta
    method; ``(nan, nan)`` without a change of sign or with the root outside 0 < u < 1."""
    sign = np.sign(rate)
    change = np.flatnonzero(sign[:-1] * sign[1:] < 0)
    if change.size == 0:
        return float("nan"), float("nan")
    k = int(change[0])
    lo, hi = max(0, k - points + 1), min(len(betas), k + points + 1)
    u = np.cosh(np.asarray(betas[lo:hi], dtype=float)) ** -2.0
    (a, b), cov, _ = weighted_least_squares(np.stack([np.ones_like(u), u], axis=1),
                                            rate[lo:hi], se[lo:hi])
    root, grad = -a / b, np.array([-1.0 / b, a / b**2])
    if not 0.0 < root < 1.0:
        return float("nan"), float("nan")
    # beta = arccosh(u^(-1/2)), d beta / du = -1 / (2u sqrt(1 - u))
    return (float(np.arccosh(root**-0.5)),
            float(math.sqrt(grad @ cov @ grad) / (2.0 * root * math.sqrt(1.0 - root))))


def theory_threshold(d, r, activation) -> float:
    """:func:`feedforward.critical_beta`, NaN where -1 attracts at every beta (no threshold)."""
    if feedforward.attracts_at_every_beta(int(d), float(r), activation):
        return float("nan")
    return feedforward.critical_beta(int(d), float(r), activation)


def finish(ds, knobs):
    """The extrapolated ``exponent_limit`` (``_se``), the exact ``exponent_theory``, the
    deviations ``z_score`` and ``z_score_limit``; per (d, r) the theory ``beta_c`` (curve
    ``beta_c_fine``), the measured ``beta_c_sim`` (NaN without a change of sign, ``_se``)
    and ``beta_c_z``."""
    act, betas = knobs["activation"], ds.beta.values
    # Richardson: (4 x_{4L} - x_L) / 3 removes an O(1/L) bias; the standard errors combine.
    coarse, fine = ds.sel(L=ds.L.values[0]), ds.sel(L=ds.L.values[1])
    ds["exponent_limit"] = (4.0 * fine.exponent - coarse.exponent) / 3.0
    ds["exponent_limit_se"] = np.sqrt(16.0 * fine.exponent_se**2 + coarse.exponent_se**2) / 3.0
    ds["exponent_theory"] = (("d", "r", "beta"), np.array(
        [[[feedforward.boundary_at_minus_one(float(b), int(d), float(r), act)["exponent"]
           for b in betas] for r in ds.r.values] for d in ds.d.values]))
    ds["z_score"] = (ds.exponent - ds.exponent_theory) / ds.exponent_se
    ds["z_score_limit"] = (ds.exponent_limit - ds.exponent_theory) / ds.exponent_limit_se
    ds = ds.assign_coords(r_fine=np.linspace(0.0, float(ds.r.max()), 81))
    for name, rs in (("beta_c", "r"), ("beta_c_fine", "r_fine")):
        ds[name] = (("d", rs), np.array([[theory_threshold(d, r, act) for r in ds[rs].values]
                                         for d in ds.d.values], dtype=float))
    return with_roots(ds)


def with_roots(ds):
    """``ds`` with ``beta_c_sim`` (``_se``), ``beta_c_z`` by :func:`fitted_root`, found anew."""
    roots = np.array([[fitted_root(ds.beta.values, ds.exponent_limit.sel(d=d, r=r).values,
                                   ds.exponent_limit_se.sel(d=d, r=r).values)
                       for r in ds.r.values] for d in ds.d.values])
    ds = ds.assign(beta_c_sim=(("d", "r"), roots[..., 0]), beta_c_sim_se=(("d", "r"), roots[..., 1]))
    return ds.assign(beta_c_z=(ds.beta_c_sim - ds.beta_c) / ds.beta_c_sim_se)


#: Seconds of simulation per trajectory-layer, measured on the committed paper run
#: (results/ff_threshold_paper.nc; the chain starts near -1, where the stable forms of
#: :func:`stochastic_transformers.activations.phi_pair` cost more).
SECONDS_PER_WORK = 1.55e-6


def work(knobs) -> float:
    """Trajectory-layers a run schedules: n_traj * L * T per cell, summed over ``Ls``."""
    cells = len(knobs["d"]) * len(knobs["rs"]) * len(knobs["betas"])
    return float(knobs["n_traj"] * knobs["T"] * sum(knobs["Ls"]) * cells)


def _falls_with_r(ds) -> bool:
    """For each d the measured thresholds never rise with r beyond 2 standard errors of a
    step, and the last lies 3 standard errors (of the largest step) below the first."""
    falls = True
    for d in ds.d.values:
        sim, se = ds.beta_c_sim.sel(d=d).values, ds.beta_c_sim_se.sel(d=d).values
        ok = np.isfinite(sim)
        if ok.sum() < 2:
            return False
        step_se = np.sqrt(se[ok][1:] ** 2 + se[ok][:-1] ** 2)
        falls &= bool(np.all(np.diff(sim[ok]) < 2 * step_se))
        falls &= bool(sim[ok][-1] < sim[ok][0] - 3 * step_se.max())
    return falls


def summary(ds) -> dict:
    """The thresholds by (d, r) (theory, measured, its standard error, z); the exponents'
    deviations from the limit's at each depth scale and extrapolated; ``thresholds_agree``
    (every z within :data:`AGREE_Z`, and no measured threshold where the theory has none), the
    chi-square p of all z together and ``threshold_falls_with_r`` (:func:`_falls_with_r`)."""
    from scipy.stats import chi2, norm

    ds = with_roots(ds)
    rows = {f"{int(d)}_{float(r):g}": {k: float(ds[v].sel(d=d, r=r)) for k, v in (
        ("theory", "beta_c"), ("measured", "beta_c_sim"), ("se", "beta_c_sim_se"), ("z", "beta_c_z"))}
        for d, r in itertools.product(ds.d.values, ds.r.values)}
    z_thr = np.array([v["z"] for v in rows.values() if np.isfinite(v["z"])])
    none_match = all(np.isfinite(v["theory"]) == np.isfinite(v["measured"]) for v in rows.values())
    by_l = {}
    for L in ds.L.values:
        digest = z_digest(ds.z_score.sel(L=L).values)
        by_l[int(L)] = {"mean_bias": float((ds.exponent - ds.exponent_theory).sel(L=L).mean()),
                        "max_abs_z": digest["max_abs_z"], "share_within_2se": digest["share_within"]}
    limit = z_digest(ds.z_score_limit.values)
    zl = ds.z_score_limit.values[np.isfinite(ds.z_score_limit.values)]
    return {
        "thresholds": rows,
        "max_abs_threshold_z": float(np.abs(z_thr).max()) if z_thr.size else float("nan"),
        "n_thresholds": int(z_thr.size), "threshold_chi2_p": float(chi2.sf(z_thr @ z_thr, z_thr.size)),
        "by_L": by_l, "coarse_L": int(ds.L.values[0]),
        "max_abs_limit_z": limit["max_abs_z"], "share_limit_within_2se": limit["share_within"],
        # All extrapolated points together, and the largest against Bonferroni over them.
        "n_limit": int(zl.size), "limit_chi2_p": float(chi2.sf(zl @ zl, zl.size)),
        "limit_max_bonferroni_p": float(min(1.0, zl.size * 2 * norm.sf(np.abs(zl).max()))),
        "thresholds_agree": bool(z_thr.size and np.all(np.abs(z_thr) < AGREE_Z) and none_match),
        "threshold_falls_with_r": _falls_with_r(ds),
        "n_traj": int(ds.n_traj.values.max()), "T": float(knob_attr(ds, "T")),
        "gap0": float(knob_attr(ds, "gap0")), "largest_gap": float(ds.gap_max.max())}


def phrases(stats) -> dict[str, str]:
    """The page's plain-text verdict, which the chapter quotes too: ``verdict``."""
    bound = f"within {AGREE_Z:g} standard errors"
    return {"verdict": verdict([
        (stats["thresholds_agree"], f"all {stats['n_thresholds']} measured thresholds are "
         f"consistent with the formula, each {bound} (the largest deviation is "
         f"{stats['max_abs_threshold_z']:.1f}; all together, chi-square p = "
         f"{stats['threshold_chi2_p']:.2f}), and where the formula has none, none is measured",
         f"not every measured threshold lies {bound} of the formula"),
        (stats["threshold_falls_with_r"], "in each dimension shown the threshold falls as the "
         "block grows", "the measured threshold does not fall steadily with r in every "
         "dimension shown")])}


def tables(stats) -> dict[str, str]:
    """The page's folded tables (Markdown): ``thresholds`` by (d, r), in words where there is
    none, and ``exponents`` (their deviations from the limit's by depth scale)."""
    rows = []
    for key, v in stats["thresholds"].items():
        theory = ("none: −1 attracts at every β" if math.isnan(v["theory"]) else
                  "none: −1 attracts at no β" if math.isinf(v["theory"]) else f"{v['theory']:.3f}")
        measured = ("none: no change of sign" if math.isnan(v["measured"]) else
                    f"{v['measured']:.3f} ± {v['se']:.3f}")
        rows.append([*key.split("_"), theory, measured,
                     signed(v["z"], 1) if math.isfinite(v["z"]) else None])
    thresholds = markdown_table(["d", "r", "theory β_c", "measured β_c", "z"], rows, numeric=True)
    rows = [[f"L = {L}", signed(v["mean_bias"], 3), f"{v['share_within_2se']:.0%}",
             f"{v['max_abs_z']:.1f}"] for L, v in stats["by_L"].items()]
    rows.append(["extrapolated", None, f"{stats['share_limit_within_2se']:.0%}",
                 f"{stats['max_abs_limit_z']:.1f}"])
    exponents = markdown_table(["exponents", "mean minus the limit's", "within 2 standard "
                                "errors", "largest deviation (standard errors)"], rows, numeric=True)
    return {"thresholds": thresholds, "exponents": exponents}


def plot(ds):
    """Top: for the smallest d, the exponents at -1 against beta, measured at the coarser
    depth scale (open markers) and extrapolated (filled, with 2-standard-error bars), over
    the exact ones, one colour per r.  Bottom: beta_c(d, r) against r, theory and measured."""
    import matplotlib.pyplot as plt

    ds = with_roots(ds)
    fig, (ax, axb) = plt.subplots(2, 1, figsize=(7.2, 8.2), height_ratios=(1.15, 1))
    d_show = int(ds.d.values[0])
    coarse, fine = (int(v) for v in ds.L.values)
    for colour, r in zip(palette(ds.r.size), ds.r.values):
        sub = ds.sel(d=d_show, r=r)
        ax.plot(sub.beta, sub.exponent.sel(L=coarse), "o", ms=3, mfc="none", color=colour)
        ax.errorbar(sub.beta, sub.exponent_limit, yerr=2 * sub.exponent_limit_se, fmt="o", ms=3,
                    color=colour, capsize=2, lw=1, label=f"r = {r:g}")
        ax.plot(sub.beta, sub.exponent_theory, color=colour, lw=1.2)
    ax.plot([], [], "o", ms=3, mfc="none", color="0.4", label=f"measured at L = {coarse}")
    ax.plot([], [], "o", ms=3, color="0.4", label=f"extrapolated from L = {coarse}, {fine}")
    ax.axhline(0.0, color="0.4", lw=0.8)
    ax.set(xlabel=r"$\beta$", ylabel=r"exponent $\lambda_-$ at $-1$",
           title=f"d = {d_show}: −1 attracts where the exponent is negative")
    ax.legend(ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    # Bottom: the theory's curves, ending where -1 starts to attract at every beta (marked).
    for marker, d in zip("os^v", ds.d.values):
        curve = ds.beta_c_fine.sel(d=d)
        axb.plot(ds.r_fine, curve, color="0.3", lw=1.2)
        axb.errorbar(ds.r, ds.beta_c_sim.sel(d=d), yerr=2 * ds.beta_c_sim_se.sel(d=d), fmt=marker,
                     ms=5, capsize=2, label=f"d = {int(d)}, measured")
        gone = np.flatnonzero(np.isnan(curve.values))
        if gone.size:
            axb.annotate(f"d = {int(d)}: from here on\n−1 attracts at every β",
                         (float(ds.r_fine[gone[0]]), 0.0), xytext=(8, 4),
                         textcoords="offset points", va="bottom")
    axb.plot([], [], color="0.3", lw=1.2, label=r"theory $\beta_c(d, r)$")
    axb.set(xlabel="block strength r", ylabel=r"$\beta_c$", ylim=(0.0, None),
            title=f"antipodal threshold of an {knob_attr(ds, 'activation')} block")
    axb.legend()
    return laid_out(fig, f"Odd block: the threshold (t = {float(knob_attr(ds, 'T')):g} from "
                         f"1 + Z = {float(knob_attr(ds, 'gap0')):g}, "
                         f"{int(ds.n_traj.values.max()):,} trajectories a point)")


FIGURE = Figure.declared(
    globals(), "ff_threshold", source="ours",
    description="feedforward blocks: the antipodal threshold beta_c(d, r) of an erf block, "
                "measured from the exponent at -1 (ours)",
    schema={"d": integers(3), "activation": choice(ODD_ACTIVATIONS), **BLOCK_SCHEMA,
            "gap0": real(0.0, 1e-6, strict_min=True), "n_traj": integer(2),
            "Ls": all_of(integers(1, distinct=True, increasing=True), _coarse_and_fine,
                         whole_layers("T", "Ls"))},
    grid={"d": "d", "r": "rs", "beta": "betas", "L": "Ls"},
    fixed=("activation", "n_traj", "T", "attention", "ff_width", "gap0"))
compute, cost = FIGURE.compute, FIGURE.cost
