r"""The follow-up's model: fresh random keys, queries and values in every layer and head.

The two exact methods, ``literal`` (every matrix in full) and ``subspace`` (the matrices
act only on the span of the tokens), are derived in
:mod:`stochastic_transformers.random_attention`; this module holds their compiled layers.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .. import attention as _att
from .. import rng as _rng
from .._jit import JIT, JIT_PARALLEL, first_use_notice
from .common import Runner, fill_random, record_grams, start_tokens
from .tokens import allocate_tokens, assemble_tokens, init_mode


@nb.njit(inline="always", **JIT)
def _exp_row(s, i):
    """``s[i, j]`` <- exp(s[i, j] - max_j s[i, j]) in place; return the row's new sum."""
    top = -np.inf
    for j in range(s.shape[1]):
        if s[i, j] > top:
            top = s[i, j]
    total = 0.0
    for j in range(s.shape[1]):
        s[i, j] = math.exp(s[i, j] - top)
        total += s[i, j]
    return total


@nb.njit(inline="always", **JIT)
def _softmax_rows(s, s0, has_mean):
    """Row-wise softmax of the scores ``s`` (N, N) plus, with ``has_mean``, the mean scores
    ``s0``, in place, with the row maximum subtracted."""
    if has_mean:
        for i in range(s.shape[0]):
            for j in range(s.shape[1]):
                s[i, j] += s0[i, j]
    for i in range(s.shape[0]):
        inv = 1.0 / _exp_row(s, i)
        for j in range(s.shape[1]):
            s[i, j] *= inv


@nb.njit(inline="always", **JIT)
def _zero(m):
    for i in range(m.shape[0]):
        for a in range(m.shape[1]):
            m[i, a] = 0.0


@nb.njit(inline="always", **JIT)
def _project(x, m, out):
    """``out[i]`` = m^T x_i (``out`` = x m) for every row of ``x``."""
    for i in range(x.shape[0]):
        for b in range(m.shape[1]):
            out[i, b] = _att.row_col(x, i, m, b)


@nb.njit(inline="always", **JIT)
def _scores(p, q, scale, s):
    """``s[i, j]`` = scale <p_i, q_j>."""
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            s[i, j] = scale * _att.row_dot(p, i, q, j)


@nb.njit(inline="always", **JIT)
def _mean_scores(x, mean_qk, beta, ax, s0):
    """``s0[i, j]`` = beta <Abar x_i, x_j>, the scores' mean part (``ax`` is scratch)."""
    n, d = x.shape
    for i in range(n):
        for a in range(d):
            ax[i, a] = _att.row_dot(mean_qk, a, x, i)
    _scores(ax, x, beta, s0)


@nb.njit(inline="always", **JIT)
def _start_means(x, mean_qk, beta, ax, s0, msum, has_mean):
    """With ``has_mean``: the mean scores into ``s0`` (:func:`_mean_scores`) and ``msum``,
    the heads' summed outputs, to zero."""
    if has_mean:
        _mean_scores(x, mean_qk, beta, ax, s0)
        _zero(msum)


@nb.njit(inline="always", **JIT)
def _mean_values(mean_v, scale_mean, msum, u):
    """``u_i`` = scale_mean * Vbar msum_i (the mean value matrix on the summed outputs),
    added to the layer's tokens before the fluctuations."""
    n, d = u.shape
    for i in range(n):
        for a in range(d):
            u[i, a] = scale_mean * _att.row_dot(mean_v, a, msum, i)


@nb.njit(inline="always", **JIT)
def _add_increments(x, u, scale_v, has_mean, mean_v, scale_mean, msum, um, plus_zero):
    """``x_i`` <- normalize(x_i + (um_i + scale_v u_i)), with um_i the mean values of
    :func:`_mean_values` if ``has_mean``; without means um_i is left out, or with
    ``plus_zero`` taken as 0.0 (the independent layer's arithmetic: 0.0 + (-0.0) is +0.0)."""
    if has_mean:
        _mean_values(mean_v, scale_mean, msum, um)
    n, d = x.shape
    for i in range(n):
        for a in range(d):
            inc = scale_v * u[i, a]
            if has_mean:
                inc = um[i, a] + inc
            elif plus_zero:
                inc = 0.0 + inc
            x[i, a] += inc
    _att.normalize_rows(x)


