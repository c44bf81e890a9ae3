r"""Two clusters, exactly: is a cell's miss the discretisation?  Rerun it at finer steps.

The limit predictions of :mod:`.clusters` neglect the discretisation of the chain, whose step
:math:`|A|\sigma\sqrt{d/L}` grows like :math:`e^\beta` with unnormalised attention.  Where the
persistence verdict of an attention fails, the page reruns the farthest cell at 1, 4 and 16
times its layers per unit time: a distance that falls within :data:`.clusters.PERSIST_Z_MAX`
at the finest step belongs to the discretisation, not to the reduction.
"""

from __future__ import annotations

import numpy as np

from ... import two_clusters
from ...stats import binomial_z
from .clusters import PERSIST_Z_MAX, cell, parse_split


def worst_cell(ds, attention):
    """``(split, beta, max |z|, time)`` of the cell of ``attention`` farthest from the
    prediction, and the recorded time where it is farthest (the first such in grid order);
    None if no time is informative."""
    z = np.abs(ds.persist_z.sel(attention=attention).transpose("split", "beta_index", "time"))
    if not np.any(np.isfinite(z.values)):
        return None
    isp, ib, k = np.unravel_index(int(np.nanargmax(z.values)), z.shape)
    return (str(ds.split.values[isp]), float(ds.beta.sel(attention=attention).values[isp, ib]),
            float(z.values[isp, ib, k]), float(ds.time.values[k]))


def refinement_check(ds, attention, split, beta, t_check, *, factors=(1, 4, 16)):
    """Rerun one cell up to ``t_check`` at ``L * factor`` layers per unit time.

    Returns ``{L: max |z|}`` over the recorded times up to ``t_check`` (the same grid,
    trajectory count and start as ``ds``; another seed for each L).
    """
    d, tol, n_traj = int(ds.attrs["fixed_d"]), float(ds.attrs["fixed_tol"]), int(ds.n_traj.max())
    v0 = float(ds.attrs["fixed_one_plus_z0"])
    times = ds.time.values[ds.time.values <= t_check + 1e-12]
    pred, _ = two_clusters.antipodal_persistence(times, np.array([v0]), beta, d,
                                                 *parse_split(split), attention=attention, tol=tol)
    out = {}
    for factor in factors:
        L = int(ds.attrs["fixed_L"]) * int(factor)
        # the figure's own cell at the finer step: the same chain, split and start
        counts = cell(split=split, attention=attention, beta_index=0, betas_softmax=(beta,),
                      betas_unnormalized=(beta,), n_traj=n_traj, L=L, T=float(times[-1]),
                      times=times, one_plus_z0=v0, d=d, tol=tol,
                      seed=int(ds.attrs.get("sweep_seed", 0)) + factor)["n_antipodal"]
        z = np.abs(binomial_z(counts, n_traj, pred[:, 0]))
        out[L] = float(np.nanmax(z)) if np.any(np.isfinite(z)) else float("nan")
    return out


def explain_worst(ds, attention) -> dict:
    """The farthest cell of ``attention`` and its :func:`refinement_check`, rerun to the
    first recorded time at or after both the worst miss and t = 1; ``explained``: the check
    puts the cell within :data:`.clusters.PERSIST_Z_MAX` at its finest step."""
    split, beta, z, t_worst = worst_cell(ds, attention)
    t_check = float(ds.time.values[ds.time.values >= max(t_worst, 1.0)][0])
    check = refinement_check(ds, attention, split, beta, t_check)
    return {"split": split, "beta": beta, "z": z, "t_worst": t_worst, "t_check": t_check,
            "check": check, "explained": bool(list(check.values())[-1] <= PERSIST_Z_MAX)}


def refine_misses(ds, stats) -> dict:
    """``{attention: explain_worst(ds, attention)}`` for every attention whose persistence
    verdict fails (a simulation of one cell per such attention)."""
    return {att: explain_worst(ds, att)
            for att, ok in stats["persist_agree_by_attention"].items() if not ok}


def refinement_text(misses) -> str:
    """The page's sentences (Markdown) on the reruns of :func:`refine_misses`."""
    return " ".join(
        f"With {att} attention the farthest cell is {m['split'].replace(',', ' vs ')} at "
        f"$\\beta$ = {m['beta']:g} (|z| = {m['z']:.1f} at $t$ = {m['t_worst']:g}). Rerun to "
        f"$t$ = {m['t_check']:g} with finer steps (another seed each), its largest |z| is "
        + ", ".join(f"{v:.1f} at $L$ = {L:,}" for L, v in m["check"].items()) + "."
        for att, m in misses.items()) or "Every cell is within our bound of the limit."
