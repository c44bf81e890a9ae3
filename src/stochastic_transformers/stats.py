"""Binomial proportions: Wilson intervals and deviations in standard errors.

Almost every figure estimates a probability (two tokens clustered, a mode
reached) as a count ``k`` of successes out of ``n`` independent runs and
compares it with the exact theory.  This module holds the few formulas those
comparisons need, vectorised over numpy arrays (and anything numpy converts,
such as :class:`xarray.DataArray` values).

Conventions shared by every function here:

* ``n = 0`` (no trials) carries no information, so estimates, standard errors
  and interval bounds are ``nan`` there rather than an arbitrary number; plots
  skip ``nan`` and reductions can use ``nanmax``/``nanmean``.
* Bad input (negative counts, ``k > n``, a level outside ``(0, 1)``) raises
  :class:`ValueError` naming the parameter, before anything is computed.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from ._validation import check_count_array, check_probability_array, check_real

__all__ = [
    "normal_quantile", "proportion", "wilson_interval", "binomial_standard_error",
    "max_deviation_in_se", "agreement_z", "count_z", "add_fraction", "add_fraction_where",
    "homogeneity_test", "two_proportion_z", "t_interval", "sign_test",
]


def normal_quantile(level: float = 0.95) -> float:
    """Two-sided standard normal quantile for a confidence ``level``.

    Parameters
    ----------
    level : float
        Confidence level in the open interval ``(0, 1)``.

    Returns
    -------
    float
        ``z`` such that ``P(|Z| <= z) = level`` for ``Z ~ N(0, 1)``
        (``1.959963984540054`` for ``level = 0.95``).
    """
    level = check_real("level", level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be > 0 and < 1, got {level}")
    # The standard library's inverse normal CDF is exact to double precision and
    # avoids a scipy import for one number.
    return statistics.NormalDist().inv_cdf(0.5 + level / 2.0)


def t_equivalent(z: float, dof: int) -> float:
    """Student's t quantile with ``dof`` degrees of freedom at the one-sided tail that the
    normal quantile ``z`` has: the same level when a standard error is estimated from
    ``dof`` residuals (a misfit-inflated fit) instead of known."""
    from scipy.stats import norm, t

    return float(t.isf(norm.sf(check_real("z", z)), max(int(dof), 1)))


def _counts_pair(k, n) -> tuple[np.ndarray, np.ndarray]:
    """Validated, broadcast ``(k, n)`` with ``0 <= k <= n``."""
    k_arr = check_count_array("k", k)
    n_arr = check_count_array("n", n)
    try:
        k_arr, n_arr = np.broadcast_arrays(k_arr, n_arr)
    except ValueError:
        raise ValueError(f"k and n must have broadcastable shapes, got {np.shape(k)} and "
                         f"{np.shape(n)}") from None
    if np.any(k_arr > n_arr):
        i = np.flatnonzero(k_arr > n_arr)[0]
        raise ValueError(f"k must be <= n, got k={k_arr.ravel()[i]:g} > n={n_arr.ravel()[i]:g}")
    return k_arr, n_arr


def _unwrap(arr: np.ndarray):
    """A 0-d result as a numpy scalar, anything else unchanged."""
    return arr[()] if arr.ndim == 0 else arr


def proportion(k, n):
    """Observed fraction ``k / n``, ``nan`` where ``n = 0``.

    Parameters
    ----------
    k, n : int or array_like of int
        Successes and trials, ``0 <= k <= n`` (broadcast against each other).

    Returns
    -------
    float or numpy.ndarray
        ``k / n`` with the broadcast shape of ``k`` and ``n``.
    """
    k_arr, n_arr = _counts_pair(k, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(n_arr > 0, k_arr / np.where(n_arr > 0, n_arr, 1.0), np.nan)
    return _unwrap(out)


def wilson_interval(k, n, level: float = 0.95):
    """Wilson score confidence interval for a binomial proportion.

    The interval is the set of ``p`` for which the score test does not reject
    ``k ~ Binomial(n, p)`` at the given level:

    ``centre = (k + z**2 / 2) / (n + z**2)``,
    ``half = z * sqrt(k * (n - k) / n + z**2 / 4) / (n + z**2)``,
    ``(low, high) = (centre - half, centre + half)``,

    with ``z`` the two-sided normal quantile of ``level``.  Unlike the Wald
    interval it never leaves ``[0, 1]`` and stays informative at ``k = 0`` and
    ``k = n``, where it is exactly ``[0, z**2 / (n + z**2)]`` and
    ``[n / (n + z**2), 1]``.

    Parameters
    ----------
    k : int or array_like of int
        Number of successes, ``0 <= k <= n``.  Whole-valued floats are accepted.
    n : int or array_like of int
        Number of trials (broadcast against ``k``).
    level : float, default 0.95
        Confidence level in ``(0, 1)``.

    Returns
    -------
    low, high : float or numpy.ndarray
        Bounds with the broadcast shape of ``k`` and ``n``; ``nan`` where
        ``n = 0`` (no trials, no interval).

    Raises
    ------
    ValueError
        If a count is negative or fractional, ``k > n`` somewhere, or ``level``
        is outside ``(0, 1)``.
    """
    z = normal_quantile(level)
    k_arr, n_arr = _counts_pair(k, n)
    z2 = z * z
    has_data = n_arr > 0
    n_safe = np.where(has_data, n_arr, 1.0)
    # The k(n - k)/n form avoids computing p = k/n first, which loses the exact
    # zero of (1 - p) at k = n in floating point.
    centre = (k_arr + z2 / 2.0) / (n_safe + z2)
    half = z * np.sqrt(k_arr * (n_safe - k_arr) / n_safe + z2 / 4.0) / (n_safe + z2)
    low = np.clip(centre - half, 0.0, 1.0)
    high = np.clip(centre + half, 0.0, 1.0)
    # At k = 0 (k = n) the lower (upper) bound is 0 (1) mathematically; the
    # subtraction above leaves a rounding residue of order 1e-17 otherwise.
    low = np.where(k_arr == 0, 0.0, low)
    high = np.where(k_arr == n_arr, 1.0, high)
    low = np.where(has_data, low, np.nan)
    high = np.where(has_data, high, np.nan)
    return _unwrap(low), _unwrap(high)


def binomial_standard_error(p, n):
    """Standard error ``sqrt(p (1 - p) / n)`` of a proportion estimated from ``n`` trials.

    Parameters
    ----------
    p : float or array_like
        Success probability, in ``[0, 1]``.
    n : int or array_like of int
        Number of trials (broadcast against ``p``).

    Returns
    -------
    float or numpy.ndarray
        The standard error of ``k / n`` for ``k ~ Binomial(n, p)``; ``0`` where
        ``p`` is 0 or 1, ``nan`` where ``n = 0``.
    """
    p_arr = check_probability_array("p", p)
    n_arr = check_count_array("n", n)
    p_arr, n_arr = np.broadcast_arrays(p_arr, n_arr)
    n_safe = np.where(n_arr > 0, n_arr, 1.0)
    se = np.where(n_arr > 0, np.sqrt(p_arr * (1.0 - p_arr) / n_safe), np.nan)
    return _unwrap(se)


def max_deviation_in_se(p_hat, n, p_theory) -> float:
    """Largest deviation of estimates from theory, in binomial standard errors.

    Computes ``max |p_hat - p_theory| / sqrt(p_theory (1 - p_theory) / n)``
    over all entries, the standard error being the one the theory predicts for
    an estimate from ``n`` runs.

    Where ``p_theory`` is exactly 0 or 1 the estimate has no spread under the
    theory: an entry with ``p_hat == p_theory`` then counts as a deviation of
    0, any other as ``inf`` (the observation is impossible under the theory).
    Entries with ``n = 0`` or a ``nan`` estimate or theory carry no
    information and are skipped.

    Parameters
    ----------
    p_hat : float or array_like
        Estimated proportions, in ``[0, 1]``.
    n : int or array_like of int
        Trials behind each estimate.
    p_theory : float or array_like
        Predicted probabilities, in ``[0, 1]``.

    Returns
    -------
    float
        The largest deviation, ``nan`` if no entry carries information.
    """
    p_hat_arr = check_probability_array("p_hat", p_hat)
    p_th = check_probability_array("p_theory", p_theory)
    n_arr = check_count_array("n", n)
    try:
        p_hat_arr, n_arr, p_th = np.broadcast_arrays(p_hat_arr, n_arr, p_th)
    except ValueError:
        raise ValueError("p_hat, n and p_theory must have broadcastable shapes, got "
                         f"{np.shape(p_hat)}, {np.shape(n)} and {np.shape(p_theory)}") from None
    usable = (n_arr > 0) & ~np.isnan(p_hat_arr) & ~np.isnan(p_th)
    if not np.any(usable):
        return float("nan")
    diff = np.abs(p_hat_arr[usable] - p_th[usable])
    var = p_th[usable] * (1.0 - p_th[usable]) / n_arr[usable]
    with np.errstate(divide="ignore", invalid="ignore"):
        dev = np.where(var > 0, diff / np.sqrt(np.where(var > 0, var, 1.0)),
                       np.where(diff == 0, 0.0, np.inf))
    return float(np.max(dev))


def agreement_z(count, n, p_theory):
    """Deviation of the observed fraction ``count / n`` from ``p_theory`` in standard errors.

    The standard error is the Wilson 95% half-width divided by 1.96, so it stays finite
    where the theory gives exactly 0 or 1.  ``count`` is an :class:`xarray.DataArray`;
    the result carries its dimensions and coordinates.
    """
    import xarray as xr

    lo, hi = wilson_interval(np.asarray(count), np.asarray(n))
    p_hat = np.asarray(count) / np.asarray(n)
    se = (hi - lo) / (2 * 1.959963984540054)
    return xr.DataArray((p_hat - np.asarray(p_theory)) / se, dims=count.dims, coords=count.coords)


def count_z(observed, expected, variance):
    r"""Distance of an observed count from its expectation, in standard errors, for counts.

    ``expected`` and ``variance`` are the sums of :math:`u_i` and :math:`u_i(1-u_i)` over
    the trajectories (independent Bernoulli variables with predicted probabilities
    :math:`u_i`).  With a continuity correction of half a trajectory and a standard-error
    floor of half a trajectory,

    .. math::

        z = \operatorname{sign}(o - e)\,\frac{\max(|o - e| - \tfrac12, 0)}
                                         {\sqrt{\max(v, \tfrac14)}},

    so that where the prediction is almost deterministic (every :math:`u_i` near 0 or 1,
    :math:`v \to 0`) a count one trajectory off is not a many-sigma deviation, while
    ordinary counts get the usual normal score.  Works elementwise on arrays and
    xarray objects.
    """
    diff = observed - expected
    excess = np.maximum(np.abs(diff) - 0.5, 0.0)
    return np.sign(diff) * excess / np.sqrt(np.maximum(variance, 0.25))


# ----------------------------------------------------------------------------- figure statistics
# The comparisons the figure modules make: fractions of a sweep's counts with their Wilson
# bands, the test that several laws share one probability, and the paired comparison of
# two training runs.

def add_fraction(ds, count_var: str, total_var, name: str, level: float = 0.95):
    """Add an observed fraction and its Wilson interval to a sweep dataset.

    Parameters
    ----------
    ds : xarray.Dataset
        Typically the output of :func:`stochastic_transformers.sweep.run_sweep`.
    count_var : str
        Variable holding success counts ``k``.
    total_var : str or int
        Variable holding trial counts ``n`` (broadcast against ``k``), or one
        number of trials shared by every entry.
    name : str
        Name of the new fraction variable.
    level : float, default 0.95
        Confidence level of the interval.

    Returns
    -------
    xarray.Dataset
        A copy of ``ds`` with ``name = k / n``, ``name_low`` and ``name_high``
        (the Wilson bounds), ``nan`` where ``n = 0``.
    """
    import re
    from numbers import Integral

    import xarray as xr

    if not isinstance(count_var, str) or count_var not in ds.data_vars:
        raise ValueError(f"count_var must name a variable of the dataset "
                         f"({sorted(ds.data_vars)}), got {count_var!r}")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"name must be a variable name (identifier), got {name!r}")
    k = ds[count_var]
    if isinstance(total_var, str):
        if total_var not in ds.variables:
            raise ValueError(f"total_var must name a variable of the dataset "
                             f"({sorted(ds.data_vars)}) or be a number, got {total_var!r}")
        n = ds[total_var]
    elif isinstance(total_var, Integral) and not isinstance(total_var, bool):
        n = xr.full_like(k, int(total_var))
    else:
        raise ValueError(f"total_var must name a variable of the dataset or be an integer "
                         f"number of trials, got {total_var!r}")
    k, n = xr.broadcast(k, n)
    n = n.transpose(*k.dims)
    low, high = wilson_interval(k.values, n.values, level)
    frac = proportion(k.values, n.values)
    pct = f"{100 * level:g}%"
    return ds.assign({
        name: (k.dims, np.asarray(frac), {"long_name": f"{count_var} / {total_var}"}),
        f"{name}_low": (k.dims, np.asarray(low),
                        {"long_name": f"lower bound of the Wilson {pct} interval of {name}"}),
        f"{name}_high": (k.dims, np.asarray(high),
                         {"long_name": f"upper bound of the Wilson {pct} interval of {name}"}),
    })


def add_fraction_where(ds, count_var: str, total_var: str, name: str, defined):
    """:func:`add_fraction` where ``defined`` holds, ``nan`` elsewhere.

    For totals that are missing or zero in some entries (a grid filled out with ``nan``,
    a count of trajectories not yet merged): the interval is computed with a total of 1
    there, and every entry outside ``defined`` is then masked.  The total is read as
    ``<total_var>_or_one``, the name the fraction's ``long_name`` records.
    """
    placeholder = f"{total_var}_or_one"
    ds = ds.assign({placeholder: ds[total_var].where(defined, 1)})
    ds = add_fraction(ds, count_var, placeholder, name).drop_vars(placeholder)
    for var in (name, f"{name}_low", f"{name}_high"):
        ds[var] = ds[var].where(defined)
    return ds


def homogeneity_test(counts, totals):
    r"""Chi-square test that several binomial samples share one success probability.

    ``counts`` and ``totals`` have shape (n_groups, ...): for every trailing index the
    (n_groups x 2) table of successes and failures is tested with Pearson's statistic,
    :math:`n_{groups} - 1` degrees of freedom.  A column with no entries (every sample
    all-success or all-failure) carries no information: statistic 0, 0 degrees of
    freedom, p-value 1.

    Returns ``(statistic, dof, p_value)`` with the trailing shape.
    """
    from scipy import stats

    k = np.asarray(counts, dtype=float)
    n = np.asarray(totals, dtype=float)
    if k.shape != n.shape or k.ndim < 1 or k.shape[0] < 2:
        raise ValueError("counts and totals must have the same shape (n_groups >= 2, ...)")
    if np.any(k < 0) or np.any(k > n):
        raise ValueError("counts must lie between 0 and totals")
    table = np.stack([k, n - k], axis=-1)  # (g, ..., 2)
    row = table.sum(-1, keepdims=True)
    col = table.sum(0, keepdims=True)
    grand = table.sum((0, -1), keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = row * col / grand
        terms = np.where(expected > 0, (table - expected) ** 2 / np.where(expected > 0,
                                                                            expected, 1.0), 0.0)
    stat = terms.sum((0, -1))
    informative = np.all(col[0] > 0, axis=-1)
    dof = np.where(informative, k.shape[0] - 1, 0)
    stat = np.where(informative, stat, 0.0)
    p = np.where(dof > 0, stats.chi2.sf(stat, np.maximum(dof, 1)), 1.0)
    return stat, dof, p


def two_proportion_z(k1, n1, k2, n2):
    """Pooled two-proportion z statistic (k1/n1 - k2/n2) / se; 0 where both are 0 or 1."""
    k1, n1, k2, n2 = (np.asarray(x, dtype=float) for x in (k1, n1, k2, n2))
    pooled = (k1 + k2) / (n1 + n2)
    se = np.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(se > 0, (k1 / n1 - k2 / n2) / np.where(se > 0, se, 1.0), 0.0)


def t_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``values`` and its two-sided Student-t interval ``(mean, low, high)``.

    With fewer than two values the interval is infinite.
    """
    import math

    from scipy import stats as sps

    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    if x.size < 2:
        return mean, -math.inf, math.inf
    half = float(sps.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return mean, mean - half, mean + half


def sign_test(wins: int, losses: int) -> tuple[float, float]:
    """One-sided P(at least ``wins`` of the untied pairs) and the two-sided p-value
    (ties are left out before calling), exact under the fair coin."""
    import math

    n = wins + losses
    if n == 0:
        return 1.0, 1.0
    upper = sum(math.comb(n, k) for k in range(wins, n + 1)) / 2 ** n
    tail = sum(math.comb(n, k) for k in range(0, min(wins, losses) + 1)) / 2 ** n
    return upper, min(1.0, 2 * tail)


def log_log_slope(x, y, se=None, *, inflate=False) -> tuple[float, float, float]:
    r"""Slope of :math:`\log|y|` against :math:`\log x` by least squares, its standard error
    and the fit's :math:`\chi^2` per degree of freedom.

    With ``se`` (the standard errors of y) the fit is weighted by :math:`(|y|/\text{se})^2`
    (the delta method's variance of :math:`\log|y|`), the slope's standard error comes from
    those weights, and ``inflate`` multiplies it by :math:`\sqrt{\max(1, \chi^2/\text{dof})}`
    when the points scatter more than their errors allow.  Without ``se`` the fit is
    unweighted and the standard error comes from the residuals (``chi2`` is then nan).
    Points are used as given: the caller drops the ones it cannot fit.
    """
    x = np.log(np.asarray(x, dtype=float))
    y_abs = np.abs(np.asarray(y, dtype=float))
    ly = np.log(y_abs)
    X = np.vstack([np.ones_like(x), x]).T
    dof = x.size - 2
    if se is None:
        coef, res, *_ = np.linalg.lstsq(X, ly, rcond=None)
        s2 = float(res[0]) / max(dof, 1) if res.size else 0.0
        cov = s2 * np.linalg.inv(X.T @ X)
        return float(coef[1]), float(math.sqrt(max(cov[1, 1], 0.0))), float("nan")
    w = (y_abs / np.asarray(se, dtype=float)) ** 2
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    coef = cov @ (X.T @ (w * ly))
    chi2 = float(np.sum(w * (ly - X @ coef) ** 2) / dof) if dof > 0 else float("nan")
    slope_se = math.sqrt(cov[1, 1])
    if inflate and np.isfinite(chi2):
        slope_se *= math.sqrt(max(1.0, chi2))
    return float(coef[1]), float(slope_se), chi2


def weighted_least_squares(X, y, se=None):
    r"""Weighted least squares :math:`y \approx X c` with standard deviations ``se``.

    Minimises :math:`\sum_i (y_i - (Xc)_i)^2 / \text{se}_i^2`; returns ``(c, cov, chi2)``:
    the coefficients, their covariance :math:`(X^\top W X)^{-1}` and the fit's
    :math:`\chi^2` (not divided by the degrees of freedom).  Without ``se``, or when some
    ``se`` is 0, the weights are 1 and ``chi2`` is nan (the covariance then is not a
    standard error: the caller scales it by the residuals if it needs one).
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    weighted = se is not None and np.all(np.asarray(se, dtype=float) > 0)
    w = 1.0 / np.asarray(se, dtype=float) ** 2 if weighted else np.ones_like(y)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    c = cov @ (X.T @ (w * y))
    chi2 = float(np.sum(w * (y - X @ c) ** 2)) if weighted else float("nan")
    return c, cov, chi2


def z_digest(z, *, within=2.0) -> dict:
    r"""The digest of deviations ``z`` (in standard errors) that a figure's summary reports.

    ``{"n": count, "max_abs_z": max |z|, "mean_z": mean z, "share_within": share with
    |z| <= within}`` over the finite entries of ``z``; nan for each statistic when there is
    none.  Under a perfect match with normal errors ``share_within`` is about 95% for
    ``within = 2`` and ``mean_z`` has standard error :math:`1/\sqrt{n}`.
    """
    z = np.asarray(z, dtype=float).ravel()
    z = z[np.isfinite(z)]
    if not z.size:
        return {"n": 0, "max_abs_z": float("nan"), "mean_z": float("nan"),
                "share_within": float("nan")}
    return {"n": int(z.size), "max_abs_z": float(np.abs(z).max()), "mean_z": float(z.mean()),
            "share_within": float((np.abs(z) <= within).mean())}


def binomial_z(count, n, p, *, band=1e-3):
    r"""Deviation of ``count`` successes of ``n`` from a predicted probability ``p``, in
    binomial standard errors: :math:`(k - np)/\sqrt{np(1-p)}`.

    NaN where ``p`` is not strictly between ``band`` and ``1 - band``: there a prediction
    is all but certain and the normal score says nothing.  Elementwise on arrays and
    xarray objects (which keep their dimensions).
    """
    import xarray as xr

    informative = (p > band) & (p < 1 - band)
    with np.errstate(invalid="ignore", divide="ignore"):
        return xr.where(informative, (count - n * p) / np.sqrt(n * p * (1 - p)), np.nan)


def ks_from_quantiles(qa, qb, n):
    """Two-sample Kolmogorov-Smirnov statistic and p-value from two samples of size ``n``
    each, given as their quantiles at the same equally spaced levels from 0 to 1.

    The statistic is the largest gap between the two empirical distribution functions,
    evaluated (by interpolating the quantiles) on the pooled quantiles: exact to the
    levels' spacing, well below the critical gaps when there are many levels.  The p-value
    is the asymptotic two-sample law, the one-sample law at ``n // 2`` (nan for n < 2).
    """
    from scipy import stats

    qa, qb = np.asarray(qa, dtype=float), np.asarray(qb, dtype=float)
    grid = np.union1d(qa, qb)
    levels = np.linspace(0.0, 1.0, qa.size)
    fa = np.interp(grid, qa, levels, left=0.0, right=1.0)
    fb = np.interp(grid, qb, levels, left=0.0, right=1.0)
    stat = float(np.max(np.abs(fa - fb)))
    return stat, float(stats.kstwo.sf(stat, n // 2)) if n > 1 else float("nan")


# ----------------------------------------------------------------------------- orders of errors
def _error_arrays(L, err, se):
    """``L``, ``err`` and ``se`` as float arrays, checked: 1-d of one length, L > 0, se >= 0."""
    L, err, se = (np.asarray(a, dtype=float) for a in (L, err, se))
    if not (L.ndim == err.ndim == se.ndim == 1 and L.size == err.size == se.size):
        raise ValueError("L, err and se must be 1-d arrays of the same length")
    if np.any(~np.isfinite(L)) or np.any(L <= 0):
        raise ValueError("L must hold positive numbers")
    if np.any(se < 0) or np.any(np.isnan(se)):
        raise ValueError("se must hold standard errors >= 0")
    return L, err, se


def fit_order(L, err, se, *, min_snr=3.0, L_min=1):
    r"""Fit :math:`|e| \approx C L^{-p}` by weighted least squares on :math:`\log|e|`.

    Points enter the fit when ``|err| >= min_snr * se`` and ``L >= L_min``; each has
    the delta-method standard deviation ``se / |err|`` on the log scale.  The slope's
    standard error comes from the weighted covariance, inflated by
    :math:`\sqrt{\chi^2_\nu}` when the reduced chi-square exceeds 1 (scatter beyond the
    error bars, e.g. pre-asymptotic curvature).

    Parameters
    ----------
    L, err, se : 1-d arrays of the same length
        Depth scales, errors (their absolute value is used) and standard errors (> 0,
        or 0 for exact values).
    min_snr : float >= 0
    L_min : int >= 1

    Returns
    -------
    dict
        ``order`` (p), ``order_se``, ``log_constant`` (:math:`\log C`), ``chi2_red``
        and ``used`` (boolean mask).  ``order`` is nan with fewer than two usable
        points; ``order_se`` is nan with fewer than three (no residual freedom left when
        there is no error bar, e.g. se = 0).
    """
    L, err, se = _error_arrays(L, err, se)
    err = np.abs(err)
    min_snr = check_real("min_snr", min_snr, 0.0)
    L_min = check_real("L_min", L_min, 0.0)
    used = (err > 0) & np.isfinite(err) & (err >= min_snr * se) & (L >= L_min)
    out = {"order": np.nan, "order_se": np.nan, "log_constant": np.nan, "chi2_red": np.nan,
           "used": used}
    if used.sum() < 2:
        return out
    x, y = np.log(L[used]), np.log(err[used])
    sd = se[used] / err[used]
    weighted = bool(np.all(sd > 0))
    X = np.column_stack([np.ones_like(x), x])
    c, cov, chi2 = weighted_least_squares(X, y, sd)
    out.update(order=float(-c[1]), log_constant=float(c[0]))
    nu = x.size - 2
    if nu > 0:
        # without error bars the scatter of the residuals is the only measure of the error
        chi2_red = (chi2 if weighted else float(np.sum((y - X @ c) ** 2))) / nu
        out["chi2_red"] = chi2_red
        out["order_se"] = float(math.sqrt(cov[1, 1] * (max(1.0, chi2_red) if weighted
                                                       else chi2_red)))
    elif weighted:
        out["order_se"] = float(math.sqrt(cov[1, 1]))
    return out


def _signed_points(L, err, se, L_min):
    """The points of a signed fit: those with ``L >= L_min`` and a finite error, and the mask."""
    L, err, se = _error_arrays(L, err, se)
    keep = (L >= check_real("L_min", L_min, 0.0)) & np.isfinite(err)
    return L[keep], err[keep], se[keep], keep


def _chi2_sf(chi2, dof) -> float:
    from scipy import stats as sps

    return float(sps.chi2.sf(chi2, dof))


def fit_two_term(L, err, se, *, L_min=1):
    r"""Fit the *signed* error :math:`e \approx C_1/L + C_2/L^2` by weighted least squares.

    Every point with ``L >= L_min`` enters (resolved or not: the model is fitted to the
    signed values, so an error compatible with zero is information, not a problem).  This
    is the model that first-order weak convergence with a smooth expansion in
    :math:`1/L` predicts (odd moments of the entries vanish, so no half-integer powers).

    Returns ``C1``, ``C1_se``, ``C2``, ``C2_se``, ``chi2``, ``dof`` (points - 2),
    ``p_value`` (chi-square survival; nan without residual freedom) and ``used``.
    """
    x, e, s, used = _signed_points(L, err, se, L_min)
    out = {"C1": np.nan, "C1_se": np.nan, "C2": np.nan, "C2_se": np.nan, "chi2": np.nan,
           "dof": max(x.size - 2, 0), "p_value": np.nan, "used": used}
    if x.size < 2:
        return out
    c, cov, chi2 = weighted_least_squares(np.column_stack([1.0 / x, 1.0 / x**2]), e, s)
    out.update(C1=float(c[0]), C2=float(c[1]), C1_se=float(math.sqrt(cov[0, 0])),
               C2_se=float(math.sqrt(cov[1, 1])))
    if out["dof"] > 0 and np.isfinite(chi2):
        out.update(chi2=chi2, p_value=_chi2_sf(chi2, out["dof"]))
    return out


#: The orders p tried by :func:`fit_corrected_order` (the chi-square is profiled over them).
ORDER_GRID = np.round(np.arange(0.0, 4.0 + 1e-9, 0.0005), 4)


def fit_corrected_order(L, err, se, *, L_min=1):
    r"""Fit the signed error :math:`e \approx C L^{-p} + D L^{-2}`: a power law of free
    order p plus the second-order term of the expansion.

    For each ``p`` of :data:`ORDER_GRID` (except 2, where the two terms coincide) the
    constants come from weighted least squares; the order is the ``p`` of smallest
    chi-square, and its standard error is half the width of the set where the chi-square
    is within :math:`\max(1, \chi^2_\nu)` of the minimum (the one-sigma profile
    interval, widened like :func:`fit_order` when the scatter exceeds the error bars;
    ``order_low``, ``order_high`` are its ends); nan when that set reaches the grid's end.
    Every point with ``L >= L_min`` enters; at least four are needed (one degree of
    freedom).  (The correction :math:`D L^{-p-1}` instead of :math:`D L^{-2}` makes the
    model degenerate: with :math:`C \to 0` its second term is itself a power law of any
    order.)

    Returns ``order``, ``order_se``, ``order_low``, ``order_high``, ``C``, ``D``,
    ``chi2``, ``dof`` (points - 3), ``p_value`` and ``used``.
    """
    x, e, s, used = _signed_points(L, err, se, L_min)
    out = {"order": np.nan, "order_se": np.nan, "order_low": np.nan, "order_high": np.nan,
           "C": np.nan, "D": np.nan, "chi2": np.nan, "dof": max(x.size - 3, 0),
           "p_value": np.nan, "used": used}
    if x.size < 4 or not np.all(s > 0):
        return out
    grid = ORDER_GRID[np.abs(ORDER_GRID - 2.0) > 1e-9]
    w = 1.0 / s**2
    u = x[None, :] ** -grid[:, None]                 # (grid, points): the L^-p column
    v = x ** -2.0
    # the 2 x 2 normal equations for every p at once
    a11, a12, a22 = (w * u * u).sum(1), (w * u * v).sum(1), float((w * v * v).sum())
    b1, b2 = (w * u * e).sum(1), float((w * v * e).sum())
    det = a11 * a22 - a12 * a12
    C = (a22 * b1 - a12 * b2) / det
    D = (a11 * b2 - a12 * b1) / det
    chi2 = (w * (e[None, :] - C[:, None] * u - D[:, None] * v) ** 2).sum(1)
    k = int(np.argmin(chi2))
    dof = out["dof"]
    band = chi2 <= chi2[k] + max(1.0, chi2[k] / dof)
    lo, hi = int(np.argmax(band)), int(band.size - 1 - np.argmax(band[::-1]))
    out.update(order=float(grid[k]), C=float(C[k]), D=float(D[k]), chi2=float(chi2[k]),
               p_value=_chi2_sf(chi2[k], dof))
    if lo > 0 and hi < band.size - 1 and bool(band[lo:hi + 1].all()):
        out.update(order_low=float(grid[lo]), order_high=float(grid[hi]),
                   order_se=float((grid[hi] - grid[lo]) / 2))
    return out


def poisson_two_sided(observed: int, expected: float) -> float:
    """Two-sided p-value of ``observed`` for a Poisson law of mean ``expected``: the sum of the
    probabilities of the counts no more likely than ``observed`` (1 or 0 when ``expected``
    is 0, as ``observed`` is 0 or not)."""
    from scipy import stats

    if expected <= 0.0:
        return 1.0 if observed == 0 else 0.0
    k = np.arange(0, int(max(observed, expected) * 4 + 50))
    pmf = stats.poisson.pmf(k, expected)
    return float(min(1.0, pmf[pmf <= stats.poisson.pmf(observed, expected) * (1 + 1e-9)].sum()))


def detectable_gap(sd: float, n: int, level: float = 0.95, power: float = 0.8) -> float:
    r"""Smallest true mean gap that a two-sided paired t test at ``level`` detects with
    probability ``power``, for ``n`` pairs of standard deviation ``sd``:
    :math:`(t_{(1+\text{level})/2,\,n-1} + t_{\text{power},\,n-1})\,\text{sd}/\sqrt n`
    (the usual approximation, which ignores the non-central t's skew); nan below two pairs."""
    from scipy import stats

    if n < 2 or not np.isfinite(sd):
        return float("nan")
    return float((stats.t.ppf((1 + level) / 2, n - 1) + stats.t.ppf(power, n - 1))
                 * sd / np.sqrt(n))


def paired_comparison(gaps, level: float = 0.95, power: float = 0.8) -> dict:
    """Two arms compared through their paired differences ``gaps`` (arm B minus arm A).

    Returns ``n`` (pairs), ``gap`` (the mean) with its Student-t interval at ``level``
    (``gap_low``, ``gap_high``), ``gap_sd``, ``detectable_gap`` (:func:`detectable_gap` at
    ``power``), ``wins``/``losses``/``ties`` (pairs where B is above, below, level),
    ``sign_test_p`` (one-sided, at least ``wins`` wins among the untied pairs) and
    ``sign_test_p_two_sided`` (:func:`sign_test`), and ``verdict``: ``"higher"`` or
    ``"lower"`` where the interval excludes 0 on that side and the two-sided sign test is
    below ``1 - level`` on the same side; ``"no_detectable_difference"`` where neither test
    rejects a zero gap; ``"mixed"`` where one rejects and the other does not (few pairs, or
    heavy tails: one outlier can move the mean without moving the signs); ``"single_pair"``
    below two pairs.
    """
    gaps = np.asarray(gaps, dtype=float)
    n = int(gaps.size)
    out = {"n": n}
    out["gap"], out["gap_low"], out["gap_high"] = t_interval(gaps, level)
    out["gap_sd"] = float(gaps.std(ddof=1)) if n > 1 else float("nan")
    out["detectable_gap"] = detectable_gap(out["gap_sd"], n, level, power)
    wins, losses = int((gaps > 0).sum()), int((gaps < 0).sum())
    out.update(wins=wins, losses=losses, ties=int((gaps == 0).sum()))
    out["sign_test_p"], out["sign_test_p_two_sided"] = sign_test(wins, losses)
    t_rejects = bool(out["gap_low"] > 0 or out["gap_high"] < 0)
    sign_rejects = bool(out["sign_test_p_two_sided"] < 1.0 - level)
    if n < 2:
        out["verdict"] = "single_pair"
    elif t_rejects and sign_rejects and (out["gap"] > 0) == (wins > losses):
        out["verdict"] = "higher" if out["gap"] > 0 else "lower"
    else:
        out["verdict"] = "mixed" if t_rejects or sign_rejects else "no_detectable_difference"
    return out


def pooled_mean_se(means, m2s, counts, dim):
    r"""Mean, standard error of the mean and size of a sample given in blocks along ``dim``.

    Each block b holds its mean :math:`\bar x_b`, its centred sum of squares
    :math:`M_b = \sum (x - \bar x_b)^2` and its size :math:`n_b` (xarray objects); the
    blocks combine exactly (Chan, Golub and LeVeque): :math:`\bar x = \sum n_b\bar x_b / n`,
    :math:`M = \sum_b \bigl(M_b + n_b(\bar x_b - \bar x)^2\bigr)`, and the standard error is
    :math:`\sqrt{M/(n-1)/n}`.  Returns ``(mean, se, n)``.
    """
    n = counts.sum(dim)
    mean = (means * counts).sum(dim) / n
    m2 = (m2s + counts * (means - mean) ** 2).sum(dim)
    return mean, np.sqrt(m2 / (n - 1) / n), n


def relative_drop(ref, final) -> tuple[float, float]:
    r"""The relative drop :math:`q = (\text{ref} - \text{final})/\text{ref}` of a count and its
    binomial standard error :math:`\sqrt{\max(q(1-q), 0)/\text{ref}}`.

    The model: each of the ``ref`` items present at first is lost independently with
    probability q (a count that grew has a negative drop and standard error 0).  Both are nan
    when ``ref`` is 0 (nothing to lose).
    """
    if ref <= 0:
        return float("nan"), float("nan")
    drop = (ref - final) / ref
    return drop, math.sqrt(max(drop * (1 - drop), 0.0) / ref)


def difference_z(a, se_a, b, se_b) -> float:
    r"""The difference of two independent estimates in standard errors,
    :math:`(a - b)/\sqrt{\text{se}_a^2 + \text{se}_b^2}`; 0 when both standard errors are 0."""
    se = math.hypot(se_a, se_b)
    return (a - b) / se if se > 0 else 0.0


def exit_rate(times, counts, t_from, z):
    r"""Exit rate of a surviving count over ``times >= t_from``, with its interval at ``z``.

    Between successive recorded times a survivor leaves with probability
    :math:`1 - e^{-\lambda\Delta t}`, so the drops :math:`D_i` are binomial in the previous
    count; :math:`\hat\lambda` maximises that grouped-exponential likelihood and its Fisher
    information gives the s.e. (counts from the same trajectories are not independent, but
    the drops given the past are).  With no drop the rate is 0 and the upper end is the
    one-sided Poisson bound :math:`-\log(p)/E` for the exposure :math:`E = \sum N_{i-1}\Delta t_i`.
    Returns ``(rate, low, high, exits)``."""
    from scipy import optimize
    from scipy.stats import norm

    t = np.asarray(times, dtype=float)
    keep = t >= t_from
    if keep.sum() < 2:
        raise ValueError("the fitted window needs at least two recorded times")
    n_ = np.asarray(counts, dtype=float)[keep]
    dt, before = np.diff(t[keep]), n_[:-1]
    drops = np.maximum(before - n_[1:], 0.0)
    exits, exposure = float(drops.sum()), float(np.sum(before * dt))
    if exits == 0 or exposure == 0:
        return 0.0, 0.0, -math.log(norm.sf(z)) / max(exposure, 1e-300), exits

    def nll(log_rate):
        lam = math.exp(log_rate)
        return -float(np.sum(drops * np.log(-np.expm1(-lam * dt)) - (before - drops) * lam * dt))

    guess = math.log(exits / exposure)
    lam = math.exp(optimize.minimize_scalar(nll, bracket=(guess - 1, guess + 1)).x)
    q = np.exp(-lam * dt)
    info = float(np.sum(before * dt * dt * q / (1.0 - q)))
    se = 1.0 / math.sqrt(info)
    return lam, max(lam - z * se, 0.0), lam + z * se, exits


def energy_distance(a, b):
    r"""Squared energy distance of the empirical measures of ``a`` and ``b`` (..., n, d), per
    leading index: :math:`2E|X - Y| - E|X - X'| - E|Y - Y'|` over all pairs (chords)."""
    def mean_dist(x, y):
        g = np.einsum("...id,...jd->...ij", x, y)
        return np.sqrt(np.maximum(2.0 - 2.0 * g, 0.0)).mean(axis=(-2, -1))
    return 2.0 * mean_dist(a, b) - mean_dist(a, a) - mean_dist(b, b)
