"""The model and run configurations: each validates its own fields once, names a bad one,
and the simulator takes both whole."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from stochastic_transformers import ModelConfig, RunConfig, configs_from_flat, simulate
from stochastic_transformers.config import MODEL_KINDS, VALUE_LAWS


def test_a_model_config_is_frozen_hashable_and_compares_by_value():
    a = ModelConfig(d=4, beta=2, B=np.eye(4))
    b = ModelConfig(d=4, beta=2.0, B=[[float(i == j) for j in range(4)] for i in range(4)])
    assert a == b and hash(a) == hash(b)
    assert isinstance(a.beta, float) and a.b_is_identity
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.beta = 3.0
    assert dataclasses.replace(a, beta=3.0).beta == 3.0


@pytest.mark.parametrize("fields, name", [
    (dict(d=1, beta=1.0), "d"),
    (dict(d=3, beta=-1.0), "beta"),
    (dict(d=3, beta=float("nan")), "beta"),
    (dict(d=3, beta=1.0, kind="transformer"), "model"),
    (dict(d=3, beta=1.0, attention="linear"), "attention"),
    (dict(d=3, beta=1.0, values="cauchy"), "values"),
    (dict(d=3, beta=1.0, sigma=0.0), "sigma"),
    (dict(d=3, beta=1.0, epsilon=0.5), "epsilon"),
    (dict(d=3, beta=1.0, B=np.eye(2)), "B"),
    (dict(d=3, beta=1.0, n_heads=2), "n_heads"),
    (dict(d=3, beta=1.0, kind="random_attention", n_heads=0), "n_heads"),
    (dict(d=3, beta=1.0, kind="random_attention", sigma_qk=-1.0), "sigma_qk"),
    (dict(d=3, beta=1.0, kind="random_attention", eta=0.0), "eta"),
    (dict(d=3, beta=1.0, kind="random_attention", values="uniform"), "values"),
    (dict(d=3, beta=1.0, kind="random_attention", attention="unnormalized"), "softmax"),
    (dict(d=3, beta=1.0, kind="random_attention", qk_law="uniform"), "qk_law"),
    (dict(d=3, beta=1.0, kind="random_attention", mean_v=(1.0, 2.0)), "mean_v"),
    (dict(d=3, beta=1.0, kind="random_attention", mean_qk=2e3), "mean_qk"),
    (dict(d=3, beta=1.0, mean_v=0.5), "mean_v"),
])
def test_a_bad_model_field_is_named(fields, name):
    with pytest.raises(ValueError, match=name):
        ModelConfig(**fields)


@pytest.mark.parametrize("fields, name", [
    (dict(n_tokens=1), "n_tokens"),
    (dict(n_traj=0), "n_traj"),
    (dict(L=0), "L"),
    (dict(T=-1.0), "T"),
    (dict(T=0.15), "whole number of layers"),
    (dict(seed=-1), "seed"),
    (dict(method="fast"), "method"),
    (dict(times=[0.5, 2.0]), "times"),
    (dict(z0=0.1, n_tokens=3), "z0"),
    (dict(z0=1.5), "z0"),
    (dict(split=(1, 2)), "split"),
    (dict(split=(1, 1), x0=np.eye(2)), "x0 and split"),
    (dict(stop_level=2.0), "stop_level"),
    (dict(tol=0.0), "tol"),
    (dict(n_threads=0), "n_threads"),
    (dict(first_trajectory=-1), "first_trajectory"),
])
def test_a_bad_run_field_is_named(fields, name):
    base = dict(n_tokens=2, n_traj=4, L=10, T=1.0)
    with pytest.raises(ValueError, match=name):
        RunConfig(**{**base, **fields})


def test_what_ties_the_model_to_the_run_is_checked_before_compute():
    run = RunConfig(n_tokens=2, n_traj=3, L=10, T=1.0, x0=np.eye(3)[:2])
    with pytest.raises(ValueError, match=r"x0 must have shape \(2, 4\)"):
        simulate(ModelConfig(d=4, beta=1.0), run)
    with pytest.raises(ValueError, match="split"):
        simulate(ModelConfig(d=4, beta=1.0, kind="random_attention"),
                 RunConfig(n_tokens=3, n_traj=3, L=10, T=1.0, split=(1, 2)))
    with pytest.raises(TypeError, match="ModelConfig and a RunConfig"):
        simulate(2, 4)


def test_flat_fields_split_into_the_two_configurations():
    model, run = configs_from_flat(n_tokens=3, d=4, beta=2.0, model="hybrid", epsilon=0.5,
                                   n_traj=5, L=10, T=1.0, seed=7)
    assert model == ModelConfig(d=4, beta=2.0, kind="hybrid", epsilon=0.5)
    assert (run.n_tokens, run.n_traj, run.seed) == (3, 5, 7)
    with pytest.raises(ValueError, match="unknown field.*colour"):
        configs_from_flat(d=4, beta=1.0, n_tokens=2, n_traj=1, L=1, T=1.0, colour="red")


def test_every_model_kind_and_value_law_runs():
    for kind in MODEL_KINDS:
        for law in (VALUE_LAWS if kind == "stochastic" else ("gaussian",)):
            extra = dict(epsilon=0.3) if kind == "hybrid" else {}
            ds = simulate(ModelConfig(d=3, beta=1.0, kind=kind, values=law, **extra),
                          RunConfig(n_tokens=3, n_traj=2, L=4, T=1.0))
            assert ds.attrs["model"] == kind and np.all(np.isfinite(ds.gram.values))
