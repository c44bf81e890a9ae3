r"""Theory of a random feedforward block in the stochastic transformer (ours, not the paper's).

The model.  Every layer adds to the paper's update a two-layer perceptron with fresh random
weights, shared by all tokens (book chapter "Feedforward blocks"):

.. math::

    x_i \leftarrow \frac{x_i + L^{-1/2}\,e_i}{|x_i + L^{-1/2}\,e_i|},\qquad
    e_i = V A_i + \sqrt r\, W_2\,\varphi(W_1 x_i),

with :math:`W_1` (m x d) of i.i.d. N(0, 1) entries, :math:`W_2` (d x m) of i.i.d.
N(0, 1/m) entries, :math:`V` as in the paper (entries of variance :math:`\sigma^2`) and
:math:`r \ge 0`.

The noise kernel.  Given :math:`W_1`, the :math:`W_2 h_i` (:math:`h_i = \varphi(W_1x_i)`) are
centred Gaussian with :math:`\mathrm{Cov}(W_2h_i, W_2h_j) = (h_i\cdot h_j/m)\,I_d`; the rows
of :math:`W_1` make :math:`(W_1x_i, W_1x_j)` m independent pairs of standard normals with
correlation :math:`\langle x_i, x_j\rangle`, so the average over :math:`W_1` is
:math:`\kappa(\langle x_i, x_j\rangle) I_d` with
:math:`\kappa(z) = E[\varphi(g_1)\varphi(g_2)]`, :math:`\mathrm{corr}(g_1, g_2) = z`
(:func:`kernel`).  :math:`V` and :math:`(W_1, W_2)` are independent and centred, so over
many layers the increments :math:`e_i` act as a common Brownian noise :math:`dM_i` with
:math:`d\langle M_i^a, M_j^b\rangle = K_{ij}\delta_{ab}\,dt`,

.. math::

    K_{ij} = \sigma^2\langle A_i, A_j\rangle + r\,\kappa(\langle x_i, x_j\rangle).

Only these second moments enter the limit, so the result holds for every width m.

Ito's formula for the normalised tokens.  For a unit x and a small increment e,
:math:`(x+e)/|x+e| = x + P_xe - \langle x,e\rangle P_xe - \tfrac12|P_xe|^2x + O(|e|^3)`
(:math:`P_x = I - xx^\top`).  With :math:`E[ee^\top] = K\,dt\,I`,
:math:`E[\langle x, e\rangle P_xe] = K P_x x\,dt = 0` and :math:`E|P_xe|^2 = (d-1)K\,dt`, so

.. math::

    dx_i = -\tfrac{d-1}{2}K_{ii}\,x_i\,dt + P_{x_i}dM_i .

For :math:`Z = \langle x_1, x_2\rangle`, :math:`dZ = \langle dx_1, x_2\rangle + \langle x_1, dx_2\rangle
+ \langle dx_1, dx_2\rangle`: the drifts give :math:`-\tfrac{d-1}2(K_{11}+K_{22})Z`, the cross
variation :math:`K_{12}\operatorname{tr}(P_{x_1}P_{x_2}) = K_{12}(d-2+Z^2)`, and the martingale
:math:`\langle dM_1, P_{x_1}x_2\rangle + \langle dM_2, P_{x_2}x_1\rangle` has
:math:`|P_{x_1}x_2|^2 = |P_{x_2}x_1|^2 = 1-Z^2` and
:math:`\langle P_{x_1}x_2, P_{x_2}x_1\rangle = -Z(1-Z^2)`.  Hence the closed diffusion
:math:`dZ = \mu(Z)\,dt + s(Z)\,dB` with

.. math::

    \mu(Z) = -\tfrac{d-1}{2}(K_{11}+K_{22})Z + K_{12}(d-2+Z^2),\qquad
    s^2(Z) = (1-Z^2)(K_{11}+K_{22}-2ZK_{12}).

The same holds for a two-point configuration (:math:`m_1` tokens at :math:`y_1`, :math:`m_2`
at :math:`y_2`; tokens at one point receive the same increment), with
:math:`K_{11} = \sigma^2a_{11} + r\kappa(1)`, :math:`K_{22} = \sigma^2a_{22} + r\kappa(1)`,
:math:`K_{12} = \sigma^2a_{12} + r\kappa(Z)` and the attention products :math:`a_{kl}` of
:func:`stochastic_transformers.theory.two_cluster_coefficients`.  The attention and block parts
add (:func:`coefficients` = attention part + :func:`block_coefficients`).

The poles.  Write :math:`k = (K_{11}+K_{22})/2` and :math:`c = K_{12}`.  Near -1, with
:math:`v = 1+Z`,

.. math::

    \mu = (d-1)(k+c) - v\bigl((d-3)k + 2(k+c) - cv\bigr),\qquad
    s^2 = 2v(2-v)\bigl((k+c) - vc\bigr),

and :math:`k + c = |A_1+A_2|^2\sigma^2/2 + r(\kappa(1)+\kappa(Z))`.  At :math:`v = 0`,
:math:`k + c = \sigma^2(\alpha_1-\alpha_2)^2/2 + 2rE[\varphi_{even}(g)^2]`
(:math:`\alpha_k = p_k - q_k`, :math:`\varphi_{even}` the even part of :math:`\varphi`).  If it
is positive, :math:`\mu(-1) = (d-1)(k+c) > 0` and :math:`s^2 \approx 4(k+c)v`: near -1,
:math:`v` is a squared Bessel process of dimension :math:`d-1`, never reached for
:math:`d \ge 3` (entrance), reached and left at once for :math:`d = 2` (reflecting).  If it
is zero (a balanced split and an odd activation, or :math:`r = 0`), -1 is a fixed point,
:math:`k + c \approx \kappa_1^- v` and :math:`c \to -k_0` with

.. math::

    k_0 = \sigma^2(p-q)^2 + r\kappa(1),\qquad \kappa_1^- = \sigma^2(p+q)^2 + r\kappa'(-1)

(:math:`p = p_1 = p_2`, :math:`q = q_1 = q_2` the weights at :math:`Z = -1`); then
:math:`\mu \approx [(d-1)\kappa_1^- - (d-3)k_0]v` and :math:`s^2 \approx 4(\kappa_1^- + k_0)v^2`, and
:math:`\log v` drifts at the rate

.. math::

    \lambda_- = \lim_{v\to0}\Bigl[\frac{\mu}{v} - \frac{s^2}{2v^2}\Bigr]
              = (d-3)\kappa_1^- - (d-1)k_0
              = \sigma^2\bigl[4(d-1)pq - 2(p+q)^2\bigr] + r\bigl[(d-3)\kappa'(1) - (d-1)\kappa(1)\bigr]

(for an odd :math:`\varphi`, :math:`\kappa` is odd and :math:`\kappa'` even, so
:math:`\kappa'(-1) = \kappa'(1) = E[\varphi'(g)^2]` by Price's theorem).  -1 attracts iff
:math:`\lambda_- < 0`.  With softmax :math:`4pq = \mathrm{sech}^2\beta`, :math:`p+q = 1`, and
:math:`r = 0` gives Theorem 2's :math:`d - 2 < \cosh 2\beta`.  Near +1 (:math:`u = 1-Z`) the
same algebra with :math:`k - c = O(u)` gives

.. math::

    \lambda_+ = (d-3)\,r\kappa'(1) - (d-1)\bigl(\sigma^2S^2 + r\kappa(1)\bigr),

:math:`S = p_1 + q_1` at :math:`Z = 1` (1 for softmax, :math:`e^\beta` unnormalised); the
attention part of :math:`k - c` is :math:`O(u^2)` for every split.  +1 attracts iff
:math:`\lambda_+ < 0`: always for ReLU (:math:`\kappa'(1) = \kappa(1) = 1/2`) and identity, but
not for every activation: when :math:`(d-3)E[\varphi'^2] > (d-1)E[\varphi^2]` (erf for
:math:`d \ge 12`, tanh for :math:`d \ge 15`, GELU for :math:`d \ge 31`) a strong enough block
repels +1 (:func:`boundary_at_plus_one`), and for odd activations the same sign of
:math:`(d-3)\kappa'(1) - (d-1)\kappa(1)` makes the block push pairs away from -1 as well
(:func:`critical_beta` grows with r instead of falling).

Numerics.  :func:`antipodal_probability` integrates the scale density in
:math:`x = \operatorname{atanh} Z`, where it is :math:`\exp(-\int 2\mu_x/\nu_x^2)`, bounded and
exponentially decaying at both ends when both poles attract (the exponents above give the
rates); :func:`antipodal_at` solves the backward Kolmogorov equation in :math:`y = \log(1+Z)`
with coefficients that keep their relative precision as :math:`1 + Z \to 0`.
"""

