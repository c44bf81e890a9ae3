r"""The simulators of the discrete model and the one entry point :func:`simulate`.

The exact methods:

``literal``
    draws the whole :math:`d\times d` value matrix of every layer from the requested
    law (Gaussian, uniform or Rademacher) and applies it.  It is the reference every
    faster path is tested against.
``gaussian_dn``
    Gaussian values only.  :math:`V[A_1\dots A_N] = (VQ)R` with :math:`R` the triangular
    factor of the attention outputs, and :math:`VQ` is a :math:`d\times\min(d,N)`
    standard Gaussian matrix: :math:`dN` normals a layer instead of :math:`d^2`.
``overlap_chain``
    two tokens, Gaussian values, :math:`B = I`.  By rotation invariance the overlap
    :math:`Z_n = \langle X^1_n, X^2_n\rangle` is itself a Markov chain, driven by a
    :math:`2\times2` Gaussian block and a :math:`2\times2` Wishart(:math:`d-2`) matrix
    (Bartlett factor): seven random numbers a layer, whatever :math:`d`.  For the hybrid
    model the same chain needs one normal a layer.
``cluster_chain``
    a two-point configuration (``split=(m1, m2)``: m1 tokens at one point, m2 at another),
    Gaussian values, :math:`B = I`.  Tokens that coincide stay together, so the overlap of
    the two points is again a seven-random-number chain, with the points' attention
    weights (:func:`attention.cluster_pair_layer`).
``reduced``
    N >= 3 Gaussian tokens, :math:`B = I`: the N-token map (``gaussian_dn`` when N < d,
    else ``literal``) until the tokens occupy at most two points
    (:data:`MERGE_ONE_MINUS_OVERLAP`), then nothing (one point is absorbing) or the
    weighted chain, with the two-token early stopping for a balanced split.  Up to the
    merge its bits are those of the full map.  ``snap`` is its validation twin: the
    literal map with merged tokens made to coincide exactly, never switching.

Random numbers.  Every trajectory owns a random stream (:mod:`stochastic_transformers.rng`)
identified by the seed and its global index, and the kernels draw inside the compiled
loop.  Results are bit-identical whatever the number of threads and however
trajectories are split across calls or workers (``first_trajectory``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import numpy as np
import xarray as xr

from . import attention as _att
from . import rng as _rng
from ._validation import ATTENTIONS, check_choice, check_int, check_real, check_whole_layers

#: Bumped whenever a change alters the numbers a given seed produces; part of every
#: sweep cache key.
SIMULATION_CODE_VERSION = "2"  # 2: N >= 3 Gaussian tokens take the reduced path

VALUE_LAWS = ("gaussian", "uniform", "rademacher")
MODELS = ("stochastic", "hybrid", "random_attention")
METHODS = ("auto", "literal", "gaussian_dn", "overlap_chain", "cluster_chain", "reduced", "snap",
           "subspace")
_CHAINS = ("overlap_chain", "cluster_chain", "reduced")  # methods that can stop early


# ----------------------------------------------------------------------------- kernels

from ._jit import JIT_PARALLEL as _PAR
_LAW_CODES = {"gaussian": 0, "uniform": 1, "rademacher": 2}
_SQRT3 = math.sqrt(3.0)


@_att.nb.njit(**_att._JIT)
def _value_entry(state, law, sigma):
    """One centred entry of V with variance sigma^2 from law 0/1/2 (Gauss/uniform/Rademacher)."""
    if law == 0:
        return sigma * _rng.normal(state)
    if law == 1:
        return sigma * _SQRT3 * (2.0 * _rng.uniform(state) - 1.0)
    return sigma if (_rng.next_u64(state) >> np.uint64(63)) != 0 else -sigma


@_att.nb.njit(**_att._JIT)
def _uniform_half_angles(state, d):
    """Half-angle state of two independent uniform tokens on S^{d-1}.

    By rotation invariance x1 = e1 and x2 = g/|g| with g standard normal in R^d, so
    cos(theta) = g1/|g| and sin(theta) = |g_{2..d}|/|g|.
    """
    g1 = _rng.normal(state)
    rest = 0.0
    for _ in range(d - 1):
        g = _rng.normal(state)
        rest += g * g
    return _att.half_angles(g1, math.sqrt(rest))


@_att.nb.njit(inline="always", **_att._JIT)
def _start_pair(state, key0, key1, index, d, init_mode, s0, c0, t):
    """Seed trajectory ``index``'s stream into ``state``; return its initial half angles:
    two independent uniform points (``init_mode`` 0) or the given ``(s0[t], c0[t])``."""
    _rng.seed_stream(state, key0, key1, index)
    if init_mode == 0:
        return _uniform_half_angles(state, d)
    return s0[t], c0[t]


@_att.nb.njit(**_PAR)
def _pair_kernel(key0, key1, first, n, d, n_layers, beta, softmax, h, sigma, inv_l, epsilon,
                 hybrid, s0, c0, init_mode, s_stop, c_stop, rec_layers, rec_s, rec_c,
                 s_out, c_out, stopped_layer):
    """Run ``n`` two-token trajectories (global indices first..first+n-1) of the overlap chain.

    ``init_mode`` 0: uniform independent tokens; 1: the given (s0[t], c0[t]).
    Stochastic layers use 7 random numbers (see :func:`attention.pair_layer_stochastic`),
    hybrid layers one.  A trajectory stops once ``s < s_stop`` or ``c < c_stop``; its
    remaining records then carry the frozen state.
    """
    for t in _att.nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        s, c = _start_pair(state, key0, key1, first + t, d, init_mode, s0, c0, t)
        ptr = 0
        while ptr < rec_layers.size and rec_layers[ptr] == 0:
            rec_s[t, ptr] = s
            rec_c[t, ptr] = c
            ptr += 1
        stop = -1
        z = np.empty(7)
        for layer in range(1, n_layers + 1):
            one, ksum, kdiff = _att.pair_weights_scaled(s, beta, softmax)
            if hybrid:
                w = inv_l + epsilon * _rng.normal(state) * h
                s, c = _att.pair_step(s, c, one + w * ksum, 0.0, 0.0,
                                      0.0, one + w * kdiff, 0.0, 0.0)
            else:
                _draw_pair_noise(state, d, z)
                s, c = _att.pair_layer_stochastic_scaled(s, c, one, h * sigma * ksum,
                                                         h * sigma * kdiff, z)
            while ptr < rec_layers.size and rec_layers[ptr] == layer:
                rec_s[t, ptr] = s
                rec_c[t, ptr] = c
                ptr += 1
            if s < s_stop or c < c_stop:
                stop = layer
                break
        while ptr < rec_layers.size:
            rec_s[t, ptr] = s
            rec_c[t, ptr] = c
            ptr += 1
        s_out[t] = s
        c_out[t] = c
        stopped_layer[t] = stop


@_att.nb.njit(**_att._JIT)
def _init_tokens(state, x, init_mode, x0t, z0):
    """Initial tokens into ``x`` (N, d): 0 i.i.d. uniform; 1 the given ``x0t``; 2 a uniform
    pair at overlap ``z0``."""
    n_tok, d = x.shape
    if init_mode == 1:
        x[:, :] = x0t
    else:
        for i in range(n_tok):
            for a in range(d):
                x[i, a] = _rng.normal(state)
        _att.normalize_rows(x)
        if init_mode == 2:
            # x2 = z0 x1 + sqrt(1 - z0^2) e, e uniform on the sphere orthogonal to x1.
            dot = 0.0
            for a in range(d):
                dot += x[1, a] * x[0, a]
            for a in range(d):
                x[1, a] -= dot * x[0, a]
            nrm = 0.0
            for a in range(d):
                nrm += x[1, a] * x[1, a]
            nrm = math.sqrt(nrm)
            perp = math.sqrt(max(0.0, 1.0 - z0 * z0))
            for a in range(d):
                x[1, a] = z0 * x[0, a] + perp * x[1, a] / nrm


@_att.nb.njit(inline="always", **_att._JIT)
def _token_layer(state, kind, law, x, h, B, beta, softmax, b_identity, sigma, inv_l, epsilon,
                 v, g, att, m, r, y, bx, weights, hv, self_scale):
    """One layer of N tokens, in place on ``x``, drawing its noise from ``state``.

    ``kind`` 0: literal (a full d x d V of law ``law``); 1: Gaussian d*N reduction
    (``g`` is d x min(d, N)); 2: hybrid (one normal).  The other arrays are scratch space.
    """
    d = x.shape[1]
    if kind == 0:
        if law == 0:   # the Gaussian entry of _value_entry, without a call per entry
            for a in range(d):
                for b in range(d):
                    v[a, b] = sigma * _rng.normal(state)
        else:
            for a in range(d):
                for b in range(d):
                    v[a, b] = _value_entry(state, law, sigma)
        _att.layer_literal(x, v, h, B, beta, softmax, att, y, bx, weights, b_identity,
                           self_scale)
    elif kind == 1:
        for a in range(d):
            for b in range(g.shape[1]):
                g[a, b] = sigma * _rng.normal(state)
        _att.layer_gaussian_dn(x, g, h, B, beta, softmax, att, m, r, y, bx, weights,
                               b_identity, hv, self_scale)
    else:
        w = inv_l + epsilon * _rng.normal(state) * h
        _att.layer_hybrid(x, w, B, beta, softmax, att, y, bx, weights, b_identity,
                          self_scale)


@_att.nb.njit(inline="always", **_att._JIT)
def _layer_scratch(n_tok, d):
    """Scratch arrays of :func:`_token_layer` for one trajectory (allocated once, reused
    every layer): att, y, bx (N, d); m (d, N); r (k, N) and g (d, k) with k = min(d, N);
    v (d, d); weights, self_scale (N,); hv (d,)."""
    k = min(d, n_tok)
    return (np.empty((n_tok, d)), np.empty((n_tok, d)), np.empty((d, n_tok)),
            np.empty((k, n_tok)), np.empty((d, d)), np.empty((d, k)), np.empty((n_tok, d)),
            np.empty(n_tok), np.empty(n_tok), np.empty(d))


@_att.nb.njit(inline="always", **_att._JIT)
def record_gram(out, x):
    """The Gram matrix of the tokens ``x`` (N, d) into ``out`` (N, N)."""
    n_tok, d = x.shape
    for i in range(n_tok):
        for j in range(n_tok):
            acc = 0.0
            for a in range(d):
                acc += x[i, a] * x[j, a]
            out[i, j] = acc


@_att.nb.njit(**_PAR)
def _tokens_kernel(key0, key1, first, n, n_tok, d, n_layers, kind, law, beta, softmax, B,
                   b_identity, h, sigma, inv_l, epsilon, x0, init_mode, z0, rec_layers, rec_gram,
                   x_out):
    """Run ``n`` trajectories of N tokens.

    ``kind`` 0: literal (a full d x d V of law ``law`` per layer); 1: Gaussian d*N
    reduction; 2: hybrid (one normal per layer).  ``init_mode`` 0: i.i.d. uniform
    tokens; 1: the given ``x0[t]``; 2: a uniformly random pair at overlap ``z0``.
    """
    for t in _att.nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        _rng.seed_stream(state, key0, key1, first + t)
        x = np.empty((n_tok, d))
        _init_tokens(state, x, init_mode, x0[t], z0)
        att, y, m, r, v, g, bx, weights, self_scale, hv = _layer_scratch(n_tok, d)
        ptr = 0
        for layer in range(0, n_layers + 1):
            if layer > 0:
                _token_layer(state, kind, law, x, h, B, beta, softmax, b_identity, sigma, inv_l,
                             epsilon, v, g, att, m, r, y, bx, weights, hv, self_scale)
            while ptr < rec_layers.size and rec_layers[ptr] == layer:
                record_gram(rec_gram[t, ptr], x)
                ptr += 1
        x_out[t] = x


# ----------------------------------------------------------------- two-point configurations

#: Two tokens count as one point once their overlap rounds to 1 in double precision:
#: :math:`1 - \langle x_i, x_j\rangle` (computed as :math:`|x_i - x_j|^2/2`, without
#: cancellation) at most :math:`2^{-53}`.  Below it the N-token state cannot tell them apart
#: any more (its coordinates carry rounding errors of that relative size every layer), and
#: for the two-token limit the chance that such a pair ever separates again to the
#: classification tolerance 1e-3 is 3.7e-20 in d = 4 and 1.1e-13 in d = 3, at every beta
#: (:func:`stochastic_transformers.theory.escape_probability`).
MERGE_ONE_MINUS_OVERLAP = 2.0**-53
#: Layers between two merge checks of the ``reduced`` method (a check costs about
#: N d operations while no pair has merged, N^2 d once some have).
MERGE_CHECK_EVERY = 4


@_att.nb.njit(inline="always", **_att._JIT)
def _draw_pair_noise(state, d, z):
    """The seven random numbers of one overlap-chain layer, in the two-token chain's order."""
    for k in range(4):
        z[k] = _rng.normal(state)
    z[5] = _rng.normal(state) if d >= 3 else 0.0
    z[4] = _rng.sqrt_chi2(state, d - 2)
    z[6] = _rng.sqrt_chi2(state, d - 3)


