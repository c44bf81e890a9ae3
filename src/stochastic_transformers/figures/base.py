"""The common work of the figure modules: knobs, sweeps, costs and committed results.

A figure module (the protocol is in :mod:`stochastic_transformers.figures`) declares what
is its own - its scales, its knob schema, its cell, its unit of work - and leaves the rest
to this module:

* **knobs** - :func:`resolve_scale` applies the shared checks (:data:`KNOB_CHECKS`) and the
  module's ``KNOB_SCHEMA`` to every knob of a scale, overridden or not, before any compute;
  the check factories (:func:`integer`, :func:`reals`, :func:`whole_layers`, ...) build the
  entries of a schema, and :func:`parse_settings` reads ``--set key=value``;
* **sweeps** - :func:`figure_sweep` runs a module's cell under the sweep name
  ``ID-scale`` with the default scheduler of the scale, and :func:`add_outcome_fractions`
  turns outcome counts into fractions with their Wilson bands;
* **costs** - :func:`cost_function` gives a module its ``cost(scale, ds=None)`` from its
  ``work(knobs)``, ``SECONDS_PER_WORK`` and the rate measured on a dataset
  (:func:`measured`);
* **committed results** - :func:`load_committed` and :func:`obtain` (what a notebook shows).
"""

from __future__ import annotations

import math
import sys
from numbers import Integral, Real
from pathlib import Path

from .._validation import (ATTENTIONS, SCALE_NAMES, check_choice, check_int, check_real,
                           check_whole_layers)

__all__ = [
    "log_time_grid", "on_time_axis",
    "integer", "real", "choice", "sequence_of", "integers", "reals", "choices",
    "integer_or_integers",
    "all_of", "whole_layers", "KNOB_CHECKS", "resolve_scale", "module_knobs",
    "parse_knob", "format_knob", "parse_settings",
    "default_scheduler", "cell_threads", "figure_sweep", "add_outcome_fractions", "laid_out",
    "projected_cost", "sweep_seconds", "trajectory_layers", "trajectory_layer_work", "measured",
    "cost_function",
    "knob_attr", "repo_root", "committed_result", "load_committed", "obtain",
]


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


def on_time_axis(name: str, values, times, dtype=float):
    """``(values, times)`` as arrays, ``values`` with the recorded times as its last axis;
    a ValueError naming ``name`` otherwise (the metrics of the horizon figures)."""
    import numpy as np

    values = np.asarray(values, dtype=dtype)
    times = np.asarray(times, dtype=float)
    if values.shape[-1:] != times.shape:
        raise ValueError(f"{name} must have the time axis last ({times.size} times); "
                         f"got shape {values.shape}")
    return values, times


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
    "tol": real(0.0, 1.0, strict_min=True),
    "attention": choice(ATTENTIONS),
    "betas": reals(0.0),
    "epsilons": reals(0.0),
    "Ls": integers(1),
    "n_times": integer(2),
    "stop_level": real(0.0, 1.0),
    "sigma": real(0.0, strict_min=True),
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


def module_knobs(module, scale: str, overrides=None) -> dict:
    """:func:`resolve_scale` for figure ``module``: its scales, schema and defaults."""
    return resolve_scale(module.SCALES, scale, overrides, getattr(module, "KNOB_SCHEMA", None),
                         defaults=getattr(module, "KNOBS", None))


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


# ----------------------------------------------------------------------------- sweeps
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


def _figure(module):
    """A figure module given as itself or by its name (``__name__`` inside it)."""
    return sys.modules[module] if isinstance(module, str) else module


def figure_sweep(module, scale: str, grid: dict, *, fixed: dict, seed: int, cell=None,
                 part=None, name=None, scheduler=None, cache_dir=None, progress=True,
                 output_dims=None, output_coords=None):
    """Run a figure's sweep (:func:`stochastic_transformers.sweep.run_sweep`) at ``scale``.

    ``module`` is the figure module or its name; ``cell`` defaults to its ``cell``.  The
    sweep is named ``ID-scale``, or ``ID-scale-part`` for a further sweep of the same
    figure (the name labels the cache folder and enters every cache key, so these names
    never change; ``name`` gives one that predates this rule: Figure 4's depth check).
    ``scheduler=None`` is the scale's default (:func:`default_scheduler`); ``grid``,
    ``fixed``, ``seed``, ``cache_dir``, ``progress`` and the output layout go to the sweep
    as they are.
    """
    from ..sweep import run_sweep

    module = _figure(module)
    if name is None:
        name = f"{module.ID}-{scale}" + ("" if part is None else f"-{part}")
    return run_sweep(module.cell if cell is None else cell, grid, fixed=fixed, seed=seed,
                     name=name, cache_dir=cache_dir,
                     scheduler=default_scheduler(scale, scheduler), progress=progress,
                     output_dims=output_dims, output_coords=output_coords)


def trajectory_layer_work(*grid_knobs):
    """The ``work(knobs)`` of a sweep with one cell per combination of the values of
    ``grid_knobs``, each running ``n_traj`` trajectories of ``L * T`` layers: the
    trajectory-layers it schedules (the unit :func:`trajectory_layers` counts on a dataset)."""
    def work(knobs) -> float:
        cells = math.prod(len(knobs[name]) for name in grid_knobs)
        return float(knobs["n_traj"] * knobs["L"] * knobs["T"] * cells)

    work.__doc__ = (f"Trajectory-layers a run with these knobs schedules: n_traj * L * T per "
                    f"({', '.join(grid_knobs)}) cell.")
    return work


