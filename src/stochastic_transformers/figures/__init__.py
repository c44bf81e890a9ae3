"""One module per figure or theorem of the book, all following one protocol.

Every figure module defines

``ID``
    its short name (``"fig3"``), used by ``reproduce`` and by the notebook;
``DESCRIPTION``
    one line for ``reproduce --list``;
``SCALES``
    a dict ``{"smoke": {...}, "quick": {...}, "paper": {...}}`` (in that order) of
    the knobs of :func:`compute`;
``KNOB_SCHEMA``
    ``{knob: check}`` for the knobs that are the module's own, built from the check
    factories of :mod:`.base` (``integer``, ``reals``, ``whole_layers``, ...).
    :func:`.base.resolve_scale` applies the shared checks (:data:`.base.KNOB_CHECKS`,
    for ``n_traj``, ``L``, ``T``, ``d``, ``betas``, ...) and then this schema to every
    knob of the scale, overridden or not, before anything is computed, so that a bad
    knob raises a ValueError naming it and its allowed range.  An entry for a shared knob
    adds the figure's own restriction (``n_tokens >= 3``); a check may relate a knob to
    those before it (``t_min <= T``).  Every knob of every scale has a check (Figure 2's
    training fields are checked by its training configuration);
``cell(**params, seed)`` and ``CELL_VERSION``
    for a figure computed as a sweep (all but Figures 1, 2 and the overlap page): the
    module-level function :func:`stochastic_transformers.sweep.run_sweep` runs on each
    point, and the version of its outputs.  :func:`.base.figure_sweep` runs it under the
    name ``ID-scale`` (``ID-scale-part`` for a further sweep) with the scale's default
    scheduler.  The sweep folds ``ID`` and ``CELL_VERSION`` into every cache key, so
    bumping ``CELL_VERSION`` whenever ``cell`` returns other outputs or other numbers for
    the same arguments invalidates that figure's cached cells and no other's; a cached
    cell whose output names no longer match is recomputed even without a bump;
``cost(scale, ds=None) -> float``, ``work(knobs)`` and ``SECONDS_PER_WORK``
    for a sweep: the projected seconds of simulation (summed over cells, i.e.
    core-seconds) of a run at ``scale``.  ``work(knobs)`` counts the figure's unit of
    work (trajectory-layers for most) for a scale's knobs; ``SECONDS_PER_WORK`` is the
    rate measured on the project's machine (where, is documented beside it).  ``cost``
    is :func:`.base.cost_function` of the module: with a computed dataset ``ds`` the rate
    is that run's measured cell time per unit of work (:func:`.base.measured`, which
    counts trajectory-layers unless the module declares ``measured_work(ds) ->
    (seconds, work)``).  A richer breakdown, where a notebook quotes one, has its own
    name (``cost_report``, ``cost_by_law``);
``compute(scale="quick", *, scheduler=None, cache_dir=None, progress=True, **overrides)``
    runs the simulations and returns an :class:`xarray.Dataset` (the ``overrides``
    replace individual knobs of the scale; an unknown or invalid knob raises a
    ValueError naming it before anything is computed).  A sweep module turns the raw
    sweep output into that dataset in a private ``_finish(raw, scale, *, ...)``: the
    sweep's dataset first, the scale second, and whatever else it needs (the checked
    knobs, further sweeps) keyword-only.  A knob that the sweep held fixed is recorded
    once, as the attribute ``fixed_<knob>`` that the sweep writes, and read with
    :func:`.base.knob_attr` (which also reads the plain name of older files);
``summary(ds) -> dict``
    every number and verdict the notebook's prose quotes, thresholds included;
``plot(ds)``
    draws the figure from that dataset and returns a ``matplotlib`` figure.

The notebooks and :func:`reproduce` call these functions, so no figure logic lives
only in a notebook: a notebook shows ``obtain(module, scale, ...)`` (:func:`.base.obtain`:
the committed paper-scale result, or a fresh run).  The statistics the figures use are in
:mod:`stochastic_transformers.stats`.  ``tests/test_figure_protocol.py`` checks every
registered module against this list.
"""

from __future__ import annotations

import importlib
from pathlib import Path

