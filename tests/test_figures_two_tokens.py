"""Figures 3 and 4 end to end: saved results, theory agreement, Dask, cache and kill."""

import json
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


def test_fig3_far_bias_and_chi_square_on_constructed_deviations(fig3_smoke):
    """A mean deviation is resolved beyond 3 of its standard errors 1/sqrt(n); the
    chi-square of sum z^2 over the n far points tests a perfect match."""
    import scipy.stats

    ds = xr.open_dataset(fig3_smoke / "fig3.nc").load()
    s = fig3.summary(ds)
    far = ((ds.p_theory > 0) | (ds.n_antipodal > 0)) & (abs(ds.beta - ds.beta_c) >= fig3.NEAR)
    n = int(far.sum())
    assert n == s["n_far"] >= 4
    signs = np.where(np.arange(ds.z_score.size).reshape(ds.z_score.shape) % 2, 1.0, -1.0)
    for z, resolved in ((0.5 * signs, False), (6.0 / np.sqrt(n) + 0 * signs, True)):
        ds["z_score"] = ds.z_score.copy(data=z)
        s = fig3.summary(ds)
        assert s["far_bias_resolved"] is resolved
        zf = z[far.transpose(*ds.z_score.dims).values]
        assert s["far_chi2_p"] == pytest.approx(scipy.stats.chi2.sf(np.sum(zf ** 2), n))
        assert ("consistent with" in fig3.phrases(s)["far_reading"]) is not resolved


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
    for var in ("p_single", "p_antipodal", "p_single_low", "p_antipodal_high", "epsilon_c",
                "step_size"):
        assert var in ds
    assert ds.p_single.dims == ("L", "beta", "epsilon")
    assert list(ds.L.values) == list(fig4.SCALES["smoke"]["Ls"])
    # the attributes describe both maps, not the first one alone
    assert list(ds.attrs["grid_L"]) == list(fig4.SCALES["smoke"]["Ls"])
    assert [p["grid"]["L"] for p in json.loads(ds.attrs["parameters"])] == [[20], [60]]
    total = ds.p_single + ds.p_antipodal + ds.p_unclustered
    np.testing.assert_allclose(total.values, 1.0)
    # eps = 0 is the deterministic flow: pairs merge (at large beta too slowly for T = 20)
    assert float(ds.p_single.sel(epsilon=0.0, beta=slice(0, 2)).min()) == 1.0
    s = fig4.summary(ds)
    assert 0 <= s["share_agree"] <= 1 and s["n_away"] <= s["n_cells"]
    for L, sub in s["by_L"].items():
        # every cell away from the band is counted once: agreeing, disagreeing or undecided
        assert sub["n_agree"] + sub["n_wrong"] + sub["n_undecided"] == sub["n_away"]
        assert sub["n_small_step"] + sub["n_large_step"] == sub["n_away"]
        assert len(sub["wrong_cells"]) == sub["n_wrong"]
    assert (s["fixed_by_depth"] + s["undecided_by_depth"] + s["still_wrong"]
            == s["by_L"][s["Ls"][0]]["n_wrong"])


def test_fig4_summary_counts_a_constructed_map():
    """A hand-made dataset: the verdicts of summary() follow the stated rules."""
    betas, eps = np.array([0.0, 4.0]), np.array([0.0, 2.0])
    eps_c = np.asarray(theory.critical_epsilon(betas))
    # L = 100: at beta = 4, eps = 2 (above the curve, large step) the pair merges: wrong.
    p_a = np.array([[[0.0, 1.0], [0.0, 0.1]], [[0.0, 1.0], [0.0, 0.8]]])
    ds = xr.Dataset({"p_antipodal": (("L", "beta", "epsilon"), p_a),
                     "p_single": (("L", "beta", "epsilon"), 1.0 - p_a),
                     "p_unclustered": (("L", "beta", "epsilon"), np.zeros_like(p_a)),
                     "epsilon_c": (("beta",), eps_c),
                     "depth_p_antipodal": (("check_L",), np.array([0.2, 0.95]))},
                    coords={"L": [100, 1000], "beta": betas, "epsilon": eps,
                            "check_L": [100, 1000]})
    ds["dominant_antipodal"] = ds.p_antipodal > ds.p_single
    ds["step_size"] = (("L", "beta", "epsilon"), theory.hybrid_step_size(
        betas[None, :, None], eps[None, None, :], np.array([100, 1000])[:, None, None]))
    s = fig4.summary(ds)
    assert s["by_L"][100]["n_wrong"] == 1 and s["by_L"][100]["wrong_cells"] == [(4.0, 2.0)]
    assert s["by_L"][1000]["n_wrong"] == 0
    assert s["fixed_by_depth"] == 1 and s["still_wrong"] == 0 and s["new_wrong"] == 0
    assert s["depth_check_limit_reached"] is True
    ds["depth_p_antipodal"] = (("check_L",), np.array([0.2, fig4.LIMIT_REACHED]))
    assert fig4.summary(ds)["depth_check_limit_reached"] is False   # "exceeds": strictly
    # eps = 0 is deep on the merging side (log ratio -inf), never on the threshold
    assert s["by_L"][100]["n_away"] == 4