from __future__ import annotations

import functools
import math

import numba as nb
import numpy as np
from scipy import interpolate, special

from . import theory
from . import two_clusters
from ._jit import JIT
from ._validation import (ATTENTIONS, FF_STRENGTH_MAX, SIGMA_MAX, check_choice, check_int,
                          check_real, check_real_array, check_times, check_tol)
from .activations import ACTIVATIONS, ODD_ACTIVATIONS, code, evaluate, phi_sum
from .kolmogorov import at_log_gaps, log_gap_solution, uniform_start_average
from .theory import _out

__all__ = [
    "QUADRATURE_ORDER",
    "kernel",
    "kernel_quadrature",
    "kernel_derivative",
    "even_part_energy",
    "block_coefficients",
    "coefficients",
    "boundary_at_minus_one",
    "boundary_at_plus_one",
    "critical_beta",
    "attracts_at_every_beta",
    "antipodal_probability",
    "antipodal_at",
]

#: Nodes per dimension of the Gauss-Hermite rule for GELU and tanh.  Against a 300-node
#: rule, the largest error of kappa on [-1, 1] is 2e-15 (tanh) and 4e-15 (GELU) at 160
#: nodes; tanh, whose poles at +-i pi/2 slow the rule down, needs 120 nodes for 4e-13.
QUADRATURE_ORDER = 160
#: Activations whose kernel is a closed form; the others go through the quadrature.
CLOSED_FORMS = ("relu", "erf", "identity")
#: Largest inverse temperature accepted (as two_clusters: e^beta must not overflow).
BETA_MAX = 700.0
# Step of the five-point differences of phi (Price's formula for kappa'): the truncation
# error h^4 |phi^(5)| / 30 and the rounding 1e-16 / h are both of order 1e-13 there
# (kappa'(1) of tanh and GELU come out within 3e-13 of adaptive quadrature).
_FD_STEP = 1e-3
# Chunk of z values per quadrature pass (order^2 * chunk doubles in memory: 25 MB).
_CHUNK = 128


def _check_activation(activation, choices=ACTIVATIONS):
    return check_choice("activation", activation, choices)


# ------------------------------------------------------------------------- the kernel
@functools.lru_cache(maxsize=8)
def _hermite_rule(order: int):
    r"""Nodes and weights (summing to 1) of the ``order``-point rule for :math:`E[f(g)]`, g ~ N(0, 1).

    scipy's Golub-Welsch roots of the probabilists' Hermite polynomials; numpy's
    ``hermegauss`` overflows its weights beyond about 300 nodes.
    """
    x, w = special.roots_hermitenorm(order)
    return x, w / w.sum()


def _derivative(activation, x):
    r""":math:`\varphi'(x)` by five-point central differences of :func:`activations.evaluate`.

    Truncation :math:`h^4|\varphi^{(5)}|/30` plus rounding :math:`\approx 10^{-16}/h`: about
    :math:`10^{-12}` at :math:`h = 10^{-3}` for GELU, erf and tanh (smooth activations only).
    """
    h = _FD_STEP
    return (evaluate(activation, x - 2 * h) - 8.0 * evaluate(activation, x - h)
            + 8.0 * evaluate(activation, x + h) - evaluate(activation, x + 2 * h)) / (12.0 * h)


def _quadrature(z, f, order):
    r""":math:`E[f(g_1)f(g_2)]` at correlations ``z`` (1-D array), :math:`g_2 = zg_1 + \sqrt{1-z^2}g_3`."""
    x, w = _hermite_rule(order)
    wf = w * f(x)
    out = np.empty(z.shape)
    for start in range(0, z.size, _CHUNK):
        zc = z[start:start + _CHUNK]
        sc = np.sqrt(np.maximum(1.0 - zc * zc, 0.0))
        arg = zc[:, None, None] * x[None, :, None] + sc[:, None, None] * x[None, None, :]
        out[start:start + _CHUNK] = np.einsum("i,kij,j->k", wf, f(arg), w)
    return out


def kernel_quadrature(z, activation, order=QUADRATURE_ORDER):
    r""":math:`\kappa(z) = E[\varphi(g_1)\varphi(g_2)]` by two-dimensional Gauss-Hermite quadrature.

    With :math:`g_2 = z g_1 + \sqrt{1-z^2}\,g_3` (:math:`g_1, g_3` independent standard normals),

    .. math::

        \kappa(z) \approx \sum_{i,j} w_iw_j\,\varphi(x_i)\,\varphi\bigl(zx_i + \sqrt{1-z^2}\,x_j\bigr),

    :math:`(x_i, w_i)` the ``order``-point rule for the standard normal law, and
    :math:`\varphi` the compiled activation of :func:`stochastic_transformers.activations.evaluate`.
    The rule converges fast for smooth :math:`\varphi`: at the default 160 nodes the error on
    [-1, 1] is about 4e-15 for erf and GELU and 2e-15 for tanh (against 300 nodes, and
    against the erf closed form).  For ReLU, whose :math:`\varphi(g_1)\varphi(g_2)` has a kink,
    it converges only like 1/order (1.3e-3 at 80 nodes, 3e-4 at 400): :func:`kernel` uses the
    closed form there.

    Parameters
    ----------
    z : float or array in [-1, 1]
    activation : one of ``activations.ACTIVATIONS``
    order : int >= 2
    """
    z = check_real_array("z", z, -1.0, 1.0)
    _check_activation(activation)
    order = check_int("order", order, 2)
    out = _quadrature(z.ravel(), functools.partial(evaluate, activation), order)
    return _out(out.reshape(z.shape))