@_att.nb.njit(**_att._JIT)
def _record_two_point(rec_gram, rec_opo, ptr, labels, s, c, one_point):
    """Gram matrix and 1 + (smallest overlap) of a one- or two-point state into record ``ptr``."""
    n_tok = labels.size
    z = 1.0 if one_point else c * c - s * s
    for i in range(n_tok):
        for j in range(n_tok):
            rec_gram[ptr, i, j] = 1.0 if (one_point or labels[i] == labels[j]) else z
    rec_opo[ptr] = 2.0 if one_point else 2.0 * c * c


@_att.nb.njit(**_att._JIT)
def _two_point_layers(state, s, c, m1, m2, layer0, n_layers, d, beta, softmax, kappa, s_stop,
                      c_stop, labels, rec_layers, ptr, rec_gram, rec_opo, z):
    """Advance a two-point state (m1 tokens at y1, m2 at y2) from layer ``layer0`` on.

    A balanced split (m1 = m2) is the two-token chain exactly (same weights, same bits,
    same early stopping at the poles when ``s_stop`` or ``c_stop`` > 0); an unbalanced one
    takes :func:`attention.cluster_pair_layer`.  Either stops once the two points merge
    (:data:`MERGE_ONE_MINUS_OVERLAP`).  Returns ``(s, c, ptr, stopped_layer, merged)``.
    """
    balanced = m1 == m2
    for layer in range(layer0 + 1, n_layers + 1):
        _draw_pair_noise(state, d, z)
        if balanced:
            one, ksum, kdiff = _att.pair_weights_scaled(s, beta, softmax)
            s, c = _att.pair_layer_stochastic_scaled(s, c, one, kappa * ksum, kappa * kdiff, z)
        else:
            s, c = _att.cluster_pair_layer(s, c, kappa,
                                           _att.cluster_pair_weights(s, beta, softmax, m1, m2), z)
        merged = 2.0 * s * s <= MERGE_ONE_MINUS_OVERLAP
        while ptr < rec_layers.size and rec_layers[ptr] == layer:
            _record_two_point(rec_gram, rec_opo, ptr, labels, s, c, merged)
            ptr += 1
        if merged:
            return s, c, ptr, layer, True
        if balanced and (s < s_stop or c < c_stop):
            return s, c, ptr, layer, False
    return s, c, ptr, -1, False