@pytest.mark.parametrize("bad, name", [(dict(Ls=(0,)), "Ls"), (dict(Ls=(100, 100)), "Ls"),
                                       (dict(T=0.01), "T"), (dict(epsilons=(-1.0,)), "epsilons"),
                                       (dict(check_point=(1.0,)), "check_point"),
                                       (dict(check_L=(0,)), "check_L")])
def test_fig4_bad_knobs_name_the_parameter(bad, name):
    with pytest.raises(ValueError, match=name):
        fig4.compute("smoke", progress=False, **bad)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "stochastic_transformers", "reproduce", *args],
                          capture_output=True, text=True)


@pytest.mark.parametrize("args, message", [
    (("fig3", "--set", "n_trj=3"), "n_trj: unknown knob"),
    (("fig3", "--set", "n_traj=abc"), "n_traj takes an integer"),
    (("fig3", "--set", "n_traj=0"), "n_traj must be an integer >= 1"),
    (("fig3", "--set", "betas=0:a"), "betas takes a list of numbers"),
    (("fig3", "--set", "betas=2:1:0.5"), "stop must be >= its start"),
    (("fig3", "--set", "T=0.333"), "whole number of layers"),
    (("fig3", "--set", "attention=soft"), "attention must be one of"),
    (("fig4", "--set", "Ls=0"), "Ls must be an integer >= 1"),
    (("fig3", "--set", "n_traj"), "key=value"),
])
def test_cli_set_refuses_bad_keys_and_values_in_one_line(tmp_path, args, message):
    res = _cli(*args, "--scale", "smoke", "--out", str(tmp_path))
    assert res.returncode == 2
    assert message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # refused before any computation


def test_cli_set_parses_lists_and_ranges():
    from stochastic_transformers.figures import parse_settings, settings

    defaults = settings("fig3", "smoke")
    got = parse_settings(["betas=0:4:0.25", "d=4,6,8", "n_traj=1000", "T=20"], defaults)
    assert got["betas"] == tuple(np.round(np.arange(0.0, 4.01, 0.25), 12))
    assert got["d"] == (4, 6, 8) and all(type(v) is int for v in got["d"])
    assert got["n_traj"] == 1000 and type(got["n_traj"]) is int
    assert got["T"] == 20.0 and type(got["T"]) is float
    assert parse_settings(["d=5"], defaults)["d"] == (5,)
    fig2_defaults = settings("fig2", "smoke")
    got = parse_settings(["device=cpu", "amp=false", "patch_size=2"], fig2_defaults)
    assert got == {"device": "cpu", "amp": False, "patch_size": 2}


def test_cli_set_records_the_values_used(tmp_path):
    res = _cli("fig3", "--scale", "smoke", "--set", "n_traj=50", "--set", "d=4",
               "--set", "betas=0:3:1.5", "--out", str(tmp_path), "--no-progress")
    assert res.returncode == 0, res.stderr
    ds = xr.open_dataset(tmp_path / "fig3.nc")
    assert int(ds.attrs["fixed_n_traj"]) == 50
    assert list(ds.d.values) == [4] and list(ds.beta.values) == [0.0, 1.5, 3.0]
    assert "n_traj=50" in ds.attrs["overrides"] and "betas=(0.0, 1.5, 3.0)" in ds.attrs["overrides"]


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


def test_cli_all_runs_every_figure_not_skipped_and_prints_a_cost_table(tmp_path):
    from stochastic_transformers import figures

    skip = ",".join(f for f in figures.FIGURES if f != "fig1")
    res = _cli("--all", "--scale", "smoke", "--skip", skip, "--out", str(tmp_path),
               "--no-progress")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "fig1.nc").is_file() and (tmp_path / "fig1.png").is_file()
    table = res.stdout[res.stdout.index("figure"):]
    assert "fig1" in table and "ok" in table and "skipped" in table and "total" in table
    assert not (tmp_path / "fig3.nc").exists()
    bad = _cli("--all", "--skip", "fig99", "--out", str(tmp_path))
    assert bad.returncode == 2 and "fig99" in bad.stderr


@pytest.mark.parametrize("bad, name", [(dict(deep_n_traj=0), "deep_n_traj"),
                                       (dict(n_traj=0), "n_traj"), (dict(T=-1.0), "T")])
def test_fig4_more_bad_knobs_name_the_parameter(bad, name):
    with pytest.raises(ValueError, match=name):
        fig4.compute("smoke", progress=False, **bad)
