"""A figure, declared once: its settings, its cell, its summary and its plot.

Every figure of the book is one :class:`Figure`.  A figure module holds what is its own -
the scales of its knobs, the sweep cell that simulates one point, ``summary`` (every number
and verdict its page quotes) and ``plot`` - and ends with the declaration, e.g. Figure 3::

    FIGURE = Figure.declared(
        globals(), "fig3", source="paper", description="two tokens: P(antipodal) vs beta ...",
        schema={"d": integers(2)}, grid={"d": "d", "beta": "betas"},
        fixed=("n_traj", "L", "T", "attention", "tol", "stop_level"),
        work=trajectory_layer_work("d", "betas"))

What every figure does the same way is written here once: knob checks before any compute
(:meth:`Figure.knobs`), the sweep's name, scheduler and cache key (:class:`Sweeps`), the
dataset's provenance (:meth:`Figure.compute`), the projected cost (:meth:`Figure.cost`) and
the committed result a page shows (:meth:`Figure.obtain`).  The registry is the explicit
list in :mod:`stochastic_transformers.figures`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import SCALE_NAMES, check_choice
from . import base
from .base import sweep_seconds, trajectory_layers
from .knobs import resolve_scale

__all__ = ["Figure", "SOURCES", "CONVENTIONAL_NAMES", "projected_cost", "default_scheduler"]

#: Where a figure comes from; each has its subpackage of :mod:`stochastic_transformers.figures`.
SOURCES = ("paper", "followup", "ours")

#: The module-level names that :meth:`Figure.declared` reads, by the field each fills.
CONVENTIONAL_NAMES = {"scales": "SCALES", "seconds_per_work": "SECONDS_PER_WORK", **{
    name: name for name in ("cell", "run", "finish", "work", "measured_work", "summary", "plot",
                           "plan")}}


def default_scheduler(scale: str, scheduler):
    """Smoke runs stay in-process (no cluster start-up); larger ones use a local Dask cluster."""
    if scheduler is not None:
        return scheduler
    return "synchronous" if scale == "smoke" else "local"


def projected_cost(target_work: float, seconds_per_work: float, measured=None) -> float:
    """Projected seconds of simulation (summed over cells: core-seconds) for ``target_work``.

    ``measured`` is ``(seconds, work)`` of a computed dataset; with it the rate is that
    run's, otherwise ``seconds_per_work`` (a rate measured on the project's machine).  A
    rate measured on a tiny run (the smoke scale) is inflated by what every cell costs
    whatever its length (compiling the kernels, starting a worker).  Raises a ValueError
    unless the work and the rate are positive and finite.
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