@_att.nb.njit(**_PAR)
def _cluster_kernel(key0, key1, first, n, m1, m2, d, n_layers, beta, softmax, kappa, s0, c0,
                    init_mode, s_stop, c_stop, rec_layers, rec_gram, rec_opo, s_out, c_out,
                    stopped_layer):
    """Run ``n`` trajectories of a two-point configuration (m1 tokens at y1, m2 at y2).

    ``init_mode`` 0: y1, y2 independent uniform (the two-token chain's draw); 1: the given
    half-angle states.  Records carry the N x N Gram matrix (tokens 0..m1-1 at y1).
    """
    n_tok = m1 + m2
    labels = np.zeros(n_tok, dtype=np.int64)
    labels[m1:] = 1
    for t in _att.nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        s, c = _start_pair(state, key0, key1, first + t, d, init_mode, s0, c0, t)
        merged = 2.0 * s * s <= MERGE_ONE_MINUS_OVERLAP
        ptr = 0
        while ptr < rec_layers.size and rec_layers[ptr] == 0:
            _record_two_point(rec_gram[t], rec_opo[t], ptr, labels, s, c, merged)
            ptr += 1
        stop = 0 if merged else -1
        if not merged:
            z = np.empty(7)
            s, c, ptr, stop, merged = _two_point_layers(
                state, s, c, m1, m2, 0, n_layers, d, beta, softmax, kappa, s_stop, c_stop,
                labels, rec_layers, ptr, rec_gram[t], rec_opo[t], z)
        while ptr < rec_layers.size:
            _record_two_point(rec_gram[t], rec_opo[t], ptr, labels, s, c, merged)
            ptr += 1
        s_out[t] = 0.0 if merged else s
        c_out[t] = 1.0 if merged else c
        stopped_layer[t] = stop


@_att.nb.njit(**_att._JIT)
def _merge_groups(x, labels, reps):
    """Group tokens whose overlap rounds to 1; return the number of groups (3 means >= 3).

    Token j joins the group of the first earlier representative it coincides with
    (:data:`MERGE_ONE_MINUS_OVERLAP`); the scan stops at the third group, so a check
    costs little while the tokens are apart.
    """
    n_tok, d = x.shape
    for i in range(n_tok):
        labels[i] = -1
    n_groups = 0
    for i in range(n_tok):
        if labels[i] >= 0:
            continue
        if n_groups == 2:
            return 3
        labels[i] = n_groups
        reps[n_groups] = i
        for j in range(i + 1, n_tok):
            if labels[j] < 0:
                acc = 0.0
                for a in range(d):
                    diff = x[i, a] - x[j, a]
                    acc += diff * diff
                if 0.5 * acc <= MERGE_ONE_MINUS_OVERLAP:
                    labels[j] = n_groups
        n_groups += 1
    return n_groups


@_att.nb.njit(**_att._JIT)
def _record_tokens(rec_gram, rec_opo, ptr, x):
    """Gram matrix of the tokens and 1 + their smallest overlap (as min |x_i + x_j|^2 / 2)."""
    n_tok, d = x.shape
    low = 2.0
    for i in range(n_tok):
        for j in range(n_tok):
            acc = 0.0
            for a in range(d):
                acc += x[i, a] * x[j, a]
            rec_gram[ptr, i, j] = acc
            if j > i:
                acc = 0.0
                for a in range(d):
                    plus = x[i, a] + x[j, a]
                    acc += plus * plus
                low = min(low, 0.5 * acc)
    rec_opo[ptr] = low


