"""Argument checks shared by every public function.

Every check runs before any compute and raises ``ValueError`` naming the
parameter and its allowed range, so that a typo never costs a long run.
"""

from __future__ import annotations

import math
from numbers import Integral, Real


def check_int(name: str, value, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` as an int, or raise if it is not an integer in range."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f" and <= {maximum}"
        raise ValueError(f"{name} must be an integer >= {minimum}{upper}, got {value}")
    return value


def check_real(
    name: str,
    value,
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    strict_min: bool = False,
) -> float:
    """Return ``value`` as a finite float, or raise if it is out of range.

    ``strict_min=True`` makes the lower bound exclusive (``value > minimum``).
    """
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    value = float(value)
    too_small = minimum is not None and (value <= minimum if strict_min else value < minimum)
    too_large = maximum is not None and value > maximum
    if too_small or too_large:
        lo = "" if minimum is None else (f"> {minimum}" if strict_min else f">= {minimum}")
        hi = "" if maximum is None else f"<= {maximum}"
        rng = " and ".join(s for s in (lo, hi) if s)
        raise ValueError(f"{name} must be {rng}, got {value}")
    return value


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
#: The scales of every figure, in order.
SCALE_NAMES = ("smoke", "quick", "paper")
