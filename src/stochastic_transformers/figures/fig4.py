r"""Figure 4: the noise-induced clustering threshold of Proposition 1.

Hybrid model (paper eq. 7): the value matrix is the identity, shared by all layers,
and a scalar common noise scales the residual,
:math:`w_{n+1} = 1/L + \varepsilon\,\xi_{n+1}/\sqrt L`.  With unnormalised attention
and two tokens the limit overlap obeys Proposition 1's SDE, whose scale function is
integrable at exactly one end: the pair merges almost surely when
:math:`\varepsilon < \varepsilon_c(\beta) = \sqrt{2e^{-\beta}}` and ends antipodal
almost surely when :math:`\varepsilon > \varepsilon_c(\beta)`, whatever d.

The figure is the paper's phase diagram (colour = dominant outcome, intensity = its
fraction, dashed :math:`\varepsilon_c`), plus a panel the paper does not have: the
antipodal fraction against :math:`\varepsilon/\varepsilon_c(\beta)`, where the limit
theory predicts a step at 1 for every beta.
"""

from __future__ import annotations

import numpy as np

from .. import simulate, theory
from ..classification import outcome_counts
from ..sweep import add_fraction, run_sweep
from ._common import cell_threads, default_scheduler, resolve_scale

ID = "fig4"
DESCRIPTION = "hybrid model: dominant outcome in the (beta, eps) plane with eps_c(beta) (Prop. 1)"

SCALES = {
    "smoke": dict(betas=tuple(np.linspace(0.0, 4.0, 5)), epsilons=tuple(np.linspace(0.0, 2.0, 5)),
                  n_traj=100, L=20, T=20.0, d=3, tol=1e-3, seed=0,
                  check_point=(3.0, 1.0), check_L=(20, 50), check_n_traj=50, check_T=10.0),
    "quick": dict(betas=tuple(np.linspace(0.0, 5.0, 21)), epsilons=tuple(np.linspace(0.0, 2.0, 21)),
                  n_traj=1000, L=100, T=50.0, d=3, tol=1e-3, seed=0,
                  check_point=(3.0, 1.0), check_L=(30, 100, 300, 1000, 3000), check_n_traj=400, check_T=50.0),
    "paper": dict(betas=tuple(np.linspace(0.0, 5.0, 41)), epsilons=tuple(np.linspace(0.0, 2.0, 41)),
                  n_traj=1000, L=100, T=50.0, d=3, tol=1e-3, seed=0,
                  check_point=(3.0, 1.0), check_L=(30, 100, 300, 1000, 3000, 10000), check_n_traj=1000, check_T=50.0),
}

#: Cells with |log(eps / eps_c)| below this are "on the threshold" and left out of the
#: agreement count: there the limit dynamics is a time-changed Brownian motion that
#: needs far longer than T to settle.
BAND = 0.2


def cell(*, beta, epsilon, n_traj, L, T, d, tol, seed):
    """One (beta, eps) point: outcome counts of the hybrid two-token model at T (USA)."""
    ds = simulate(2, d, beta, n_traj=n_traj, L=L, T=T, model="hybrid", epsilon=epsilon,
                  attention="unnormalized", seed=seed, n_threads=cell_threads())
    counts = outcome_counts(ds, tol=tol)
    return {"n_single": counts["single"], "n_antipodal": counts["antipodal"],
            "n_unclustered": counts["unclustered"], "n_traj": n_traj}


def depth_cell(*, L, beta, epsilon, n_traj, T, d, tol, seed):
    """Outcome counts at one (beta, eps) point for depth scale ``L``: the depth check."""
    return cell(beta=beta, epsilon=epsilon, n_traj=n_traj, L=L, T=T, d=d, tol=tol, seed=seed)


def compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides):
    """Run the (beta, eps) sweep; returns ``p_single(beta, epsilon)``, ``p_antipodal``, ...

    Also runs the *depth check*: at ``check_point`` = (beta, eps) the outcome fractions
    for each depth scale in ``check_L`` (variables ``depth_p_*(check_L)``), which tells a
    discretisation effect of L = 100 from a disagreement with the limit.
    """
    knobs = resolve_scale(SCALES, scale, overrides)
    if min(knobs["betas"]) < 0 or min(knobs["epsilons"]) < 0:
        raise ValueError("betas and epsilons must be >= 0")
    fixed = {k: knobs[k] for k in ("n_traj", "L", "T", "d", "tol")}
    ds = run_sweep(cell, {"beta": [float(b) for b in knobs["betas"]],
                          "epsilon": [float(e) for e in knobs["epsilons"]]},
                   fixed=fixed, seed=knobs["seed"], name=f"{ID}-{scale}", cache_dir=cache_dir,
                   scheduler=default_scheduler(scale, scheduler), progress=progress)
    for outcome in ("single", "antipodal", "unclustered"):
        ds = add_fraction(ds, f"n_{outcome}", "n_traj", f"p_{outcome}")
    # Depth check: at one point where L = 100 departs from the limit, let L grow.
    beta_chk, eps_chk = (float(v) for v in knobs["check_point"])
    chk = run_sweep(depth_cell, {"L": [int(v) for v in knobs["check_L"]]},
                    fixed={"beta": beta_chk, "epsilon": eps_chk, "n_traj": knobs["check_n_traj"],
                           "T": knobs["check_T"], "d": knobs["d"], "tol": knobs["tol"]},
                    seed=knobs["seed"], name=f"{ID}-depth-{scale}", cache_dir=cache_dir,
                    scheduler=default_scheduler(scale, scheduler), progress=progress)
    for outcome in ("single", "antipodal", "unclustered"):
        chk = add_fraction(chk, f"n_{outcome}", "n_traj", f"p_{outcome}")
    for name in ("p_single", "p_antipodal", "p_unclustered", "p_antipodal_low", "p_antipodal_high",
                 "p_single_low", "p_single_high"):
        ds[f"depth_{name}"] = chk[name].rename(L="check_L")
    ds.attrs.update(check_beta=beta_chk, check_epsilon=eps_chk,
                    check_n_traj=knobs["check_n_traj"], check_T=knobs["check_T"])
    ds["epsilon_c"] = (("beta",), np.asarray(theory.critical_epsilon(ds.beta.values), dtype=float))
    ratio = ds.epsilon / ds.epsilon_c
    ds["p_antipodal_theory"] = (ratio > 1).astype(float)
    ds["dominant_antipodal"] = ds.p_antipodal > ds.p_single
    ds.attrs.update(scale=scale, figure=ID, band=BAND)
    return ds


def summary(ds) -> dict:
    """Share of cells, away from the threshold band, whose dominant outcome matches theory."""
    log_ratio = np.log(np.maximum(ds.epsilon.values[None, :], 1e-300)
                       / ds.epsilon_c.values[:, None])
    away = np.abs(log_ratio) > BAND
    predicted_anti = log_ratio > 0
    observed_anti = ds.dominant_antipodal.values
    agree = (predicted_anti == observed_anti) & away
    wrong = away & ~agree
    # Size of the random part of one step, eps e^beta / sqrt(L) (USA: |A| ~ e^beta).
    step = (ds.epsilon.values[None, :] * np.exp(ds.beta.values[:, None])
            / np.sqrt(float(ds.attrs.get("fixed_L", 100))))
    small = away & (step < 1.0)
    out = {"n_cells": int(away.size), "n_away": int(away.sum()),
           "share_agree": float(agree.sum() / max(away.sum(), 1)),
           "n_small_step": int(small.sum()),
           "share_agree_small_step": float((agree & small).sum() / max(small.sum(), 1)),
           "share_agree_large_step": float((agree & away & ~small).sum()
                                           / max((away & ~small).sum(), 1)),
           "n_wrong": int(wrong.sum()),
           "max_unclustered": float(ds.p_unclustered.max())}
    if wrong.any():
        bi, ei = np.nonzero(wrong)
        out["wrong_cells"] = [(float(ds.beta.values[i]), float(ds.epsilon.values[j]))
                              for i, j in zip(bi, ei)]
    return out


