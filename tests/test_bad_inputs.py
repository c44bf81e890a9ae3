"""Every call of the hostile probe (issue 29) answered: an error naming the field and its
range before any compute, a one-line command-line error, or a right answer.

One test per case of the issue; the valid neighbours of each refused input (the bounds
themselves, committed times such as 0.57 at L = 100) are checked to keep working.
"""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from stochastic_transformers import ModelConfig, RunConfig, configs_from_flat, simulate
from stochastic_transformers import _validation as val

BASE = dict(n_tokens=2, d=3, beta=1.0, n_traj=2, L=10, T=1.0)


def _flat(**fields):
    return configs_from_flat(**{**BASE, **fields})


def _simulate(**fields):
    return simulate(*_flat(**fields))


# ------------------------------------------------------------------ NaN instead of an error
@pytest.mark.parametrize("fields", [
    dict(sigma=1e100),                                         # overlap chain
    dict(sigma=1e160, n_tokens=3, method="literal"),
    dict(sigma=1e160, d=6, method="gaussian_dn"),
    dict(sigma=1e160, n_tokens=3),                             # reduced
])
def test_sigma_of_the_paper_model_has_the_upper_bound_of_random_attention(fields):
    with pytest.raises(ValueError, match=r"sigma must be > 0.0 and <= 1000000.0"):
        _simulate(**fields)
    assert val.SIGMA_MAX == 1e6


def test_hybrid_epsilon_has_an_upper_bound():
    with pytest.raises(ValueError, match=r"epsilon must be >= 0.0 and <= 1000000.0"):
        _simulate(model="hybrid", epsilon=1e100)


def test_random_attention_eta_has_an_upper_bound():
    with pytest.raises(ValueError, match=r"eta must be > 0.0 and <= 1000000.0"):
        _simulate(model="random_attention", eta=1e160)


def test_each_bound_itself_runs_finite():
    at_bounds = [dict(sigma=val.SIGMA_MAX), dict(sigma=val.SIGMA_MAX, n_tokens=3),
                 dict(model="hybrid", epsilon=val.EPSILON_MAX),
                 dict(model="random_attention", n_tokens=3, eta=val.ETA_MAX,
                      sigma=val.SIGMA_MAX, sigma_qk=val.SIGMA_MAX)]
    for fields in at_bounds:
        ds = _simulate(**{**fields, "L": 1, "T": 5.0, "n_traj": 4})
        assert np.all(np.isfinite(ds.gram.values)), fields


def test_feedforward_critical_beta_says_attracts_at_every_beta_as_theory_does():
    from stochastic_transformers import feedforward, theory

    assert feedforward.critical_beta(2, 0.0, "erf") == theory.critical_beta(2) == 0.0
    assert feedforward.critical_beta(4, 1.0, "identity") == 0.0  # s > 1: was NaN
    assert feedforward.attracts_at_every_beta(4, 1.0, "identity")
    assert not feedforward.attracts_at_every_beta(4, 0.5, "identity")  # lambda(0) = 0 exactly
    assert feedforward.critical_beta(4, 0.5, "identity") == 0.0


# ------------------------------------------------------------------------- silent mislabels
@pytest.mark.parametrize("t", [0.05, 0.25])
def test_a_time_off_the_layer_grid_is_refused(t):
    with pytest.raises(ValueError, match=rf"times must lie on the layer grid.*got {t}"):
        RunConfig(n_tokens=2, n_traj=1, L=10, T=1.0, times=[t])


def test_a_time_within_rounding_of_a_layer_is_kept():
    ds = _simulate(L=100, times=[0.57, 1.0])   # 0.57 * 100 = 56.99999999999999
    assert ds.time.values.tolist() == [0.57, 1.0]
    np.testing.assert_array_equal(ds.gram_t.isel(time=-1).values, ds.gram.values)


def test_first_trajectory_keeps_the_trajectory_coordinate_int64():
    top = val.MAX_TRAJECTORY - 2
    ds = _simulate(first_trajectory=top)
    assert ds.trajectory.dtype == np.int64
    assert ds.trajectory.values.tolist() == [top, top + 1]
    with pytest.raises(ValueError, match=r"first_trajectory must be <= 2\*\*63 - 1 - n_traj"):
        RunConfig(n_tokens=2, n_traj=2, L=1, T=1.0, first_trajectory=2**63 - 2)


# --------------------------------------------------------------------------- unclear errors
def test_a_dimension_whose_matrices_cannot_fit_is_refused_by_the_memory_guard():
    from stochastic_transformers.memory import fixed_memory

    for fields in (dict(d=10**9), dict(d=10**9, n_tokens=3, method="literal")):
        with pytest.raises(ValueError, match=r"d=1,000,000,000 needs about .* d x d matrices"):
            _simulate(**fields)
    # the d x d matrix of the plan and each thread's value matrix are counted
    assert fixed_memory("literal", "stochastic", 3, 100, n_threads=2) >= 3 * 8 * 100**2