#: figure id -> module name inside this package; the order is the book's order.
REGISTRY: dict[str, str] = {
    "fig1": "fig1",
    "fig2": "fig2",
    "overlap": "overlap",
    "fig3": "fig3",
    "fig4": "fig4",
    "fig6": "fig6",
    "fig7": "fig7",
    "clusters": "clusters",
    "fig8": "fig8",
    "fig9": "fig9",
    "ff_pairs": "ff_pairs",
    "ff_threshold": "ff_threshold",
    "ff_tokens": "ff_tokens",
    "thm1": "thm1",
    "universality": "universality",
    "homog_regimes": "homog_regimes",
    "homog_meet": "homog_meet",
    "homog_logistic": "homog_logistic",
    "homog_simplex": "homog_simplex",
    "homog_limits": "homog_limits",
    "homog_rate": "homog_rate",
    "homog_noise": "homog_noise",
    "homog_scaling": "homog_scaling",
    "homog_laws": "homog_laws",
}

from .._validation import SCALE_NAMES  # noqa: E402  (re-exported)
from .base import load_committed, obtain  # noqa: E402,F401  (what the notebooks use)


def available() -> dict[str, object]:
    """Return ``{id: module}`` for every figure module that is implemented."""
    found = {}
    for fig_id, name in REGISTRY.items():
        try:
            found[fig_id] = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
    return found


def get(fig_id: str):
    """Return the module of figure ``fig_id`` or raise a ValueError listing the ids."""
    figures = available()
    if fig_id not in figures:
        raise ValueError(f"figure id must be one of {', '.join(figures)}; got {fig_id!r}")
    return figures[fig_id]


def knobs(fig_id: str, scale: str) -> dict:
    """Every knob of figure ``fig_id`` at ``scale`` with its value: what ``--set`` accepts.

    A module may define ``KNOBS`` (defaults of knobs that no scale sets); the scale's
    values take precedence.
    """
    from .._validation import check_choice

    check_choice("scale", scale, SCALE_NAMES)
    module = get(fig_id)
    return {**getattr(module, "KNOBS", {}), **module.SCALES[scale]}


def parse_settings(settings, defaults: dict) -> dict:
    """``["key=value", ...]`` typed after ``defaults`` (see :func:`.base.parse_knob`)."""
    from .base import parse_settings as _parse

    return _parse(settings, defaults)


def save_figure(fig, out_dir, fig_id: str) -> list[Path]:
    """Write ``fig`` as ``ID.png`` (raster) and ``ID.svg`` (vector) in ``out_dir``."""
    from ..io import atomic_path

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext, kwargs in (("png", {"dpi": 150}), ("svg", {})):
        path = out_dir / f"{fig_id}.{ext}"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=ext, bbox_inches="tight", **kwargs)
        paths.append(path)
    return paths


def reproduce(fig_id: str, scale: str = "quick", out="out", *, scheduler=None,
              cache_dir=None, progress=True, **overrides):
    """Compute figure ``fig_id`` at ``scale``, then write ``ID.nc``, ``ID.png`` and ``ID.svg``.

    Returns the dataset.  ``scheduler`` is a Dask scheduler address (or ``None``
    for a local cluster); ``cache_dir`` holds finished sweep cells so that a
    killed run resumes.  ``compute`` checks the scale and the knobs before anything is
    computed or written.  The file's ``load_average_start`` and ``load_average_end`` are
    those of this whole call (a sweep's own describe that sweep alone); a dataset that
    records no ``wall_time_s`` of its own (a figure without a sweep) gets the compute's.
    """
    import time

    from ..io import load_average, write_netcdf
    from ..style import use_style

    module = get(fig_id)
    load_start = load_average()
    start = time.perf_counter()
    ds = module.compute(scale, scheduler=scheduler, cache_dir=cache_dir, progress=progress,
                        **overrides)
    elapsed = time.perf_counter() - start
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if ds is not None:
        ds.attrs["overrides"] = "; ".join(f"{k}={v!r}" for k, v in overrides.items()) or "none"
        ds.attrs.setdefault("wall_time_s", elapsed)
        for key, value in (("load_average_start", load_start),
                           ("load_average_end", load_average())):
            if value is not None:
                ds.attrs[key] = value
        write_netcdf(ds, out / f"{fig_id}.nc")
    use_style()
    fig = module.plot(ds)
    save_figure(fig, out, fig_id)
    return ds
