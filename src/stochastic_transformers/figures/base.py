"""Helpers the figure modules share: time grids, sweep cells, outcome fractions, the last
step of a plot, the knobs a dataset records, and the committed results.

What every figure does the same way (checking knobs, running sweeps, projecting costs,
showing a committed result) is not here but in :class:`.spec.Figure`; the knob checks are
in :mod:`.knobs`.
"""

from __future__ import annotations

import math
from pathlib import Path

from .._validation import check_int, check_real, check_whole_layers

__all__ = [
    "log_time_grid", "on_time_axis", "cell_threads", "trajectory_layer_work",
    "add_outcome_fractions", "laid_out", "sweep_seconds", "trajectory_layers", "knob_attr",
    "repo_root", "committed_result", "load_committed",
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


# ----------------------------------------------------------------------------- sweeps
def cell_threads():
    """Threads one simulation may use: 1 inside a Dask worker (the workers already fill
    the cores), numba's default otherwise.  Results never depend on it."""
    try:
        from distributed import get_worker

        get_worker()
        return 1
    except (ImportError, ValueError):
        return None


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


def laid_out(fig, title=None, **layout):
    """The last step of every figure's ``plot``: the title ``title`` (if any) over the whole
    figure, then a tight layout (``layout`` goes to ``fig.tight_layout``); returns ``fig``."""
    if title is not None:
        fig.suptitle(title)
    fig.tight_layout(**layout)
    return fig


# ----------------------------------------------------------------------------- costs
def sweep_seconds(ds) -> float:
    """Summed compute time of a sweep dataset's cells (its ``cell_time_s`` attribute), and of
    its refinement sweep's (``refine_cell_time_s``) where it has one."""
    return float(ds.attrs["cell_time_s"]) + float(ds.attrs.get("refine_cell_time_s", 0.0))


def trajectory_layers(ds) -> float:
    """Trajectory-layers a sweep dataset's cells ran: the summed ``n_traj`` times the
    layers ``L * T`` every trajectory runs (the sweep's fixed ``L`` and ``T``)."""
    return float(ds.n_traj.sum()) * int(knob_attr(ds, "L")) * float(knob_attr(ds, "T"))


# ----------------------------------------------------------------------------- datasets
_MISSING = object()


def knob_attr(ds, name: str, default=_MISSING):
    """The value of knob ``name`` recorded in a figure dataset's attributes.

    A knob a sweep held fixed is the attribute ``fixed_<name>`` that
    :func:`stochastic_transformers.sweep.run_sweep` writes; older datasets (universality,
    fig9, thm1) are read through the plain name.  Without either, return ``default`` or
    raise a KeyError naming both.
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