def _closed_kernel(z, activation):
    if activation == "relu":
        return (np.sqrt(np.maximum(1.0 - z * z, 0.0)) + (np.pi - np.arccos(z)) * z) / (2 * np.pi)
    if activation == "erf":
        return (2.0 / np.pi) * np.arcsin(2.0 * z / 3.0)
    return z + 0.0  # identity (a new array)


def kernel(z, activation):
    r"""The block's noise kernel :math:`\kappa(z) = E[\varphi(g_1)\varphi(g_2)]`, :math:`\mathrm{corr}(g_1, g_2) = z`.

    Closed forms:

    * ReLU: :math:`\kappa(z) = \bigl(\sqrt{1-z^2} + (\pi - \arccos z)\,z\bigr)/(2\pi)`
      (the arc-cosine kernel of degree 1), :math:`\kappa(1) = 1/2`;
    * erf: :math:`\kappa(z) = \tfrac2\pi\arcsin(2z/3)` (from
      :math:`E[\operatorname{erf}(ag_1)\operatorname{erf}(bg_2)] = \tfrac2\pi\arcsin\frac{2abz}{\sqrt{(1+2a^2)(1+2b^2)}}`);
    * identity: :math:`\kappa(z) = z`.

    GELU and tanh: :func:`kernel_quadrature` (absolute error about 4e-15).  :math:`\kappa` is
    positive semi-definite, odd for an odd activation, and :math:`\kappa(1) = E[\varphi(g)^2]`.

    ``z``: a float or array in [-1, 1]; ``activation``: one of ``activations.ACTIVATIONS``.
    """
    z = check_real_array("z", z, -1.0, 1.0)
    _check_activation(activation)
    if activation in CLOSED_FORMS:
        return _out(_closed_kernel(z, activation))
    return kernel_quadrature(z, activation)


def kernel_derivative(z, activation):
    r""":math:`\kappa'(z) = E[\varphi'(g_1)\varphi'(g_2)]` (Price's theorem).

    Closed forms: ReLU :math:`(\pi - \arccos z)/(2\pi)` (so :math:`\kappa'(-1) = 0`,
    :math:`\kappa'(1) = 1/2`); erf :math:`\tfrac{4}{3\pi}(1 - 4z^2/9)^{-1/2}` (so
    :math:`\kappa'(\pm1) = 4/(\pi\sqrt5)`); identity 1.  GELU and tanh: the quadrature of
    :func:`kernel_quadrature` applied to :math:`\varphi'`, itself five-point differences of
    the compiled activation (step 1e-3): absolute error about 1e-12.
    :math:`\kappa'(1) = E[\varphi'(g)^2]` enters the exponents at both poles.
    """
    z = check_real_array("z", z, -1.0, 1.0)
    _check_activation(activation)
    if activation == "relu":
        out = (np.pi - np.arccos(z)) / (2 * np.pi)
    elif activation == "erf":
        out = (4.0 / (3.0 * np.pi)) / np.sqrt(1.0 - 4.0 * z * z / 9.0)
    elif activation == "identity":
        out = np.ones(z.shape)
    else:
        out = _quadrature(z.ravel(), functools.partial(_derivative, activation),
                          QUADRATURE_ORDER).reshape(z.shape)
    return _out(out)


@functools.lru_cache(maxsize=None)
def _kappa_one(activation):
    r""":math:`\kappa(1) = E[\varphi(g)^2]` (cached: the pole formulas use it at every call)."""
    return float(kernel(1.0, activation))


@functools.lru_cache(maxsize=None)
def _kappa_slope(activation):
    r""":math:`\kappa'(1) = E[\varphi'(g)^2]`, cached."""
    return float(kernel_derivative(1.0, activation))


def even_part_energy(activation):
    r""":math:`E[\varphi_{even}(g)^2] = (\kappa(1) + \kappa(-1))/2`, :math:`\varphi_{even}(x) = (\varphi(x)+\varphi(-x))/2`.

    (:math:`\kappa(1) + \kappa(-1) = E[(\varphi(g)+\varphi(-g))^2]/2`.)  Zero for the odd
    activations (returned exactly); ReLU :math:`1/4` (:math:`\varphi_{even} = |x|/2`); GELU
    (:math:`\varphi_{even}(x) = x\operatorname{erf}(x/\sqrt2)/2`) by quadrature.  It sets the
    drift :math:`\mu(-1) = 2r(d-1)E[\varphi_{even}^2]` of a balanced pair.
    """
    _check_activation(activation)
    if activation in ODD_ACTIVATIONS:
        return 0.0
    if activation == "relu":
        return 0.25
    return 0.5 * float(np.sum(kernel(np.array([1.0, -1.0]), activation)))


# ----------------------------------------- kappa(1) +- kappa(z) without cancellation
@nb.njit(**JIT)
def _pair_sums(act, mid, half, out):
    """phi(mid + half) + phi(mid - half) elementwise, by the cancellation-free form."""
    for k in range(mid.size):
        out[k] = phi_sum(act, mid[k], half[k])


def _quadrature_pair(w_small, activation):
    r""":math:`\kappa(1) + \kappa(-1+w) = \tfrac12E[(\varphi(g_1)+\varphi(g_2))^2]`, :math:`\mathrm{corr}(g_1, g_2) = -(1-w)`.

    By the rule of :func:`kernel_quadrature` with :math:`g_2 = -(1-w)g_1 + \sqrt{w(2-w)}g_3`.
    The mid-point and half-difference of :math:`g_1, g_2` are formed from w directly and
    passed to :func:`activations.phi_sum`, so for an odd activation a tiny w keeps its
    relative precision (no difference of two nearly equal kernels is taken).
    """
    x, wt = _hermite_rule(QUADRATURE_ORDER)
    flat = np.asarray(w_small, dtype=float).ravel()
    out = np.empty(flat.shape)
    act = code(activation)
    xi, xj = x[None, :, None], x[None, None, :]
    for start in range(0, flat.size, _CHUNK):
        w = flat[start:start + _CHUNK, None, None]
        s = np.sqrt(w * (2.0 - w))
        # g1 + g2 = w x_i + s x_j and g1 - g2 = (2 - w) x_i - s x_j, both without cancellation
        mid, half = 0.5 * (w * xi + s * xj), 0.5 * ((2.0 - w) * xi - s * xj)
        vals = np.empty(mid.size)
        _pair_sums(act, mid.ravel(), half.ravel(), vals)
        squares = vals.reshape(mid.shape) ** 2
        out[start:start + _CHUNK] = 0.5 * np.einsum("i,kij,j->k", wt, squares, wt)
    return out.reshape(np.shape(w_small))