@_att.nb.njit(**_PAR)
def _reduced_kernel(key0, key1, first, n, n_tok, d, n_layers, kind, beta, softmax, B, h, sigma,
                    x0, init_mode, s_stop, c_stop, snap_only, rec_layers, rec_gram, rec_opo,
                    gram_out, opo_out, merge_layer, merge_points, merge_m1, merge_s, merge_c,
                    stopped_layer):
    """N tokens through the N-token map until they occupy at most two points, then the chain.

    Layers are those of :func:`_tokens_kernel` (``kind`` 0 literal Gaussian, 1 the d*N
    reduction; same random numbers, so both kernels agree bit for bit up to the merge).
    Every :data:`MERGE_CHECK_EVERY` layers the tokens are grouped
    (:func:`_merge_groups`); one group stops the trajectory (one point is absorbing), two
    groups continue on :func:`_two_point_layers` from the representatives' half angles.
    ``snap_only`` (method ``snap``, for validation, with ``kind`` 0): never switch; instead
    set every token to its group's representative and keep the N-token map, so that a run
    differs from ``method="literal"`` with the same seed only by the merge itself.
    """
    for t in _att.nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        _rng.seed_stream(state, key0, key1, first + t)
        x = np.empty((n_tok, d))
        _init_tokens(state, x, init_mode, x0[t], 0.0)
        att, y, m, r, v, g, bx, weights, self_scale, hv = _layer_scratch(n_tok, d)
        labels = np.empty(n_tok, dtype=np.int64)
        reps = np.zeros(2, dtype=np.int64)
        ptr = 0
        groups = n_tok
        at = -1
        for layer in range(0, n_layers + 1):
            if layer > 0:
                _token_layer(state, kind, 0, x, h, B, beta, softmax, True, sigma, 0.0, 0.0,
                             v, g, att, m, r, y, bx, weights, hv, self_scale)
            while ptr < rec_layers.size and rec_layers[ptr] == layer:
                _record_tokens(rec_gram[t], rec_opo[t], ptr, x)
                ptr += 1
            if layer % MERGE_CHECK_EVERY == 0 and groups > 1:
                n_groups = _merge_groups(x, labels, reps)
                if n_groups <= 2:
                    if at < 0:
                        at = layer
                        groups = n_groups
                    if not snap_only:
                        break
                    # validation mode: make coinciding tokens coincide exactly, keep the map
                    groups = n_groups
                    for j in range(n_tok):
                        for a in range(d):
                            x[j, a] = x[reps[labels[j]], a]
        merge_layer[t] = at
        stop = -1
        if snap_only:
            merge_points[t] = 0 if at < 0 else (1 if groups == 1 else 2)
            merge_m1[t] = 0
            merge_s[t] = 0.0
            merge_c[t] = 0.0
            _record_tokens(gram_out[t:t + 1], opo_out[t:t + 1], 0, x)
        elif at < 0:
            merge_points[t] = 0
            merge_m1[t] = 0
            merge_s[t] = 0.0
            merge_c[t] = 0.0
            _record_tokens(gram_out[t:t + 1], opo_out[t:t + 1], 0, x)
        else:
            merge_points[t] = groups
            m1 = 0
            for i in range(n_tok):
                if labels[i] == 0:
                    m1 += 1
            merge_m1[t] = m1
            merged = groups == 1
            s, c = 0.0, 1.0
            if not merged:
                i, j = reps[0], reps[1]
                dm, dp = 0.0, 0.0
                for a in range(d):
                    dm += (x[j, a] - x[i, a]) ** 2
                    dp += (x[j, a] + x[i, a]) ** 2
                s, c = 0.5 * math.sqrt(dm), 0.5 * math.sqrt(dp)
                nrm = math.sqrt(s * s + c * c)
                s, c = s / nrm, c / nrm
                merge_s[t] = s
                merge_c[t] = c
                z = np.empty(7)
                s, c, ptr, stop, merged = _two_point_layers(
                    state, s, c, m1, n_tok - m1, at, n_layers, d, beta, softmax, h * sigma,
                    s_stop, c_stop, labels, rec_layers, ptr, rec_gram[t], rec_opo[t], z)
            else:
                merge_s[t] = 0.0
                merge_c[t] = 1.0
                stop = at
            while ptr < rec_layers.size:
                _record_two_point(rec_gram[t], rec_opo[t], ptr, labels, s, c, merged)
                ptr += 1
            _record_two_point(gram_out[t:t + 1], opo_out[t:t + 1], 0, labels, s, c, merged)
        stopped_layer[t] = stop


# ----------------------------------------------------------------------------- API

def _resolve_method(method, model, n_tokens, d, values, b_is_identity, split):
    if model == "random_attention":
        if method not in ("auto", "literal", "subspace"):
            raise ValueError("model='random_attention' runs with method 'auto' (= 'subspace', "
                             f"the exact subspace reductions) or 'literal'; got {method!r}")
        return "subspace" if method == "auto" else method
    if method == "subspace":
        raise ValueError("method='subspace' belongs to model='random_attention'")
    gaussian_b = b_is_identity and model == "stochastic" and values == "gaussian"
    chain_ok = n_tokens == 2 and b_is_identity and (model == "hybrid" or values == "gaussian")
    if split is not None:
        if method not in ("auto", "cluster_chain") or not gaussian_b:
            raise ValueError("split (a two-point initial configuration) runs on the weighted "
                             "overlap chain: it needs method='auto' or 'cluster_chain', "
                             "model='stochastic', values='gaussian' and B = identity; to push a "
                             "two-point configuration through the full N-token map, pass it as x0")
        return "cluster_chain"
    if method == "auto":
        if chain_ok:
            return "overlap_chain"
        if gaussian_b:
            return "reduced"
        if model == "stochastic" and values == "gaussian" and n_tokens < d:
            return "gaussian_dn"
        return "literal"
    if method == "overlap_chain" and not chain_ok:
        raise ValueError("method='overlap_chain' needs n_tokens == 2, B = identity and, for "
                         "model='stochastic', values='gaussian'")
    if method == "cluster_chain":
        raise ValueError("method='cluster_chain' needs split=(m1, m2), the two-point initial "
                         "configuration")
    if method in ("reduced", "snap") and not gaussian_b:
        raise ValueError(f"method={method!r} (the two-cluster reduction) needs "
                         "model='stochastic', values='gaussian' and B = identity")
    if method == "gaussian_dn" and not (model == "stochastic" and values == "gaussian"):
        raise ValueError("method='gaussian_dn' needs model='stochastic' and values='gaussian'")
    return method


def full_method(n_tokens, d):
    """The method ``auto`` chose for N Gaussian tokens before the two-cluster reduction:
    the exact d*N path when N < d, the literal one otherwise (the same d^2 normals).

    Figures that measure the N-token map itself below the merge threshold (Figure 9's
    clustering gap) pass it explicitly; its bits are those of every earlier release.
    """
    return "gaussian_dn" if n_tokens < d else "literal"


