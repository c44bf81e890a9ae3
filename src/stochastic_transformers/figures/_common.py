"""Helpers shared by the figure modules: scales, knob parsing and checks, committed results."""

from __future__ import annotations

import math
from numbers import Integral, Real
from pathlib import Path

from .._validation import ATTENTIONS, SCALE_NAMES, check_choice, check_int, check_real, check_whole_layers



# ----------------------------------------------------------------------------- time grids
def log_time_grid(T, L, n_times, *, t_min=None):
    r"""Log-spaced recording times on the layer grid (whole multiples of :math:`1/L`).

    Without ``t_min``: 0, then about ``n_times - 1`` log-spaced times from one layer to T
    (the horizon figures).  With ``t_min``: about ``n_times`` log-spaced times from
    ``t_min`` to T (the persistence figures), each at least one layer.  Duplicates that
    the rounding creates at small times are dropped, so the grid may be a little shorter;
    the last time is exactly T.  Returns a numpy array.
    """
    import numpy as np

    T = check_real("T", T, 0.0, strict_min=True)
    L = check_int("L", L, 1)
    n_times = check_int("n_times", n_times, 2)
    n_layers = check_whole_layers(T, L)
    if n_layers < 1:
        raise ValueError(f"T * L must be a whole number of layers >= 1; got T={T}, L={L}")
    if t_min is None:
        layers = np.rint(np.logspace(0.0, math.log10(n_layers), n_times - 1)).astype(np.int64)
        layers = np.unique(np.concatenate([[0], layers, [n_layers]]))
    else:
        t_min = check_real("t_min", t_min, 0.0, T, strict_min=True)
        raw = np.geomspace(t_min, T, n_times)
        layers = np.unique(np.clip(np.rint(raw * L), 1, round(T * L)).astype(np.int64))
    return layers / L


# ----------------------------------------------------------------------------- knob checks
def _reals(minimum, *, strict=False, maximum=None):
    def check(name, values):
        values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
        if not values:
            raise ValueError(f"{name} must hold at least one value")
        return tuple(check_real(name, v, minimum, maximum, strict_min=strict) for v in values)
    return check


def _ints(minimum):
    def check(name, values):
        values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
        if not values:
            raise ValueError(f"{name} must hold at least one value")
        return tuple(check_int(name, v, minimum) for v in values)
    return check


def _int_or_ints(minimum):
    """A knob that is one integer in some figures and a list of them in others (d, n_tokens)."""
    def check(name, value):
        if isinstance(value, (tuple, list)):
            return _ints(minimum)(name, value)
        return check_int(name, value, minimum)
    return check


#: Checks of the knobs that several figures share, applied by :func:`resolve_scale` to
#: every knob of these names before any compute.  Each takes (name, value) and returns
#: the value converted, or raises a ValueError naming the knob and its allowed range.
#: Knobs peculiar to one figure are checked by that figure's module.
KNOB_CHECKS = {
    "n_traj": lambda n, v: check_int(n, v, 1),
    "L": lambda n, v: check_int(n, v, 1),
    "T": lambda n, v: check_real(n, v, 0.0, strict_min=True),
    "d": _int_or_ints(2),
    "n_tokens": _int_or_ints(2),
    "seed": lambda n, v: check_int(n, v, 0),
    "tol": lambda n, v: check_real(n, v, 0.0, 1.0, strict_min=True),
    "attention": lambda n, v: check_choice(n, v, ATTENTIONS),
    "betas": _reals(0.0),
    "epsilons": _reals(0.0),
    "Ls": _ints(1),
    "n_times": lambda n, v: check_int(n, v, 2),
    "stop_level": lambda n, v: check_real(n, v, 0.0, 1.0),
    "sigma": lambda n, v: check_real(n, v, 0.0, strict_min=True),
}


def resolve_scale(scales: dict, scale: str, overrides: dict) -> dict:
    """The knobs of ``scale`` with ``overrides`` applied, the shared knobs checked.

    Unknown knobs raise a ValueError listing the figure's knobs; an override of
    ``None`` keeps the scale's value (the notebooks' parameters default to None).
    Every knob named in :data:`KNOB_CHECKS` is checked and converted, and
    ``T * L`` must be a whole number of layers, all before any compute.
    """
    check_choice("scale", scale, SCALE_NAMES)
    knobs = dict(scales[scale])
    unknown = sorted(set(overrides) - set(knobs))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; this figure takes "
                         f"{', '.join(sorted(knobs))}")
    knobs.update({k: v for k, v in overrides.items() if v is not None})
    for name, check in KNOB_CHECKS.items():
        if name in knobs and name in overrides and overrides[name] is not None:
            knobs[name] = check(name, knobs[name])
    if "T" in knobs and "L" in knobs:
        check_whole_layers(knobs["T"], knobs["L"])
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
    """``start:stop[:step]``, both ends included (step 1 by default)."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError("a range is start:stop or start:stop:step")
    kind = int if isinstance(like, Integral) and not isinstance(like, bool) else float
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


def default_scheduler(scale: str, scheduler):
    """Smoke runs stay in-process (no cluster start-up); larger ones use a local Dask cluster."""
    if scheduler is not None:
        return scheduler
    return "synchronous" if scale == "smoke" else "local"


def cell_threads():
    """Threads one simulation may use: 1 inside a Dask worker (the workers already fill
    the cores), numba's default otherwise.  Results never depend on it."""
    try:
        from distributed import get_worker

        get_worker()
        return 1
    except (ImportError, ValueError):
        return None


