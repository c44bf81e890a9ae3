"""The simulation core: input checks, invariances, exactness in law, reproducibility.

Statistical tests use fixed seeds, so each is deterministic; the quoted false-alarm
rate is the probability that a *correct* implementation fails the test for a seed
drawn at random (it bounds how often a future harmless change of the random streams
could trip it).
"""

import math

import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

from stochastic_transformers import attention as att
from stochastic_transformers import simulate
from stochastic_transformers.classification import outcome_counts
from stochastic_transformers import ModelConfig, RunConfig, configs_from_flat

# ----------------------------------------------------------------------------- input


@pytest.mark.parametrize("kwargs, name", [
    (dict(n_tokens=1), "n_tokens"),
    (dict(d=1), "d"),
    (dict(beta=-0.1), "beta"),
    (dict(beta=float("nan")), "beta"),
    (dict(L=0), "L"),
    (dict(L=2.5), "L"),
    (dict(T=-1.0), "T"),
    (dict(n_traj=0), "n_traj"),
    (dict(attention="linear"), "attention"),
    (dict(values="cauchy"), "values"),
    (dict(model="ode"), "model"),
    (dict(method="fast"), "method"),
    (dict(sigma=0.0), "sigma"),
    (dict(model="hybrid", epsilon=-1.0), "epsilon"),
    (dict(epsilon=0.5), "epsilon"),
    (dict(seed=-3), "seed"),
    (dict(times=[0.5, 9.0]), "times"),
    (dict(z0=1.5), "z0"),
    (dict(tol=0.0), "tol"),
    (dict(T=0.015), "T * L"),
    (dict(n_tokens=3, method="overlap_chain"), "overlap_chain"),
    (dict(values="uniform", method="gaussian_dn"), "gaussian_dn"),
    (dict(B=np.eye(3)), "B"),
    (dict(x0=np.ones((2, 4))), "x0"),
    (dict(n_threads=0), "n_threads"),
])
def test_invalid_input_names_the_parameter(kwargs, name):
    base = dict(n_tokens=2, d=4, beta=1.0, n_traj=3, L=10, T=1.0)
    base.update(kwargs)
    with pytest.raises(ValueError, match=name.replace("*", r"\*")):
        simulate(*configs_from_flat(**base))


# ----------------------------------------------------------------------------- invariances


def _random_cloud(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _layer(x, v, b, beta, softmax, h=0.3):
    """One literal layer on a copy of ``x`` (the kernel works in place on scratch buffers)."""
    n, d = x.shape
    out = x.copy()
    att.layer_literal(out, v, h, b, beta, softmax, np.empty((n, d)), np.empty((n, d)),
                      np.empty((n, d)), np.empty(n), False, np.empty(n))
    return out


def _random_rotation(rng, d):
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 5), d=st.integers(2, 6),
       beta=st.floats(0.0, 8.0), softmax=st.booleans())
def test_layer_is_rotation_equivariant(seed, n, d, beta, softmax):
    """layer(Ox, O V O^T, O B O^T) = O layer(x, V, B) for every rotation O."""
    rng = np.random.default_rng(seed)
    x = _random_cloud(rng, n, d)
    v = rng.standard_normal((d, d))
    b = rng.standard_normal((d, d))
    o = _random_rotation(rng, d)
    x1 = _layer(x, v, b, beta, softmax)
    x2 = _layer(x @ o.T, o @ v @ o.T, o @ b @ o.T, beta, softmax)
    np.testing.assert_allclose(x2, x1 @ o.T, atol=1e-11)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 5), d=st.integers(2, 6),
       beta=st.floats(0.0, 8.0), softmax=st.booleans())
def test_layer_commutes_with_permutations_and_keeps_norms(seed, n, d, beta, softmax):
    rng = np.random.default_rng(seed)
    x = _random_cloud(rng, n, d)
    v = rng.standard_normal((d, d))
    perm = rng.permutation(n)
    x1 = _layer(x, v, np.eye(d), beta, softmax)
    x2 = _layer(x[perm], v, np.eye(d), beta, softmax)
    np.testing.assert_allclose(x2, x1[perm], atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(x1, axis=1), 1.0, atol=1e-14)


