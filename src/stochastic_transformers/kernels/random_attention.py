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
def _fill(state, m, scale, rademacher):
    """Entries of ``m`` (row by row): ``scale`` times standard normals of ``state``, or
    ``scale`` times random signs (one bit of a 64-bit draw each) if ``rademacher``."""
    for a in range(m.shape[0]):
        for b in range(m.shape[1]):
            if rademacher:
                m[a, b] = scale if (_rng.next_u64(state) >> np.uint64(63)) != 0 else -scale
            else:
                m[a, b] = scale * _rng.normal(state)


@nb.njit(inline="always", **JIT)
def _mean_scores(x, mean_qk, beta, ax, s0):
    """``s0[i, j]`` = beta <Abar x_i, x_j>, the scores' mean part (``ax`` is scratch)."""
    n, d = x.shape
    for i in range(n):
        for a in range(d):
            acc = 0.0
            for b in range(d):
                acc += mean_qk[a, b] * x[i, b]
            ax[i, a] = acc
    for i in range(n):
        for j in range(n):
            acc = 0.0
            for a in range(d):
                acc += ax[i, a] * x[j, a]
            s0[i, j] = beta * acc


@nb.njit(inline="always", **JIT)
def _add_attended(pi, x, msum):
    """``msum[i] += sum_j pi[i, j] x_j``: one head's attention outputs, summed over heads."""
    n, d = x.shape
    for i in range(n):
        for a in range(d):
            acc = 0.0
            for j in range(n):
                acc += pi[i, j] * x[j, a]
            msum[i, a] += acc


@nb.njit(inline="always", **JIT)
def _add_mean_values(x, mean_v, scale_mean, msum, u):
    """``x_i += scale_mean * Vbar msum_i`` (the mean value matrix on the summed outputs);
    ``u`` is scratch.  Applied before the fluctuations are added, on the layer's tokens."""
    n, d = x.shape
    for i in range(n):
        for a in range(d):
            acc = 0.0
            for b in range(d):
                acc += mean_v[a, b] * msum[i, b]
            u[i, a] = scale_mean * acc


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
    for i in range(n):
        for a in range(d):
            u[i, a] = 0.0
    if has_mean:
        _mean_scores(x, mean_qk, beta, um, s0)
        for i in range(n):
            for a in range(d):
                msum[i, a] = 0.0
    for _head in range(n_heads):
        _fill(state, w, sigma_qk, rad_qk)
        _fill(state, wp, sigma_qk, rad_qk)
        _fill(state, v, 1.0, rad_v)   # 1.0 * g is g exactly: the same bits as a bare draw
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
        if has_mean:
            for i in range(n):
                for j in range(n):
                    pi[i, j] += s0[i, j]
        _softmax_rows(pi)
        for i in range(n):
            for a in range(d):
                acc = 0.0
                for j in range(n):
                    acc += pi[i, j] * x[j, a]
                mh[i, a] = acc
        if has_mean:
            for i in range(n):
                for a in range(d):
                    msum[i, a] += mh[i, a]
        for i in range(n):
            for a in range(d):
                acc = 0.0
                for b in range(d):
                    acc += v[a, b] * mh[i, b]
                u[i, a] += acc
    if has_mean:
        _add_mean_values(x, mean_v, scale_mean, msum, um)
        for i in range(n):
            for a in range(d):
                x[i, a] += um[i, a] + scale_v * u[i, a]
    else:
        for i in range(n):
            for a in range(d):
                x[i, a] += scale_v * u[i, a]
    _att.normalize_rows(x)


