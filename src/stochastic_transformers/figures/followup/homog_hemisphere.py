r"""The logistic law from a start in a hemisphere (the follow-up's Theorem 3 in its own regime).

The follow-up files Theorem 3 under the data regime "hemisphere".  :mod:`.homog_logistic`
starts its tokens uniform, which at large d is close to a simplex of overlap 0; here all
trajectories start from one fixed configuration in the open hemisphere
:math:`\{x_1 > 0\}` that is no simplex
(:func:`~stochastic_transformers.random_attention.homogenized.hemisphere_tokens`: heights
:math:`h_i = (i-\frac12)/N`, overlaps the unequal and positive :math:`h_ih_j` at every d), so
the mean overlap starts at 0.334 rather than 1/N.  Same model, clock, cell and verdict as :mod:`.homog_logistic`: the
largest distance between the mean of m(t) and the logistic curve from m(0) should fall like
1/d (our derivation of the clock assumes nothing about the start).
"""

from __future__ import annotations

import numpy as np

from ...random_attention.homogenized import hemisphere_tokens
from ..spec import Figure
from . import homog_logistic
from .homog_logistic import cell, phrases, plot, run, table, work  # noqa: F401

#: The uniform page's scales from d = 16 (the start needs d > N), with the d and b the page
#: quotes at every scale.
SCALES = {scale: dict(knobs, start="hemisphere", d=(16, 32, 64, 128), bs=(0.0, 0.5, 1.0))
          for scale, knobs in homog_logistic.SCALES.items()}
#: Seconds of simulation per token-dimension-trajectory-layer, measured on the committed
#: paper run (cell time with its refinement, the cores shared with another run).
SECONDS_PER_WORK = 5.54e-8


def summary(ds) -> dict:
    """:func:`.homog_logistic.summary` of a hemisphere-start run (no floor at fixed b: its
    Monte Carlo assumes the uniform start), with the start's smallest and largest overlap
    (``start_overlaps``); ``excess`` and ``excess_se``: per b > 0 and d, the largest distance
    less the one at the first b, with its standard error (the cells are independent), and
    ``excess_ratio``: at the largest d, the largest b's excess over the next one's."""
    if ds.attrs.get("fixed_start") != "hemisphere":
        raise ValueError("homog_hemisphere summarises runs from the hemisphere start")
    out = homog_logistic.summary(ds)
    h = (np.arange(1, out["n_tokens"] + 1) - 0.5) / out["n_tokens"]
    out["start_overlaps"] = (float(h[0] * h[1]), float(h[-2] * h[-1]))
    gap, se = (ds[v].transpose("b", "d", "t").values for v in ("gap_mean", "gap_se"))
    at = np.abs(gap).argmax(axis=-1)                                 # (b, d)
    largest = np.take_along_axis(np.abs(gap), at[..., None], -1)[..., 0]
    its_se = np.take_along_axis(se, at[..., None], -1)[..., 0]
    higher = list(enumerate(out["b"][1:], 1))
    out["excess"] = {b: (largest[i] - largest[0]).tolist() for i, b in higher}
    out["excess_se"] = {b: np.hypot(its_se[i], its_se[0]).tolist() for i, b in higher}
    if len(higher) > 1:
        out["excess_ratio"] = out["excess"][higher[-1][1]][-1] / out["excess"][higher[-2][1]][-1]
    return out


FIGURE = Figure.declared(
    globals(), "homog_hemisphere", source="followup",
    description="the logistic law of the follow-up's Theorem 3 from a fixed start in a "
                "hemisphere, d = 16..128",
    schema=homog_logistic.FIGURE.schema)
compute, cost = FIGURE.compute, FIGURE.cost
