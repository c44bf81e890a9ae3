r"""The feedforward block: the N-token map with it, and its exact two-point chain.

A layer with the block (:class:`stochastic_transformers.config.ModelConfig`, ``ff_*``) is

.. math::

    x_i \leftarrow \operatorname{normalize}\bigl(x_i + h\,[V A_i + \sqrt r\,W_2\varphi(W_1 x_i)]\bigr),
    \qquad h = L^{-1/2},

with :math:`W_1` (m x d) of :math:`N(0,1)` entries and :math:`W_2` (d x m) of :math:`N(0,1/m)`
entries, fresh every layer and shared by all tokens.

``literal``
    draws V, :math:`W_1` and :math:`W_2` whole (:math:`d^2 + 2md` numbers a layer) and
    applies them: the reference.
``overlap_chain``, ``cluster_chain`` (two tokens, or a two-point configuration; Gaussian
V, :math:`B = I`)
    With the two points :math:`y_{1,2} = c\,u \mp s\,w` (u, w orthonormal, s and c the half
    angles), :math:`W_1 y_{1,2} = c\,a \mp s\,b` where :math:`a = W_1u` and :math:`b = W_1w`
    are independent standard normal m-vectors: 2m normals give both hidden layers.  Write
    :math:`\varphi(W_1y_{1,2}) = p \mp q`.  Given :math:`W_1`, the vectors :math:`W_2p` and
    :math:`W_2q` are Gaussian with covariance given by :math:`p, q`: with
    :math:`\alpha = |p|/\sqrt m`, :math:`\beta_1 = \langle p, q\rangle/(|p|\sqrt m)`,
    :math:`\beta_2 = |q - \langle p,q\rangle p/|p|^2|/\sqrt m`, they are
    :math:`\alpha\,\xi` and :math:`\beta_1\xi + \beta_2\zeta` for independent standard
    normal d-vectors :math:`\xi, \zeta`.  The update of each point is then a combination of
    four independent standard normal d-vectors, :math:`Vu, Vw, \xi, \zeta`, and only their
    components in the plane of :math:`(u, w)` (8 normals) and the Gram matrix of their
    components orthogonal to it (a Wishart(d - 2) matrix of size 4, drawn by its Bartlett
    factor: at most 10 numbers) enter the new angle.  So a layer costs 2m + 18 random
    numbers, whatever d.  The difference :math:`q` (and, for an odd activation, the sum
    :math:`p`) is computed without cancellation where it is small
    (:func:`stochastic_transformers.activations.phi_pair`), and the new angle from the
    difference or the sum of the updated points, so that the chain keeps its relative
    precision near both poles, as the chains without the block do.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .. import activations as _act
from .. import attention as _att
from .. import rng as _rng
from .._jit import JIT, JIT_PARALLEL
from .common import (Runner, fill_random, half_angle_outputs, record_grams, recorded, start_pair,
                     start_tokens)
from .tokens import (_LAW_CODES, _value_entry, allocate_tokens, assemble_tokens, init_mode,
                     layer_scratch)
from .two_point import MERGE_ONE_MINUS_OVERLAP, finish_two_point, record_two_points

#: Random directions of the two-point chain's update: Vu, Vw, xi, zeta.
_N_DIRECTIONS = 4


# ------------------------------------------------------------------ the N-token map

@nb.njit(**JIT_PARALLEL)
def _ff_tokens_kernel(key0, key1, first, n, n_tok, d, n_layers, law, beta, softmax, B,
                      b_identity, h, sigma, rho, act, width, x0, mode, z0, rec_layers, rec_gram,
                      x_out):
    """Run ``n`` trajectories of N tokens through the literal map with the block.

    A layer draws V (d x d, law ``law``), then :math:`W_1` (width x d, row by row) and
    :math:`W_2` (d x width, row by row); ``rho`` is :math:`\\sqrt r`.
    """
    inv_sqrt_width = 1.0 / math.sqrt(width)
    for t in nb.prange(n):
        state, x = start_tokens(key0, key1, first + t, n_tok, d, mode, x0[t], z0)
        att, y, _m, _r, v, _g, bx, weights, self_scale, _hv = layer_scratch(n_tok, d)
        w1 = np.empty((width, d))
        w2 = np.empty((d, width))
        hidden = np.empty((1, width))
        ptr = 0
        for layer in range(0, n_layers + 1):
            if layer > 0:
                for a in range(d):
                    for b in range(d):
                        v[a, b] = _value_entry(state, law, sigma)
                fill_random(state, w1, 1.0, False)
                fill_random(state, w2, inv_sqrt_width, False)
                _att.attention(x, B, beta, softmax, att, bx, weights, b_identity, self_scale)
                for i in range(n_tok):
                    for k in range(width):
                        hidden[0, k] = _act.phi(act, _att.row_dot(w1, k, x, i))
                    for a in range(d):
                        acc_v = _att.row_dot(v, a, att, i)
                        acc_w = _att.row_dot(w2, a, hidden, 0)
                        # self_scale: the attention output is c_i A_i (see attention()), so
                        # the whole increment is scaled by c_i too.
                        y[i, a] = self_scale[i] * x[i, a] + h * (acc_v + rho * self_scale[i] * acc_w)
                _att.normalize_into(y, x)
            ptr = record_grams(rec_gram[t], rec_layers, ptr, layer, x)
        x_out[t] = x


def _run_tokens(plan, a, lo, hi):
    model = plan.model
    _ff_tokens_kernel(plan.key0, plan.key1, plan.first_trajectory + lo, hi - lo, plan.n_tokens,
                      plan.d, plan.n_layers, _LAW_CODES[plan.values], plan.beta, plan.softmax,
                      plan.B, plan.b_is_identity, plan.h, plan.sigma,
                      math.sqrt(model.ff_strength), _act.code(model.ff_activation),
                      model.ff_width, a["x0"][lo:hi], init_mode(plan),
                      0.0 if plan.z0 is None else plan.z0, plan.rec, a["rec_gram"][lo:hi],
                      a["x"][lo:hi])


# ------------------------------------------------------------------ the two-point chain

@nb.njit(**JIT)
def _hidden_moments(act, c, s, a, b):
    r"""(alpha, beta1, beta2) of the module docstring from :math:`a = W_1u`, :math:`b = W_1w`
    (each of length m), with :math:`2p = \varphi(ca+sb) + \varphi(ca-sb)` and
    :math:`2q = \varphi(ca+sb) - \varphi(ca-sb)` computed without cancellation.  ``a`` and
    ``b`` are overwritten with p and q."""
    width = a.size
    pp = 0.0
    pq = 0.0
    qq = 0.0
    for k in range(width):
        x = c * a[k]
        delta = s * b[k]
        total, diff = _act.phi_pair(act, x, delta)
        p = 0.5 * total
        q = 0.5 * diff
        a[k] = p
        b[k] = q
        pp += p * p
        pq += p * q
        qq += q * q
    scale = 1.0 / math.sqrt(width)
    if pp == 0.0:
        return 0.0, 0.0, math.sqrt(qq) * scale
    norm_p = math.sqrt(pp)
    # |q - (p.q / p.p) p|^2 summed entry by entry rather than as qq - pq^2/pp: the residual
    # is small when q is nearly parallel to p, and only the entries keep its precision.
    ratio = pq / pp
    rr = 0.0
    for k in range(width):
        res = b[k] - ratio * a[k]
        rr += res * res
    return norm_p * scale, pq / norm_p * scale, math.sqrt(rr) * scale


@nb.njit(**JIT)
def _draw_directions(state, d, plane, bartlett):
    r"""The four directions' coordinates: ``plane`` (2, 4) their components along u and w,
    ``bartlett`` (k, 4), k = min(d - 2, 4), the upper-trapezoidal factor of the Gram matrix
    of their components orthogonal to the plane (Wishart(d - 2, I_4)): chi(d - 2 - i) on the
    diagonal, standard normals above it."""
    for r in range(2):
        for j in range(_N_DIRECTIONS):
            plane[r, j] = _rng.normal(state)
    for i in range(bartlett.shape[0]):
        for j in range(_N_DIRECTIONS):
            if j < i:
                bartlett[i, j] = 0.0
            elif j == i:
                bartlett[i, j] = _rng.sqrt_chi2(state, d - 2 - i)
            else:
                bartlett[i, j] = _rng.normal(state)


@nb.njit(**JIT)
def _combine(plane, bartlett, base0, base1, coef, out):
    """``out`` = base (in the plane) + sum_j coef[j] * direction_j, in the frame (u, w, e_3..)."""
    out[0] = base0
    out[1] = base1
    for r in range(bartlett.shape[0]):
        out[2 + r] = 0.0
    for j in range(_N_DIRECTIONS):
        cj = coef[j]
        out[0] += cj * plane[0, j]
        out[1] += cj * plane[1, j]
        for r in range(bartlett.shape[0]):
            out[2 + r] += cj * bartlett[r, j]


@nb.njit(**JIT)
def _wedge(a, b):
    """|a ^ b| as the root of the sum of squared 2x2 minors (no cancellation when a and b
    are nearly parallel)."""
    total = 0.0
    for i in range(a.size):
        for j in range(i + 1, a.size):
            minor = a[i] * b[j] - a[j] * b[i]
            total += minor * minor
    return math.sqrt(total)


@nb.njit(**JIT)
def ff_pair_layer(state, s, c, kappa, rho, weights, act, d, a, b, plane, bartlett, coef, y1, y2,
                  v):
    r"""One layer of the two-point chain with the block; returns the new (s, c).

    ``kappa`` = :math:`h\sigma`, ``rho`` = :math:`h\sqrt r`, ``weights`` the tuple of
    :func:`stochastic_transformers.attention.cluster_pair_weights`; ``a``, ``b`` (m,) and
    the remaining arrays are scratch.  Draws 2m normals (the hidden layers), then the
    directions (:func:`_draw_directions`).
    """
    one, t1, t2, e1, e2, t_diff, e_diff, e_sum = weights
    for k in range(a.size):
        a[k] = _rng.normal(state)
    for k in range(b.size):
        b[k] = _rng.normal(state)
    alpha, beta1, beta2 = _hidden_moments(act, c, s, a, b)
    _draw_directions(state, d, plane, bartlett)
    ff = one * rho   # the block's coefficient, on the scale of the (possibly rescaled) weights
    # Y_k = one * y_k + kappa V A_k + ff (W2 p -+ W2 q), A_k = t_k c u + e_k s w.
    coef[0], coef[1], coef[2], coef[3] = kappa * t1 * c, kappa * e1 * s, ff * (alpha - beta1), -ff * beta2
    _combine(plane, bartlett, one * c, -one * s, coef, y1)
    coef[0], coef[1], coef[2], coef[3] = kappa * t2 * c, kappa * e2 * s, ff * (alpha + beta1), ff * beta2
    _combine(plane, bartlett, one * c, one * s, coef, y2)
    cos_part = 0.0
    for r in range(y1.size):
        cos_part += y1[r] * y2[r]
    if s <= c:   # Y2 - Y1, of size s, from the exact differences
        coef[0], coef[1], coef[2], coef[3] = (kappa * t_diff * c, kappa * e_diff * s,
                                              2.0 * ff * beta1, 2.0 * ff * beta2)
        _combine(plane, bartlett, 0.0, 2.0 * one * s, coef, v)
    else:        # Y1 + Y2, of size c (for an odd activation p is of size c too)
        coef[0], coef[1], coef[2], coef[3] = (kappa * (t1 + t2) * c, kappa * e_sum * s,
                                              2.0 * ff * alpha, 0.0)
        _combine(plane, bartlett, 2.0 * one * c, 0.0, coef, v)
    return _att.half_angles(cos_part, _wedge(y1, v))


@nb.njit(**JIT_PARALLEL)
def _ff_chain_kernel(key0, key1, first, n, m1, m2, d, n_layers, beta, softmax, kappa, rho, act,
                     width, s0, c0, mode, rec_layers, rec_gram, rec_opo, s_out, c_out,
                     merged_layer):
    """Run ``n`` trajectories of a two-point configuration (m1 tokens at y1, m2 at y2) with
    the block.  ``mode`` 0: independent uniform points; 1: the given half angles.  A
    trajectory stops once the points merge (:data:`MERGE_ONE_MINUS_OVERLAP`): tokens at one
    point receive the same update and stay together."""
    n_tok = m1 + m2
    labels = np.zeros(n_tok, dtype=np.int64)
    labels[m1:] = 1
    k = min(d - 2, _N_DIRECTIONS)
    for t in nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        s, c = start_pair(state, key0, key1, first + t, d, mode, s0, c0, t)
        a = np.empty(width)
        b = np.empty(width)
        plane = np.empty((2, _N_DIRECTIONS))
        bartlett = np.empty((k, _N_DIRECTIONS))
        coef = np.empty(_N_DIRECTIONS)
        y1 = np.empty(2 + k)
        y2 = np.empty(2 + k)
        v = np.empty(2 + k)
        merged = 2.0 * s * s <= MERGE_ONE_MINUS_OVERLAP
        stop = 0 if merged else -1
        ptr = record_two_points(rec_gram[t], rec_opo[t], 0, rec_layers, 0, labels, s, c, merged)
        layer = 1
        while layer <= n_layers and not merged:
            weights = _att.cluster_pair_weights(s, beta, softmax, m1, m2)
            s, c = ff_pair_layer(state, s, c, kappa, rho, weights, act, d, a, b, plane,
                                 bartlett, coef, y1, y2, v)
            merged = 2.0 * s * s <= MERGE_ONE_MINUS_OVERLAP
            if merged:
                stop = layer
            ptr = record_two_points(rec_gram[t], rec_opo[t], ptr, rec_layers, layer, labels, s, c,
                                    merged)
            layer += 1
        s_out[t], c_out[t] = finish_two_point(rec_gram[t], rec_opo[t], ptr, rec_layers, labels,
                                              s, c, merged)
        merged_layer[t] = stop


def _split(plan):
    return (1, 1) if plan.split is None else plan.split


def _allocate_chain(plan):
    from .pair import _initial_half_angles

    n, n_tok, n_rec = plan.n_traj, plan.n_tokens, plan.rec.size
    s0, c0, mode = _initial_half_angles(plan)
    return dict(s0=s0, c0=c0, mode=mode, s=np.empty(n), c=np.empty(n),
                stopped=np.empty(n, dtype=np.int64), rec_gram=np.empty((n, n_rec, n_tok, n_tok)),
                rec_opo=np.empty((n, n_rec)))


def _run_chain(plan, a, lo, hi):
    m1, m2 = _split(plan)
    model = plan.model
    _ff_chain_kernel(plan.key0, plan.key1, plan.first_trajectory + lo, hi - lo, m1, m2, plan.d,
                     plan.n_layers, plan.beta, plan.softmax, plan.h * plan.sigma,
                     plan.h * math.sqrt(model.ff_strength), _act.code(model.ff_activation),
                     model.ff_width, a["s0"][lo:hi], a["c0"][lo:hi], a["mode"], plan.rec,
                     a["rec_gram"][lo:hi], a["rec_opo"][lo:hi], a["s"][lo:hi], a["c"][lo:hi],
                     a["stopped"][lo:hi])


def _assemble_chain(plan, a):
    m1, m2 = _split(plan)
    labels = np.r_[np.zeros(m1, int), np.ones(m2, int)]
    s, c = a["s"], a["c"]
    z = c * c - s * s
    gram = np.where(labels[:, None] == labels[None, :], 1.0, z[:, None, None])
    data = half_angle_outputs(gram, s, c, a["stopped"])
    if plan.times is not None:
        data["gram_t"] = recorded(plan, a["rec_gram"])
        data["one_plus_overlap_t"] = recorded(plan, a["rec_opo"], ())
    return data, a["stopped"]


TOKENS_RUNNER = Runner(allocate_tokens, _run_tokens, assemble_tokens)
CHAIN_RUNNER = Runner(_allocate_chain, _run_chain, _assemble_chain)
