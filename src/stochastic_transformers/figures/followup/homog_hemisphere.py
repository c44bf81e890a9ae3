r"""The logistic law from a start in a hemisphere (the follow-up's Theorem 3 in its own regime).

The follow-up files Theorem 3 under the data regime "hemisphere".  :mod:`.homog_logistic`
starts its tokens uniform, which at large d is close to a simplex of overlap 0; here all
trajectories start from one fixed configuration in the open hemisphere
:math:`\{x_1 > 0\}` that tends to no simplex as d grows
(:func:`~stochastic_transformers.random_attention.homogenized.hemisphere_tokens`: heights
:math:`h_i = (i-\frac12)/N`, overlaps tending to the unequal :math:`h_ih_j`), so the mean
overlap starts near 1/3 rather than 1/N.  Same model, clock, cell and verdict as :mod:`.homog_logistic`: the
largest distance between the mean of m(t) and the logistic curve from m(0) should fall like
1/d (our derivation of the clock assumes nothing about the start).
"""

from __future__ import annotations

import numpy as np

from ...random_attention.homogenized import hemisphere_tokens
from ..spec import Figure
from . import homog_logistic
from .homog_logistic import cell, measured_work, phrases, plot, run, table, work  # noqa: F401

SCALES = {scale: dict(knobs, start="hemisphere")
          for scale, knobs in homog_logistic.SCALES.items()}
#: Seconds of simulation per token-dimension-trajectory-layer, measured on the committed
#: paper run (676 s of cell time with its refinement, the cores shared with another run).
SECONDS_PER_WORK = 3.26e-8


def summary(ds) -> dict:
    """:func:`.homog_logistic.summary` of a hemisphere-start run (no floor at fixed b: its
    Monte Carlo assumes the uniform start), with the start's pairwise overlaps at the
    smallest and the largest d (``start_overlaps``: ``{d: (min, max)}``)."""
    out = homog_logistic.summary(ds)
    out["start_overlaps"] = {}
    for d in (out["d_min"], out["d_max"]):
        gram = (x := hemisphere_tokens(out["n_tokens"], d)) @ x.T
        off = gram[~np.eye(len(x), dtype=bool)]
        out["start_overlaps"][d] = (float(off.min()), float(off.max()))
    return out


FIGURE = Figure.declared(
    globals(), "homog_hemisphere", source="followup",
    description="the logistic law of the follow-up's Theorem 3 from a fixed start in a "
                "hemisphere, d = 8..128",
    schema=homog_logistic.FIGURE.schema)
compute, cost = FIGURE.compute, FIGURE.cost
