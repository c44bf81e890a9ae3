r"""Attention and one layer of the discrete model, as numba kernels.

For tokens :math:`x_1, \dots, x_N` on :math:`S^{d-1}` and a fixed
:math:`B = Q^\top K`, token :math:`i` attends with logits
:math:`\ell_{ij} = \beta\, x_i^\top B x_j` and receives

* softmax attention (SA): :math:`A_i = \sum_j \operatorname{softmax}_j(\ell_{ij})\, x_j`;
* unnormalised attention (USA): :math:`A_i = \frac1N \sum_j e^{\ell_{ij}} x_j`.

One layer of the stochastic model (paper eq. 4) maps
:math:`x_i \mapsto \operatorname{normalize}(x_i + L^{-1/2} V A_i)` with one random
:math:`d\times d` matrix :math:`V` shared by all tokens; the hybrid model (eq. 7)
maps :math:`x_i \mapsto \operatorname{normalize}(x_i + w A_i)` with a scalar
:math:`w = 1/L + \varepsilon \xi / \sqrt L`.

Every kernel is compiled with ``nogil=True`` so that independent blocks of
trajectories can run on several threads; none of them draws random numbers
(the callers pass pre-drawn noise), which keeps every result a deterministic
function of the seed.
"""

from __future__ import annotations

import contextlib
import math

import numba as nb
import numpy as np

from ._jit import JIT as _JIT


