r"""Two clusters of tokens: the companion's reduction of clustered N-token configurations.

This module is ours, not the paper's (book chapter "Many tokens", section "Two clusters,
exactly").  Tokens at one point receive the same update, so a configuration with
:math:`m_1` tokens at :math:`y_1` and :math:`m_2 = N - m_1` at :math:`y_2` stays a
two-point configuration, and in the limit of Theorem 1 its overlap
:math:`Z = \langle y_1, y_2\rangle` is a closed diffusion
:math:`dZ = \mu(Z)\,dt + s(Z)\,dB` (:func:`stochastic_transformers.theory.two_cluster_coefficients`
defines :math:`\mu` and :math:`s^2`).  Here:

* :func:`antipodal_coefficients`: the same coefficients as functions of
  :math:`v = 1 + Z`, written so that they keep their relative precision as
  :math:`v \to 0` (an unbalanced split hovers at :math:`v` of order
  :math:`(\alpha_1-\alpha_2)^2`, which is :math:`10^{-9}` and below at large
  :math:`\beta`);
* :func:`boundaries`: which of :math:`\pm 1` attract, for every split;
* :func:`hovering_scale` and :func:`hovering_depth`: the depth at which an unbalanced
  antipodal split hovers; :func:`balanced_like_exponent` and
  :func:`frozen_hovering_quantile`: when it hovers, and its law at large :math:`\beta`;
* :func:`antipodal_persistence`: :math:`P(1 + Z_t \le \mathrm{tol} \mid Z_0)`, from the backward
  Kolmogorov equation of the reduced diffusion (the limit curve for the persistence of
  a split).

At :math:`Z = -1` the fields are :math:`A_1 = \alpha_1 y_1`, :math:`A_2 = \alpha_2 y_2` with
:math:`\alpha_k = p_k - q_k`; :math:`\mu(-1) = \sigma^2 (d-1)(\alpha_1-\alpha_2)^2/2` and
:math:`s^2 \sim 2\sigma^2(\alpha_1-\alpha_2)^2\,v`.  A balanced split has
:math:`\alpha_1 = \alpha_2` and is the two-token diffusion of Lemma 4 exactly.  An
unbalanced one has :math:`\alpha_1 \ne \alpha_2`: near -1, :math:`v` is locally a squared
Bessel process of dimension :math:`d - 1` (:math:`dQ = \delta c\,dt + 2\sqrt{cQ}\,dB`
with :math:`c = \sigma^2(\alpha_1-\alpha_2)^2/2`, :math:`\delta = d-1`), which never reaches
0 when :math:`d \ge 3`: -1 is not attracting.
"""

from __future__ import annotations

import math

import numpy as np

from . import theory
from ._validation import (ATTENTIONS, check_choice, check_int, check_real,
                          check_real_array, check_times, check_tol)
from .kolmogorov import at_log_gaps, log_gap_solution


def _weights_v(v, beta, m1, m2, attention):
    r"""``(alpha1, alpha2, P, Q, alpha1 - alpha2)`` at :math:`v = 1 + z`, in closed forms.

    :math:`\alpha_k = p_k - q_k`, :math:`P = p_1p_2 + q_1q_2`, :math:`Q = p_1q_1 + p_2q_2`.
    Softmax with :math:`r = e^{\beta(z-1)} = e^{-2\beta}e^{\beta v}`:
    :math:`\alpha_1 - \alpha_2 = 2r(m_1^2-m_2^2)/((m_1+m_2r)(m_2+m_1r))`; unnormalised:
    :math:`\alpha_1 - \alpha_2 = (m_1 - m_2)(e^\beta + e^{\beta z})/N`.
    """
    if attention == "softmax":
        r = np.exp(beta * (v - 2.0))
        den1, den2 = m1 + m2 * r, m2 + m1 * r
        p1, q1 = m1 / den1, m2 * r / den1
        p2, q2 = m2 / den2, m1 * r / den2
        gap = 2.0 * r * (m1 * m1 - m2 * m2) / (den1 * den2)
    else:
        n = m1 + m2
        eb, ez = math.exp(beta), np.exp(beta * (v - 1.0))
        p1, q1, p2, q2 = m1 * eb / n, m2 * ez / n, m2 * eb / n, m1 * ez / n
        gap = (m1 - m2) * (eb + ez) / n
    return p1 - q1, p2 - q2, p1 * p2 + q1 * q2, p1 * q1 + p2 * q2, gap


