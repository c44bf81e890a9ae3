"""Knobs: the settings of a figure, their checks and the ``--set key=value`` text.

:func:`resolve_scale` applies the shared checks (:data:`KNOB_CHECKS`), then a figure's
schema ``{knob: check}``, to every knob of a scale before anything is computed: a bad knob
raises a ValueError naming it and its range.  The check factories (:func:`integer`,
:func:`reals`, :func:`whole_layers`, ...) build a schema's entries; :func:`parse_settings`
reads ``--set``.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

from .._validation import (ATTENTIONS, BETA_MAX, EPSILON_MAX, SCALE_NAMES, SIGMA_MAX,
                           check_choice, check_int, check_level, check_real, check_tol,
                           check_whole_layers)

__all__ = [
    "integer", "real", "choice", "sequence_of", "integers", "reals", "choices",
    "integer_or_integers", "all_of", "whole_layers", "KNOB_CHECKS", "resolve_scale",
    "parse_knob", "format_knob", "parse_settings",
]


# ----------------------------------------------------------------------------- knob checks
# A check is a function ``check(name, value, knobs) -> value``: it returns the value
# converted, or raises a ValueError naming the knob and its allowed range.  ``knobs`` holds
# the knobs checked so far, so that a check may relate one knob to another (t_min <= T);
# a bound given to a factory may likewise be a function of them.

def _bound(bound, knobs):
    return bound(knobs) if callable(bound) else bound


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def integer(minimum, maximum=None):
    """Check of an integer knob in ``[minimum, maximum]``."""
    def check(name, value, knobs):
        return check_int(name, value, _bound(minimum, knobs), _bound(maximum, knobs))
    return check


def real(minimum=None, maximum=None, *, strict_min=False):
    """Check of a finite real knob in ``[minimum, maximum]`` (``(minimum, ...`` if strict)."""
    def check(name, value, knobs):
        return check_real(name, value, _bound(minimum, knobs), _bound(maximum, knobs),
                          strict_min=strict_min)
    return check


def choice(options):
    """Check of a knob that takes one of ``options``."""
    def check(name, value, knobs):
        return check_choice(name, value, options)
    return check


def sequence_of(element, *, distinct=False, increasing=False, sort=False, empty=False):
    """Check of a non-empty list of values that each pass ``element`` (one value counts as a
    list of one); returned as a tuple, sorted if ``sort``.  ``distinct`` refuses repeats,
    ``increasing`` values that are not given in strictly increasing order; ``empty``
    accepts an empty list (a knob that turns a part of the figure off)."""
    def check(name, values, knobs):
        values = _as_tuple(values)
        if not values and not empty:
            raise ValueError(f"{name} must hold at least one value")
        values = tuple(element(name, v, knobs) for v in values)
        if (distinct or increasing) and len(set(values)) != len(values):
            raise ValueError(f"{name} must not repeat a value; got {values}")
        if increasing and list(values) != sorted(values):
            raise ValueError(f"{name} must be increasing; got {values}")
        return tuple(sorted(values)) if sort else values
    return check


def integers(minimum, maximum=None, **options):
    """Check of a non-empty list of integers in ``[minimum, maximum]`` (see
    :func:`sequence_of` for ``distinct``, ``increasing`` and ``sort``)."""
    return sequence_of(integer(minimum, maximum), **options)


def reals(minimum=None, maximum=None, *, strict_min=False, **options):
    """Check of a non-empty list of finite reals in range (as :func:`real`)."""
    return sequence_of(real(minimum, maximum, strict_min=strict_min), **options)


def choices(options):
    """Check of a non-empty list of distinct values among ``options``."""
    return sequence_of(choice(options), distinct=True)


def integer_or_integers(minimum):
    """Check of a knob that is one integer in some figures and a list of them in others
    (``d``, ``n_tokens``)."""
    def check(name, value, knobs):
        if isinstance(value, (tuple, list)):
            return integers(minimum)(name, value, knobs)
        return check_int(name, value, minimum)
    return check


def all_of(*checks):
    """One check that applies ``checks`` in turn, each to the value the previous returned."""
    def check(name, value, knobs):
        for one in checks:
            value = one(name, value, knobs)
        return value
    return check


def whole_layers(times_knob, layers_knob):
    """Relation check: every time of ``times_knob`` is a whole number of layers at every
    depth scale of ``layers_knob`` (each one value or a list).  Attach it to either knob,
    after the other one is checked; it returns the value unchanged."""
    def check(name, value, knobs):
        current = {**knobs, name: value}
        for t in _as_tuple(current[times_knob]):
            for L in _as_tuple(current[layers_knob]):
                check_whole_layers(t, L, times_knob, layers_knob)
        return value
    return check


#: Checks of the knobs that several figures share, applied by :func:`resolve_scale` to every
#: knob of these names, in every figure, before the figure's own ``KNOB_SCHEMA``.
KNOB_CHECKS = {
    "n_traj": integer(1),
    "L": integer(1),
    "T": real(0.0, strict_min=True),
    "d": integer_or_integers(2),
    "n_tokens": integer_or_integers(2),
    "seed": integer(0),
    "tol": lambda name, value, knobs: check_tol(value, name),
    "attention": choice(ATTENTIONS),
    "beta": real(0.0, BETA_MAX),
    "betas": reals(0.0, BETA_MAX),
    "epsilons": reals(0.0, EPSILON_MAX),
    "Ls": integers(1),
    "n_times": integer(2),
    "stop_level": lambda name, value, knobs: check_level(name, value, off=True),
    "sigma": real(0.0, SIGMA_MAX, strict_min=True),
}


def resolve_scale(scales: dict, scale: str, overrides=None, schema=None, *, defaults=None) -> dict:
    """The knobs of ``scale`` with ``overrides`` applied, every one of them checked.

    ``defaults`` are knobs that no scale sets (a module's ``KNOBS``); an override of
    ``None`` keeps the scale's value (the notebooks' parameters default to None).  An
    unknown knob raises a ValueError listing the figure's knobs.  Then, before any
    compute: every knob named in :data:`KNOB_CHECKS` is checked and converted, ``T * L``
    must be a whole number of layers, and every entry of ``schema`` (the module's
    ``KNOB_SCHEMA``: knob -> check, in order; an entry for a shared knob adds the
    figure's own restriction to the shared check) is applied.  A knob named in neither is
    checked by what it configures (Figure 2's training configuration).
    """
    check_choice("scale", scale, SCALE_NAMES)
    knobs = {**(defaults or {}), **scales[scale]}
    overrides = overrides or {}
    unknown = sorted(set(overrides) - set(knobs))
    if unknown:
        raise ValueError(f"unknown knob(s) {', '.join(unknown)} in the overrides; this figure "
                         f"takes {', '.join(sorted(knobs))}")
    knobs.update({k: v for k, v in overrides.items() if v is not None})
    for name in list(knobs):
        if name in KNOB_CHECKS:
            knobs[name] = KNOB_CHECKS[name](name, knobs[name], knobs)
    if "T" in knobs and "L" in knobs:
        check_whole_layers(knobs["T"], knobs["L"])
    for name, check in (schema or {}).items():
        knobs[name] = check(name, knobs[name], knobs)
    return knobs


# ----------------------------------------------------------------------------- --set values
def _parse_scalar(text: str, like):
    """``text`` read as the type of ``like`` (int, float, bool, str; None: inferred)."""
    low = text.strip().lower()
    if isinstance(like, bool) or (like is None and low in ("true", "false")):
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise ValueError("expected true or false")
    if like is None:
        if low in ("none", ""):
            return None
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text
    if isinstance(like, Integral):
        try:
            return int(text)
        except ValueError:
            raise ValueError("expected an integer") from None
    if isinstance(like, Real):
        try:
            value = float(text)
        except ValueError:
            raise ValueError("expected a number") from None
        if not math.isfinite(value):
            raise ValueError("expected a finite number")
        return value
    return text.strip()


def _parse_range(text: str, like):
    """``start:stop[:step]``, both ends included (integers: step 1 by default)."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError("a range is start:stop or start:stop:step")
    kind = int if isinstance(like, Integral) and not isinstance(like, bool) else float
    if kind is float and len(parts) == 2:
        # A step of 1 is a natural default for integers only; 0:4 for inverse temperatures
        # would silently mean five values where a reader likely wanted a finer grid.
        raise ValueError("a range of numbers needs its step: start:stop:step")
    try:
        start, stop = kind(parts[0]), kind(parts[1])
        step = kind(parts[2]) if len(parts) == 3 else kind(1)
    except ValueError:
        raise ValueError(f"range bounds must be {'integers' if kind is int else 'numbers'}") \
            from None
    if not step > 0:
        raise ValueError("a range's step must be > 0")
    if stop < start:
        raise ValueError("a range's stop must be >= its start")
    count = int(math.floor((stop - start) / step + 1e-9)) + 1
    if count > 100_000:
        raise ValueError(f"the range holds {count} values (at most 100,000)")
    values = [start + i * step for i in range(count)]
    return [kind(round(v, 12)) if kind is float else v for v in values]


def parse_knob(name: str, text: str, default):
    """Read the text of ``--set name=text`` as the type of the knob's ``default``.

    A knob whose default is a tuple takes a comma-separated list (``4,6,8``), a range
    ``start:stop[:step]`` with both ends included (``0:4:0.25``), or one value; the
    elements are read as the default's elements.  Other knobs take one value of the
    default's type (a default of ``None`` accepts a number, true/false, none or text).
    Raises a ValueError naming the knob and what it accepts.
    """
    try:
        if isinstance(default, (tuple, list)):
            like = default[0] if len(default) else 0.0
            if ":" in text:
                return tuple(_parse_range(text, like))
            items = [t for t in text.split(",") if t.strip()]
            if not items:
                raise ValueError("expected at least one value")
            return tuple(_parse_scalar(t, like) for t in items)
        return _parse_scalar(text, default)
    except ValueError as err:
        kind = _describe(default)
        raise ValueError(f"--set {name}={text}: {err}; {name} takes {kind}") from None


def _kind_plural(like) -> str:
    if isinstance(like, bool):
        return "true/false values"
    if isinstance(like, Integral):
        return "integers"
    if isinstance(like, Real):
        return "numbers"
    return "strings"


def _describe(default) -> str:
    if isinstance(default, (tuple, list)):
        like = default[0] if len(default) else 0.0
        example = ",".join(format_knob(v) for v in default[:3])
        return f"a list of {_kind_plural(like)} (a,b,c or start:stop:step), e.g. {example}"
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, Integral):
        return f"an integer, e.g. {default}"
    if isinstance(default, Real):
        return f"a number, e.g. {default:g}"
    if default is None:
        return "a value (a number, true/false, none or text)"
    return f"a string, e.g. {default}"


def format_knob(value) -> str:
    """A knob's value as ``--set`` would take it (lists comma-separated, numbers plain)."""
    if isinstance(value, (tuple, list)):
        return ",".join(format_knob(v) for v in value)
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real):
        return f"{float(value):g}"
    return str(value)


def parse_settings(settings, knobs: dict) -> dict:
    """``["key=value", ...]`` -> ``{key: value}`` typed after ``knobs`` (a scale's defaults).

    An unknown key or a malformed entry raises a ValueError naming it and what is accepted.
    """
    out = {}
    for entry in settings or ():
        key, sep, text = entry.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--set takes key=value, got {entry!r}")
        if key not in knobs:
            raise ValueError(f"--set {key}: unknown knob; this figure takes "
                             f"{', '.join(sorted(knobs))}")
        out[key] = parse_knob(key, text, knobs[key])
    return out