def test_simulate_permutation_of_initial_tokens():
    """Same seed, permuted x0: the same V's act, so the Gram matrix is permuted."""
    rng = np.random.default_rng(3)
    x0 = _random_cloud(rng, 4, 5)
    perm = np.array([2, 0, 3, 1])
    a = simulate(ModelConfig(d=5, beta=2.0),
                 RunConfig(n_tokens=4, n_traj=3, L=20, T=1.0, x0=x0, method="literal", seed=9))
    b = simulate(ModelConfig(d=5, beta=2.0),
                 RunConfig(n_tokens=4, n_traj=3, L=20, T=1.0, x0=x0[perm], method="literal",
                           seed=9))
    np.testing.assert_allclose(b.gram.values, a.gram.values[:, perm][:, :, perm], atol=1e-10)


def test_tokens_stay_on_the_sphere_over_a_million_layers():
    ds = simulate(ModelConfig(d=4, beta=1.0),
                  RunConfig(n_tokens=3, n_traj=2, L=1000, T=1000.0, method="gaussian_dn", seed=1))
    assert ds.attrs["n_layers"] == 1_000_000
    np.testing.assert_allclose(np.linalg.norm(ds.tokens.values, axis=-1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", ["literal", "gaussian_dn"])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_no_overflow_up_to_beta_50(method, attention):
    ds = simulate(ModelConfig(d=4, beta=50.0, attention=attention),
                  RunConfig(n_tokens=3, n_traj=8, L=10, T=2.0, method=method, times=[0.1, 1.0],
                            seed=2))
    assert np.all(np.isfinite(ds.gram_t.values)) and np.all(np.isfinite(ds.gram.values))
    ds = simulate(ModelConfig(d=4, beta=50.0, attention=attention),
                  RunConfig(n_tokens=2, n_traj=8, L=10, T=2.0, seed=2, stop_level=0))
    assert np.all(np.isfinite(ds.one_minus_overlap.values))


# ----------------------------------------------------------------------------- exactness


def _clip(z):
    # Near the poles the literal method can only resolve 1 -+ z down to ~1e-16 (then the
    # tokens are numerically equal); compare the laws at a resolution both methods have.
    return np.clip(z, -1 + 1e-9, 1 - 1e-9)


# Each case runs KS tests at two times; Bonferroni over every KS test in this module at
# family-wise level 1e-3: the false-alarm rate of the whole set is below 0.1%.
KS_CASES = [
    # (n_tokens, d, beta, attention, model, epsilon, fast method)
    (2, 4, 1.0, "softmax", "stochastic", 0.0, "overlap_chain"),
    (2, 2, 2.0, "unnormalized", "stochastic", 0.0, "overlap_chain"),
    (2, 3, 0.5, "softmax", "stochastic", 0.0, "overlap_chain"),
    (2, 7, 3.0, "unnormalized", "stochastic", 0.0, "overlap_chain"),
    (2, 4, 1.0, "softmax", "stochastic", 0.0, "gaussian_dn"),
    (3, 4, 2.0, "softmax", "stochastic", 0.0, "gaussian_dn"),
    (4, 3, 1.0, "unnormalized", "stochastic", 0.0, "gaussian_dn"),
    (2, 3, 2.0, "unnormalized", "hybrid", 0.7, "overlap_chain"),
    (2, 5, 1.0, "softmax", "hybrid", 1.5, "overlap_chain"),
]
N_KS = 2 * len(KS_CASES)


@pytest.mark.parametrize("case", KS_CASES, ids=lambda c: f"N{c[0]}-d{c[1]}-b{c[2]}-{c[3][:4]}-{c[4][:4]}-{c[6]}")
def test_fast_paths_agree_in_law_with_the_literal_model(case):
    n_tok, d, beta, attention, model, eps, method = case
    common = dict(n_traj=3000, L=10, T=2.0, attention=attention, model=model, epsilon=eps,
                  times=[0.5, 2.0])
    ref = simulate(*configs_from_flat(n_tokens=n_tok, d=d, beta=beta, method="literal", seed=101,
                                      **common))
    fast = simulate(*configs_from_flat(n_tokens=n_tok, d=d, beta=beta, method=method, seed=202,
                                       **common))
    assert fast.attrs["method"] == method
    for k in range(2):
        a = _clip(ref.gram_t.values[:, k, 0, 1])
        b = _clip(fast.gram_t.values[:, k, 0, 1])
        p = stats.ks_2samp(a, b).pvalue
        assert p > 1e-3 / N_KS, f"KS p = {p:.2e} at t = {common['times'][k]}"


def test_auto_picks_the_fastest_exact_method():
    pick = lambda **kw: simulate(*configs_from_flat(**{**dict(n_tokens=2, d=4, beta=1.0, n_traj=1,
                                                    L=1, T=0.0),
                                                    **kw})).attrs["method"]  # noqa: E731
    assert pick() == "overlap_chain"
    assert pick(n_tokens=3) == "reduced"  # the two-cluster reduction (tests/test_clusters.py)
    assert pick(n_tokens=3, split=(1, 2)) == "cluster_chain"
    assert pick(values="uniform") == "literal"
    assert pick(n_tokens=3, values="uniform") == "literal"
    # The d*N path where it is measured faster (d >= 2N), the literal map elsewhere.
    assert pick(n_tokens=3, B=np.diag([1.0, 2.0, 1.0, 1.0])) == "literal"
    assert pick(n_tokens=3, d=6, B=np.diag([1.0, 2.0, 1.0, 1.0, 1.0, 1.0])) == "gaussian_dn"
    assert pick(n_tokens=5, B=np.diag([1.0, 2.0, 1.0, 1.0])) == "literal"  # N >= d: d*N saves nothing
    assert pick(model="hybrid", epsilon=1.0) == "overlap_chain"
    assert pick(model="hybrid", epsilon=1.0, n_tokens=3) == "literal"


def test_chain_keeps_full_relative_precision_near_both_poles():
    """Near a pole one layer acts linearly on the small gap: s'/s must not depend on s.

    Double precision can only hold such tiny gaps if the chain never forms 1 - z or
    1 + z by cancellation; this checks that from 1e-3 down to 1e-150.
    """
    z = np.array([0.3, -1.1, 0.7, 0.2, 1.4, -0.5, 0.8])
    ratios_single, ratios_anti = [], []
    for gap in (1e-8, 1e-40, 1e-150):
        big = math.sqrt(1.0 - gap * gap)
        ksum, kdiff = att.pair_weights(gap, 1.5, True)
        s1, _ = att.pair_layer_stochastic(gap, big, 0.3 * ksum, 0.3 * kdiff, z)
        ratios_single.append(s1 / gap)
        ksum, kdiff = att.pair_weights(big, 1.5, True)
        _, c1 = att.pair_layer_stochastic(big, gap, 0.3 * ksum, 0.3 * kdiff, z)
        ratios_anti.append(c1 / gap)
    np.testing.assert_allclose(ratios_single, ratios_single[0], rtol=1e-12)
    np.testing.assert_allclose(ratios_anti, ratios_anti[0], rtol=1e-12)
    assert 0.1 < ratios_single[0] < 10 and 0.1 < ratios_anti[0] < 10


def test_two_tokens_at_1e_minus_15_still_move_apart():
    """No artificial absorption: a pair 1e-15 apart keeps a resolved, evolving gap."""
    theta = 1e-15
    x0 = np.array([[1.0, 0.0, 0.0, 0.0], [math.cos(theta), math.sin(theta), 0.0, 0.0]])
    ds = simulate(ModelConfig(d=4, beta=0.7),
                  RunConfig(n_tokens=2, n_traj=200, L=10, T=5.0, x0=x0, times=[0.0, 5.0], seed=4))
    gap0 = ds.one_minus_overlap_t.values[:, 0]
    gap5 = ds.one_minus_overlap_t.values[:, 1]
    np.testing.assert_allclose(gap0, theta**2 / 2, rtol=1e-6)  # 1 - cos t = t^2/2
    assert np.all(gap5 > 0) and len(np.unique(gap5)) == 200
    # log-gaps spread like a random walk: they must not all have collapsed to one value
    assert np.std(np.log(gap5)) > 1.0


# ----------------------------------------------------------------------------- reproducibility


@pytest.mark.parametrize("n_tokens, method", [(2, "overlap_chain"), (3, "gaussian_dn"), (3, "literal")])
def test_same_bits_whatever_threads_and_slicing(n_tokens, method):
    kw = dict(n_traj=40, L=10, T=1.0, method=method, seed=5, times=[0.3, 1.0])
    whole = simulate(*configs_from_flat(n_tokens=n_tokens, d=4, beta=1.0, n_threads=2, **kw))
    single = simulate(*configs_from_flat(n_tokens=n_tokens, d=4, beta=1.0, n_threads=1, **kw))
    np.testing.assert_array_equal(whole.gram.values, single.gram.values)
    np.testing.assert_array_equal(whole.gram_t.values, single.gram_t.values)
    tail = simulate(*configs_from_flat(n_tokens=n_tokens, d=4, beta=1.0, **{**kw, "n_traj": 15},
                                       first_trajectory=25))
    np.testing.assert_array_equal(whole.gram.values[25:], tail.gram.values)
    other = simulate(*configs_from_flat(n_tokens=n_tokens, d=4, beta=1.0, **{**kw, "seed": 6}))
    assert not np.array_equal(whole.gram.values, other.gram.values)


def test_recording_times_does_not_change_the_trajectory():
    a = simulate(ModelConfig(d=5, beta=1.0),
                 RunConfig(n_tokens=2, n_traj=30, L=10, T=2.0, seed=8, stop_level=0))
    b = simulate(ModelConfig(d=5, beta=1.0),
                 RunConfig(n_tokens=2, n_traj=30, L=10, T=2.0, seed=8, times=[2.0, 0.0, 1.0]))
    np.testing.assert_array_equal(a.gram.values, b.gram.values)
    np.testing.assert_array_equal(b.gram_t.values[:, 0], b.gram.values)
    assert list(b.time.values) == [2.0, 0.0, 1.0]


def test_progress_bar_does_not_change_results():
    a = simulate(ModelConfig(d=4, beta=1.0), RunConfig(n_tokens=3, n_traj=60, L=10, T=1.0, seed=8))
    b = simulate(ModelConfig(d=4, beta=1.0),
                 RunConfig(n_tokens=3, n_traj=60, L=10, T=1.0, seed=8, progress=True))
    np.testing.assert_array_equal(a.gram.values, b.gram.values)


def test_dataset_records_every_parameter():
    ds = simulate(ModelConfig(d=3, beta=0.5, attention="unnormalized"),
                  RunConfig(n_tokens=2, n_traj=4, L=10, T=1.0, seed=3))
    for key in ("n_tokens", "d", "beta", "n_traj", "L", "T", "attention", "values", "sigma",
                "model", "epsilon", "method", "seed", "code_version", "wall_time_s",
                "stopped_fraction"):
        assert key in ds.attrs
    assert ds.gram.dims == ("trajectory", "i", "j")
    np.testing.assert_array_equal(ds.gram.values[:, 0, 0], 1.0)


# --------------------------------------------------------------------------------------
# Unnormalised attention at huge beta: rescaled exactly, never NaN
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_tokens, d, beta, method", [
    (2, 4, 200.0, "overlap_chain"), (2, 4, 800.0, "overlap_chain"), (4, 4, 800.0, "gaussian_dn"),
    (4, 4, 800.0, "literal"), (3, 5, 1e4, "gaussian_dn")])