def antipodal_coefficients(v, beta, d, m1, m2, *, attention="softmax", sigma=1.0):
    r"""Drift and squared diffusion of the two-cluster overlap at :math:`Z = -1 + v`.

    The same functions as :func:`theory.two_cluster_coefficients`, regrouped so that the
    terms that survive at :math:`v = 0` are exact squares of :math:`\alpha_1 - \alpha_2`
    and every other term carries a factor :math:`v`:

    .. math::

        \mu = \sigma^2\Bigl[\tfrac{d-1}{2}(\alpha_1-\alpha_2)^2 + v\bigl(
              -\tfrac{d-1}{2}(\alpha_1^2+\alpha_2^2) + (d-1)Q(1-v) + P(d-1-2v+v^2)
              + \alpha_1\alpha_2(2-v)\bigr)\Bigr],

        s^2 = \sigma^2 v(2-v)\bigl[(\alpha_1-\alpha_2)^2 + 2v(\alpha_1\alpha_2 + Q + (1-v)P)\bigr].

    Parameters
    ----------
    v : float or array in [0, 2]
        :math:`1 + Z`.
    beta, d, m1, m2, attention, sigma : as in :func:`theory.two_cluster_coefficients`.
    """
    beta, d, m1, m2, attention, sigma = theory.split_args(beta, d, m1, m2, attention, sigma)
    v = check_real_array("v", v, 0.0, 2.0)
    a1, a2, P, Q, gap = _weights_v(v, beta, m1, m2, attention)
    drift = sigma**2 * (0.5 * (d - 1) * gap * gap
                        + v * (-0.5 * (d - 1) * (a1 * a1 + a2 * a2) + (d - 1) * Q * (1.0 - v)
                               + P * (d - 1 - 2.0 * v + v * v) + a1 * a2 * (2.0 - v)))
    diff2 = sigma**2 * v * (2.0 - v) * (gap * gap + 2.0 * v * (a1 * a2 + Q + (1.0 - v) * P))
    return theory._out(drift), theory._out(diff2)


def hovering_scale(beta, m1, m2, *, attention="softmax"):
    r""":math:`(\alpha_1 - \alpha_2)^2` at :math:`Z = -1`: the scale of the hovering depth.

    Softmax: :math:`\alpha_1 - \alpha_2 = 2e^{-2\beta}(m_1^2-m_2^2)/((m_1+m_2e^{-2\beta})(m_2+m_1e^{-2\beta}))
    \approx 2e^{-2\beta}(m_1/m_2 - m_2/m_1)`; unnormalised:
    :math:`2(m_1-m_2)\cosh(\beta)/N`.  Zero exactly for a balanced split.
    """
    beta = check_real("beta", beta, 0.0, 700.0)
    m1, m2 = check_int("m1", m1, 1), check_int("m2", m2, 1)
    attention = check_choice("attention", attention, ATTENTIONS)
    gap = _weights_v(np.asarray(0.0), beta, m1, m2, attention)[4]
    return float(gap * gap)


def _log_ratio_exponent(lam_drift, lam_diff2):
    """Lyapunov exponent of log(distance to a pole): drift/dist - diff2/(2 dist^2) in the limit."""
    return lam_drift - 0.5 * lam_diff2


