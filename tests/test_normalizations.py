"""The other normalisations and the causal mask: the layers against a direct numpy
computation, their one-step moments against the limits of
:mod:`stochastic_transformers.normalizations`, and the thresholds against Theorem 2."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
import scipy.stats

from stochastic_transformers import ModelConfig, RunConfig, simulate
from stochastic_transformers import normalizations as nz
from stochastic_transformers import theory as th
from stochastic_transformers.classification import direction_gram, outcome_counts

NORMS = ("post", "pre", "peri", "ngpt")
VARIANTS = [(n, c) for n in NORMS for c in (False, True) if (n, c) != ("post", False)]


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _attention(x, beta, causal):
    """Softmax attention of the directions of ``x`` (..., N, d), B = I, optionally causal."""
    y = _unit(x)
    logits = beta * np.einsum("...ia,...ja->...ij", y, y)
    if causal:
        n = x.shape[-2]
        logits = np.where(np.tril(np.ones((n, n), dtype=bool)), logits, -np.inf)
    w = np.exp(logits - logits.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return np.einsum("...ij,...ja->...ia", w, y)


def _layer(x, u, step, norm):
    """One residual update of tokens ``x`` by block outputs ``u`` (both (..., N, d))."""
    if norm in ("peri", "ngpt"):
        u = _unit(u)
    out = x + step * u
    return _unit(out) if norm in ("post", "ngpt") else out


def _start(n_tok, d, seed):
    return _unit(np.random.default_rng(seed).standard_normal((n_tok, d)))


# ------------------------------------------------------------------ the layers themselves
def test_the_default_layer_is_the_papers():
    model = ModelConfig(d=4, beta=1.0)
    assert model.norm == "post" and model.causal is False and model.is_post_unmasked
    ds = simulate(model, RunConfig(n_tokens=2, n_traj=4, L=5, T=1.0))
    assert "norm" not in ds.attrs and "causal" not in ds.attrs


@pytest.mark.parametrize("norm, causal", [("post", False)] + VARIANTS)
def test_deterministic_flow_equals_a_direct_computation(norm, causal):
    """The hybrid model at epsilon = 0 (V = I, step 1/L) against a numpy loop of the same
    map: every layer, every normalisation, with and without the mask, B = I and B random."""
    d, n_tok, L, T = 3, 4, 10, 2.0
    x0 = _start(n_tok, d, 5)
    for B in (None, np.random.default_rng(1).standard_normal((d, d))):
        model = ModelConfig(d=d, beta=1.7, kind="hybrid", norm=norm, causal=causal,
                            B=None if B is None else B.tolist())
        ds = simulate(model, RunConfig(n_tokens=n_tok, n_traj=1, L=L, T=T, x0=x0))
        x = x0.copy()
        for _ in range(int(L * T)):
            y = _unit(x)
            logits = 1.7 * y @ (np.eye(d) if B is None else B) @ y.T
            if causal:
                logits = np.where(np.tril(np.ones((n_tok, n_tok), dtype=bool)), logits, -np.inf)
            w = np.exp(logits - logits.max(axis=1, keepdims=True))
            w /= w.sum(axis=1, keepdims=True)
            x = _layer(x, w @ y, 1.0 / L, norm)
        np.testing.assert_allclose(ds.tokens.values[0], x, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ds.gram.values[0], x @ x.T, rtol=0, atol=1e-12)


def _one_layer_samples(norm, causal, x0, h, n, seed):
    """The Gram entry (0, 1) and the first token's squared norm after one layer of the
    stochastic model, drawn directly with numpy (Gaussian V)."""
    v = np.random.default_rng(seed).standard_normal((n,) + (x0.shape[1],) * 2)
    att = _attention(x0, 1.3, causal)
    x = _layer(x0[None], np.einsum("tab,ib->tia", v, att), h, norm)
    return (np.einsum("ta,ta->t", x[:, 0], x[:, 1]),
            np.einsum("ta,ta->t", x[:, 0], x[:, 0]))


@pytest.mark.parametrize("norm, causal", VARIANTS)
@pytest.mark.parametrize("method", ["literal", "gaussian_dn"])
def test_one_stochastic_layer_has_the_law_of_a_direct_computation(norm, causal, method):
    """One layer at L = 4 from three fixed tokens, 20,000 trajectories of the compiled layer
    against 20,000 numpy draws: two-sample Kolmogorov-Smirnov tests of the overlap and of
    the first token's norm, each at level 1e-4 (28 configurations, 56 tests: a false alarm
    in the whole file about 0.6% of seeds; the seeds are fixed)."""
    d, n_tok, L, n = 4, 3, 4, 20_000
    x0 = _start(n_tok, d, 2)
    ds = simulate(ModelConfig(d=d, beta=1.3, norm=norm, causal=causal),
                  RunConfig(n_tokens=n_tok, n_traj=n, L=L, T=1.0 / L, x0=x0, seed=7,
                            method=method))
    assert ds.attrs["method"] == method and ds.attrs["norm"] == norm
    g = ds.gram.values
    ref_overlap, ref_norm = _one_layer_samples(norm, causal, x0, 1.0 / np.sqrt(L), n, 11)
    assert scipy.stats.ks_2samp(g[:, 0, 1], ref_overlap).pvalue > 1e-4
    if norm in ("pre", "peri"):
        assert scipy.stats.ks_2samp(g[:, 0, 0], ref_norm).pvalue > 1e-4
    else:
        np.testing.assert_allclose(g[:, 0, 0], 1.0, atol=1e-12)


def test_the_bits_do_not_depend_on_threads():
    model = ModelConfig(d=4, beta=2.0, norm="pre", causal=True)
    runs = [simulate(model, RunConfig(n_tokens=3, n_traj=16, L=10, T=1.0, seed=3,
                                      n_threads=k)) for k in (1, 2)]
    assert np.array_equal(runs[0].gram.values, runs[1].gram.values)


def test_outcomes_of_tokens_off_the_sphere_read_their_directions():
    ds = simulate(ModelConfig(d=3, beta=4.0, norm="peri"),
                  RunConfig(n_tokens=2, n_traj=200, L=20, T=5.0, seed=1, method="literal"))
    direction = direction_gram(ds.gram.values)[:, 0, 1]
    counts = outcome_counts(ds)
    assert counts["single"] == int(np.sum(direction >= 1 - 1e-3))
    assert counts["antipodal"] == int(np.sum(direction <= -1 + 1e-3))
    # The norms are kept: |X|^2 has mean 1 + T = 6 here.
    assert np.diagonal(ds.gram.values, axis1=1, axis2=2).mean() > 3.0


@pytest.mark.parametrize("fields, match", [
    (dict(norm="layer"), "norm"),
    (dict(causal=1), "causal"),
    (dict(norm="pre", attention="unnormalized"), "softmax"),
    (dict(causal=True, attention="unnormalized"), "softmax"),
    (dict(norm="peri", kind="random_attention"), "model"),
    (dict(norm="ngpt", ff_strength=1.0), "feedforward"),
])
def test_bad_layers_are_refused_when_configured(fields, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**{"d": 4, "beta": 1.0, **fields})


@pytest.mark.parametrize("run, match", [
    (dict(method="overlap_chain", n_tokens=3), "method"),
    (dict(method="reduced"), "method"),
    (dict(split=(1, 1)), "split"),
    (dict(stop_level=1e-6), "stop_level"),
])
def test_the_chains_refuse_the_other_layers(run, match):
    with pytest.raises(ValueError, match=match):
        simulate(ModelConfig(d=4, beta=1.0, norm="pre"),
                 RunConfig(**{"n_tokens": 2, "n_traj": 4, "L": 5, "T": 1.0, **run}))


# ------------------------------------------------------------------ the two-token chain
def _frame_layer(s, c, r1, r2, z, kappa, beta, norm, causal):
    """One layer of two tokens r_k y_k written out in R^4 (the chain's frame: y_1, y_2 =
    c u -+ s w, V u and V w given by the seven numbers ``z``), with the numpy layer above."""
    g11, g21, g12, g22, t11, t21, t22 = z
    v = np.zeros((4, 4))
    v[:, 0], v[:, 1] = (g11, g21, t11, 0.0), (g12, g22, t21, t22)
    x = np.array([[r1 * c, -r1 * s, 0, 0], [r2 * c, r2 * s, 0, 0]])
    out = _layer(x, _attention(x, beta, causal) @ v.T, kappa, norm)
    gram = out @ out.T
    return gram[0, 1] / np.sqrt(gram[0, 0] * gram[1, 1]), np.sqrt(np.diag(gram))


def _chain_weights(s, beta, causal):
    from stochastic_transformers import attention as att

    return (att.causal_pair_weights(s, beta) if causal
            else att.cluster_pair_weights(s, beta, True, 1.0, 1.0))


@pytest.mark.parametrize("norm, causal", [("post", False)] + VARIANTS)
def test_a_layer_of_the_pair_chain_equals_the_layer_in_its_frame(norm, causal):
    """The chain's layer (:func:`attention.pair_layer_other`) against the same layer written
    out in R^4, for random states, norms and random numbers: overlap and norms to 1e-12."""
    from stochastic_transformers import attention as att

    rng = np.random.default_rng(3)
    code = {"post": att.POST, "pre": att.PRE, "peri": att.PERI, "ngpt": att.NGPT}[norm]
    for _ in range(50):
        theta = rng.uniform(0, np.pi)
        s, c = np.sin(theta / 2), np.cos(theta / 2)
        r1, r2 = rng.uniform(0.5, 3.0, 2) if norm in ("pre", "peri") else (1.0, 1.0)
        z = rng.standard_normal(7)
        z[4], z[6] = abs(z[4]), abs(z[6])
        kappa, beta = rng.uniform(0.05, 0.8), rng.uniform(0, 4)
        s1, c1, q1, q2 = att.pair_layer_other(s, c, r1, r2, kappa,
                                              _chain_weights(s, beta, causal), code, z)
        overlap, norms = _frame_layer(s, c, r1, r2, z, kappa, beta, norm, causal)
        assert abs((c1 * c1 - s1 * s1) - overlap) < 1e-12
        if norm in ("pre", "peri"):
            np.testing.assert_allclose([q1, q2], norms, rtol=1e-12)
        else:
            assert (q1, q2) == (1.0, 1.0)


def _mp_layer_gaps(s, c, z, kappa, beta, norm, causal):
    """1 - overlap and 1 + overlap of the directions after one layer from two unit tokens,
    at 60 digits (mpmath), from the frame's exact half angles (s, c)."""
    import mpmath as mp

    mp.mp.dps = 60
    s, c = mp.mpf(s), mp.mpf(c)
    z_ = [mp.mpf(v) for v in z]
    vu = [z_[0], z_[1], z_[4], 0]
    vw = [z_[2], z_[3], z_[5], z_[6]]
    r = mp.exp(-2 * beta * s * s)
    if causal:
        weights = [(1, 0), (1 / (1 + r), r / (1 + r))]   # (self, other)
    else:
        weights = [(1 / (1 + r), r / (1 + r))] * 2
    ys = [(c, -s), (c, s)]
    out = []
    for k in (0, 1):
        p, q = weights[k]
        a = [p * ys[k][i] + q * ys[1 - k][i] for i in (0, 1)]     # A_k in (u, w)
        va = [a[0] * vu[i] + a[1] * vw[i] for i in range(4)]
        scale = kappa / mp.sqrt(sum(x * x for x in va)) if norm in ("ngpt", "peri") else kappa
        y = [ys[k][0] + scale * va[0], ys[k][1] + scale * va[1], scale * va[2], scale * va[3]]
        nrm = mp.sqrt(sum(x * x for x in y))
        out.append([x / nrm for x in y])
    diff = sum((a - b) ** 2 for a, b in zip(*out))
    total = sum((a + b) ** 2 for a, b in zip(*out))
    return diff / 2, total / 2