@contextlib.contextmanager
def numba_threads(n_threads=None):
    """Run the enclosed kernels on ``n_threads`` numba threads (None: numba's maximum).

    numba's thread count is process-wide state; it is restored on exit, so that one call
    with ``n_threads=1`` does not slow down every later call of the process.
    """
    before = nb.get_num_threads()
    nb.set_num_threads(min(n_threads or nb.config.NUMBA_NUM_THREADS, nb.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        nb.set_num_threads(before)


@nb.njit(inline="always", **_JIT)
def row_dot(m, i, y, j):
    """:math:`\\sum_b m_{ib} y_{jb}` (row i of ``m`` by row j of ``y``), summed in order of b."""
    acc = 0.0
    for b in range(m.shape[1]):
        acc += m[i, b] * y[j, b]
    return acc


@nb.njit(inline="always", **_JIT)
def row_col(m, i, y, j):
    """:math:`(m y)_{ij} = \\sum_e m_{ie} y_{ej}` (row i of ``m`` by column j of ``y``),
    summed in order of e."""
    acc = 0.0
    for e in range(m.shape[1]):
        acc += m[i, e] * y[e, j]
    return acc


#: Unnormalised attention: above this logit the weights are rescaled (see :func:`attention`).
#: e^300 squared is still far below the largest double, so below it nothing is rescaled and
#: the bits of every run at moderate beta stay what they were.
USA_SHIFT_FROM = 300.0


@nb.njit(inline="always", **_JIT)
def attention(x, B, beta, softmax, out, bx, weights, b_identity, self_scale, causal=False):
    """Write the attention outputs of tokens ``x`` (N, d) into ``out`` (N, d), rescaled.

    With ``causal`` token i attends to tokens j <= i only (a decoder's mask; softmax only,
    :class:`~stochastic_transformers.config.ModelConfig` refuses the unnormalised form).

    Token i gets :math:`c_i A_i` in ``out[i]`` and :math:`c_i` in ``self_scale[i]``; a
    layer computes :math:`\\operatorname{normalize}(c_i x_i + h V (c_i A_i))`, which is
    :math:`\\operatorname{normalize}(x_i + h V A_i)` exactly, normalisation being
    invariant to a positive factor.  Softmax weights are computed with the row maximum
    subtracted (log-sum-exp) and :math:`c_i = 1`.  Unnormalised weights
    :math:`e^{\\ell_{ij}}/N` are used as they are (:math:`c_i = 1`) while the largest
    logit :math:`m_i` of the row is at most :data:`USA_SHIFT_FROM`; above it they are
    :math:`e^{\\ell_{ij} - m_i}/N` and :math:`c_i = e^{-m_i}` (which may underflow to 0:
    the token's own share is then below rounding).  No beta gives an overflow or a NaN.
    """
    n_tok, d = x.shape
    # ``bx`` (N, d) and ``weights`` (N,) are scratch space owned by the caller: these
    # kernels run once per layer, where an allocation would cost as much as the maths.
    # With B = I the logits read x itself (bx would be an exact copy: same bits, less traffic).
    # The sums are written out rather than through row_dot: measured faster in the token
    # kernels at small N and d (as in normalize_rows).
    if not b_identity:
        for j in range(n_tok):
            for a in range(d):
                acc = 0.0
                for b in range(d):
                    acc += B[a, b] * x[j, b]
                bx[j, a] = acc
    keys = x if b_identity else bx
    for i in range(n_tok):
        n_keys = i + 1 if causal else n_tok
        top = -np.inf
        for j in range(n_keys):
            acc = 0.0
            for a in range(d):
                acc += x[i, a] * keys[j, a]
            weights[j] = beta * acc
            if weights[j] > top:
                top = weights[j]
        self_scale[i] = 1.0
        if softmax:
            total = 0.0
            for j in range(n_keys):
                weights[j] = math.exp(weights[j] - top)
                total += weights[j]
            for j in range(n_keys):
                weights[j] /= total
        elif top > USA_SHIFT_FROM:
            for j in range(n_tok):
                weights[j] = math.exp(weights[j] - top) / n_tok
            self_scale[i] = math.exp(-top)
        else:
            for j in range(n_tok):
                weights[j] = math.exp(weights[j]) / n_tok
        for a in range(d):
            acc = 0.0
            for j in range(n_keys):
                acc += weights[j] * x[j, a]
            out[i, a] = acc


@nb.njit(inline="always", **_JIT)
def normalize_rows(y):
    """Project every row of ``y`` back onto the unit sphere, in place."""
    n_tok, d = y.shape
    for i in range(n_tok):
        acc = 0.0
        for a in range(d):
            acc += y[i, a] * y[i, a]
        inv = 1.0 / math.sqrt(acc)
        for a in range(d):
            y[i, a] *= inv


@nb.njit(inline="always", **_JIT)
def householder_r(m, r, v):
    """Triangular factor of the thin QR decomposition of ``m`` (d, N), written into ``r``.

    ``r`` has shape (k, N) with k = min(d, N) and satisfies :math:`r^\\top r = m^\\top m`.
    Householder reflections stay exact to rounding even when the columns of ``m`` are
    nearly dependent (tokens about to cluster), where a Cholesky factor of the Gram
    matrix would break down.  ``m`` is overwritten; ``v`` (d,) is scratch space.
    """
    d, n = m.shape
    k = min(d, n)
    for j in range(k):
        norm2 = 0.0
        for a in range(j, d):
            norm2 += m[a, j] * m[a, j]
        # A remainder below 1e-140 is rounding noise that earlier reflections of a
        # rank-deficient matrix left behind (it shrinks by ~1e-17 a column); reflecting it
        # would divide by a subnormal number and return inf or NaN.  Left as it is, it
        # changes r^T r by ~1e-280.
        if norm2 < 1e-280:
            continue
        norm = math.sqrt(norm2)
        alpha = -norm if m[j, j] >= 0.0 else norm
        vnorm2 = 0.0
        for a in range(j, d):
            v[a] = m[a, j]
        v[j] -= alpha
        for a in range(j, d):
            vnorm2 += v[a] * v[a]
        if vnorm2 == 0.0:
            continue
        scale = 2.0 / vnorm2
        for col in range(j, n):
            dot = 0.0
            for a in range(j, d):
                dot += v[a] * m[a, col]
            dot *= scale
            for a in range(j, d):
                m[a, col] -= dot * v[a]
    for i in range(k):
        for col in range(n):
            r[i, col] = m[i, col] if col >= i else 0.0


@nb.njit(inline="always", **_JIT)
def copy_rows(src, dst):
    """Copy ``src`` (N, d) into ``dst`` (as loops: a slice assignment costs more at this size)."""
    n_tok, d = src.shape
    for i in range(n_tok):
        for a in range(d):
            dst[i, a] = src[i, a]


@nb.njit(inline="always", **_JIT)
def normalize_into(y, x):
    """Normalise the rows of ``y`` and copy them into ``x``."""
    normalize_rows(y)
    copy_rows(y, x)


#: Codes of the layer normalisations in the compiled layers (the order of
#: :data:`stochastic_transformers.config.NORMS`).
POST, PRE, PERI, NGPT = 0, 1, 2, 3


@nb.njit(inline="always", **_JIT)
def _step(x, y, self_scale, scale, kind, mat, src, norm=POST):
    """One residual update with ``y`` as scratch, where :math:`u_i` is ``mat`` :math:`A_i`
    (``kind`` 0, ``src`` the attention outputs), ``mat`` times column i of ``src`` (1) or
    ``src[i]`` itself (2), and :math:`N(y) = y/|y|`:

    ``norm`` POST (the paper): :math:`x_i \\leftarrow N(c_i x_i + \\mathrm{scale}\\, u_i)`;
    PRE: :math:`x_i + \\mathrm{scale}\\, u_i`; PERI: :math:`x_i + \\mathrm{scale}\\, N(u_i)`;
    NGPT: :math:`N(x_i + \\mathrm{scale}\\, N(u_i))`.  The last three come with softmax
    attention only, where :math:`c_i = 1`.
    """
    n_tok, d = x.shape
    for i in range(n_tok):
        for a in range(d):
            if kind == 0:
                u = row_dot(mat, a, src, i)
            elif kind == 1:
                u = row_col(mat, a, src, i)
            else:
                u = src[i, a]
            if norm == POST:
                y[i, a] = self_scale[i] * x[i, a] + scale * u
            else:
                y[i, a] = u
        if norm == PERI or norm == NGPT:
            acc = 0.0
            for a in range(d):
                acc += y[i, a] * y[i, a]
            # u = 0 (attention outputs that cancel) gives no update rather than 0/0.
            inv = 1.0 / math.sqrt(acc) if acc > 0.0 else 0.0
            for a in range(d):
                y[i, a] *= inv
        if norm == NGPT:
            for a in range(d):
                y[i, a] = x[i, a] + scale * y[i, a]
        elif norm == PRE or norm == PERI:
            for a in range(d):
                x[i, a] += scale * y[i, a]
    if norm == POST or norm == NGPT:
        normalize_into(y, x)


@nb.njit(inline="always", **_JIT)
def _attend(x, B, beta, softmax, att, y, bx, weights, b_identity, self_scale, norm, causal):
    """The attention outputs of a layer into ``att``: of the tokens themselves when they
    lie on the sphere (POST, NGPT), of their directions :math:`x_i/|x_i|` otherwise (PRE,
    PERI: the residual stream leaves the sphere; ``y`` holds the directions)."""
    if norm == PRE or norm == PERI:
        copy_rows(x, y)
        normalize_rows(y)
        attention(y, B, beta, softmax, att, bx, weights, b_identity, self_scale, causal)
    else:
        attention(x, B, beta, softmax, att, bx, weights, b_identity, self_scale, causal)


@nb.njit(inline="always", **_JIT)
def layer_literal(x, v, h, B, beta, softmax, att, y, bx, weights, b_identity, self_scale,
                  norm=POST, causal=False):
    """One stochastic layer with an explicit value matrix ``v`` (d, d), in place on ``x``.

    :math:`x_i \\leftarrow \\operatorname{normalize}(x_i + h\\, v A_i)`, :math:`h = L^{-1/2}`
    (``norm`` POST; the other normalisations as in :func:`_step`).
    """
    _attend(x, B, beta, softmax, att, y, bx, weights, b_identity, self_scale, norm, causal)
    _step(x, y, self_scale, h, 0, v, att, norm)


@nb.njit(inline="always", **_JIT)
def layer_gaussian_dn(x, g, h, B, beta, softmax, att, m, r, y, bx, weights, b_identity, hv,
                      self_scale, norm=POST, causal=False):
    """One stochastic layer with Gaussian V drawn through the exact d*N reduction.

    With :math:`M = [A_1 \\dots A_N] = QR` (thin QR, :math:`k=\\min(d,N)` columns of
    :math:`Q`), :math:`V M = (VQ) R` and :math:`VQ` is a :math:`d\\times k` matrix of
    i.i.d. :math:`N(0,\\sigma^2)` entries when :math:`V` is.  So ``g`` (d, k), already
    scaled by sigma, replaces the d*d entries of V exactly in law (the joint law of the
    :math:`VA_i`, whatever the normalisation ``norm`` then does with them).
    """
    n_tok, d = x.shape
    _attend(x, B, beta, softmax, att, y, bx, weights, b_identity, self_scale, norm, causal)
    for i in range(n_tok):
        for a in range(d):
            m[a, i] = att[i, a]
    # R is linear in each column of M, so the rescaled columns c_i A_i give c_i (V A_i).
    householder_r(m, r, hv)
    _step(x, y, self_scale, h, 1, g, r, norm)


@nb.njit(inline="always", **_JIT)
def layer_hybrid(x, w, B, beta, softmax, att, y, bx, weights, b_identity, self_scale,
                 norm=POST, causal=False):
    """One hybrid layer: :math:`x_i \\leftarrow \\operatorname{normalize}(x_i + w A_i)`
    (``norm`` POST; the other normalisations as in :func:`_step`, with :math:`u_i = A_i`)."""
    _attend(x, B, beta, softmax, att, y, bx, weights, b_identity, self_scale, norm, causal)
    _step(x, y, self_scale, w, 2, att, att, norm)


# --------------------------------------------------------------------------------------
# Two tokens, B = identity: the exact one-dimensional overlap chain.
#
# The state is the pair (s, c) = (sin(theta/2), cos(theta/2)), theta the angle between
# the tokens, so that 1 - <x1,x2> = 2 s^2 and 1 + <x1,x2> = 2 c^2 are both known to full
# relative precision however close the tokens come to each other or to antipodes.
# --------------------------------------------------------------------------------------


@nb.njit(**_JIT)
def pair_weights(s, beta, softmax):
    """Sum and difference of the self and cross attention weights of a token pair.

    Token 1 receives :math:`a x_1 + b x_2`, with :math:`a` the weight on itself and
    :math:`b` on the other token; :math:`1 - z = 2s^2` gives
    :math:`e^{\\beta z} = e^{\\beta} e^{-2\\beta s^2}`.  Returns :math:`(a+b, a-b)`, with
    :math:`a-b` through ``expm1``/``tanh`` so that it keeps its relative precision as
    the tokens merge.
    """
    q = 2.0 * beta * s * s
    if softmax:
        return 1.0, math.tanh(0.5 * q)
    scale = 0.5 * math.exp(beta)
    return scale * (1.0 + math.exp(-q)), -scale * math.expm1(-q)


#: Unnormalised pair weights are rescaled above this beta (see :func:`pair_weights_scaled`).
USA_PAIR_SHIFT_FROM = 100.0


@nb.njit(**_JIT)
def pair_weights_scaled(s, beta, softmax):
    """``(one, a+b, a-b)``: :func:`pair_weights` divided by a common factor, and 1 divided too.

    A layer of the pair chain depends only on the ratios of ``(1, a+b, a-b)`` (the new
    angle is an ``atan2`` of two quantities of the same degree), so dividing all three by
    :math:`e^\beta/2` leaves it unchanged in exact arithmetic.  Unnormalised weights grow
    like :math:`e^\beta` and their fourth powers overflow beyond :math:`\beta \approx 177`,
    so above :data:`USA_PAIR_SHIFT_FROM` they are divided (``one`` = :math:`2e^{-\beta}`,
    which underflows to 0 for huge beta); below it, and for softmax, ``one`` is 1 and
    the weights are those of :func:`pair_weights`, bit for bit.
    """
    if softmax or beta <= USA_PAIR_SHIFT_FROM:
        ksum, kdiff = pair_weights(s, beta, softmax)
        return 1.0, ksum, kdiff
    q = 2.0 * beta * s * s
    return 2.0 * math.exp(-beta), 1.0 + math.exp(-q), -math.expm1(-q)


@nb.njit(**_JIT)
def half_angles(cos_part, sin_part):
    r"""(sin(t/2), cos(t/2)) of the angle t = atan2(sin_part, cos_part), sin_part >= 0.

    With :math:`R = \sqrt{X^2+Y^2}`, :math:`\tan(t/2) = Y/(R+X) = (R-X)/Y`; the form
    without cancellation is taken and normalised by
    :math:`\sqrt{Y^2 + (R \pm X)^2} = \sqrt{2R(R \pm X)}`.
    """
    radius = math.sqrt(cos_part * cos_part + sin_part * sin_part)
    if radius == 0.0:
        return 0.0, 1.0
    if cos_part >= 0.0:
        big = radius + cos_part
        inv = 1.0 / math.sqrt(2.0 * radius * big)
        return sin_part * inv, big * inv
    big = radius - cos_part
    inv = 1.0 / math.sqrt(2.0 * radius * big)
    return big * inv, sin_part * inv


@nb.njit(**_JIT)
def pair_step(s, c, u0, u1, u2, w0, w1, w2, w3):
    """Advance the half-angle state given the images of the symmetric/antisymmetric frame.

    With :math:`x_{1,2} = c\\,u \\mp s\\,w` (u, w orthonormal) the updated vectors satisfy
    :math:`(y_1+y_2)/2 = c\\,U` and :math:`(y_2-y_1)/2 = s\\,W`.  The new angle has
    :math:`\\sin\\theta' \\propto 2cs\\,|U\\wedge W|` and
    :math:`\\cos\\theta' \\propto c^2|U|^2 - s^2|W|^2` (same positive factor
    :math:`1/(|y_1||y_2|)`), so neither the distance to +1 nor to -1 is ever computed
    by cancellation.  U = (u0, u1, u2, 0) and W = (w0, w1, w2, w3) in an orthonormal
    frame whose first two vectors are u and w.
    """
    uu = u0 * u0 + u1 * u1 + u2 * u2
    ww = w0 * w0 + w1 * w1 + w2 * w2 + w3 * w3
    # |U ^ W|^2 as a sum of squared 2x2 minors: no cancellation when U and W are
    # nearly parallel (large steps), unlike |U|^2 |W|^2 - <U,W>^2.
    m01 = u0 * w1 - u1 * w0
    m02 = u0 * w2 - u2 * w0
    m12 = u1 * w2 - u2 * w1
    wedge = math.sqrt(m01 * m01 + m02 * m02 + m12 * m12
                      + (u0 * w3) ** 2 + (u1 * w3) ** 2 + (u2 * w3) ** 2)
    return half_angles(c * c * uu - s * s * ww, 2.0 * s * c * wedge)


@nb.njit(**_JIT)
def pair_layer_stochastic(s, c, kappa_sum, kappa_diff, z):
    """:func:`pair_layer_stochastic_scaled` with ``one`` = 1 (weights not rescaled)."""
    return pair_layer_stochastic_scaled(s, c, 1.0, kappa_sum, kappa_diff, z)


@nb.njit(**_JIT)
def pair_layer_stochastic_scaled(s, c, one, kappa_sum, kappa_diff, z):
    """One stochastic layer of the overlap chain (Gaussian V, B = identity).

    ``kappa_sum`` = :math:`h\\sigma(a+b)`, ``kappa_diff`` = :math:`h\\sigma(a-b)`.
    ``z`` holds 7 random numbers: the 2x2 Gaussian block (g11, g21, g12, g22) of
    :math:`V[u\\,w]` in the plane, and the Bartlett factor (T11, T21, T22) of the
    Wishart(d-2) Gram matrix of its components orthogonal to the plane
    (:math:`T_{11}^2 \\sim \\chi^2_{d-2}`, :math:`T_{21}\\sim N(0,1)`,
    :math:`T_{22}^2 \\sim\\chi^2_{d-3}`).  ``one`` is the coefficient of the tokens
    themselves (1, or the common factor of :func:`pair_weights_scaled`).
    """
    g11, g21, g12, g22, t11, t21, t22 = z[0], z[1], z[2], z[3], z[4], z[5], z[6]
    return pair_step(s, c,
                     one + kappa_sum * g11, kappa_sum * g21, kappa_sum * t11,
                     kappa_diff * g12, one + kappa_diff * g22, kappa_diff * t21,
                     kappa_diff * t22)


# --------------------------------------------------------------------------------------
# Two clusters of m1 and m2 tokens, B = identity: the weighted overlap chain.
#
# Tokens at one point receive the same update, so m1 tokens at y1 and m2 at y2 stay a
# two-point configuration (the companion's two-cluster reduction, book chapter "Many
# tokens").  A token of cluster 1 receives A_1 = p1 y1 + q1 y2, one of cluster 2
# A_2 = p2 y2 + q2 y1; the state is again the half-angle pair (s, c) of the angle between
# y1 and y2, and a layer needs the same seven random numbers as the two-token chain.
# --------------------------------------------------------------------------------------


@nb.njit(**_JIT)
def cluster_pair_weights(s, beta, softmax, m1, m2):
    """Weights of a two-point configuration in the half-angle frame, and three exact combinations.

    With :math:`y_{1,2} = c\\,u \\mp s\\,w` and :math:`r = e^{\\beta(z-1)} = e^{-2\\beta s^2}`,
    :math:`A_1 = t_1 c\\,u + e_1 s\\,w` and :math:`A_2 = t_2 c\\,u + e_2 s\\,w`, where
    :math:`t_k = p_k + q_k`, :math:`e_1 = q_1 - p_1`, :math:`e_2 = p_2 - q_2`.  Returns
    ``(one, t1, t2, e1, e2, t2 - t1, e2 - e1, e1 + e2)``; the last three are written in
    closed form (through ``expm1``) because they decide the distance between the updated
    points, which must keep its relative precision near both poles:

    * softmax (:math:`D_1 = m_1 + m_2 r`, :math:`D_2 = m_2 + m_1 r`): :math:`t_1 = t_2 = 1`,
      :math:`e_2 - e_1 = 2m_1m_2(1-r)(1+r)/(D_1D_2)`, :math:`e_1 + e_2 = 2r(m_2^2-m_1^2)/(D_1D_2)`;
    * unnormalised, :math:`f = e^\\beta/N`: :math:`t_1 = f(m_1 + m_2 r)`,
      :math:`t_2 = f(m_2 + m_1 r)`, :math:`t_2 - t_1 = f(m_2-m_1)(1-r)`,
      :math:`e_2 - e_1 = fN(1-r)`, :math:`e_1 + e_2 = f(m_2-m_1)(1+r)`.  Above
      :data:`USA_PAIR_SHIFT_FROM` every weight and ``one`` (the coefficient of the points
      themselves) are divided by f, which leaves a layer unchanged (normalisation is
      invariant to a positive factor).

    ``m1 = m2 = 1`` gives :func:`pair_weights_scaled`: ``t1 = a + b``, ``e1 = -(a - b)``.
    """
    q = 2.0 * beta * s * s
    r = math.exp(-q)
    one_minus_r = -math.expm1(-q)
    n = m1 + m2
    if softmax:
        den1 = m1 + m2 * r
        den2 = m2 + m1 * r
        e1 = (m2 * r - m1) / den1
        e2 = (m2 - m1 * r) / den2
        prod = den1 * den2
        return (1.0, 1.0, 1.0, e1, e2, 0.0, 2.0 * m1 * m2 * one_minus_r * (1.0 + r) / prod,
                2.0 * r * (m2 * m2 - m1 * m1) / prod)
    if beta <= USA_PAIR_SHIFT_FROM:
        f = math.exp(beta) / n
        one = 1.0
    else:
        f = 1.0
        one = n * math.exp(-beta)
    return (one, f * (m1 + m2 * r), f * (m2 + m1 * r), f * (m2 * r - m1), f * (m2 - m1 * r),
            f * (m2 - m1) * one_minus_r, f * n * one_minus_r, f * (m2 - m1) * (1.0 + r))


@nb.njit(**_JIT)
def _wedge4(a0, a1, a2, a3, b0, b1, b2, b3):
    """|a ^ b| for two vectors of R^4, as the root of the sum of squared 2x2 minors."""
    m01 = a0 * b1 - a1 * b0
    m02 = a0 * b2 - a2 * b0
    m03 = a0 * b3 - a3 * b0
    m12 = a1 * b2 - a2 * b1
    m13 = a1 * b3 - a3 * b1
    m23 = a2 * b3 - a3 * b2
    return math.sqrt(m01 * m01 + m02 * m02 + m03 * m03 + m12 * m12 + m13 * m13 + m23 * m23)


@nb.njit(**_JIT)
def cluster_pair_layer(s, c, kappa, weights, z):
    """One stochastic layer of the weighted two-cluster chain (Gaussian V, B = identity).

    ``kappa`` = :math:`h\\sigma`, ``weights`` the tuple of :func:`cluster_pair_weights`,
    ``z`` the 7 random numbers of :func:`pair_layer_stochastic_scaled` (the same frame:
    :math:`Vu = (g_{11}, g_{21}, T_{11}, 0)`, :math:`Vw = (g_{12}, g_{22}, T_{21}, T_{22})`
    in an orthonormal frame :math:`(u, w, e_3, e_4)`).  The updated points are
    :math:`Y_k = \\mathrm{one}\\,y_k + \\kappa V A_k`; the new angle has
    :math:`\\cos\\theta' \\propto \\langle Y_1, Y_2\\rangle` and
    :math:`\\sin\\theta' \\propto |Y_1 \\wedge Y_2|`, and the wedge is taken as
    :math:`|Y_1\\wedge(Y_2 - Y_1)|` near +1 and :math:`|Y_1 \\wedge (Y_1 + Y_2)|` near -1, with
    :math:`Y_2 \\mp Y_1` built from the exact combinations, so that neither distance to a
    pole is ever obtained by cancellation.
    """
    one, t1, t2, e1, e2, t_diff, e_diff, e_sum = weights
    g11, g21, g12, g22, t11, t21, t22 = z[0], z[1], z[2], z[3], z[4], z[5], z[6]
    a1u, a1w = kappa * t1 * c, kappa * e1 * s
    a2u, a2w = kappa * t2 * c, kappa * e2 * s
    y10 = one * c + a1u * g11 + a1w * g12
    y11 = -one * s + a1u * g21 + a1w * g22
    y12 = a1u * t11 + a1w * t21
    y13 = a1w * t22
    y20 = one * c + a2u * g11 + a2w * g12
    y21 = one * s + a2u * g21 + a2w * g22
    y22 = a2u * t11 + a2w * t21
    y23 = a2w * t22
    cos_part = y10 * y20 + y11 * y21 + y12 * y22 + y13 * y23
    if s <= c:   # Y2 - Y1, of size s
        du, dw = kappa * t_diff * c, kappa * e_diff * s
        v0 = du * g11 + dw * g12
        v1 = 2.0 * one * s + du * g21 + dw * g22
        v2 = du * t11 + dw * t21
        v3 = dw * t22
    else:        # Y1 + Y2, of size c
        su, sw = kappa * (t1 + t2) * c, kappa * e_sum * s
        v0 = 2.0 * one * c + su * g11 + sw * g12
        v1 = su * g21 + sw * g22
        v2 = su * t11 + sw * t21
        v3 = sw * t22
    return half_angles(cos_part, _wedge4(y10, y11, y12, y13, v0, v1, v2, v3))


# --------------------------------------------------------------------------------------
# Two tokens under the other layers (pre-, peri-LN, nGPT-style, the causal mask), B = I.
#
# Attention reads the directions y_1, y_2 (half angles s, c as above), so A_k lies in their
# plane and a layer needs the same seven random numbers; the state adds the two norms
# r_1, r_2, which pre- and peri-LN change and the sphere layers keep at 1.
# --------------------------------------------------------------------------------------


@nb.njit(**_JIT)
def causal_pair_weights(s, beta):
    r""":func:`cluster_pair_weights`' tuple (softmax, one token a point) under the causal mask.

    Token 1 attends to itself only, :math:`A_1 = y_1`; token 2 to both,
    :math:`A_2 = p\,y_2 + q\,y_1` with :math:`p = 1/(1+r)`, :math:`q = r/(1+r)`,
    :math:`r = e^{-2\beta s^2}`.  In the half-angle frame :math:`t_1 = t_2 = 1`,
    :math:`e_1 = -1`, :math:`e_2 = p - q = (1-r)/(1+r)`, so :math:`e_2 - e_1 = 2/(1+r)`
    and :math:`e_1 + e_2 = -2r/(1+r)` (which does not vanish at -1: :math:`A_1 + A_2` does
    not, and under post-LN the antipodal pair is not a fixed point).
    """
    q = 2.0 * beta * s * s
    r = math.exp(-q)
    inv = 1.0 / (1.0 + r)
    return 1.0, 1.0, 1.0, -1.0, -math.expm1(-q) * inv, 0.0, 2.0 * inv, -2.0 * r * inv


@nb.njit(inline="always", **_JIT)
def _frame_image(au, aw, z):
    r""":math:`V(a_u u + a_w w)/\sigma` in the frame :math:`(u, w, e_3, e_4)` of
    :func:`cluster_pair_layer` (``z`` its seven random numbers)."""
    return (au * z[0] + aw * z[2], au * z[1] + aw * z[3], au * z[4] + aw * z[5], aw * z[6])


@nb.njit(inline="always", **_JIT)
def _norm4(v):
    return math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3])