def boundaries(beta, d, m1, m2, *, attention="softmax", sigma=1.0):
    r"""How the two-cluster overlap behaves at :math:`\pm 1`.

    Near +1 (the points merge) and, for a balanced split, near -1 the distance
    :math:`w` to the pole is locally a geometric Brownian motion; the pole attracts iff the
    Lyapunov exponent :math:`\lim (\mu_w/w - s^2/(2w^2))` of :math:`\log w` is negative.
    For an unbalanced split the drift at -1 is positive and :math:`1 + Z` is locally a
    squared Bessel process of dimension :math:`d - 1`: never reached for :math:`d \ge 3`,
    reached and instantly left for :math:`d = 2`; never attracting.

    Returns
    -------
    dict
        ``single`` and ``antipodal``: ``"attracting"``, ``"repelling"`` or, for an
        unbalanced split at -1, ``"entrance (squared Bessel, dimension d - 1)"`` (d >= 3)
        or ``"reflecting (squared Bessel, dimension 1)"`` (d = 2);
        ``single_exponent``, ``antipodal_exponent`` (the Lyapunov exponents, NaN at an
        unbalanced -1), ``balanced``, ``hovering_scale`` (:func:`hovering_scale`) and
        ``bessel_dimension`` (d - 1 for an unbalanced split, else None).
    """
    beta, d, m1, m2, attention, sigma = theory.split_args(beta, d, m1, m2, attention, sigma)
    w = 1e-7
    mu, s2 = theory.two_cluster_coefficients(1.0 - w, beta, d, m1, m2, attention=attention,
                                             sigma=sigma)
    single = _log_ratio_exponent(-mu / w, s2 / w**2)
    out = {"balanced": m1 == m2, "single_exponent": single,
           "single": "attracting" if single < 0 else "repelling",
           "hovering_scale": hovering_scale(beta, m1, m2, attention=attention)}
    if m1 == m2:
        mu, s2 = antipodal_coefficients(w, beta, d, m1, m2, attention=attention, sigma=sigma)
        anti = _log_ratio_exponent(mu / w, s2 / w**2)
        out.update(antipodal_exponent=anti, bessel_dimension=None,
                   antipodal="attracting" if anti < 0 else "repelling")
    else:
        out.update(antipodal_exponent=float("nan"), bessel_dimension=d - 1,
                   antipodal=("entrance (squared Bessel, dimension d - 1)" if d >= 3
                              else "reflecting (squared Bessel, dimension 1)"))
    return out


def _log_speed_density(y, beta, d, m1, m2, attention, sigma):
    r"""Log of the speed density of :math:`y = \log(1 + Z)` on the grid ``y`` (up to a constant).

    :math:`m(v)\,dv \propto e^{\int 2\mu/s^2\,dv}/s^2\,dv`, and :math:`dv = v\,dy`.
    """
    v = np.exp(y)
    mu, s2 = antipodal_coefficients(v, beta, d, m1, m2, attention=attention, sigma=sigma)
    integrand = 2.0 * mu / s2 * v  # d/dy of the exponent
    return _cumulative(integrand, y) - np.log(s2) + y


def _cumulative(f, y):
    """The trapezoid integrals of ``f`` from ``y[0]`` to every point of the grid ``y``."""
    return np.concatenate([[0.0], np.cumsum(0.5 * (f[1:] + f[:-1]) * np.diff(y))])


def _quantiles_of(log_w, y, quantiles):
    r"""Quantiles of the density :math:`e^{w}` on the grid ``y`` (a variable :math:`\log x`),
    as :math:`x`."""
    cdf = _cumulative(np.exp(log_w - log_w.max()), y)
    return np.exp(np.interp(quantiles, cdf / cdf[-1], y))


def hovering_depth(beta, d, m1, m2, *, attention="softmax", tol=1e-3, quantiles=(0.5,)):
    r"""Quantiles of :math:`1 + Z` for an unbalanced split hovering below ``-1 + tol``.

    The reduced diffusion's speed measure restricted to :math:`(-1, -1+\mathrm{tol}]` is its
    stationary law there if the top were reflecting; while the split stays antipodal
    (escapes are rare when they are slow) the overlap is distributed like it.  Near
    -1, with :math:`Q = v/(\alpha_1-\alpha_2)^2`, the coefficients do not depend on
    :math:`\alpha_1 - \alpha_2` at leading order, so the depth is proportional to
    :func:`hovering_scale` as it goes to 0.  Computed by quadrature on a uniform grid in
    :math:`\log v` (2,000 points a decade of... see the code: step 0.005 in log v).
    ``quantiles`` are probabilities in [0, 1] (a scalar or an array).
    """
    quantiles = check_real_array("quantiles", quantiles, 0.0, 1.0)
    beta, d, m1, m2, attention, _ = theory.split_args(beta, d, m1, m2, attention, 1.0)
    if m1 == m2:
        raise ValueError("a balanced split (m1 == m2) does not hover: it is the two-token "
                         "diffusion, attracted to -1 when beta > beta_c(d)")
    tol = check_tol(tol)
    scale = hovering_scale(beta, m1, m2, attention=attention)
    if scale == 0.0:
        raise ValueError(f"(alpha1 - alpha2)^2 underflows at beta={beta}: the split hovers "
                         "below the smallest double")
    y_lo = math.log(scale) - 40.0
    y = np.arange(y_lo, math.log(tol) + 1e-12, 0.005)
    return _quantiles_of(_log_speed_density(y, beta, d, m1, m2, attention, 1.0), y, quantiles)