#: The poles that are fixed points of two tokens of equal norms: +1 under every layer, -1
#: without the mask and, with it, under the unit-norm updates (nGPT-style, peri-LN).
FIXED_POLES = ([(n, c, "+1") for n in NORMS for c in (False, True)]
               + [(n, False, "-1") for n in NORMS] + [("ngpt", True, "-1"), ("peri", True, "-1")])


@pytest.mark.parametrize("norm, causal, pole", FIXED_POLES)
def test_the_pair_chain_keeps_its_relative_precision_at_a_fixed_pole(norm, causal, pole):
    """Two tokens of equal norms 1e-30 from a pole that the layer keeps: one layer of the chain
    at a step of order one (kappa = 0.3) gives the distance to the pole to a relative 1e-12
    of a 60-digit computation of the same layer (a cancellation would lose it all)."""
    from stochastic_transformers import attention as att

    code = {"post": att.POST, "pre": att.PRE, "peri": att.PERI, "ngpt": att.NGPT}[norm]
    rng = np.random.default_rng(8)
    for _ in range(20):
        z = rng.standard_normal(7)
        z[4], z[6] = abs(z[4]), abs(z[6])
        small = 1e-15 * rng.uniform(0.5, 1.0)   # a half angle: 1 -+ Z = 2 small^2 ~ 1e-30
        s, c = (small, np.sqrt(1 - small ** 2)) if pole == "+1" else (np.sqrt(1 - small ** 2), small)
        s1, c1, _, _ = att.pair_layer_other(s, c, 1.0, 1.0, 0.3,
                                            _chain_weights(s, 2.0, causal), code, z)
        minus, plus = _mp_layer_gaps(s, c, z, 0.3, 2.0, norm, causal)
        gap, exact = (2 * s1 * s1, minus) if pole == "+1" else (2 * c1 * c1, plus)
        assert exact < 1e-20 and abs(gap / float(exact) - 1) < 1e-12, (gap, float(exact))