def add_outcome_fractions(ds, outcomes, total="n_traj"):
    """``p_<outcome>`` with its Wilson band for every count ``n_<outcome>`` of ``outcomes``,
    out of ``total`` (:func:`stochastic_transformers.stats.add_fraction`), in that order."""
    from ..stats import add_fraction

    for outcome in outcomes:
        ds = add_fraction(ds, f"n_{outcome}", total, f"p_{outcome}")
    return ds


def laid_out(fig, title=None, *, fontsize=10, **layout):
    """The last step of every figure's ``plot``: the title ``title`` (if any) over the whole
    figure, then a tight layout (``layout`` goes to ``fig.tight_layout``); returns ``fig``."""
    if title is not None:
        fig.suptitle(title, fontsize=fontsize)
    fig.tight_layout(**layout)
    return fig


# ----------------------------------------------------------------------------- costs
def projected_cost(target_work: float, seconds_per_work: float, measured=None) -> float:
    """Projected seconds of simulation for a run of ``target_work`` units of work.

    The arithmetic of every sweep module's ``cost(scale, ds=None)``.  The module defines
    its unit of work (``work(knobs)``: trajectory-layers for most figures) and
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


def trajectory_layers(ds) -> float:
    """Trajectory-layers a sweep dataset's cells ran: the summed ``n_traj`` times the
    layers ``L * T`` every trajectory runs (the sweep's fixed ``L`` and ``T``)."""
    return float(ds.n_traj.sum()) * int(knob_attr(ds, "L")) * float(knob_attr(ds, "T"))


def measured(module, ds) -> tuple[float, float]:
    """``(seconds of simulation, work)`` of a dataset computed by figure ``module``.

    A module whose dataset holds more than one sweep of trajectory-layers, or whose unit
    of work is another, declares ``measured_work(ds) -> (seconds, work)``; for the others
    the seconds are the sweep's recorded cell time and the work its
    :func:`trajectory_layers`.
    """
    module = _figure(module)
    if hasattr(module, "measured_work"):
        return module.measured_work(ds)
    return sweep_seconds(ds), trajectory_layers(ds)


def cost_function(module, note: str = ""):
    """The ``cost(scale, ds=None)`` of a sweep module (``module``: the module or its name).

    ``cost`` projects the seconds of simulation (summed over cells) of a run at ``scale``:
    ``work(knobs)`` of the scale's knobs at the rate ``SECONDS_PER_WORK``, or, given a
    computed dataset ``ds``, at the rate measured on it (:func:`measured`); see
    :func:`projected_cost`.  ``note`` is appended to its docstring (what the cost leaves
    out, where a finer breakdown is).
    """
    def cost(scale, ds=None) -> float:
        figure = _figure(module)
        knobs = module_knobs(figure, scale)
        return projected_cost(figure.work(knobs), figure.SECONDS_PER_WORK,
                              None if ds is None else measured(figure, ds))

    cost.__doc__ = ("Projected seconds of simulation (summed over cells) for ``scale``: at "
                    "the rate of ``ds`` if given, else at ``SECONDS_PER_WORK`` (see "
                    ":func:`stochastic_transformers.figures.base.projected_cost`)."
                    + (f"  {note}" if note else ""))
    cost.__module__ = module if isinstance(module, str) else module.__name__
    return cost


# ----------------------------------------------------------------------------- datasets
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


# ----------------------------------------------------------------------------- committed results
def repo_root() -> Path:
    """The source tree's root (where ``results/`` lives) for an editable install."""
    return Path(__file__).resolve().parents[3]


def committed_result(fig_id: str, scale: str) -> Path | None:
    """Path of a result committed under ``results/`` (e.g. ``fig3_paper.nc``), if any."""
    path = repo_root() / "results" / f"{fig_id}_{scale}.nc"
    return path if path.exists() else None


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
    is loaded and nothing is recomputed.  A figure whose paper scale needs what these
    machines lack (Figure 2: CIFAR-10 and a GPU) may name a committed stand-in,
    ``STAND_IN = (name, description)``: ``results/ID_NAME.nc`` is then shown
    (``ds.attrs["shown_scale"] = NAME``).  With neither, the page falls back to the quick
    scale and says so (``reproduce ID --scale paper`` computes it).  Any other request is
    computed with the resumable cache in ``cache_dir`` (``compute`` checks the scale and
    the knobs).  ``ds.attrs["shown_scale"]`` is always the scale shown.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    if scale == "paper" and not given:
        ds = load_committed(module.ID, "paper")
        if ds is not None:
            ds.attrs["shown_scale"] = "paper"
            return ds, _committed_source(ds, f"results/{module.ID}_paper.nc",
                                         "the committed paper-scale result")
        stand_in = getattr(module, "STAND_IN", None)
        ds = None if stand_in is None else load_committed(module.ID, stand_in[0])
        if ds is not None:
            ds.attrs["shown_scale"] = stand_in[0]
            return ds, _committed_source(ds, f"results/{module.ID}_{stand_in[0]}.nc",
                                         f"the committed {stand_in[1]}")
        ds = module.compute("quick", cache_dir=cache_dir, progress=progress)
        ds.attrs["shown_scale"] = "quick"
        return ds, (f"the quick scale: no paper-scale result is committed for this figure "
                    f"(`python -m stochastic_transformers reproduce {module.ID} --scale paper` "
                    f"computes it)")
    ds = module.compute(scale, cache_dir=cache_dir, progress=progress, **overrides)
    ds.attrs["shown_scale"] = scale
    return ds, f"a fresh run at the {scale!r} scale"


def _committed_source(ds, path: str, what: str) -> str:
    """The sentence that names a committed result: its file, commit and wall time."""
    commit = str(ds.attrs.get("git_commit", "unknown"))[:7]
    wall = ds.attrs.get("wall_time_s")
    cost = f", {float(wall):,.0f} s of wall time" if wall is not None else ""
    return f"{what} ({path}, commit {commit}{cost})"