def plot(ds):
    """Phase diagram (left) and the collapse onto eps / eps_c (right)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    from ..style import palette

    single_c, anti_c = palette(10)[3], palette(10)[0]
    betas, eps = ds.beta.values, ds.epsilon.values
    p_s, p_a = ds.p_single.values, ds.p_antipodal.values
    dominant = np.where(p_a > p_s, 1, 0)
    strength = np.maximum(p_s, p_a)
    rgb = np.where(dominant[..., None] == 1, np.array(to_rgb(anti_c)), np.array(to_rgb(single_c)))
    # intensity = fraction of the dominant outcome: blend towards white as it drops
    image = 1.0 - strength[..., None] * (1.0 - rgb)
    has_check = "depth_p_single" in ds
    ncols = 3 if has_check else 2
    fig, axes = plt.subplots(1, ncols, figsize=(15.5 if has_check else 11, 4.4),
                             gridspec_kw={"width_ratios": [1.1, 1, 0.8][:ncols]})
    ax, ax2 = axes[0], axes[1]
    db, de = np.diff(betas).mean() if betas.size > 1 else 1, np.diff(eps).mean() if eps.size > 1 else 1
    ax.imshow(np.transpose(image, (1, 0, 2)), origin="lower", aspect="auto", interpolation="nearest",
              extent=(betas[0] - db / 2, betas[-1] + db / 2, eps[0] - de / 2, eps[-1] + de / 2))
    bf = np.linspace(betas[0], betas[-1], 300)
    ax.plot(bf, theory.critical_epsilon(bf), "k--", lw=1.5)
    ax.set_ylim(eps[0] - de / 2, eps[-1] + de / 2)
    ax.set_xlabel(r"$\beta$")
    ax.set_ylabel(r"$\varepsilon$")
    ax.set_title("(a) dominant outcome at T (intensity = its fraction)", fontsize=10)
    ax.legend(handles=[Patch(color=single_c, label="single cluster"),
                       Patch(color=anti_c, label="antipodal pair"),
                       plt.Line2D([], [], color="k", ls="--", label=r"$\varepsilon_c=\sqrt{2e^{-\beta}}$")],
              loc="upper right", fontsize=8, frameon=True)
    ratio = ds.epsilon.values[None, :] / ds.epsilon_c.values[:, None]
    shown = np.linspace(0, betas.size - 1, min(6, betas.size)).astype(int)
    colours = palette(len(shown))
    for colour, i in zip(colours, shown):
        lo = ds.p_antipodal_low.values[i]
        hi = ds.p_antipodal_high.values[i]
        ax2.fill_between(ratio[i], lo, hi, color=colour, alpha=0.25, lw=0)
        ax2.plot(ratio[i], p_a[i], "o-", ms=3, lw=1, color=colour, label=rf"$\beta$ = {betas[i]:.2g}")
    x = np.linspace(0, max(3.0, float(np.nanmax(ratio[shown]))), 400)
    ax2.plot(x, (x > 1).astype(float), "k-", lw=1.2, label="limit theory (step)")
    ax2.set_xlim(0, min(4.0, float(np.nanmax(ratio[shown]))))
    ax2.set_xlabel(r"$\varepsilon / \varepsilon_c(\beta)$")
    ax2.set_ylabel(r"$P(\mathrm{antipodal\ at\ } T)$")
    ax2.set_title("(b) antipodal fraction against the predicted threshold", fontsize=10)
    ax2.legend(fontsize=8, loc="lower right")
    if has_check:
        ax3 = axes[2]
        Ls = ds.check_L.values
        for name, colour, label in (("single", single_c, "single cluster"),
                                    ("antipodal", anti_c, "antipodal pair")):
            p = ds[f"depth_p_{name}"].values
            lo, hi = ds[f"depth_p_{name}_low"].values, ds[f"depth_p_{name}_high"].values
            ax3.fill_between(Ls, lo, hi, color=colour, alpha=0.25, lw=0)
            ax3.plot(Ls, p, "o-", color=colour, ms=4, label=label)
        ax3.plot(Ls, ds.depth_p_unclustered.values, "s:", color="0.4", ms=3, label="unclustered")
        ax3.set_xscale("log")
        ax3.set_ylim(-0.03, 1.03)
        ax3.set_xlabel("depth scale L")
        ax3.set_ylabel("fraction at T")
        ax3.set_title(rf"(c) depth check at $\beta$ = {ds.attrs['check_beta']:g}, "
                      rf"$\varepsilon$ = {ds.attrs['check_epsilon']:g} (theory: antipodal)", fontsize=10)
        ax3.legend(fontsize=8, loc="center right")
    n = int(ds.n_traj.values.max())
    fig.suptitle(f"Hybrid model, USA, N = 2, d = {ds.attrs.get('fixed_d', 3)}, "
                 f"L = {ds.attrs.get('fixed_L', '?')}, T = {ds.attrs.get('fixed_T', '?')}, "
                 f"{n:,} trajectories per cell", fontsize=10)
    fig.tight_layout()
    return fig