def _arcsin_gap(w):
    r""":math:`\arcsin a - \arcsin b`, :math:`a = 2/3`, :math:`b = 2(1-w)/3`, to relative precision.

    :math:`\sin(\arcsin a - \arcsin b) = a\sqrt{1-b^2} - b\sqrt{1-a^2} = (a^2-b^2)/(a\sqrt{1-b^2}
    + b\sqrt{1-a^2})` with :math:`a - b = 2w/3` exact; for :math:`b \le 0` the plain difference
    has no cancellation.
    """
    a = 2.0 / 3.0
    b = 2.0 * (1.0 - w) / 3.0
    ca, cb = math.sqrt(1.0 - a * a), np.sqrt(1.0 - b * b)
    small = w < 1.0
    den = np.where(small, a * cb + b * ca, 1.0)
    gap = np.arcsin((2.0 * w / 3.0) * (a + b) / den)
    return np.where(small, gap, math.asin(a) - np.arcsin(b))


def _theta_minus_sin(theta):
    r""":math:`\theta - \sin\theta`, by its Taylor series below 0.5 (relative error 1e-16)."""
    t2 = theta * theta
    series = theta * t2 / 6.0 * (1 - t2 / 20 * (1 - t2 / 42 * (1 - t2 / 72 * (1 - t2 / 110 * (
        1 - t2 / 156 * (1 - t2 / 210))))))
    return np.where(theta < 0.5, series, theta - np.sin(theta))


def _kernel_sum(v, activation):
    r""":math:`\kappa(1) + \kappa(-1 + v)`, :math:`v \in [0, 2]`, with its relative precision at small v.

    For odd activations it is :math:`\kappa(1) - \kappa(1-v) = O(v)`.  ReLU:
    :math:`[\pi - (\psi - \sin\psi) + \psi v]/(2\pi)`, :math:`\psi = \arccos(1-v)`; erf:
    :func:`_arcsin_gap`; identity: v; GELU and tanh: :func:`_quadrature_pair`.
    """
    v = np.asarray(v, dtype=float)
    if activation == "identity":
        return v.copy()
    if activation == "erf":
        return (2.0 / np.pi) * _arcsin_gap(v)
    if activation == "relu":
        psi = 2.0 * np.arcsin(np.sqrt(0.5 * v))
        return (np.pi - _theta_minus_sin(psi) + psi * v) / (2 * np.pi)
    return _quadrature_pair(v, activation)


# ------------------------------------------------------------------- the coefficients
def _check_model(beta, d, r, activation, m1, m2, attention, sigma):
    beta = check_real("beta", beta, 0.0, BETA_MAX)   # the split's beta range is narrower
    _, d, m1, m2, attention, sigma = theory.split_args(0.0, d, m1, m2, attention, sigma)
    r = check_real("r", r, 0.0, FF_STRENGTH_MAX)
    return beta, d, r, _check_activation(activation), m1, m2, attention, sigma


def _block(z, d, r, activation):
    k1 = _kappa_one(activation)
    kz = np.asarray(kernel(z, activation))
    drift = r * (-(d - 1.0) * k1 * z + kz * (d - 2.0 + z * z))
    diff2 = 2.0 * r * (1.0 - z * z) * (k1 - z * kz)
    return drift, diff2


def block_coefficients(z, d, r, activation):
    r"""The feedforward block's own part of the overlap drift and squared diffusion.

    With :math:`K_{11} = K_{22} = r\kappa(1)` and :math:`K_{12} = r\kappa(z)` in the formulas of
    the module docstring:

    .. math::

        \mu_{ff}(z) = r\bigl[-(d-1)\kappa(1)z + \kappa(z)(d-2+z^2)\bigr],\qquad
        s^2_{ff}(z) = 2r(1-z^2)\bigl(\kappa(1) - z\kappa(z)\bigr).

    For the identity, :math:`\mu_{ff} = -rz(1-z^2)` and :math:`s^2_{ff} = 2r(1-z^2)^2`: the
    overlap of two vectors moved by the same random linear map.

    Parameters
    ----------
    z : float or array in [-1, 1]
    d : int >= 2
    r : float >= 0
    activation : one of ``activations.ACTIVATIONS``
    """
    z = check_real_array("z", z, -1.0, 1.0)
    d = check_int("d", d, 2)
    r = check_real("r", r, 0.0, FF_STRENGTH_MAX)
    _check_activation(activation)
    drift, diff2 = _block(z, d, r, activation)
    return _out(drift), _out(diff2)


def coefficients(z, beta, d, r, activation, m1=1, m2=1, attention="softmax", sigma=1.0):
    r"""Drift and squared diffusion of the overlap with the feedforward block.

    .. math::

        \mu(z) = -\tfrac{d-1}{2}(K_{11}+K_{22})z + K_{12}(d-2+z^2),\qquad
        s^2(z) = (1-z^2)(K_{11}+K_{22}-2zK_{12}),

    :math:`K_{11} = \sigma^2a_{11} + r\kappa(1)`, :math:`K_{22} = \sigma^2a_{22} + r\kappa(1)`,
    :math:`K_{12} = \sigma^2a_{12} + r\kappa(z)` (module docstring).  Computed as
    :func:`stochastic_transformers.theory.two_cluster_coefficients` (the attention part, which
    holds the weights of :func:`~stochastic_transformers.theory.two_cluster_weights`) plus
    :func:`block_coefficients`; ``r = 0`` adds exact zeros, so it returns the theory's values
    bit for bit (and, with ``m1 = m2 = 1``, Lemma 4's ``overlap_drift`` and
    ``overlap_diffusion`` squared).

    Parameters
    ----------
    z : float or array in [-1, 1]
    beta : float in [0, 700]
    d : int >= 2
    r : float >= 0
        Strength of the block's noise.
    activation : one of ``activations.ACTIVATIONS``
    m1, m2 : int >= 1
        Tokens at each of the two points.
    attention : {"softmax", "unnormalized"}
    sigma : float > 0

    Returns
    -------
    (drift, diffusion_squared) : floats or arrays shaped like ``z``
    """
    z = check_real_array("z", z, -1.0, 1.0)
    beta, d, r, activation, m1, m2, attention, sigma = _check_model(
        beta, d, r, activation, m1, m2, attention, sigma)
    mu, s2 = theory.two_cluster_coefficients(z, beta, d, m1, m2, attention=attention, sigma=sigma)
    if r == 0.0:
        return mu, s2
    drift, diff2 = _block(z, d, r, activation)
    return _out(mu + drift), _out(s2 + diff2)