@nb.njit(**_JIT)
def pair_layer_other(s, c, r1, r2, kappa, weights, norm, z):
    r"""One layer of two tokens under the normalisation ``norm`` (a code of :func:`_step`).

    The tokens are :math:`r_k y_k` with :math:`y_{1,2} = c\,u \mp s\,w`; ``weights`` is the
    tuple of :func:`cluster_pair_weights` (m1 = m2 = 1, softmax) or of
    :func:`causal_pair_weights`; ``z`` the seven numbers of :func:`cluster_pair_layer` (for
    the hybrid model :math:`V = I`: z = (1, 0, 0, 1, 0, 0, 0)).  With
    :math:`v_k = V A_k/\sigma`, the update is :math:`Y_k = r_k y_k + k_k v_k` where
    :math:`k_k` = ``kappa`` (post, pre: :math:`h\sigma`, or w) or ``kappa``/:math:`|v_k|`
    (peri, nGPT: :math:`h`, or w).  Returns ``(s', c', r1', r2')``: the half angles of
    :math:`(Y_1, Y_2)` and the norms :math:`|Y_k|` (pre, peri) or 1 (post, nGPT: normalised).

    :math:`\sin\theta' \propto |Y_1 \wedge (Y_2 \mp \lambda Y_1)|` with :math:`\lambda =
    r_2/r_1`, each difference built from terms that are small where it is:

    * near +1, :math:`Y_2 - \lambda Y_1 = 2r_2 s\,w + k_2 (v_2 - v_1) + (k_2 - \lambda k_1) v_1`,
      with :math:`v_2 - v_1` from the exact weight difference and, for peri and nGPT,
      :math:`k_2 - k_1 = -\kappa\langle v_2 - v_1, v_1 + v_2\rangle/(n_1n_2(n_1 + n_2))`
      (:math:`n_k = |v_k|`);
    * near -1, with :math:`\alpha = -e_2/e_1` (1 without the mask, :math:`e_2` with it), the
      weights give :math:`A_2 + \alpha A_1 = (1+\alpha)c\,u` exactly, so
      :math:`v_2 = -\alpha v_1 + (1+\alpha)c\,\bar u` (:math:`\bar u = Vu/\sigma`) and
      :math:`Y_2 + \lambda Y_1 = 2r_2c\,u + (\lambda k_1 - \alpha k_2)v_1 +
      k_2(1+\alpha)c\,\bar u`, where for peri and nGPT
      :math:`k_1 - \alpha k_2 = \kappa(1+\alpha)c\langle\bar u, v_2 - \alpha v_1\rangle
      /(n_1n_2(n_2 + \alpha n_1))` (and :math:`\kappa(1-\alpha)` for post and pre).

    On the sphere (post, nGPT: :math:`\lambda = 1`) the distances to both poles keep their
    relative precision.  For pre- and peri-LN, :math:`\lambda - 1` is read from the two norms,
    which carry an absolute rounding error: there the overlap is exact to rounding, not to
    relative precision at the poles (which are not fixed points when the norms differ).
    """
    e1, e2 = weights[3], weights[4]
    t1, t2, t_diff, e_diff = weights[1], weights[2], weights[5], weights[6]
    v1 = _frame_image(t1 * c, e1 * s, z)
    v2 = _frame_image(t2 * c, e2 * s, z)
    dv = _frame_image(t_diff * c, e_diff * s, z)
    ubar = _frame_image(1.0, 0.0, z)
    alpha = -e2 / e1 if e1 != 0.0 else 1.0
    unit = norm == PERI or norm == NGPT
    k1 = k2 = kappa
    n1 = n2 = 0.0
    if unit:
        n1, n2 = _norm4(v1), _norm4(v2)
        # A zero update (cancelling attention outputs) stays zero, as in _step.
        k1 = kappa / n1 if n1 > 0.0 else 0.0
        k2 = kappa / n2 if n2 > 0.0 else 0.0
    y1 = (r1 * c + k1 * v1[0], -r1 * s + k1 * v1[1], k1 * v1[2], k1 * v1[3])
    y2 = (r2 * c + k2 * v2[0], r2 * s + k2 * v2[1], k2 * v2[2], k2 * v2[3])
    cos_part = y1[0] * y2[0] + y1[1] * y2[1] + y1[2] * y2[2] + y1[3] * y2[3]
    ratio_gap = (r1 - r2) / r1  # 1 - lambda: exactly 0 on the sphere
    if s <= c:
        k_gap = 0.0  # k2 - k1
        if unit and n1 > 0.0 and n2 > 0.0:
            dot = 0.0
            for a in range(4):
                dot += dv[a] * (v1[a] + v2[a])
            k_gap = -kappa * dot / (n1 * n2 * (n1 + n2))
        elif unit:
            k_gap = k2 - k1
        gap = k_gap + ratio_gap * k1  # k2 - lambda k1
        d0 = k2 * dv[0] + gap * v1[0]
        d1 = 2.0 * r2 * s + k2 * dv[1] + gap * v1[1]
        d2 = k2 * dv[2] + gap * v1[2]
        d3 = k2 * dv[3] + gap * v1[3]
    else:
        lead = (1.0 + alpha) * c
        k_lead = kappa * (1.0 - alpha)  # k1 - alpha k2
        if unit and n1 > 0.0 and n2 > 0.0:
            dot = 0.0
            for a in range(4):
                dot += ubar[a] * (v2[a] - alpha * v1[a])
            k_lead = kappa * lead * dot / (n1 * n2 * (n2 + alpha * n1))
        elif unit:
            k_lead = k1 - alpha * k2
        coef = k_lead - ratio_gap * k1  # lambda k1 - alpha k2
        d0 = 2.0 * r2 * c + coef * v1[0] + k2 * lead * ubar[0]
        d1 = coef * v1[1] + k2 * lead * ubar[1]
        d2 = coef * v1[2] + k2 * lead * ubar[2]
        d3 = coef * v1[3] + k2 * lead * ubar[3]
    s_new, c_new = half_angles(cos_part, _wedge4(y1[0], y1[1], y1[2], y1[3], d0, d1, d2, d3))
    if norm == PRE or norm == PERI:
        return s_new, c_new, _norm4(y1), _norm4(y2)
    return s_new, c_new, 1.0, 1.0