def test_unnormalised_attention_at_huge_beta_stays_finite(n_tokens, d, beta, method):
    ds = simulate(ModelConfig(d=d, beta=beta, attention="unnormalized"),
                  RunConfig(n_tokens=n_tokens, n_traj=20, L=10, T=2.0, method=method, seed=1))
    assert np.all(np.isfinite(ds.gram.values))
    diag = np.diagonal(ds.gram.values, axis1=1, axis2=2)
    np.testing.assert_allclose(diag, 1.0, atol=1e-12)


def test_unnormalised_rescaling_is_the_same_layer():
    """Above the rescaling threshold the layer equals normalize(x + h V A) computed in
    extended precision (here: beta small enough that the plain formula is finite)."""
    rng = np.random.default_rng(5)
    n, d, h = 4, 3, 0.1
    x = _random_cloud(rng, n, d)
    v = rng.standard_normal((d, d))
    beta = 1.2 * att.USA_SHIFT_FROM  # every logit on the diagonal is beta > the threshold
    out = _layer(x, v, np.eye(d), beta, False, h=h)
    # reference with the largest logit of each row factored out by hand
    logits = beta * x @ x.T
    top = logits.max(axis=1, keepdims=True)
    scaled = np.exp(logits - top) @ x / n
    ref = np.exp(-top) * x + h * scaled @ v.T
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(out, ref, atol=1e-12)