def _coefficients_v(v, beta, d, r, activation, m1, m2, attention, sigma):
    r""":math:`\mu` and :math:`s^2` at :math:`Z = -1 + v`, keeping their relative precision as v -> 0.

    Attention part: :func:`stochastic_transformers.two_clusters.antipodal_coefficients`.  Block
    part, with :math:`e = \kappa(1) + \kappa(-1+v)` (:func:`_kernel_sum`) and :math:`k = r\kappa(1)`:
    :math:`\mu_{ff} = r[(d-1)e - v((d-3)\kappa(1) + 2e - (e - \kappa(1))v)]`,
    :math:`s^2_{ff} = 2rv(2-v)(e(1-v) + v\kappa(1))` (the module docstring's forms near -1).
    """
    mu, s2 = two_clusters.antipodal_coefficients(v, beta, d, m1, m2, attention=attention,
                                                  sigma=sigma)
    if r == 0.0:
        return np.asarray(mu), np.asarray(s2)
    k1 = _kappa_one(activation)
    e = _kernel_sum(v, activation)
    mu_ff = r * ((d - 1.0) * e - v * ((d - 3.0) * k1 + 2.0 * e - (e - k1) * v))
    s2_ff = 2.0 * r * v * (2.0 - v) * (e * (1.0 - v) + v * k1)
    return mu + mu_ff, s2 + s2_ff


# ------------------------------------------------------------------------ the poles
def _pole_data(beta, d, r, activation, m1, m2, attention, sigma):
    """Drift at -1, whether -1 is a fixed point, and (lambda, B) at both poles.

    B is the limit of s^2 / w^2 at a fixed point (w the distance to it); NaN where -1 is
    not a fixed point.
    """
    odd = activation in ODD_ACTIVATIONS
    k1 = _kappa_one(activation) if r > 0 else 0.0
    slope = _kappa_slope(activation) if r > 0 else 0.0
    gap2 = two_clusters.hovering_scale(beta, m1, m2, attention=attention)
    kp0 = 0.5 * sigma**2 * gap2 + (2.0 * r * even_part_energy(activation) if r > 0 else 0.0)
    fixed = m1 == m2 and (r == 0.0 or odd)
    out = {"drift": (d - 1.0) * kp0, "fixed": fixed, "lam_minus": math.nan, "b_minus": math.nan}
    if fixed:
        p, q, _, _ = (float(a) for a in theory.two_cluster_weights(-1.0, beta, m1, m2, attention))
        k0 = sigma**2 * (p - q) ** 2 + r * k1
        kp1 = sigma**2 * (p + q) ** 2 + r * slope   # kappa'(-1) = kappa'(1) for odd phi
        out.update(lam_minus=(d - 3.0) * kp1 - (d - 1.0) * k0, b_minus=4.0 * (kp1 + k0))
    p, q, _, _ = (float(a) for a in theory.two_cluster_weights(1.0, beta, m1, m2, attention))
    k0p = sigma**2 * (p + q) ** 2 + r * k1
    km1 = r * slope
    out.update(lam_plus=(d - 3.0) * km1 - (d - 1.0) * k0p, b_plus=4.0 * (km1 + k0p))
    return out


def _kind(lam):
    return "attracting" if lam < 0 else ("neutral" if lam == 0 else "repelling")


def boundary_at_minus_one(beta, d, r, activation, m1=1, m2=1, attention="softmax", sigma=1.0):
    r"""How the overlap behaves at :math:`Z = -1` (the antipodal pair).

    The drift there is

    .. math::

        \mu(-1) = (d-1)\bigl[\sigma^2(\alpha_1-\alpha_2)^2/2 + r(\kappa(1)+\kappa(-1))\bigr]
                = (d-1)\bigl[\sigma^2(\alpha_1-\alpha_2)^2/2 + 2rE[\varphi_{even}(g)^2]\bigr]

    (:math:`\alpha_k = p_k - q_k` at :math:`Z = -1`, zero difference for a balanced split).

    * :math:`\mu(-1) > 0` (an activation with a nonzero even part and :math:`r > 0`, or an
      unbalanced split): :math:`1 + Z` is near -1 a squared Bessel process of dimension
      :math:`d - 1`; ``"entrance"`` for :math:`d \ge 3` (never reached and never the limit: antipodal
      pairs do not form, whatever :math:`\beta`), ``"reflecting"`` for :math:`d = 2`
      (reached and left at once).  Never attracting.
    * :math:`\mu(-1) = 0` (balanced split, and an odd activation or :math:`r = 0`): -1 is a
      fixed point and attracts iff the exponent

      .. math::

          \lambda_- = \lim_{w\to0}\Bigl[\frac{\mu(-1+w)}{w} - \frac{s^2(-1+w)}{2w^2}\Bigr]
                    = \sigma^2\bigl[4(d-1)pq - 2(p+q)^2\bigr] + r\bigl[(d-3)\kappa'(1) - (d-1)\kappa(1)\bigr]

      is negative (:math:`p, q` the weights at :math:`Z = -1`; derivation in the module
      docstring).  ``"attracting"`` (:math:`\lambda_- < 0`), ``"neutral"`` (= 0) or
      ``"repelling"``.  For the identity alone, :math:`r[(d-3) - (d-1)] = -2r`.

    Parameters
    ----------
    beta, d, r, activation, m1, m2, attention, sigma : as in :func:`coefficients`.

    Returns
    -------
    dict
        ``kind`` (the words above), ``attracting`` (bool), ``drift`` (:math:`\mu(-1)`),
        ``exponent`` (:math:`\lambda_-`, NaN when -1 is not a fixed point) and
        ``bessel_dimension`` (``d - 1`` when it is not, else None).
    """
    beta, d, r, activation, m1, m2, attention, sigma = _check_model(
        beta, d, r, activation, m1, m2, attention, sigma)
    data = _pole_data(beta, d, r, activation, m1, m2, attention, sigma)
    if data["fixed"]:
        lam = data["lam_minus"]
        return {"kind": _kind(lam), "attracting": lam < 0, "drift": data["drift"],
                "exponent": lam, "bessel_dimension": None}
    return {"kind": "entrance" if d >= 3 else "reflecting", "attracting": False,
            "drift": data["drift"], "exponent": math.nan, "bessel_dimension": d - 1}