def simulate(n_tokens, d, beta, *, n_traj, L, T, attention="softmax", values="gaussian",
             sigma=1.0, model="stochastic", epsilon=0.0, method="auto", seed=0, times=None,
             B=None, x0=None, z0=None, split=None, stop_level=None, tol=1e-3, n_threads=None,
             first_trajectory=0, progress=False, n_heads=1, sigma_qk=1.0, eta=None):
    r"""Simulate the discrete deep-transformer model and return the final Gram matrices.

    Stochastic model (paper eq. 4), :math:`h = L^{-1/2}`:
    :math:`X^i_{n+1} = \operatorname{normalize}(X^i_n + h V_{n+1} A_\beta(X^i_n, X_n))`,
    with :math:`V_{n+1}` a fresh :math:`d\times d` matrix of i.i.d. centred entries of
    variance :math:`\sigma^2`, shared by all tokens.  Hybrid model (eq. 7):
    :math:`X^i_{n+1} = \operatorname{normalize}(X^i_n + w_{n+1} A_\beta(X^i_n, X_n))`,
    :math:`w_{n+1} = 1/L + \varepsilon\,\xi_{n+1}/\sqrt L`; :math:`\varepsilon = 0` is the
    deterministic attention flow.  ``T * L`` layers are run (time :math:`t = n/L`).

    Random-attention model (the follow-up of Koubbi, Geshkovski and Rigollet;
    :mod:`stochastic_transformers.random_attention`): ``n_heads`` heads, and in every layer
    and head fresh Gaussian :math:`V_h` (entries :math:`N(0,\sigma^2)`) and
    :math:`A_h = W_h W_h'^\top` (entries of :math:`W, W'` :math:`N(0,\sigma_{qk}^2)`):
    :math:`X^i \leftarrow \operatorname{normalize}(X^i + \frac{\eta}{H}\sum_h V_h m_h(X^i))`,
    :math:`m_h(x_i) = \sum_j \operatorname{softmax}_j(\beta\langle A_h x_i, x_j\rangle)x_j`,
    :math:`\eta = L^{-1/2}` unless given.

    Parameters
    ----------
    n_tokens : int
        Number of tokens, >= 2.
    d : int
        Dimension of the space, >= 2 (tokens live on :math:`S^{d-1}`).
    beta : float
        Inverse temperature, >= 0.
    n_traj : int
        Number of independent trajectories, >= 1.
    L : int
        Layers per unit time, >= 1.
    T : float
        Horizon, >= 0; ``T * L`` (the number of layers) must be whole.
    attention : {"softmax", "unnormalized"}
        Softmax or unnormalised attention; unnormalised weights are rescaled exactly
        where they would overflow (:func:`stochastic_transformers.attention.attention`).
    values : {"gaussian", "uniform", "rademacher"}
        Law of the entries of V (uniform on :math:`[-\sqrt3\sigma, \sqrt3\sigma]`,
        Rademacher :math:`\pm\sigma`).  Ignored by the hybrid model.
    sigma : float
        Standard deviation of the entries of V, > 0.
    model : {"stochastic", "hybrid", "random_attention"}
    epsilon : float
        Noise level of the hybrid model, >= 0 (must be 0 for the stochastic model).
    method : {"auto", "literal", "gaussian_dn", "overlap_chain", "cluster_chain", "reduced", "snap", "subspace"}
        ``auto`` picks the fastest exact method for the request: the overlap chain for
        two tokens, the weighted chain for a ``split``, and ``reduced`` for N >= 3
        Gaussian tokens with B = identity: the N-token map until the tokens occupy at
        most two points (their overlaps round to 1, :data:`MERGE_ONE_MINUS_OVERLAP`),
        then nothing (one point is absorbing) or the weighted two-cluster chain.
        ``full_method(n_tokens, d)`` names the plain N-token map.  ``snap`` (for
        validation) keeps the literal N-token map but makes coinciding tokens coincide
        exactly: with the same seed it differs from ``literal`` only by the merge.
        The random-attention model has ``literal`` (every matrix in full) and ``subspace``
        (its default: the matrices act only on the span of the tokens, exact in law).
    seed : int
        Seed of the per-block random streams (see the module docstring).
    times : sequence of float, optional
        Also record the Gram matrices at these times (each in [0, T]).
    B : array (d, d), optional
        :math:`Q^\top K`; identity when omitted.
    x0 : array (N, d) or (n_traj, N, d), optional
        Initial tokens (unit vectors); default i.i.d. uniform on the sphere.
    z0 : float, optional
        Two tokens (or a ``split``) only: start every trajectory at overlap ``z0`` in
        [-1, 1] (a uniformly random pair with that overlap).
    split : (int, int), optional
        A two-point initial configuration: ``m1`` tokens at :math:`y_1` and ``m2`` at
        :math:`y_2` (``m1 + m2 = n_tokens``), :math:`y_1, y_2` independent uniform or at
        overlap ``z0``; run on the weighted two-cluster chain (seven random numbers a
        layer, whatever N and d).
    stop_level : float, optional
        Overlap chain (and balanced two-point states of the ``cluster_chain`` and
        ``reduced`` methods), stochastic model: stop a trajectory once the limit diffusion's
        probability of ever leaving its pole (reaching ``1 - tol`` from +1 or
        ``-1 + tol`` from -1; :func:`theory.stopping_angles`) is below this level.
        ``None`` means 1e-6 when ``times`` is not given and off otherwise; 0 turns it off.
    tol : float
        Classification tolerance used by early stopping, in (0, 1).
    n_threads : int, optional
        Threads for the compiled loop over trajectories (default: numba's setting, all
        cores).  Results do not depend on it.
    first_trajectory : int
        Global index of the first trajectory, so that workers can each run a slice of
        one big ensemble and get the bits of the whole run.
    progress : bool
        Show a progress bar over trajectories.
    n_heads : int
        Random-attention model only: heads per layer, >= 1.
    sigma_qk : float
        Random-attention model only: standard deviation of the entries of the key and
        query factors :math:`W, W'`, > 0.
    eta : float, optional
        Random-attention model only: residual step, > 0 (default :math:`L^{-1/2}`).  The
        limit diffusion runs on the clock :math:`\tau = (T L)\,\eta^2\sigma^2/H`
        (``attrs["noise_clock"]``).

    Returns
    -------
    xarray.Dataset
        ``gram`` (trajectory, i, j) at time T, and ``gram_t`` (trajectory, time, i, j)
        when ``times`` is given.  For the overlap chain also ``one_minus_overlap`` and
        ``one_plus_overlap`` (full relative precision near both poles) and
        ``stopped_layer`` (-1 if never stopped); the same for ``cluster_chain``, with an
        N x N ``gram``.  ``reduced`` gives ``gram``, ``one_plus_min_overlap`` (1 + the
        smallest pairwise overlap, precise near -1), ``merge_layer`` (first layer with at
        most two points, -1 if none), ``merge_points`` (1 or 2; 0 if never merged),
        ``merge_m1`` (tokens in token 0's point), ``merge_one_plus_overlap`` and
        ``merge_one_minus_overlap`` (the state handed to the chain) and ``stopped_layer``;
        it has no ``tokens`` (the chain keeps only the overlap).  Every parameter, the
        method, the seed, the code version and the wall time are in ``attrs``.
    """
    t_start = time.perf_counter()
    plan = _make_plan(n_tokens, d, beta, n_traj=n_traj, L=L, T=T, attention=attention,
                      values=values, sigma=sigma, model=model, epsilon=epsilon, method=method,
                      seed=seed, times=times, B=B, x0=x0, z0=z0, split=split,
                      stop_level=stop_level, tol=tol, n_threads=n_threads,
                      first_trajectory=first_trajectory, progress=progress, n_heads=n_heads,
                      sigma_qk=sigma_qk, eta=eta)
    with _att.numba_threads(plan.n_threads):  # process-wide state: restored after the call
        data, stopped = _run(plan)
    return _dataset(plan, data, stopped, time.perf_counter() - t_start)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Everything :func:`simulate` validated and derived, handed whole to the runner."""

    method: str
    model: str
    n_traj: int
    n_tokens: int
    d: int
    L: int
    T: float
    n_layers: int
    beta: float
    attention: str
    values: str
    sigma: float
    epsilon: float
    seed: int
    tol: float
    stop_level: float
    s_stop: float             # early-stopping half angles (0: off)
    c_stop: float
    B: np.ndarray
    b_is_identity: bool
    x0: np.ndarray | None     # (n_traj, N, d) or None
    x0_given: bool
    z0: float | None
    split: tuple | None
    times: np.ndarray | None  # the caller's times, in their order (None: not recorded)
    rec: np.ndarray           # their layers, sorted
    inverse: np.ndarray       # sorted records -> the caller's order
    key0: np.uint64
    key1: np.uint64
    first_trajectory: int
    n_threads: int | None
    progress: bool
    n_heads: int
    sigma_qk: float
    eta: float | None

    @property
    def softmax(self) -> bool:
        return self.attention == "softmax"

    @property
    def h(self) -> float:
        """The main paper's residual step L^{-1/2}."""
        return 1.0 / math.sqrt(self.L)