def test_pair_chain_rescaling_leaves_the_step_unchanged():
    z = np.array([0.3, -1.1, 0.7, 0.2, 1.4, -0.5, 0.9])
    for s_half in (0.2, 0.7, 0.99):
        c_half = np.sqrt(1 - s_half**2)
        beta = 0.9 * att.USA_PAIR_SHIFT_FROM  # below the threshold: compare both forms
        ksum, kdiff = att.pair_weights(s_half, beta, False)
        h = 1e-40  # keeps the unscaled step finite at this beta
        plain = att.pair_layer_stochastic(s_half, c_half, h * ksum, h * kdiff, z)
        lam = 0.5 * np.exp(beta)
        scaled = att.pair_layer_stochastic_scaled(s_half, c_half, 1.0 / lam, h * ksum / lam,
                                                  h * kdiff / lam, z)
        np.testing.assert_allclose(plain, scaled, rtol=1e-12)
        one, ks, kd = att.pair_weights_scaled(s_half, beta, False)
        assert (one, ks, kd) == (1.0, ksum, kdiff)  # below the threshold: same bits


def test_a_call_that_cannot_fit_in_memory_is_refused_before_compute(monkeypatch):
    from stochastic_transformers import memory as sim

    with pytest.raises(ValueError, match=r"n_traj=10,000,000,000,000 needs about .* GiB.*"
                                         r"first_trajectory"):
        simulate(ModelConfig(d=4, beta=1.0), RunConfig(n_tokens=2, n_traj=10**13, L=10, T=1.0))
    # the advice is right: pieces of the advised size fit
    monkeypatch.setattr(sim, "available_memory", lambda: 10**6)
    with pytest.raises(ValueError, match="pieces of at most") as info:
        simulate(ModelConfig(d=4, beta=1.0), RunConfig(n_tokens=3, n_traj=100_000, L=2, T=1.0))
    fits = int(str(info.value).split("pieces of at most ")[1].split(" ")[0].replace(",", ""))
    assert sim.memory_estimate("gaussian_dn", fits, 3, 4, 0) <= 10**6
    simulate(ModelConfig(d=4, beta=1.0), RunConfig(n_tokens=3, n_traj=fits, L=2, T=1.0))  # runs


def test_memory_estimate_bounds_what_simulate_allocates():
    import tracemalloc

    from stochastic_transformers import memory as sim

    for n_tok, times in ((2, [0.5, 1.0]), (4, [0.25, 0.5, 1.0]), (2, None)):
        simulate(ModelConfig(d=4, beta=1.0),
                 RunConfig(n_tokens=n_tok, n_traj=10, L=4, T=1.0, times=times, seed=0))  # compile
        tracemalloc.start()
        ds = simulate(ModelConfig(d=4, beta=1.0),
                      RunConfig(n_tokens=n_tok, n_traj=20_000, L=4, T=1.0, times=times, seed=0))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        est = sim.memory_estimate(ds.attrs["method"], 20_000, n_tok, 4,
                                  0 if times is None else len(times))
        assert peak <= 1.5 * est, (n_tok, times, peak, est)
