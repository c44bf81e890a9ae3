"""The clock t = d tau of homog_logistic and homog_simplex: schedule, depth refinement,
lower panel, table and units of work.  The step on that clock is ``t_max / n_layers``
whatever d; the refinement reruns one cell with :data:`REFINE_FACTOR` times the layers and
extrapolates to first order in the step: the part of the gap that is the step.
"""

from __future__ import annotations

import numpy as np

from ...stats import log_log_slope
from ...style import palette
from ..knobs import integer, real, reals
from ..words import markdown_table, signed

#: The refinement multiplies the number of layers by this factor.
REFINE_FACTOR = 4


def schedule(d, t_max, n_layers, n_times):
    """(T, L, record times) of a cell: T = t_max / d, T * L = n_layers, times on layers."""
    T = t_max / d
    L_float = n_layers / T
    L = int(round(L_float))
    if abs(L - L_float) > 1e-9 * L_float:
        raise ValueError(f"n_layers * d / t_max must be a whole number (layers per unit time); "
                         f"got n_layers={n_layers}, d={d}, t_max={t_max}")
    if n_layers % (n_times - 1):
        raise ValueError(f"n_times - 1 must divide n_layers; got n_times={n_times}, "
                         f"n_layers={n_layers}")
    layers = np.arange(n_times) * (n_layers // (n_times - 1))
    return T, L, layers / L


def on_schedule(name, dims, knobs):
    """Knob check: every dimension gives a :func:`schedule` with t_max, n_layers, n_times."""
    for d in dims:
        schedule(d, knobs["t_max"], knobs["n_layers"], knobs["n_times"])
    return dims


#: The knobs of the clock t beyond the shared ones: b = beta sqrt(d) in [0, 20], the horizon,
#: the layers, and two trajectories at least (a standard error).  Each figure adds its d last
#: (:func:`on_schedule` reads these).
CLOCK_SCHEMA = {"bs": reals(0.0, 20.0), "t_max": real(0.0, strict_min=True),
                "n_layers": integer(1), "n_tokens": integer(2), "n_traj": integer(2)}


def clock_sweeps(sweeps, knobs, fixed, outputs, refine_b):
    """``(ds, refine)``: the (d, b) sweep on the clock t (``fixed``: the cells' fixed knobs,
    ``outputs``: their outputs over t) and its refinement, the cell at the largest d and
    ``refine_b`` with n_layers and REFINE_FACTOR times as many (sweep ``ID-scale-refine``)."""
    t = np.linspace(0.0, knobs["t_max"], knobs["n_times"])
    layout = dict(output_dims={k: ("t",) for k in outputs}, output_coords={"t": t},
                  seed=knobs["seed"])
    ds = sweeps({"d": list(knobs["d"]), "b": list(knobs["bs"])}, fixed=fixed, **layout)
    at = dict(fixed, d=max(knobs["d"]), b=refine_b)
    n_layers = at.pop("n_layers")
    refine = sweeps({"n_layers": [n_layers, REFINE_FACTOR * n_layers]}, part="refine",
                    fixed=at, **layout)
    return ds, refine


def with_refinement(ds, refine, gaps):
    """``ds`` with the refinement's largest gaps (one per depth, over ``refine_layers``), its
    cell (``refine_d``, ``refine_b``) and its compute time."""
    ds = ds.assign_coords(refine_layers=refine.n_layers.values)
    ds["refine_max_abs_gap"] = (("refine_layers",), gaps)
    ds.attrs.update(refine_d=int(refine.attrs["fixed_d"]), refine_b=float(refine.attrs["fixed_b"]),
                    refine_cell_time_s=float(refine.attrs.get("cell_time_s", 0.0)))
    return ds


def extrapolated(gaps):
    """The gap at infinitely many layers from (coarse, fine), first order in the step."""
    return (REFINE_FACTOR * gaps[1] - gaps[0]) / (REFINE_FACTOR - 1)


def decay_exponent(d, values) -> float:
    """Unweighted least-squares slope of log ``values`` against log ``d``; nan below 2 points."""
    return log_log_slope(d, values)[0] if np.size(values) >= 2 else float("nan")


def refinement_summary(ds) -> dict:
    """The ``refine`` entry of both summaries: the cell, its gaps and the step's share."""
    g = ds.refine_max_abs_gap.values
    ext = extrapolated(g)
    return {"d": int(ds.attrs["refine_d"]), "b": float(ds.attrs["refine_b"]),
            "n_layers": [int(v) for v in ds.refine_layers.values],
            "max_abs_gap": [float(v) for v in g], "extrapolated_gap": float(ext),
            "discretisation_share": float(1 - ext / g[0])}


def gap_panel(ax, ds, label, ylabel, title):
    """The lower panel of both figures: the largest gap against d for each b (``label``
    formats b), the refined point (square) and its extrapolation (star), log-log axes with
    ticks at the simulated d."""
    import matplotlib.pyplot as plt

    colours = palette(ds.sizes["b"])
    for colour, b in zip(colours, ds.b.values):
        ax.plot(ds.d, ds.max_abs_gap.sel(b=b), "o-", ms=4, color=colour, label=label.format(b))
    colour = colours[list(ds.b.values).index(ds.attrs["refine_b"])]
    g, layers, d = ds.refine_max_abs_gap.values, ds.refine_layers.values, ds.attrs["refine_d"]
    ax.plot([d], [g[1]], "s", mfc="white", color=colour,
            label=f"{int(layers[1])} layers instead of {int(layers[0])}")
    ax.plot([d], [max(extrapolated(g), 1e-4)], "*", ms=9, color=colour,
            label="extrapolated to infinite depth")
    dims = ds.d.values.astype(float)
    ax.set(xscale="log", yscale="log", xlabel="d", ylabel=ylabel, title=title)
    ax.set_xticks(dims, [str(int(v)) for v in dims])
    ax.xaxis.set_minor_locator(plt.NullLocator())


def gap_table(stats, head, slope, verdict=None) -> str:
    """The largest gap per (b, d) and its exponent in d (``stats[slope][b]``), with a column
    ``verdict(b)`` if given, as Markdown; the first column, b, is headed ``head``."""
    rows = [[f"{b:g}", *(f"{g:.3f}" for g in stats["max_abs_gap"][b]), signed(stats[slope][b]),
             *([verdict(b)] if verdict else [])] for b in stats["b"]]
    return markdown_table([head, *(f"d = {d}" for d in stats["d"]), "exponent in d"]
                          + (["verdict"] if verdict else []), rows)


def work(knobs) -> float:
    """Token-dimension-trajectory-layers scheduled: the (d, b) grid plus the refinement
    (one cell at the largest d with 1 + REFINE_FACTOR times the layers)."""
    per_d = knobs["n_traj"] * knobs["n_layers"] * knobs["n_tokens"]
    return float(per_d * sum(knobs["d"]) * len(knobs["bs"])
                 + per_d * (1 + REFINE_FACTOR) * max(knobs["d"]))
