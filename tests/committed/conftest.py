"""Fixtures shared by the tests of the committed pages' claims."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr


@pytest.fixture(scope="session")
def universality_dataset():
    """Build a finished universality dataset from hand-made counts: ``n_antipodal`` over
    (law, beta) at betas 0.5, 1 and 2, 1000 trajectories a point, paper-scale knobs; the
    Gaussian chain's ``horizon_counts`` at T, 2T and 4T at beta 0.5 (no horizon check
    without them); the L sweep's ``conv_counts`` per law at L = 5 (default: those at beta 1)."""
    from stochastic_transformers.figures import universality

    def build(n_antipodal, horizon_counts=None, conv_counts=None):
        knobs = dict(universality.SCALES["paper"])
        betas, n, laws = [0.5, 1.0, 2.0], 1000, list(universality.LAWS)
        knobs.update(betas=tuple(betas), convergence_beta=1.0, convergence_Ls=(5,))
        counts = np.asarray(n_antipodal)
        raw = xr.Dataset({"n_antipodal": (("values", "beta"), counts),
                          "n_single": (("values", "beta"), n - counts),
                          "n_unclustered": (("values", "beta"), np.zeros_like(counts)),
                          "n_traj": (("values", "beta"), np.full_like(counts, n)),
                          "elapsed_s": (("values", "beta"), np.ones(counts.shape))},
                         coords={"values": laws, "beta": betas})
        raw.attrs.update({f"fixed_{k}": knobs[k] for k in ("L", "T", "d", "attention", "tol",
                                                           "gaussian_method")})
        conv = counts[:, 1:2] if conv_counts is None else np.asarray(conv_counts)[:, None]
        conv = xr.Dataset({"n_antipodal": (("values", "L"), conv),
                           "n_unclustered": (("values", "L"), np.zeros((3, 1), dtype=int)),
                           "n_traj": (("values", "L"), np.full((3, 1), n)),
                           "elapsed_s": (("values", "L"), np.ones((3, 1)))},
                          coords={"values": laws, "L": [5]})
        horizon = None
        if horizon_counts is not None:
            T = knobs["T"]
            horizon = xr.Dataset(
                {"n_antipodal": (("beta", "horizon"), np.asarray([horizon_counts])),
                 "n_unclustered": (("beta", "horizon"), np.zeros((1, 3), dtype=int)),
                 "n_traj": (("beta",), [n]), "elapsed_s": (("beta",), [1.0])},
                coords={"beta": [0.5], "horizon": [T, 2 * T, 4 * T]})
        ds = universality.finish(raw, knobs, conv=conv, horizon=horizon)
        ds.attrs["scale"] = "paper"   # what Figure.compute records
        return ds

    return build
