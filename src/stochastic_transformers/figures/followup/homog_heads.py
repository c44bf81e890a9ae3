r"""Many heads average the noise: from the diffusive to the ballistic limit at a fixed depth.

In the follow-up's layer the H heads' weights are independent, so the increment
:math:`\frac\eta H\sum_h B_{\theta_h}` has the mean field :math:`\eta F` and a fluctuation of
covariance :math:`\frac{\eta^2}{H}\operatorname{Cov}\xi_\theta`: the noise per unit time is
:math:`\alpha\propto\eta/H`, and the follow-up's regimes are ranges of :math:`t_L\alpha`.  At a
fixed step and depth, more heads should then take the chain from the SDE to the ODE.  The
turning group of :mod:`.homog_limits` with random keys and queries
(:math:`\sigma_{qk} = 1`, :math:`\bar A = I`) runs L layers for every H and value noise
:math:`\sigma`; the spread of its final tokens, :math:`S_H = \frac1N\sum_iE|x_i^L - Ex_i^L|^2`,
is set against :func:`~stochastic_transformers.random_attention.limits.linear_noise_spread`
(ours): :math:`HS_H \to S_A + \sigma^2S_V` as H grows.  ``sigma = 0`` leaves the keys'
and queries' noise alone.
"""

from __future__ import annotations

import math

import numpy as np

from ... import simulate
from ...config import ModelConfig, RunConfig
from ...random_attention.limits import (linear_noise_spread, turning_mean_value,
                                        upper_hemisphere_tokens)
from ...stats import log_log_slope, normal_quantile, weighted_least_squares
from ...style import palette
from ..base import cell_threads, laid_out
from ..knobs import integer, integers, real, reals
from ..spec import Figure
from ..words import listed, markdown_table

_BASE = dict(d=3, n_tokens=4, beta=1.0, attract=0.5, turn=1.0, t_final=2.0, sigmas=(0.0, 1.0, 4.0),
             seed=0)
SCALES = {
    "smoke": dict(_BASE, heads=(1, 4, 16), L=32, n_traj=400, n_samples=128, n_batches=4),
    "quick": dict(_BASE, heads=(1, 2, 4, 8, 16, 32), L=128, n_traj=2000, n_samples=512,
                  n_batches=8),
    "paper": dict(_BASE, heads=(1, 2, 4, 8, 16, 32, 64, 128), L=128, n_traj=10_000,
                  n_samples=2048, n_batches=8),
}
#: Seconds per trajectory-layer-head, measured on the committed paper run.
SECONDS_PER_WORK = 1.55e-6
#: Two-sided level of the agreement of the extrapolated H S_H with the prediction, with
#: Bonferroni over the values of sigma.
LEVEL = 0.95


def _model(n_heads, sigma, *, d, beta, attract, turn, eta):
    """The turning group with Gaussian keys and queries about A-bar = I and H heads."""
    return ModelConfig(d=d, beta=beta, kind="random_attention", eta=eta, sigma=sigma,
                       sigma_qk=1.0, mean_qk=1.0, mean_v=turning_mean_value(d, attract, turn),
                       n_heads=n_heads)


def cell(*, sigma, n_heads, n_traj, L, t_final, n_tokens, d, beta, attract, turn, seed):
    """One (sigma, H): the spread S of the final tokens about their mean and its s.e."""
    model = _model(n_heads, sigma, d=d, beta=beta, attract=attract, turn=turn, eta=t_final / L)
    x0 = upper_hemisphere_tokens(n_tokens, d)
    ds = simulate(model, RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=1.0, seed=seed,
                                   x0=np.broadcast_to(x0, (n_traj, n_tokens, d)).copy(),
                                   n_threads=cell_threads()))
    x = ds.tokens.values.reshape(n_traj, n_tokens, d)
    dev = np.sum((x - x.mean(axis=0)) ** 2, axis=(1, 2)) / n_tokens       # (n_traj,)
    return {"spread": float(dev.mean() * n_traj / (n_traj - 1)), "n_traj": n_traj,
            "spread_se": float(dev.std(ddof=1) / math.sqrt(n_traj))}