def _make_plan(n_tokens, d, beta, *, n_traj, L, T, attention, values, sigma, model, epsilon,
               method, seed, times, B, x0, z0, split, stop_level, tol, n_threads,
               first_trajectory, progress, n_heads, sigma_qk, eta) -> _Plan:
    """Validate every argument of :func:`simulate` (a ValueError naming the parameter and its
    allowed range, before any compute) and derive what the kernels need."""
    n_tokens = check_int("n_tokens", n_tokens, 2)
    d = check_int("d", d, 2)
    beta = check_real("beta", beta, 0.0)
    n_traj = check_int("n_traj", n_traj, 1)
    L = check_int("L", L, 1)
    T = check_real("T", T, 0.0)
    attention = check_choice("attention", attention, ATTENTIONS)
    values = check_choice("values", values, VALUE_LAWS)
    sigma = check_real("sigma", sigma, 0.0, strict_min=True)
    model = check_choice("model", model, MODELS)
    epsilon = check_real("epsilon", epsilon, 0.0)
    if model != "hybrid" and epsilon != 0.0:
        raise ValueError(f"epsilon must be 0 for model={model!r} (it is the hybrid model's "
                         f"noise level); got {epsilon}")
    method = check_choice("method", method, METHODS)
    seed = check_int("seed", seed, 0)
    tol = check_real("tol", tol, 0.0, 1.0, strict_min=True)
    first_trajectory = check_int("first_trajectory", first_trajectory, 0)
    n_threads = None if n_threads is None else check_int("n_threads", n_threads, 1)
    n_layers = check_whole_layers(T, L)
    if model == "random_attention":
        from .random_attention import check_knobs

        n_heads, sigma_qk, eta = check_knobs(n_heads, sigma_qk, eta, L)
        if attention != "softmax" or values != "gaussian":
            raise ValueError("model='random_attention' is the follow-up's Gaussian model: it "
                             "needs attention='softmax' and values='gaussian'")
        if B is not None or split is not None:
            raise ValueError("model='random_attention' draws its own key-query matrices every "
                             "layer: B and split do not apply")
        if stop_level not in (None, 0, 0.0):
            raise ValueError("stop_level applies to the overlap chains of model='stochastic'; "
                             "model='random_attention' has no early stopping")
        stop_level = 0.0
    elif n_heads != 1 or sigma_qk != 1.0 or eta is not None:
        raise ValueError("n_heads, sigma_qk and eta belong to model='random_attention'; got "
                         f"model={model!r}")
    if B is None:
        B_arr = np.eye(d)
        b_is_identity = True
    else:
        B_arr = np.array(B, dtype=float)
        if B_arr.shape != (d, d) or not np.all(np.isfinite(B_arr)):
            raise ValueError(f"B must be a finite ({d}, {d}) array; got shape {B_arr.shape}")
        b_is_identity = bool(np.array_equal(B_arr, np.eye(d)))
    if split is not None:
        if isinstance(split, (str, bytes)) or not hasattr(split, "__len__") or len(split) != 2:
            raise ValueError(f"split must be a pair (m1, m2) of token counts; got {split!r}")
        split = (check_int("split[0]", split[0], 1), check_int("split[1]", split[1], 1))
        if sum(split) != n_tokens:
            raise ValueError(f"split={split} must add up to n_tokens={n_tokens}")
        if x0 is not None:
            raise ValueError("give at most one of x0 and split")
    if z0 is not None:
        if n_tokens != 2 and split is None:
            raise ValueError("z0 (an initial overlap) needs n_tokens == 2 or a split")
        z0 = check_real("z0", z0, -1.0, 1.0)
    x0_arr = None
    if x0 is not None:
        if z0 is not None:
            raise ValueError("give at most one of x0 and z0")
        x0_arr = np.array(x0, dtype=float)
        if x0_arr.shape == (n_tokens, d):
            x0_arr = np.broadcast_to(x0_arr, (n_traj, n_tokens, d))
        if x0_arr.shape != (n_traj, n_tokens, d):
            raise ValueError(f"x0 must have shape ({n_tokens}, {d}) or ({n_traj}, {n_tokens}, "
                             f"{d}); got {np.shape(x0)}")
        if not np.allclose(np.linalg.norm(x0_arr, axis=-1), 1.0, atol=1e-10):
            raise ValueError("x0 must hold unit vectors (tokens on the sphere)")
    times_arr = np.zeros(0) if times is None else np.atleast_1d(np.array(times, dtype=float))
    if times_arr.ndim != 1 or np.any(~np.isfinite(times_arr)) or np.any(times_arr < 0) \
            or np.any(times_arr > T + 1e-12):
        raise ValueError(f"times must be a 1-d sequence of values in [0, T={T}]")
    rec_layers = np.rint(times_arr * L).astype(np.int64)
    order = np.argsort(rec_layers, kind="stable")
    method = _resolve_method(method, model, n_tokens, d, values, b_is_identity, split)
    _check_memory(method, n_traj, n_tokens, d, rec_layers.size, x0_arr is not None)

    if stop_level is None:
        stop_level = 1e-6 if (times is None and method in _CHAINS
                              and model == "stochastic") else 0.0
    stop_level = check_real("stop_level", stop_level, 0.0, 1.0)
    s_stop = c_stop = 0.0
    if stop_level > 0.0:
        if method not in _CHAINS or model != "stochastic":
            raise ValueError("stop_level > 0 needs the overlap chain of the stochastic model "
                             "(methods 'overlap_chain', 'cluster_chain', 'reduced')")
        from .theory import stopping_angles

        theta_stop, psi_stop = stopping_angles(beta, d, tol=tol, level=stop_level)
        s_stop, c_stop = math.sin(theta_stop / 2.0), math.sin(psi_stop / 2.0)

    key0, key1 = _rng.stream_keys(seed)
    return _Plan(
        method=method, model=model, n_traj=n_traj, n_tokens=n_tokens, d=d, L=L, T=T,
        n_layers=n_layers, beta=beta, attention=attention, values=values, sigma=sigma,
        epsilon=epsilon, seed=seed, tol=tol, stop_level=stop_level, s_stop=s_stop,
        c_stop=c_stop, B=B_arr, b_is_identity=b_is_identity, x0=x0_arr,
        x0_given=x0 is not None, z0=z0, split=split,
        times=None if times is None else times_arr,
        rec=np.ascontiguousarray(rec_layers[order]),
        inverse=np.argsort(order, kind="stable"), key0=key0, key1=key1,
        first_trajectory=first_trajectory, n_threads=n_threads, progress=bool(progress),
        n_heads=n_heads, sigma_qk=sigma_qk, eta=eta)