@pytest.mark.parametrize("norm, causal", VARIANTS)
def test_the_pair_chain_has_the_law_of_the_token_map(norm, causal):
    """Two tokens through 20 layers (L = 10, T = 2, d = 5, beta = 2), 20,000 trajectories of
    the chain against 20,000 of the literal map: two-sample KS tests of the overlap of the
    directions and, for pre- and peri-LN, of both norms, each at level 1e-4 (7 variants, 15
    tests: a false alarm in about 0.15% of seeds; the seeds are fixed)."""
    model = ModelConfig(d=5, beta=2.0, norm=norm, causal=causal)
    runs = {m: simulate(model, RunConfig(n_tokens=2, n_traj=20_000, L=10, T=2.0, method=m,
                                         seed=seed))
            for m, seed in (("overlap_chain", 1), ("literal", 2))}
    chain, token = (runs[m].gram.values for m in ("overlap_chain", "literal"))
    assert runs["overlap_chain"].attrs["method"] == "overlap_chain"
    dir_chain, dir_token = direction_gram(chain), direction_gram(token)
    assert scipy.stats.ks_2samp(dir_chain[:, 0, 1], dir_token[:, 0, 1]).pvalue > 1e-4
    if norm in ("pre", "peri"):
        for k in (0, 1):
            assert scipy.stats.ks_2samp(chain[:, k, k], token[:, k, k]).pvalue > 1e-4


