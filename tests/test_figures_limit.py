"""The depth-limit figures: thm1 (weak convergence) and universality (law of V).

Each figure's ``compute`` runs once at smoke scale (module fixtures, in-process); the
statistical checks use fixed seeds, so they are deterministic.
"""

import math

import numpy as np
import pytest

from stochastic_transformers import simulate
from stochastic_transformers.figures import thm1, universality
from stochastic_transformers import ModelConfig, RunConfig
from stochastic_transformers.stats import fit_order


@pytest.fixture(scope="module")
def thm1_ds():
    return thm1.compute("smoke", progress=False)


@pytest.fixture(scope="module")
def univ_ds():
    return universality.compute("smoke", progress=False)


# ----------------------------------------------------------------------------- thm1


def test_thm1_smoke_variables(thm1_ds):
    ds = thm1_ds
    knobs = thm1.SCALES["smoke"]
    assert list(ds.L.values) == list(knobs["Ls"])
    for var in ("reference", "reference_error", "mean_discrete", "mean_plain", "bias",
                "bias_se", "bias_se_plain", "weak_error", "weak_error_se", "fit_used",
                "order", "order_se", "n_traj", "cell_time_s"):
        assert var in ds, var
    assert ds.weak_error.dims == ("L",)
    assert ds.bias.dims == ("function", "time", "L")
    # the reference is the Kolmogorov solution, far more precise than the Monte Carlo
    assert float(ds.reference_error.max()) < 1e-6
    assert 0.0 < float(ds.reference.sel(function="z", time=1.0)) < 1.0
    assert np.all(ds.bias_se.values > 0) and np.all(np.isfinite(ds.bias.values))
    assert np.all(ds.weak_error.values >= 0)
    assert int(ds.n_traj.min()) == knobs["n_traj"]
    # the control variate pays off once L is moderate
    assert np.all(ds.bias_se.sel(L=30).values < ds.bias_se_plain.sel(L=30).values)
    # the discrete model converges: the error shrinks from L = 3 to L = 30
    assert float(ds.weak_error.sel(L=30)) < float(ds.weak_error.sel(L=3))
    order = float(ds.order)
    assert np.isfinite(order) and 0.3 < order < 2.5
    s = thm1.summary(ds)
    assert s["n_traj"] == knobs["n_traj"] and set(s["weak_error"]) == set(knobs["Ls"])


def test_thm1_chain_matches_simulate_bit_for_bit():
    kw = dict(L=10, times=(0.5, 1.0), beta=1.0, d=4, z0=0.3, seed=11)
    z, cv = thm1.run_chain(64, first_trajectory=5, **kw)
    ds = simulate(ModelConfig(d=4, beta=1.0),
                  RunConfig(n_tokens=2, n_traj=64, L=10, T=1.0, z0=0.3, times=[0.5, 1.0], seed=11,
                            first_trajectory=5))
    ref = 1.0 - ds.one_minus_overlap_t.values
    assert np.allclose(z, ref, rtol=0, atol=1e-15)
    assert np.array_equal(z, ds.gram_t.values[..., 0, 1])
    assert cv.shape == (64, 2, 2) and np.all(np.isfinite(cv))


def test_thm1_control_variate_has_mean_zero():
    # E[C] = 0 exactly; 6000 trajectories at L = 5 must not see a mean 4 s.e. away.
    _, cv = thm1.run_chain(6000, L=5, times=(1.0,), beta=1.0, d=4, z0=0.0, seed=3)
    c = cv.reshape(cv.shape[0], -1)
    z = c.mean(0) / (c.std(0, ddof=1) / math.sqrt(c.shape[0]))
    assert np.all(np.abs(z) < 4.0), z


def test_fit_order_recovers_a_known_order():
    rng = np.random.default_rng(0)
    L = np.array([3, 10, 30, 100, 300, 1000], dtype=float)
    true = 0.4 * L**-1.5
    se = 0.02 * true
    err = true + se * rng.standard_normal(L.size)
    r = fit_order(L, err, se, min_snr=3, L_min=1)
    assert r["used"].all()
    assert abs(r["order"] - 1.5) < 4 * r["order_se"] and r["order_se"] < 0.05
    assert abs(math.exp(r["log_constant"]) - 0.4) < 0.05
    # exact data: exact order, zero spread
    r = fit_order(L, 2.0 / L, np.zeros_like(L))
    assert r["order"] == pytest.approx(1.0, abs=1e-12)
    # selection: points below min_snr and below L_min are left out
    se2 = se.copy()
    se2[-1] = true[-1]  # snr 1 at L = 1000
    r = fit_order(L, true, se2, min_snr=3, L_min=10)
    assert list(r["used"]) == [False, True, True, True, True, False]
    # too few points: no order
    r = fit_order(L[:2], true[:2], se[:2], L_min=10)
    assert math.isnan(r["order"])
    with pytest.raises(ValueError, match="se"):
        fit_order(L, true, -se)


@pytest.mark.parametrize("overrides, name", [
    (dict(times=(0.5,)), "times"),          # 0.5 is not a whole number of layers at L = 3
    (dict(times=(2.0, 1.0)), "times"),
    (dict(functions=("sin",)), "functions"),
    (dict(z0=1.0), "z0"),
    (dict(Ls=()), "Ls"),
    (dict(Ls=(0, 10)), "Ls"),
    (dict(n_traj=1), "n_traj"),
    (dict(beta=-1.0), "beta"),
    (dict(d=1), "d"),
    (dict(attention="linear"), "attention"),
    (dict(fit_min_snr=-1.0), "fit_min_snr"),
    (dict(fit_L_min=0), "fit_L_min"),
    (dict(bogus=3), "bogus"),
])
def test_thm1_invalid_knobs_raise(overrides, name):
    with pytest.raises(ValueError, match=name):
        thm1.compute("smoke", progress=False, **overrides)