@nb.njit(inline="always", **JIT)
def layer_literal(state, x, n_heads, beta, sigma_qk, scale_v, rad_v, rad_qk, has_mean,
                  mean_v, mean_qk, scale_mean, w, wp, v, p, q, pi, mh, u, s0, msum, um):
    """One layer with every matrix drawn in full, in place on ``x`` (N, d).

    Per head, in this order: W, W' (entries of standard deviation sigma_qk), Z (entries of
    variance 1; ``scale_v`` = eta sigma / H carries the rest), Gaussian or, with ``rad_qk``,
    ``rad_v``, Rademacher.  Scores :math:`\\beta\\langle (\\bar A + W W'^\\top) x_i, x_j\\rangle
    = \\beta\\langle\\bar A x_i, x_j\\rangle + \\beta (W'^\\top x_i)\\cdot(W^\\top x_j)`; with
    ``has_mean`` the mean part ``scale_mean`` :math:`\\bar V\\sum_h m_h(x_i)` (scale_mean =
    eta / H) is added too.  Without means the arithmetic is the centred model's, bit for bit.
    """
    n, d = x.shape
    _zero(u)
    _start_means(x, mean_qk, beta, um, s0, msum, has_mean)
    for _head in range(n_heads):
        fill_random(state, w, sigma_qk, rad_qk)
        fill_random(state, wp, sigma_qk, rad_qk)
        fill_random(state, v, 1.0, rad_v)   # 1.0 * g is g exactly: the same bits as a bare draw
        _project(x, wp, p)           # p_i = W'^T x_i, q_i = W^T x_i
        _project(x, w, q)
        _scores(p, q, beta, pi)
        _softmax_rows(pi, s0, has_mean)
        for i in range(n):
            for a in range(d):
                mh[i, a] = _att.row_col(pi, i, x, a)
                if has_mean:
                    msum[i, a] += mh[i, a]
        for i in range(n):
            for a in range(d):
                u[i, a] += _att.row_dot(v, a, mh, i)
    _add_increments(x, u, scale_v, has_mean, mean_v, scale_mean, msum, um, False)


@nb.njit(inline="always", **JIT)
def layer_independent(state, x, n_heads, beta, sigma_qk, scale_v, rad_v, rad_qk, has_mean,
                      mean_v, mean_qk, scale_mean, w, wp, v, p, q, pi, mh, u, s0, msum, um):
    """One layer of the independent-noise variant, in place on ``x`` (N, d): every token
    draws its own W, W', Z for every head (token by token, then head by head, in the order
    of :func:`layer_literal`), so the increments of different tokens are independent given
    the layer's input (the follow-up's kernel K vanishes off the diagonal).  Each token's
    own scores are :math:`\\beta\\langle(\\bar A + W W'^\\top)x_i, x_j\\rangle` over all j; the
    arrays are those of :func:`layer_literal` (row 0 of ``p``, ``pi`` and ``mh`` is used)."""
    n, d = x.shape
    if has_mean:
        _mean_scores(x, mean_qk, beta, um, s0)
    _zero(u)
    _zero(msum)
    for i in range(n):
        for _head in range(n_heads):
            fill_random(state, w, sigma_qk, rad_qk)
            fill_random(state, wp, sigma_qk, rad_qk)
            fill_random(state, v, 1.0, rad_v)
            for b in range(d):           # p_i = W'^T x_i; q_j = W^T x_j for every token j
                p[0, b] = _att.row_col(x, i, wp, b)
            _project(x, w, q)
            for j in range(n):           # scores of token i against every token j
                pi[0, j] = beta * _att.row_dot(p, 0, q, j) + (s0[i, j] if has_mean else 0.0)
            total = _exp_row(pi, 0)
            for a in range(d):
                mh[0, a] = _att.row_col(pi, 0, x, a) / total
                msum[i, a] += mh[0, a]
            for a in range(d):
                u[i, a] += _att.row_dot(v, a, mh, 0)
    _add_increments(x, u, scale_v, has_mean, mean_v, scale_mean, msum, um, True)