def run(knobs, sweeps):
    """The (sigma, H) sweep, then the linear-noise constants S_A and S_V of the path."""
    ds = sweeps({"sigma": list(knobs["sigmas"]), "n_heads": list(knobs["heads"])},
                fixed={k: knobs[k] for k in ("n_traj", "L", "t_final", "n_tokens", "d", "beta",
                                             "attract", "turn")},
                seed=knobs["seed"])
    model = _model(1, 0.0, eta=knobs["t_final"] / knobs["L"],
                   **{k: knobs[k] for k in ("d", "beta", "attract", "turn")})
    (s_a, s_a_se), (s_v, s_v_se) = linear_noise_spread(
        upper_hemisphere_tokens(knobs["n_tokens"], knobs["d"]), model, knobs["L"],
        n_samples=knobs["n_samples"], n_batches=knobs["n_batches"], seed=knobs["seed"] + 1)
    ds.attrs.update(s_a=s_a, s_a_se=s_a_se, s_v=s_v, s_v_se=s_v_se)
    return ds


def work(knobs) -> float:
    """Trajectory-layer-heads."""
    return float(knobs["n_traj"] * knobs["L"] * sum(knobs["heads"]) * len(knobs["sigmas"]))


def predicted(ds, sigma):
    """The linear-noise constant :math:`S_A + \\sigma^2 S_V` (the limit of H S_H) and its s.e."""
    a = ds.attrs
    return (a["s_a"] + sigma ** 2 * a["s_v"], math.hypot(a["s_a_se"], sigma ** 2 * a["s_v_se"]))


