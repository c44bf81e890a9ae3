r"""The follow-up's model: fresh random keys, queries and values in every layer and head.

Koubbi, Geshkovski and Rigollet (2026, *Homogenized transformers*) resample every weight
matrix of every layer and head, as at initialisation.  With :math:`H` heads, one layer maps

.. math::

    x_i \leftarrow \operatorname{normalize}\Bigl(x_i + \frac{\eta}{H}\sum_{h=1}^H V_h\, m_h(x_i)\Bigr),
    \qquad m_h(x_i) = \sum_j \operatorname{softmax}_j\bigl(\beta\langle A_h x_i, x_j\rangle\bigr)\, x_j,

with, independently for every layer and head, :math:`V_h` a :math:`d\times d` matrix of
i.i.d. :math:`N(0,\sigma^2)` entries and :math:`A_h = W_h W_h'^\top`, :math:`W_h, W'_h` of
i.i.d. :math:`N(0,\sigma_{qk}^2)` entries.  The main paper's model is the case of one head
and a fixed :math:`A`; at :math:`\beta = 0` the two coincide in law (attention is uniform
whatever :math:`A`), which the tests check.

Two exact methods, both drawing inside the compiled loop from the trajectory's own
stream (:mod:`stochastic_transformers.rng`), so bits do not depend on threads or slicing:

``literal``
    draws :math:`W_h, W'_h, V_h` in full (:math:`3Hd^2` normals a layer) and applies them.
    The reference.
``subspace``
    uses that all three matrices only ever act on the span of the tokens, of dimension
    :math:`k \le \min(d, N)`.  Write :math:`X^\top = QC` (thin QR, :math:`C` is
    :math:`k\times N`, :math:`C^\top C` the Gram matrix).

    * Scores: :math:`\langle A x_i, x_j\rangle = c_i^\top (Q^\top W)(Q^\top W')^\top c_j`, and
      :math:`Q^\top W, Q^\top W'` are independent :math:`k\times d` Gaussian matrices.  Given
      the first, the columns of their product are :math:`N(0, \sigma_{qk}^4 S)` with
      :math:`S = Q^\top W W^\top Q \sim \text{Wishart}_k(d, I)`, so the product has the law
      of :math:`\sigma_{qk}^2\,\Lambda Y`: :math:`\Lambda` the Bartlett factor of that Wishart
      matrix (:math:`\Lambda_{aa} = \sqrt{\chi^2_{d-a}}`, :math:`\Lambda_{ab} \sim N(0,1)`
      below the diagonal) and :math:`Y` a :math:`k\times k` Gaussian matrix:
      :math:`k(k+1)/2 + k^2` numbers a head instead of :math:`2d^2`.
    * Values, all heads at once: the increments :math:`u_i = \frac{\eta}{H}\sum_h V_h m_{h,i}`
      are jointly Gaussian with :math:`\operatorname{Cov}(u_i, u_j) = \frac{\eta^2\sigma^2}{H^2}
      G_{ij} I_d`, :math:`G = \sum_h M_h^\top M_h` (:math:`M_h` the :math:`k\times N`
      coordinates of head h's outputs).  With :math:`R_F` the triangular factor of the
      stacked :math:`(Hk)\times N` matrix :math:`[M_1; \dots; M_H]` (so
      :math:`R_F^\top R_F = G`), :math:`U = \frac{\eta\sigma}{H} Z R_F` with :math:`Z` a
      :math:`d\times\min(Hk, N)` Gaussian matrix: at most :math:`dN` normals a layer for
      all heads instead of :math:`Hd^2`.

    Householder QR keeps both factorisations exact to rounding when tokens nearly
    coincide (a Cholesky factor of the Gram matrix would break down).
"""

from __future__ import annotations

import math

import numpy as np

from . import attention as _att
from . import rng as _rng
from ._jit import JIT as _JIT
from ._jit import JIT_PARALLEL as _PAR
from ._validation import check_int, check_real
# simulate imports this module lazily (in its runner), so this import never cycles.
from .simulate import _init_tokens, record_gram

