r"""The follow-up's Theorem 1 rate, measured: the weak error of the non-centred chain against the step.

The turning group of :mod:`.homog_limits` at :math:`t_L = \eta L` fixed, :math:`\eta = 2^{-k}`,
in two regimes of the bound :math:`Ce^{Ct_L}\eta(t_L+1)\max(\eta,\alpha)`.  Without noise the
distances to ODE I and both forms of ODE II are exact.  With :math:`t_L\alpha` fixed the limit
has no closed form: the order is read from :math:`E\varphi(\eta) - E\varphi(\eta/2) =
C\eta/2 + O(\eta^2)`, and the Richardson value is checked against the SDE of drift b.
"""

from __future__ import annotations

import math

import numpy as np

from ... import simulate
from ...config import RunConfig
from ...random_attention.limits import (ode_path, phase, sde_paths, turning_group,
                                        upper_hemisphere_tokens)
from ...stats import log_log_slope
from ..base import cell_threads, laid_out
from ..knobs import integer, integers, real
from ..spec import Figure

REGIMES = ("ode2", "diffusive")
_BASE = dict(d=3, n_tokens=4, beta=1.0, attract=0.5, turn=1.0, t_final=2.0, noise_clock=0.25,
             sde_step=1.0 / 512, seed=0)
SCALES = {
    "smoke": dict(_BASE, ks=(2, 3, 4), k_max_diffusive=4, n_traj=2000, sde_paths=500),
    "quick": dict(_BASE, ks=tuple(range(2, 11)), k_max_diffusive=6, n_traj=20_000,
                  sde_paths=4000),
    "paper": dict(_BASE, ks=tuple(range(2, 11)), k_max_diffusive=7, n_traj=400_000,
                  sde_paths=40_000),
}
#: Seconds per trajectory-layer of the diffusive runs, measured on the committed paper run.
SECONDS_PER_WORK = 1.30e-6
#: An order agrees with its prediction within ORDER_Z s.e., or, for the noise-free errors (whose
#: fit's s.e. only measures the curvature of three points), within ORDER_TOL_DETERMINISTIC.
ORDER_Z, ORDER_TOL_DETERMINISTIC = 3.0, 0.1
#: The noise-free errors and their predicted orders (the printed ODE II lacks a term c b).
NOISE_FREE = {"ode1": 1.0, "ode2": 2.0, "ode2_printed": 1.0}
_NAMES = {"ode1": "ODE I", "ode2": "ODE II (ours)", "ode2_printed": "ODE II (printed)",
          "diffusive": "the diffusive chain"}


def _whole_layers(knobs):
    for k in knobs["ks"]:
        layers = knobs["t_final"] * 2.0 ** k
        if abs(layers - round(layers)) > 1e-9 * layers:
            raise ValueError(f"t_final * 2^k must be a whole number of layers for every k of "
                             f"ks; got t_final = {knobs['t_final']} at k = {k}")


def _model(eta, t_final, noise_clock, d, beta, attract, turn):
    """The turning group at step eta, noise-free (noise_clock None) or with t_final alpha =
    noise_clock (alpha = eta sigma^2)."""
    sigma = 0.0 if noise_clock is None else math.sqrt(noise_clock / (t_final * eta))
    return turning_group(d, beta, attract, turn, eta=eta, sigma=sigma)


