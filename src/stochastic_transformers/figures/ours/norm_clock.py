r"""Other normalisations, two tokens in depth: pre- and peri-LN norms grow and slow the
directions down (ours).

Two tokens, softmax, Gaussian values, through the post-LN, pre-LN, peri-LN and nGPT-style
layers (:mod:`stochastic_transformers.normalizations`), recorded on a log grid of depths.
The figure draws the mean squared norm against its exact law (:math:`1 + t` for peri-LN; for
pre-LN the bounds that :math:`\lvert A\rvert^2` puts on :math:`1 + \sigma^2d\int_0^t
E\lvert A\rvert^2ds`), the rate :math:`E[1/\lvert X\rvert^2]` of the directions' clock against
peri-LN's squared Bessel law (:func:`~stochastic_transformers.normalizations.peri_clock_rate`),
and the antipodal fraction in depth against the limits of the layers on the sphere.
"""

from __future__ import annotations

import numpy as np
import scipy.stats

from ... import normalizations, simulate, theory
from ...classification import direction_gram, two_token_outcome
from ...config import RunConfig
from ...stats import agreement_z
from ...style import palette
from ..base import (add_outcome_fractions, cell_threads, knob_attr, laid_out, log_time_grid,
                    trajectory_layer_work)
from ..knobs import choices, integer
from ..spec import Figure
from ..words import verdict
from .norm_pairs import _SOFTMAX, layer_model

LAYERS = ("post", "pre", "peri", "ngpt")
_COMMON = dict(layers=LAYERS, d=4, beta=1.0, attention="softmax", tol=1e-3, seed=0)
SCALES = {"smoke": dict(_COMMON, n_traj=200, L=10, T=2.0, n_times=6),
          "quick": dict(_COMMON, n_traj=2000, L=50, T=64.0, n_times=25),
          "paper": dict(_COMMON, n_traj=20_000, L=100, T=100.0, n_times=40)}
OUTPUTS = ("sq_norm", "sq_norm_m2", "inv_sq_norm", "inv_sq_norm_m2", "sq_att", "n_antipodal",
           "n_single")


def cell(*, layer, d, beta, n_traj, L, T, n_times, attention, tol, seed):
    """One layer: at every recorded depth, the trajectories' mean (and mean square) of the
    two tokens' average squared norm and inverse squared norm, the mean :math:`\\lvert
    A\\rvert^2` of the directions, and the outcome counts of the directions."""
    times = log_time_grid(T, L, n_times)
    ds = simulate(layer_model(layer, d=d, beta=beta, attention=attention),
                  RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=T, seed=seed, times=times,
                            method="literal", n_threads=cell_threads()))
    gram = ds.gram_t.values                                   # (trajectory, time, 2, 2)
    sq = 0.5 * (gram[..., 0, 0] + gram[..., 1, 1])            # per trajectory, both tokens
    inv = 0.5 * (1.0 / gram[..., 0, 0] + 1.0 / gram[..., 1, 1])
    z = np.clip(direction_gram(gram)[..., 0, 1], -1.0, 1.0)
    p, q, _, _ = theory.two_cluster_weights(z, beta, 1, 1)
    codes = two_token_outcome(z, tol=tol)
    return {"sq_norm": sq.mean(0), "sq_norm_m2": (sq * sq).mean(0), "inv_sq_norm": inv.mean(0),
            "inv_sq_norm_m2": (inv * inv).mean(0), "sq_att": (p * p + q * q + 2 * p * q * z).mean(0),
            "n_antipodal": np.sum(codes == 2, axis=0), "n_single": np.sum(codes == 1, axis=0),
            "n_traj": n_traj}


def run(knobs, sweeps):
    """The sweep over layers with recorded depths (:func:`cell`), then :func:`finish`."""
    times = log_time_grid(knobs["T"], knobs["L"], knobs["n_times"])
    raw = sweeps({"layer": list(knobs["layers"])},
                 fixed={k: knobs[k] for k in ("d", "beta", "n_traj", "L", "T", "n_times",
                                              "attention", "tol")},
                 seed=knobs["seed"], output_dims={k: ("time",) for k in OUTPUTS},
                 output_coords={"time": times})
    return finish(raw, knobs)


def _trapezoid(rate, t):
    """The cumulative trapezoid integral of ``rate`` (..., time) over the times ``t``, from 0."""
    steps = 0.5 * (rate[..., 1:] + rate[..., :-1]) * np.diff(t)
    return np.concatenate([np.zeros(rate.shape[:-1] + (1,)), np.cumsum(steps, axis=-1)], axis=-1)


def min_attention_square(beta: float) -> float:
    """The least :math:`\\lvert A\\rvert^2 = p^2 + q^2 + 2pqz` of two tokens over their overlap z
    (on a grid of 20,001 overlaps; it is interior for beta above about 0.8, not at z = -1)."""
    z = np.linspace(-1.0, 1.0, 20_001)
    p, q, _, _ = theory.two_cluster_weights(z, beta, 1, 1)
    return float(np.min(p * p + q * q + 2.0 * p * q * z))


