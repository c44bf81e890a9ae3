"""The homog_* figure modules: their verdicts can fail, and the committed paper-scale results
pass them (the numbers the chapter quotes)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import xarray as xr

from stochastic_transformers.figures import (homog_logistic, homog_meet, homog_regimes,
                                             homog_scaling, homog_simplex)
from stochastic_transformers.figures.base import load_committed
from stochastic_transformers.figures.followup.clock import decay_exponent
from stochastic_transformers.figures.words import listed, signed
from stochastic_transformers.stats import log_log_slope


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    cache = tmp_path_factory.mktemp("homog")
    return {m.FIGURE.id: m.compute("smoke", progress=False, cache_dir=cache)
            for m in (homog_regimes, homog_meet, homog_logistic, homog_simplex)}


def test_regimes_frozen_verdict_fails_when_the_displacement_does_not_fall(smoke):
    ds = smoke["homog_regimes"].copy(deep=True)
    assert "frozen" in homog_regimes.summary(ds)["verdicts"][1]
    g = float(ds.gamma.max())
    # make the deepest cells of the largest gamma move as much as the shallowest
    sel = dict(gamma=g)
    flat = ds.msd.sel(**sel).isel(L=0)
    ds["msd"].loc[sel] = flat.broadcast_like(ds.msd.sel(**sel))
    ds["eta"].loc[sel] = 0.0   # score them all
    assert not homog_regimes.summary(ds)["verdicts"][1]["frozen"]["holds"]


def test_regimes_cells_follow_the_clock(smoke):
    ds = smoke["homog_regimes"]
    expected = (ds.L.astype(float) ** (1 - 2 * ds.gamma) / ds.n_heads).transpose(*ds.tau.dims)
    np.testing.assert_allclose(ds.tau.values, expected.values)


def test_meet_refinement_verdict_fails_when_the_gap_does_not_close(smoke):
    ds = smoke["homog_meet"].copy(deep=True)
    p = float(ds.attrs["refine_p_theory"])
    n = ds.refine_n_traj.values
    far = np.round(np.clip(p - 0.3, 0, 1) * n)      # 30 points below the limit at every depth
    ds["refine_n_antipodal"] = (("refine_L",), far.astype(int))
    from stochastic_transformers.stats import agreement_z
    ds["refine_z"] = agreement_z(ds.refine_n_antipodal, ds.refine_n_traj,
                                 xr.full_like(ds.refine_n_antipodal, p, dtype=float))
    assert not homog_meet.summary(ds)["discretisation_explains"]


def test_logistic_rate_verdict_fails_for_a_gap_that_does_not_decay(smoke):
    ds = smoke["homog_logistic"].copy(deep=True)
    ds["max_abs_gap"] = ds.max_abs_gap * 0 + 0.1
    out = homog_logistic.summary(ds)
    assert not any(out["rate_verdict"].values())


def test_simplex_slowing_verdict_fails_when_gamma_grows_with_b(smoke):
    ds = smoke["homog_simplex"].copy(deep=True)
    ds["gamma_mean"] = ds.gamma_mean + 0.1 * ds.b
    assert not homog_simplex.summary(ds)["slows_with_b"]


def test_decay_exponent_is_the_least_squares_slope():
    d = np.array([8.0, 16.0, 32.0, 64.0])
    assert decay_exponent(d, 0.3 / d) == pytest.approx(-1.0, abs=1e-12)
    noisy = 0.3 / d * np.array([1.1, 0.9, 1.05, 0.97])
    assert decay_exponent(d, noisy) == pytest.approx(log_log_slope(d, noisy)[0], abs=1e-12)
    assert math.isnan(decay_exponent([8.0], [0.1]))


def test_prose_lists_numbers_and_signs_them_without_minus_zero():
    assert listed([8, 16, 32], "d") == "8, 16 and 32" and listed([0.5], "g") == "0.5"
    assert signed(-0.0004) == "+0.00" and signed(-0.25, 1) == "-0.2" and signed(0.5) == "+0.50"


def test_page_phrases_are_text_at_smoke(smoke):
    """Every page's words are text, open with a verdict, and show no NaN or -0.0."""
    for module in (homog_regimes, homog_meet, homog_logistic, homog_simplex):
        stats = module.summary(smoke[module.FIGURE.id])
        phrases = module.phrases(stats)
        assert all(isinstance(v, str) and v for v in phrases.values())
        assert phrases["verdict"].startswith(("**Reproduced", "**Partly", "**Not"))
        for text in [*phrases.values(), module.table(stats)]:
            assert "nan" not in text.lower() and not re.search(r"-0(\.0+)?(?![\d.])", text)
    assert homog_regimes.table(homog_regimes.summary(smoke["homog_regimes"])).count("\n") > 2