def _check_persistence_args(beta, d, m1, m2, attention, sigma, tol, h, t):
    beta, d, m1, m2, attention, sigma = theory.split_args(beta, d, m1, m2, attention, sigma)
    tol = check_tol(tol)
    h = check_real("h", h, 0.0, 0.5, strict_min=True)
    ts = check_times("t", t)
    return beta, d, m1, m2, attention, sigma, tol, h, ts


def _persistence_grid(ts, beta, d, m1, m2, attention, sigma, tol, h, v_min):
    """u(t_k, y_i) on the grid of step ``h`` in y = log(1 + Z); returns (y, u (n_y, n_t))."""
    return log_gap_solution(
        lambda v: antipodal_coefficients(v, beta, d, m1, m2, attention=attention, sigma=sigma),
        hovering_scale(beta, m1, m2, attention=attention), tol, v_min, h, ts)


def antipodal_persistence(t, one_plus_z0, beta, d, m1, m2, *, attention="softmax", sigma=1.0,
                          tol=1e-3, h=0.02):
    r""":math:`P(1 + Z_t \le \mathrm{tol} \mid 1 + Z_0 = v_0)` for the two-cluster overlap.

    Solves the backward Kolmogorov equation :math:`u_t = \mathcal L u`,
    :math:`u(0, v) = 1\{v \le \mathrm{tol}\}` in :math:`y = \log v` on
    :math:`[\log v_{lo}, \log(2 - 10^{-8})]` (:math:`v_{lo}` far below both the hovering
    scale and ``tol``; reflecting there, absorbing at the top), with second-order
    differences (the indicator cell-averaged) and the L-stable order-7 Pade steps of
    :func:`stochastic_transformers.kolmogorov.propagate`.  The grid is refined once (``h``,
    ``h/2``) and the finer answer is returned with the difference as its error estimate.

    Parameters
    ----------
    t : float or 1-D array, > 0
    one_plus_z0 : float or 1-D array in (0, 2)
        Starting :math:`1 + Z_0` (given as such, so that it keeps its precision near -1).
    beta, d, m1, m2, attention, sigma : the split and the model.
    tol : float in (0, 1)
    h : float, grid step in :math:`\log(1+Z)`.

    Returns
    -------
    value, error : arrays of shape (len(t), len(one_plus_z0)) (floats for scalar input)
    """
    beta, d, m1, m2, attention, sigma, tol, h, ts = _check_persistence_args(
        beta, d, m1, m2, attention, sigma, tol, h, t)
    v0 = np.atleast_1d(check_real_array("one_plus_z0", one_plus_z0, 0.0, 2.0, strict_min=True,
                                        strict_max=True))
    if v0.ndim != 1:
        raise ValueError("one_plus_z0 must be a scalar or 1-D array in the open interval (0, 2)")
    results = []
    for step in (h, h / 2):
        y, u = _persistence_grid(ts, beta, d, m1, m2, attention, sigma, tol, step,
                                 float(v0.min()))
        results.append(at_log_gaps(y, u, v0))
    value, error = results[1], np.abs(results[1] - results[0])
    if np.ndim(t) == 0 and np.ndim(one_plus_z0) == 0:
        return float(value[0, 0]), float(error[0, 0])
    return value, error


