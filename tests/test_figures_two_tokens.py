"""Figures 3 and 4 end to end: saved results, theory agreement, Dask, cache and kill."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from stochastic_transformers import theory
from stochastic_transformers.figures import fig3, fig4, reproduce

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fig3_smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("fig3")
    reproduce("fig3", "smoke", out, progress=False, cache_dir=out / "cache")
    return out


def test_fig3_writes_netcdf_png_and_svg(fig3_smoke):
    for ext in ("nc", "png", "svg"):
        assert (fig3_smoke / f"fig3.{ext}").stat().st_size > 0
    ds = xr.open_dataset(fig3_smoke / "fig3.nc")
    for var in ("p_antipodal", "p_antipodal_low", "p_antipodal_high", "p_single",
                "p_theory", "n_traj"):
        assert var in ds
    assert ds.p_antipodal.dims == ("d", "beta")
    for key in ("package_version", "git_commit", "wall_time_s", "sweep_seed"):
        assert key in ds.attrs


def test_saved_fig3_agrees_with_theory_within_its_intervals(fig3_smoke):
    """Smoke scale has 200 trajectories a point at L = 50: the Wilson 95% band plus a
    0.03 allowance for the coarse depth must cover the exact limit at every point.
    With 10 points and the allowance the false-alarm rate is well below 1%."""
    ds = xr.open_dataset(fig3_smoke / "fig3.nc")
    lo = ds.p_antipodal_low.values - 0.03
    hi = ds.p_antipodal_high.values + 0.03
    p = ds.p_theory.values
    assert np.all((lo <= p) & (p <= hi)), (lo, p, hi)
    # the theory stored is the theory module's, not a copy
    d, b = int(ds.d.values[0]), float(ds.beta.values[-1])
    assert float(ds.p_theory.sel(d=d, beta=b)) == pytest.approx(float(theory.antipodal_probability(b, d)))


def test_fig3_dask_cluster_gives_the_same_numbers_as_one_process(tmp_path):
    small = dict(d=(4,), betas=(1.0, 2.0), n_traj=64, L=20, T=10.0)
    one = fig3.compute("smoke", scheduler="synchronous", progress=False, **small)
    dask = fig3.compute("smoke", scheduler="local", progress=False, **small)
    for var in ("n_antipodal", "n_single", "n_unclustered"):
        np.testing.assert_array_equal(one[var].values, dask[var].values)


def test_fig3_cli_resumes_after_kill_9(tmp_path):
    """Kill `reproduce` once some cells are cached; the rerun recomputes only the rest
    and writes the same result as an uninterrupted run."""
    out = tmp_path / "run"
    cache = out / "cache"
    cmd = [sys.executable, "-m", "stochastic_transformers", "reproduce", "fig3", "--scale",
           "smoke", "--out", str(out), "--cache-dir", str(cache), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        if len(list(cache.rglob("*.npz"))) >= 2 or proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = {p.name for p in cache.rglob("*.npz")}
    assert done_before, "no cell finished before the kill"
    mtimes = {p.name: p.stat().st_mtime_ns for p in cache.rglob("*.npz")}
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = {p.name: p.stat().st_mtime_ns for p in cache.rglob("*.npz")}
    assert all(after[name] == mtimes[name] for name in done_before), "finished cells were redone"
    assert len(after) == 10
    fresh = fig3.compute("smoke", progress=False)
    resumed = xr.open_dataset(out / "fig3.nc")
    np.testing.assert_array_equal(resumed.n_antipodal.values, fresh.n_antipodal.values)


def test_fig4_variables_and_threshold_summary():
    ds = fig4.compute("smoke", progress=False)
    for var in ("p_single", "p_antipodal", "p_single_low", "p_antipodal_high", "epsilon_c"):
        assert var in ds
    assert ds.p_single.dims == ("beta", "epsilon")
    total = ds.p_single + ds.p_antipodal + ds.p_unclustered
    np.testing.assert_allclose(total.values, 1.0)
    # eps = 0 is the deterministic flow: pairs merge (at large beta too slowly for T = 20)
    assert float(ds.p_single.sel(epsilon=0.0, beta=slice(0, 2)).min()) == 1.0
    s = fig4.summary(ds)
    assert 0 <= s["share_agree"] <= 1 and s["n_away"] <= s["n_cells"]


@pytest.mark.parametrize("bad, name", [(dict(d=(1,)), "d"), (dict(betas=(-1.0,)), "betas"),
                                       (dict(nonsense=3), "nonsense"), (dict(n_traj=0), "n_traj")])
def test_fig3_bad_knobs_name_the_parameter(bad, name):
    with pytest.raises(ValueError, match=name):
        fig3.compute("smoke", progress=False, **bad)


def test_reproduce_rejects_unknown_ids_and_scales(tmp_path):
    with pytest.raises(ValueError, match="figure id"):
        reproduce("fig99", "smoke", tmp_path)
    with pytest.raises(ValueError, match="scale"):
        reproduce("fig3", "huge", tmp_path)
    res = subprocess.run([sys.executable, "-m", "stochastic_transformers", "reproduce", "--list"],
                         capture_output=True, text=True, check=True)
    assert "fig3" in res.stdout and "fig4" in res.stdout