@pytest.mark.parametrize("norm, causal", VARIANTS + [("post", False)])
def test_the_hybrid_pair_chain_follows_the_token_map_path_by_path(norm, causal):
    """With the same start the hybrid model's chain and N-token map draw the same scalar a
    layer from the same stream, so they give the same paths up to rounding."""
    x0 = _start(2, 5, 0)
    model = ModelConfig(d=5, beta=1.5, kind="hybrid", epsilon=0.7, norm=norm, causal=causal)
    runs = [simulate(model, RunConfig(n_tokens=2, n_traj=50, L=20, T=3.0, x0=x0, seed=4,
                                      method=m, times=[1.0, 3.0]))
            for m in ("overlap_chain", "literal")]
    np.testing.assert_allclose(runs[0].gram_t.values, runs[1].gram_t.values, rtol=1e-12,
                               atol=1e-13)


def test_the_pair_chain_is_autos_choice_and_refuses_stopping():
    model = ModelConfig(d=4, beta=1.0, norm="ngpt")
    run = RunConfig(n_tokens=2, n_traj=8, L=10, T=1.0, seed=2)
    ds = simulate(model, run)
    assert ds.attrs["method"] == "overlap_chain" and ds.attrs["stop_level"] == 0.0
    threads = [simulate(model, RunConfig(n_tokens=2, n_traj=16, L=10, T=1.0, seed=2,
                                         n_threads=k)).gram.values for k in (1, 2)]
    assert np.array_equal(*threads)
    with pytest.raises(ValueError, match="stop_level"):
        simulate(model, RunConfig(n_tokens=2, n_traj=8, L=10, T=1.0, stop_level=1e-6))


