"""Tests of the shared argument checks (stochastic_transformers._validation)."""

from __future__ import annotations

import numpy as np
import pytest

from stochastic_transformers._validation import (check_count_array, check_int, check_int_array,
                                                 check_probability_array, check_real,
                                                 check_real_array)


# --------------------------------------------------------------------- scalars
def test_scalar_checks_accept_and_convert():
    assert check_real("x", 2) == 2.0 and isinstance(check_real("x", np.float32(0.5)), float)
    assert check_int("n", np.int64(3), 1) == 3 and isinstance(check_int("n", np.int64(3), 1), int)
    assert check_real("x", 1.0, 0.0, 1.0) == 1.0
    assert check_real("x", 0.999, 0.0, 1.0, strict_max=True) == 0.999


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: check_real("beta", float("nan")), "beta must be a finite real number"),
        (lambda: check_real("beta", float("inf"), 0.0), "beta must be a finite real number"),
        (lambda: check_real("beta", True), "beta must be a finite real number"),
        (lambda: check_real("beta", "1.0"), "beta must be a finite real number"),
        (lambda: check_real("beta", -1.0, 0.0), "beta must be >= 0.0, got -1.0"),
        (lambda: check_real("sigma", 0.0, 0.0, strict_min=True), "sigma must be > 0.0, got 0.0"),
        (lambda: check_real("z", 1.0, -1.0, 1.0, strict_max=True), "z must be >= -1.0 and < 1.0"),
        (lambda: check_int("d", True, 2), "d must be an integer >= 2"),
        (lambda: check_int("d", 3.0, 2), "d must be an integer >= 2"),
        (lambda: check_int("d", 5, 2, 4), "d must be an integer >= 2 and <= 4, got 5"),
    ],
)
def test_scalar_errors_name_the_parameter_and_range(call, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        call()


# ----------------------------------------------------------------- real arrays
def test_real_array_shapes_and_dtype():
    out = check_real_array("z", 0.25, -1.0, 1.0)
    assert out.ndim == 0 and out.dtype == float and float(out) == 0.25
    out = check_real_array("z", [0, 1], -1.0, 1.0)
    assert out.dtype == float and out.tolist() == [0.0, 1.0]
    out = check_real_array("z", np.asarray(0.5), -1.0, 1.0)  # a 0-d array is an array
    assert out.ndim == 0 and float(out) == 0.5
    values = np.array([0.1, 0.2])
    assert check_real_array("z", values) is not values  # a new array, never a view


@pytest.mark.parametrize(
    "value,kwargs,message",
    [
        ([0.1, np.nan], dict(minimum=-1.0, maximum=1.0),
         r"z must be finite real numbers \(>= -1.0 and <= 1.0\)"),
        ([0.1, np.inf], dict(), r"z must be finite real numbers$"),
        ([0.1, -np.inf], dict(minimum=0.0), r"z must be finite real numbers \(>= 0.0\)"),
        (np.nan, dict(), r"z must be a finite real number, got nan"),
        ([True, False], dict(),
         r"z must be a real number or an array of real numbers, got dtype bool"),
        (True, dict(), r"z must be a finite real number, got True"),
        (["a"], dict(),
         r"z must be a real number or an array of real numbers, got dtype <U1"),
        ([0.0, None], dict(),
         r"z must be a real number or an array of real numbers, got dtype object"),
        ([0.5, 1.5], dict(minimum=-1.0, maximum=1.0),
         r"z must be >= -1.0 and <= 1.0, got max 1.5"),
        ([-1.5, 0.5], dict(minimum=-1.0, maximum=1.0),
         r"z must be >= -1.0 and <= 1.0, got min -1.5"),
        ([0.0, 0.5], dict(minimum=0.0, strict_min=True), r"z must be > 0.0, got min 0.0"),
        ([-1.0, 0.5], dict(minimum=-1.0, maximum=1.0, strict_min=True, strict_max=True),
         r"z must be > -1.0 and < 1.0, got min -1.0"),
        (1.5, dict(minimum=-1.0, maximum=1.0), r"z must be >= -1.0 and <= 1.0, got 1.5"),
    ],
)
def test_real_array_errors_name_the_parameter_and_range(value, kwargs, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        check_real_array("z", value, **kwargs)


# -------------------------------------------------------------- integer arrays
def test_int_array():
    out = check_int_array("d", 3, 2)
    assert out.ndim == 0 and out.dtype == np.int64 and int(out) == 3
    assert check_int_array("d", [2, 5], 2).dtype == np.int64
    for value, message in (([2.0, 3.0], "got dtype float64"), ([True, True], "got dtype bool"),
                           (True, "got True"), ([2, 1], "got min 1"), (1, "got 1")):
        with pytest.raises(ValueError, match=rf"^d must be an integer >= 2.*{message}"):
            check_int_array("d", value, 2)


# -------------------------------------------------------------------- counts
def test_count_array():
    assert check_count_array("n", [0, 3, 7.0]).tolist() == [0.0, 3.0, 7.0]  # whole floats pass
    assert check_count_array("n", 4).ndim == 0
    for value in (-1, 1.5, np.nan, np.inf, [2, -3]):
        with pytest.raises(ValueError, match=r"^n must be a non-negative integer count"):
            check_count_array("n", value)
    for value in (True, [True, False], ["1"]):
        with pytest.raises(ValueError, match=r"^n must be a non-negative integer count.*got dtype"):
            check_count_array("n", value)


# ------------------------------------------------------------- probabilities
def test_probability_array():
    out = check_probability_array("p", [0.0, 0.5, np.nan, 1.0])  # NaN: no data, accepted
    assert np.isnan(out[2]) and out[3] == 1.0
    for value in (1.5, -0.1, np.inf, -np.inf, [0.2, 2.0], "x"):
        with pytest.raises(ValueError, match=r"^p must be a probability in \[0, 1\]"):
            check_probability_array("p", value)
