"""The logistic law from a hemisphere start (figures.followup.homog_hemisphere) and the start
itself (random_attention.homogenized.hemisphere_tokens)."""

from __future__ import annotations

import numpy as np
import pytest

from stochastic_transformers.figures import homog_hemisphere, homog_logistic
from stochastic_transformers.random_attention.homogenized import hemisphere_tokens


def test_the_start_is_in_the_hemisphere_and_tends_to_the_products_of_heights():
    h = (np.arange(1, 9) - 0.5) / 8
    off = ~np.eye(8, dtype=bool)
    for d in (8, 128, 8192):
        x = hemisphere_tokens(8, d)
        np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(x[:, 0], h)
        np.testing.assert_array_equal(x, hemisphere_tokens(8, d))       # one per (N, d)
    gap = np.abs((x @ x.T - np.outer(h, h))[off]).max()
    assert gap < 5 / np.sqrt(8192)                   # fluctuations of order d^-1/2


def test_the_uniform_start_keeps_its_bits_and_the_start_knob_is_checked():
    a = homog_logistic.cell(d=8, b=0.5, n_tokens=8, n_traj=20, t_max=1.0, n_layers=16,
                            n_times=3, seed=3)
    b = homog_logistic.cell(d=8, b=0.5, n_tokens=8, n_traj=20, t_max=1.0, n_layers=16,
                            n_times=3, seed=3, start="uniform")
    c = homog_logistic.cell(d=8, b=0.5, n_tokens=8, n_traj=20, t_max=1.0, n_layers=16,
                            n_times=3, seed=3, start="hemisphere")
    np.testing.assert_array_equal(a["m_mean"], b["m_mean"])
    assert c["m_mean"][0] > a["m_mean"][0] + 0.1
    with pytest.raises(ValueError, match="start"):
        homog_hemisphere.compute("smoke", start="cap", progress=False)


def test_the_hemisphere_summary_has_no_uniform_floor_and_reports_the_start():
    ds = homog_hemisphere.compute("smoke", progress=False)
    s = homog_hemisphere.summary(ds)
    assert s["start"] == "hemisphere" and s["floor"] == {}
    assert s["m0"] > 0.25
    lo, hi = s["start_overlaps"][s["d_max"]]
    assert lo < hi
    assert homog_hemisphere.phrases(s)["verdict"].startswith("**")
