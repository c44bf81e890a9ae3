"""Argument checks shared by every public function.

Every check runs before any compute and raises ``ValueError`` naming the
parameter and its allowed range, so that a typo never costs a long run.
Scalars have ``check_int``, ``check_real`` and ``check_choice``; arrays (or
scalars where a function also takes arrays) have ``check_int_array``,
``check_real_array``, ``check_count_array`` and ``check_probability_array``.
NaN and infinities are refused everywhere except where NaN means "no data"
(probabilities), and a bool is never taken for a number.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np


def check_int(name: str, value, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` as an int, or raise if it is not an integer in range."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f" and <= {maximum}"
        raise ValueError(f"{name} must be an integer >= {minimum}{upper}, got {value}")
    return value


def _range_text(minimum, maximum, strict_min, strict_max) -> str:
    """The allowed range as the error messages state it, e.g. ``>= 0.0 and < 1.0``."""
    lo = "" if minimum is None else (f"> {minimum}" if strict_min else f">= {minimum}")
    hi = "" if maximum is None else (f"< {maximum}" if strict_max else f"<= {maximum}")
    return " and ".join(s for s in (lo, hi) if s)


def _below(value, minimum, strict_min):
    """Where ``value`` falls below the lower bound (elementwise for arrays)."""
    return value <= minimum if strict_min else value < minimum


def _above(value, maximum, strict_max):
    """Where ``value`` exceeds the upper bound (elementwise for arrays)."""
    return value >= maximum if strict_max else value > maximum


def check_real(name: str, value, minimum: float | None = None, maximum: float | None = None, *,
               strict_min: bool = False, strict_max: bool = False) -> float:
    """Return ``value`` as a finite float, or raise if it is out of range.

    ``strict_min=True`` makes the lower bound exclusive (``value > minimum``),
    ``strict_max=True`` the upper one (``value < maximum``).
    """
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    value = float(value)
    too_small = minimum is not None and _below(value, minimum, strict_min)
    too_large = maximum is not None and _above(value, maximum, strict_max)
    if too_small or too_large:
        rng = _range_text(minimum, maximum, strict_min, strict_max)
        raise ValueError(f"{name} must be {rng}, got {value}")
    return value


def check_real_array(
    name: str,
    value,
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    strict_min: bool = False,
    strict_max: bool = False,
) -> np.ndarray:
    """Return ``value`` (a real scalar or array) as a float array, or raise.

    A Python or numpy scalar goes through :func:`check_real` and comes back as a 0-d
    array, so ``result.ndim == 0`` tells a caller to hand back a float.  An array
    (0-d included) must have an integer or floating dtype (not bool, not strings or
    objects), be finite everywhere and lie in the range (bounds as in
    :func:`check_real`); the message names the parameter, the range and the offending
    extreme.  The result is a new array, never a view of ``value``.
    """
    if np.ndim(value) == 0 and not isinstance(value, np.ndarray):
        return np.asarray(check_real(name, value, minimum, maximum, strict_min=strict_min,
                                     strict_max=strict_max))
    arr = np.asarray(value)
    numeric = np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    if arr.dtype == bool or not numeric:
        raise ValueError(f"{name} must be a real number or an array of real numbers, "
                         f"got dtype {arr.dtype}")
    arr = arr.astype(float)
    rng = _range_text(minimum, maximum, strict_min, strict_max)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite real numbers" + (f" ({rng})" if rng else ""))
    if minimum is not None and np.any(_below(arr, minimum, strict_min)):
        raise ValueError(f"{name} must be {rng}, got min {arr.min()}")
    if maximum is not None and np.any(_above(arr, maximum, strict_max)):
        raise ValueError(f"{name} must be {rng}, got max {arr.max()}")
    return arr


def check_int_array(name: str, value, minimum: int) -> np.ndarray:
    """Return ``value`` (an integer scalar or integer array, all >= ``minimum``) as int64.

    A scalar goes through :func:`check_int` and comes back as a 0-d array.  An array
    must have an integer dtype: floats are refused even when whole (a dimension or a
    count of tokens is never 3.0), and so are bools.
    """
    if np.ndim(value) == 0 and not isinstance(value, np.ndarray):
        return np.asarray(check_int(name, value, minimum))
    arr = np.asarray(value)
    if not np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool:
        raise ValueError(f"{name} must be an integer >= {minimum} (or an integer array), "
                         f"got dtype {arr.dtype}")
    if np.any(arr < minimum):
        raise ValueError(f"{name} must be an integer >= {minimum}, got min {arr.min()}")
    return arr.astype(np.int64)


def check_count_array(name: str, value) -> np.ndarray:
    """Return ``value`` (non-negative whole numbers, scalar or array) as a float array.

    Counts often arrive as floats (xarray promotes to float when it fills gaps), so
    whole-valued floats are accepted; fractions, negative numbers, NaN, infinities and
    bools are not counts.
    """
    arr = np.asarray(value)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer)
                                 or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{name} must be a non-negative integer count (or an array of them), "
                         f"got dtype {arr.dtype}")
    arr = arr.astype(float)
    whole = np.isfinite(arr) & (arr >= 0) & (arr == np.round(arr))
    if not np.all(whole):
        bad = arr[~whole].ravel()[0]
        raise ValueError(f"{name} must be a non-negative integer count (or an array of them), "
                         f"got {bad!r}")
    return arr


def check_probability_array(name: str, value) -> np.ndarray:
    """Return ``value`` as a float array in [0, 1], or raise.

    NaN is accepted: it marks an estimate without data (no trials), which the
    statistics skip.  Infinities are out of range.  Anything numpy converts to float
    is taken as such.
    """
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}") from None
    finite = arr[~np.isnan(arr)]
    outside = (finite < 0) | (finite > 1)
    if np.any(outside):
        bad = finite[outside].ravel()[0]
        raise ValueError(f"{name} must be a probability in [0, 1], got {bad!r}")
    return arr


def check_choice(name: str, value, choices) -> str:
    """Return ``value`` if it is one of ``choices``, else raise listing them."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def check_whole_layers(T: float, L: int, name: str = "T", L_name: str = "L") -> int:
    """Number of layers ``T * L``; raises, naming both knobs, unless it is a whole number.

    The one implementation of the rule (time is layer / L, so a horizon or a recording
    time must fall on a layer); every module calls it.
    """
    layers = T * L
    if abs(layers - round(layers)) > 1e-9 * max(1.0, layers):
        raise ValueError(f"{name} * {L_name} must be a whole number of layers; got "
                         f"{name}={T}, {L_name}={L}")
    return int(round(layers))


#: The attention types every module accepts (defined once; the others import these).
ATTENTIONS = ("softmax", "unnormalized")
#: Largest strength r of the feedforward block (relative to the value noise).  Far beyond any
#: strength of interest (the figures use r <= 4); above about 1e150 the squared increments of
#: a layer overflow.
FF_STRENGTH_MAX = 1e6
#: The scales of every figure, in order.
SCALE_NAMES = ("smoke", "quick", "paper")
