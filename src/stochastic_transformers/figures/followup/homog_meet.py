r"""Where the two papers meet: two tokens with fixed and with random keys and queries.

With a fixed :math:`A = I` two tokens end antipodal with positive probability iff
:math:`\beta > \beta_c(d)` (main paper, Theorem 2); the follow-up resamples
:math:`A = WW'^\top` every layer.  At the same :math:`(N, d, \beta)` (:math:`\sigma_{qk} = 1`,
H = 1, :math:`\eta = L^{-1/2}`: both on the clock :math:`\tau = T`) we measure
:math:`P(1 + R_T < \text{tol})` for both, against their limits at T (backward Kolmogorov
equation) and at :math:`T = \infty` (scale function; the random-A coefficients are ours).
Our prediction: with random keys the antipodal end attracts iff
:math:`\frac{d-3}{2} - 2(d-1)E[q^2] + (d-3)\lambda < 0` (:func:`antipodal_attracting`), at
every :math:`\beta > 0` in d = 3 and at none of CRITERION_BETAS in d = 4: the fluctuation of
which token wins, :math:`\lambda`, grows with :math:`\beta` and pushes antipodal pairs apart.
"""

from __future__ import annotations

import functools

import numpy as np
import xarray as xr

from ... import simulate
from ...classification import outcome_counts
from ...config import configs_from_flat
from ...random_attention.homogenized import antipodal_attracting, antipodal_by, antipodal_limit
from ...stats import agreement_z
from ...style import palette
from ...theory import critical_beta
from ..base import add_outcome_fractions, cell_threads, laid_out
from ..knobs import all_of, integers, reals, whole_layers
from ..spec import Figure
from ..words import markdown_table, signed

MODEL_NAMES = ("stochastic", "random_attention")
_BETAS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_BASE = dict(d=(3, 4), T=10.0, tol=1e-3, seed=0)
SCALES = {
    "smoke": dict(_BASE, betas=(0.5, 2.0), n_traj=200, T=2.0, L=100, refine_Ls=(25, 100)),
    "quick": dict(_BASE, betas=_BETAS, n_traj=4000, L=400, refine_Ls=(100, 400, 1600)),
    "paper": dict(_BASE, betas=_BETAS, n_traj=20_000, L=1600, refine_Ls=(100, 400, 1600, 6400)),
}
#: The agreement verdict: every point within this many standard errors of the finite-T limit.
Z_MAX = 4.0
#: The betas of the random-key antipodal criterion in the summary, whatever the run's grid.
CRITERION_BETAS = tuple(0.25 * k for k in range(1, 33))
#: Seconds of simulation per trajectory-layer (both models averaged; the fixed-A chain stops
#: early), measured on the committed paper run (2,447 s of cell time, one thread a worker).
SECONDS_PER_WORK = 2.05e-7


@functools.lru_cache(maxsize=8)
def antipodal_criterion(d):
    """The random-key limit drift of atanh R at R = -1 at each of CRITERION_BETAS (negative:
    antipodal pairs form with positive probability)."""
    return tuple(antipodal_attracting(beta, int(d)) for beta in CRITERION_BETAS)


def cell(*, model, d, beta, n_traj, L, T, tol, seed):
    """One (model, d, beta): outcome counts at T of two uniform tokens."""
    kw = dict(n_traj=n_traj, L=L, T=T, seed=seed, n_threads=cell_threads(), tol=tol)
    if model != "stochastic":
        kw["model"] = "random_attention"
    counts = outcome_counts(simulate(*configs_from_flat(n_tokens=2, d=d, beta=beta, **kw)),
                            tol=tol)
    return {"n_antipodal": counts["antipodal"], "n_single": counts["single"],
            "n_unclustered": counts["unclustered"], "n_traj": n_traj}


def _refine_cell(*, L, n_traj, T, tol, d, beta, seed):
    """The random-A model at one depth (the refinement check)."""
    return cell(model="random_attention", d=d, beta=beta, n_traj=n_traj, L=L, T=T, tol=tol,
                seed=seed)