@pytest.mark.parametrize("T, L", [(1e30, 1), (1e308, 10)])
def test_a_layer_count_beyond_int64_is_refused(T, L):
    with pytest.raises(ValueError, match=r"T \* L must be at most 2\*\*62"):
        RunConfig(n_tokens=2, n_traj=1, L=L, T=T)


def test_first_trajectory_beyond_int64_is_refused():
    with pytest.raises(ValueError, match="first_trajectory"):
        RunConfig(n_tokens=2, n_traj=1, L=1, T=1.0, first_trajectory=2**64)


@pytest.mark.parametrize("B", ["identity", [[1, 0, 0], [0, 1], [0, 0, 1]],
                               np.eye(3) * (1 + 1j), [[True] * 3] * 3])
def test_a_b_that_is_not_a_real_matrix_is_named(B):
    with pytest.raises(ValueError, match=r"^B must be a finite \(3, 3\) array of real numbers"):
        ModelConfig(d=3, beta=1.0, B=B)


def test_a_mean_matrix_that_is_not_real_is_named():
    with pytest.raises(ValueError, match="^mean_v"):
        ModelConfig(d=2, beta=1.0, kind="random_attention", mean_v=np.eye(2) * 1j)


def test_times_and_x0_given_as_text_are_named():
    with pytest.raises(ValueError, match="^times must be"):
        RunConfig(n_tokens=2, n_traj=1, L=10, T=1.0, times="abc")
    with pytest.raises(ValueError, match="^times must be"):
        RunConfig(n_tokens=2, n_traj=1, L=10, T=1.0, times=[[0.1], [0.2, 0.3]])
    with pytest.raises(ValueError, match=r"^x0 must be an \(N, d\) or \(n_traj, N, d\) array"):
        RunConfig(n_tokens=2, n_traj=1, L=10, T=1.0, x0="abc")


def test_mean_field_names_tokens_of_the_wrong_dimension():
    from stochastic_transformers.random_attention import limits

    model = ModelConfig(d=3, beta=1.0, kind="random_attention", sigma_qk=0.0, mean_v=1.0)
    with pytest.raises(ValueError, match=r"^x must be a \(\.\.\., N, 3\) array"):
        limits.mean_field(np.full((3, 4), 0.5), model)
    assert limits.mean_field(np.eye(3), model).shape == (3, 3)


# ------------------------------------------------------------------------ ranges that agree
def test_stop_level_has_one_range_in_the_run_simulate_and_the_theory():
    from stochastic_transformers import theory

    with pytest.raises(ValueError, match=r"^stop_level must be >= 0.0 and < 1.0"):
        RunConfig(n_tokens=2, n_traj=1, L=10, T=1.0, stop_level=1.0)
    with pytest.raises(ValueError, match=r"^level must be > 0.0 and < 1.0"):
        theory.stopping_angles(1.0, 4, level=1.0)
    assert RunConfig(n_tokens=2, n_traj=1, L=10, T=1.0, stop_level=0.0).stop_level == 0.0
    assert _simulate(stop_level=0.5).attrs["stop_level"] == 0.5


def test_tol_of_one_is_refused_as_documented():
    from stochastic_transformers import theory

    with pytest.raises(ValueError, match=r"^tol must be > 0.0 and < 1.0"):
        RunConfig(n_tokens=2, n_traj=1, L=10, T=1.0, tol=1.0)
    with pytest.raises(ValueError, match=r"^tol must be > 0.0 and < 1.0"):
        theory.stopping_angles(1.0, 4, tol=1.0)


@pytest.mark.parametrize("progress", ["no", 1, None])
def test_progress_must_be_a_bool(progress):
    with pytest.raises(ValueError, match="^progress must be True or False"):
        RunConfig(n_tokens=2, n_traj=1, L=10, T=1.0, progress=progress)
    assert RunConfig(n_tokens=2, n_traj=1, L=10, T=1.0, progress=np.True_).progress is True


def test_logistic_refuses_a_nan_time():
    from stochastic_transformers.random_attention import homogenized

    with pytest.raises(ValueError, match="^t must be"):
        homogenized.logistic(float("nan"), 0.5)
    assert homogenized.logistic(0.0, 0.5) == 0.5


def test_hovering_depth_refuses_a_quantile_outside_0_1():
    from stochastic_transformers import two_clusters

    with pytest.raises(ValueError, match=r"^quantiles must be >= 0.0 and <= 1.0"):
        two_clusters.hovering_depth(4.0, 3, 1, 2, quantiles=(1.5,))