def boundary_at_plus_one(beta, d, r, activation, m1=1, m2=1, attention="softmax", sigma=1.0):
    r"""How the overlap behaves at :math:`Z = +1` (merged tokens), always a fixed point.

    .. math::

        \lambda_+ = \lim_{u\to0}\Bigl[-\frac{\mu(1-u)}{u} - \frac{s^2(1-u)}{2u^2}\Bigr]
                  = (d-3)\,r\kappa'(1) - (d-1)\bigl(\sigma^2S^2 + r\kappa(1)\bigr),

    :math:`S = p_1 + q_1` at :math:`Z = 1` (1 for softmax, :math:`e^\beta` unnormalised), for
    every split (module docstring).  Without the block it is :math:`-(d-1)\sigma^2S^2 < 0`:
    +1 always attracts (Theorem 2).  ReLU: :math:`\kappa'(1) = \kappa(1) = 1/2`, the block adds
    :math:`-r`; identity :math:`-2r`; GELU, erf and tanh have :math:`E[\varphi'^2] > E[\varphi^2]`,
    so that for large d (erf: :math:`d \ge 12`) a strong enough block,
    :math:`r > (d-1)\sigma^2S^2/((d-3)\kappa'(1) - (d-1)\kappa(1))`, makes +1 repel.

    Returns
    -------
    dict
        ``kind`` (``"attracting"``, ``"neutral"`` or ``"repelling"``), ``attracting`` and
        ``exponent`` (:math:`\lambda_+`).
    """
    beta, d, r, activation, m1, m2, attention, sigma = _check_model(
        beta, d, r, activation, m1, m2, attention, sigma)
    lam = _pole_data(beta, d, r, activation, m1, m2, attention, sigma)["lam_plus"]
    return {"kind": _kind(lam), "attracting": lam < 0, "exponent": lam}


def critical_beta(d, r, activation, attention="softmax", sigma=1.0):
    r"""The inverse temperature above which -1 attracts a pair (odd activations only).

    From :func:`boundary_at_minus_one`, :math:`\lambda_-(\beta) = \sigma^2\ell(\beta) + rc` with
    :math:`c = (d-3)\kappa'(1) - (d-1)\kappa(1)` and

    * softmax: :math:`\ell = (d-1)\,\mathrm{sech}^2\beta - 2`, so -1 attracts iff
      :math:`\mathrm{sech}^2\beta < s = (2 - rc/\sigma^2)/(d-1)` and
      :math:`\beta_c = \operatorname{arccosh}(s^{-1/2})`;
    * unnormalised: :math:`\ell = (d-1) - 2\cosh^2\beta`, attracting iff
      :math:`\cosh^2\beta > C = (d - 1 + rc/\sigma^2)/2`, :math:`\beta_c = \operatorname{arccosh}\sqrt C`.

    Both are decreasing in :math:`\beta`, so -1 attracts exactly for :math:`\beta > \beta_c`.
    Returns ``0.0`` when -1 attracts at every :math:`\beta \ge 0` (softmax :math:`s > 1`,
    unnormalised :math:`C < 1`), the convention of
    :func:`stochastic_transformers.theory.critical_beta` for ``d = 2``
    (:func:`attracts_at_every_beta` tells this case from :math:`\lambda_-(0) = 0` exactly,
    which also gives ``0.0``), and ``inf`` when it attracts at no :math:`\beta` (softmax
    :math:`s \le 0`, which needs :math:`c > 0`: erf with :math:`d \ge 12`, for instance).
    At ``r = 0``, :math:`s = 2/(d-1)`, i.e. :math:`\cosh 2\beta_c = d - 2`: Theorem 2's
    :math:`\tfrac12\operatorname{arccosh}(d-2)` for every :math:`d \ge 3`
    (:func:`stochastic_transformers.theory.critical_beta`; ``d = 3`` gives 0.0 there too), and
    0.0 for ``d = 2`` as there.  Unlike at ``r = 0``, softmax and unnormalised attention
    differ once :math:`r > 0`.

    Parameters
    ----------
    d : int >= 2
    r : float >= 0
    activation : one of ``activations.ODD_ACTIVATIONS`` ("erf", "tanh", "identity")
    attention : {"softmax", "unnormalized"}
    sigma : float > 0
    """
    s, big_c = _threshold_terms(d, r, activation, attention, sigma)
    if attention == "softmax":
        if s > 1.0:
            return 0.0  # attracting at every beta (theory.critical_beta's d = 2 convention)
        if s <= 0.0:
            return math.inf
        return math.acosh(1.0 / math.sqrt(s))
    if big_c < 1.0:
        return 0.0
    return math.acosh(math.sqrt(big_c))


def attracts_at_every_beta(d, r, activation, attention="softmax", sigma=1.0) -> bool:
    """Whether -1 attracts a pair at every beta >= 0, beta = 0 included (where
    :func:`critical_beta` returns its conventional 0.0); arguments as there."""
    s, big_c = _threshold_terms(d, r, activation, attention, sigma)
    return s > 1.0 if attention == "softmax" else big_c < 1.0


def _threshold_terms(d, r, activation, attention, sigma):
    """The checked arguments' s (softmax) and C (unnormalised) of :func:`critical_beta`."""
    d = check_int("d", d, 2)
    r = check_real("r", r, 0.0, FF_STRENGTH_MAX)
    _check_activation(activation, ODD_ACTIVATIONS)
    check_choice("attention", attention, ATTENTIONS)
    sigma = check_real("sigma", sigma, 0.0, SIGMA_MAX, strict_min=True)
    c = 0.0
    if r > 0:
        c = (d - 3.0) * _kappa_slope(activation) - (d - 1.0) * _kappa_one(activation)
    shift = r * c / sigma**2
    return (2.0 - shift) / (d - 1.0), 0.5 * (d - 1.0 + shift)


# ------------------------------------------------------------- the scale function
#: Where the scale-density integrand stops using the coefficients and switches to its
#: two-term expansion at the pole: 1 + Z = 1e-10 (coefficients kept exact in 1 + Z there,
#: :func:`_coefficients_v`) and 1 - Z = 1e-6 (plain formulas, relative error ~1e-10).
_V_CUT, _U_CUT = 1e-10, 1e-6
#: Extent of the expansion region beyond each cut, in x = atanh Z: its correction term
#: falls like e^{-2|x|}, i.e. by e^{-40}, so beyond it the tails are pure exponentials.
_EXTEND = 20.0
#: Grid step in x.  The rules are fourth order; halving the step changes the answers
#: by about 1e-10.
_X_STEP = 0.01


def _panels(f, h):
    r"""Integrals of ``f`` over the cells of a uniform grid, fourth order.

    Interior cells: :math:`\tfrac{h}{24}(-f_{i-1} + 13f_i + 13f_{i+1} - f_{i+2})` (the cubic
    through four points); the two end cells use the quadratic through three points.
    """
    out = np.empty(len(f) - 1)
    out[1:-1] = h / 24.0 * (-f[:-3] + 13.0 * f[1:-2] + 13.0 * f[2:-1] - f[3:])
    out[0] = h / 12.0 * (5.0 * f[0] + 8.0 * f[1] - f[2])
    out[-1] = h / 12.0 * (5.0 * f[-1] + 8.0 * f[-2] - f[-3])
    return out


