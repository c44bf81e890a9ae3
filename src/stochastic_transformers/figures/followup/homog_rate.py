r"""The follow-up's Theorem 1 rate, measured: the weak error of the non-centred chain against the step.

The model is the turning group of :mod:`.homog_limits` at a fixed horizon
:math:`t_L = \eta L`, with :math:`\eta = 2^{-k}` and the observable :math:`\varphi`
(:func:`~stochastic_transformers.random_attention.limits.phase`) at :math:`t_L`, in two regimes of the bound
:math:`Ce^{Ct_L}\eta(t_L+1)\max(\eta,\alpha)`.  Without noise (:math:`\alpha = 0`) the chain
is deterministic and its distances to ODE I and to both forms of ODE II are exact; the bound
gives order 2 to the modified equation.  In the diffusive regime (:math:`t_L\alpha` fixed)
it gives order 1; the limit's :math:`E\varphi` has no closed form, so the order is read from
the differences :math:`E\varphi(\eta) - E\varphi(\eta/2)` of independent runs, which are
:math:`C\eta/2 + O(\eta^2)` when the error is :math:`C\eta + O(\eta^2)`.  The Richardson value
:math:`2E\varphi(\eta/2) - E\varphi(\eta)` at the smallest steps is compared with the SDE of
drift b (:func:`stochastic_transformers.random_attention.limits.sde_paths` at a fine step) as a check of the
limit itself.
"""

from __future__ import annotations

import math

import numpy as np

from ... import simulate
from ...config import RunConfig
from ...random_attention.limits import ode_path, phase, sde_paths, turning_group, upper_hemisphere_tokens
from ...stats import log_log_slope
from ..base import cell_threads, laid_out
from ..knobs import integer, integers, real
from ..spec import Figure

REGIMES = ("ode2", "diffusive")
_BASE = dict(d=3, n_tokens=4, beta=1.0, attract=0.5, turn=1.0, t_final=2.0, noise_clock=0.25,
             sde_step=1.0 / 512, seed=0)
SCALES = {
    "smoke": dict(_BASE, ks=(2, 3, 4), k_max_diffusive=4, n_traj=2000, sde_paths=500),
    "quick": dict(_BASE, ks=(2, 3, 4, 5, 6, 7, 8, 9, 10), k_max_diffusive=6, n_traj=20_000,
                  sde_paths=4000),
    "paper": dict(_BASE, ks=(2, 3, 4, 5, 6, 7, 8, 9, 10), k_max_diffusive=7, n_traj=400_000,
                  sde_paths=40_000),
}
#: Seconds per trajectory-layer of the diffusive runs (four tokens, d = 3), measured on the
#: committed paper run (263 s of cell time).
SECONDS_PER_WORK = 1.30e-6
#: An order agrees with its prediction when within this many standard errors of it ...
ORDER_Z = 3.0
#: ... or, for the deterministic (noise-free) errors, whose fit's standard error only
#: measures the curvature left in three points, within this distance.
ORDER_TOL_DETERMINISTIC = 0.1
#: The noise-free errors and the order each candidate's is predicted to have (the printed
#: ODE II is first order here, as its missing term c b is not 0).
NOISE_FREE = {"ode1": 1.0, "ode2": 2.0, "ode2_printed": 1.0}


def _whole_layers(knobs):
    for k in knobs["ks"]:
        layers = knobs["t_final"] * 2.0 ** k
        if abs(layers - round(layers)) > 1e-9 * layers:
            raise ValueError(f"t_final * 2^k must be a whole number of layers for every k of "
                             f"ks; got t_final = {knobs['t_final']} at k = {k}")


def _model(eta, t_final, noise_clock, d, beta, attract, turn):
    """The turning group at step eta, with no noise (noise_clock None) or with the noise
    per unit time alpha = eta sigma^2 that makes t_final * alpha = noise_clock."""
    sigma = 0.0 if noise_clock is None else math.sqrt(noise_clock / (t_final * eta))
    return turning_group(d, beta, attract, turn, eta=eta, sigma=sigma)


def cell(*, regime, k, n_traj, d, n_tokens, beta, attract, turn, t_final, noise_clock,
         k_max_diffusive, seed):
    """One (regime, eta = 2^-k): E phi(X_{t_final}) of the chain, and for the ODE II regime
    the three ODE values."""
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
                                             "turn", "t_final", "noise_clock",
                                             "k_max_diffusive")},
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
    ds.attrs.update(_sde_reference(knobs, 2.0 ** (-float(ks[-1]))))
    return ds