# ------------------------------------------------------------------ the limits
def test_unit_gaussian_cosine_against_draws_and_its_limits():
    """c_d(rho) against 400,000 direct draws (within 4 standard errors, 12 checks), c_d(+-1)
    = +-1, c_1 = (2/pi) arcsin, c_d -> rho for large d, and c_d'(-1) = (d-1)/(d-2)."""
    rng = np.random.default_rng(0)
    for d in (2, 4, 9):
        for rho in (-0.8, -0.2, 0.4, 0.95):
            g1 = rng.standard_normal((400_000, d))
            g2 = rho * g1 + np.sqrt(1 - rho * rho) * rng.standard_normal((400_000, d))
            cos = np.einsum("ta,ta->t", _unit(g1), _unit(g2))
            se = cos.std(ddof=1) / np.sqrt(cos.size)
            assert abs(cos.mean() - nz.unit_gaussian_cosine(rho, d)) < 4 * se
    assert nz.unit_gaussian_cosine(1.0, 5) == pytest.approx(1.0, abs=1e-14)
    assert nz.unit_gaussian_cosine(-1.0, 5) == pytest.approx(-1.0, abs=1e-14)
    r = np.linspace(-1, 1, 9)
    np.testing.assert_allclose(nz.unit_gaussian_cosine(r, 1), 2 / np.pi * np.arcsin(r),
                               atol=1e-14)
    np.testing.assert_allclose(nz.unit_gaussian_cosine(r, 10_000), r, atol=1e-4)
    for d in (3, 4, 7):
        eps = 1e-7
        slope = (nz.unit_gaussian_cosine(-1 + eps, d) + 1) / eps
        assert slope == pytest.approx((d - 1) / (d - 2), rel=2e-3)


