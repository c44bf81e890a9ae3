"""Argument checks shared by every public function.

Every check runs before any compute and raises ``ValueError`` naming the
parameter and its allowed range, so that a typo never costs a long run.
Scalars have ``check_int``, ``check_real``, ``check_bool`` and ``check_choice``; arrays (or
scalars where a function also takes arrays) have ``check_int_array``,
``check_real_array``, ``check_count_array``, ``check_probability_array`` and
``check_real_matrix``.  NaN and infinities are refused everywhere except where NaN means
"no data" (probabilities), and a bool is never taken for a number.

A field that several modules take has its range here, once: ``check_tol`` (0, 1),
``check_level`` (0, 1) or [0, 1), ``check_whole_layers`` and ``check_layer_times`` (the
layer grid, :data:`LAYER_TOL`, :data:`MAX_LAYERS`), and the upper bounds
:data:`SIGMA_MAX`, :data:`EPSILON_MAX`, :data:`ETA_MAX` and :data:`FF_STRENGTH_MAX` beyond
which a finite value overflows a layer.  The configurations, ``simulate`` and the theory
modules all use them.
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
    if not isinstance(value, np.ndarray) and _scalar_like(value):
        return np.asarray(check_real(name, value, minimum, maximum, strict_min=strict_min,
                                     strict_max=strict_max))
    arr = _float_array(value, f"{name} must be a real number or an array of real numbers, got ")
    rng = _range_text(minimum, maximum, strict_min, strict_max)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite real numbers" + (f" ({rng})" if rng else ""))
    if minimum is not None and np.any(_below(arr, minimum, strict_min)):
        raise ValueError(f"{name} must be {rng}, got min {arr.min()}")
    if maximum is not None and np.any(_above(arr, maximum, strict_max)):
        raise ValueError(f"{name} must be {rng}, got max {arr.max()}")
    return arr


def _float_array(value, refusal: str) -> np.ndarray:
    """``value`` as a float array if numpy reads it as integers or floats; else a ValueError
    of ``refusal`` followed by "a ragged sequence" or the dtype it has."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):  # ragged nesting
        raise ValueError(refusal + "a ragged sequence") from None
    numeric = np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    if arr.dtype == bool or not numeric:
        raise ValueError(f"{refusal}dtype {arr.dtype}")
    return arr.astype(float)


def _scalar_like(value) -> bool:
    """Whether ``value`` is one value rather than a sequence (np.ndim raises on ragged input)."""
    try:
        return np.ndim(value) == 0
    except ValueError:
        return False


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
    """Number of layers ``T * L``; raises, naming both knobs, unless it is a whole number
    of at most :data:`MAX_LAYERS`.

    The one implementation of the rule (time is layer / L, so a horizon or a recording
    time must fall on a layer, within :data:`LAYER_TOL` of one); every module calls it.
    """
    layers = T * L
    # Checked first: round() of an infinite product raises a bare OverflowError.
    if not math.isfinite(layers) or layers > MAX_LAYERS:
        raise ValueError(f"{name} * {L_name} must be at most 2**62 = {MAX_LAYERS:,} layers (the "
                         f"kernels count layers in int64); got {name}={T}, {L_name}={L}")
    if abs(layers - round(layers)) > LAYER_TOL * max(1.0, layers):
        raise ValueError(f"{name} * {L_name} must be a whole number of layers; got "
                         f"{name}={T}, {L_name}={L}")
    return int(round(layers))


def check_layer_times(name: str, times, L: int, T: float) -> np.ndarray:
    """Return ``times`` as a 1-d float array of times in [0, T] on the layer grid, or raise.

    A time t is recorded at layer t * L, so it must lie within :data:`LAYER_TOL` layers of a
    whole layer (relative for deep runs, as in :func:`check_whole_layers`): 0.57 with
    L = 100 is 56.99999999999999 layers and passes, 0.05 with L = 10 is half a layer and
    is refused instead of being recorded at another time than its label.
    """
    arr = np.atleast_1d(check_real_array(name, times, 0.0))
    if arr.ndim != 1 or np.any(arr > T + 1e-12):
        raise ValueError(f"{name} must be a 1-d sequence of values in [0, T={T}]")
    layers = arr * L
    off = np.abs(layers - np.rint(layers)) > LAYER_TOL * np.maximum(1.0, layers)
    if np.any(off):
        bad = float(arr[off][0])
        raise ValueError(f"{name} must lie on the layer grid (multiples of 1/L = 1/{L}, within "
                         f"{LAYER_TOL:g} of a layer); got {bad}, which is layer {bad * L:g}")
    return arr