def _dataset(plan, data, stopped, wall_time_s):
    """The returned dataset: the runner's arrays, coordinates and every parameter in attrs."""
    coords = {"trajectory": np.arange(plan.first_trajectory, plan.first_trajectory + plan.n_traj)}
    if plan.times is not None:
        coords["time"] = plan.times
    ds = xr.Dataset(data, coords=coords)
    method, model, split = plan.method, plan.model, plan.split
    ds.attrs.update(dict(
        n_tokens=plan.n_tokens, d=plan.d, beta=plan.beta, n_traj=plan.n_traj, L=plan.L,
        T=plan.T, n_layers=plan.n_layers, attention=plan.attention,
        values=plan.values if model != "hybrid" else "none",
        sigma=plan.sigma, model=model, epsilon=plan.epsilon, method=method, seed=plan.seed,
        B="identity" if plan.b_is_identity else repr(plan.B.tolist()),
        z0=("uniform" if plan.z0 is None and not plan.x0_given
            else ("given" if plan.x0_given else plan.z0)),
        split="none" if split is None else f"{split[0]},{split[1]}",
        merge_one_minus_overlap=(MERGE_ONE_MINUS_OVERLAP
                                 if method in ("cluster_chain", "reduced", "snap") else 0.0),
        stop_level=plan.stop_level, tol=plan.tol, stopped_fraction=float(np.mean(stopped >= 0)),
        first_trajectory=plan.first_trajectory, code_version=SIMULATION_CODE_VERSION,
        wall_time_s=wall_time_s,
    ))
    if model == "random_attention":
        from .random_attention import noise_clock

        ds.attrs.update(n_heads=plan.n_heads, sigma_qk=plan.sigma_qk, eta=plan.eta,
                        noise_clock=noise_clock(plan.n_layers, plan.eta, plan.sigma, plan.n_heads))
    return ds


def memory_estimate(method: str, n_traj: int, n_tokens: int, d: int, n_times: int,
                    x0_given: bool = False) -> int:
    """Bytes that :func:`simulate` holds at its peak for these sizes (an upper estimate).

    Overlap chain: the half-angle states and their records, the 2 x 2 Gram matrices and
    the gaps (about ``88 + 96 n_times`` bytes a trajectory).  N tokens: the tokens, the
    recorded Gram matrices, their reordered copy and the final Gram matrix.  A quarter is
    added for xarray's bookkeeping and temporaries.
    """
    if method == "overlap_chain":
        per_traj = 88 + 96 * n_times
    elif method in ("cluster_chain", "reduced", "snap"):
        per_traj = 8 * (2 * n_tokens * d + 16 + 2 * n_tokens**2 + 2 * n_times * (n_tokens**2 + 1))
    else:
        per_traj = 8 * (2 * n_tokens * d + n_tokens**2 + 2 * n_times * n_tokens**2)
        if x0_given:
            per_traj += 8 * n_tokens * d
    return int(1.25 * per_traj * n_traj)