def summary(ds) -> dict:
    """Per sigma: H S_H fitted as :math:`a + b/H` on the upper half of the heads (weighted, s.e.
    inflated by the misfit), the limit a against the prediction (``z``; ``agrees`` within
    ``z_level``) and its relative s.e., the ratio :math:`HS_H/(S_A + \\sigma^2S_V)` at the
    fewest heads and at the most, and the slope of log S in log H on the upper half
    (``inverse_h``: within ``z_level`` s.e. of -1)."""
    heads = ds.n_heads.values.astype(float)
    upper = slice(heads.size // 2, None)
    z_level = normal_quantile(1.0 - (1.0 - LEVEL) / (2 * ds.sizes["sigma"]))
    eta = float(ds.attrs["fixed_t_final"]) / float(ds.attrs["fixed_L"])
    rows = []
    for sigma in ds.sigma.values:
        sub = ds.sel(sigma=sigma)
        s, se = sub.spread.values, sub.spread_se.values
        want, want_se = predicted(ds, float(sigma))
        h = heads[upper]
        c, cov, chi2 = weighted_least_squares(np.stack([np.ones_like(h), 1 / h], axis=1),
                                              h * s[upper], h * se[upper])
        dof = h.size - 2
        a_se = math.sqrt(cov[0, 0] * (max(1.0, chi2 / dof) if dof > 0 else 1.0))
        slope, slope_se, _ = log_log_slope(h, s[upper], se[upper], inflate=True)
        z = (c[0] - want) / math.hypot(a_se, want_se)
        rows.append({"sigma": float(sigma), "limit": float(c[0]), "limit_se": a_se,
                     "rel_se": a_se / want, "inverse_h": bool(abs(slope + 1) <= z_level * slope_se),
                     "predicted": want, "predicted_se": want_se, "z": float(z),
                     "agrees": bool(abs(z) <= z_level), "slope": slope, "slope_se": slope_se,
                     "ratio_one": float(heads[0] * s[0] / want),
                     "ratio_most": float(heads[-1] * s[-1] / want),
                     "ratio_most_se": float(heads[-1] * se[-1] / want),
                     "value_clock": float(ds.attrs["fixed_t_final"]) * eta * sigma ** 2})
    noisiest = max(rows, key=lambda r: r["sigma"])
    return {"rows": rows, "z_level": z_level, "eta": eta, "L": int(ds.attrs["fixed_L"]),
            "t_final": float(ds.attrs["fixed_t_final"]), "h_min": int(heads[0]),
            "h_max": int(heads[-1]), "h_fit": int(heads[upper][0]),
            "n_traj": int(ds.n_traj.max()), "d": int(ds.attrs["fixed_d"]),
            "n_tokens": int(ds.attrs["fixed_n_tokens"]), "beta": float(ds.attrs["fixed_beta"]),
            "agree": [r["sigma"] for r in rows if r["agrees"]],
            "n_sigmas": len(rows), "sigma_max": noisiest["sigma"],
            "ratio_one_noisiest": noisiest["ratio_one"],
            "ratio_most_noisiest": noisiest["ratio_most"],
            "slope_min": min(r["slope"] for r in rows), "slope_max": max(r["slope"] for r in rows),
            "inverse_h": all(r["inverse_h"] for r in rows), "level": LEVEL,
            "rel_se_max": max(r["rel_se"] for r in rows)}


def verdict_word(stats) -> str:
    """Reproduced where at every sigma the slope is consistent with -1 and the limit agrees with
    the prediction; partly where at some."""
    n = sum(r["agrees"] and r["inverse_h"] for r in stats["rows"])
    return ("Reproduced" if n == stats["n_sigmas"] else "Partly reproduced" if n
            else "Not reproduced")


def phrases(stats) -> dict:
    """The verdict and the table per sigma."""
    off = [r for r in stats["rows"] if not r["agrees"]]
    verdict = (f"**{verdict_word(stats)}**: at a fixed step and depth the spread of the tokens "
               + ("falls like 1/H" if stats["inverse_h"] else "falls, not everywhere like 1/H,")
               + f" (fitted slopes {stats['slope_min']:.2f} to {stats['slope_max']:.2f} from "
               f"H = {stats['h_fit']}), and H times the spread tends to the constant that the "
               "weights' covariance predicts at leading order (ours) "
               + ("for every value noise σ" if not off else
                  "except at σ = " + listed([r["sigma"] for r in off], "g"))
               + f", the fitted limits having relative standard errors of at most "
               f"{stats['rel_se_max']:.1%}.")
    table = markdown_table(
        ("σ", "t_L ησ²", "H S_H, limit", "predicted (ours)", "z",
         f"ratio at H = {stats['h_min']}", f"ratio at H = {stats['h_max']}", "slope"),
        [[f"{r['sigma']:g}", f"{r['value_clock']:.3g}",
          f"{r['limit']:.4g} ± {r['limit_se']:.2g}",
          f"{r['predicted']:.4g} ± {r['predicted_se']:.2g}", f"{r['z']:+.2f}",
          f"{r['ratio_one']:.3f}", f"{r['ratio_most']:.3f} ± {r['ratio_most_se']:.3f}",
          f"{r['slope']:.3f} ± {r['slope_se']:.3f}"] for r in stats["rows"]], numeric=True)
    return {"verdict": verdict, "table": table}


def plot(ds):
    """(a) the spread against H per sigma (bars 2 s.e.) and the prediction (S_A + sigma^2 S_V)/H;
    (b) H S_H over the prediction, with the prediction's 2 s.e. band."""
    import matplotlib.pyplot as plt

    fig, (ax, axb) = plt.subplots(1, 2, figsize=(6.8, 3.6))
    heads = ds.n_heads.values
    for colour, sigma in zip(palette(ds.sizes["sigma"]), ds.sigma.values):
        sub = ds.sel(sigma=sigma)
        want, want_se = predicted(ds, float(sigma))
        ax.errorbar(heads, sub.spread, yerr=2 * sub.spread_se, fmt="o", ms=4, capsize=2,
                    color=colour)
        ax.plot(heads, want / heads, color=colour, lw=1, ls="--")
        ratio = heads * sub.spread.values / want
        axb.errorbar(heads, ratio, yerr=2 * heads * sub.spread_se.values / want, fmt="o-",
                     ms=4, lw=1, capsize=2, color=colour, label=f"σ = {sigma:g}")
        axb.fill_between(heads, 1 - 2 * want_se / want, 1 + 2 * want_se / want, color=colour,
                         alpha=0.15, lw=0)
    axb.plot([], [], color="0.3", ls="--", lw=1, label="linear noise (ours)")
    axb.axhline(1.0, color="0.3", ls="--", lw=1)
    for a in (ax, axb):
        a.set_xscale("log", base=2)
        a.set_xticks(heads, [str(h) for h in heads])
        a.set_xlabel("heads H")
    ax.set(yscale="log", ylabel="spread of the final tokens $S_H$", title="(a) the spread")
    axb.set(ylabel=r"$H S_H / (S_A + \sigma^2 S_V)$", title="(b) against the prediction")
    axb.legend(loc="lower right")
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_heads", source="followup",
    description="many heads average the noise: at a fixed depth the spread of the tokens falls "
                "like 1/H to the linear-noise constant of the weights' covariance, from the "
                "diffusive to the ballistic limit",
    schema={"heads": integers(1, 4096, distinct=True, increasing=True),
            "sigmas": reals(0.0, 16.0, distinct=True), "d": integer(3, 16),
            "n_tokens": integer(2, 16), "beta": real(0.0, 20.0), "attract": real(-5.0, 5.0),
            "turn": real(-5.0, 5.0), "t_final": real(0.0, 64.0, strict_min=True),
            "L": integer(1, 100_000), "n_traj": integer(2), "n_samples": integer(2, 1 << 16),
            "n_batches": integer(2, 64)})
compute, cost = FIGURE.compute, FIGURE.cost
