r"""Figure 4: the noise-induced clustering threshold of Proposition 1.

Hybrid model (paper eq. 7): the value matrix is the identity, shared by all layers,
and a scalar common noise scales the residual,
:math:`w_{n+1} = 1/L + \varepsilon\,\xi_{n+1}/\sqrt L`.  With unnormalised attention
and two tokens the limit overlap obeys Proposition 1's SDE, whose scale function is
integrable at exactly one end: the pair merges almost surely when
:math:`\varepsilon < \varepsilon_c(\beta) = \sqrt{2e^{-\beta}}` and ends antipodal
almost surely when :math:`\varepsilon > \varepsilon_c(\beta)`, whatever d.

The figure is the paper's phase diagram (colour = dominant outcome, intensity = its
fraction, dashed :math:`\varepsilon_c`) at the paper's depth scale L = 100 and, on the
same grid, at a deeper L (1000, with ``deep_n_traj`` trajectories a cell, since each costs
ten times the layers).  Proposition 1 is a statement about L -> infinity *and* t ->
infinity: at fixed L the discrete model can follow it only where the random part of a
step, :math:`\varepsilon e^\beta/(2\sqrt L)`, is small, and at a finite horizon T the
limit itself may not have clustered yet.  Two panels the paper does not have: the
antipodal fraction against :math:`\varepsilon/\varepsilon_c(\beta)` at both depths,
where the limit predicts a step at 1 for every beta, and a depth check at one point of
the plane with L up to 10,000.

Two references at the horizon T (ours; in :func:`summary`): the limit's own outcome at T
at a few *reference cells* just above the curve (:func:`limit_outcome`, Euler-Maruyama
for Proposition 1's overlap SDE), and the rate at which the overlap approaches -1, in
the limit and in the discrete chain at each L (:func:`antipodal_rate`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import xarray as xr
from scipy import special, stats

from .. import sde, simulate, theory
from .._validation import check_real
from ..classification import outcome_counts
from ..config import ModelConfig, RunConfig
from ..sweep import summed_attrs
from .base import (add_outcome_fractions, all_of, cell_threads, cost_function, figure_sweep,
                   integer, integers, laid_out, real, reals, resolve_scale, sweep_seconds,
                   whole_layers)

ID = "fig4"
#: Version of this module's cell outputs, folded into the sweep cache key; bump it whenever
#: :func:`cell` returns different outputs or numbers for the same arguments.
CELL_VERSION = "1"
DESCRIPTION = ("hybrid model: dominant outcome in the (beta, eps) plane with eps_c(beta) "
               "(Prop. 1), at L = 100 and L = 1000")

SCALES = {
    "smoke": dict(betas=tuple(np.linspace(0.0, 4.0, 5)), epsilons=tuple(np.linspace(0.0, 2.0, 5)),
                  n_traj=100, deep_n_traj=50, Ls=(20, 60), T=20.0, d=3, tol=1e-3, seed=0,
                  check_point=(3.0, 1.0), check_L=(20, 50), check_n_traj=50, check_T=10.0),
    "quick": dict(betas=tuple(np.linspace(0.0, 5.0, 21)), epsilons=tuple(np.linspace(0.0, 2.0, 21)),
                  n_traj=1000, deep_n_traj=250, Ls=(100, 1000), T=50.0, d=3, tol=1e-3, seed=0,
                  check_point=(3.0, 1.0), check_L=(30, 100, 300, 1000, 3000), check_n_traj=400, check_T=50.0),
    "paper": dict(betas=tuple(np.linspace(0.0, 5.0, 41)), epsilons=tuple(np.linspace(0.0, 2.0, 41)),
                  n_traj=1000, deep_n_traj=250, Ls=(100, 1000), T=50.0, d=3, tol=1e-3, seed=0,
                  check_point=(3.0, 1.0), check_L=(30, 100, 300, 1000, 3000, 10000), check_n_traj=1000, check_T=50.0),
}



def _beta_epsilon(name, value, knobs):
    """The check of ``check_point``: two numbers (beta, epsilon) in the ranges of the map."""
    point = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(point) != 2:
        raise ValueError(f"{name} must be two numbers (beta, epsilon); got {value}")
    return check_real(name, point[0], 0.0, 50.0), check_real(name, point[1], 0.0, 100.0)


#: The knobs of this figure beyond the shared ones (:data:`.base.KNOB_CHECKS`), and the
#: ranges it allows of these: every depth scale in ``Ls`` and ``check_L`` must put T (and
#: check_T) on a whole number of layers.
KNOB_SCHEMA = {
    "betas": reals(0.0, 50.0),
    "epsilons": reals(0.0, 100.0),
    "Ls": all_of(integers(1, distinct=True, sort=True), whole_layers("T", "Ls")),
    "d": integer(2),
    "deep_n_traj": integer(1),
    "check_point": _beta_epsilon,
    "check_L": integers(1),
    "check_n_traj": integer(1),
    "check_T": all_of(real(0.0, strict_min=True), whole_layers("check_T", "check_L")),
}

#: Cells with |log(eps / eps_c)| below this are "on the threshold" and left out of the
#: agreement count: there the limit dynamics is a time-changed Brownian motion that
#: needs far longer than T to settle.
BAND = 0.2

#: A step's random part eps |A| / sqrt(L) counts as small below this (|A| = e^beta / 2,
#: about the norm of the unnormalised attention output of a token of an antipodal pair;
#: at a single cluster it is e^beta).  A loose gauge: :func:`antipodal_rate` measures
#: what the step does to the approach to -1.
SMALL_STEP = 0.5

#: A cell whose unclustered fraction at T exceeds this is *undecided*: it counts neither
#: as agreeing with Proposition 1 nor as disagreeing (its dominant clustered outcome would
#: rest on a minority of the trajectories).
UNDECIDED = 0.5

#: The chain's approach rate to -1 (:func:`antipodal_rate`) counts as the limit's when
#: their ratio is within this of 1 (``n_rate_off_small_step_above`` in :func:`summary_at`).
RATE_AGREE = 0.25

#: Reference cells (:func:`reference_cells`): for every beta of the grid from
#: REFERENCE_BETA_MIN on, in steps of REFERENCE_BETA_STEP, the smallest eps above the band
#: around the curve.  There the limit's approach to -1 is slowest.
REFERENCE_BETA_MIN, REFERENCE_BETA_STEP = 2.5, 0.5

#: Euler-Maruyama of the limit at the reference cells (:func:`limit_outcome`): paths,
#: largest time step and seed.  With 4,000 paths a fraction has a standard error of at
#: most 0.008.
LIMIT_PATHS, LIMIT_DT, LIMIT_SEED = 4000, 0.005, 0

#: beta ranges over which the summary averages the antipodal fraction above the curve.
LOW_BETA, HIGH_BETA = 1.5, 3.0

#: The depth check reaches the limit (antipodal almost surely above the curve) when the
#: antipodal fraction at its largest L exceeds this; the limit itself has reached its
#: outcome at the check point by check_T when its antipodal fraction there does.
LIMIT_REACHED = 0.9

#: Proposition 1 holds at a depth scale where steps are small when at least this share of
#: the small-step cells away from the threshold has the predicted dominant outcome.
SMALL_STEP_AGREE = 0.95


def step_size(beta, epsilon, L):
    r"""Random part of one step near the antipodal pole, :math:`\varepsilon e^\beta / (2\sqrt L)`.

    With unnormalised attention and two tokens at overlap -1 the attention output of a
    token is :math:`(e^\beta x_i + e^{-\beta} x_j)/2`, of norm about :math:`e^\beta/2`,
    and the random factor of the residual is :math:`\varepsilon\xi/\sqrt L`.
    Broadcasts over its arguments.
    """
    return np.asarray(epsilon) * np.exp(np.asarray(beta)) / (2.0 * np.sqrt(np.asarray(L)))


@functools.lru_cache(maxsize=64)
def limit_outcome(beta, epsilon, T, d=3, tol=1e-3, n_paths=LIMIT_PATHS, dt=LIMIT_DT,
                  seed=LIMIT_SEED) -> dict:
    r"""Outcome fractions at time T of the *limit* of the hybrid model (Proposition 1's SDE).

    Euler-Maruyama for the overlap in :math:`x = \operatorname{atanh} z`
    (:func:`stochastic_transformers.sde.simulate_overlap_sde`, unnormalised attention),
    from the overlap of two independent uniform tokens of :math:`S^{d-1}`, classified at T
    with the figure's tolerance: ``{"single", "antipodal", "unclustered"}``.  Near -1 the
    SDE in x has constant coefficients (a Brownian motion with drift
    :math:`e^{-\beta} - \varepsilon^2/2`), where Euler's scheme is exact.  A few
    seconds of one core at the defaults.
    """
    z = sde.simulate_overlap_sde(float(beta), int(d), z0=None, n_paths=int(n_paths), T=float(T),
                                 dt=float(dt), attention="unnormalized", model="hybrid",
                                 epsilon=float(epsilon), seed=int(seed))[-1]
    single = float(np.mean(1.0 - z <= tol))
    antipodal = float(np.mean(1.0 + z <= tol))
    return {"single": single, "antipodal": antipodal, "unclustered": 1.0 - single - antipodal}


def _mean_log_abs_normal(r):
    r""":math:`E\log|\xi - r|` for a standard normal :math:`\xi`, in closed form.

    :math:`(\xi - r)^2` is noncentral chi-square with one degree of freedom, a Poisson
    (mean :math:`r^2/2`) mixture of central ones with :math:`1 + 2K` degrees of freedom,
    and :math:`E\log\chi^2_\nu = \log 2 + \psi(\nu/2)`; so the value is
    :math:`\tfrac12(\log 2 + E\,\psi(\tfrac12 + K))`, summed over the Poisson weights
    (normalised over the range summed, 40 standard deviations on each side).
    """
    lam = 0.5 * r * r
    spread = 40.0 * math.sqrt(lam) + 40.0
    k = np.arange(max(0, int(lam - spread)), int(lam + spread) + 1)
    w = stats.poisson.pmf(k, lam)
    return 0.5 * (math.log(2.0) + float(np.sum(w * special.digamma(0.5 + k)) / np.sum(w)))


def antipodal_rate(beta, epsilon, L=None) -> float:
    r"""Drift per unit time of :math:`X = \operatorname{atanh} Z` next to the antipodal pole.

    :math:`X = \log(|x_1 + x_2| / |x_1 - x_2|)`; negative values mean the pair approaches
    -1.  In the limit (``L=None``), from Proposition 1's SDE by Ito's formula,
    :math:`e^{-\beta} - \varepsilon^2/2` (our computation: the Ito term of the SDE for
    Z cancels exactly).  For the discrete hybrid model with depth scale L, a layer
    multiplies :math:`|x_1 + x_2|` by :math:`|1 + w(a+b)|` and :math:`|x_1 - x_2|` by
    :math:`|1 + w(a-b)|` (:math:`a = e^\beta/2`, :math:`b = e^{-\beta}/2` the unnormalised
    attention weights at Z = -1, :math:`w = 1/L + \varepsilon\xi/\sqrt L`), so the drift
    is exactly :math:`L\,E[\log|1 + w(a+b)| - \log|1 + w(a-b)|]`, evaluated here in
    closed form (:func:`_mean_log_abs_normal`).  At fixed L it differs from the limit's by corrections of order 1/L that
    grow with :math:`\varepsilon e^\beta`: expanding the logarithms (our computation),
    :math:`L(\text{rate}_L - \text{rate}) \to -\tfrac12 + \tfrac14\varepsilon^2(3e^\beta +
    e^{-3\beta}) - \tfrac38\varepsilon^4(e^{2\beta} + e^{-2\beta})` as :math:`L \to \infty`,
    and the next orders carry higher powers of :math:`\varepsilon e^\beta`.  So a small
    step's random part alone does not make the two rates agree.
    """
    beta, epsilon = float(beta), float(epsilon)
    if L is None:
        return math.exp(-beta) - 0.5 * epsilon**2
    L = float(L)
    a, b = 0.5 * math.exp(beta), 0.5 * math.exp(-beta)
    if epsilon == 0.0:
        return L * (math.log1p((a + b) / L) - math.log1p((a - b) / L))
    # log|1 + w c| = log(c h) + log|xi - r| with h = eps / sqrt(L), r = -(1 + c/L) / (c h)
    h = epsilon / math.sqrt(L)
    total = 0.0
    for c, sign in ((a + b, 1.0), (a - b, -1.0)):
        if c > 0.0:   # c = a - b = 0 at beta = 0: log|1 + 0| = 0
            total += sign * (math.log(c * h) + _mean_log_abs_normal(-(1.0 + c / L) / (c * h)))
    return L * total


def reference_cells(ds) -> list[tuple[float, float]]:
    """The cells (beta, eps) of the grid where :func:`summary` computes the limit at T: for
    every beta from :data:`REFERENCE_BETA_MIN` on in steps of :data:`REFERENCE_BETA_STEP`,
    the smallest eps above the band around the curve (none where no eps is)."""
    betas, eps = ds.beta.values, ds.epsilon.values
    log_ratio = _log_ratio(ds)
    out = []
    for i, b in enumerate(betas):
        k = (b - REFERENCE_BETA_MIN) / REFERENCE_BETA_STEP
        if b < REFERENCE_BETA_MIN - 1e-9 or abs(k - round(k)) > 1e-6:
            continue
        above = np.nonzero(log_ratio[i] > BAND)[0]
        if above.size:
            out.append((float(b), float(eps[above[0]])))
    return out


def cell(*, beta, epsilon, n_traj, L, T, d, tol, seed):
    """One (L, beta, eps) point: outcome counts of the hybrid two-token model at T (USA)."""
    ds = simulate(ModelConfig(d=d, beta=beta, kind="hybrid", epsilon=epsilon,
                              attention="unnormalized"),
                  RunConfig(n_tokens=2, n_traj=n_traj, L=L, T=T, seed=seed,
                            n_threads=cell_threads()))
    counts = outcome_counts(ds, tol=tol)
    return {"n_single": counts["single"], "n_antipodal": counts["antipodal"],
            "n_unclustered": counts["unclustered"], "n_traj": n_traj}


def depth_cell(*, L, beta, epsilon, n_traj, T, d, tol, seed):
    """Outcome counts at one (beta, eps) point for depth scale ``L``: the depth check."""
    return cell(beta=beta, epsilon=epsilon, n_traj=n_traj, L=L, T=T, d=d, tol=tol, seed=seed)


def compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides):
    """Run the (L, beta, eps) sweep; returns ``p_single(L, beta, epsilon)``, ``p_antipodal``, ...

    Also runs the *depth check*: at ``check_point`` = (beta, eps) the outcome fractions
    for each depth scale in ``check_L`` (variables ``depth_p_*(check_L)``), which tells a
    discretisation effect of the depth scale from a disagreement with the limit.
    """
    knobs = resolve_scale(SCALES, scale, overrides, KNOB_SCHEMA)
    run = dict(seed=knobs["seed"], scheduler=scheduler, cache_dir=cache_dir, progress=progress)
    # One sweep per depth scale: the first (the paper's L) with n_traj trajectories a
    # cell, the deeper ones, ten times the layers each, with deep_n_traj.
    maps = []
    for k, L in enumerate(knobs["Ls"]):
        fixed = {"n_traj": knobs["n_traj"] if k == 0 else knobs["deep_n_traj"],
                 "T": knobs["T"], "d": knobs["d"], "tol": knobs["tol"]}
        maps.append(figure_sweep(__name__, scale, {"L": [L], "beta": list(knobs["betas"]),
                                                   "epsilon": list(knobs["epsilons"])},
                                 fixed=fixed, **run))
    ds = xr.concat(maps, dim="L", combine_attrs="override")
    # the first map's attributes, but every count and time summed over the maps
    ds.attrs.update(fixed_n_traj=knobs["n_traj"], deep_n_traj=knobs["deep_n_traj"],
                    **summed_attrs(maps))
    outcomes = ("single", "antipodal", "unclustered")
    ds = add_outcome_fractions(ds, outcomes)
    # Depth check: at one point where L = 100 departs from the limit, let L grow.
    beta_chk, eps_chk = knobs["check_point"]
    chk = figure_sweep(__name__, scale, {"L": list(knobs["check_L"])}, cell=depth_cell,
                       name=f"{ID}-depth-{scale}",
                       fixed={"beta": beta_chk, "epsilon": eps_chk,
                              "n_traj": knobs["check_n_traj"], "T": knobs["check_T"],
                              "d": knobs["d"], "tol": knobs["tol"]}, **run)
    chk = add_outcome_fractions(chk, outcomes)
    for name in ("p_single", "p_antipodal", "p_unclustered", "p_antipodal_low", "p_antipodal_high",
                 "p_single_low", "p_single_high"):
        ds[f"depth_{name}"] = chk[name].rename(L="check_L")
    ds.attrs.update(check_beta=beta_chk, check_epsilon=eps_chk,
                    check_n_traj=knobs["check_n_traj"], check_T=knobs["check_T"],
                    **{f"check_{k}": v for k, v in summed_attrs([chk]).items()})
    ds["epsilon_c"] = (("beta",), np.asarray(theory.critical_epsilon(ds.beta.values), dtype=float))
    ratio = ds.epsilon / ds.epsilon_c
    ds["p_antipodal_theory"] = (ratio > 1).astype(float)
    ds["dominant_antipodal"] = ds.p_antipodal > ds.p_single
    ds["step_size"] = (("L", "beta", "epsilon"),
                       step_size(ds.beta.values[None, :, None], ds.epsilon.values[None, None, :],
                                 ds.L.values[:, None, None]))
    ds.attrs.update(scale=scale, figure=ID, band=BAND, small_step=SMALL_STEP)
    return ds


#: Seconds of simulation per trajectory-layer of the hybrid model (the unit of
#: :func:`work`), measured on the committed paper run (results/fig4_paper.nc: 3,296 s of
#: cell time for the two maps, 2.9e10 trajectory-layers, on the project's 2-core machine).
SECONDS_PER_WORK = 1.1e-7


def work(knobs) -> float:
    """Trajectory-layers of a run with these knobs: both maps (n_traj at the first L,
    deep_n_traj at the others, T each) and the depth check (check_n_traj, check_T)."""
    cells = len(knobs["betas"]) * len(knobs["epsilons"])
    Ls = sorted(knobs["Ls"])
    maps = cells * knobs["T"] * (knobs["n_traj"] * Ls[0] + knobs["deep_n_traj"] * sum(Ls[1:]))
    return float(maps + knobs["check_n_traj"] * knobs["check_T"] * sum(knobs["check_L"]))


def measured_work(ds) -> tuple[float, float]:
    """(seconds of simulation, trajectory-layers) of a computed dataset; the depth check
    counts when its cell time is recorded (results computed before it was are measured
    on the maps alone)."""
    seconds = sweep_seconds(ds)
    layers = float((ds.n_traj * ds.L).sum()) * float(ds.attrs["fixed_T"])
    if "check_cell_time_s" in ds.attrs:
        seconds += float(ds.attrs["check_cell_time_s"])
        layers += (float(ds.attrs["check_n_traj"]) * float(ds.attrs["check_T"])
                   * float(ds.check_L.sum()))
    return seconds, layers


cost = cost_function(__name__)


def _log_ratio(ds) -> np.ndarray:
    """log(eps / eps_c(beta)) over (beta, epsilon); -inf at eps = 0 (deep in the merging side)."""
    with np.errstate(divide="ignore"):
        return np.log(ds.epsilon.values[None, :] / ds.epsilon_c.values[:, None])


def summary_at(ds, L) -> dict:
    """Agreement of the dominant outcome with Proposition 1 at one depth scale ``L``.

    Cells within :data:`BAND` of the threshold (in log eps / eps_c) are left out
    (``n_away`` counts the others).  Of these, cells whose unclustered fraction exceeds
    :data:`UNDECIDED` are *undecided* (``n_undecided``; ``n_decided`` the rest): a dominant
    outcome resting on a minority of trajectories says nothing, so they count neither as
    agreeing nor as disagreeing.  The agreement counts and shares are over the decided cells.
    ``small`` cells are those whose step's random part is below :data:`SMALL_STEP`.
    ``n_wrong_above`` counts the disagreeing cells above the curve (the pair merges where
    the limit ends antipodal), ``n_wrong_large_step_above`` those of them with large steps;
    ``small_step_agree`` says whether at least :data:`SMALL_STEP_AGREE` of the decided
    small-step cells agree (True when there are none); ``large_step_merges`` whether any
    large-step cell above the curve is on the wrong side.  ``n_rate_off_small_step_above``
    counts the small-step cells above the band where the chain's rate of approach to -1
    differs from the limit's by more than :data:`RATE_AGREE` (relative), of
    ``n_small_step_above``.  ``wrong_cells`` and ``undecided_cells`` list (beta, eps).
    """
    sub = ds.sel(L=L)
    log_ratio = _log_ratio(sub)
    away = np.abs(log_ratio) > BAND
    undecided = away & (sub.p_unclustered.values > UNDECIDED)
    decided = away & ~undecided
    predicted_anti = log_ratio > 0
    agree = (predicted_anti == sub.dominant_antipodal.values) & decided
    wrong = decided & ~agree
    small = away & (sub.step_size.values < SMALL_STEP)
    large = away & ~small
    above = log_ratio > BAND
    p_a = sub.p_antipodal.values
    low = above & (sub.beta.values[:, None] <= LOW_BETA)
    high = above & (sub.beta.values[:, None] >= HIGH_BETA)
    out = {"L": int(L), "n_cells": int(away.size), "n_away": int(away.sum()),
           "n_undecided": int(undecided.sum()), "n_decided": int(decided.sum()),
           "n_undecided_small_step": int((undecided & small).sum()),
           "n_agree": int(agree.sum()),
           "share_agree": float(agree.sum() / max(decided.sum(), 1)),
           "n_small_step": int(small.sum()), "n_agree_small_step": int((agree & small).sum()),
           "n_decided_small_step": int((decided & small).sum()),
           "share_agree_small_step": float((agree & small).sum() / max((decided & small).sum(), 1)),
           "n_large_step": int(large.sum()), "n_agree_large_step": int((agree & large).sum()),
           "n_decided_large_step": int((decided & large).sum()),
           "share_agree_large_step": float((agree & large).sum() / max((decided & large).sum(), 1)),
           "n_wrong": int(wrong.sum()),
           "n_wrong_small_step": int((wrong & small).sum()),
           "n_wrong_above": int((wrong & predicted_anti).sum()),
           "n_wrong_large_step_above": int((wrong & large & predicted_anti).sum()),
           "n_traj": int(sub.n_traj.max()) if "n_traj" in sub else None,
           "mean_antipodal_above_low_beta": float(p_a[low].mean()) if low.any() else float("nan"),
           "mean_antipodal_above_high_beta": float(p_a[high].mean()) if high.any() else float("nan"),
           "max_unclustered": float(sub.p_unclustered.max())}
    small_above = small & above
    rate_off = np.zeros_like(small_above)
    for i, j in zip(*np.nonzero(small_above)):
        b, e = float(sub.beta.values[i]), float(sub.epsilon.values[j])
        rate_off[i, j] = abs(antipodal_rate(b, e, L) / antipodal_rate(b, e) - 1.0) > RATE_AGREE
    out["n_small_step_above"] = int(small_above.sum())
    out["n_rate_off_small_step_above"] = int(rate_off.sum())
    out["small_step_agree"] = bool(out["share_agree_small_step"] >= SMALL_STEP_AGREE
                                   or not (decided & small).any())
    out["large_step_merges"] = out["n_wrong_large_step_above"] > 0
    for name, mask in (("wrong_cells", wrong), ("undecided_cells", undecided)):
        bi, ei = np.nonzero(mask)
        out[name] = [(float(sub.beta.values[i]), float(sub.epsilon.values[j]))
                     for i, j in zip(bi, ei)]
    return out


def _reference(ds, Ls, T, d, tol) -> dict:
    """The limit at T, and the approach rates to -1, at the :func:`reference_cells`.

    ``cells`` lists, per reference cell, the limit's fractions at T
    (:func:`limit_outcome`), its rate :func:`antipodal_rate`, and at each L the map's
    fractions, the step's random part and the chain's rate.  The counts: ``n`` cells;
    ``n_limit_undecided`` where the limit's unclustered fraction at T exceeds
    :data:`UNDECIDED`; ``n_ahead_small_step`` where moreover, at the smallest L and with
    small steps, the map is decided with the antipodal pair dominant (the discrete model
    has clustered before its limit); ``n_wrong_first_limit_undecided`` where the map
    disagrees at the smallest L and the limit is undecided; ``n_undecided_last`` where
    the map at the largest L is undecided too.  Ranges over the cells each count names
    (NaN where there are none).  No cells where ``T`` is not finite (a dataset that does
    not record its horizon).
    """
    cells = []
    for beta, eps in (reference_cells(ds) if np.isfinite(T) else []):
        lim = limit_outcome(beta, eps, T, d, tol)
        entry = {"beta": beta, "epsilon": eps, "limit_single": lim["single"],
                 "limit_antipodal": lim["antipodal"], "limit_unclustered": lim["unclustered"],
                 "limit_rate": antipodal_rate(beta, eps), "by_L": {}}
        for L in Ls:
            sub = ds.sel(L=L, beta=beta, epsilon=eps)
            entry["by_L"][L] = {
                "p_single": float(sub.p_single), "p_antipodal": float(sub.p_antipodal),
                "p_unclustered": float(sub.p_unclustered), "step": float(sub.step_size),
                "rate": antipodal_rate(beta, eps, L)}
            entry["by_L"][L]["rate_ratio"] = entry["by_L"][L]["rate"] / entry["limit_rate"]
        cells.append(entry)
    first, last = Ls[0], Ls[-1]
    undecided = [c for c in cells if c["limit_unclustered"] > UNDECIDED]
    ahead = [c for c in undecided
             if c["by_L"][first]["step"] < SMALL_STEP
             and c["by_L"][first]["p_unclustered"] <= UNDECIDED
             and c["by_L"][first]["p_antipodal"] > c["by_L"][first]["p_single"]]
    wrong_first = [c for c in undecided
                   if c["by_L"][first]["p_unclustered"] <= UNDECIDED
                   and c["by_L"][first]["p_single"] >= c["by_L"][first]["p_antipodal"]]
    undecided_last = [c for c in undecided if c["by_L"][last]["p_unclustered"] > UNDECIDED]

    def span(items, get):
        values = [get(c) for c in items]
        return (min(values), max(values)) if values else (float("nan"), float("nan"))

    out = {"cells": cells, "n": len(cells), "n_limit_undecided": len(undecided),
           "n_ahead_small_step": len(ahead),
           "n_wrong_first_limit_undecided": len(wrong_first),
           "n_undecided_last": len(undecided_last),
           "beta_min": min((c["beta"] for c in cells), default=float("nan")),
           "beta_max": max((c["beta"] for c in cells), default=float("nan"))}
    out["limit_unclustered_min"], out["limit_unclustered_max"] = span(
        cells, lambda c: c["limit_unclustered"])
    out["limit_antipodal_max"] = span(cells, lambda c: c["limit_antipodal"])[1]
    out["ahead_antipodal_min"], out["ahead_antipodal_max"] = span(
        ahead, lambda c: c["by_L"][first]["p_antipodal"])
    out["ahead_limit_antipodal_max"] = span(ahead, lambda c: c["limit_antipodal"])[1]
    out["ahead_rate_ratio_min"], out["ahead_rate_ratio_max"] = span(
        ahead, lambda c: c["by_L"][first]["rate_ratio"])
    out["ahead_step_max"] = span(ahead, lambda c: c["by_L"][first]["step"])[1]
    out["undecided_last_unclustered_min"] = span(
        undecided_last, lambda c: c["by_L"][last]["p_unclustered"])[0]
    return out


def summary(ds) -> dict:
    """Every number the notebook quotes: per depth scale, at the reference cells and for
    the depth check.

    ``by_L[L]`` is :func:`summary_at`.  Of the cells that disagree with the limit at the
    smallest L, ``fixed_by_depth`` agree at the largest, ``undecided_by_depth`` are
    undecided there and ``still_wrong`` disagree at both; ``new_wrong`` disagree at the
    largest L only.  ``depth_check_limit_reached`` says whether the antipodal fraction at
    the check point exceeds :data:`LIMIT_REACHED` at the largest L of the depth check;
    ``check_limit`` holds the limit's own fractions at the check point and ``check_T``
    (:func:`limit_outcome`) and ``check_limit_reached`` whether its antipodal fraction
    exceeds :data:`LIMIT_REACHED` too.  The top-level ``share_agree`` etc. are those of the
    smallest L; ``L_first`` and ``L_last`` are the smallest and largest L, ``last`` the
    numbers of :func:`summary_at` at ``L_last`` (without the lists of cells).

    ``reference`` is :func:`_reference` (no cells when the dataset does not record T);
    ``limit_undecided_near_curve`` says whether the limit itself is undecided at T at
    some reference cell, ``ahead_small_step`` whether at some of these the map at the
    smallest L, with small steps, already shows the antipodal pair.

    ``depth_reading`` says what the deeper map does to the cells on the wrong side at the
    smallest L: ``"none_wrong"`` (there are none), ``"single_depth"`` (one L only),
    ``"all_fixed"`` (all of them leave the wrong side), ``"part_fixed"`` (some do),
    ``"none_fixed"`` (none does).  Also the run's grid (``n_beta``, ``n_epsilon``, ``T``),
    the thresholds and settings of the module (``band``, ``small_step``, ``undecided``,
    ``rate_agree``, ``limit_paths``, ``reference_beta_min``, ``reference_beta_step``,
    ``low_beta``, ``high_beta``), and the depth check's point, trajectories, horizon and single-cluster
    fractions at its smallest and largest L.
    """
    Ls = [int(L) for L in ds.L.values]
    by_L = {L: summary_at(ds, L) for L in Ls}
    first, last = by_L[Ls[0]], by_L[Ls[-1]]
    wrong_first = set(first["wrong_cells"])
    wrong_last = set(last["wrong_cells"])
    undecided_last = set(last["undecided_cells"])
    pa = ds.depth_p_antipodal.values
    out = {**{k: v for k, v in first.items() if k != "L"}, "Ls": Ls, "by_L": by_L,
           "fixed_by_depth": len(wrong_first - wrong_last - undecided_last),
           "undecided_by_depth": len(wrong_first & undecided_last),
           "still_wrong": len(wrong_first & wrong_last),
           "new_wrong": len(wrong_last - wrong_first),
           "depth_check_antipodal": [float(p) for p in pa],
           "depth_check_L": [int(L) for L in ds.check_L.values],
           "depth_check_limit_reached": bool(pa[-1] > LIMIT_REACHED)}
    if not first["n_wrong"]:
        reading = "none_wrong"
    elif len(Ls) == 1:
        reading = "single_depth"
    elif not wrong_first & wrong_last:
        reading = "all_fixed"
    elif wrong_first - wrong_last:
        reading = "part_fixed"
    else:
        reading = "none_fixed"
    ps = ds.depth_p_single.values if "depth_p_single" in ds else np.full(pa.shape, np.nan)
    attrs = ds.attrs
    T = float(attrs.get("fixed_T", np.nan))
    d, tol = int(attrs.get("fixed_d", 3)), float(attrs.get("fixed_tol", 1e-3))
    reference = _reference(ds, Ls, T, d, tol)
    check_beta = float(attrs.get("check_beta", np.nan))
    check_epsilon = float(attrs.get("check_epsilon", np.nan))
    check_T = float(attrs.get("check_T", np.nan))
    check_limit = (limit_outcome(check_beta, check_epsilon, check_T, d, tol)
                   if np.isfinite([check_beta, check_epsilon, check_T]).all()
                   else {"single": float("nan"), "antipodal": float("nan"),
                         "unclustered": float("nan")})
    out.update(
        L_first=Ls[0], L_last=Ls[-1], depth_reading=reading,
        last={k: v for k, v in last.items() if k not in ("wrong_cells", "undecided_cells")},
        n_beta=int(ds.beta.size), n_epsilon=int(ds.epsilon.size),
        T=T, band=BAND, small_step=SMALL_STEP, undecided=UNDECIDED, rate_agree=RATE_AGREE,
        limit_paths=LIMIT_PATHS, reference_beta_min=REFERENCE_BETA_MIN,
        reference_beta_step=REFERENCE_BETA_STEP,
        low_beta=LOW_BETA, high_beta=HIGH_BETA,
        reference=reference,
        limit_undecided_near_curve=reference["n_limit_undecided"] > 0,
        ahead_small_step=reference["n_ahead_small_step"] > 0,
        check_beta=check_beta, check_epsilon=check_epsilon,
        check_n_traj=int(attrs.get("check_n_traj", 0)), check_T=check_T,
        check_limit=check_limit,
        check_limit_reached=bool(check_limit["antipodal"] > LIMIT_REACHED),
        depth_check_single_first=float(ps[0]), depth_check_single_last=float(ps[-1]))
    return out


def _plot_depth_check(ax, ds, single_c, anti_c, letter):
    """The depth check's panel: the outcome fractions at the check point against L."""
    check_L = ds.check_L.values
    for name, colour, label in (("single", single_c, "single cluster"),
                                ("antipodal", anti_c, "antipodal pair")):
        p = ds[f"depth_p_{name}"].values
        lo, hi = ds[f"depth_p_{name}_low"].values, ds[f"depth_p_{name}_high"].values
        ax.fill_between(check_L, lo, hi, color=colour, alpha=0.25, lw=0)
        ax.plot(check_L, p, "o-", color=colour, ms=4, label=label)
    ax.plot(check_L, ds.depth_p_unclustered.values, "s:", color="0.4", ms=3, label="unclustered")
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("depth scale L")
    ax.set_ylabel("fraction at T")
    ax.set_title(rf"({letter}) depth check at $\beta$ = {ds.attrs['check_beta']:g}, "
                 rf"$\varepsilon$ = {ds.attrs['check_epsilon']:g} (theory: antipodal)", fontsize=10)
    ax.legend(fontsize=8, loc="center right")


def plot(ds):
    """Phase diagrams at every L (top; circled: the :func:`reference_cells`), the collapse
    onto eps / eps_c and the depth check."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    from ..style import palette

    single_c, anti_c = palette(10)[3], palette(10)[0]
    betas, eps = ds.beta.values, ds.epsilon.values
    Ls = ds.L.values
    n_maps = len(Ls)
    fig = plt.figure(figsize=(5.2 * max(n_maps, 2), 9.0))
    grid = fig.add_gridspec(2, max(n_maps, 2), height_ratios=[1, 0.9])
    db = np.diff(betas).mean() if betas.size > 1 else 1
    de = np.diff(eps).mean() if eps.size > 1 else 1
    bf = np.linspace(betas[0], betas[-1], 300)
    letters = "abcdefgh"
    refs = reference_cells(ds)
    for k, L in enumerate(Ls):
        ax = fig.add_subplot(grid[0, k])
        sub = ds.sel(L=L)
        p_s, p_a = sub.p_single.values, sub.p_antipodal.values
        dominant = np.where(p_a > p_s, 1, 0)
        strength = np.maximum(p_s, p_a)
        rgb = np.where(dominant[..., None] == 1, np.array(to_rgb(anti_c)),
                       np.array(to_rgb(single_c)))
        image = 1.0 - strength[..., None] * (1.0 - rgb)  # fainter as the dominant share drops
        ax.imshow(np.transpose(image, (1, 0, 2)), origin="lower", aspect="auto",
                  interpolation="nearest",
                  extent=(betas[0] - db / 2, betas[-1] + db / 2, eps[0] - de / 2, eps[-1] + de / 2))
        ax.plot(bf, theory.critical_epsilon(bf), "k--", lw=1.5)
        # Where the step's random part reaches SMALL_STEP: right of this line it is large.
        eps_small = SMALL_STEP * 2.0 * np.sqrt(L) * np.exp(-bf)
        ax.plot(bf, eps_small, color="0.25", ls=":", lw=1.4)
        if refs:
            ax.plot(*zip(*refs), "o", mfc="none", mec="k", ms=6, mew=1.0)
        ax.set_ylim(eps[0] - de / 2, eps[-1] + de / 2)
        ax.set_xlim(betas[0] - db / 2, betas[-1] + db / 2)
        ax.set_xlabel(r"$\beta$")
        ax.set_ylabel(r"$\varepsilon$")
        ax.set_title(f"({letters[k]}) L = {int(L)}: dominant outcome at T", fontsize=10)
        if k == 0:
            ax.legend(handles=[Patch(color=single_c, label="single cluster"),
                               Patch(color=anti_c, label="antipodal pair"),
                               plt.Line2D([], [], color="k", ls="--",
                                          label=r"$\varepsilon_c=\sqrt{2e^{-\beta}}$"),
                               plt.Line2D([], [], color="0.25", ls=":",
                                          label=rf"step $\varepsilon e^\beta/(2\sqrt{{L}})$ = {SMALL_STEP:g}"),
                               plt.Line2D([], [], ls="none", marker="o", mfc="none", mec="k",
                                          label="reference cell (limit at T)")],
                      loc="upper right", fontsize=8, frameon=True)
    # (next) collapse onto eps / eps_c, every depth scale: solid the deepest, dashed the others
    ax2 = fig.add_subplot(grid[1, 0])
    ratio = ds.epsilon.values[None, :] / ds.epsilon_c.values[:, None]
    shown = np.linspace(0, betas.size - 1, min(5, betas.size)).astype(int)
    colours = palette(len(shown))
    styles = ["--", "-"] if n_maps == 2 else ["-"] * n_maps
    for L, style in zip(Ls, styles if n_maps == 2 else ["-"] * n_maps):
        sub = ds.sel(L=L)
        for colour, i in zip(colours, shown):
            if L == Ls[-1]:
                ax2.fill_between(ratio[i], sub.p_antipodal_low.values[i],
                                 sub.p_antipodal_high.values[i], color=colour, alpha=0.2, lw=0)
            label = rf"$\beta$ = {betas[i]:.2g}" if L == Ls[-1] else None
            ax2.plot(ratio[i], sub.p_antipodal.values[i], style, marker="o", ms=2.5, lw=1,
                     color=colour, label=label)
    x = np.linspace(0, max(3.0, float(np.nanmax(ratio[shown]))), 400)
    ax2.plot(x, (x > 1).astype(float), "k-", lw=1.2, label="limit theory (step)")
    if n_maps == 2:
        ax2.plot([], [], "--", color="0.4", lw=1, label=f"L = {int(Ls[0])}")
        ax2.plot([], [], "-", color="0.4", lw=1, label=f"L = {int(Ls[1])} (band: 95%)")
    ax2.set_xlim(0, min(4.0, float(np.nanmax(ratio[shown]))))
    ax2.set_xlabel(r"$\varepsilon / \varepsilon_c(\beta)$")
    ax2.set_ylabel(r"$P(\mathrm{antipodal\ at\ } T)$")
    ax2.set_title(f"({letters[n_maps]}) antipodal fraction against the predicted threshold",
                  fontsize=10)
    # below the panel: inside it every corner holds data
    ax2.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4,
               frameon=False)
    _plot_depth_check(fig.add_subplot(grid[1, 1]), ds, single_c, anti_c, letters[n_maps + 1])
    per_L = ", ".join(f"{int(ds.n_traj.sel(L=L).max()):,} at L = {int(L)}" for L in Ls)
    return laid_out(fig, f"Hybrid model, USA, N = 2, d = {int(ds.attrs.get('fixed_d', 3))}, "
                    f"T = {float(ds.attrs.get('fixed_T', float('nan'))):g}; trajectories per cell: "
                    f"{per_L}", fontsize=11)
