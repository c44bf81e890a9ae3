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

import statistics

import numpy as np

from ._validation import check_real

__all__ = [
    "normal_quantile",
    "proportion",
    "wilson_interval",
    "binomial_standard_error",
    "max_deviation_in_se",
    "agreement_z",
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


def _counts(name: str, value) -> np.ndarray:
    """``value`` as a float array of non-negative whole numbers, else ValueError."""
    arr = np.asarray(value)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer)
                                 or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{name} must be a non-negative integer count (or an array of them), "
                         f"got dtype {arr.dtype}")
    arr = arr.astype(float)
    # Counts often arrive as floats (xarray promotes to float when it fills
    # gaps), so whole-valued floats are accepted; fractions are not counts.
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr != np.round(arr)):
        bad = arr[~(np.isfinite(arr) & (arr >= 0) & (arr == np.round(arr)))].ravel()[0]
        raise ValueError(f"{name} must be a non-negative integer count (or an array of them), "
                         f"got {bad!r}")
    return arr


def _counts_pair(k, n) -> tuple[np.ndarray, np.ndarray]:
    """Validated, broadcast ``(k, n)`` with ``0 <= k <= n``."""
    k_arr = _counts("k", k)
    n_arr = _counts("n", n)
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
    p_arr = _probabilities("p", p)
    n_arr = _counts("n", n)
    p_arr, n_arr = np.broadcast_arrays(p_arr, n_arr)
    n_safe = np.where(n_arr > 0, n_arr, 1.0)
    se = np.where(n_arr > 0, np.sqrt(p_arr * (1.0 - p_arr) / n_safe), np.nan)
    return _unwrap(se)


def _probabilities(name: str, value) -> np.ndarray:
    """``value`` as a float array in ``[0, 1]`` (``nan`` allowed), else ValueError."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}") from None
    finite = arr[~np.isnan(arr)]
    if np.any((finite < 0) | (finite > 1)):
        bad = finite[(finite < 0) | (finite > 1)].ravel()[0]
        raise ValueError(f"{name} must be a probability in [0, 1], got {bad!r}")
    return arr


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
    p_hat_arr = _probabilities("p_hat", p_hat)
    p_th = _probabilities("p_theory", p_theory)
    n_arr = _counts("n", n)
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
