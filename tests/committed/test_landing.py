"""The landing page's animation is drawn from its committed run and shows what it says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "landing_tokens.nc"
GIF = ROOT / "book" / "images" / "tokens_on_the_sphere.gif"


@pytest.fixture(scope="module")
def run():
    xr = pytest.importorskip("xarray")
    with xr.open_dataset(RUN) as ds:
        return ds.load()


def test_the_animation_is_small_enough_to_load_offline():
    assert GIF.stat().st_size <= 2_000_000


def test_the_flow_ends_in_one_cluster_and_random_values_in_two_antipodal_ones(run):
    # The caption says so; tolerance as the book's classification (overlap within 1e-2).
    flow, random = (run.gram_t.sel(model=m).values[-1] for m in ("flow", "random_values"))
    assert flow.min() > 0.99
    assert np.all((random > 0.99) | (random < -0.99)) and random.min() < -0.99
    assert run.attrs["beta"] == 3.0 and run.attrs["n_tokens"] == 24 and run.attrs["d"] == 3
    assert "git_commit" in run.attrs and "wall_time_s" in run.attrs


def test_the_embedding_keeps_every_overlap(run):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_animation",
                                                  ROOT / "book" / "make_animation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gram = run.gram_t.sel(model="random_values").values[7]
    points = module.embed(gram, None)
    np.testing.assert_allclose(points @ points.T, gram, atol=1e-9)
    rotated = module.embed(gram, points[:, ::-1])
    np.testing.assert_allclose(rotated @ rotated.T, gram, atol=1e-9)