def persistence_of_merged(elapsed, one_plus_z_merge, beta, d, m1, m2, *, attention="softmax",
                          sigma=1.0, tol=1e-3, h=0.01):
    r"""Limit probability that each split is antipodal ``elapsed`` after its merge.

    For trajectories that merged into the split (m1, m2) with :math:`1 + Z` =
    ``one_plus_z_merge`` (shape (n,)), returns :math:`u(\tau, v)` at every
    ``elapsed`` :math:`\tau \ge 0` (shape (n, k)): the Kolmogorov solution of
    :func:`antipodal_persistence` tabulated once at 160 log-spaced times
    (linear in :math:`\log\tau` between them, the indicator at :math:`\tau = 0`) and
    interpolated linearly in :math:`\log(1 + Z)` on a grid of step ``h``.
    """
    beta, d, m1, m2, attention, sigma, tol, h, _ = _check_persistence_args(
        beta, d, m1, m2, attention, sigma, tol, h, 1.0)
    tau = np.asarray(elapsed, dtype=float)
    v = np.asarray(one_plus_z_merge, dtype=float)
    if v.ndim != 1 or tau.shape[:1] != v.shape or tau.ndim != 2:
        raise ValueError("elapsed must have shape (n, k) and one_plus_z_merge shape (n,)")
    if v.size == 0:
        return np.zeros(tau.shape)
    if np.any(~np.isfinite(v)) or np.any(v <= 0) or np.any(v > 2):
        raise ValueError("one_plus_z_merge must lie in (0, 2]")
    if np.any(~np.isfinite(tau)) or np.any(tau < 0):
        raise ValueError("elapsed must be finite and >= 0")
    t_max = max(float(tau.max()), 1e-3)
    table_t = np.geomspace(min(1e-3, t_max), t_max, 160)
    y, u = _persistence_grid(table_t, beta, d, m1, m2, attention, sigma, tol, h,
                             float(min(v.min(), tol)))
    log_v = np.clip(np.log(np.minimum(v, 2.0 - 1e-8)), y[0], y[-1])
    # u at each trajectory's starting point, at every table time: (n, n_table)
    at_start = np.stack([np.interp(log_v, y, u[:, j]) for j in range(len(table_t))], axis=1)
    out = np.empty(tau.shape)
    log_table = np.log(table_t)
    for i in range(v.size):
        positive = tau[i] > 0
        out[i, ~positive] = float(v[i] <= tol)
        if np.any(positive):
            out[i, positive] = np.interp(np.log(np.maximum(tau[i, positive], table_t[0])),
                                         log_table, at_start[i])
    return out


def balanced_like_exponent(beta, d, m1, m2, *, attention="softmax", sigma=1.0):
    r"""``(lambda, ell)``: the split's coefficients at :math:`Z = -1` without its unbalance.

    Near -1, with :math:`v = 1 + Z`, the drift and squared diffusion of
    :func:`antipodal_coefficients` are :math:`\mu = \sigma^2[\tfrac{d-1}{2}(\alpha_1-\alpha_2)^2
    + Kv] + O(v^2)` and :math:`s^2 = \sigma^2[2(\alpha_1-\alpha_2)^2 v + \ell v^2] + O(v^3)`
    with :math:`K = -\tfrac{d-1}{2}(\alpha_1^2+\alpha_2^2) + (d-1)(P + Q) + 2\alpha_1\alpha_2`
    and :math:`\ell = 4(\alpha_1\alpha_2 + P + Q)` (weights of :func:`antipodal_coefficients`
    at :math:`v = 0`).  Dropping the :math:`(\alpha_1-\alpha_2)^2` terms leaves a geometric
    Brownian motion, whose exponent of :math:`\log(1 + Z)` is
    :math:`\lambda = \sigma^2(K - \ell/2)`: the "balanced-like part" of the chapter.  An
    unbalanced split hovers at :math:`1 + Z` of order :math:`(\alpha_1-\alpha_2)^2` only when
    :math:`\lambda < 0` with :math:`2|\lambda|/\ell` not small; for a balanced split
    :math:`\lambda` is the exponent of :func:`boundaries` at -1.  ``ell`` is returned with
    the factor :math:`\sigma^2`.
    """
    beta, d, m1, m2, attention, sigma = theory.split_args(beta, d, m1, m2, attention, sigma)
    a1, a2, P, Q, _ = (float(x) for x in _weights_v(np.asarray(0.0), beta, m1, m2, attention))
    K = -0.5 * (d - 1) * (a1 * a1 + a2 * a2) + (d - 1) * (P + Q) + 2.0 * a1 * a2
    ell = 4.0 * (a1 * a2 + P + Q)
    return sigma**2 * (K - 0.5 * ell), sigma**2 * ell