def test_bad_knobs_are_refused_before_compute():
    with pytest.raises(ValueError, match="n_times"):
        homog_logistic.compute("smoke", n_times=8, progress=False)
    with pytest.raises(ValueError, match="gamma0"):
        homog_simplex.compute("smoke", gamma0=1.0, progress=False)
    with pytest.raises(ValueError, match="d"):
        homog_simplex.compute("smoke", d=(4,), progress=False)   # needs d > n_tokens
    with pytest.raises(ValueError, match="refine_Ls"):
        homog_meet.compute("smoke", refine_Ls=(0,), progress=False)


# --------------------------------------------------------------- committed paper results
def _paper(fig_id):
    ds = load_committed(fig_id, "paper")
    if ds is None:
        pytest.fail(f"results/{fig_id}_paper.nc is not committed")
    return ds


def test_paper_regimes():
    s = homog_regimes.summary(_paper("homog_regimes"))
    assert s["all_verdicts_hold"]
    assert s["max_abs_z_msd"] < 4.0 and s["max_abs_z_mean"] < 4.5


def test_paper_meet():
    s = homog_meet.summary(_paper("homog_meet"))
    assert s["agree_fixed"]
    assert s["d4_random_inf_zero"] and s["d4_fixed_inf_positive"]
    assert s["discretisation_explains"]


def test_paper_logistic():
    s = homog_logistic.summary(_paper("homog_logistic"))
    assert all(s["rate_verdict"].values())


def test_paper_simplex():
    s = homog_simplex.summary(_paper("homog_simplex"))
    assert s["slows_with_b"] and s["gap_shrinks_with_d"]


def test_paper_page_words_follow_the_verdicts():
    """The committed results give the book's wording, and the wording turns with its verdict."""
    s = homog_regimes.summary(_paper("homog_regimes"))
    assert homog_regimes.phrases(s)["verdict"].startswith("**Reproduced**:")
    assert homog_regimes.phrases({**s, "scored_on_curve": False})["verdict"].startswith(
        "**Partly reproduced**:")
    assert homog_regimes.phrases(s)["misses"].startswith("The 10 cells with the fewest layers")
    m = homog_meet.summary(_paper("homog_meet"))
    assert homog_meet.phrases(m)["verdict"].startswith("**Reproduced:**")
    assert "does **not** shrink" in homog_meet.phrases(
        {**m, "discretisation_explains": False})["verdict"]
    lg = homog_logistic.summary(_paper("homog_logistic"))
    assert "falls roughly like $1/d$" in homog_logistic.phrases(lg)["verdict"]
    assert "not always on the same side" in homog_logistic.phrases(
        {**lg, "below_logistic": False})["verdict"]
    sx = homog_simplex.summary(_paper("homog_simplex"))
    assert "sharper attention slows the collapse" in homog_simplex.phrases(sx)["verdict"]
    assert "does **not** slow" in homog_simplex.phrases({**sx, "slows_with_b": False})["verdict"]
    sc = homog_scaling.summary(_paper("homog_scaling"))
    words = homog_scaling.words(sc)
    assert sc["mitigated_at_every_d"]["simplex"] and not sc["mitigated_at_every_d"]["hemisphere"]
    assert homog_scaling.phrases(sc)["verdict"].startswith("**Reproduced**")
    assert words["simplex_ratio_last"] == sc["scalings"]["simplex"]["over_logistic"][-1]