#: Methods of this model; ``auto`` means ``subspace``.
METHODS = ("literal", "subspace")


def check_knobs(n_heads, sigma_qk, eta, L):
    """Validated ``(n_heads, sigma_qk, eta)``; ``eta=None`` means :math:`L^{-1/2}`."""
    n_heads = check_int("n_heads", n_heads, 1, 4096)
    sigma_qk = check_real("sigma_qk", sigma_qk, 0.0, strict_min=True)
    eta = 1.0 / math.sqrt(L) if eta is None else check_real("eta", eta, 0.0, strict_min=True)
    return n_heads, sigma_qk, eta


def noise_clock(n_layers, eta, sigma=1.0, n_heads=1):
    r"""The homogenised time :math:`\tau = n\,\eta^2\sigma^2/H` after ``n_layers`` layers.

    A layer adds to every token a centred Gaussian increment of covariance
    :math:`(\eta^2\sigma^2/H)\,c\,I_d` with :math:`c = O(1)` (the heads' outputs averaged);
    the limit diffusion runs on this clock (for the main paper's model, :math:`\tau = \sigma^2 T`).
    """
    return n_layers * eta * eta * sigma * sigma / n_heads


def normals_per_layer(n_tokens, d, n_heads, method):
    """Random numbers one layer draws (chi variables counted as one)."""
    if method == "literal":
        return 3 * n_heads * d * d
    k = min(d, n_tokens)
    return n_heads * (k * (k + 1) // 2 + k * k) + d * min(n_heads * k, n_tokens)


# ----------------------------------------------------------------------------- kernels

@_att.nb.njit(inline="always", **_JIT)
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


@_att.nb.njit(inline="always", **_JIT)
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
        for a in range(d):
            for b in range(d):
                w[a, b] = sigma_qk * _rng.normal(state)
        for a in range(d):
            for b in range(d):
                wp[a, b] = sigma_qk * _rng.normal(state)
        for a in range(d):
            for b in range(d):
                v[a, b] = _rng.normal(state)
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


@_att.nb.njit(inline="always", **_JIT)
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


@_att.nb.njit(**_PAR)
def _kernel(key0, key1, first, n, n_tok, d, n_layers, n_heads, literal, beta, sigma, sigma_qk,
            eta, x0, init_mode, z0, rec_layers, rec_gram, x_out):
    """Run ``n`` trajectories (global indices first..first+n-1) of the random-attention model.

    ``init_mode`` as :func:`stochastic_transformers.simulate._init_tokens`.  Records the
    Gram matrix at the layers ``rec_layers`` (sorted) and the final tokens.
    """
    k = min(d, n_tok)
    hk = n_heads * k
    kv = min(hk, n_tok)
    scale_v = eta * sigma / n_heads
    for t in _att.nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        _rng.seed_stream(state, key0, key1, first + t)
        x = np.empty((n_tok, d))
        _init_tokens(state, x, init_mode, x0[t], z0)
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


def run(plan, bounds, bar):
    """Run the kernel for a validated :func:`simulate` plan in the trajectory slices ``bounds``
    (for the progress bar ``bar``, or None); return the final tokens and the records."""
    n_traj, n_tokens, d = plan.n_traj, plan.n_tokens, plan.d
    x_out = np.empty((n_traj, n_tokens, d))
    rec_gram = np.empty((n_traj, plan.rec.size, n_tokens, n_tokens))
    x0_in = (np.ascontiguousarray(plan.x0) if plan.x0 is not None
             else np.zeros((n_traj, n_tokens, d)))
    init_mode = 1 if plan.x0 is not None else (2 if plan.z0 is not None else 0)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        _kernel(plan.key0, plan.key1, plan.first_trajectory + lo, hi - lo, n_tokens, d,
                plan.n_layers, plan.n_heads, plan.method == "literal", plan.beta, plan.sigma,
                plan.sigma_qk, plan.eta, x0_in[lo:hi], init_mode,
                0.0 if plan.z0 is None else plan.z0, plan.rec, rec_gram[lo:hi], x_out[lo:hi])
        if bar is not None:
            bar.update(hi - lo)
    return x_out, rec_gram