@nb.njit(inline="always", **JIT)
def layer_subspace(state, x, n_heads, beta, beta_qk, scale_v, has_mean, mean_v, mean_qk,
                   scale_mean, xt, c, hv, lw, y, mk, tmp, pi, stack, hv2, rf, z, s0, msum, um):
    """One layer through the exact subspace reductions (module docstring), in place on ``x``.

    ``beta_qk`` = beta sigma_qk^2, ``scale_v`` = eta sigma / H.  With ``has_mean`` the
    scores gain beta <Abar x_i, x_j> and the tokens scale_mean Vbar sum_h m_h(x_i), as in
    :func:`layer_literal` (the means act on the full space, the fluctuations' reductions
    are unchanged).  Per head it draws the
    Bartlett factor (diagonal chi variables, then the strictly lower entries row by row)
    and Y; then Z for the values of all heads.  The other arrays are scratch space:
    xt (d, N), c (k, N), hv (d,), lw, y, mk (k, k), tmp (k, N), pi (N, N),
    stack (H k, N), hv2 (H k,), rf (min(Hk, N), N), z (d, min(Hk, N)).
    """
    n, d = x.shape
    k = c.shape[0]
    for i in range(n):
        for a in range(d):
            xt[a, i] = x[i, a]
    _att.householder_r(xt, c, hv)  # X^T = Q C: c_i are the coordinates of x_i
    _start_means(x, mean_qk, beta, um, s0, msum, has_mean)
    for head in range(n_heads):
        for a in range(k):
            lw[a, a] = _rng.sqrt_chi2(state, d - a)
            for b in range(a):
                lw[a, b] = _rng.normal(state)
        fill_random(state, y, 1.0, False)
        for a in range(k):           # mk = Lambda Y (Lambda lower triangular)
            for b in range(k):
                acc = 0.0
                for e in range(a + 1):
                    acc += lw[a, e] * y[e, b]
                mk[a, b] = acc
        for a in range(k):           # tmp = mk C
            for j in range(n):
                tmp[a, j] = _att.row_col(mk, a, c, j)
        for i in range(n):           # scores c_i^T mk c_j
            for j in range(n):
                acc = 0.0
                for a in range(k):
                    acc += c[a, i] * tmp[a, j]
                pi[i, j] = beta_qk * acc
        _softmax_rows(pi, s0, has_mean)
        if has_mean:                 # the heads' outputs m_{h,i}, summed over heads
            for i in range(n):
                for a in range(d):
                    msum[i, a] += _att.row_col(pi, i, x, a)
        for a in range(k):           # coordinates of m_{h,i} = sum_j pi_ij c_j
            for i in range(n):
                stack[head * k + a, i] = _att.row_dot(pi, i, c, a)
    _att.householder_r(stack, rf, hv2)  # rf^T rf = sum_h M_h^T M_h
    fill_random(state, z, 1.0, False)
    if has_mean:
        _mean_values(mean_v, scale_mean, msum, um)
    for i in range(n):
        for a in range(d):
            if has_mean:
                x[i, a] += um[i, a]
            x[i, a] += scale_v * _att.row_col(z, a, rf, i)
    _att.normalize_rows(x)


@nb.njit(inline="always", **JIT)
def _literal_scratch(n_tok, d):
    """Scratch of :func:`layer_literal` (and of the other layers: pi, s0, msum, um): w, wp,
    v (d, d); p, q, mh, u (N, d); pi, s0 (N, N); msum, um (N, d)."""
    return (np.empty((d, d)), np.empty((d, d)), np.empty((d, d)), np.empty((n_tok, d)),
            np.empty((n_tok, d)), np.empty((n_tok, d)), np.empty((n_tok, d)),
            np.empty((n_tok, n_tok)), np.empty((n_tok, n_tok)), np.empty((n_tok, d)),
            np.empty((n_tok, d)))