def run(knobs, sweeps):
    """The (model, d, beta) sweep; the refinement (random A at the smallest d and largest
    beta at each depth: its distance to the limit is its discretisation error); both limits
    on a fine beta grid; the z-scores against the limit at T."""
    fixed = {k: knobs[k] for k in ("n_traj", "L", "T", "tol")}
    ds = sweeps({"model": list(MODEL_NAMES), "d": list(knobs["d"]), "beta": list(knobs["betas"])},
                fixed=fixed, seed=knobs["seed"])
    refine = sweeps({"L": list(knobs["refine_Ls"])}, cell=_refine_cell, part="refine",
                    fixed=dict(n_traj=knobs["n_traj"], T=knobs["T"], tol=knobs["tol"],
                               d=min(knobs["d"]), beta=max(knobs["betas"])), seed=knobs["seed"])
    ds = add_outcome_fractions(ds, ("antipodal", "single", "unclustered"))
    T, tol = float(ds.attrs["fixed_T"]), float(ds.attrs["fixed_tol"])
    fine = np.unique(np.concatenate([np.linspace(0.05, ds.beta.values.max(), 16), ds.beta.values]))
    ds = ds.assign_coords(beta_fine=fine)
    p_t, p_inf, err = (np.empty((ds.sizes["model"], ds.sizes["d"], fine.size)) for _ in range(3))
    for a, model in enumerate(ds.model.values):
        for b, d in enumerate(ds.d.values):
            for c, beta in enumerate(fine):
                p, e = antipodal_by([T], beta, int(d), model=str(model), tol=tol)
                p_t[a, b, c], err[a, b, c] = p[0], e[0]
                p_inf[a, b, c] = antipodal_limit(beta, int(d), model=str(model))
    dims = ("model", "d", "beta_fine")
    ds["p_theory_T_fine"], ds["p_theory_inf_fine"], ds["theory_error"] = \
        (dims, p_t), (dims, p_inf), (dims, err)
    ds["p_theory_T"] = ds.p_theory_T_fine.sel(beta_fine=ds.beta.values).rename(beta_fine="beta") \
        .drop_vars("beta_fine", errors="ignore").assign_coords(beta=ds.beta.values)
    ds["z_score"] = agreement_z(ds.n_antipodal, ds.n_traj, ds.p_theory_T)
    ds = ds.assign_coords(refine_L=refine.L.values)
    ds["refine_n_antipodal"] = (("refine_L",), refine.n_antipodal.values)
    ds["refine_n_traj"] = (("refine_L",), refine.n_traj.values)
    d_ref, beta_ref = int(refine.attrs["fixed_d"]), float(refine.attrs["fixed_beta"])
    p_ref = float(antipodal_by([T], beta_ref, d_ref, tol=tol)[0][0])
    ds["refine_z"] = agreement_z(ds.refine_n_antipodal, ds.refine_n_traj,
                                 xr.full_like(ds.refine_n_antipodal, p_ref, dtype=float))
    ds.attrs.update(refine_d=d_ref, refine_beta=beta_ref, refine_p_theory=p_ref,
                    refine_cell_time_s=float(refine.attrs.get("cell_time_s", 0.0)))
    return ds


def work(knobs) -> float:
    """Trajectory-layers scheduled: the main grid (two models) plus the refinement cells."""
    main = 2 * len(knobs["d"]) * len(knobs["betas"]) * knobs["n_traj"] * knobs["L"] * knobs["T"]
    return float(main + knobs["n_traj"] * knobs["T"] * sum(knobs["refine_Ls"]))


