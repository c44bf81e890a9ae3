r"""Where the two papers meet: two tokens with fixed and with random keys and queries.

The main paper's Theorem 2: two tokens with a fixed :math:`A = I` end antipodal with positive
probability iff :math:`\beta > \beta_c(d)`.  The follow-up resamples :math:`A = WW'^\top` in
every layer.  At the same :math:`(N, d, \beta)` (and :math:`\sigma_{qk} = 1`, H = 1,
:math:`\eta = L^{-1/2}`, so both run on the clock :math:`\tau = T`), this figure measures
:math:`P(1 + R_T < \text{tol})` for both models and draws, for both, the limit at :math:`T`
(backward Kolmogorov equation of the two-token diffusion) and at :math:`T = \infty`
(scale function), all from :mod:`stochastic_transformers.homogenized` (the random-A
coefficients are our derivation; with a fixed A the same code gives the main paper's
closed form, tested).

What the theory predicts (ours, not in either paper): with random keys and queries the
antipodal end attracts iff :math:`\frac{d-3}{2} - 2(d-1)E[q^2] + (d-3)\lambda < 0`
(:func:`stochastic_transformers.homogenized.antipodal_attracting`), which holds at every
:math:`\beta > 0` in d = 3 and at no :math:`\beta` of the grid in d = 4: the fluctuation of
which token wins, :math:`\lambda`, grows with :math:`\beta` and pushes antipodal pairs apart.
"""

from __future__ import annotations

import numpy as np

from .. import simulate
from .._validation import check_int, check_real
from ..classification import outcome_counts
from ..homogenized import antipodal_by, antipodal_limit
from ..stats import agreement_z
from ..sweep import add_fraction, run_sweep
from ._common import cell_threads, default_scheduler, load_committed, resolve_scale

ID = "homog_meet"
CELL_VERSION = "1"
DESCRIPTION = ("two tokens, fixed vs random keys and queries: P(antipodal) against beta for "
               "d = 3, 4, with both limits")

MODEL_NAMES = ("stochastic", "random_attention")
_BASE = dict(d=(3, 4), L=100, T=30.0, tol=1e-3, seed=0)
SCALES = {
    "smoke": dict(_BASE, betas=(0.5, 2.0), n_traj=200, T=5.0),
    "quick": dict(_BASE, betas=(0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0), n_traj=4000),
    "paper": dict(_BASE, betas=(0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0), n_traj=20_000),
}
#: The agreement verdict: every point within this many standard errors of the finite-T limit.
Z_MAX = 4.0


def cell(*, model, d, beta, n_traj, L, T, tol, seed):
    """One (model, d, beta): outcome counts at T of two uniform tokens."""
    kw = dict(n_traj=n_traj, L=L, T=T, seed=seed, n_threads=cell_threads(), tol=tol)
    if model == "stochastic":
        ds = simulate(2, d, beta, **kw)
    else:
        ds = simulate(2, d, beta, model="random_attention", **kw)
    counts = outcome_counts(ds, tol=tol)
    return {"n_antipodal": counts["antipodal"], "n_single": counts["single"],
            "n_unclustered": counts["unclustered"], "n_traj": n_traj}


def compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides):
    """Run the (model, d, beta) sweep; attach both limits for both models."""
    knobs = resolve_scale(SCALES, scale, overrides)
    ds_ = tuple(check_int("d", v, 3) for v in knobs["d"])
    betas = tuple(check_real("betas", b, 0.0, 20.0) for b in knobs["betas"])
    fixed = dict(n_traj=knobs["n_traj"], L=knobs["L"], T=knobs["T"], tol=knobs["tol"])
    ds = run_sweep(cell, {"model": list(MODEL_NAMES), "d": list(ds_), "beta": list(betas)},
                   fixed=fixed, seed=check_int("seed", knobs["seed"], 0), name=f"{ID}-{scale}",
                   cache_dir=cache_dir, scheduler=default_scheduler(scale, scheduler),
                   progress=progress)
    return finish(ds, scale)


