"""Tests of the sweep engine (stochastic_transformers.sweep) and of the binomial
statistics it relies on (stochastic_transformers.stats)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from stochastic_transformers import stats
from stochastic_transformers.stats import add_fraction
from stochastic_transformers.sweep import (
    CELL_SEED_VAR,
    cell_seed,
    load_sweep,
    run_sweep,
    save_sweep,
)

Z95 = 1.959963984540054

#: Parameters of every call of count_cell in this process (a side effect used to
#: prove that cached cells are not recomputed and that workers did the work).
CALLS: list[tuple] = []


def count_cell(*, p, n, m=3, seed):
    """Cheap cell: binomial counts and a short random walk drawn from its own seed."""
    CALLS.append((p, n))
    rng = np.random.default_rng(seed)
    hits = int(np.sum(rng.random(n) < p))
    walk = np.cumsum(rng.standard_normal(m))
    return {"hits": hits, "trials": n, "walk": walk}


def bad_shape_cell(*, n, seed):
    """Returns an array whose length changes with n: not a valid sweep output."""
    return {"x": np.zeros(n)}


def failing_cell(*, n, seed):
    """Fails for n = 3 only."""
    CALLS.append(("failing", n))
    if n == 3:
        raise RuntimeError("boom")
    return {"x": n}


GRID = {"p": [0.2, 0.5, 0.8], "n": [10, 20]}
FIXED = {"m": 4}


def sweep(**kwargs):
    """run_sweep on count_cell with the test defaults (synchronous, quiet)."""
    args = {"fixed": FIXED, "seed": 7, "scheduler": "synchronous", "progress": False}
    args.update(kwargs)
    grid = args.pop("grid", GRID)
    return run_sweep(count_cell, grid, **args)


def assert_same_numbers(a, b, variables=("hits", "trials", "walk", CELL_SEED_VAR)):
    """Bit-for-bit equality of the named variables (values, dtypes, dims, coords)."""
    for var in variables:
        assert a[var].dims == b[var].dims, var
        assert a[var].dtype == b[var].dtype, var
        np.testing.assert_array_equal(a[var].values, b[var].values, err_msg=var)
        for dim in a[var].dims:
            np.testing.assert_array_equal(a[dim].values, b[dim].values, err_msg=dim)


@pytest.fixture(autouse=True)
def _clear_calls():
    CALLS.clear()
    yield
    CALLS.clear()


# --------------------------------------------------------------------------
# stats
# --------------------------------------------------------------------------

def textbook_wilson(k, n, z):
    """Wilson (1927) in the form of most textbooks, written independently."""
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / (2 * n) * math.sqrt(4 * n * p * (1 - p) + z * z) / denom
    return centre - half, centre + half


def test_wilson_known_values():
    low, high = stats.wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(0.277533, abs=1e-6)  # z^2 / (n + z^2)
    low, high = stats.wilson_interval(10, 10)
    assert high == 1.0
    assert low == pytest.approx(0.722467, abs=1e-6)
    low, high = stats.wilson_interval(5, 10)
    assert (low, high) == pytest.approx((0.236593, 0.763407), abs=1e-6)
    assert stats.normal_quantile(0.95) == pytest.approx(Z95, rel=1e-12)
    assert stats.normal_quantile(0.99) == pytest.approx(2.5758293035489, rel=1e-12)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_wilson_matches_textbook_formula_vectorised(level):
    z = stats.normal_quantile(level)
    n = np.array([1, 2, 7, 30, 1000])
    k = np.array([[0, 1, 3, 17, 999], [1, 2, 7, 30, 1000]])
    low, high = stats.wilson_interval(k, n, level)
    assert low.shape == high.shape == (2, 5)
    for i in range(2):
        for j in range(5):
            ref_low, ref_high = textbook_wilson(k[i, j], n[j], z)
            assert low[i, j] == pytest.approx(max(ref_low, 0.0), abs=1e-12)
            assert high[i, j] == pytest.approx(min(ref_high, 1.0), abs=1e-12)
    # Symmetry under swapping successes and failures.
    low2, high2 = stats.wilson_interval(n - k, n, level)
    np.testing.assert_allclose(low, 1 - high2, atol=1e-14)


def _exact_coverage(n, p, interval):
    """P(p in interval(K, n)) for K ~ Binomial(n, p), summed exactly over K."""
    ks = np.arange(n + 1)
    pmf = np.array([math.comb(n, int(k)) * p**k * (1 - p) ** (n - k) for k in ks])
    low, high = interval(ks, n)
    return float(np.sum(pmf[(low <= p) & (p <= high)]))


def _wald(k, n):
    p = k / n
    half = Z95 * np.sqrt(p * (1 - p) / n)
    return p - half, p + half


@pytest.mark.parametrize("n", [20, 60])
def test_wilson_coverage_is_close_to_nominal(n):
    ps = np.linspace(0.02, 0.98, 97)
    wilson = np.array([_exact_coverage(n, p, stats.wilson_interval) for p in ps])
    wald = np.array([_exact_coverage(n, p, _wald) for p in ps])
    # Wilson's coverage oscillates around the nominal 95 %; on average it is
    # within a percent of it, and it never collapses the way Wald's does.
    assert abs(wilson.mean() - 0.95) < 0.01
    assert wilson.min() > 0.83
    assert wald.min() < 0.75 and wilson.min() > wald.min() + 0.1
    assert abs(wald.mean() - 0.95) > abs(wilson.mean() - 0.95)


def test_wilson_no_trials_and_invalid_input():
    low, high = stats.wilson_interval([0, 3], [0, 5])
    assert np.isnan(low[0]) and np.isnan(high[0])
    assert 0 < low[1] < 0.6 < high[1] < 1
    with pytest.raises(ValueError, match="k must be <= n"):
        stats.wilson_interval(6, 5)
    with pytest.raises(ValueError, match="^n must"):
        stats.wilson_interval(0, -1)
    with pytest.raises(ValueError, match="^k must"):
        stats.wilson_interval(1.5, 4)
    with pytest.raises(ValueError, match="^level must"):
        stats.wilson_interval(1, 4, level=1.0)


def test_standard_error_and_deviation():
    assert stats.binomial_standard_error(0.5, 100) == pytest.approx(0.05)
    se = stats.binomial_standard_error(np.array([0.0, 0.1, 1.0]), np.array([10, 0, 10]))
    assert se[0] == 0.0 and np.isnan(se[1]) and se[2] == 0.0
    # |0.56 - 0.5| / 0.05 = 1.2 and |0.3 - 0.2| / 0.04 = 2.5
    dev = stats.max_deviation_in_se([0.56, 0.3], [100, 100], [0.5, 0.2])
    assert dev == pytest.approx(2.5)
    # Theory 0 or 1: matching estimates deviate by 0, others infinitely.
    assert stats.max_deviation_in_se([0.0, 1.0, 0.5], 50, [0.0, 1.0, 0.5]) == 0.0
    assert stats.max_deviation_in_se([0.02, 0.5], 50, [0.0, 0.5]) == math.inf
    # Entries without trials are skipped, not allowed to hide or fake deviations.
    assert stats.max_deviation_in_se([0.9, 0.5], [0, 100], [0.1, 0.45]) == pytest.approx(
        0.05 / math.sqrt(0.45 * 0.55 / 100))
    assert math.isnan(stats.max_deviation_in_se([0.3], [0], [0.5]))
    with pytest.raises(ValueError, match="^p_theory must"):
        stats.max_deviation_in_se(0.5, 10, 1.5)


# --------------------------------------------------------------------------
# seeds, layout, attributes
# --------------------------------------------------------------------------

def test_cell_results_do_not_depend_on_the_rest_of_the_grid():
    full = sweep()
    assert len(CALLS) == 6
    sub = sweep(grid={"n": [20], "p": [0.8, 0.2]})  # other cells, other order
    for p in (0.8, 0.2):
        a, b = full.sel(p=p, n=20), sub.sel(p=p, n=20)
        for var in ("hits", "walk", CELL_SEED_VAR):
            np.testing.assert_array_equal(a[var].values, b[var].values)
    # Moving a parameter from the grid to `fixed`, or giving the grid as a numpy
    # array, names the same cell.
    single = sweep(grid={"p": np.array([0.5])}, fixed={"n": 10, "m": 4})
    np.testing.assert_array_equal(single["walk"].sel(p=0.5).values,
                                  full["walk"].sel(p=0.5, n=10).values)
    # The recorded seed is the documented one and reproduces the cell by hand.
    s = cell_seed(7, {"p": 0.5, "n": 10, "m": 4})
    assert full[CELL_SEED_VAR].sel(p=0.5, n=10).item() == s
    by_hand = count_cell(p=0.5, n=10, m=4, seed=s)
    assert full["hits"].sel(p=0.5, n=10).item() == by_hand["hits"]
    np.testing.assert_array_equal(full["walk"].sel(p=0.5, n=10).values, by_hand["walk"])
    # Different cells get different streams, and the sweep seed changes them all.
    assert len(np.unique(full[CELL_SEED_VAR].values)) == 6
    other = sweep(seed=8)
    assert not np.any(other[CELL_SEED_VAR].values == full[CELL_SEED_VAR].values)
    assert not np.array_equal(other["walk"].values, full["walk"].values)


def test_dataset_layout_and_attributes():
    ds = sweep(output_dims={"walk": ("step",)}, output_coords={"step": [1, 2, 3, 4]},
               name="layout")
    assert ds["hits"].dims == ("p", "n")
    assert ds["walk"].dims == ("p", "n", "step")
    assert ds["walk"].shape == (3, 2, 4)
    np.testing.assert_array_equal(ds["p"].values, GRID["p"])
    np.testing.assert_array_equal(ds["step"].values, [1, 2, 3, 4])
    assert ds["hits"].dtype.kind == "i" and ds[CELL_SEED_VAR].dtype == np.int64
    # hits is a real binomial count, increasing with p on average.
    assert np.all((ds["hits"] >= 0) & (ds["hits"] <= ds["n"]))
    assert ds["hits"].sel(p=0.8).sum() > ds["hits"].sel(p=0.2).sum()
    a = ds.attrs
    assert a["sweep_name"] == "layout" and a["sweep_seed"] == 7
    assert a["cell_function"].endswith("count_cell")
    assert json.loads(a["grid_params"]) == ["p", "n"]
    np.testing.assert_array_equal(a["grid_n"], [10, 20])
    assert a["fixed_m"] == 4
    assert json.loads(a["parameters"]) == {"grid": GRID, "fixed": FIXED}
    assert a["n_cells"] == 6 and a["n_cells_computed"] == 6 and a["n_cells_cached"] == 0
    assert a["wall_time_s"] >= a["cell_time_s"] > 0
    for key in ("package_version", "git_commit", "created", "code_version"):
        assert isinstance(a[key], str) and a[key]
    # Default names for unnamed output dimensions; an empty grid runs one cell.
    one = sweep(grid={}, fixed={"p": 0.5, "n": 10, "m": 2})
    assert one["walk"].dims == ("walk_dim0",) and one["hits"].dims == ()
    assert len(CALLS) == 7


def test_bad_outputs_and_failing_cells(tmp_path):
    with pytest.raises(ValueError, match="'x' has shape"):
        run_sweep(bad_shape_cell, {"n": [1, 2]}, scheduler="synchronous", progress=False)
    with pytest.raises(RuntimeError, match="boom") as info:
        run_sweep(failing_cell, {"n": [1, 2, 3, 4]}, scheduler="synchronous",
                  progress=False, cache_dir=tmp_path)
    assert "'n': 3" in "".join(info.value.__notes__)
    # The cells finished before the failure are cached and not rerun.
    assert len(list((tmp_path / "sweep").glob("*.npz"))) == 2
    CALLS.clear()
    with pytest.raises(RuntimeError):
        run_sweep(failing_cell, {"n": [1, 2, 3, 4]}, scheduler="synchronous",
                  progress=False, cache_dir=tmp_path)
    assert CALLS == [("failing", 3)]


# --------------------------------------------------------------------------
# schedulers and cache
# --------------------------------------------------------------------------

def test_local_cluster_matches_synchronous_and_shares_the_cache(tmp_path):
    reference = sweep()
    CALLS.clear()
    distributed = sweep(scheduler=None, n_workers=2, cache_dir=tmp_path)
    assert distributed.attrs["scheduler"] == "local"
    # The cells ran in worker processes: nothing was called in this one.
    assert CALLS == []
    assert_same_numbers(reference, distributed)
    # The cache written from the cluster serves a synchronous rerun entirely.
    again = sweep(cache_dir=tmp_path)
    assert CALLS == []
    assert again.attrs["n_cells_cached"] == 6
    assert_same_numbers(reference, again)


def test_existing_cluster_by_address_and_by_client(capfd):
    import logging

    from distributed import Client, LocalCluster

    reference = sweep()
    CALLS.clear()
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster:
        by_address = sweep(scheduler=cluster.scheduler_address, progress=True)
        assert by_address.attrs["scheduler"] == cluster.scheduler_address
        assert_same_numbers(reference, by_address)
        assert "6/6" in capfd.readouterr().err  # the progress bar counted every cell
        with Client(cluster) as client:
            by_client = sweep(scheduler=client)
            assert client.status == "running"  # a caller's client is left open
        assert_same_numbers(reference, by_client)
    assert CALLS == []


def test_cache_reuse_and_untrusted_files(tmp_path):
    first = sweep(cache_dir=tmp_path)
    assert len(CALLS) == 6
    folder = tmp_path / "sweep"
    files = sorted(folder.glob("*.npz"))
    assert len(files) == 6
    CALLS.clear()
    second = sweep(cache_dir=tmp_path)
    assert CALLS == []
    assert second.attrs["n_cells_computed"] == 0
    assert second.attrs["cell_time_s"] == pytest.approx(first.attrs["cell_time_s"])
    assert_same_numbers(first, second)

    # Damage three files in three ways: truncated, a flipped byte, and another
    # cell's (valid) file under this cell's name.  Each is recomputed, never used.
    truncated, flipped, swapped = files[0], files[1], files[2]
    truncated.write_bytes(truncated.read_bytes()[:100])
    data = bytearray(flipped.read_bytes())
    data[len(data) // 3] ^= 0xFF
    flipped.write_bytes(bytes(data))
    swapped.write_bytes(files[3].read_bytes())
    third = sweep(cache_dir=tmp_path)
    assert len(CALLS) == 3
    assert third.attrs["n_cells_cached"] == 3
    assert_same_numbers(first, third)
    CALLS.clear()
    sweep(cache_dir=tmp_path)
    assert CALLS == []  # the repaired files are trusted again

    # A new code version, sweep name or seed is a different cache entry.
    sweep(cache_dir=tmp_path, code_version="other")
    sweep(cache_dir=tmp_path, name="renamed")
    sweep(cache_dir=tmp_path, seed=8)
    assert len(CALLS) == 18


KILL_SCRIPT = '''
import os, sys, time
import numpy as np
from stochastic_transformers.sweep import run_sweep, save_sweep

GRID = {"a": [0, 1, 2, 3], "b": [0.5, 1.5, 2.5]}


def slow_cell(*, a, b, seed):
    with open(os.environ["SWEEP_LOG"], "a") as fh:
        fh.write(f"{a},{b}\\n")
    time.sleep(float(os.environ.get("SWEEP_SLEEP", "0")))
    rng = np.random.default_rng(seed)
    return {"x": rng.integers(0, 1000, size=3), "y": float(rng.random()) * b + a}


if __name__ == "__main__":
    ds = run_sweep(slow_cell, GRID, seed=3, name="killme", cache_dir=sys.argv[1],
                   scheduler="synchronous", progress=False)
    save_sweep(ds, sys.argv[2])
'''


def _log_lines(path):
    return path.read_text().splitlines() if path.exists() else []


def test_killed_sweep_resumes_without_recomputing(tmp_path, monkeypatch):
    script = tmp_path / "kill_sweep.py"
    script.write_text(textwrap.dedent(KILL_SCRIPT))
    cache = tmp_path / "cache"
    folder = cache / "killme"
    log = tmp_path / "cells.log"
    env = dict(os.environ, SWEEP_LOG=str(log), SWEEP_SLEEP="0.3")
    with open(tmp_path / "stderr.txt", "wb") as err:
        proc = subprocess.Popen([sys.executable, str(script), str(cache), str(tmp_path / "x.nc")],
                                env=env, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 60
        try:
            while len(list(folder.glob("*.npz"))) < 4:
                assert proc.poll() is None, (tmp_path / "stderr.txt").read_text()
                assert time.monotonic() < deadline, "the sweep made no progress"
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL

    # Every file under a final name is complete and names its own cell; anything
    # else is a writer's temporary file, which is never read.
    finished = [f for f in folder.iterdir() if not f.name.startswith(".")]
    for f in folder.iterdir():
        if f.name.startswith("."):
            assert f.name.endswith(".tmp")
    for f in finished:
        assert f.suffix == ".npz"
        with np.load(f, allow_pickle=False) as npz:
            assert json.loads(str(npz["__meta__"][()]))["key"] == f.stem
            assert npz["out.x"].shape == (3,)
    n_done = len(finished)
    assert 4 <= n_done < 12
    before = _log_lines(log)
    assert n_done <= len(before) <= n_done + 1  # at most one cell was cut short

    env["SWEEP_SLEEP"] = "0"
    done = subprocess.run([sys.executable, str(script), str(cache), str(tmp_path / "x.nc")],
                          env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    after = _log_lines(log)[len(before):]
    assert len(after) == 12 - n_done
    assert len(set(before) - set(after)) == n_done  # finished cells were not rerun
    assert len(set(before) | set(after)) == 12
    resumed = load_sweep(tmp_path / "x.nc")
    assert resumed.attrs["n_cells_cached"] == n_done

    # The resumed result equals an uninterrupted run without any cache.
    spec = importlib.util.spec_from_file_location("kill_sweep_reference", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("SWEEP_LOG", str(tmp_path / "reference.log"))
    monkeypatch.delenv("SWEEP_SLEEP", raising=False)
    reference = run_sweep(module.slow_cell, module.GRID, seed=3, name="killme",
                          scheduler="synchronous", progress=False)
    assert len(_log_lines(tmp_path / "reference.log")) == 12
    assert_same_numbers(reference, resumed, ("x", "y", CELL_SEED_VAR))


# --------------------------------------------------------------------------
# fractions and netCDF
# --------------------------------------------------------------------------

def test_netcdf_round_trip_of_a_sweep_with_fractions(tmp_path):
    # add_fraction itself is tested in test_stats_comparisons.py
    ds = add_fraction(sweep(), "hits", "trials", "frac")
    path = save_sweep(ds, tmp_path / "sub" / "sweep.nc")
    back = load_sweep(path)
    assert_same_numbers(ds, back, ("hits", "trials", "walk", "frac", "frac_low",
                                   "frac_high", CELL_SEED_VAR))
    for key in ("sweep_name", "sweep_seed", "cell_function", "code_version", "parameters",
                "package_version", "git_commit", "created", "n_cells", "wall_time_s"):
        assert back.attrs[key] == ds.attrs[key], key
    np.testing.assert_array_equal(back.attrs["grid_p"], GRID["p"])
    assert back.attrs["fixed_m"] == 4
    assert not list(path.parent.glob(".*.tmp"))


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"grid": {"p": [], "n": [10]}}, r"grid\['p'\] must hold at least one value"),
    ({"grid": {"p": 0.5}}, r"grid\['p'\] must be a 1-d sequence"),
    ({"grid": {"p": np.ones((2, 2))}}, r"grid\['p'\] must be a 1-d sequence"),
    ({"grid": {"p": [0.5, 0.5]}}, r"grid\['p'\] must not repeat"),
    ({"grid": {"p": [0.5, "a"]}}, r"grid\['p'\] must hold values of one kind"),
    ({"grid": {"p": [0.5], "seed": [1]}}, r"grid\['seed'\]"),
    ({"grid": {"p": [0.5], "q": [1]}}, r"^cell .*count_cell cannot take"),
    ({"fixed": {"n": 3, "m": 4}}, r"fixed\['n'\] is also a grid parameter"),
    ({"fixed": {"m": object()}}, r"fixed\['m'\] must be"),
    ({"cell": 3}, r"^cell must be a callable"),
    ({"cell": lambda p, n, seed: {}}, r"^cell must be a module-level function"),
    ({"scheduler": "threads"}, r"^scheduler must be"),
    ({"scheduler": None, "n_workers": 0}, r"^n_workers must be an integer >= 1"),
    ({"seed": -1}, r"^seed must be an integer >= 0"),
    ({"seed": 1.5}, r"^seed must be an integer"),
    ({"name": "a/b"}, r"^name must be"),
    ({"progress": "yes"}, r"^progress must be"),
    ({"output_coords": {"time": [1, 2]}}, r"^output_coords\['time'\]"),
    ({"output_dims": {"walk": ("p",)}}, r"^output_dims\['walk'\] reuses"),
])
def test_invalid_input_is_rejected_before_any_compute(tmp_path, kwargs, message):
    kwargs = dict(kwargs)
    cell = kwargs.pop("cell", count_cell)
    args = {"fixed": FIXED, "seed": 7, "scheduler": "synchronous", "progress": False,
            "cache_dir": tmp_path / "cache"}
    args.update(kwargs)
    grid = args.pop("grid", GRID)
    with pytest.raises(ValueError, match=message):
        run_sweep(cell, grid, **args)
    assert CALLS == []
    assert not (tmp_path / "cache").exists()


def test_invalid_output_layout_after_compute():
    with pytest.raises(ValueError, match=r"output_dims\['walk'\] names 2 dimensions"):
        sweep(output_dims={"walk": ("a", "b")})
    with pytest.raises(ValueError, match=r"output_coords\['step'\] has 2 values"):
        sweep(output_dims={"walk": ("step",)}, output_coords={"step": [0, 1]})


# --------------------------------------------------------------------------- stale caches

#: A module-level cell whose outputs the tests change between two runs of one sweep,
#: as an edit of a figure's ``cell`` without a version bump would.
STALE_OUTPUTS = {"names": ("a",)}
CELL_VERSION = "7"   # this module's, folded into the default code_version
ID = "sweeptest"


def editable_cell(*, n, seed):
    CALLS.append(("editable", n))
    return {name: n for name in STALE_OUTPUTS["names"]}


def test_default_code_version_folds_in_the_modules_cell_version(tmp_path):
    import stochastic_transformers as st

    ds = run_sweep(editable_cell, {"n": [1]}, name="v", scheduler="synchronous", progress=False)
    assert ds.attrs["code_version"] == f"{st.SIMULATION_CODE_VERSION}+sweeptest.7"
    ds = run_sweep(editable_cell, {"n": [1]}, name="v", scheduler="synchronous", progress=False,
                   code_version="given")
    assert ds.attrs["code_version"] == "given"


def test_cached_cells_with_other_outputs_are_recomputed(tmp_path, monkeypatch, caplog):
    kw = dict(name="stale", cache_dir=tmp_path, scheduler="synchronous", progress=False)
    monkeypatch.setitem(STALE_OUTPUTS, "names", ("a",))
    run_sweep(editable_cell, {"n": [1, 2]}, **kw)
    # the cell now returns other outputs; one cell is new, the two cached ones are stale
    monkeypatch.setitem(STALE_OUTPUTS, "names", ("a", "b"))
    CALLS.clear()
    ds = run_sweep(editable_cell, {"n": [1, 2, 3]}, **kw)
    assert sorted(n for tag, n in CALLS if tag == "editable") == [1, 2, 3]
    assert set(ds.data_vars) >= {"a", "b"} and ds.attrs["n_cells_computed"] == 3
    assert "without a CELL_VERSION bump" in caplog.text
    # all cached and consistent: nothing recomputed
    CALLS.clear()
    run_sweep(editable_cell, {"n": [1, 2, 3]}, **kw)
    assert CALLS == []


def test_cached_cells_that_disagree_follow_the_newest(tmp_path, monkeypatch):
    kw = dict(name="mixed", cache_dir=tmp_path, scheduler="synchronous", progress=False)
    monkeypatch.setitem(STALE_OUTPUTS, "names", ("a",))
    run_sweep(editable_cell, {"n": [1]}, **kw)
    time.sleep(0.05)
    monkeypatch.setitem(STALE_OUTPUTS, "names", ("c",))
    run_sweep(editable_cell, {"n": [2]}, **kw)
    CALLS.clear()
    ds = run_sweep(editable_cell, {"n": [1, 2]}, **kw)
    assert [n for tag, n in CALLS if tag == "editable"] == [1] and "c" in ds


def test_count_z_is_a_normal_score_with_a_continuity_correction_and_a_floor():
    from stochastic_transformers.stats import count_z

    # ordinary counts: (|o - e| - 1/2) / sqrt(v)
    assert count_z(60.0, 50.0, 25.0) == pytest.approx(9.5 / 5)
    assert count_z(40.0, 50.0, 25.0) == pytest.approx(-9.5 / 5)
    # a near-deterministic prediction one trajectory off is at most 1 SE, never 14
    assert abs(count_z(99.0, 99.995, 0.0047)) <= 1.0
    assert count_z(50.2, 50.0, 25.0) == 0.0
    np.testing.assert_allclose(count_z(np.array([1.0, 3.0]), np.array([1.0, 1.0]),
                                       np.array([0.0, 1.0])), [0.0, 1.5])