def _scale_exponent(x, model, data):
    r""":math:`g = 2\mu_x/\nu_x^2 = 2\mu(1-z^2)/s^2 + 2z` on the grid ``x`` (:math:`z = \tanh x`).

    Between the cuts from the coefficients: in :math:`v = 1 + z` for :math:`z \le 0`
    (:func:`_coefficients_v`), in :math:`u = 1 - z` for :math:`z > 0`.  Beyond them the
    two-term expansion :math:`g_\infty + c\,w` (:math:`w` the distance to the pole), with
    :math:`g_\infty = 4\lambda_-/B_-` at -1 and :math:`-4\lambda_+/B_+` at +1 (:func:`_pole_data`)
    and :math:`c` matching the last computed value: error :math:`O(w_{cut}^2)`.
    """
    beta, d, r, activation, m1, m2, attention, sigma = model
    v = 2.0 * special.expit(2.0 * x)
    u = 2.0 * special.expit(-2.0 * x)
    lo, hi = 0.5 * math.log(_V_CUT / (2 - _V_CUT)), 0.5 * math.log((2 - _U_CUT) / _U_CUT)
    g = np.empty(x.shape)
    neg = (x >= lo) & (x <= 0.0)
    pos = (x > 0.0) & (x <= hi)
    mu, s2 = _coefficients_v(v[neg], beta, d, r, activation, m1, m2, attention, sigma)
    g[neg] = 2.0 * mu * v[neg] * (2.0 - v[neg]) / s2 - 2.0 + 2.0 * v[neg]
    z = np.tanh(x[pos])
    mu, s2 = theory.two_cluster_coefficients(z, beta, d, m1, m2, attention=attention, sigma=sigma)
    if r > 0:
        drift, diff2 = _block(z, d, r, activation)
        mu, s2 = mu + drift, s2 + diff2
    g[pos] = 2.0 * mu * u[pos] * (2.0 - u[pos]) / s2 + 2.0 - 2.0 * u[pos]
    g_lo = 4.0 * data["lam_minus"] / data["b_minus"]
    g_hi = -4.0 * data["lam_plus"] / data["b_plus"]
    i0, i1 = np.nonzero(neg)[0][0], np.nonzero(pos)[0][-1]
    below, above = x < x[i0], x > x[i1]
    g[below] = g_lo + (g[i0] - g_lo) / v[i0] * v[below]
    g[above] = g_hi + (g[i1] - g_hi) / u[i1] * u[above]
    return g, g_lo, g_hi


def _scale_grid(model, data, h):
    """x grid, log of the scale density on it (max 0), and the tail rates |g| at both ends."""
    lo, hi = 0.5 * math.log(_V_CUT / (2 - _V_CUT)), 0.5 * math.log((2 - _U_CUT) / _U_CUT)
    n = int(math.ceil((hi - lo + 2 * _EXTEND) / h)) + 1
    x = lo - _EXTEND + h * np.arange(n)
    g, g_lo, g_hi = _scale_exponent(x, model, data)
    log_s = -np.concatenate([[0.0], np.cumsum(_panels(g, h))])
    return x, log_s - log_s.max(), -g_lo, g_hi


def _probability_from(model, data, z0, h=_X_STEP):
    r""":math:`P(Z_\infty = -1)` from each ``z0`` (array in (-1, 1)), or averaged when None.

    With :math:`S'(x) = e^{\log S'}` on the grid and exponential tails beyond it
    (:math:`\int_{-\infty}^{x_0}S' = S'(x_0)/|g_{lo}|`, likewise at the top):
    :math:`P(z_0) = \int_{x_0}^\infty S'/\int S'`, the partial cell by 8-point Gauss-Legendre on
    a cubic spline of :math:`\log S'`; the average is :math:`\int S'G/\int S'` with
    :math:`G(x) = P(\operatorname{atanh}Z_0 < x) = I_{\mathrm{expit}(2x)}(a, a)`,
    :math:`a = (d-1)/2` (uniform tokens; integration by parts), the tails of :math:`S'G`
    using :math:`G \propto e^{2ax}` at the bottom and :math:`1 - G \propto e^{-2ax}` at the top.
    """
    x, log_s, rate_lo, rate_hi = _scale_grid(model, data, h)
    s = np.exp(log_s)
    total = np.sum(_panels(s, h)) + s[0] / rate_lo + s[-1] / rate_hi
    a = 0.5 * (model[1] - 1.0)
    if z0 is None:
        G = special.betainc(a, a, special.expit(2.0 * x))
        top = s[-1] / rate_hi - s[-1] * (1.0 - G[-1]) / (rate_hi + 2 * a)
        weighted = np.sum(_panels(s * G, h)) + s[0] * G[0] / (rate_lo + 2 * a) + top
        return weighted / total
    upper = np.concatenate([np.cumsum(_panels(s, h)[::-1])[::-1], [0.0]]) + s[-1] / rate_hi
    x0 = np.arctanh(z0)
    i = np.clip(np.floor((x0 - x[0]) / h).astype(int), 0, len(x) - 2)
    spline = interpolate.CubicSpline(x, log_s)
    nodes, weights = np.polynomial.legendre.leggauss(8)
    half = 0.5 * (x[i + 1] - x0)
    t = x0[:, None] + half[:, None] * (1.0 + nodes[None, :])
    partial = half * (np.exp(spline(t)) @ weights)
    return (upper[i + 1] + partial) / total