def summary(ds) -> dict:
    """Agreement with the limit at T (every |z| within Z_MAX) per model; per d of the random
    keys the largest |z|, the beta of the largest fraction and whether the fraction at the
    largest beta is over two binomial s.e. below it; the depth refinement; in d = 4 the limits
    at infinity; the criterion's sign over CRITERION_BETAS per d."""
    z = ds.z_score
    fixed_z = float(np.abs(z.sel(model="stochastic")).max())
    out = {"n_traj": int(ds.n_traj.max()), "agree_fixed": bool(fixed_z <= Z_MAX),
           "agree_random": bool(float(np.abs(z.sel(model="random_attention")).max()) <= Z_MAX),
           "fixed_max_abs_z": fixed_z, "theory_error": float(ds.theory_error.max()),
           "max_unclustered": float(ds.p_unclustered.max()),
           "L": int(ds.attrs["fixed_L"]), "T": float(ds.attrs["fixed_T"]),
           "beta_c": {int(d): float(critical_beta(int(d))) for d in ds.d.values}}
    for d in ds.d.values:
        sub, key = ds.sel(model="random_attention", d=d), f"random_attention_d{int(d)}"
        p = sub.p_antipodal.values
        peak = int(np.argmax(p))
        se = np.sqrt(p[peak] * (1 - p[peak]) / float(sub.n_traj.values[peak]))
        out.update({f"{key}_max_abs_z": float(np.abs(sub.z_score).max()),
                    f"{key}_peak_beta": float(sub.beta.values[peak]),
                    f"{key}_falls_after_peak": bool(p[-1] < p[peak] - 2 * se)})
    # the refinement; its own |z| at the main grid's depth is an independent replicate, and
    # discretisation_explains: the deviation shrinks with depth and the deepest agrees
    zr = ds.refine_z.values
    d_ref, beta_ref = int(ds.attrs["refine_d"]), float(ds.attrs["refine_beta"])
    Ls = [int(v) for v in ds.refine_L.values]
    same = [i for i, v in enumerate(Ls) if v == out["L"]]
    out.update({"refine_d": d_ref, "refine_beta": beta_ref, "refine_Ls": Ls,
                "refine_z": [float(v) for v in zr], "refine_first_L": Ls[0],
                "refine_last_L": Ls[-1],
                "refine_first_abs_z": float(abs(zr[0])), "refine_last_abs_z": float(abs(zr[-1])),
                "refine_p": [float(v) for v in (ds.refine_n_antipodal / ds.refine_n_traj).values],
                "refine_p_theory": float(ds.attrs["refine_p_theory"]),
                "random_z_at_refine": float(abs(z.sel(d=d_ref, beta=beta_ref,
                                                      model="random_attention"))),
                "refine_has_main_L": bool(same),
                "refine_abs_z_at_main_L": float(abs(zr[same[0]])) if same else float("nan"),
                "discretisation_explains": bool(abs(zr[-1]) <= Z_MAX and abs(zr[-1]) < abs(zr[0]))})
    if 4 in ds.d.values:  # the headline: in d = 4 random keys remove the antipodal pairs
        inf = ds.p_theory_inf_fine.sel(d=4).max("beta_fine")
        out["stochastic_d4_max_p_inf"] = float(inf.sel(model="stochastic"))
        out["d4_random_inf_zero"] = bool(float(inf.sel(model="random_attention")) == 0.0)
        out["d4_fixed_inf_positive"] = out["stochastic_d4_max_p_inf"] > 0.0
    mu = {int(d): np.array(antipodal_criterion(int(d))) for d in ds.d.values}
    out["criterion"] = {"beta_min": CRITERION_BETAS[0], "beta_max": CRITERION_BETAS[-1],
                        "attracts_everywhere": {d: bool(np.all(m < 0)) for d, m in mu.items()},
                        "attracts_nowhere": {d: bool(np.all(m > 0)) for d, m in mu.items()}}
    return out


def phrases(stats) -> dict[str, str]:
    """The page's verdict (Markdown): A = I on the main paper's limit, random keys on ours
    (or whether refining the step shrinks the gap to within our bound), and no antipodal pairs in d = 4."""
    d4 = bool(stats.get("d4_random_inf_zero") and stats.get("d4_fixed_inf_positive"))
    random_ok = stats["agree_random"] or stats["discretisation_explains"]
    word = ("Reproduced" if stats["agree_fixed"] and random_ok and d4 else
            "Partly reproduced" if stats["agree_fixed"] or random_ok else "Not reproduced")
    fixed = (f"with a fixed $A = I$ every point lies within {stats['fixed_max_abs_z']:.1f} "
             "standard errors of the main paper's limit at $T$" if stats["agree_fixed"] else
             f"with a fixed $A = I$ some points miss the main paper's limit (by up to "
             f"{stats['fixed_max_abs_z']:.1f} standard errors)")
    random = (f"with random keys every point lies within our bound of {Z_MAX:g} standard errors "
              "of our limit" if stats["agree_random"] else
              f"with random keys the points follow our limit except at $d$ = {stats['refine_d']}, "
              f"$\\beta$ = {stats['refine_beta']:g}, {stats['random_z_at_refine']:.1f} standard "
              f"errors off at $L$ = {stats['L']}, a gap that "
              + ("shrinks" if stats["discretisation_explains"] else "does **not** shrink")
              + f" to within our bound as the step is refined ({stats['refine_last_abs_z']:.1f} at $L$ = "
              f"{stats['refine_last_L']})")
    end = ("in $d = 4$ the random keys leave no antipodal pair at $T = \\infty$, where $A = I$ "
           f"keeps up to {stats['stochastic_d4_max_p_inf']:.0%}" if d4 else
           "in $d = 4$ the limits at $T = \\infty$ are not what the proposition says")
    return {"verdict": f"**{word}:** {fixed}; {random}; {end}."}