def projected_cost(target_work: float, seconds_per_work: float, measured=None) -> float:
    """Projected seconds of simulation for a run of ``target_work`` units of work.

    The shared arithmetic of every sweep module's ``cost(scale, ds=None)``.  The module
    defines its unit of work (``work(knobs)``: trajectory-layers for most figures) and
    ``SECONDS_PER_WORK``, a rate measured on the project's machine and documented where
    it is defined.  ``measured`` is ``(seconds, work)`` of a computed dataset: the summed
    compute time of its sweep cells (``cell_time_s``, cached cells as first measured) and
    the work they did; with it the rate is that run's, otherwise ``seconds_per_work``.
    "Seconds of simulation" are summed over cells (core-seconds): the wall time is about
    that divided by the number of workers.  A rate measured on a tiny run (the smoke
    scale) is inflated by what every cell costs whatever its length (compiling the
    kernels, starting a worker).

    Raises a ValueError unless the work and the rate are positive and finite.
    """
    if measured is not None:
        seconds, done = (float(x) for x in measured)
        if not (math.isfinite(done) and done > 0):
            raise ValueError(f"the dataset records no work to measure a rate from (work = {done})")
        rate = seconds / done
    else:
        rate = float(seconds_per_work)
    target_work = float(target_work)
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"seconds per unit of work must be positive and finite; got {rate}")
    if not (math.isfinite(target_work) and target_work > 0):
        raise ValueError(f"work must be positive and finite; got {target_work}")
    return rate * target_work


def sweep_seconds(ds) -> float:
    """Summed compute time of a sweep dataset's cells (its ``cell_time_s`` attribute)."""
    return float(ds.attrs["cell_time_s"])


_MISSING = object()


def knob_attr(ds, name: str, default=_MISSING):
    """The value of knob ``name`` recorded in a figure dataset's attributes.

    One meaning for every figure: a knob that a sweep held fixed is the attribute
    ``fixed_<name>`` that :func:`stochastic_transformers.sweep.run_sweep` writes (the
    sweep's own record of what every cell ran with).  Datasets written before every
    module read that name (universality, fig9 and thm1 also wrote the knob under its
    plain name) are read through the plain name as a fallback.  Without either, return
    ``default`` or raise a KeyError naming both.
    """
    for key in (f"fixed_{name}", name):
        if key in ds.attrs:
            return ds.attrs[key]
    if default is _MISSING:
        raise KeyError(f"the dataset records neither fixed_{name} nor {name}")
    return default


def repo_root() -> Path:
    """The source tree's root (where ``results/`` lives) for an editable install."""
    return Path(__file__).resolve().parents[3]


def committed_result(fig_id: str, scale: str) -> Path | None:
    """Path of a result committed under ``results/`` (e.g. ``fig3_paper.nc``), if any."""
    path = repo_root() / "results" / f"{fig_id}_{scale}.nc"
    return path if path.exists() else None


def check_simulation_knobs(knobs: dict) -> dict:
    """Validate the knobs every N-token figure shares: L, T (T * L whole), d, attention,
    tol and seed; return them converted, or raise a ValueError naming the knob."""
    out = {"L": check_int("L", knobs["L"], 1),
           "T": check_real("T", knobs["T"], 0.0, strict_min=True)}
    check_whole_layers(out["T"], out["L"])
    out["d"] = check_int("d", knobs["d"], 2)
    out["attention"] = check_choice("attention", knobs["attention"], ATTENTIONS)
    out["tol"] = check_real("tol", knobs["tol"], 0.0, 1.0, strict_min=True)
    out["seed"] = check_int("seed", knobs["seed"], 0)
    return out


def load_committed(fig_id: str, scale: str = "paper"):
    """The result committed as ``results/ID_SCALE.nc``, loaded into memory, or None."""
    import xarray as xr

    path = committed_result(fig_id, scale)
    if path is None:
        return None
    with xr.open_dataset(path) as ds:
        return ds.load()


def obtain(module, scale: str, *, cache_dir=None, progress=False, **overrides):
    """What a notebook shows for ``scale``: ``(dataset, source)``, ``source`` a sentence.

    At ``scale="paper"`` with no override, the committed result ``results/ID_paper.nc``
    is loaded and nothing is recomputed; if the figure has none, the page falls back
    to the quick scale and says so (``ds.attrs["shown_scale"]`` is the scale shown) (``reproduce ID --scale paper`` computes it).  Any
    other request is computed with the resumable cache in ``cache_dir``.
    """
    check_choice("scale", scale, SCALE_NAMES)
    given = {k: v for k, v in overrides.items() if v is not None}
    if scale == "paper" and not given:
        ds = load_committed(module.ID, "paper")
        if ds is not None:
            commit = str(ds.attrs.get("git_commit", "unknown"))[:7]
            wall = ds.attrs.get("wall_time_s")
            cost = f", {float(wall):,.0f} s of wall time" if wall is not None else ""
            ds.attrs["shown_scale"] = "paper"
            return ds, (f"the committed paper-scale result (results/{module.ID}_paper.nc, "
                        f"commit {commit}{cost})")
        ds = module.compute("quick", cache_dir=cache_dir, progress=progress)
        ds.attrs["shown_scale"] = "quick"
        return ds, (f"the quick scale: no paper-scale result is committed for this figure "
                    f"(`python -m stochastic_transformers reproduce {module.ID} --scale paper` "
                    f"computes it)")
    ds = module.compute(scale, cache_dir=cache_dir, progress=progress, **overrides)
    ds.attrs["shown_scale"] = scale
    return ds, f"a fresh run at the {scale!r} scale"