@nb.njit(inline="always", **JIT)
def _subspace_scratch(n_tok, d, n_heads):
    """The other arrays of :func:`layer_subspace` (its docstring gives their shapes)."""
    k = min(d, n_tok)
    hk = n_heads * k
    kv = min(hk, n_tok)
    return (np.empty((d, n_tok)), np.empty((k, n_tok)), np.empty(d), np.zeros((k, k)),
            np.empty((k, k)), np.empty((k, k)), np.empty((k, n_tok)), np.empty((hk, n_tok)),
            np.empty(hk), np.empty((kv, n_tok)), np.empty((d, kv)))


@nb.njit(**JIT_PARALLEL)
def _kernel(key0, key1, first, n, n_tok, d, n_layers, n_heads, literal, beta, sigma, sigma_qk,
            eta, rad_v, rad_qk, has_mean, mean_v, mean_qk, independent, x0, init_mode, z0,
            rec_layers, rec_gram, x_out):
    """Run ``n`` trajectories (global indices first..first+n-1) of the random-attention model.

    ``init_mode`` as :func:`.common.init_tokens`.  Records the
    Gram matrix at the layers ``rec_layers`` (sorted) and the final tokens.
    """
    scale_v = eta * sigma / n_heads
    scale_mean = eta / n_heads
    for t in nb.prange(n):
        state, x = start_tokens(key0, key1, first + t, n_tok, d, init_mode, x0[t], z0)
        # Every scratch array is allocated whatever the method (once per trajectory, and
        # small): arrays defined in one branch only are mis-compiled inside numba's prange.
        w, wp, v, p, q, mh, u, pi, s0, msum, um = _literal_scratch(n_tok, d)
        xt, c, hv, lw, y, mk, tmp, stack, hv2, rf, z = _subspace_scratch(n_tok, d, n_heads)
        ptr = 0
        for layer in range(0, n_layers + 1):
            if layer > 0:
                if independent:
                    layer_independent(state, x, n_heads, beta, sigma_qk, scale_v, rad_v, rad_qk,
                                      has_mean, mean_v, mean_qk, scale_mean, w, wp, v, p, q, pi,
                                      mh, u, s0, msum, um)
                elif literal:
                    layer_literal(state, x, n_heads, beta, sigma_qk, scale_v, rad_v, rad_qk,
                                  has_mean, mean_v, mean_qk, scale_mean, w, wp, v, p, q, pi,
                                  mh, u, s0, msum, um)
                else:
                    layer_subspace(state, x, n_heads, beta, beta * sigma_qk * sigma_qk,
                                   scale_v, has_mean, mean_v, mean_qk, scale_mean, xt, c, hv,
                                   lw, y, mk, tmp, pi, stack, hv2, rf, z, s0, msum, um)
            ptr = record_grams(rec_gram[t], rec_layers, ptr, layer, x)
        x_out[t] = x


def _run(plan, a, lo, hi):
    model = plan.model
    mean_v, mean_qk = model.mean_v_matrix, model.mean_qk_matrix
    has_mean = bool(np.any(mean_v != 0.0) or np.any(mean_qk != 0.0))
    with first_use_notice(_kernel, "the random-attention kernels"):
        _kernel(plan.key0, plan.key1, plan.first_trajectory + lo, hi - lo, plan.n_tokens,
                plan.d, plan.n_layers, plan.n_heads, plan.method == "literal", plan.beta,
                plan.sigma, plan.sigma_qk, plan.eta, model.values == "rademacher",
                model.qk_law == "rademacher", has_mean, mean_v, mean_qk,
                model.noise == "independent", a["x0"][lo:hi], init_mode(plan),
                0.0 if plan.z0 is None else plan.z0, plan.rec, a["rec_gram"][lo:hi],
                a["x"][lo:hi])


RUNNER = Runner(allocate_tokens, _run, assemble_tokens)