# ----------------------------------------------------------------------------- universality


def test_universality_smoke_variables(univ_ds):
    ds = univ_ds
    knobs = universality.SCALES["smoke"]
    assert list(ds["values"].values) == list(universality.LAWS)
    assert list(ds.beta.values) == list(knobs["betas"])
    assert ds.p_antipodal.dims == ("values", "beta")
    for var in ("p_antipodal_low", "p_antipodal_high", "p_unclustered", "p_theory",
                "p_theory_fine", "z_score", "max_abs_z", "chi2_between_laws",
                "p_value_between_laws", "p_value_between_laws_total", "p_antipodal_L", "p_theory_conv", "cell_time_s", "p_antipodal_horizon"):
        assert var in ds, var
    p = ds.p_antipodal.values
    assert np.all((0 <= p) & (p <= 1))
    assert np.all(ds.p_antipodal_low.values <= p) and np.all(p <= ds.p_antipodal_high.values)
    # beta = 0: the antipodal pole repels, nobody ends there, and the theory says 0
    assert np.all(ds.n_antipodal.sel(beta=0.0).values == 0)
    assert float(ds.p_theory.sel(beta=0.0)) == 0.0
    assert 0.05 < float(ds.p_theory.sel(beta=1.0)) < 0.2
    assert np.all(np.isfinite(ds.z_score.values))
    pv = ds.p_value_between_laws.values
    assert np.all((0 <= pv) & (pv <= 1))
    assert int(ds.dof_between_laws.sel(beta=0.0)) == 0  # no information at beta = 0
    # the L-convergence panel holds the extra L and the main one
    assert sorted(ds.L_conv.values) == sorted(set(knobs["convergence_Ls"]) | {knobs["L"]})
    # below beta_c the horizon check runs the Gaussian chain at T, 2T, 4T
    assert list(ds.beta_below_c.values) == [0.5]
    assert list(ds.horizon.values) == [knobs["T"] * f for f in knobs["horizon_factors"]]
    ph = ds.p_antipodal_horizon.values
    assert np.all((0 <= ph) & (ph <= 1))
    s = universality.summary(ds)
    assert set(s["max_abs_z"]) == set(universality.LAWS)
    assert 0 <= s["max_unclustered"] <= 1


@pytest.mark.parametrize("overrides, name", [
    (dict(values=("cauchy",)), "values"),
    (dict(values=("uniform", "uniform")), "values"),
    (dict(betas=(-1.0,)), "betas"),
    (dict(betas=()), "betas"),
    (dict(betas=(25.0,)), "betas"),         # the limit at T is tabulated up to beta = 20
    (dict(convergence_beta=25.0), "convergence_beta"),
    (dict(L=0), "L"),
    (dict(T=0.05), "T"),                    # 0.05 * 10 layers is not whole
    (dict(n_traj=0), "n_traj"),
    (dict(gaussian_method="fast"), "gaussian_method"),
    (dict(tol=0.0), "tol"),
    (dict(convergence_Ls=(0,)), "convergence_Ls"),
    (dict(convergence_beta=-2.0), "convergence_beta"),
    (dict(d=1), "d"),
    (dict(horizon_factors=(2, 1)), "horizon_factors"),
    (dict(bogus=1), "bogus"),
])
def test_universality_invalid_knobs_raise(overrides, name):
    with pytest.raises(ValueError, match=name):
        universality.compute("smoke", progress=False, **overrides)


def test_thm1_chain_restores_numba_thread_count():
    import numba

    from stochastic_transformers.figures import thm1

    before = numba.get_num_threads()
    thm1.run_chain(50, L=10, times=(1.0,), beta=1.0, d=4, n_threads=1)
    assert numba.get_num_threads() == before


@pytest.mark.parametrize("module, ds_name, knobs", [
    (thm1, "thm1_ds", ("beta", "d", "attention", "sigma", "z0")),
    (universality, "univ_ds", ("d", "L", "T", "attention", "tol", "gaussian_method")),
])
def test_knobs_are_read_as_fixed_attributes_and_old_plain_names_still_work(module, ds_name,
                                                                           knobs, request):
    """One name per knob: the sweep's fixed_<knob>; results written when these modules also
    wrote the plain name (and files carrying only that) still summarise, cost and draw."""
    import matplotlib.pyplot as plt

    from stochastic_transformers.figures.base import knob_attr

    ds = request.getfixturevalue(ds_name)
    for name in knobs:
        assert f"fixed_{name}" in ds.attrs and name not in ds.attrs, name
    old = ds.copy()
    old.attrs = {(k.removeprefix("fixed_") if k.removeprefix("fixed_") in knobs else k): v
                 for k, v in ds.attrs.items()}
    for name in knobs:
        assert knob_attr(old, name) == knob_attr(ds, name)
    assert module.summary(old).keys() == module.summary(ds).keys()
    assert module.cost("paper", old) == module.cost("paper", ds)
    plt.close(module.plot(old))
    with pytest.raises(KeyError, match="fixed_nothing"):
        knob_attr(ds, "nothing")
    assert knob_attr(ds, "nothing", None) is None