def finish(ds, scale):
    """Fractions with Wilson bands, the limits at T and at infinity, z-scores."""
    for outcome in ("antipodal", "single", "unclustered"):
        ds = add_fraction(ds, f"n_{outcome}", "n_traj", f"p_{outcome}")
    T, tol = float(ds.attrs["fixed_T"]), float(ds.attrs["fixed_tol"])
    betas = ds.beta.values
    fine = np.unique(np.concatenate([np.linspace(0.05, betas.max(), 40), betas]))
    ds = ds.assign_coords(beta_fine=fine)
    p_t = np.empty((ds.sizes["model"], ds.sizes["d"], fine.size))
    p_inf = np.empty_like(p_t)
    err = np.empty_like(p_t)
    for a, model in enumerate(ds.model.values):
        for b, d in enumerate(ds.d.values):
            for c, beta in enumerate(fine):
                p, e = antipodal_by([T], beta, int(d), model=str(model), tol=tol)
                p_t[a, b, c], err[a, b, c] = p[0], e[0]
                p_inf[a, b, c] = antipodal_limit(beta, int(d), model=str(model))
    ds["p_theory_T_fine"] = (("model", "d", "beta_fine"), p_t)
    ds["p_theory_inf_fine"] = (("model", "d", "beta_fine"), p_inf)
    ds["theory_error"] = (("model", "d", "beta_fine"), err)
    ds["p_theory_T"] = ds.p_theory_T_fine.sel(beta_fine=ds.beta.values).rename(beta_fine="beta") \
        .drop_vars("beta_fine", errors="ignore").assign_coords(beta=ds.beta.values)
    ds["z_score"] = agreement_z(ds.n_antipodal, ds.n_traj, ds.p_theory_T)
    ds.attrs.update(scale=scale, figure=ID)
    return ds


def load_paper_result():
    return load_committed(ID, "paper")


def summary(ds) -> dict:
    """Agreement with the finite-T limit, and the comparison the figure is about."""
    z = ds.z_score
    out = {"max_abs_z": float(np.abs(z).max()), "n_points": int(z.size),
           "n_traj": int(ds.n_traj.max()), "agree": bool(float(np.abs(z).max()) <= Z_MAX),
           "theory_error": float(ds.theory_error.max()),
           "max_unclustered": float(ds.p_unclustered.max())}
    for model in ds.model.values:
        for d in ds.d.values:
            sub = ds.sel(model=model, d=d)
            key = f"{model}_d{int(d)}"
            out[f"{key}_max_p"] = float(sub.p_antipodal.max())
            out[f"{key}_max_p_inf"] = float(sub.p_theory_inf_fine.max())
            out[f"{key}_max_abs_z"] = float(np.abs(sub.z_score).max())
    # The headline: in d = 4 random keys remove antipodal pairs the fixed A = I keeps.
    if 4 in ds.d.values:
        out["d4_random_inf_zero"] = bool(float(ds.sel(model="random_attention", d=4)
                                               .p_theory_inf_fine.max()) == 0.0)
        out["d4_fixed_inf_positive"] = bool(float(ds.sel(model="stochastic", d=4)
                                                  .p_theory_inf_fine.max()) > 0.0)
    return out


def plot(ds):
    """One panel per d: both models' fractions at T, their limits at T (solid) and at infinity
    (dashed)."""
    import matplotlib.pyplot as plt

    from ..style import palette

    colours = dict(zip(MODEL_NAMES, palette(2)))
    labels = {"stochastic": "fixed A = I (main paper)",
              "random_attention": "random A = W W'$^T$ (follow-up)"}
    fig, axes = plt.subplots(1, ds.sizes["d"], figsize=(5.2 * ds.sizes["d"], 4.0), squeeze=False)
    T = float(ds.attrs["fixed_T"])
    for ax, d in zip(axes[0], ds.d.values):
        for model in MODEL_NAMES:
            sub = ds.sel(model=model, d=d)
            p = sub.p_antipodal.values
            yerr = np.vstack([p - sub.p_antipodal_low.values, sub.p_antipodal_high.values - p])
            ax.errorbar(sub.beta, p, yerr=yerr, fmt="o", ms=4, capsize=2, lw=0.9,
                        color=colours[model], label=labels[model])
            ax.plot(ds.beta_fine, sub.p_theory_T_fine, color=colours[model], lw=1.2)
            ax.plot(ds.beta_fine, sub.p_theory_inf_fine, color=colours[model], lw=1.0, ls="--")
        ax.plot([], [], color="0.3", lw=1.2, label=f"limit at T = {T:g}")
        ax.plot([], [], color="0.3", lw=1.0, ls="--", label=r"limit at $T = \infty$")
        ax.set(xlabel=r"$\beta$", ylabel=r"$P(1 + R_T < \mathrm{tol})$", ylim=(-0.01, None),
               title=f"two tokens, d = {int(d)} ({int(ds.n_traj.max()):,} pairs a point)")
        ax.legend(fontsize=7.5, loc="upper left")
    fig.tight_layout()
    return fig