def test_two_cluster_weights_refuses_an_empty_cluster():
    from stochastic_transformers import theory

    with pytest.raises(ValueError, match=r"^m1 must be an integer >= 1"):
        theory.two_cluster_weights(0.2, 1.0, m1=0, m2=2)
    with pytest.raises(ValueError, match="^z must be"):
        theory.two_cluster_weights(1.5, 1.0, 1, 2)
    p1, q1, _, _ = theory.two_cluster_weights(0.2, 1.0, 1, 2)
    assert 0 < p1 < 1 and p1 + q1 == 1.0


# --------------------------------------------------------------------------- command line
def _one_line_error(capsys, status):
    err = capsys.readouterr().err.strip()
    assert status == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_out_naming_an_existing_file_is_one_line(tmp_path, capsys):
    from stochastic_transformers.cli import main

    (tmp_path / "f").write_text("x")
    status = main(["reproduce", "fig3", "--scale", "smoke", "--out", str(tmp_path / "f")])
    assert "--out" in _one_line_error(capsys, status)


def test_cache_dir_naming_an_existing_file_is_one_line(tmp_path, capsys):
    from stochastic_transformers.cli import main

    (tmp_path / "f").write_text("x")
    status = main(["reproduce", "fig3", "--scale", "smoke", "--out", str(tmp_path / "o"),
                   "--cache-dir", str(tmp_path / "f")])
    assert "--cache-dir" in _one_line_error(capsys, status)


def test_notebook_out_to_an_unwritable_place_is_one_line(tmp_path, capsys):
    from stochastic_transformers.cli import main

    (tmp_path / "f").write_text("x")
    status = main(["notebook", "fig3", "--scale", "smoke", "--out", str(tmp_path / "f" / "nb")])
    assert "not a writable folder" in _one_line_error(capsys, status)


def test_an_unwritable_out_fails_before_any_cell(tmp_path, capsys, monkeypatch):
    from stochastic_transformers import figures
    from stochastic_transformers.cli import main

    def never(*args, **kwargs):
        raise AssertionError("computed before checking --out")

    monkeypatch.setattr(figures, "reproduce", never)
    (tmp_path / "f").write_text("x")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    outs = [tmp_path / "f" / "out"]                  # a parent that is a file
    try:
        (locked / "probe").write_text("")           # root writes anyway: nothing to test
    except OSError:
        outs.append(locked)
    for out in outs:
        status = main(["reproduce", "fig3", "--scale", "smoke", "--out", str(out),
                       "--cache-dir", str(tmp_path / "cache")])
        assert "--out" in _one_line_error(capsys, status)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_closed_scheduler_fails_fast_in_one_line(tmp_path, capsys, monkeypatch):
    from stochastic_transformers import sweep
    from stochastic_transformers.cli import main

    monkeypatch.setattr(sweep, "SCHEDULER_CONNECT_TIMEOUT_S", 1)
    start = time.perf_counter()
    status = main(["reproduce", "fig3", "--scale", "smoke", "--out", str(tmp_path),
                   "--no-progress", "--scheduler", f"tcp://127.0.0.1:{_closed_port()}"])
    assert "no Dask scheduler answered" in _one_line_error(capsys, status)
    assert time.perf_counter() - start < 30.0


def slow_cell(*, n, seed):
    """A cell that lasts long enough for its scheduler to be killed under it."""
    time.sleep(0.2)
    return {"y": float(n)}


def test_a_scheduler_killed_mid_run_is_a_connection_error(tmp_path):
    from distributed import LocalCluster

    from stochastic_transformers.sweep import run_sweep

    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                           dashboard_address=None)
    killer = threading.Timer(1.5, cluster.close)
    killer.start()
    try:
        with pytest.raises(ConnectionError, match="lost the Dask scheduler .* mid-run"):
            run_sweep(slow_cell, {"n": list(range(200))}, scheduler=cluster.scheduler_address,
                      cache_dir=tmp_path, progress=False)
    finally:
        killer.cancel()
        cluster.close()
    assert list((tmp_path / "sweep").glob("*.npz"))   # the finished cells stay cached


def test_the_command_line_reports_a_lost_scheduler_in_one_line(tmp_path, capsys, monkeypatch):
    from stochastic_transformers import figures
    from stochastic_transformers.cli import main
    from stochastic_transformers.sweep import _lost_scheduler

    def lost(*args, **kwargs):
        raise _lost_scheduler(Exception(), "tcp://h:1", tmp_path, 3)

    monkeypatch.setattr(figures, "reproduce", lost)
    status = main(["reproduce", "fig3", "--scale", "smoke", "--out", str(tmp_path)])
    assert "lost the Dask scheduler" in _one_line_error(capsys, status)


