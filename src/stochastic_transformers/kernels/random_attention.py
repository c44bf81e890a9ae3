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
from .._jit import JIT, JIT_PARALLEL
from .common import Runner, record_gram, start_tokens
from .tokens import allocate_tokens, assemble_tokens, init_mode


@nb.njit(inline="always", **JIT)
def _softmax_rows(s):
    """Row-wise softmax of ``s`` (N, N) in place, with the row maximum subtracted."""
    n = s.shape[0]
    for i in range(n):
        top = -np.inf
        for j in range(n):
            if s[i, j] > top:
                top = s[i, j]
        total = 0.0
        for j in range(n):
            s[i, j] = math.exp(s[i, j] - top)
            total += s[i, j]
        inv = 1.0 / total
        for j in range(n):
            s[i, j] *= inv


@nb.njit(inline="always", **JIT)
def _fill_normal(state, m, scale):
    """Entries of ``m`` (row by row) from ``scale`` times standard normals of ``state``."""
    for a in range(m.shape[0]):
        for b in range(m.shape[1]):
            m[a, b] = scale * _rng.normal(state)


@nb.njit(inline="always", **JIT)
def layer_literal(state, x, n_heads, beta, sigma_qk, scale_v, w, wp, v, p, q, pi, mh, u):
    """One layer with every matrix drawn in full, in place on ``x`` (N, d).

    Per head, in this order: W, W' (entries N(0, sigma_qk^2)), V (standard normal entries;
    ``scale_v`` = eta sigma / H carries the rest).  Scores
    :math:`\\beta\\langle W W'^\\top x_i, x_j\\rangle = \\beta (W'^\\top x_i)\\cdot(W^\\top x_j)`.
    """
    n, d = x.shape
    for i in range(n):
        for a in range(d):
            u[i, a] = 0.0
    for _head in range(n_heads):
        _fill_normal(state, w, sigma_qk)
        _fill_normal(state, wp, sigma_qk)
        _fill_normal(state, v, 1.0)   # 1.0 * g is g exactly: the same bits as a bare draw
        for i in range(n):           # p_i = W'^T x_i, q_i = W^T x_i
            for b in range(d):
                acc_p = 0.0
                acc_q = 0.0
                for a in range(d):
                    acc_p += x[i, a] * wp[a, b]
                    acc_q += x[i, a] * w[a, b]
                p[i, b] = acc_p
                q[i, b] = acc_q
        for i in range(n):
            for j in range(n):
                acc = 0.0
                for b in range(d):
                    acc += p[i, b] * q[j, b]
                pi[i, j] = beta * acc
        _softmax_rows(pi)
        for i in range(n):
            for a in range(d):
                acc = 0.0
                for j in range(n):
                    acc += pi[i, j] * x[j, a]
                mh[i, a] = acc
        for i in range(n):
            for a in range(d):
                acc = 0.0
                for b in range(d):
                    acc += v[a, b] * mh[i, b]
                u[i, a] += acc
    for i in range(n):
        for a in range(d):
            x[i, a] += scale_v * u[i, a]
    _att.normalize_rows(x)