def _as_list(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


@dataclass(frozen=True)
class Sweeps:
    """The sweeps of one computation of a figure: its scale, scheduler, cache and progress.

    Calling it runs one sweep (:func:`stochastic_transformers.sweep.run_sweep`) of the
    figure's ``cell`` (or another module-level ``cell``) over ``grid``.  The sweep is named
    ``ID-scale``, or ``ID-scale-part`` for a further sweep of the same figure; the name
    labels the cache folder and enters every cache key, so these names never change
    (``name`` gives one that predates this rule).
    """

    figure: "Figure"
    scale: str
    scheduler: Any = None
    cache_dir: Any = None
    progress: bool = True

    def __call__(self, grid: Mapping, *, fixed: Mapping, seed: int, cell=None, part=None,
                 name=None, output_dims=None, output_coords=None):
        from ..sweep import _default_code_version, run_sweep

        figure = self.figure
        if name is None:
            name = f"{figure.id}-{self.scale}" + ("" if part is None else f"-{part}")
        # The figure's cell version enters every cache key, so bumping it invalidates this
        # figure's cached cells and no other's.
        version = f"{_default_code_version()}+{figure.id}.{figure.cell_version}"
        return run_sweep(figure.cell if cell is None else cell, dict(grid), fixed=dict(fixed),
                         seed=seed, name=name, cache_dir=self.cache_dir,
                         scheduler=default_scheduler(self.scale, self.scheduler),
                         progress=self.progress, code_version=version,
                         output_dims=output_dims, output_coords=output_coords)


@dataclass(frozen=True)
class Figure:
    """One figure of the book, declared once.

    Parameters
    ----------
    id : str
        Short name (``"fig3"``): the ``reproduce`` id, the notebook's glue prefix and the
        name of the committed result ``results/ID_paper.nc``.
    source : {"paper", "followup", "ours"}
        Whose claim the figure tests.
    description : str
        One line for ``reproduce --list``.
    scales : mapping
        ``{"smoke": {...}, "quick": {...}, "paper": {...}}``: the knobs of each scale.
    summary, plot : callable
        ``summary(ds) -> dict`` (every number and verdict the page quotes) and
        ``plot(ds) -> matplotlib.figure.Figure``.
    schema : mapping
        ``{knob: check}`` for the knobs that are the figure's own (see
        :mod:`.knobs`); the shared knobs are checked by :data:`.knobs.KNOB_CHECKS`.
    defaults : mapping or callable
        Knobs that no scale sets, with their defaults (a callable returning them where
        they need an optional dependency: Figure 2's training fields need PyTorch).
    plan : callable, optional
        ``plan(knobs)``: a dry run that raises a ValueError for what only the simulation
        would otherwise find (a bound of the theory a cell evaluates), before any compute.
    cell, cell_version : callable, str
        The module-level sweep cell ``cell(**params, seed) -> dict`` and the version of its
        outputs: bump it whenever ``cell`` returns other numbers for the same arguments.
    grid, fixed : mapping, tuple
        For the common one-sweep figure: ``{sweep dimension: knob}`` (each knob one value or
        a list) and the knobs passed to every cell unchanged.
    finish : callable, optional
        ``finish(raw, knobs) -> Dataset``: the figure's dataset from the sweep's.
    run : callable, optional
        ``run(knobs, sweeps) -> Dataset`` for a figure that is not one sweep (several
        sweeps, or none); ``sweeps`` is a :class:`Sweeps`.
    work, seconds_per_work, measured_work : callable, float, callable
        ``work(knobs)``: units of work of a run (trajectory-layers for most);
        ``seconds_per_work``: the rate measured on the committed paper run (where is
        written beside it); ``measured_work(ds) -> (seconds, work)`` for a dataset whose
        work is not ``work`` of the knobs it ran (:meth:`measured`).
    stand_in : (str, str), optional
        ``(name, description)`` of a committed result shown where the paper scale needs
        what these machines lack (Figure 2: CIFAR-10 and a GPU).
    """

    id: str
    source: str
    description: str
    scales: Mapping[str, Mapping[str, Any]]
    summary: Callable
    plot: Callable
    schema: Mapping[str, Callable] = field(default_factory=dict)
    defaults: Mapping[str, Any] | Callable[[], Mapping] = field(default_factory=dict)
    plan: Callable | None = None
    cell: Callable | None = None
    cell_version: str = "1"
    grid: Mapping[str, str] = field(default_factory=dict)
    fixed: tuple[str, ...] = ()
    finish: Callable | None = None
    run: Callable | None = None
    work: Callable | None = None
    seconds_per_work: float | None = None
    measured_work: Callable | None = None
    stand_in: tuple[str, str] | None = None

    def __post_init__(self):
        check_choice("source", self.source, SOURCES)
        if tuple(self.scales) != SCALE_NAMES:
            raise ValueError(f"{self.id}: scales must be {SCALE_NAMES} in that order")
        if (self.run is None) == (self.cell is None or not self.grid):
            raise ValueError(f"{self.id}: declare either run, or cell with its grid")

    @classmethod
    def declared(cls, namespace: Mapping, id: str, **fields) -> "Figure":
        """The figure a module declares, as the last statement of the module::

            FIGURE = Figure.declared(globals(), "fig3", source="paper", description=...)

        ``fields`` are taken as given; a field left out is filled from the module-level
        name that holds it by convention (:data:`CONVENTIONAL_NAMES`: ``SCALES``,
        ``cell``, ``run``, ``finish``, ``work``, ``measured_work``,
        ``SECONDS_PER_WORK``, ``summary``, ``plot``, ``plan``) where the module defines it.
        """
        found = {name: namespace[held] for name, held in CONVENTIONAL_NAMES.items()
                 if name not in fields and held in namespace}
        return cls(id, **found, **fields)

    @property
    def module(self):
        """The module that declares this figure (its extra science and page helpers)."""
        import sys

        return sys.modules[self.summary.__module__]

    # ------------------------------------------------------------------ knobs
    def knobs(self, scale: str, overrides: Mapping | None = None) -> dict:
        """Every knob of ``scale`` with ``overrides`` applied, checked, and the plan's dry run
        passed: all before any compute.  An override of None keeps the scale's value."""
        knobs = resolve_scale(self.scales, scale, overrides, self.schema,
                              defaults=self.default_knobs())
        if self.plan is not None:
            self.plan(knobs)
        return knobs

    def default_knobs(self) -> dict:
        """The knobs that no scale sets, with their defaults."""
        return dict(self.defaults() if callable(self.defaults) else self.defaults)

    def settings(self, scale: str) -> dict:
        """The knobs ``--set`` accepts at ``scale`` with their values, unchecked."""
        check_choice("scale", scale, SCALE_NAMES)
        return {**self.default_knobs(), **self.scales[scale]}

    # ------------------------------------------------------------------ compute
    def compute(self, scale: str = "quick", *, scheduler=None, cache_dir=None,
                progress: bool = True, **overrides):
        """Run the figure at ``scale`` and return its dataset.

        ``overrides`` replace individual knobs; every knob is checked first.  ``scheduler``
        is a Dask scheduler address (None: the scale's default, in-process for smoke, a
        local cluster otherwise); ``cache_dir`` keeps finished cells so that a killed run
        resumes.  The dataset records ``scale``, ``figure`` (the id) and its ``knobs`` (JSON)
        as attributes.
        """
        knobs = self.knobs(scale, overrides)
        sweeps = Sweeps(self, scale, scheduler, cache_dir, progress)
        if self.run is not None:
            ds = self.run(knobs, sweeps)
        else:
            grid = {dim: _as_list(knobs[knob]) for dim, knob in self.grid.items()}
            raw = sweeps(grid, fixed={k: knobs[k] for k in self.fixed}, seed=knobs["seed"])
            ds = raw if self.finish is None else self.finish(raw, knobs)
        ds.attrs.update(scale=scale, figure=self.id, knobs=json.dumps(
            knobs, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))
        return ds

    # ------------------------------------------------------------------ cost
    def measured(self, ds) -> tuple[float, float]:
        """``(seconds of simulation, work)`` of a dataset this figure computed: ``work`` of the
        knobs it records, or (a file older than that attribute, run without overrides) of its
        scale's knobs, checked against every knob its sweeps record as fixed; without
        ``work`` or a scale, the sweep's trajectory-layers."""
        if self.measured_work is not None:
            return self.measured_work(ds)
        a = ds.attrs
        if self.work is None or ("knobs" not in a and "scale" not in a):
            return sweep_seconds(ds), trajectory_layers(ds)
        if "knobs" in a:
            return sweep_seconds(ds), self.work(json.loads(a["knobs"]))
        knobs = self.knobs(a["scale"])
        off = [k for k, v in knobs.items() if np.isscalar(v) and a.get(f"fixed_{k}", v) != v]
        if a.get("overrides", "none") != "none":
            off.append("overrides")
        if off:
            raise ValueError(f"{self.id}: this dataset did not run its scale's knobs "
                             f"({', '.join(off)} differ): its work is unknown")
        return sweep_seconds(ds), self.work(knobs)

    def cost(self, scale: str, ds=None) -> float:
        """Projected seconds of simulation (summed over cells) for ``scale``: ``work`` of the
        scale's knobs at the rate of ``ds`` if given, else at ``seconds_per_work``."""
        if self.work is None:
            raise ValueError(f"{self.id} declares no unit of work to project a cost from")
        return projected_cost(self.work(self.knobs(scale)), self.seconds_per_work,
                              None if ds is None else self.measured(ds))

    # ------------------------------------------------------------------ committed results
    def obtain(self, scale: str, *, cache_dir=None, progress: bool = False, **overrides):
        """What a page shows for ``scale``: ``(dataset, source)``, ``source`` a sentence.

        At ``scale="paper"`` with no override the committed result ``results/ID_paper.nc``
        is loaded and nothing is recomputed (else the stand-in, else a quick run, and the
        sentence says which).  Any other request is computed with the resumable cache in
        ``cache_dir``.  ``ds.attrs["shown_scale"]`` is the scale shown.
        """
        given = {k: v for k, v in overrides.items() if v is not None}
        if scale == "paper" and not given:
            shown = [("paper", "the committed paper-scale result")]
            if self.stand_in is not None:
                shown.append((self.stand_in[0], f"the committed {self.stand_in[1]}"))
            for name, what in shown:
                ds = base.load_committed(self.id, name)
                if ds is not None:
                    ds.attrs["shown_scale"] = name
                    return ds, _committed_source(ds, f"results/{self.id}_{name}.nc", what)
            ds = self.compute("quick", cache_dir=cache_dir, progress=progress)
            ds.attrs["shown_scale"] = "quick"
            return ds, (f"the quick scale: no paper-scale result is committed for this figure "
                        f"(`python -m stochastic_transformers reproduce {self.id} --scale "
                        f"paper` computes it)")
        ds = self.compute(scale, cache_dir=cache_dir, progress=progress, **given)
        ds.attrs["shown_scale"] = scale
        return ds, f"a fresh run at the {scale!r} scale"


def _committed_source(ds, path: str, what: str) -> str:
    """The sentence that names a committed result: its file, commit and wall time, and the
    cells read from the cache of an earlier run (which cost no wall time in this one)."""
    commit, a = str(ds.attrs.get("git_commit", "unknown"))[:7], ds.attrs
    wall = float(a.get("wall_time_s", -1.0))
    cost = "" if wall < 0 else f", {wall:,.0f} s of wall time" if wall >= 1 else \
        ", under 1 s of wall time"
    n = [int(np.nan_to_num(float(a.get(f"n_cells{k}", 0)))) for k in ("", "_computed", "_cached")]
    cost += (f"; {n[1]} of {n[0]} cells computed in this run, the others read from its cache, "
             f"{float(a['cell_time_s']):,.0f} s of cell time in all") if n[2] else ""
    return f"{what} ({path}, commit {commit}{cost})"
