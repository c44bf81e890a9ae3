"""The conjecture after Figure 7 at long horizons (figures.paper.persistence_long): the exit
rate, the labels, the verdict's word and the knobs."""

from __future__ import annotations

import numpy as np
import pytest

from stochastic_transformers.figures import persistence_long as pl

TIMES = np.geomspace(1.0, 1e4, 30)


def _survivors(rng, n, rate, start=1.0):
    """Counts on TIMES of n runs with exponential exit times of ``rate``, counted from the same
    runs at every time (the correlation the estimator must respect)."""
    exits = rng.exponential(1.0 / rate, n) + start
    return (exits[None, :] > TIMES[:, None]).sum(axis=1)


def test_the_exit_rate_is_calibrated_on_correlated_counts():
    """400 replicates of 500 runs at rate 4e-4: the estimate's spread matches its Fisher s.e.
    (within 15%) and the nominal 95% interval covers the truth in 90% to 99% of them."""
    rng = np.random.default_rng(0)
    z = 1.959963984540054
    est, half, cover = [], [], 0
    for _ in range(400):
        rate, low, high, _ = pl.tail_rate(TIMES, _survivors(rng, 500, 4e-4), 1e3, z)
        est.append(rate)
        half.append((high - low) / (2 * z))
        cover += low <= 4e-4 <= high
    assert abs(np.std(est) / np.mean(half) - 1) < 0.15
    assert 0.90 <= cover / 400 <= 0.99


def test_labels_follow_the_interval():
    assert pl._label(1e-4, 3e-4, 1e-5) == "metastable"
    assert pl._label(0.0, 2e-6, 1e-5) == "stable on this horizon"
    assert pl._label(0.0, 3e-5, 1e-5) == "undecided"


def test_a_flat_share_is_stable_and_a_falling_one_metastable():
    """A flat count of 131 of 500 (a share that never moves) is stable on this horizon; runs
    leaving at 4e-4 are metastable."""
    z, bound = 2.8, 1e-5
    _, low, high, exits = pl.tail_rate(TIMES, np.full(TIMES.size, 131), 1e3, z)
    assert exits == 0 and pl._label(low, high, bound) == "stable on this horizon"
    counts = _survivors(np.random.default_rng(1), 500, 4e-4)
    assert pl._label(*pl.tail_rate(TIMES, counts, 1e3, z)[1:3], bound) == "metastable"


def test_the_verdict_word_follows_the_numbers_of_tokens():
    rows = [dict(label="metastable")]
    assert pl.verdict_word(dict(by_n={3: [4.0], 4: []}, rows=rows)) == "Disputed"
    assert pl.verdict_word(dict(by_n={3: [4.0], 4: [4.0]}, rows=rows)) == "Not reproduced"
    assert pl.verdict_word(dict(by_n={4: []}, rows=rows)) == "Partly reproduced"
    assert pl.verdict_word(dict(by_n={4: []}, rows=[dict(label="stable")])) == "Reproduced"


def test_bad_knobs_are_named_before_compute():
    with pytest.raises(ValueError, match="splits"):
        pl.compute("smoke", splits=("1,0",), progress=False)
    with pytest.raises(ValueError, match="betas"):
        pl.compute("smoke", betas=(-1.0,), progress=False)


def test_uniform_starts_of_three_and_four_tokens_are_judged_split_by_split():
    """N = 3 has one split (1-2), N = 4 two (1-3, 2-2): the padded minority 2 of N = 3 is
    neither plotted nor judged, and the Bonferroni count holds the three shares per beta."""
    ds = pl.compute("smoke", progress=False)
    assert list(ds.uniform_tokens.values) == [3, 4]
    assert np.isnan(ds.uniform_n_split.sel(uniform_tokens=3, minority=2)).all()
    s = pl.summary(ds)
    assert [(u["n_tokens"], u["minority"]) for u in s["uniform"]] == [(3, 1), (4, 1), (4, 2)]
    assert s["n_judged"] == ds.sizes["beta"] * (ds.sizes["split"] + 3)
    assert "for N = 3" in pl.phrases(s)["uniform"]
    # the counts and times cover all three sweeps, and the uniform ones are named
    assert ds.attrs["n_cells"] == ds.sizes["split"] * ds.sizes["beta"] + 2 * ds.sizes["beta"]
    assert ds.attrs["uniform_cell_function"].endswith("fig7.cell")
    t, w = pl.FIGURE.measured(ds)
    assert t == ds.attrs["cell_time_s"] and w == pl.work(dict(
        n_traj=40, L=20, T=50.0, betas=(4.0,), splits=("1,2", "2,2"), uniform_tokens=(3, 4)))
    lines = pl.plot(ds).axes[1].get_lines()
    assert len(lines) == 3                         # N = 3: 1-2; N = 4: 1-3 and 2-2
    with pytest.raises(ValueError, match="uniform_tokens"):
        pl.compute("smoke", uniform_tokens=(4, 3), progress=False)
