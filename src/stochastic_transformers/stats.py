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
