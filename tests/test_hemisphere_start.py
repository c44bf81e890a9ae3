"""The logistic law from a hemisphere start (figures.followup.homog_hemisphere) and the start
itself (random_attention.homogenized.hemisphere_tokens)."""

from __future__ import annotations

import numpy as np
import pytest

from stochastic_transformers.figures import homog_hemisphere, homog_logistic
from stochastic_transformers.random_attention.homogenized import hemisphere_tokens


def test_the_start_has_the_products_of_heights_for_overlaps_at_every_d():
    h = (np.arange(1, 9) - 0.5) / 8
    off = ~np.eye(8, dtype=bool)
    for d in (9, 16, 128):
        x = hemisphere_tokens(8, d)
        np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-12)
        assert np.all(x[:, 0] > 0)                                     # the open hemisphere
        np.testing.assert_allclose((x @ x.T)[off], np.outer(h, h)[off], atol=1e-12)
        # the mean overlap of the docstring, ((sum h)^2 - sum h^2 + N) / N^2
        assert (x @ x.T).mean() == pytest.approx((h.sum()**2 - (h**2).sum() + 8) / 64)
    with pytest.raises(ValueError, match="d must be > n_tokens"):
        hemisphere_tokens(8, 8)


def test_the_uniform_start_keeps_its_bits_and_the_start_knob_is_checked():
    kw = dict(d=16, b=0.5, n_tokens=8, n_traj=20, t_max=1.0, n_layers=16, n_times=3, seed=3)
    a, b = homog_logistic.cell(**kw), homog_logistic.cell(**kw, start="uniform")
    c = homog_logistic.cell(**kw, start="hemisphere")
    np.testing.assert_array_equal(a["m_mean"], b["m_mean"])
    assert c["m_mean"][0] == pytest.approx(0.3335, abs=1e-3)
    with pytest.raises(ValueError, match="start"):
        homog_hemisphere.compute("smoke", start="cap", progress=False)
    with pytest.raises(ValueError, match="> n_tokens"):          # before any compute
        homog_hemisphere.compute("smoke", d=(8, 16), progress=False)


def test_the_hemisphere_summary_has_no_uniform_floor_and_reports_the_start():
    ds = homog_hemisphere.compute("smoke", progress=False)
    s = homog_hemisphere.summary(ds)
    assert s["start"] == "hemisphere" and s["floor"] == {}
    assert s["m0"] == pytest.approx(0.3335, abs=1e-3)
    assert s["start_overlaps"] == pytest.approx((3 / 256, 195 / 256))
    assert set(s["excess"]) == set(s["b"][1:])
    assert homog_hemisphere.phrases(s)["verdict"].startswith("**")
    with pytest.raises(ValueError, match="hemisphere start"):
        homog_hemisphere.summary(homog_logistic.compute("smoke", progress=False))
