"""The clock t = d tau of the figures homog_logistic and homog_simplex: their schedule of
layers, their depth refinement and the units of work they share.

Both run N tokens for ``n_layers`` layers up to ``t_max`` on the clock t = d tau, so the step
on that clock is ``t_max / n_layers`` whatever d; both measure how much of their gap to the
limit law is that step, by rerunning one cell with :data:`REFINE_FACTOR` times the layers and
extrapolating to first order in the step.
"""

from __future__ import annotations

import numpy as np

from ..knobs import integer, real, reals
from ..words import signed

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
    """Relation check of a knob of dimensions: every one gives a schedule (:func:`schedule`)
    with the knobs t_max, n_layers and n_times, before any compute."""
    for d in dims:
        schedule(d, knobs["t_max"], knobs["n_layers"], knobs["n_times"])
    return dims


#: The knobs both figures on the clock t share, beyond the shared ones
#: (:data:`..knobs.KNOB_CHECKS`): b = beta sqrt(d) in [0, 20], the clock's horizon and
#: layers, and at least two trajectories (a standard error).  Each figure adds its d (last:
#: :func:`on_schedule` reads these) and its other knobs.
CLOCK_SCHEMA = {
    "bs": reals(0.0, 20.0),
    "t_max": real(0.0, strict_min=True),
    "n_layers": integer(1),
    "n_tokens": integer(2),
    "n_traj": integer(2),
}


def clock_sweeps(sweeps, knobs, fixed, outputs, refine_b):
    """The (d, b) sweep on the clock t, and its depth refinement.

    The refinement reruns the cell at the largest d and ``refine_b`` with ``n_layers`` and
    :data:`REFINE_FACTOR` times as many (sweep ``ID-scale-refine``): the part of the gap that
    is the discretisation, since the step on the clock t is ``t_max / n_layers`` whatever d.
    ``fixed`` are the cells' fixed knobs, ``outputs`` their outputs over t.  Returns
    ``(ds, refine)``.
    """
    t = np.linspace(0.0, knobs["t_max"], knobs["n_times"])
    layout = dict(output_dims={k: ("t",) for k in outputs}, output_coords={"t": t},
                  seed=knobs["seed"])
    ds = sweeps({"d": list(knobs["d"]), "b": list(knobs["bs"])}, fixed=fixed, **layout)
    n_layers = knobs["n_layers"]
    at = {k: v for k, v in dict(fixed, d=max(knobs["d"]), b=refine_b).items()
          if k != "n_layers"}
    refine = sweeps({"n_layers": [n_layers, REFINE_FACTOR * n_layers]}, part="refine",
                    fixed=at, **layout)
    return ds, refine


def with_refinement(ds, refine, gaps):
    """``ds`` with the refinement's largest gaps ``gaps`` (one per depth) over the coordinate
    ``refine_layers``, and its cell (``refine_d``, ``refine_b``) and compute time as attributes."""
    ds = ds.assign_coords(refine_layers=refine.n_layers.values)
    ds["refine_max_abs_gap"] = (("refine_layers",), gaps)
    ds.attrs.update(refine_d=int(refine.attrs["fixed_d"]), refine_b=float(refine.attrs["fixed_b"]),
                    refine_cell_time_s=float(refine.attrs.get("cell_time_s", 0.0)))
    return ds


def extrapolated(gaps):
    """The gap at infinitely many layers from (coarse, fine), first order in the step."""
    f = REFINE_FACTOR
    return (f * gaps[1] - gaps[0]) / (f - 1)


def decay_exponent(d, values) -> float:
    """Least-squares slope of log ``values`` against log ``d`` (unweighted, by
    :func:`numpy.polyfit`); nan with fewer than two points."""
    values = np.asarray(values)
    if values.size < 2:
        return float("nan")
    return float(np.polyfit(np.log(np.asarray(d, dtype=float)), np.log(values), 1)[0])


def refinement_summary(ds) -> dict:
    """The ``refine`` entry of both summaries: the cell, its gaps and the step's share."""
    g = ds.refine_max_abs_gap.values
    ext = extrapolated(g)
    return {"d": int(ds.attrs["refine_d"]), "b": float(ds.attrs["refine_b"]),
            "n_layers": [int(v) for v in ds.refine_layers.values],
            "max_abs_gap": [float(v) for v in g], "extrapolated_gap": float(ext),
            "discretisation_share": float(1 - ext / g[0])}


def plot_refinement(ax, ds, colour):
    """The refined point (open square) and its extrapolation (star) at the refined d."""
    g = ds.refine_max_abs_gap.values
    d = ds.attrs["refine_d"]
    ax.plot([d], [g[1]], "s", mfc="white", color=colour,
            label=f"{int(ds.refine_layers.values[1])} layers instead of "
                  f"{int(ds.refine_layers.values[0])}")
    ax.plot([d], [max(extrapolated(g), 1e-4)], "*", ms=9, color=colour,
            label="extrapolated to infinite depth")


def label_gap_axes(ax, ds, *, ylabel, title):
    """The right-hand panel of both figures, the largest gap against d: log-log axes with
    ticks at the simulated d only, and the legend."""
    import matplotlib.pyplot as plt

    d = ds.d.values.astype(float)
    ax.set(xscale="log", yscale="log", xlabel="d", ylabel=ylabel, title=title)
    ax.set_xticks(d, [str(int(v)) for v in d])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.legend()


def gap_table(stats, head, slope, verdict=None) -> str:
    """The largest gap per (b, d) and its exponent in d (``stats[slope][b]``), with a column
    ``verdict(b)`` if given, as a Markdown table whose first column, b, is headed ``head``."""
    extra = 1 if verdict else 0
    rows = [f"| {head} | " + " | ".join(f"d = {d}" for d in stats["d"]) + " | exponent in d |"
            + " verdict |" * extra, "|---" * (len(stats["d"]) + 2 + extra) + "|"]
    rows += [f"| {b:g} | " + " | ".join(f"{g:.3f}" for g in stats["max_abs_gap"][b])
             + f" | {signed(stats[slope][b])} |" + (f" {verdict(b)} |" if verdict else "")
             for b in stats["b"]]
    return "\n".join(rows)


def work(knobs) -> float:
    """Token-dimension-trajectory-layers scheduled: the (d, b) grid plus the refinement
    (one cell at the largest d with 1 + REFINE_FACTOR times the layers)."""
    main = knobs["n_traj"] * knobs["n_layers"] * knobs["n_tokens"] * sum(knobs["d"]) * len(knobs["bs"])
    refine = (knobs["n_traj"] * knobs["n_layers"] * (1 + REFINE_FACTOR) * knobs["n_tokens"]
              * max(knobs["d"]))
    return float(main + refine)


def measured_work(ds):
    """(seconds of simulation, work) of a computed dataset, the refinement included."""
    knobs = {"n_traj": int(ds.n_traj.max()), "n_layers": int(ds.attrs["fixed_n_layers"]),
             "n_tokens": int(ds.attrs["fixed_n_tokens"]), "d": [int(v) for v in ds.d.values],
             "bs": list(ds.b.values)}
    return float(ds.attrs["cell_time_s"]) + float(ds.attrs["refine_cell_time_s"]), work(knobs)