def check_times(name: str, value) -> np.ndarray:
    """Positive times, a scalar or a 1-D array, as a 1-D float array."""
    ts = np.atleast_1d(check_real_array(name, value, 0.0, strict_min=True))
    if ts.ndim != 1:
        raise ValueError(f"{name} must be a positive scalar or 1-D array")
    return ts


def check_bool(name: str, value) -> bool:
    """Return ``value`` if it is a bool (numpy's included), else raise: ``"no"`` or 0.5
    is not taken as a switch."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_tol(value, name: str = "tol") -> float:
    """A classification tolerance, in the one range every module states: (0, 1)."""
    return check_real(name, value, 0.0, 1.0, strict_min=True, strict_max=True)


def check_level(name: str, value, *, off: bool = False) -> float:
    """A probability level of early stopping: in (0, 1), or [0, 1) with ``off=True`` where 0
    turns the stopping off (``RunConfig.stop_level``; ``theory.stopping_angles`` takes
    the same range without 0)."""
    return check_real(name, value, 0.0, 1.0, strict_min=not off, strict_max=True)


def check_real_matrix(name: str, value, shape: tuple, max_abs: float | None = None) -> np.ndarray:
    """Return ``value`` (a nested sequence or array) as a float array of ``shape``, or raise.

    Strings, ragged nesting, complex, bool or object entries, non-finite entries and
    (with ``max_abs``) entries beyond it are refused with the field's name, the shape and
    the range expected.
    """
    want = f"a finite {shape} array of real numbers" + (
        "" if max_abs is None else f" with entries in [-{max_abs:g}, {max_abs:g}]")
    arr = _float_array(value, f"{name} must be {want}; got ")
    if arr.shape != tuple(shape) or not np.all(np.isfinite(arr)) \
            or (max_abs is not None and np.abs(arr).max() > max_abs):
        raise ValueError(f"{name} must be {want}; got shape {arr.shape}")
    return arr


#: The attention types every module accepts (defined once; the others import these).
ATTENTIONS = ("softmax", "unnormalized")
#: Largest strength r of the feedforward block (relative to the value noise).  Far beyond any
#: strength of interest (the figures use r <= 4); above about 1e150 the squared increments of
#: a layer overflow.
FF_STRENGTH_MAX = 1e6
#: Largest standard deviation sigma of the entries of V, in every model (the random-attention
#: model's sigma and sigma_qk included): far beyond any scale of interest; near 1e150 the
#: squared increments of a layer overflow and the tokens become NaN.
SIGMA_MAX = 1e6
#: Largest inverse temperature beta that the theory of the overlap diffusion resolves (its
#: scale function, exit probabilities and early-stopping angles; see
#: ``theory.SCALE_FUNCTION_BETA_MAX``).  The figures' beta knobs take this range, so that a
#: beta the stopping rule cannot serve is refused before a sweep starts, not in its cells.
BETA_MAX = 1.0e4
#: Largest beta where the unnormalised weights e^beta (and the two-cluster and feedforward
#: theories that use them) stay finite in float64.
EXP_BETA_MAX = 700.0
#: Largest noise level epsilon of the hybrid model (same reason).
EPSILON_MAX = 1e6
#: Largest residual step eta of the random-attention model (same reason).
ETA_MAX = 1e6
#: Largest number of layers T * L: the kernels count layers, and the one past the last, in int64.
MAX_LAYERS = 2**62
#: Largest global trajectory index: the trajectory coordinate and the streams' counters are
#: int64, so first_trajectory + n_traj must stay at most this.
MAX_TRAJECTORY = 2**63 - 1
#: How far, in layers, a time may lie from the layer grid (relative beyond one layer): the
#: rounding of t * L, never half a layer.
LAYER_TOL = 1e-9
#: The scales of every figure, in order.
SCALE_NAMES = ("smoke", "quick", "paper")
