"""Helpers shared by the figure modules: scales, schedulers, committed results."""

from __future__ import annotations

from pathlib import Path

from .._validation import check_choice, check_int, check_real

SCALE_NAMES = ("smoke", "quick", "paper")


def resolve_scale(scales: dict, scale: str, overrides: dict) -> dict:
    """The knobs of ``scale`` with ``overrides`` applied; unknown knobs raise a ValueError."""
    check_choice("scale", scale, SCALE_NAMES)
    knobs = dict(scales[scale])
    unknown = sorted(set(overrides) - set(knobs))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; this figure takes "
                         f"{', '.join(sorted(knobs))}")
    knobs.update({k: v for k, v in overrides.items() if v is not None})
    return knobs


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
    layers = out["T"] * out["L"]
    if abs(layers - round(layers)) > 1e-9 * max(1.0, layers):
        raise ValueError(f"T * L must be a whole number of layers; got T={out['T']}, L={out['L']}")
    out["d"] = check_int("d", knobs["d"], 2)
    out["attention"] = check_choice("attention", knobs["attention"], ("softmax", "unnormalized"))
    out["tol"] = check_real("tol", knobs["tol"], 0.0, 1.0, strict_min=True)
    out["seed"] = check_int("seed", knobs["seed"], 0)
    return out
