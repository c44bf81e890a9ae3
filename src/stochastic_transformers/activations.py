r"""Activations of the feedforward block, defined once for the compiled kernels and the theory.

The feedforward block (:class:`stochastic_transformers.config.ModelConfig`, fields ``ff_*``)
applies :math:`\varphi` entrywise to :math:`W_1 x`.  Five activations are offered:

=============  =========================================  ======
name           :math:`\varphi(x)`                          parity
=============  =========================================  ======
``relu``       :math:`\max(x, 0)`                          none
``gelu``       :math:`x\,\Phi(x)` (:math:`\Phi` the normal  none
               distribution function)
``erf``        :math:`\operatorname{erf}(x)`               odd
``tanh``       :math:`\tanh x`                             odd
``identity``   :math:`x`                                   odd
=============  =========================================  ======

Besides :func:`phi`, the exact two-point chain needs the difference
:math:`D(x, \delta) = \varphi(x + \delta) - \varphi(x - \delta)` to the relative precision of
its result when :math:`\delta` is tiny (two tokens a distance :math:`2\delta` apart along a
Gaussian direction), which a plain subtraction would lose: :func:`phi_diff`.  For an odd
activation the sum :math:`\varphi(x+\delta) + \varphi(x-\delta) = D(\delta, x)` is small when
:math:`x` is (two tokens near antipodes), and :func:`phi_sum` computes it that way.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ._jit import JIT

#: The activations, in the order of their integer codes in the compiled kernels.
ACTIVATIONS = ("relu", "gelu", "erf", "tanh", "identity")
#: The odd ones: with an odd activation -1 stays a fixed point that can attract a pair (book chapter
#: "Feedforward blocks").
ODD_ACTIVATIONS = ("erf", "tanh", "identity")

RELU, GELU, ERF, TANH, IDENTITY = range(5)
_SQRT_HALF = math.sqrt(0.5)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
# Below a half-width of _ERF_QUAD_BELOW the plain difference would lose more than two digits
# (its relative error is about 1e-16 / delta); there the integral of exp(-t^2) is taken by
# the Gauss-Legendre rule of 6 nodes, exact for polynomials of degree 11, whose error at
# that width is far below rounding.
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(6)
_ERF_QUAD_BELOW = 0.01
# tanh: sinh(2 delta) / (cosh(x + delta) cosh(x - delta)) overflows beyond this size.
_TANH_FORMULA_BELOW = 300.0


def code(name: str) -> int:
    """The integer code of an activation (its index in :data:`ACTIVATIONS`)."""
    return ACTIVATIONS.index(name)


@nb.njit(**JIT)
def phi(act, x):
    r""":math:`\varphi(x)` for the activation of code ``act``."""
    if act == RELU:
        return x if x > 0.0 else 0.0
    if act == GELU:
        return 0.5 * x * math.erfc(-x * _SQRT_HALF)
    if act == ERF:
        return math.erf(x)
    if act == TANH:
        return math.tanh(x)
    return x


@nb.njit(**JIT)
def _erf_diff(x, delta):
    r""":math:`\operatorname{erf}(x+\delta) - \operatorname{erf}(x-\delta)`, to relative precision.

    Small :math:`|\delta|`: the integral :math:`\frac{2}{\sqrt\pi}\int_{x-\delta}^{x+\delta}
    e^{-t^2}dt` by Gauss-Legendre; otherwise a difference of complementary error functions
    on the side of :math:`|x|` (erf is odd, so :math:`D(x,\delta) = D(|x|,\delta)`), which
    keeps the precision of the tails.
    """
    x = abs(x)
    if abs(delta) < _ERF_QUAD_BELOW:
        total = 0.0
        for k in range(_GL_NODES.size):
            t = x + delta * _GL_NODES[k]
            total += _GL_WEIGHTS[k] * math.exp(-t * t)
        return _TWO_OVER_SQRT_PI * delta * total
    return math.erfc(x - delta) - math.erfc(x + delta)


@nb.njit(**JIT)
def phi_diff(act, x, delta):
    r""":math:`D(x,\delta) = \varphi(x+\delta) - \varphi(x-\delta)`, without cancellation.

    ReLU piecewise (exact), identity :math:`2\delta`, tanh through
    :math:`\sinh 2\delta / (\cosh(x+\delta)\cosh(x-\delta))`, erf by :func:`_erf_diff`, and GELU
    as :math:`x[\Phi(x+\delta) - \Phi(x-\delta)] + \delta[\Phi(x+\delta) + \Phi(x-\delta)]`
    with the first bracket from :func:`_erf_diff`.
    """
    if act == RELU:
        a = abs(delta)
        if x >= a:
            return 2.0 * delta
        if x <= -a:
            return 0.0
        return x + a if delta > 0.0 else -(x + a)
    if act == IDENTITY:
        return 2.0 * delta
    if act == TANH:
        if abs(x) + abs(delta) < _TANH_FORMULA_BELOW:
            return math.sinh(2.0 * delta) / (math.cosh(x + delta) * math.cosh(x - delta))
        return math.tanh(x + delta) - math.tanh(x - delta)
    if act == ERF:
        return _erf_diff(x, delta)
    # GELU
    big_phi_sum = 0.5 * (math.erfc(-(x + delta) * _SQRT_HALF) + math.erfc(-(x - delta) * _SQRT_HALF))
    big_phi_diff = 0.5 * _erf_diff(x * _SQRT_HALF, delta * _SQRT_HALF)
    return x * big_phi_diff + delta * big_phi_sum


@nb.njit(**JIT)
def phi_sum(act, x, delta):
    r""":math:`\varphi(x+\delta) + \varphi(x-\delta)`; for an odd activation computed as
    :math:`D(\delta, x)`, so that it keeps its relative precision when :math:`x` is tiny."""
    if act == ERF or act == TANH or act == IDENTITY:
        return phi_diff(act, delta, x)
    return phi(act, x + delta) + phi(act, x - delta)


#: Below this |delta| the difference phi(x + delta) - phi(x - delta) would lose more than two
#: of its digits to cancellation (relative error about 1e-16 / |delta| for a smooth phi);
#: :func:`phi_pair` then takes :func:`phi_diff` (and, for an odd activation, the sum by
#: :func:`phi_sum` below the same |x|).
PAIR_PLAIN_FROM = 0.01


@nb.njit(**JIT)
def phi_pair(act, x, delta):
    r"""``(phi(x + delta) + phi(x - delta), phi(x + delta) - phi(x - delta))``, each to its own
    relative precision, for about the cost of two plain evaluations.

    erf from two complementary error functions at :math:`|x| \mp \delta` (erf is odd, so the
    difference is even in x and the sum odd), which keeps the tails; tanh through
    :math:`\tanh a \pm \tanh b = \sinh(a \pm b)/(\cosh a\cosh b)`; the others plainly.  The
    stable forms (:func:`phi_diff`, :func:`phi_sum`) take over where a result is small:
    :math:`|\delta|` or, for an odd activation, :math:`|x|` below :data:`PAIR_PLAIN_FROM`.
    """
    odd = act == ERF or act == TANH or act == IDENTITY
    if abs(delta) < PAIR_PLAIN_FROM or (odd and abs(x) < PAIR_PLAIN_FROM):
        return phi_sum(act, x, delta), phi_diff(act, x, delta)
    if act == ERF:
        a = abs(x)
        upper = math.erfc(a - delta)
        lower = math.erfc(a + delta)
        total = 2.0 - upper - lower
        return (total if x >= 0.0 else -total), upper - lower
    if act == TANH and abs(x) + abs(delta) < _TANH_FORMULA_BELOW:
        den = math.cosh(x + delta) * math.cosh(x - delta)
        return math.sinh(2.0 * x) / den, math.sinh(2.0 * delta) / den
    plus = phi(act, x + delta)
    minus = phi(act, x - delta)
    return plus + minus, plus - minus


@nb.njit(**JIT)
def _phi_array(act, x, out):
    flat_x = x.ravel()
    flat_out = out.ravel()
    for k in range(flat_x.size):
        flat_out[k] = phi(act, flat_x[k])


def evaluate(name: str, x) -> np.ndarray:
    r""":math:`\varphi` of the activation ``name`` entrywise on an array (the compiled
    :func:`phi`, so that the theory integrates the very function the simulator applies)."""
    x = np.ascontiguousarray(x, dtype=float)
    out = np.empty_like(x)
    _phi_array(code(name), x, out)
    return out