def antipodal_probability(beta, d, r, activation, z0=None, *, m1=1, m2=1, attention="softmax",
                          sigma=1.0):
    r"""Probability that the overlap ends antipodal, :math:`P(Z_t \to -1)`, with the block.

    The exit probability of the scale function :math:`S` of :func:`coefficients`,

    .. math::

        P(z_0) = \frac{S(1) - S(z_0)}{S(1) - S(-1)},\qquad
        S'(z) = \exp\Bigl(-\int_0^z \frac{2\mu}{s^2}\Bigr),

    averaged over uniform independent tokens (:math:`z_0` density
    :math:`\propto (1-z^2)^{(d-3)/2}`) when ``z0`` is None.  :math:`S'` blows up at both ends;
    in :math:`x = \operatorname{atanh} z` the density :math:`e^{-\Lambda(x)}`,
    :math:`\Lambda' = 2\mu_x/\nu_x^2 = 2\mu(1-z^2)/s^2 + 2z`, is bounded and falls like
    :math:`e^{-4|\lambda_\pm|\,|x|/B_\pm}` at an attracting pole (:func:`boundary_at_minus_one`,
    :func:`boundary_at_plus_one`), so the integrals are done there, in logarithms
    (:func:`_probability_from`).

    * -1 not a fixed point (an activation with a nonzero even part and :math:`r > 0`, or an
      unbalanced split): 0, for every ``z0``.
    * -1 a fixed point that does not attract: 0 (1 at ``z0 = -1`` itself).
    * +1 repels (:func:`boundary_at_plus_one`; erf, tanh or GELU with large d and r): then
      -1 repels as well (:math:`\lambda_- - \lambda_+ = \sigma^2[(d-1)(4pq + S^2) - 2(p+q)^2]`
      is positive for :math:`d \ge 3`, and +1 always attracts for :math:`d = 2`), the overlap
      settles at neither pole and the answer is 0 by the first rule.  The guard that would
      return 1 for "-1 attracts, +1 repels" is kept for safety only.

    At ``r = 0`` this is :func:`stochastic_transformers.theory.antipodal_probability`: they agree
    to about 1e-9 (tests), and the step of the x grid changes the result by about 1e-10.

    Parameters
    ----------
    beta, d, r, activation : as in :func:`coefficients`.
    z0 : None, float or array in [-1, 1]
    m1, m2, attention, sigma : as in :func:`coefficients`.
    """
    model = _check_model(beta, d, r, activation, m1, m2, attention, sigma)
    if z0 is not None:
        z0 = check_real_array("z0", z0, -1.0, 1.0)
    data = _pole_data(*model)
    if not data["fixed"]:
        return 0.0 if z0 is None else _out(np.zeros(z0.shape))
    if not data["lam_minus"] < 0:
        return 0.0 if z0 is None else _out(np.where(z0 == -1.0, 1.0, 0.0))
    if not data["lam_plus"] < 0:
        return 1.0 if z0 is None else _out(np.where(z0 == 1.0, 0.0, 1.0))
    if z0 is None:
        return float(_probability_from(model, data, None))
    flat = z0.ravel()
    out = np.where(flat == -1.0, 1.0, 0.0)
    inside = np.abs(flat) < 1.0
    if np.any(inside):
        out[inside] = _probability_from(model, data, flat[inside])
    return _out(out.reshape(z0.shape))


# ------------------------------------------------------------------- finite time
def _kolmogorov_y(ts, model, data, tol, h, v_min):
    r""":math:`u(t_k, y_i) = P(1 + Z_{t_k} \le \mathrm{tol} \mid y_0 = y_i)` on a grid of step ``h``.

    The bottom :math:`v_{lo}` lies a factor 1e6 below the depth scale :math:`\mu(-1)/(d-1)`
    of a non-fixed -1 (1e-30 for a fixed one), below ``tol`` and below the starts; the top
    is :math:`\log(2 - 10^{-8})`, absorbing when +1 attracts, else reflecting
    (:func:`stochastic_transformers.kolmogorov.log_gap_solution`, rtol 1e-7).
    """
    return log_gap_solution(lambda v: _coefficients_v(v, *model), data["drift"] / (model[1] - 1.0),
                            tol, v_min, h, ts, top_absorbs=data["lam_plus"] < 0)


def antipodal_at(t, beta, d, r, activation, tol=1e-3, z0=None, *, m1=1, m2=1,
                 attention="softmax", sigma=1.0, h=0.02):
    r""":math:`P(1 + Z_t \le \mathrm{tol})` at finite times, with the block.

    :math:`u(t, v) = P(1 + Z_t \le \mathrm{tol} \mid 1 + Z_0 = v)` solves the backward
    Kolmogorov equation :math:`u_t = \mathcal Lu`, :math:`u(0, v) = 1\{v \le \mathrm{tol}\}`, here
    in :math:`y = \log v` (:func:`~stochastic_transformers.kolmogorov.log_gap_generator`),
    which resolves the approach to -1 on a uniform grid; the coefficients are computed in v
    so that they keep their relative precision down to :math:`v = 10^{-30}` (:func:`_coefficients_v`).  The grid reflects far
    below everything of interest and absorbs next to +1 (the approach of
    :func:`stochastic_transformers.two_clusters.antipodal_persistence`, extended by the block).
    It is solved at steps ``h`` and ``h/2``; the finer answer is returned with the difference
    as its error estimate.  Near +1 the grid is coarse (its last cell spans
    :math:`1 - Z \lesssim 2h`) and the scheme converges only to first order in ``h`` there,
    so the difference is about the error of the finer answer itself: for erf, d = 4,
    :math:`\beta = 2`, r = 0.5, :math:`z_0 = 0`, t = 100 the distance to
    :func:`antipodal_probability` is 2.6e-4, 1.2e-4, 5.4e-5 at h = 0.04, 0.02, 0.01 and the
    estimates are 3.3e-4, 1.4e-4, 6.4e-5.  At ``r = 0`` the scheme is that of
    :func:`~stochastic_transformers.two_clusters.antipodal_persistence` and agrees with it to
    rounding.

    As :math:`t \to \infty` it tends to :func:`antipodal_probability` when -1 attracts.  With
    an activation whose even part is nonzero, -1 is an entrance boundary and cannot be the
    limit: above the attention's threshold the attention pushes a nearly antipodal pair
    towards -1 and the block pushes it back, so the overlap hovers at :math:`1 + Z` of order
    :math:`\mu(-1)/|\lambda|` (a depth that grows with r), ``tol`` below that depth is seldom
    met, and eventually +1 takes the pair.

    Parameters
    ----------
    t : float or 1-D array, > 0
    beta, d, r, activation : as in :func:`coefficients`.
    tol : float in (0, 1]
    z0 : None, float or 1-D array in (-1, 1)
        Initial overlap; None averages over uniform independent tokens.
    m1, m2, attention, sigma : as in :func:`coefficients`.
    h : float in (0, 0.5], grid step in :math:`\log(1+Z)`.

    Returns
    -------
    value, error : arrays of shape (len(t), len(z0)), or (len(t),) for ``z0=None``; floats
    when ``t`` (and ``z0``) are scalars.
    """
    model = _check_model(beta, d, r, activation, m1, m2, attention, sigma)
    ts = check_times("t", t)
    tol = check_tol(tol)
    h = check_real("h", h, 0.0, 0.5, strict_min=True)
    v0 = None
    if z0 is not None:
        v0 = 1.0 + np.atleast_1d(check_real_array("z0", z0, -1.0, 1.0, strict_min=True,
                                                  strict_max=True))
        if v0.ndim != 1:
            raise ValueError("z0 must be None, a scalar or a 1-D array in (-1, 1)")
    data = _pole_data(*model)
    results = []
    for step in (h, h / 2):
        y, u = _kolmogorov_y(ts, model, data, tol, step, 1.0 if v0 is None else float(v0.min()))
        results.append(np.clip(uniform_start_average(y, u, model[1]), 0.0, 1.0) if v0 is None
                       else at_log_gaps(y, u, v0))
    value, error = results[1], np.abs(results[1] - results[0])
    if np.ndim(t) == 0 and (z0 is None or np.ndim(z0) == 0):
        return float(value.ravel()[0]), float(error.ravel()[0])
    return value, error