def _sde_reference(knobs, eta):
    """E phi at t_final of the limit SDE (drift b, no modified drift) by the fine weak scheme:
    its noise per unit time is eta sigma^2 (fixed), so any eta with that product serves."""
    model = _model(eta, knobs["t_final"], knobs["noise_clock"], knobs["d"], knobs["beta"],
                   knobs["attract"], knobs["turn"])
    substeps = max(1, int(round(model.eta / knobs["sde_step"])))
    paths = phase(sde_paths(upper_hemisphere_tokens(knobs["n_tokens"], knobs["d"]), model,
                            model.eta, [0.0, knobs["t_final"]], knobs["sde_paths"],
                            substeps=substeps, seed=knobs["seed"] + 7,
                            drift_correction=False)[-1])
    return dict(sde_mean=float(paths.mean()),
                sde_se=float(paths.std(ddof=1) / math.sqrt(paths.size)),
                sde_step=float(model.eta / substeps))


def work(knobs) -> float:
    """Trajectory-layers of the diffusive regime (the noise-free chain is one trajectory)."""
    ks = [k for k in knobs["ks"] if k <= knobs["k_max_diffusive"]]
    return float(knobs["n_traj"] * sum(knobs["t_final"] * 2 ** k for k in ks))


def measured_work(ds):
    """(seconds of simulation, trajectory-layers) of a computed dataset."""
    knobs = {"n_traj": int(ds.n_traj.max()), "ks": [int(k) for k in ds.k.values],
             "k_max_diffusive": int(ds.attrs.get("fixed_k_max_diffusive", max(ds.k.values))),
             "t_final": float(ds.attrs["fixed_t_final"])}
    return float(ds.attrs["cell_time_s"]), work(knobs)


def summary(ds) -> dict:
    """Fitted orders of both regimes with their standard errors
    (:func:`stochastic_transformers.stats.log_log_slope`), against the predictions
    (:data:`NOISE_FREE`; diffusive: 1), and the limit check."""
    eta = ds.sel(regime="ode2").eta.values
    orders = {}
    # the three smallest steps of the noise-free chain: the asymptotic order (the larger
    # steps are pre-asymptotic: the ratios of successive ODE II errors climb from 3.4 to 4)
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
    return {"orders": orders,
            "limit": dict(richardson=rich, richardson_se=rich_se, sde=sde, sde_se=sde_se,
                          z=(rich - sde) / math.hypot(rich_se, sde_se),
                          sde_step=float(ds.attrs["sde_step"])),
            "eta_min_ode": float(eta.min()),
            "eta_min_diffusive": float(2.0 ** -float(ds.k_pair.values.max() + 1)),
            "n_traj": int(ds.n_traj.max()), "t_final": float(ds.attrs["fixed_t_final"]),
            "noise_clock": float(ds.attrs["fixed_noise_clock"]), "order_z": ORDER_Z,
            "order_tol": ORDER_TOL_DETERMINISTIC}


_NAMES = {"ode1": "ODE I", "ode2": "ODE II (ours)", "ode2_printed": "ODE II (printed)",
          "diffusive": "the diffusive chain"}


def phrases(stats) -> dict:
    """The page's Markdown: ``verdict``, whether every fitted order lies within its tolerance
    (``holds``) of the bound's (or of the one :data:`NOISE_FREE` predicts), naming the others."""
    off = [_NAMES[c] for c, v in stats["orders"].items() if not v["holds"]]
    o = stats["orders"]
    if not off:
        return {"verdict": (
            "**Partly reproduced**: every fitted order lies within its tolerance of the predicted "
            "one, but the follow-up states the improved rate $\\eta\\max(\\eta, \\alpha)$, order 2 "
            "at $\\alpha = 0$, for its eq. 3.5, the printed ODE II with "
            "$-\\frac\\eta2\\nabla_b b$, and there the measured order is "
            f"{o['ode2_printed']['order']:.2f}: the measurement contradicts that rate, which fails "
            "wherever $\\langle x, F\\rangle \\ne 0$ (our proposition). Order 2 is reached by our corrected form "
            f"({o['ode2']['order']:.2f}); the order 1 predicted for the printed form is our "
            "proposition's, not the bound's.")}
    word = "Partly reproduced" if len(off) < len(stats["orders"]) else "Not reproduced"
    return {"verdict": f"**{word}**: the fitted order of {', '.join(off)} is not the predicted one."}


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
    etas_pair = 2.0 ** (-ds.k_pair.values.astype(float))
    axb.errorbar(etas_pair, np.abs(ds.diff_pair.values), yerr=2 * ds.diff_pair_se.values,
                 fmt="o", capsize=2, label=r"$|E\varphi(\eta) - E\varphi(\eta/2)|$")
    axb.plot(etas_pair, np.abs(ds.diff_pair.values[0]) * etas_pair / etas_pair[0], color="0.6",
             ls=":", lw=0.8, label=r"$\propto\eta$")
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