@nb.njit(inline="always", **JIT)
def layer_independent(state, x, n_heads, beta, sigma_qk, scale_v, rad_v, rad_qk, has_mean,
                      mean_v, mean_qk, scale_mean, w, wp, v, p, q, pi, mh, u, s0, msum, um):
    """One layer of the independent-noise variant, in place on ``x`` (N, d): every token
    draws its own W, W', Z for every head (token by token, then head by head, in the order
    of :func:`layer_literal`), so the increments of different tokens are independent given
    the layer's input (the follow-up's kernel K vanishes off the diagonal).  Each token's
    own scores are :math:`\\beta\\langle(\\bar A + W W'^\\top)x_i, x_j\\rangle` over all j; the
    arrays are those of :func:`layer_literal` (row 0 of ``pi`` and ``mh`` is used)."""
    n, d = x.shape
    if has_mean:
        _mean_scores(x, mean_qk, beta, um, s0)
    for i in range(n):
        for a in range(d):
            u[i, a] = 0.0
            msum[i, a] = 0.0
        for _head in range(n_heads):
            _fill(state, w, sigma_qk, rad_qk)
            _fill(state, wp, sigma_qk, rad_qk)
            _fill(state, v, 1.0, rad_v)
            for b in range(d):           # p_i = W'^T x_i
                acc = 0.0
                for a in range(d):
                    acc += x[i, a] * wp[a, b]
                p[0, b] = acc
            for j in range(n):           # scores of token i against every token j
                acc = 0.0
                for b in range(d):
                    qb = 0.0
                    for a in range(d):
                        qb += x[j, a] * w[a, b]
                    acc += p[0, b] * qb
                pi[0, j] = beta * acc + (s0[i, j] if has_mean else 0.0)
            top = -np.inf
            for j in range(n):
                if pi[0, j] > top:
                    top = pi[0, j]
            total = 0.0
            for j in range(n):
                pi[0, j] = math.exp(pi[0, j] - top)
                total += pi[0, j]
            for a in range(d):
                acc = 0.0
                for j in range(n):
                    acc += pi[0, j] * x[j, a]
                mh[0, a] = acc / total
                msum[i, a] += mh[0, a]
            for a in range(d):
                acc = 0.0
                for b in range(d):
                    acc += v[a, b] * mh[0, b]
                u[i, a] += acc
    if has_mean:
        _add_mean_values(x, mean_v, scale_mean, msum, um)
    for i in range(n):
        for a in range(d):
            x[i, a] += (um[i, a] if has_mean else 0.0) + scale_v * u[i, a]
    _att.normalize_rows(x)


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
    if has_mean:
        _mean_scores(x, mean_qk, beta, um, s0)
        for i in range(n):
            for a in range(d):
                msum[i, a] = 0.0
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
        if has_mean:
            for i in range(n):
                for j in range(n):
                    pi[i, j] += s0[i, j]
        _softmax_rows(pi)
        if has_mean:
            _add_attended(pi, x, msum)
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
    if has_mean:
        _add_mean_values(x, mean_v, scale_mean, msum, um)
        for i in range(n):
            for a in range(d):
                x[i, a] += um[i, a]
    for i in range(n):
        for a in range(d):
            acc = 0.0
            for e in range(kv):
                acc += z[a, e] * rf[e, i]
            x[i, a] += scale_v * acc
    _att.normalize_rows(x)


@nb.njit(**JIT_PARALLEL)
def _kernel(key0, key1, first, n, n_tok, d, n_layers, n_heads, literal, beta, sigma, sigma_qk,
            eta, rad_v, rad_qk, has_mean, mean_v, mean_qk, independent, x0, init_mode, z0,
            rec_layers, rec_gram, x_out):
    """Run ``n`` trajectories (global indices first..first+n-1) of the random-attention model.

    ``init_mode`` as :func:`.common.init_tokens`.  Records the
    Gram matrix at the layers ``rec_layers`` (sorted) and the final tokens.
    """
    k = min(d, n_tok)
    hk = n_heads * k
    kv = min(hk, n_tok)
    scale_v = eta * sigma / n_heads
    scale_mean = eta / n_heads
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
        s0 = np.empty((n_tok, n_tok))
        msum = np.empty((n_tok, d))
        um = np.empty((n_tok, d))
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
            while ptr < rec_layers.size and rec_layers[ptr] == layer:
                record_gram(rec_gram[t, ptr], x)
                ptr += 1
        for i in range(n_tok):
            for a in range(d):
                x_out[t, i, a] = x[i, a]


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