# --------------------------------------------------------------------------------- silence
class _Dispatcher:
    """Stands in for a numba dispatcher: compiled for no signature until it runs."""

    def __init__(self):
        self.signatures = []


def test_a_first_compilation_is_announced_once_on_stderr(capsys):
    from stochastic_transformers import _jit

    kernel = _Dispatcher()
    for _ in range(2):
        with _jit.first_use_notice(kernel, "the test kernels", after_s=0.05):
            time.sleep(0.3)   # a compilation: longer than after_s
    err = capsys.readouterr().err
    assert err.count("compiling the test kernels (first use only") == 1
    with _jit.first_use_notice(_Dispatcher(), "the quick kernels", after_s=5.0):
        pass                  # a load from the cache: quicker than after_s
    kernel.signatures.append("compiled")
    with _jit.first_use_notice(kernel, "the compiled kernels", after_s=0.0):
        time.sleep(0.1)       # already compiled in this process
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- figure knobs
def test_the_knob_listing_checks_the_values_it_lists(capsys):
    from stochastic_transformers.cli import main

    status = main(["reproduce", "fig3", "--knobs", "--set", "n_traj=-1"])
    assert "n_traj must be an integer >= 1" in _one_line_error(capsys, status)


def test_a_range_of_inverse_temperatures_without_a_step_is_refused(capsys):
    from stochastic_transformers.cli import main

    status = main(["reproduce", "fig3", "--knobs", "--set", "betas=0:4"])
    assert "needs its step" in _one_line_error(capsys, status)


#: A value just outside the library's range for each shared knob a figure may have.
OUT_OF_RANGE = {"betas": (val.BETA_MAX * 2,), "beta": val.BETA_MAX * 2,
                "sigma": val.SIGMA_MAX * 2, "epsilons": (val.EPSILON_MAX * 2,), "tol": 1.0,
                "stop_level": 1.0, "n_traj": 0, "L": 0, "T": -1.0, "d": 1,
                "rs": (val.FF_STRENGTH_MAX * 2,), "lr": 2.0, "weight_decay": 2.0}


def _figure_ids():
    from stochastic_transformers import figures

    return sorted(figures.FIGURES)


@pytest.mark.parametrize("fig_id", _figure_ids())
def test_a_knob_outside_the_library_range_is_refused_before_any_compute(fig_id, monkeypatch):
    from stochastic_transformers import figures, sweep

    figure = figures.get(fig_id)
    monkeypatch.setattr(sweep, "run_sweep", lambda *a, **k: pytest.fail("a sweep started"))
    given = [k for k in OUT_OF_RANGE if k in figure.settings("smoke")]
    for knob in given:
        with pytest.raises(ValueError, match=knob):
            figure.compute("smoke", progress=False, **{knob: OUT_OF_RANGE[knob]})


# Knob values that the figures' checks once accepted and that then failed inside a running
# cell (an overflow, a solver grid too large, a record the model does not make) or in
# summary(); each is now refused before compute, with the knob's name in the message.
@pytest.mark.parametrize("fig_id, knob, value", [
    ("fig1", "beta", 711.0), ("overlap", "beta", 360.0), ("fig6", "n_tokens", [2]),
    ("fig7", "n_tokens", 2), ("fig7", "betas", [701.0]), ("fig9", "betas", [701.0]),
    ("persistence_long", "uniform_tokens", [2]), ("persistence_long", "one_plus_z0", 2.0),
    ("persistence_long", "t_min", 1e6), ("persistence_long", "t_min", 1e-9), ("clusters", "one_plus_z0", 1e-300),
    ("clusters", "splits", ["1,1", "1,1"]), ("ff_pairs", "betas", [701.0]),
    ("ff_threshold", "betas", [701.0]), ("ff_threshold", "n_traj", 1), ("ff_tokens", "rs", [0.5]),
    ("norm_pairs", "attention", "unnormalized"), ("norm_clock", "attention", "unnormalized"),
    ("norm_tokens", "attention", "unnormalized"), ("norm_clock", "d", 2),
    ("thm1", "times", [50.0]), ("thm1", "sigma", 1e6), ("train_width", "widths", [10**6])])
def test_a_knob_that_would_fail_inside_a_cell_is_refused_before_compute(fig_id, knob, value):
    from stochastic_transformers import figures

    with pytest.raises(ValueError, match=knob):
        figures.get(fig_id).knobs("smoke", {knob: value})


def test_a_beta_whose_kolmogorov_grid_cannot_be_refined_is_refused_by_the_dry_run():
    from stochastic_transformers import figures

    with pytest.raises(ValueError, match="Kolmogorov grid of .* points, refined to"):
        figures.get("thm1").knobs("smoke", {"beta": 300.0})
    figures.get("thm1").knobs("smoke", {"beta": 30.0})   # within the grid: accepted