def frozen_hovering_quantile(d, lam, ell, quantiles=(0.5,)):
    r"""Quantiles of :math:`Q = (1 + Z)/(\alpha_1-\alpha_2)^2` for the coefficients frozen at -1.

    With the coefficients of :func:`balanced_like_exponent` (and :math:`\sigma = 1`) the
    overlap near -1 is, in :math:`Q`, the diffusion with drift
    :math:`\tfrac{d-1}{2} + KQ` and squared diffusion :math:`2Q + \ell Q^2`
    (:math:`K = \lambda + \ell/2`), whose speed density is
    :math:`Q^{(d-3)/2}(2 + \ell Q)^{B/\ell - 1}` with :math:`B = 2K - (d-1)\ell/2`; it is a
    probability law when :math:`\lambda < 0` (it falls like :math:`Q^{-1-2|\lambda|/\ell}`).
    This is the large-:math:`\beta` law of the hovering depth over
    :func:`hovering_scale` (:func:`hovering_depth` tends to it as the scale goes to 0).
    Computed by quadrature in :math:`\log Q` on :math:`[-40, 40 + 40\ell/|\lambda|]`
    (200,001 points).  ``quantiles`` are probabilities in [0, 1].
    """
    quantiles = check_real_array("quantiles", quantiles, 0.0, 1.0)
    d = check_int("d", d, 2)
    lam = check_real("lam", lam, None, 0.0, strict_max=True)
    ell = check_real("ell", ell, 0.0, strict_min=True)
    K = lam + 0.5 * ell
    B = 2.0 * K - 0.5 * (d - 1) * ell
    y = np.linspace(-40.0, 40.0 + 40.0 * ell / abs(lam), 200_001)
    log_w = 0.5 * (d - 1) * y + (B / ell - 1.0) * np.logaddexp(math.log(2.0), math.log(ell) + y)
    return _quantiles_of(log_w, y, quantiles)


def split_predictions(times, one_plus_z0, beta, d, m1, m2, *, attention="softmax", tol=1e-3):
    r"""What the reduction predicts for the split (m1, m2) started at :math:`1 + Z_0` =
    ``one_plus_z0``: ``(persistence, error, scale, depth)``.

    ``persistence`` and ``error``: :func:`antipodal_persistence` at ``times`` (1-D);
    ``scale``: :func:`hovering_scale`; ``depth``: the median of :func:`hovering_depth`, NaN
    for a balanced split (it does not hover) or a scale that underflows to 0.
    """
    value, error = antipodal_persistence(times, np.array([one_plus_z0]), beta, d, m1, m2,
                                         attention=attention, tol=tol)
    scale = hovering_scale(beta, m1, m2, attention=attention)
    depth = float("nan")
    if m1 != m2 and scale > 0:
        depth = float(hovering_depth(beta, d, m1, m2, attention=attention, tol=tol)[0])
    return value[:, 0], error[:, 0], scale, depth


# ---------------------------------------------------------------------- the chapter's numbers
#: The unbalanced splits and the softmax betas of the hovering statements of the chapter
#: "Many tokens" (section "Two clusters, exactly"), evaluated by :func:`chapter_numbers`.
CHAPTER_SPLITS = ((1, 2), (1, 3), (2, 3))
CHAPTER_BETAS = (1.0, 2.0, 3.0, 4.0, 5.0)
#: From this beta on the chapter says the hovering depth is set by (alpha1 - alpha2)^2.
DEEP_BETA = 3.0
#: The large-beta limit of the balanced-like part is evaluated here (e^{-2 beta} ~ 4e-11).
LARGE_BETA = 12.0
#: The grid on which the exponent of log(1 - Z) at +1 (:func:`boundaries`) is compared
#: with -(d - 1) a12(1), both attentions.
PLUS_ONE_GRID = {"d": (2, 3, 4, 6, 10, 20, 50), "m1": (1, 2, 3, 5, 10, 30, 99),
                 "m2": (1, 2, 5, 30, 99), "beta": (0.0, 0.5, 2.0, 8.0, 15.0)}