def table(stats) -> str:
    """The depth refinement: the fraction antipodal at each depth and its distance to the
    limit in standard errors, as Markdown."""
    return markdown_table(["layers per unit time", *(f"{L:,}" for L in stats["refine_Ls"])], [
        ["fraction antipodal at $T$", *(f"{p:.1%}" for p in stats["refine_p"])],
        [f"against the limit, {stats['refine_p_theory']:.1%} (s.e.)",
         *(signed(z, 1) for z in stats["refine_z"])]])


def plot(ds):
    """One panel per d: both models' fractions at T with their limits at T (solid) and at
    infinity (dashed); then the random-key chain's depth refinement, and the legend."""
    import matplotlib.pyplot as plt

    colours = dict(zip(MODEL_NAMES, palette(2)))
    labels = {"stochastic": "fixed A = I (main paper)",
              "random_attention": "random A = W W'$^T$ (follow-up)"}
    n_d, ylabel = ds.sizes["d"], r"$P(1 + R_T < \mathrm{tol})$"
    fig, axes = plt.subplots((n_d + 3) // 2, 2, figsize=(7.6, 3.3 * ((n_d + 3) // 2)),
                             squeeze=False)
    axes = axes.ravel()
    for ax, d in zip(axes, ds.d.values):
        for model, colour in colours.items():
            sub = ds.sel(model=model, d=d)
            p = sub.p_antipodal.values
            ax.errorbar(sub.beta, p, yerr=np.vstack([p - sub.p_antipodal_low.values,
                                                     sub.p_antipodal_high.values - p]),
                        fmt="o", ms=4, capsize=2, lw=0.9, color=colour, label=labels[model])
            ax.plot(ds.beta_fine, sub.p_theory_T_fine, color=colour, lw=1.2)
            ax.plot(ds.beta_fine, sub.p_theory_inf_fine, color=colour, lw=1.0, ls="--")
        ax.set(xlabel=r"$\beta$", ylabel=ylabel, ylim=(-0.01, None),
               title=f"two tokens, d = {int(d)}")
    ax, key = axes[n_d], axes[n_d + 1]
    n = ds.refine_n_traj.values
    p = ds.refine_n_antipodal.values / n
    ax.errorbar(ds.refine_L, p, yerr=2 * np.sqrt(p * (1 - p) / n), fmt="o-", ms=4, capsize=2,
                color=colours["random_attention"])
    ax.axhline(float(ds.attrs["refine_p_theory"]), color="0.3", lw=1.2)
    ax.set(xscale="log", xlabel="layers per unit time L", ylabel=ylabel,
           title=f"random A, d = {ds.attrs['refine_d']}, $\\beta$ = "
                 f"{ds.attrs['refine_beta']:g}: finer steps")
    handles = axes[0].get_legend_handles_labels()[0] + [
        plt.Line2D([], [], color="0.3", lw=1.2), plt.Line2D([], [], color="0.3", ls="--")]
    key.legend(handles, [*labels.values(), f"limit at T = {float(ds.attrs['fixed_T']):g}",
                         r"limit at $T = \infty$"], loc="center",
               title=f"{int(ds.n_traj.max()):,} pairs a point; bars: 95%")
    for ax in axes[n_d + 1:]:
        ax.axis("off")
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_meet", source="followup",
    description="two tokens, fixed vs random keys and queries: P(antipodal) against beta for "
                "d = 3, 4, with both limits",
    # dimensions of at least 3 (the random keys' limit), betas up to 20, and refinement
    # depths that put T on whole layers
    schema={"d": integers(3), "betas": reals(0.0, 20.0),
            "refine_Ls": all_of(integers(1), whole_layers("T", "refine_Ls"))})
compute, cost = FIGURE.compute, FIGURE.cost