def available_memory() -> int:
    """Bytes of memory available to this process now (MemAvailable on Linux), or the
    machine's physical memory where that cannot be read."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - exotic platforms
        return 2**63 - 1


def _check_memory(method, n_traj, n_tokens, d, n_times, x0_given):
    """Refuse, before any compute, a call whose arrays cannot fit in memory."""
    need = memory_estimate(method, n_traj, n_tokens, d, n_times, x0_given)
    have = available_memory()
    if need <= have:
        return
    per_traj = max(1, need // n_traj)
    fits = max(1, int(0.5 * have // per_traj))
    raise ValueError(
        f"n_traj={n_traj:,} needs about {need / 2**30:,.1f} GiB for its results "
        f"({per_traj:,} bytes a trajectory with method={method!r}), more than the "
        f"{have / 2**30:,.1f} GiB available; run it in pieces of at most {fits:,} "
        f"trajectories with first_trajectory=0, {fits}, {2 * fits}, ... (the pieces give the "
        f"same bits as one call), or as a sweep of cells (stochastic_transformers.sweep.run_sweep)")


def _run(plan: _Plan):
    """Run the kernels for a validated plan; return the data arrays and the stopped layers."""
    method, model, n_traj, n_tokens, d = (plan.method, plan.model, plan.n_traj, plan.n_tokens,
                                          plan.d)
    n_layers, beta, softmax, h, sigma = plan.n_layers, plan.beta, plan.softmax, plan.h, plan.sigma
    inv_l, epsilon, values, B_arr = 1.0 / plan.L, plan.epsilon, plan.values, plan.B
    b_is_identity, x0_arr, z0, split = plan.b_is_identity, plan.x0, plan.z0, plan.split
    s_stop, c_stop, rec, inverse, times = plan.s_stop, plan.c_stop, plan.rec, plan.inverse, plan.times
    key0, key1, first_trajectory, progress = plan.key0, plan.key1, plan.first_trajectory, plan.progress
    # Trajectories run in slices only so that a progress bar can move; the bits do not
    # depend on the slicing because every trajectory owns its stream.
    n_slices = 1 if not progress else min(n_traj, 50)
    bounds = np.linspace(0, n_traj, n_slices + 1).astype(int)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_traj, desc=f"simulate ({method})", unit="traj")
    data = {}
    if model == "random_attention":
        from . import random_attention as _ra

        x_out, rec_gram = _ra.run(plan, bounds, bar)
        data["gram"] = (("trajectory", "i", "j"), np.einsum("tia,tja->tij", x_out, x_out))
        data["tokens"] = (("trajectory", "i", "component"), x_out)
        if times is not None:
            data["gram_t"] = (("trajectory", "time", "i", "j"), rec_gram[:, inverse])
        stopped = np.full(n_traj, -1)
    elif method == "overlap_chain":
        s_out, c_out = np.empty(n_traj), np.empty(n_traj)
        stopped = np.empty(n_traj, dtype=np.int64)
        rec_s, rec_c = np.empty((n_traj, rec.size)), np.empty((n_traj, rec.size))
        if x0_arr is not None:
            s0 = np.linalg.norm(x0_arr[:, 1] - x0_arr[:, 0], axis=-1) / 2.0
            c0 = np.linalg.norm(x0_arr[:, 1] + x0_arr[:, 0], axis=-1) / 2.0
        elif z0 is not None:
            s0 = np.full(n_traj, math.sqrt((1.0 - z0) / 2.0))
            c0 = np.full(n_traj, math.sqrt((1.0 + z0) / 2.0))
        else:
            s0 = c0 = np.zeros(n_traj)
        init_mode = 0 if (x0_arr is None and z0 is None) else 1
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            _pair_kernel(key0, key1, first_trajectory + lo, hi - lo, d, n_layers, beta, softmax,
                         h, sigma, inv_l, epsilon, model == "hybrid", s0[lo:hi], c0[lo:hi],
                         init_mode, s_stop, c_stop, rec, rec_s[lo:hi], rec_c[lo:hi],
                         s_out[lo:hi], c_out[lo:hi], stopped[lo:hi])
            if bar is not None:
                bar.update(hi - lo)
        data["gram"] = (("trajectory", "i", "j"), _pair_gram(s_out, c_out))
        data["one_minus_overlap"] = (("trajectory",), 2.0 * s_out * s_out)
        data["one_plus_overlap"] = (("trajectory",), 2.0 * c_out * c_out)
        data["stopped_layer"] = (("trajectory",), stopped)
        if times is not None:
            rs, rc = rec_s[:, inverse], rec_c[:, inverse]
            data["gram_t"] = (("trajectory", "time", "i", "j"), _pair_gram(rs, rc))
            data["one_minus_overlap_t"] = (("trajectory", "time"), 2.0 * rs * rs)
            data["one_plus_overlap_t"] = (("trajectory", "time"), 2.0 * rc * rc)
    elif method == "cluster_chain":
        m1, m2 = split
        s_out, c_out = np.empty(n_traj), np.empty(n_traj)
        stopped = np.empty(n_traj, dtype=np.int64)
        rec_gram = np.empty((n_traj, rec.size, n_tokens, n_tokens))
        rec_opo = np.empty((n_traj, rec.size))
        s0 = np.full(n_traj, math.sqrt((1.0 - z0) / 2.0) if z0 is not None else 0.0)
        c0 = np.full(n_traj, math.sqrt((1.0 + z0) / 2.0) if z0 is not None else 0.0)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            _cluster_kernel(key0, key1, first_trajectory + lo, hi - lo, m1, m2, d, n_layers,
                            beta, softmax, h * sigma, s0[lo:hi], c0[lo:hi],
                            0 if z0 is None else 1, s_stop, c_stop, rec, rec_gram[lo:hi],
                            rec_opo[lo:hi], s_out[lo:hi], c_out[lo:hi], stopped[lo:hi])
            if bar is not None:
                bar.update(hi - lo)
        labels = np.r_[np.zeros(m1, int), np.ones(m2, int)]
        z = c_out * c_out - s_out * s_out
        gram = np.where(labels[:, None] == labels[None, :], 1.0, z[:, None, None])
        data["gram"] = (("trajectory", "i", "j"), gram)
        data["one_minus_overlap"] = (("trajectory",), 2.0 * s_out * s_out)
        data["one_plus_overlap"] = (("trajectory",), 2.0 * c_out * c_out)
        data["stopped_layer"] = (("trajectory",), stopped)
        if times is not None:
            data["gram_t"] = (("trajectory", "time", "i", "j"), rec_gram[:, inverse])
            data["one_plus_overlap_t"] = (("trajectory", "time"), rec_opo[:, inverse])
    elif method in ("reduced", "snap"):
        # The d*N path when it draws fewer normals; ``snap`` always draws the whole V, so that
        # it consumes its random numbers exactly as method="literal" does, before and after
        # a merge (the d*N path's use of its normals depends on the rank of the attention
        # outputs, which a merge changes).
        kind = 1 if (n_tokens < d and method == "reduced") else 0
        x0_in = (np.ascontiguousarray(x0_arr) if x0_arr is not None
                 else np.zeros((n_traj, n_tokens, d)))
        gram = np.empty((n_traj, n_tokens, n_tokens))
        opo = np.empty(n_traj)
        rec_gram = np.empty((n_traj, rec.size, n_tokens, n_tokens))
        rec_opo = np.empty((n_traj, rec.size))
        merge_layer = np.empty(n_traj, dtype=np.int64)
        merge_points = np.empty(n_traj, dtype=np.int64)
        merge_m1 = np.empty(n_traj, dtype=np.int64)
        merge_s, merge_c = np.empty(n_traj), np.empty(n_traj)
        stopped = np.empty(n_traj, dtype=np.int64)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            _reduced_kernel(key0, key1, first_trajectory + lo, hi - lo, n_tokens, d, n_layers,
                            kind, beta, softmax, B_arr, h, sigma, x0_in[lo:hi],
                            1 if x0_arr is not None else 0, s_stop, c_stop, method == "snap", rec,
                            rec_gram[lo:hi], rec_opo[lo:hi], gram[lo:hi], opo[lo:hi],
                            merge_layer[lo:hi], merge_points[lo:hi], merge_m1[lo:hi],
                            merge_s[lo:hi], merge_c[lo:hi], stopped[lo:hi])
            if bar is not None:
                bar.update(hi - lo)
        data["gram"] = (("trajectory", "i", "j"), gram)
        data["one_plus_min_overlap"] = (("trajectory",), opo)
        data["merge_layer"] = (("trajectory",), merge_layer)
        data["merge_points"] = (("trajectory",), merge_points)
        data["merge_m1"] = (("trajectory",), merge_m1)
        data["merge_one_minus_overlap"] = (("trajectory",), 2.0 * merge_s * merge_s)
        data["merge_one_plus_overlap"] = (("trajectory",), 2.0 * merge_c * merge_c)
        data["stopped_layer"] = (("trajectory",), stopped)
        if times is not None:
            data["gram_t"] = (("trajectory", "time", "i", "j"), rec_gram[:, inverse])
            data["one_plus_min_overlap_t"] = (("trajectory", "time"), rec_opo[:, inverse])
    else:
        kind = {"literal": 0, "gaussian_dn": 1}[method] if model == "stochastic" else 2
        x_out = np.empty((n_traj, n_tokens, d))
        rec_gram = np.empty((n_traj, rec.size, n_tokens, n_tokens))
        x0_in = (np.ascontiguousarray(x0_arr) if x0_arr is not None
                 else np.zeros((n_traj, n_tokens, d)))
        init_mode = 1 if x0_arr is not None else (2 if z0 is not None else 0)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            _tokens_kernel(key0, key1, first_trajectory + lo, hi - lo, n_tokens, d, n_layers,
                           kind, _LAW_CODES[values], beta, softmax, B_arr, b_is_identity, h,
                           sigma, inv_l,
                           epsilon, x0_in[lo:hi], init_mode, 0.0 if z0 is None else z0, rec,
                           rec_gram[lo:hi], x_out[lo:hi])
            if bar is not None:
                bar.update(hi - lo)
        data["gram"] = (("trajectory", "i", "j"), np.einsum("tia,tja->tij", x_out, x_out))
        data["tokens"] = (("trajectory", "i", "component"), x_out)
        if times is not None:
            data["gram_t"] = (("trajectory", "time", "i", "j"), rec_gram[:, inverse])
        stopped = np.full(n_traj, -1)
    if bar is not None:
        bar.close()
    return data, stopped


def _pair_gram(s, c):
    """2x2 Gram matrices from half-angle states: overlap z = c^2 - s^2."""
    z = c * c - s * s
    gram = np.ones(z.shape + (2, 2))
    gram[..., 0, 1] = z
    gram[..., 1, 0] = z
    return gram