def hovering_ranges(betas, splits, d, tol=1e-3) -> dict:
    r"""Ranges over softmax ``betas`` and unbalanced ``splits`` of the hovering quantities.

    ``scale_min``, ``scale_max``: :math:`(\alpha_1-\alpha_2)^2` (:func:`hovering_scale`);
    ``ratio_min``, ``ratio_max``: the speed-measure median below ``-1 + tol`` over it
    (:func:`hovering_depth`); ``two_lam_over_ell`` (the mean), ``_min`` and ``_max``:
    :math:`2|\lambda|/\ell` (:func:`balanced_like_exponent`).
    """
    scales, ratios, rates = [], [], []
    for beta in betas:
        for m1, m2 in splits:
            scale = hovering_scale(beta, m1, m2)
            scales.append(scale)
            ratios.append(float(hovering_depth(beta, d, m1, m2, tol=tol)[0]) / scale)
            lam, ell = balanced_like_exponent(beta, d, m1, m2)
            rates.append(2.0 * abs(lam) / ell)
    return {"scale_min": min(scales), "scale_max": max(scales), "ratio_min": min(ratios),
            "ratio_max": max(ratios), "two_lam_over_ell": float(np.mean(rates)),
            "two_lam_over_ell_min": min(rates), "two_lam_over_ell_max": max(rates)}


def plus_one_exponent_error(grid=PLUS_ONE_GRID) -> tuple[float, int]:
    r"""``(largest relative error, cases)``: the exponent of :math:`\log(1 - Z)` at +1 that
    :func:`boundaries` computes numerically, against :math:`-(d-1)a_{12}(1)`
    (:math:`a_{12}(1) = 1` with softmax, :math:`e^{2\beta}` unnormalised), over every
    combination of ``grid``'s ``d``, ``m1``, ``m2`` and ``beta`` and both attentions."""
    import itertools

    worst, cases = 0.0, 0
    for attention in ATTENTIONS:
        for d, m1, m2, beta in itertools.product(grid["d"], grid["m1"], grid["m2"], grid["beta"]):
            got = boundaries(beta, d, m1, m2, attention=attention)["single_exponent"]
            a12 = 1.0 if attention == "softmax" else math.exp(2.0 * beta)
            worst = max(worst, abs(got / (-(d - 1) * a12) - 1.0))
            cases += 1
    return worst, cases


def chapter_numbers(d=4, tol=1e-3) -> dict:
    r"""The chapter's numbers about the reduced diffusion, computed (about a second).

    ``per_beta[beta]``: :func:`hovering_ranges` over :data:`CHAPTER_SPLITS` at each beta of
    :data:`CHAPTER_BETAS`; ``shallow`` and ``deep``: the same over the betas below
    :data:`DEEP_BETA` and from it on.  ``large_beta``: :math:`\lambda`, :math:`\ell` and
    :math:`2|\lambda|/\ell` at :data:`LARGE_BETA` (split 1 vs 3: their common large-beta
    limit) and the median of the frozen law of :math:`Q = (1+Z)/(\alpha_1-\alpha_2)^2`
    (:func:`frozen_hovering_quantile`).  ``plus_one``: :func:`plus_one_exponent_error` over
    :data:`PLUS_ONE_GRID` (``max_rel_error``, ``n_cases``) and the grid's largest d, split
    size and beta.
    """
    def ranges(betas):
        return hovering_ranges(betas, CHAPTER_SPLITS, d, tol)

    lam, ell = balanced_like_exponent(LARGE_BETA, d, 1, 3)
    worst, cases = plus_one_exponent_error()
    return {"d": int(d), "tol": float(tol),
            "per_beta": {float(b): ranges([b]) for b in CHAPTER_BETAS},
            "shallow": ranges([b for b in CHAPTER_BETAS if b < DEEP_BETA]),
            "deep": {"beta_from": DEEP_BETA,
                     **ranges([b for b in CHAPTER_BETAS if b >= DEEP_BETA])},
            "large_beta": {"beta": LARGE_BETA, "lam": lam, "ell": ell,
                           "two_lam_over_ell": 2.0 * abs(lam) / ell,
                           "median_q": float(frozen_hovering_quantile(d, lam, ell)[0])},
            "plus_one": {"max_rel_error": worst, "n_cases": cases,
                         "d_max": max(PLUS_ONE_GRID["d"]),
                         "m_max": max(PLUS_ONE_GRID["m1"] + PLUS_ONE_GRID["m2"]),
                         "beta_max": max(PLUS_ONE_GRID["beta"])}}