def test_post_ln_coefficients_are_lemma_4s():
    z = np.linspace(-0.99, 0.99, 23)
    for d, beta in ((3, 0.4), (6, 2.5)):
        mu, s2 = nz.two_token_coefficients(z, beta, d)
        np.testing.assert_allclose(mu, th.overlap_drift(z, beta, d), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(s2, th.overlap_diffusion(z, beta, d) ** 2, rtol=1e-12,
                                   atol=1e-15)


@pytest.mark.parametrize("d", [4, 5, 7, 10])
def test_the_post_ln_exponent_vanishes_at_theorem_2s_threshold(d):
    bc = th.critical_beta(d)
    assert abs(nz.pole_exponent(bc, d)) < 1e-6
    assert nz.pole_exponent(bc - 0.05, d) > 0 > nz.pole_exponent(bc + 0.05, d)


@pytest.mark.parametrize("d", [4, 5, 6, 10, 30])
@pytest.mark.parametrize("causal", [False, True])
def test_the_ngpt_threshold_is_the_root_of_its_exponent(d, causal):
    root = scipy.optimize.brentq(
        lambda b: nz.pole_exponent(b, d, norm="ngpt", causal=causal), 0.05, 10.0)
    assert nz.critical_beta_ngpt(d, causal) == pytest.approx(root, abs=2e-4)
    if not causal:
        assert nz.critical_beta_ngpt(d) == pytest.approx(0.5 * np.arccosh(2 * d - 5), rel=1e-12)
        assert nz.critical_beta_ngpt(d) > th.critical_beta(d)


@pytest.mark.parametrize("d", [3, 4, 8])
def test_post_ln_with_the_mask_leaves_antipodes_like_a_bessel_process_of_dimension_d_minus_1(d):
    for beta in (0.3, 1.0, 3.0):
        assert nz.causal_antipodal_dimension(beta, d) == pytest.approx(d - 1, rel=1e-6)
    with pytest.raises(ValueError, match="fixed point"):
        nz.pole_exponent(1.0, d, causal=True)


def _one_step_overlap_moments(z, beta, d, norm, causal, L, n_pairs, seed, norms=(1.0, 1.0)):
    """Mean and variance of (Z' - Z) L r1 r2 over one layer from two tokens of norms
    ``norms`` whose directions have overlap z (Z the directions' overlap; r1 r2 turns a
    layer into its share of the clock), with V and -V antithetic pairs (as
    tests/test_theory.py does for post-LN)."""
    x0 = np.zeros((2, d))
    x0[0, 0], x0[1, 0], x0[1, 1] = 1.0, z, np.sqrt(1 - z * z)
    x0 *= np.array(norms)[:, None]
    att = _attention(x0, beta, causal)
    h = 1.0 / np.sqrt(L)
    v = np.random.default_rng(seed).standard_normal((n_pairs, d, d))
    out = []
    for sign in (1.0, -1.0):
        x = _unit(_layer(x0[None], np.einsum("tab,ib->tia", sign * v, att), h, norm))
        out.append(np.einsum("ta,ta->t", x[:, 0], x[:, 1]))
    clock = L * norms[0] * norms[1]
    pairs = (np.stack(out) - z).mean(axis=0) * clock
    half_diff = 0.5 * (out[0] - out[1])
    return pairs.mean(), pairs.std(ddof=1) / np.sqrt(n_pairs), (half_diff ** 2).mean() * clock


@pytest.mark.parametrize("norm, causal, norms", [
    ("post", True, (1.0, 1.0)), ("ngpt", False, (1.0, 1.0)), ("ngpt", True, (1.0, 1.0)),
    ("pre", False, (1.5, 0.8)), ("pre", True, (0.7, 1.3)), ("peri", False, (1.5, 0.8)),
    ("peri", True, (0.7, 1.3))])
def test_overlap_coefficients_match_one_step_moments(norm, causal, norms):
    """One layer at L = 20,000, 100,000 antithetic pairs, three overlaps: drift within 4
    standard errors (false-alarm rate about 6e-5 per check), variance within 2% (sampling
    error about 0.45%, so 4.4 standard errors: about 1e-5 per check; bias O(1/L)); 42
    checks, a false alarm in about 0.3% of seeds (the seeds are fixed).  Pre- and peri-LN start from unequal norms,
    where the directions' coefficients take the ratio r1/r2."""
    beta, d, L = 1.2, 4, 20_000
    for k, z in enumerate((-0.9, -0.3, 0.5)):
        drift, se, var = _one_step_overlap_moments(z, beta, d, norm, causal, L, 100_000, 40 + k,
                                                   norms)
        mu, s2 = nz.two_token_coefficients(z, beta, d, norm=norm, causal=causal,
                                           ratio=norms[0] / norms[1])
        assert abs(drift - mu) <= 4 * se, (z, drift, mu, se)
        assert var == pytest.approx(s2, rel=0.02), (z, var, s2)


def test_pre_ln_gram_moments_are_exact_for_one_layer():
    """One pre-LN layer at h = 0.5 from three tokens of unequal norms, 400,000 draws: every
    mean and covariance entry of the Gram matrix's change against the exact formula, within
    4.5 standard errors (the entries' estimators are not independent; 45 checks, a false
    alarm at most 45 * 7e-6 = 3e-4 by the union bound)."""
    d, h, sigma, n = 3, 0.5, 0.8, 400_000
    x0 = _start(3, d, 4) * np.array([[1.0], [1.7], [0.6]])
    att = _attention(x0, 2.0, False)
    v = sigma * np.random.default_rng(9).standard_normal((n, d, d))
    x = x0 + h * np.einsum("tab,ib->tia", v, att)
    dg = np.einsum("tia,tka->tik", x, x) - x0 @ x0.T
    mean, cov = nz.pre_layer_gram_moments(x0 @ x0.T, att @ att.T, d, h, sigma)
    iu = np.triu_indices(3)
    flat = dg[:, iu[0], iu[1]]
    se_mean = flat.std(axis=0, ddof=1) / np.sqrt(n)
    assert np.all(np.abs(flat.mean(axis=0) - mean[iu]) < 4.5 * se_mean)
    centred = flat - mean[iu]
    prods = np.einsum("tp,tq->tpq", centred, centred)
    want = cov[iu[0], iu[1]][:, iu[0], iu[1]]
    se_cov = prods.std(axis=0, ddof=1) / np.sqrt(n)
    assert np.all(np.abs(prods.mean(axis=0) - want) < 4.5 * se_cov)


def test_peri_ln_norms_grow_like_one_plus_t():
    """|X|^2 gains exactly h^2 in mean a layer: E|X_i|^2(T) = 1 + T (4,000 pairs, within 4
    standard errors)."""
    ds = simulate(ModelConfig(d=4, beta=1.0, norm="peri"),
                  RunConfig(n_tokens=2, n_traj=4000, L=50, T=3.0, seed=2))
    sq = np.diagonal(ds.gram.values, axis1=1, axis2=2).mean(axis=1)
    assert abs(sq.mean() - 4.0) < 4 * sq.std(ddof=1) / np.sqrt(sq.size)


@pytest.mark.parametrize("kwargs, name", [(dict(norm="layer"), "norm"), (dict(causal="no"), "causal"),
                                          (dict(ratio=2.0), "ratio"), (dict(beta=-1), "beta")])
def test_the_limits_name_a_bad_parameter(kwargs, name):
    args = dict(z=0.3, beta=1.0, d=4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        nz.two_token_coefficients(args.pop("z"), args.pop("beta"), args.pop("d"), **args)


@pytest.mark.parametrize("beta", [0.5, 1.0, 2.0])
def test_the_finite_horizon_law_of_post_ln_is_the_sde_modules(beta):
    """normalizations.antipodal_at (a grid in log(1 + Z)) against sde.antipodal_at (a grid in
    atanh Z, exact coefficients): two schemes, one law, within their own error estimates."""
    from stochastic_transformers import sde

    ts = [10.0, 100.0]
    p, err = nz.antipodal_at(ts, beta, 4)
    q, err_q = sde.antipodal_at(ts, beta, 4)
    assert np.all(np.abs(p - q) <= 2 * (err + err_q) + 1e-5), (p, q, err, err_q)


def test_the_finite_horizon_law_sees_the_causal_pair_hover():
    """Post-LN with the mask: -1 is not fixed, yet at large beta the pair hovers within the
    tolerance (depth of order q^2), so the law at T is far from 0; at small beta it is 0."""
    assert nz.antipodal_at(100.0, 4.0, 4, causal=True)[0] > 0.3
    assert nz.antipodal_at(100.0, 0.5, 4, causal=True)[0] < 1e-12


def test_unit_gaussian_cosine_stays_finite_for_large_even_d():
    """From d = 100 on the series is summed directly (scipy's hyp2f1 fails near 1 for even
    d >= 198); where both apply they agree to rounding."""
    r = np.linspace(-1, 1, 41)
    for d in (198, 200, 400):
        c = nz.unit_gaussian_cosine(r, d)
        assert np.all(np.isfinite(c)) and np.all(np.abs(c - r) < 3 / d)
    np.testing.assert_allclose(nz._hypergeometric_half(76.0, r * r),
                               scipy.special.hyp2f1(0.5, 0.5, 76.0, r * r), rtol=1e-14)


@pytest.mark.parametrize("d", [3, 4, 8, 50])
def test_the_exponents_at_plus_one_have_closed_forms(d):
    for beta in (0.0, 1.0, 5.0):
        assert nz.pole_exponent(beta, d, pole=1) == pytest.approx(-(d - 1), rel=1e-6)
        assert nz.pole_exponent(beta, d, norm="ngpt", pole=1) == pytest.approx(-(d - 1) / d,
                                                                               rel=1e-6)
        assert nz.pole_exponent(beta, d, causal=True, pole=1) == pytest.approx(
            -(3 * d - 1) / 4, rel=1e-6)
        assert nz.pole_exponent(beta, d, norm="ngpt", causal=True, pole=1) == pytest.approx(
            -(d - 1) * (3 * d - 5) / (4 * d * (d - 2)), rel=1e-6)


def test_at_beta_zero_the_ngpt_kernel_takes_its_limit_and_minus_one_is_not_fixed():
    """At beta = 0 both tokens attend alike: without the mask A_1 = A_2 (K_12 = 1/d), with it
    A_1 = Y_1 is orthogonal to A_2's limit (K_12 = 0); -1 is then not a fixed point."""
    eps = 1e-9
    for causal, k12 in ((False, 0.25), (True, 0.0)):
        at = nz.two_token_kernel(-1.0, 0.0, 4, norm="ngpt", causal=causal)[2]
        near = nz.two_token_kernel(-1.0 + eps, 0.0, 4, norm="ngpt", causal=causal)[2]
        assert at == pytest.approx(k12, abs=1e-12) and near == pytest.approx(k12, abs=1e-3)
        with pytest.raises(ValueError, match="not a fixed point"):
            nz.pole_exponent(0.0, 4, norm="ngpt", causal=causal)
    with pytest.raises(ValueError, match="is a fixed point"):
        nz.causal_antipodal_dimension(1.0, 4, norm="ngpt")


def test_the_peri_clock_rate_is_the_squared_bessel_law():
    """E[1/|X_t|^2] for X_t = X_0 + B_t / sqrt(d) against 400,000 direct draws (within 4
    standard errors at three times for three d: 9 checks, false alarms about 6e-4 in all),
    1 at t = 0, and d / ((d - 2) t) for large t."""
    rng = np.random.default_rng(3)
    for d in (5, 6, 8):     # 1/|X|^2 has a finite variance for d > 4 only
        for t in (0.3, 3.0, 30.0):
            x = rng.standard_normal((400_000, d)) * np.sqrt(t / d)
            x[:, 0] += 1.0
            inv = 1.0 / np.einsum("ta,ta->t", x, x)
            assert abs(inv.mean() - nz.peri_clock_rate(t, d)) < 4 * inv.std() / np.sqrt(inv.size)
    assert nz.peri_clock_rate(0.0, 4) == 1.0
    assert nz.peri_clock_rate(1e4, 6) == pytest.approx(6 / (4 * 1e4), rel=1e-3)


def test_the_least_attention_square_of_two_tokens_lies_inside_the_overlap_range():
    """For beta = 1 the least |A|^2 = 1 - 2pq(1 - z) is interior (below tanh^2 beta, its value
    at z = -1); for beta = 0 it is at z = -1, where the two tokens' outputs cancel."""
    from stochastic_transformers.figures.ours.norm_clock import min_attention_square

    assert min_attention_square(1.0) < np.tanh(1.0) ** 2 - 0.02
    assert min_attention_square(0.0) == pytest.approx(0.0, abs=1e-12)