def cell(*, regime, k, n_traj, d, n_tokens, beta, attract, turn, t_final, noise_clock,
         k_max_diffusive, seed):
    """One (regime, eta = 2^-k): E phi(X_t_final) of the chain, and noise-free the ODEs'."""
    eta = 2.0 ** (-k)
    layers = int(round(t_final / eta))
    x0 = upper_hemisphere_tokens(n_tokens, d)
    nan = float("nan")
    out = {"eta": eta, "layers": layers, "chain": nan, "chain_se": nan, "ode1": nan,
           "ode2": nan, "ode2_printed": nan, "n_traj": 0}
    if regime == "diffusive" and k > k_max_diffusive:
        return out
    noise_free = regime == "ode2"
    model = _model(eta, t_final, None if noise_free else noise_clock, d, beta, attract, turn)
    n = 1 if noise_free else n_traj
    ds = simulate(model, RunConfig(n_tokens=n_tokens, n_traj=n, L=layers, T=1.0, seed=seed,
                                   x0=np.broadcast_to(x0, (n, n_tokens, d)).copy(),
                                   n_threads=cell_threads()))
    phi = phase(ds.tokens.values)
    out.update(chain=float(phi.mean()), n_traj=n,
               chain_se=float(phi.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0)
    if noise_free:
        t = [0.0, t_final]
        out["ode1"] = float(phase(ode_path(x0, model, t)[-1]))
        out["ode2"] = float(phase(ode_path(x0, model, t, eta=eta)[-1]))
        out["ode2_printed"] = float(phase(ode_path(x0, model, t, eta=eta, form="printed")[-1]))
    return out


def run(knobs, sweeps):
    """The (regime, k) sweep, then the errors, the differences and the SDE reference."""
    ds = sweeps({"regime": list(REGIMES), "k": list(knobs["ks"])},
                fixed={k: knobs[k] for k in ("n_traj", "d", "n_tokens", "beta", "attract",
                                             "turn", "t_final", "noise_clock", "k_max_diffusive")},
                seed=knobs["seed"])
    ode = ds.sel(regime="ode2")
    for c in NOISE_FREE:
        ds[f"err_{c}"] = ode.chain - ode[c]
    diff = ds.sel(regime="diffusive")
    keep = np.isfinite(diff.chain.values)
    ks = diff.k.values[keep]
    phi, se = diff.chain.values[keep], diff.chain_se.values[keep]
    ds = ds.assign_coords(k_pair=ks[:-1])
    ds["diff_pair"] = (("k_pair",), phi[:-1] - phi[1:])       # E phi(eta) - E phi(eta / 2)
    ds["diff_pair_se"] = (("k_pair",), np.hypot(se[:-1], se[1:]))
    ds["richardson"] = (("k_pair",), 2.0 * phi[1:] - phi[:-1])
    ds["richardson_se"] = (("k_pair",), np.hypot(2.0 * se[1:], se[:-1]))
    # the limit SDE (drift b, no modified drift) by the fine weak scheme: its noise per unit
    # time eta sigma^2 is fixed, so any eta serves
    model = _model(2.0 ** (-float(ks[-1])), knobs["t_final"], knobs["noise_clock"], knobs["d"],
                   knobs["beta"], knobs["attract"], knobs["turn"])
    substeps = max(1, int(round(model.eta / knobs["sde_step"])))
    paths = phase(sde_paths(upper_hemisphere_tokens(knobs["n_tokens"], knobs["d"]), model,
                            model.eta, [0.0, knobs["t_final"]], knobs["sde_paths"],
                            substeps=substeps, seed=knobs["seed"] + 7,
                            drift_correction=False)[-1])
    ds.attrs.update(sde_mean=float(paths.mean()), sde_step=float(model.eta / substeps),
                    sde_se=float(paths.std(ddof=1) / math.sqrt(paths.size)))
    return ds


def work(knobs) -> float:
    """Trajectory-layers of the diffusive regime (the noise-free chain is one trajectory)."""
    ks = [k for k in knobs["ks"] if k <= knobs["k_max_diffusive"]]
    return float(knobs["n_traj"] * sum(knobs["t_final"] * 2 ** k for k in ks))


def summary(ds) -> dict:
    """Fitted orders (:func:`~stochastic_transformers.stats.log_log_slope`) against the
    predictions (:data:`NOISE_FREE`; diffusive: 1), and the check of the limit."""
    eta = ds.sel(regime="ode2").eta.values
    orders = {}
    # the three smallest noise-free steps: the larger ones are pre-asymptotic (the ratios of
    # successive ODE II errors climb from 3.4 to 4)
    for c, want in NOISE_FREE.items():
        s, se, _ = log_log_slope(eta[-3:], ds[f"err_{c}"].values[-3:])
        orders[c] = dict(order=s, se=se, predicted=want,
                         holds=bool(abs(s - want) <= max(ORDER_Z * se, ORDER_TOL_DETERMINISTIC)),
                         err_smallest=float(abs(ds[f"err_{c}"].values[-1])))
    s, se, _ = log_log_slope(2.0 ** (-ds.k_pair.values.astype(float)), ds.diff_pair.values,
                             ds.diff_pair_se.values)
    orders["diffusive"] = dict(order=s, se=se, predicted=1.0,
                               holds=bool(abs(s - 1.0) <= ORDER_Z * se))
    rich, rich_se = float(ds.richardson.values[-1]), float(ds.richardson_se.values[-1])
    sde, sde_se = float(ds.attrs["sde_mean"]), float(ds.attrs["sde_se"])
    # the SDE's scheme is the chain at step h: its bias C h, C from the last difference C eta/2
    h_over = 2.0 * float(ds.attrs["sde_step"]) / 2.0 ** (-float(ds.k_pair.values[-1]))
    bias, bias_se = h_over * float(ds.diff_pair.values[-1]), h_over * float(ds.diff_pair_se[-1])
    return {"orders": orders,
            "limit": dict(richardson=rich, richardson_se=rich_se, sde=sde, sde_se=sde_se,
                          z=(rich - sde) / math.hypot(rich_se, sde_se), sde_bias=bias,
                          z_debiased=(rich - sde + bias) / math.hypot(rich_se, sde_se, bias_se),
                          sde_step=float(ds.attrs["sde_step"])),
            "n_traj": int(ds.n_traj.max()), "t_final": float(ds.attrs["fixed_t_final"]),
            "noise_clock": float(ds.attrs["fixed_noise_clock"]), "order_z": ORDER_Z,
            "order_tol": ORDER_TOL_DETERMINISTIC}


def phrases(stats) -> dict:
    """The page's ``verdict``: does every fitted order lie within its tolerance of the
    predicted one?  Even then only partly: the follow-up's rate fails for its printed form."""
    o = stats["orders"]
    off = [_NAMES[c] for c, v in o.items() if not v["holds"]]
    if off:
        word = "Partly reproduced" if len(off) < len(o) else "Not reproduced"
        return {"verdict": f"**{word}**: the fitted order of {', '.join(off)} is not the "
                           "predicted one."}
    return {"verdict": (
        "**Partly reproduced**: every fitted order lies within its tolerance of the predicted "
        "one, but the follow-up states the rate $\\eta\\max(\\eta, \\alpha)$, order 2 at "
        "$\\alpha = 0$, for its printed ODE II (eq. 3.5), and there the measured order is "
        f"{o['ode2_printed']['order']:.2f}: that rate fails wherever $\\langle x, F\\rangle "
        f"\\ne 0$ (our proposition). Our corrected form's order, {o['ode2']['order']:.2f}, is "
        "consistent with 2; the order 1 predicted for the printed form is our proposition's, "
        "not the bound's.")}


def plot(ds):
    """(a) noise-free errors against eta; (b) the diffusive differences against eta."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    s = summary(ds)
    fig, (ax, axb) = plt.subplots(1, 2, figsize=(8.0, 4.3))
    eta = ds.sel(regime="ode2").eta.values
    for c, mk in (("ode1", "o"), ("ode2", "s"), ("ode2_printed", "x")):
        ax.loglog(eta, np.abs(ds[f"err_{c}"].values), marker=mk, ls="-", lw=1, ms=5,
                  label=f"{_NAMES[c]}: order {s['orders'][c]['order']:.2f}")
    for p, c, ls in ((1, "err_ode1", ":"), (2, "err_ode2", "--")):
        # anchored at the smallest step, offset by a factor 3 to stay visible
        ref = 3.0 * np.abs(ds[c].values[-1]) * (eta / eta[-1]) ** p
        ax.loglog(eta, ref, color="0.5", ls=ls, lw=0.8, label=fr"$\propto\eta^{p}$")
    ax.set(xlabel=r"step $\eta$", ylabel=r"$|\varphi(X^\eta_{t_L}) - \varphi(Y_{t_L})|$",
           title=f"(a) no noise, $t_L$ = {s['t_final']:g}")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    etas, diff = 2.0 ** (-ds.k_pair.values.astype(float)), np.abs(ds.diff_pair.values)
    axb.errorbar(etas, diff, yerr=2 * ds.diff_pair_se.values, fmt="o", capsize=2,
                 label=r"$|E\varphi(\eta) - E\varphi(\eta/2)|$")
    axb.plot(etas, diff[0] * etas / etas[0], color="0.6", ls=":", lw=0.8, label=r"$\propto\eta$")
    axb.set(xscale="log", yscale="log", xlabel=r"step $\eta$", ylabel="successive difference",
            title=fr"(b) diffusive, $t_L\alpha$ = {s['noise_clock']:g} (bars 2 s.e.)")
    axb.xaxis.set_minor_formatter(NullFormatter())
    axb.legend(loc="upper left")
    return laid_out(fig)


FIGURE = Figure.declared(
    globals(), "homog_rate", source="followup",
    description="non-centred random attention: the order of the weak error in eta at fixed t_L "
                "(follow-up's Theorem 1), noise-free (ODE II) and diffusive",
    schema={"ks": integers(1, 14), "k_max_diffusive": integer(2, 14), "d": integer(3, 16),
            "n_tokens": integer(2, 16), "beta": real(0.0, 20.0), "attract": real(-5.0, 5.0),
            "turn": real(-5.0, 5.0), "t_final": real(0.0, 64.0, strict_min=True),
            "noise_clock": real(0.0, 16.0, strict_min=True),
            "sde_step": real(0.0, 1.0, strict_min=True), "sde_paths": integer(2),
            "n_traj": integer(2)},
    plan=_whole_layers)
compute, cost = FIGURE.compute, FIGURE.cost