def _se(ds, name):
    return np.sqrt(np.maximum(ds[f"{name}_m2"] - ds[name] ** 2, 0.0) / (ds.n_traj - 1))


def finish(ds, knobs):
    """Standard errors of the means, the exact laws (``sq_norm_peri`` :math:`= 1 + t`,
    ``clock_rate_peri``), pre-LN's bounds ``sq_norm_pre_low``/``_high`` (:math:`1 +
    dt\\min\\lvert A\\rvert^2` and :math:`1 + dt`, :math:`\\sigma = 1`, the minimum of
    :math:`\\lvert A\\rvert^2 = 1 - 2pq(1 - z)` over the overlap), the clock ``clock`` (the trapezoid integral of the measured rate), the
    antipodal fractions and the limit ``p_theory`` of the layers on the sphere."""
    ds = add_outcome_fractions(ds, ("antipodal", "single"))
    for name in ("sq_norm", "inv_sq_norm"):
        ds[f"{name}_se"] = _se(ds, name)
    t, d, beta = ds.time.values, int(knobs["d"]), float(knobs["beta"])
    ds["sq_norm_peri"] = ("time", 1.0 + t)
    ds["clock_rate_peri"] = ("time", normalizations.peri_clock_rate(t, d))
    ds["sq_norm_pre_low"] = ("time", 1.0 + d * t * min_attention_square(beta))
    ds["sq_norm_pre_high"] = ("time", 1.0 + d * t)
    ds["clock"] = (("layer", "time"), _trapezoid(ds.inv_sq_norm.values, t))
    # The same trapezoid of the exact rate: what peri-LN's measured clock compares with (the
    # coarse log grid overstates the integral itself by about 1%).
    ds["clock_peri"] = ("time", _trapezoid(ds.clock_rate_peri.values, t))
    # Pre-LN's identity with the measured mean |A|^2 (a trapezoid on the same grid).
    ds["sq_norm_identity"] = (("layer", "time"), 1.0 + d * _trapezoid(ds.sq_att.values, t))
    theory_p = np.full((ds.layer.size, t.size), np.nan)
    for i, layer in enumerate(ds.layer.values):
        if str(layer) in normalizations.SPHERE_NORMS:
            theory_p[i, 1:] = normalizations.antipodal_at(t[1:], beta, d, norm=str(layer),
                                                          tol=float(knobs["tol"]))[0]
            theory_p[i, 0] = 0.0
    ds["p_theory"] = (("layer", "time"), theory_p)
    ds["z_score"] = agreement_z(ds.n_antipodal, ds.n_traj.broadcast_like(ds.n_antipodal),
                                ds.p_theory.fillna(0.0)).where(np.isfinite(ds.p_theory))
    return ds


#: Seconds of simulation per trajectory-layer, measured on the committed paper run
#: (results/norm_clock_paper.nc: 806 s of cell time for 8e8 trajectory-layers, with the
#: Gram matrices recorded at every depth, while two other runs shared the 2-core machine).
SECONDS_PER_WORK = 1.0e-6
#: Family-wise false-alarm rate of each check over its recorded depths (Bonferroni).
ALPHA = 1e-3


def _bound(n_tests: int) -> float:
    """The two-sided Bonferroni bound on |z| for ``n_tests`` tests at :data:`ALPHA`."""
    return float(scipy.stats.norm.isf(ALPHA / (2 * max(n_tests, 1))))


def _max_z(measured, se, exact):
    z = (measured - exact) / np.where(se > 0, se, np.nan)
    return float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 0.0


def summary(ds) -> dict:
    """The checks (largest deviation over the depths t > 0, in standard errors, against a
    Bonferroni bound for its own number of tests): peri-LN's squared norm, the layers on the
    sphere against their limits, pre-LN inside its bounds; peri-LN's clock rate as a largest
    relative deviation (at d <= 4 the mean of 1/|X|^2 has no finite variance, so no z); the
    clocks and fractions at T."""
    later = ds.isel(time=slice(1, None))                   # t = 0 is exact by construction
    out = {"T": float(ds.time[-1]), "L": int(knob_attr(ds, "L")),
           "n_traj": int(ds.n_traj.values.max()), "d": int(knob_attr(ds, "d")),
           "beta": float(knob_attr(ds, "beta")), "n_depths": int(later.time.size)}
    layers = [str(x) for x in ds.layer.values]
    if "peri" in layers:
        peri = later.sel(layer="peri")
        out["peri_norm_z"] = _max_z(peri.sq_norm, peri.sq_norm_se, peri.sq_norm_peri)
        out["peri_norm_bound"] = _bound(peri.time.size)
        out["peri_rate_rel"] = float(np.max(np.abs(peri.inv_sq_norm / peri.clock_rate_peri - 1)))
        out["peri_clock_theory_at_T"] = float(ds.clock_peri[-1])
    if "pre" in layers:
        pre = later.sel(layer="pre")
        inside = (pre.sq_norm >= pre.sq_norm_pre_low - 3 * pre.sq_norm_se) & \
            (pre.sq_norm <= pre.sq_norm_pre_high + 3 * pre.sq_norm_se)
        out["pre_inside_bounds"] = bool(inside.all())
        out["pre_identity_rel"] = float(np.max(np.abs(pre.sq_norm / pre.sq_norm_identity - 1)))
    final = ds.isel(time=-1)
    out["clock_at_T"] = {lay: float(final.clock.sel(layer=lay)) for lay in layers}
    out["antipodal_at_T"] = {lay: float(final.p_antipodal.sel(layer=lay)) for lay in layers}
    out["theory_at_T"] = {lay: float(final.p_theory.sel(layer=lay)) for lay in layers
                          if np.isfinite(final.p_theory.sel(layer=lay))}
    z = later.z_score.values[np.isfinite(later.z_score.values)]
    out["sphere_max_z"] = float(np.abs(z).max()) if z.size else 0.0
    out["sphere_bound"] = _bound(z.size)
    return out