# --------------------------------------------------------------------------------------
# The same attention in numpy, for many configurations at once.
# --------------------------------------------------------------------------------------


def attention_paths_last(Y, beta, attention="softmax"):
    r"""The attention outputs :math:`A_i` (B = I) of many configurations at once, in numpy.

    ``Y`` holds the tokens paths-last, shape (N, d, P): configuration p is ``Y[:, :, p]``,
    and the result has that shape.  The weights are those of :func:`attention` - softmax
    with the row maximum subtracted, or :math:`e^{\ell_{ij}}/N` - without the kernel's
    rescaling of large unnormalised logits (a logit above about 700 overflows).
    Paths-last makes every operation a short loop over the small (N, d) axes of long
    contiguous vectors, much faster than batched products of tiny matrices.
    """
    logits = beta * np.einsum("iap,jap->ijp", Y, Y)
    if attention == "softmax":
        logits = logits - logits.max(axis=1, keepdims=True)
        w = np.exp(logits)
        w /= w.sum(axis=1, keepdims=True)
    else:
        w = np.exp(logits) / Y.shape[0]
    return np.einsum("ijp,jap->iap", w, Y)


def tangent_projection(x, a):
    r""":math:`P^\perp_x[a] = a - \langle x, a\rangle x` for unit vectors ``x`` (..., d).

    What moves a token at ``x`` to first order when ``a`` is added to it and the sum is
    normalised back onto the sphere: the radial part of ``a`` only rescales the token.
    """
    x = np.asarray(x, dtype=float)
    a = np.asarray(a, dtype=float)
    return a - np.sum(x * a, axis=-1, keepdims=True) * x