@nb.njit(inline="always", **JIT)
def layer_subspace(state, x, n_heads, beta_qk, scale_v, xt, c, hv, lw, y, mk, tmp, pi, stack,
                   hv2, rf, z):
    """One layer through the exact subspace reductions (module docstring), in place on ``x``.

    ``beta_qk`` = beta sigma_qk^2, ``scale_v`` = eta sigma / H.  Per head it draws the
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
    for head in range(n_heads):
        for a in range(k):
            lw[a, a] = _rng.sqrt_chi2(state, d - a)
            for b in range(a):
                lw[a, b] = _rng.normal(state)
        for a in range(k):
            for b in range(k):
                y[a, b] = _rng.normal(state)
        for a in range(k):           # mk = Lambda Y (Lambda lower triangular)
            for b in range(k):
                acc = 0.0
                for e in range(a + 1):
                    acc += lw[a, e] * y[e, b]
                mk[a, b] = acc
        for a in range(k):           # tmp = mk C
            for j in range(n):
                acc = 0.0
                for e in range(k):
                    acc += mk[a, e] * c[e, j]
                tmp[a, j] = acc
        for i in range(n):           # scores c_i^T mk c_j
            for j in range(n):
                acc = 0.0
                for a in range(k):
                    acc += c[a, i] * tmp[a, j]
                pi[i, j] = beta_qk * acc
        _softmax_rows(pi)
        base = head * k
        for a in range(k):           # coordinates of m_{h,i} = sum_j pi_ij c_j
            for i in range(n):
                acc = 0.0
                for j in range(n):
                    acc += pi[i, j] * c[a, j]
                stack[base + a, i] = acc
    _att.householder_r(stack, rf, hv2)  # rf^T rf = sum_h M_h^T M_h
    kv = rf.shape[0]
    for a in range(d):
        for e in range(kv):
            z[a, e] = _rng.normal(state)
    for i in range(n):
        for a in range(d):
            acc = 0.0
            for e in range(kv):
                acc += z[a, e] * rf[e, i]
            x[i, a] += scale_v * acc
    _att.normalize_rows(x)


@nb.njit(**JIT_PARALLEL)
def _kernel(key0, key1, first, n, n_tok, d, n_layers, n_heads, literal, beta, sigma, sigma_qk,
            eta, x0, init_mode, z0, rec_layers, rec_gram, x_out):
    """Run ``n`` trajectories (global indices first..first+n-1) of the random-attention model.

    ``init_mode`` as :func:`.common.init_tokens`.  Records the
    Gram matrix at the layers ``rec_layers`` (sorted) and the final tokens.
    """
    k = min(d, n_tok)
    hk = n_heads * k
    kv = min(hk, n_tok)
    scale_v = eta * sigma / n_heads
    for t in nb.prange(n):
        state, x = start_tokens(key0, key1, first + t, n_tok, d, init_mode, x0[t], z0)
        # Every scratch array is allocated whatever the method (once per trajectory, and
        # small): arrays defined in one branch only are mis-compiled inside numba's prange.
        w = np.empty((d, d))
        wp = np.empty((d, d))
        v = np.empty((d, d))
        p = np.empty((n_tok, d))
        q = np.empty((n_tok, d))
        mh = np.empty((n_tok, d))
        u = np.empty((n_tok, d))
        xt = np.empty((d, n_tok))
        c = np.empty((k, n_tok))
        hv = np.empty(d)
        lw = np.zeros((k, k))
        y = np.empty((k, k))
        mk = np.empty((k, k))
        tmp = np.empty((k, n_tok))
        stack = np.empty((hk, n_tok))
        hv2 = np.empty(hk)
        rf = np.empty((kv, n_tok))
        z = np.empty((d, kv))
        pi = np.empty((n_tok, n_tok))
        ptr = 0
        for layer in range(0, n_layers + 1):
            if layer > 0:
                if literal:
                    layer_literal(state, x, n_heads, beta, sigma_qk, scale_v, w, wp, v, p, q,
                                  pi, mh, u)
                else:
                    layer_subspace(state, x, n_heads, beta * sigma_qk * sigma_qk, scale_v, xt,
                                   c, hv, lw, y, mk, tmp, pi, stack, hv2, rf, z)
            while ptr < rec_layers.size and rec_layers[ptr] == layer:
                record_gram(rec_gram[t, ptr], x)
                ptr += 1
        for i in range(n_tok):
            for a in range(d):
                x_out[t, i, a] = x[i, a]


def _run(plan, a, lo, hi):
    _kernel(plan.key0, plan.key1, plan.first_trajectory + lo, hi - lo, plan.n_tokens, plan.d,
            plan.n_layers, plan.n_heads, plan.method == "literal", plan.beta, plan.sigma,
            plan.sigma_qk, plan.eta, a["x0"][lo:hi], init_mode(plan),
            0.0 if plan.z0 is None else plan.z0, plan.rec, a["rec_gram"][lo:hi], a["x"][lo:hi])


RUNNER = Runner(allocate_tokens, _run, assemble_tokens)