def phrases(stats) -> dict[str, str]:
    """``verdict``: the exact laws of the norms and of peri-LN's clock, pre-LN within its
    bounds, and the layers on the sphere against their limits."""
    checks = []
    if "peri_norm_z" in stats:
        checks.append((stats["peri_norm_z"] < stats["peri_norm_bound"], "peri-LN's mean squared "
                       "norm follows 1 + t at every depth", "peri-LN's mean squared norm leaves "
                       "1 + t"))
    if "pre_inside_bounds" in stats:
        checks.append((stats["pre_inside_bounds"], "pre-LN's lie within the bounds of its "
                       "identity", "pre-LN's leave the bounds of its identity"))
    if stats["theory_at_T"]:
        checks.append((stats["sphere_max_z"] < stats["sphere_bound"], "the antipodal fractions of the layers on the "
                       "sphere follow their limits in depth", "the antipodal fractions of the "
                       "layers on the sphere leave their limits"))
    return {"verdict": verdict(checks, words=("Derived and confirmed", "Partly confirmed",
                                              "Not confirmed"))}


def plot(ds):
    """Three panels against depth: mean squared norm, clock rate, antipodal fraction."""
    import matplotlib.pyplot as plt

    layers = [str(x) for x in ds.layer.values]
    colours = dict(zip(layers, palette(len(layers))))
    t = ds.time.values
    fig, axes = plt.subplots(1, 3, figsize=(8.4, 3.5))
    ax_n, ax_r, ax_p = axes
    for layer in layers:
        sub, c = ds.sel(layer=layer), colours[layer]
        if layer in ("pre", "peri"):
            ax_n.loglog(t[1:], sub.sq_norm[1:], "o", ms=3, color=c, label=layer)
            ax_r.loglog(t[1:], sub.inv_sq_norm[1:], "o", ms=3, color=c, label=layer)
        ax_p.semilogx(t[1:], sub.p_antipodal[1:], "o", ms=3, color=c, label=layer)
        if np.isfinite(sub.p_theory[1:]).all():
            ax_p.semilogx(t[1:], sub.p_theory[1:], color=c, lw=1.2)
    if "peri" in layers:
        ax_n.loglog(t[1:], ds.sq_norm_peri[1:], color=colours["peri"], lw=1.2, label="1 + t")
        ax_r.loglog(t[1:], ds.clock_rate_peri[1:], color=colours["peri"], lw=1.2,
                    label="squared Bessel law")
    if "pre" in layers:
        ax_n.fill_between(t[1:], ds.sq_norm_pre_low[1:], ds.sq_norm_pre_high[1:],
                          color=colours["pre"], alpha=0.15, label="pre-LN bounds")
        ax_n.loglog(t[1:], ds.sq_norm_identity.sel(layer="pre")[1:], color=colours["pre"],
                    ls=":", lw=1.2, label=r"$1 + d\int E|A|^2$")
    ax_p.plot([], [], color="0.3", lw=1.2, label="limit on the sphere")
    ax_n.set(xlabel="depth $t$", title=r"$E|X|^2$")
    ax_r.set(xlabel="depth $t$", title=r"clock rate $E[1/|X|^2]$")
    ax_p.set(xlabel="depth $t$", title=r"$P(1 + Z_t \leq \mathrm{tol})$")
    for ax in axes:
        ax.legend(loc="best")
    return laid_out(fig, f"Two tokens in depth (d = {int(knob_attr(ds, 'd'))}, β = "
                         f"{float(knob_attr(ds, 'beta')):g}, L = {int(knob_attr(ds, 'L'))}, "
                         f"{int(ds.n_traj.values.max()):,} trajectories per layer)")


FIGURE = Figure.declared(
    globals(), "norm_clock", source="ours",
    description="other normalisations, two tokens in depth: pre- and peri-LN norms and the "
                "clock of their directions against exact laws (ours)",
    schema={"layers": choices(LAYERS), "d": integer(3), "attention": _SOFTMAX},
    work=trajectory_layer_work("layers"))
compute, cost = FIGURE.compute, FIGURE.cost
