"""Theorem 1 and Lemmas 2-3 across cases (figures.paper.weak_order): the reference, the
differences' order and limit, and verdicts that can fail."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from stochastic_transformers.figures import weak_order as wo


def test_the_reference_starts_at_the_uniform_moments():
    """At t -> 0 the quadrature over the start's density gives E z = 0 and E z^2 = 1/d (up to
    the drift over t = 1e-4, of order 1e-4)."""
    for d in (3, 4, 7):
        assert wo.reference("m", "stochastic", "softmax", 1.0, d, 1e-4, 0.0) == pytest.approx(
            0.0, abs=5e-4)
        assert wo.reference("m2", "stochastic", "softmax", 1.0, d, 1e-4, 0.0) == pytest.approx(
            1.0 / d, rel=1e-3)


def _synthetic(limit, slope, se=1e-4, Ls=(4, 8, 16, 32, 64)):
    """A dataset of one stochastic softmax N = 2 case whose means are limit + slope / L."""
    L = np.array(Ls, dtype=float)
    mean = np.stack([limit + slope / L, limit**2 + slope / L])[None, None, None, None]
    dims = ("model", "attention", "n_tokens", "beta", "function", "L")
    coords = dict(model=["stochastic"], attention=["softmax"], n_tokens=[2], beta=[1.0],
                  function=["m", "m2"], L=list(Ls))
    ds = xr.Dataset({"mean": (dims, mean), "se": (dims, np.full(mean.shape, se)),
                     "n_traj": (dims, np.full(mean.shape, 1e6))}, coords=coords)
    ds.attrs.update(fixed_d=4, fixed_t=1.0, fixed_epsilon=0.0)
    return ds


def test_first_order_convergence_to_the_exact_limit_is_reproduced():
    exact = wo.reference("m", "stochastic", "softmax", 1.0, 4, 1.0, 0.0)
    ds = _synthetic(exact, 0.1)
    ds["mean"].loc[dict(function="m2")] = wo.reference(
        "m2", "stochastic", "softmax", 1.0, 4, 1.0, 0.0) + 0.1 / ds.L
    s = wo.summary(ds)
    case = s["cases"]["stochastic/softmax/2/1/m"]
    assert case["order"] == pytest.approx(1.0, abs=1e-6)
    assert case["limit"] == pytest.approx(exact, abs=1e-4) and case["agrees"]
    assert wo.verdict_word(s, "stochastic") == "Reproduced"
    assert s["n_order_one"] == s["n_fitted"] == 2 and s["by_model"]["stochastic"]["holds"] == 2


def test_the_verdict_says_not_reproduced_when_the_differences_grow_and_the_limit_is_off():
    exact = wo.reference("m", "stochastic", "softmax", 1.0, 4, 1.0, 0.0)
    ds = _synthetic(exact + 0.05, -0.02)
    ds["mean"] = ds["mean"] + 1e-3 * ds.L**0.5          # differences that grow with L
    s = wo.summary(ds)
    case = s["cases"]["stochastic/softmax/2/1/m"]
    assert not case["converges"] and not case["agrees"]
    assert wo.verdict_word(s, "stochastic") == "Not reproduced"


def test_a_limit_off_the_diffusion_is_partly_reproduced():
    exact = wo.reference("m", "stochastic", "softmax", 1.0, 4, 1.0, 0.0)
    ds = _synthetic(exact + 0.01, 0.1)
    ds["mean"].loc[dict(function="m2")] = wo.reference(
        "m2", "stochastic", "softmax", 1.0, 4, 1.0, 0.0) + 0.1 / ds.L
    s = wo.summary(ds)
    m, m2 = (s["cases"][f"stochastic/softmax/2/1/{f}"] for f in ("m", "m2"))
    assert m["converges"] and not m["agrees"] and m2["holds"]
    assert wo.verdict_word(s, "stochastic") == "Partly reproduced"


def test_bad_knobs_are_refused_before_compute():
    with pytest.raises(ValueError, match="Ls must double"):
        wo.compute("smoke", Ls=(4, 8, 12), progress=False)
    with pytest.raises(ValueError, match="models"):
        wo.compute("smoke", models=("stochastic", "other"), progress=False)
    with pytest.raises(ValueError, match="betas"):
        wo.compute("smoke", betas=(9.0,), progress=False)


def test_the_smoke_run_agrees_with_the_exact_two_token_limit():
    """A small run: every case converges and the N = 2 limits agree (Bonferroni at 95%)."""
    s = wo.summary(wo.compute("smoke", progress=False))
    assert all(v["holds"] for v in s["cases"].values())
    assert max(abs(v["limit_z"]) for v in s["cases"].values() if "limit_z" in v) < s["z"]


def test_the_quadrature_resolves_the_steepest_start():
    """The unnormalised flow at beta = 4 sends the start's overlap to its outcome steeply:
    the default nodes agree with twice as many to well below the runs' standard errors."""
    for f in ("m", "m2"):
        coarse = wo.reference(f, "flow", "unnormalized", 4.0, 4, 1.0, 0.0)
        fine = wo.reference(f, "flow", "unnormalized", 4.0, 4, 1.0, 0.0, n_nodes=512)
        assert coarse == pytest.approx(fine, abs=1e-4)


def test_differences_that_change_sign_do_not_count_as_converging():
    ds = _synthetic(0.3, 0.0)
    ds["mean"].loc[dict(function="m")] = 0.3 + np.array([0.05, -0.03, 0.015, -0.008, 0.004])
    case = wo.summary(ds)["cases"]["stochastic/softmax/2/1/m"]
    assert case["n_fit"] >= 3 and not case["converges"]
