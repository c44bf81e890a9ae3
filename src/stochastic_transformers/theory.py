r"""Exact two-token theory of the depth limit (N = 2, :math:`B = Q^\top K = I`).

With two tokens the overlap :math:`Z_t = \langle Y^1_t, Y^2_t\rangle` of the limit
SDE (Theorem 1) is a closed diffusion on :math:`[-1, 1]` (Lemma 4 of the paper):

.. math::

    dZ = a(Z)\,dt + b(Z)\,dB_t,

with, for unnormalised attention (USA),

.. math::

    a(z) = \tfrac{\sigma^2}{4}(1-z^2)\bigl(2(d-2)e^{\beta(1+z)}
           - z(e^{2\beta}+e^{2\beta z})\bigr),\qquad
    b(z) = \sigma(1-z^2)\sqrt{(e^{2\beta}+e^{2\beta z})/2},

and, for softmax attention (SA), :math:`a` and :math:`b^2` multiplied by
:math:`m(z) = 4/(e^\beta+e^{\beta z})^2`.  Both ends are inaccessible; +1 (one
cluster) always attracts, -1 (antipodal pair) attracts iff
:math:`d-2 < \cosh 2\beta` (Theorem 2).

Everything about the long-time outcome follows from the scale function.  Since
:math:`2a/b^2 = [(d-2)\,\mathrm{sech}(\beta(1-z)) - z]/(1-z^2)` does not depend on
:math:`\sigma` nor on the attention type, neither does the outcome law.  In the
angle :math:`\theta = \arccos z \in [0, \pi]` between the tokens the scale
density is

.. math::

    h(\theta) = \exp\bigl((d-2)J(\theta)\bigr),\qquad
    J(\theta) = \int_{\pi/2}^{\theta}
        \frac{d\varphi}{\sin\varphi\,\cosh(\beta(1-\cos\varphi))},

and, with :math:`H(\theta) = \int_0^\theta h`,
:math:`P(Z_t \to -1 \mid \theta_0) = H(\theta_0)/H(\pi)`.  Splitting off the
endpoint behaviour,

.. math::

    h(\theta) = \sin(\theta/2)^{d-2}\,\cos(\theta/2)^{-\kappa}\,
                e^{(d-2)R(\theta)},\qquad \kappa = (d-2)\,\mathrm{sech}(2\beta),

    R(\theta) = \int_{\pi/2}^{\theta}\frac{r(\varphi)}{\sin\varphi}\,d\varphi,\quad
    r(\varphi) = \mathrm{sech}(\beta(1-\cos\varphi)) - \tfrac{1+\cos\varphi}{2}
                 - \mathrm{sech}(2\beta)\tfrac{1-\cos\varphi}{2},

where :math:`r/\sin` is smooth on :math:`[0,\pi]` (r vanishes at both ends).  So
:math:`h \sim \theta^{d-2}` at 0 and :math:`h \sim (\pi-\theta)^{-\kappa}` at
:math:`\pi`, integrable iff :math:`\kappa < 1`, i.e. iff -1 attracts.

Numerics: :math:`r/\sin` is replaced by an adaptive Chebyshev interpolant on
:math:`[0,\pi]` that is integrated exactly, and the integrals of :math:`h` are
Gauss-Legendre sums in variables that take the power laws out exactly (a graded
mesh near 0, where :math:`\mathrm{sech}(\beta(1-\cos\varphi))` has width
:math:`\sim\beta^{-1/2}`; :math:`u = \psi s^2` near :math:`\pi`).  All sums are done in
logarithms, so tiny angles and large ``d`` neither underflow nor overflow.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.polynomial import Chebyshev
from scipy import integrate, optimize, special

from ._validation import (ATTENTIONS, BETA_MAX, EPSILON_MAX, SIGMA_MAX, check_choice,
                          check_int, check_int_array, check_level, check_real,
                          check_real_array, check_tol)

__all__ = [
    "critical_beta",
    "critical_epsilon",
    "antipodal_attracting",
    "atanh_coefficients",
    "overlap_drift",
    "overlap_diffusion",
    "hybrid_overlap_drift",
    "hybrid_overlap_diffusion",
    "scale_density",
    "antipodal_probability",
    "escape_probability",
    "stopping_angles",
    "hybrid_antipodal_probability",
    "hybrid_step_size",
    "hybrid_antipodal_rate",
]

POLES = ("single", "antipodal")

#: Largest inverse temperature the scale-function routines evaluate (scale_density,
#: antipodal_probability, escape_probability, stopping_angles).  Two things bound it:
#: the Chebyshev series of R, whose degree grows like :math:`\beta^{1/4}` (about 60
#: terms at beta = 1, 200 at 50, 1000 at 1e4, and the fit gives up at 8192), and the
#: fixed graded rule near 0 (:func:`_lower_rule`), whose panels resolve the sech feature
#: of width :math:`\beta^{-1/2}` down to 2^-12 of the angle.  1e4 keeps both well inside
#: their range; the coefficient functions above take any beta >= 0.
SCALE_FUNCTION_BETA_MAX = BETA_MAX

_LOG2 = math.log(2.0)


def _out(x):
    """A float for a 0-d result (every array argument was a scalar), else the array."""
    return float(x) if np.ndim(x) == 0 else x


# ------------------------------------------------------------------- closed forms
def critical_beta(d):
    r"""Critical inverse temperature :math:`\beta_c(d) = \tfrac12\operatorname{arccosh}(d-2)`.

    The antipodal pair (overlap -1) attracts iff :math:`d - 2 < \cosh 2\beta`, i.e.
    iff :math:`\beta > \beta_c(d)` (Theorem 2).  For :math:`d = 3`,
    :math:`\beta_c = 0` and -1 attracts for every :math:`\beta > 0` (not at
    :math:`\beta = 0`).  For :math:`d = 2` the condition :math:`0 < \cosh 2\beta` holds
    for every :math:`\beta \ge 0`, so -1 always attracts; we return 0.0 there.

    Parameters
    ----------
    d : int or array of int
        Dimension of the sphere's ambient space, ``d >= 2``.

    Returns
    -------
    float or ndarray
    """
    d = check_int_array("d", d, 2)
    out = 0.5 * np.arccosh(np.maximum(d - 2.0, 1.0))
    return _out(out)


def critical_epsilon(beta):
    r"""Hybrid-model threshold :math:`\varepsilon_c(\beta) = \sqrt{2 e^{-\beta}}` (Proposition 1).

    Parameters
    ----------
    beta : float or array
        Inverse temperature, ``beta >= 0``.
    """
    beta = check_real_array("beta", beta, 0.0)
    return _out(np.sqrt(2.0 * np.exp(-beta)))


def antipodal_attracting(beta, d):
    r"""Whether the antipodal boundary -1 attracts: :math:`d - 2 < \cosh(2\beta)`.

    (+1, the single cluster, always attracts.)  Returns a bool, or a bool array
    broadcast over ``beta`` and ``d``.
    """
    beta = check_real_array("beta", beta, 0.0)
    d = check_int_array("d", d, 2)
    out = (d - 2.0) < np.cosh(2.0 * beta)
    return bool(out) if np.ndim(out) == 0 else out


# ------------------------------------------------------- the two-token coefficients
#: The two limits of Lemma 4 and Proposition 1 whose overlap coefficients are defined here.
OVERLAP_MODELS = ("stochastic", "hybrid")


def _atanh_coefficients(z, beta, d, attention, sigma, model="stochastic", epsilon=0.0):
    r"""Drift :math:`\mu` and diffusion :math:`\nu` of :math:`X = \operatorname{atanh} Z` at overlaps ``z``.

    The one definition of the two-token coefficients (formulas in
    :func:`atanh_coefficients`), without argument checks: :mod:`.sde` calls it at every
    Euler step and on every Kolmogorov grid after checking its arguments once.  The
    softmax forms use :math:`q = e^{\beta(z-1)} \le 1`, so nothing overflows at large
    :math:`\beta`.  ``beta``, ``d`` and ``epsilon`` may be arrays (broadcast with ``z``).
    """
    z = np.asarray(z, dtype=float)
    if model == "stochastic":
        if attention == "unnormalized":
            e2 = np.exp(2.0 * beta) + np.exp(2.0 * beta * z)
            mu = 0.25 * sigma**2 * (2.0 * (d - 2.0) * np.exp(beta * (1.0 + z)) + z * e2)
            nu = sigma * np.sqrt(0.5 * e2)
        else:
            q = np.exp(beta * (z - 1.0))
            mu = sigma**2 * (2.0 * (d - 2.0) * q + z * (1.0 + q * q)) / (1.0 + q) ** 2
            nu = sigma * np.sqrt(2.0 * (1.0 + q * q)) / (1.0 + q)
        return mu, nu
    if attention == "unnormalized":
        ebz = np.exp(beta * z)
        # math.exp for a scalar beta (the integrators' case), numpy's for an array of them.
        e_beta = math.exp(beta) if np.ndim(beta) == 0 else np.exp(beta)
        return ebz * (1.0 - 0.5 * epsilon**2 * e_beta), epsilon * ebz
    q = np.exp(beta * (z - 1.0))
    g = 2.0 * q / (1.0 + q)
    return g * (1.0 - epsilon**2 / (1.0 + q)), epsilon * g


def _overlap_drift_from_atanh(z, mu, nu):
    r"""Ito's formula back from :math:`x = \operatorname{atanh} z`: :math:`a = (1-z^2)(\mu - z\nu^2)`."""
    return (1.0 - z * z) * (mu - z * nu * nu)


def _overlap_args(z, beta, d, attention, sigma):
    """The checked arguments of the overlap diffusion's coefficients: ``(z, beta, d, sigma)``
    as arrays (z in [-1, 1], beta >= 0, integer d >= 2) and sigma in (0, SIGMA_MAX]."""
    check_choice("attention", attention, ATTENTIONS)
    return (check_real_array("z", z, -1.0, 1.0), check_real_array("beta", beta, 0.0),
            check_int_array("d", d, 2),
            check_real("sigma", sigma, 0.0, SIGMA_MAX, strict_min=True))


def split_args(beta, d, m1, m2, attention, sigma):
    """The checked parameters of a two-point split (``m1`` tokens at one point, ``m2`` at
    the other): beta in [0, 700] (the unnormalised weights overflow beyond), d >= 2,
    m1, m2 >= 1, sigma in (0, SIGMA_MAX]."""
    return (check_real("beta", beta, 0.0, 700.0), check_int("d", d, 2),
            check_int("m1", m1, 1), check_int("m2", m2, 1),
            check_choice("attention", attention, ATTENTIONS),
            check_real("sigma", sigma, 0.0, SIGMA_MAX, strict_min=True))


def _hybrid_args(z, beta, epsilon, attention):
    """The checked arguments of the hybrid model's coefficients: ``(z, beta, epsilon)``."""
    check_choice("attention", attention, ATTENTIONS)
    return (check_real_array("z", z, -1.0, 1.0), check_real_array("beta", beta, 0.0),
            check_real_array("epsilon", epsilon, 0.0, EPSILON_MAX))


def atanh_coefficients(z, beta, d, attention="softmax", sigma=1.0, *, model="stochastic",
                       epsilon=0.0):
    r"""Drift and diffusion of :math:`X = \operatorname{atanh} Z` for the two-token overlap.

    By Ito's formula, :math:`dZ = a\,dt + b\,dB` becomes :math:`dX = \mu\,dt + \nu\,dB` with
    :math:`\mu = a/(1-z^2) + z\,b^2/(1-z^2)^2` and :math:`\nu = b/(1-z^2)`, evaluated at
    :math:`z = \tanh x`.  Both :math:`a` and :math:`b` carry the factor :math:`1 - z^2`
    (the poles are fixed points), so :math:`\mu, \nu` are smooth and bounded for every
    finite :math:`\beta` and tend to constants at :math:`x \to \pm\infty`: far out, X is a
    Brownian motion with drift.  This is the form every other coefficient of the
    library is computed from (:func:`overlap_drift`, :func:`overlap_diffusion`,
    :func:`hybrid_overlap_drift`, :func:`hybrid_overlap_diffusion` by
    :math:`a = (1-z^2)(\mu - z\nu^2)`, :math:`b = (1-z^2)\nu`; the integrators of
    :mod:`stochastic_transformers.sde`; the fixed-attention table of
    :mod:`stochastic_transformers.random_attention.homogenized`).

    ``model="stochastic"`` (Lemma 4), USA:

    .. math::

        \mu = \tfrac{\sigma^2}{4}\bigl(2(d-2)e^{\beta(1+z)} + z(e^{2\beta}+e^{2\beta z})\bigr),\qquad
        \nu = \sigma\sqrt{(e^{2\beta}+e^{2\beta z})/2};

    SA: :math:`\mu` times :math:`m = 4/(e^\beta+e^{\beta z})^2` and :math:`\nu` times
    :math:`\sqrt m`, computed with :math:`q = e^{\beta(z-1)} \le 1` as
    :math:`\mu = \sigma^2(2(d-2)q + z(1+q^2))/(1+q)^2`,
    :math:`\nu = \sigma\sqrt{2(1+q^2)}/(1+q)`.

    ``model="hybrid"`` (Proposition 1 for USA; SA by the same Ito computation):
    :math:`\mu = \lambda e^{\beta z}(1 - \lambda\varepsilon^2e^\beta/2)`,
    :math:`\nu = \lambda\varepsilon e^{\beta z}` with :math:`\lambda = 1` (USA) or
    :math:`2/(e^\beta+e^{\beta z})` (SA), i.e. :math:`\lambda e^{\beta z} = 2q/(1+q)` and
    :math:`\lambda e^\beta = 2/(1+q)`.

    Parameters
    ----------
    z : float or array in [-1, 1]
    beta : float or array, >= 0
    d : int or int array, >= 2
        Enters the stochastic drift only.
    attention : {"softmax", "unnormalized"}
    sigma : float, > 0 and <= SIGMA_MAX (1e6)
        Value-matrix standard deviation (stochastic model only).
    model : {"stochastic", "hybrid"}
    epsilon : float or array, 0 to EPSILON_MAX (1e6)
        Noise amplitude of the hybrid model (ignored by the stochastic model).

    Returns
    -------
    (mu, nu) : floats, or arrays broadcast from the arguments that enter each
    """
    z, beta, d, sigma = _overlap_args(z, beta, d, attention, sigma)
    check_choice("model", model, OVERLAP_MODELS)
    epsilon = check_real_array("epsilon", epsilon, 0.0, EPSILON_MAX)
    mu, nu = _atanh_coefficients(z, beta, d, attention, sigma, model, epsilon)
    return _out(mu), _out(nu)


def overlap_drift(z, beta, d, attention="softmax", sigma=1.0):
    r"""Drift :math:`a(z)` of the two-token overlap diffusion (Lemma 4).

    USA: :math:`a(z) = \tfrac{\sigma^2}{4}(1-z^2)\bigl(2(d-2)e^{\beta(1+z)} - z(e^{2\beta}+e^{2\beta z})\bigr)`;
    SA: the same times :math:`4/(e^\beta + e^{\beta z})^2`.  Computed as
    :math:`(1-z^2)(\mu - z\nu^2)` from :func:`atanh_coefficients`, which is finite for
    every :math:`\beta` with SA.  Arguments as in :func:`atanh_coefficients`.
    """
    z, beta, d, sigma = _overlap_args(z, beta, d, attention, sigma)
    mu, nu = _atanh_coefficients(z, beta, d, attention, sigma)
    return _out(_overlap_drift_from_atanh(z, mu, nu))


def overlap_diffusion(z, beta, d, attention="softmax", sigma=1.0):
    r"""Diffusion coefficient :math:`b(z)` (not squared) of the overlap diffusion.

    USA: :math:`b(z) = \sigma(1-z^2)\sqrt{(e^{2\beta}+e^{2\beta z})/2}`;
    SA: the same times :math:`2/(e^\beta + e^{\beta z})`.  Computed as :math:`(1-z^2)\nu`
    from :func:`atanh_coefficients`.  ``d`` is validated but does not enter.
    """
    z, beta, d, sigma = _overlap_args(z, beta, d, attention, sigma)
    _, nu = _atanh_coefficients(z, beta, d, attention, sigma)
    return _out((1.0 - z * z) * nu + 0.0 * d)  # broadcast with d like the drift


def two_cluster_weights(z, beta, m1, m2, attention="softmax"):
    r"""Attention weights of a two-point configuration: ``(p1, q1, p2, q2)``.

    ``m1`` tokens sit at :math:`y_1`, ``m2`` at :math:`y_2`, :math:`z = \langle y_1, y_2\rangle`,
    :math:`B = I`.  A token of cluster 1 receives :math:`A_1 = p_1 y_1 + q_1 y_2`, one of
    cluster 2 :math:`A_2 = p_2 y_2 + q_2 y_1`, with

    * softmax: :math:`p_1 = m_1 e^\beta / (m_1 e^\beta + m_2 e^{\beta z})`, :math:`q_1 = 1 - p_1`,
      and the same with 1 and 2 exchanged;
    * unnormalised (:math:`N = m_1 + m_2`): :math:`p_1 = m_1 e^\beta / N`,
      :math:`q_1 = m_2 e^{\beta z} / N`, :math:`p_2 = m_2 e^\beta / N`, :math:`q_2 = m_1 e^{\beta z}/N`.

    The softmax weights are computed from :math:`e^{\beta(z-1)}` so that no beta overflows;
    unnormalised weights need :math:`\beta \le 700` (:math:`e^\beta` stays finite).

    Parameters
    ----------
    z : float or array in [-1, 1]
    beta : float, >= 0 (<= 700 for unnormalised attention)
    m1, m2 : int, >= 1
        Numbers of tokens at the two points (a cluster of 0 tokens has no weights).
    attention : {"softmax", "unnormalized"}
    """
    z = check_real_array("z", z, -1.0, 1.0)
    check_choice("attention", attention, ATTENTIONS)
    beta = check_real("beta", beta, 0.0, None if attention == "softmax" else 700.0)
    return _two_cluster_weights(z, beta, check_int("m1", m1, 1), check_int("m2", m2, 1),
                                attention)


def _two_cluster_weights(z, beta, m1, m2, attention):
    """:func:`two_cluster_weights` of checked arguments (``z`` a float array)."""
    if attention == "softmax":
        r = np.exp(beta * (z - 1.0))          # e^{beta z} / e^{beta}, in (0, 1]
        p1 = m1 / (m1 + m2 * r)
        p2 = m2 / (m2 + m1 * r)
        return p1, 1.0 - p1, p2, 1.0 - p2
    n = m1 + m2
    eb, ez = math.exp(beta), np.exp(beta * z)
    return m1 * eb / n, m2 * ez / n, m2 * eb / n, m1 * ez / n


def two_cluster_coefficients(z, beta, d, m1, m2, *, attention="softmax", sigma=1.0):
    r"""Drift and squared diffusion of the overlap of a two-cluster configuration.

    Tokens at one point receive the same update, so ``m1`` tokens at :math:`y_1` and
    ``m2`` at :math:`y_2` stay a two-point configuration, and in the limit of
    Theorem 1 its overlap :math:`Z = \langle y_1, y_2\rangle` is a closed diffusion
    :math:`dZ = \mu(Z)\,dt + s(Z)\,dB`, by Ito's formula with
    :math:`\operatorname{tr}(P_{y_1}P_{y_2}) = d - 2 + z^2`.  This reduction is the
    companion's, not the paper's (the book presents it in the chapter "Many tokens",
    section "Two clusters, exactly"); the tests check it against Lemma 4 and against
    one-step moments of the discrete model.  With the weights of :func:`two_cluster_weights`,
    :math:`a_{11} = |A_1|^2 = p_1^2 + q_1^2 + 2p_1q_1 z`, :math:`a_{22}` likewise and
    :math:`a_{12} = \langle A_1, A_2\rangle = (p_1p_2 + q_1q_2)z + p_1q_2 + q_1p_2`:

    .. math::

        \mu(z) = \sigma^2\Bigl[\tfrac{1-d}{2}(a_{11}+a_{22})\,z + a_{12}\,(d-2+z^2)\Bigr],
        \qquad
        s^2(z) = \sigma^2 (1-z^2)\,(a_{11} + a_{22} - 2 z\, a_{12}).

    ``m1 = m2`` gives Lemma 4's two-token coefficients exactly (:func:`overlap_drift`,
    :func:`overlap_diffusion`).

    Parameters
    ----------
    z : float or array in [-1, 1]
    beta : float, >= 0
    d : int, >= 2
    m1, m2 : int, >= 1
        Numbers of tokens at the two points.
    attention : {"softmax", "unnormalized"}
    sigma : float, > 0 and <= SIGMA_MAX (1e6)

    Returns ``(drift, diffusion_squared)``, floats or arrays shaped like ``z``.
    """
    z = check_real_array("z", z, -1.0, 1.0)
    beta, d, m1, m2, attention, sigma = split_args(beta, d, m1, m2, attention, sigma)
    p1, q1, p2, q2 = _two_cluster_weights(z, beta, m1, m2, attention)
    a11 = p1 * p1 + q1 * q1 + 2.0 * p1 * q1 * z
    a22 = p2 * p2 + q2 * q2 + 2.0 * p2 * q2 * z
    a12 = (p1 * p2 + q1 * q2) * z + p1 * q2 + q1 * p2
    return kernel_coefficients(z, d, a11, a22, a12, scale=sigma**2)


def kernel_coefficients(z, d, a11, a22, a12, scale=1.0, one_minus_z2=None):
    r"""Drift and squared diffusion of the overlap :math:`Z = \langle Y_1, Y_2\rangle` of two
    points of :math:`S^{d-1}` moved by :math:`dY_i = P_{Y_i}dM_i - \tfrac{d-1}{2}a_{ii}Y_i\,dt`
    with :math:`d\langle M_i, M_k\rangle = a_{ik}I\,dt` (the kernel times ``scale``):

    .. math::

        \mu(z) = \tfrac{1-d}{2}(a_{11}+a_{22})\,z + a_{12}\,(d-2+z^2),\qquad
        s^2(z) = (1-z^2)\,(a_{11} + a_{22} - 2 z\, a_{12}),

    by Ito's formula with :math:`\operatorname{tr}(P_{Y_1}P_{Y_2}) = d - 2 + z^2` and
    :math:`|Y_2 - zY_1|^2 = 1 - z^2`.  Every two-point limit of the book is this with its
    own kernel (:func:`two_cluster_coefficients`, the feedforward block's, the other
    normalisations'); arguments are not checked here.  ``one_minus_z2`` may give
    :math:`1 - z^2` at full relative precision near a pole (e.g. :math:`v(2 - v)` at
    :math:`z = -1 + v`).
    """
    gap = (1.0 - z * z) if one_minus_z2 is None else one_minus_z2
    drift = scale * (0.5 * (1.0 - d) * (a11 + a22) * z + a12 * (d - 2.0 + z * z))
    diff2 = scale * gap * (a11 + a22 - 2.0 * z * a12)
    return _out(drift), _out(diff2)


def hybrid_overlap_drift(z, beta, epsilon, attention="unnormalized"):
    r"""Drift of the overlap in the hybrid limit (Proposition 1).

    USA (the paper's case):
    :math:`a(z) = e^{\beta z}(1-z^2)\,(1 - \varepsilon^2 e^\beta/2 - \varepsilon^2 z e^{\beta z})`.

    SA (derived here by the same Ito computation; two-token softmax attention is
    USA times :math:`\lambda(z) = 2/(e^\beta+e^{\beta z})`, and :math:`F` is quadratic):
    :math:`a(z) = e^{\beta z}(1-z^2)\,\bigl(\lambda - \lambda^2\varepsilon^2(e^\beta/2 + z e^{\beta z})\bigr)`.

    Computed as :math:`(1-z^2)(\mu - z\nu^2)` from :func:`atanh_coefficients`.
    """
    z, beta, eps = _hybrid_args(z, beta, epsilon, attention)
    mu, nu = _atanh_coefficients(z, beta, 2, attention, 1.0, "hybrid", eps)
    return _out(_overlap_drift_from_atanh(z, mu, nu))


def hybrid_overlap_diffusion(z, beta, epsilon, attention="unnormalized"):
    r"""Diffusion coefficient of the hybrid overlap: :math:`b(z) = \lambda\,\varepsilon e^{\beta z}(1-z^2)`.

    :math:`\lambda = 1` for USA (Proposition 1), :math:`2/(e^\beta+e^{\beta z})` for SA;
    :math:`(1-z^2)\nu` from :func:`atanh_coefficients`.
    """
    z, beta, eps = _hybrid_args(z, beta, epsilon, attention)
    _, nu = _atanh_coefficients(z, beta, 2, attention, 1.0, "hybrid", eps)
    return _out((1.0 - z * z) * nu)


# ------------------------------------------------------------- the smooth part R
def _lsinh(a):
    # log sinh(a) for a >= 0 without overflow; -inf at 0.
    with np.errstate(divide="ignore"):
        return a - _LOG2 + np.log(-np.expm1(-2.0 * a))


def _lcosh(a):
    a = np.abs(a)
    return a - _LOG2 + np.log1p(np.exp(-2.0 * a))


def _one_minus_sech(y):
    # 1 - sech(y) for y >= 0; the sinh form keeps relative accuracy for small y.
    y = np.asarray(y, dtype=float)
    small = y < 1.0
    ys = np.where(small, y, 0.0)
    yl = np.where(small, 1.0, y)
    with np.errstate(over="ignore"):
        s_small = 2.0 * np.sinh(0.5 * ys) ** 2 / np.cosh(ys)
    s_large = 1.0 - np.exp(-_lcosh(yl))
    return np.where(small, s_small, s_large)


def _rho(phi, beta):
    r"""The smooth function :math:`r(\varphi)/\sin\varphi` on :math:`(0, \pi)`.

    Two algebraically equal forms of :math:`r` are used, each free of cancellation
    on its half: with :math:`v = 1-\cos\varphi`, :math:`w = 1+\cos\varphi`,

    * :math:`\varphi \le \pi/2`: :math:`r = -(1-\mathrm{sech}\,\beta v) + \tfrac v2(1-\mathrm{sech}\,2\beta)`;
    * :math:`\varphi > \pi/2`: :math:`r = \mathrm{sech}(\beta(2-w)) - \mathrm{sech}(2\beta)
      - \tfrac w2(1-\mathrm{sech}\,2\beta)`, with the difference of sechs written as
      :math:`2\sinh(\beta(2-w/2))\sinh(\beta w/2)/(\cosh 2\beta\cosh(\beta(2-w)))`.
    """
    phi = np.asarray(phi, dtype=float)
    v = 2.0 * np.sin(0.5 * phi) ** 2
    w = 2.0 * np.cos(0.5 * phi) ** 2
    oms2 = float(_one_minus_sech(2.0 * beta))
    r_lo = -_one_minus_sech(beta * v) + 0.5 * v * oms2
    with np.errstate(divide="ignore"):
        log_diff = (
            _LOG2
            + _lsinh(beta * (2.0 - 0.5 * w))
            + _lsinh(0.5 * beta * w)
            - _lcosh(2.0 * beta)
            - _lcosh(beta * (2.0 - w))
        )
    r_hi = np.exp(log_diff) - 0.5 * w * oms2
    r = np.where(phi <= 0.5 * np.pi, r_lo, r_hi)
    return r / np.sin(phi)


@functools.lru_cache(maxsize=2048)
def _R_series(beta: float) -> Chebyshev:
    r"""Chebyshev series of :math:`R(\theta) = \int_{\pi/2}^\theta r/\sin` on :math:`[0, \pi]`.

    The degree doubles from 32 until the last eight coefficients of the
    interpolant of :math:`r/\sin` fall below 5e-14 of the largest one (the rounding
    plateau of the samples sits near 1e-14 of it).
    """
    if beta == 0.0:
        # sech(0) = 1 makes r identically zero.
        return Chebyshev([0.0], domain=[0.0, np.pi])
    deg = 32
    while True:
        p = Chebyshev.interpolate(_rho, deg, domain=[0.0, np.pi], args=(beta,))
        c = np.abs(p.coef)
        scale = max(c.max(), 1e-300)
        if c[-8:].max() <= 5e-14 * scale:
            break
        if deg >= 8192:  # pragma: no cover - only for beta far beyond SCALE_FUNCTION_BETA_MAX
            raise RuntimeError(f"Chebyshev fit of the scale density did not converge for beta={beta}")
        deg *= 2
    p = p.integ(lbnd=0.5 * np.pi)
    # Dropping coefficients far below rounding only speeds up evaluation.
    keep = np.nonzero(np.abs(p.coef) > 1e-17 * np.abs(p.coef).max())[0]
    p = Chebyshev(p.coef[: keep[-1] + 1], domain=[0.0, np.pi])
    return p


def _sech2b(beta):
    # sech(2 beta) = exp(-log cosh(2 beta)), finite for every beta.
    return np.exp(-_lcosh(2.0 * np.asarray(beta, dtype=float)))


# --------------------------------------------------------------- quadrature rules
def _panels(edges, n):
    x, w = np.polynomial.legendre.leggauss(n)
    nodes, weights = [], []
    for a, b in zip(edges[:-1], edges[1:]):
        nodes.append(0.5 * (b - a) * x + 0.5 * (a + b))
        weights.append(0.5 * (b - a) * w)
    return np.concatenate(nodes), np.concatenate(weights)


@functools.lru_cache(maxsize=None)
def _lower_rule():
    r"""Gauss-Legendre rule on [0, 1] for :math:`\int_0^1 t^{d-2}F(\theta t)\,dt`.

    Geometric panels :math:`[2^{-k-1}, 2^{-k}]` resolve the sech feature of width
    :math:`\beta^{-1/2}` wherever it falls (down to :math:`2^{-12}`, enough for
    :math:`\beta \le` SCALE_FUNCTION_BETA_MAX); [1/2, 1] is split in four so that the high
    powers :math:`t^{d-2}` of large ``d`` are integrated accurately.
    """
    edges = [0.0] + [2.0**-k for k in range(12, 1, -1)] + [0.5, 0.625, 0.75, 0.875, 1.0]
    t, w = _panels(edges, 16)
    return t, np.log(t), np.log(w)


@functools.lru_cache(maxsize=None)
def _upper_rule():
    r"""Gauss-Legendre rule on [0, 1] in :math:`s`, for the tail near :math:`\pi` (:math:`u = \psi s^2`)."""
    s, w = _panels([0.0, 0.25, 0.5, 0.75, 1.0], 16)
    return s, np.log(s), np.log(w)


def _logsumexp_rows(x):
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return (m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)))[..., 0]


def _lower_sum(log_theta, dm2, logF, extra=None):
    r""":math:`\log\bigl(\theta^{d-1}\sum_i w_i t_i^{d-2}F(\theta t_i)[G]\bigr)`; rows are independent problems."""
    _, log_t, log_w = _lower_rule()
    lg = dm2 * log_t + logF + log_w
    if extra is not None:
        lg = lg + extra
    return (dm2[..., 0] + 1.0) * log_theta + _logsumexp_rows(lg)


def _upper_sum(log_psi, kappa, logM, logM0, extra=None):
    r"""Log of the tail integral :math:`\int_0^\psi u^{-\kappa}M(u)[G(\pi-u)]\,du` (needs :math:`\kappa<1`).

    With :math:`u = \psi s^2`,
    :math:`\int_0^\psi u^{-\kappa}M = \psi^{1-\kappa}\bigl[M(0)/(1-\kappa)
    + \int_0^1 2s^{1-2\kappa}(M(\psi s^2)-M(0))\,ds\bigr]`: the subtracted integrand is
    :math:`O(s^{5-2\kappa})`, smooth enough for Gauss-Legendre, and the power law
    is integrated exactly.  With the weight :math:`G(\pi-u) = O(u^{d-1})` nothing
    needs subtracting.
    """
    _, log_s, log_w = _upper_rule()
    lpow = _LOG2 + (1.0 - 2.0 * kappa) * log_s + log_w
    lpsi = (1.0 - kappa[..., 0]) * log_psi
    if extra is not None:
        return lpsi + _logsumexp_rows(logM + lpow + extra)
    top = np.maximum(logM0, np.max(logM, axis=-1, keepdims=True))
    diff = logM - logM0
    # M(psi s^2) - M(0), scaled by e^{-top}, without cancellation when close.
    near = np.abs(diff) < 1.0
    with np.errstate(over="ignore"):
        term = np.where(
            near,
            np.exp(logM0 - top) * np.expm1(np.where(near, diff, 0.0)),
            np.exp(logM - top) - np.exp(logM0 - top),
        )
    total = np.exp(logM0 - top)[..., 0] / (1.0 - kappa[..., 0]) + np.sum(np.exp(lpow) * term, axis=-1)
    return lpsi + top[..., 0] + np.log(total)


@functools.lru_cache(maxsize=None)
def _fixed_angles():
    r"""The angles of the two rules' fixed nodes (:math:`\theta=\psi=\pi/2`): :math:`\varphi =
    \pi t/2` below :math:`\pi/2` and :math:`u = \pi s^2/2` (the angle :math:`\pi - u`) above."""
    t, s = _lower_rule()[0], _upper_rule()[0]
    return 0.5 * np.pi * t, 0.5 * np.pi * s * s


@functools.lru_cache(maxsize=64)
def _log_G_fixed(d: int):
    r""":math:`\log G` at the fixed nodes of the two rules."""
    phi, u = _fixed_angles()
    a = 0.5 * (d - 1)
    with np.errstate(divide="ignore"):
        low = np.log(special.betainc(a, a, np.cos(0.5 * phi) ** 2))
        up = np.log(special.betainc(a, a, np.sin(0.5 * u) ** 2))
    return low, up


@functools.lru_cache(maxsize=8)
def _fixed_vander(deg: int):
    r"""Chebyshev Vandermonde matrices at the fixed nodes, for evaluating R by one product."""
    phi, u = _fixed_angles()
    # domain [0, pi] -> window [-1, 1]
    return tuple(np.polynomial.chebyshev.chebvander(2.0 * a / np.pi - 1.0, deg)
                 for a in (phi, np.pi - u))


@functools.lru_cache(maxsize=None)
def _fixed_geometry():
    phi, u = _fixed_angles()
    return (np.log(0.5 * np.sinc(phi / (2.0 * np.pi))), np.log(np.cos(0.5 * phi)),
            np.log(np.cos(0.5 * u)), np.log(0.5 * np.sinc(u / (2.0 * np.pi))))


def _half_space_logs(beta: float, dims):
    r"""For one :math:`\beta` and an array of ``d``: :math:`\log H(\pi)` and :math:`\log\int_0^\pi hG`.

    Both integrals are split at :math:`\pi/2`; the rules' nodes are then the same for
    every (beta, d), so R is evaluated once per beta by one matrix product and
    everything else is vectorised over d.  Entries with -1 not attracting are
    returned as +inf (total) and nan (weighted).
    """
    dims = np.asarray(dims, dtype=np.int64)
    series = _R_series(float(beta))
    coef = series.coef
    deg = max(64, 1 << (len(coef) - 1).bit_length())
    v_low, v_up = _fixed_vander(deg)
    R_low = v_low[:, : len(coef)] @ coef
    R_up = v_up[:, : len(coef)] @ coef
    R_pi = float(series(np.pi))
    s2 = float(_sech2b(beta))
    lsinc_low, lcos_low, lcos_up, lsinc_up = _fixed_geometry()
    dm2 = (dims - 2.0)[:, None]
    kappa = dm2 * s2
    logF = dm2 * (lsinc_low - s2 * lcos_low + R_low)
    logM = dm2 * (lcos_up + R_up) - kappa * lsinc_up
    logM0 = dm2 * R_pi + kappa * _LOG2
    lhalf = np.full(len(dims), math.log(0.5 * np.pi))
    attracting = kappa[:, 0] < 1.0
    total = np.full(len(dims), np.inf)
    weighted = np.full(len(dims), np.nan)
    if not np.any(attracting):
        return total, weighted
    sel = attracting
    kap = np.where(sel[:, None], kappa, 0.0)[sel]
    low = _lower_sum(lhalf[sel], dm2[sel], logF[sel])
    up = _upper_sum(lhalf[sel], kap, logM[sel], logM0[sel])
    total[sel] = np.logaddexp(low, up)
    gl = np.empty((int(sel.sum()), logF.shape[1]))
    gu = np.empty((int(sel.sum()), logM.shape[1]))
    for row, d in enumerate(dims[sel]):
        gl[row], gu[row] = _log_G_fixed(int(d))
    low_g = _lower_sum(lhalf[sel], dm2[sel], logF[sel], gl)
    up_g = _upper_sum(lhalf[sel], kap, logM[sel], logM0[sel], gu)
    weighted[sel] = np.logaddexp(low_g, up_g)
    return total, weighted


def _logs_of(angle, log_angle):
    """``(log_angle, angle)`` as 1-D arrays: the logarithm given, or that of ``angle``."""
    if log_angle is None:
        log_angle = np.log(np.atleast_1d(np.asarray(angle, dtype=float)))
    log_angle = np.atleast_1d(np.asarray(log_angle, dtype=float))
    return log_angle, np.exp(log_angle)


class _Cell:
    """Scale-density data for one (beta, d), for integrals up to arbitrary angles."""

    __slots__ = ("beta", "d", "dm2", "s2", "kappa", "R", "logM0")

    def __init__(self, beta: float, d: int):
        self.beta = float(beta)
        self.d = int(d)
        self.dm2 = float(d - 2)
        self.s2 = float(_sech2b(beta))
        self.kappa = self.dm2 * self.s2
        self.R = _R_series(self.beta)
        self.logM0 = self.dm2 * float(self.R(np.pi)) + self.kappa * _LOG2

    @property
    def attracting(self) -> bool:
        return self.kappa < 1.0

    def log_F(self, phi):
        r""":math:`\log F` with :math:`h(\varphi) = \varphi^{d-2}F(\varphi)`."""
        if self.dm2 == 0.0:
            return np.zeros_like(phi)
        return self.dm2 * (
            np.log(0.5 * np.sinc(phi / (2.0 * np.pi)))
            - self.s2 * np.log(np.cos(0.5 * phi))
            + self.R(phi)
        )

    def log_M(self, u):
        r""":math:`\log M` with :math:`h(\pi - u) = u^{-\kappa} M(u)`."""
        if self.dm2 == 0.0:
            return np.zeros_like(u)
        return (
            self.dm2 * (np.log(np.cos(0.5 * u)) + self.R(np.pi - u))
            - self.kappa * np.log(0.5 * np.sinc(u / (2.0 * np.pi)))
        )

    def lower(self, theta, log_theta=None):
        r""":math:`\log\int_0^\theta h` for an array of :math:`0 < \theta \le \pi/2`.

        ``log_theta`` may be given instead of (or with) ``theta`` for angles below
        the smallest positive double: the nodes then sit at 0, where F is smooth.
        """
        log_theta, theta = _logs_of(theta, log_theta)
        t, _, _ = _lower_rule()
        logF = self.log_F(theta[:, None] * t[None, :])
        dm2 = np.full((len(theta), 1), self.dm2)
        return _lower_sum(log_theta, dm2, logF)

    def upper(self, psi, log_psi=None):
        r""":math:`\log\int_{\pi-\psi}^\pi h` for an array of :math:`0 < \psi \le \pi/2` (attracting -1).

        ``log_psi`` plays the same role as ``log_theta`` in :meth:`lower`.
        """
        log_psi, psi = _logs_of(psi, log_psi)
        s, _, _ = _upper_rule()
        logM = self.log_M(psi[:, None] * (s * s)[None, :])
        col = lambda v: np.full((len(psi), 1), v)  # noqa: E731
        return _upper_sum(log_psi, col(self.kappa), logM, col(self.logM0))

    def log_total(self) -> float:
        r""":math:`\log H(\pi)`; +inf when -1 does not attract."""
        if not self.attracting:
            return math.inf
        half = np.array([0.5 * np.pi])
        return float(np.logaddexp(self.lower(half)[0], self.upper(half)[0]))


# ------------------------------------------------------------------ scale function
def scale_density(z, beta, d):
    r"""Scale density of the overlap diffusion, unnormalised.

    .. math::

        s(z) = (1-z^2)^{-1/2}\exp\bigl(-(d-2)I(z)\bigr),\qquad
        I(z) = \int_0^z \frac{dy}{(1-y^2)\cosh(\beta(1-y))},

    normalised so that :math:`s(0) = 1`.  It is :math:`\exp(-\int_0^z 2a/b^2)` for the
    drift ``a`` and diffusion ``b`` of :func:`overlap_drift`/:func:`overlap_diffusion`,
    the same for SA and USA and for every :math:`\sigma`.  At :math:`z = \pm 1` it
    is ``inf`` (or 0 at +1 when d > 3).

    Parameters
    ----------
    z : float or array in [-1, 1]
    beta : float, 0 <= beta <= SCALE_FUNCTION_BETA_MAX
    d : int >= 2
    """
    z = check_real_array("z", z, -1.0, 1.0)
    beta = check_real("beta", beta, 0.0, SCALE_FUNCTION_BETA_MAX)
    d = check_int("d", d, 2)
    cell = _Cell(beta, d)
    # s(z) dz = h(theta) dtheta with z = cos(theta), so s = h / sin(theta):
    # log s = (d-3) log sin(theta/2) - (kappa+1) log cos(theta/2) + (d-2) R - log 2,
    # with sin(theta/2) = sqrt((1-z)/2) and cos(theta/2) = sqrt((1+z)/2) exact at both ends.
    sin_half = np.sqrt(0.5 * (1.0 - z))
    cos_half = np.sqrt(0.5 * (1.0 + z))
    theta = 2.0 * np.arcsin(np.minimum(sin_half, 1.0))
    with np.errstate(divide="ignore"):
        logs = (
            special.xlogy(d - 3.0, sin_half)
            - special.xlogy(cell.kappa + 1.0, cos_half)
            + cell.dm2 * cell.R(theta)
        )
    # Normalise to s(0) = 1 (sin = cos = 1/sqrt 2 and R(pi/2) = 0 there).
    logs0 = -0.5 * _LOG2 * ((d - 3.0) - (cell.kappa + 1.0))
    return _out(np.exp(logs - logs0))


def _theta_of(z0):
    # Angles from overlaps, accurate near both ends: theta = 2 asin(sqrt((1-z)/2)).
    theta = 2.0 * np.arcsin(np.sqrt(np.clip(0.5 * (1.0 - z0), 0.0, 1.0)))
    psi = 2.0 * np.arcsin(np.sqrt(np.clip(0.5 * (1.0 + z0), 0.0, 1.0)))
    return theta, psi


def _prob_given(cell: _Cell, z0):
    theta, psi = _theta_of(z0)
    out = np.empty_like(theta)
    if not cell.attracting:
        out[:] = 0.0
        out[z0 == -1.0] = 1.0  # -1 itself is a fixed point of the SDE
        return out
    ltot = cell.log_total()
    lo = (theta <= 0.5 * np.pi) & (theta > 0.0)
    hi = (theta > 0.5 * np.pi) & (psi > 0.0)
    out[theta == 0.0] = 0.0
    out[psi == 0.0] = 1.0
    if np.any(lo):
        out[lo] = np.exp(cell.lower(theta[lo]) - ltot)
    if np.any(hi):
        out[hi] = -np.expm1(cell.upper(psi[hi]) - ltot)
    return out


def antipodal_probability(beta, d, z0=None):
    r"""Probability that the limit overlap diffusion ends antipodal (:math:`Z_t \to -1`).

    From overlap :math:`z_0 = \cos\theta_0`,

    .. math::

        P(\text{antipodal} \mid z_0) = \frac{S(1)-S(z_0)}{S(1)-S(-1)}
                                   = \frac{H(\theta_0)}{H(\pi)},

    with the scale density :math:`h` of the module docstring; it is exactly 0 when
    -1 does not attract (:math:`d-2 \ge \cosh 2\beta`, then :math:`H(\pi)=\infty`).
    At the fixed points, :math:`z_0 = 1` gives 0 and :math:`z_0 = -1` gives 1.

    With ``z0=None`` it is averaged over independent uniform tokens on
    :math:`S^{d-1}`, whose angle has density :math:`\propto \sin^{d-2}\theta`:

    .. math::

        \bar P = \frac{\int_0^\pi h(\theta)G(\theta)\,d\theta}{\int_0^\pi h},\qquad
        G(\theta) = P(\theta_0 > \theta) = I_{\cos^2(\theta/2)}\bigl(\tfrac{d-1}2, \tfrac{d-1}2\bigr)

    (integration by parts; :math:`I` is the regularized incomplete beta function).
    The result does not depend on :math:`\sigma` nor on SA/USA.  Checks:
    :math:`d = 2` gives :math:`h = 1`, :math:`P = \theta_0/\pi` and :math:`\bar P = 1/2`.

    Parameters
    ----------
    beta : float or array, 0 <= beta <= SCALE_FUNCTION_BETA_MAX
    d : int or int array, >= 2
    z0 : None, float or array in [-1, 1]
        Initial overlap; broadcast with ``beta`` and ``d``.

    Returns
    -------
    float or ndarray
        Accurate to about 1e-12 absolute (tested against direct quadrature of the
        scale density).
    """
    beta = check_real_array("beta", beta, 0.0, SCALE_FUNCTION_BETA_MAX)
    d = check_int_array("d", d, 2)
    if z0 is None:
        bb, dd = np.broadcast_arrays(beta, d)
        out = np.empty(bb.shape)
        res, fb, fd = out.reshape(-1), bb.ravel(), dd.ravel()
        # One pass per distinct beta, vectorised over its dimensions.
        ub, inv = np.unique(fb, return_inverse=True)
        for k, b in enumerate(ub):
            sel = np.nonzero(inv.ravel() == k)[0]
            total, weighted = _half_space_logs(float(b), fd[sel])
            res[sel] = np.where(np.isfinite(total), np.exp(weighted - total), 0.0)
        return _out(out)
    z0 = check_real_array("z0", z0, -1.0, 1.0)
    bb, dd, zz = np.broadcast_arrays(beta, d, z0)
    out = np.empty(bb.shape)
    flat_b, flat_d, flat_z = bb.ravel(), dd.ravel(), zz.ravel()
    res = out.reshape(-1)
    # Group the elements by (beta, d) so that each cell's data is built once.
    keys = np.stack([flat_b, flat_d.astype(float)], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    for k, (b, dv) in enumerate(uniq):
        sel = inv == k
        res[sel] = _prob_given(_Cell(b, int(dv)), flat_z[sel])
    return _out(out)


# ------------------------------------------------------- poles: escape and stopping
def _theta_tol(tol):
    # 1 - cos(theta) = tol  <=>  theta = 2 asin(sqrt(tol / 2)).
    return 2.0 * math.asin(math.sqrt(0.5 * tol))


def _log_escape(cell: _Cell, angle, tol, pole):
    """log of the escape probability for an array of angles below the boundary."""
    a_tol = np.array([_theta_tol(tol)])
    if pole == "single":
        return cell.lower(angle) - cell.lower(a_tol)[0]
    return cell.upper(angle) - cell.upper(a_tol)[0]


def escape_probability(angle, beta, d, tol=1e-3, pole="single"):
    r"""Probability that the limit diffusion near a pole ever reaches that pole's boundary.

    The classification of the paper calls the pair *together* when
    :math:`1-\cos\theta \le` ``tol`` and *antipodal* when :math:`1+\cos\theta \le` ``tol``.
    For the limit diffusion (not the discrete model), with :math:`H` its scale
    function in the angle,

    * ``pole="single"``: ``angle`` is :math:`\theta`, the boundary is
      :math:`\theta_{tol}` with :math:`1-\cos\theta_{tol} = tol`, and
      :math:`P = H(\theta)/H(\theta_{tol})` (as :math:`\theta\to0`,
      :math:`P \sim (\theta/\theta_{tol})^{d-1}`);
    * ``pole="antipodal"``: ``angle`` is :math:`\psi = \pi-\theta`, and
      :math:`P = \int_{\pi-\psi}^{\pi} h / \int_{\pi-\psi_{tol}}^{\pi} h`
      (:math:`\sim (\psi/\psi_{tol})^{1-\kappa}`) when -1 attracts, else 1.

    Angles at or beyond the boundary give 1; angle 0 (the pole itself, a fixed
    point of the SDE) gives 0.

    Parameters
    ----------
    angle : float or array in [0, pi]
    beta : float, 0 <= beta <= SCALE_FUNCTION_BETA_MAX
    d : int >= 2
    tol : float in (0, 1)
    pole : {"single", "antipodal"}
    """
    angle = check_real_array("angle", angle, 0.0, math.pi)
    beta = check_real("beta", beta, 0.0, SCALE_FUNCTION_BETA_MAX)
    d = check_int("d", d, 2)
    tol = check_tol(tol)
    check_choice("pole", pole, POLES)
    cell = _Cell(beta, d)
    flat = np.atleast_1d(angle).ravel()
    out = np.ones(flat.shape)
    if pole == "antipodal" and not cell.attracting:
        out[flat == 0.0] = 0.0
        return _out(out.reshape(np.shape(angle)))
    inside = (flat < _theta_tol(tol)) & (flat > 0.0)
    out[flat == 0.0] = 0.0
    if np.any(inside):
        out[inside] = np.exp(_log_escape(cell, flat[inside], tol, pole))
    return _out(out.reshape(np.shape(angle)))


def _solve_log_angle(log_int, slope, log_target, x_hi):
    r"""Solve :math:`\log\int_0^{e^x}(\dots) = ` target for x (the log of an angle).

    ``log_int(x)`` is increasing and behaves like ``slope * x + const`` for
    :math:`x\to-\infty`; a Newton-like jump from that power law gives a bracket
    that is then refined by Brent's method.
    """
    f = lambda x: log_int(x) - log_target  # noqa: E731
    f_hi = f(x_hi)
    x = x_hi - f_hi / slope
    step = 1.0
    while f(x) > 0.0:
        x -= step
        step *= 2.0
    return optimize.brentq(f, x, x_hi, xtol=1e-13, rtol=4 * np.finfo(float).eps, maxiter=200)


def stopping_angles(beta, d, tol=1e-3, level=1e-6, log=False):
    r"""Angles below which a trajectory of the limit diffusion may be stopped.

    Returns ``(theta_stop, psi_stop)`` such that
    ``escape_probability(theta_stop, beta, d, tol, "single") == level`` and
    ``escape_probability(psi_stop, beta, d, tol, "antipodal") == level``: below
    these angles the limit diffusion (not the discrete model; the bound is a
    statement about the SDE) reaches the classification boundary of its pole
    with probability less than ``level``.  ``psi_stop`` is 0.0 when -1 does not
    attract (escape is then certain: never stop there).

    Near :math:`\beta_c` the antipodal exponent :math:`1-\kappa` tends to 0 and
    :math:`\psi_{stop} \approx \psi_{tol}\,\mathrm{level}^{1/(1-\kappa)}` becomes
    astronomically small; the root is found on :math:`\log\psi` from the exact
    small-angle form :math:`\log\int_0^\psi = (1-\kappa)\log\psi + \log(\dots)`, so
    it is resolved for any value.  If it is below the smallest positive double,
    the returned float is 0.0 (same meaning: never stop there); ``log=True``
    returns the natural logarithms instead (``-inf`` for "never").

    Parameters
    ----------
    beta : float, 0 <= beta <= SCALE_FUNCTION_BETA_MAX
    d : int >= 2
    tol : float in (0, 1)
    level : float in (0, 1)
    log : bool
    """
    beta = check_real("beta", beta, 0.0, SCALE_FUNCTION_BETA_MAX)
    d = check_int("d", d, 2)
    tol = check_tol(tol)
    level = check_level("level", level)
    cell = _Cell(beta, d)
    x_tol = math.log(_theta_tol(tol))
    lt = math.log(level)

    def low(x):
        return float(cell.lower(None, x)[0])

    x_theta = _solve_log_angle(low, d - 1.0, lt + low(x_tol), x_tol)
    if cell.attracting:

        def up(x):
            return float(cell.upper(None, x)[0])

        x_psi = _solve_log_angle(up, 1.0 - cell.kappa, lt + up(x_tol), x_tol)
    else:
        x_psi = -math.inf
    if log:
        return x_theta, x_psi
    return math.exp(x_theta), math.exp(x_psi)


# --------------------------------------------------------------------- hybrid model
def _ei_near0(log_y, sign):
    r""":math:`\mathrm{Ei}(\pm y)` from :math:`\log y`; the series :math:`\gamma + \log y \pm y` once y < 1e-8,
    so that y underflowing to 0 (|x| in the hundreds) still gives the right logarithm."""
    y = np.exp(log_y)
    small = log_y < math.log(1e-8)
    exact = special.expi(sign * np.where(small, 1.0, y))
    return np.where(small, np.euler_gamma + log_y + sign * y, exact)


def _hybrid_softmax_log_scale(x, beta, k):
    r""":math:`\Lambda(x) = \int_0^x g(\tanh y)\,dy`, :math:`g(z) = (k-1)e^{\beta(1-z)} + k`, :math:`k = \varepsilon^{-2}`.

    :math:`g = 2\mu/\nu^2` for the SA hybrid overlap in :math:`x = \mathrm{atanh}\,z`, and the
    scale density is :math:`e^{-\Lambda}`.  In z,
    :math:`\int_0^z \frac{e^{-\beta w}}{1-w^2}dw = \tfrac12\bigl[e^{-\beta}(\mathrm{Ei}(\beta)
    - \mathrm{Ei}(\beta(1-z))) + e^{\beta}(\mathrm{Ei}(-\beta(1+z)) - \mathrm{Ei}(-\beta))\bigr]`.
    """
    x = np.asarray(x, dtype=float)
    if beta == 0.0:
        return (2.0 * k - 1.0) * x
    # log(1 -+ tanh x) = log 2 - log(1 + e^{+-2x}), finite for every x.
    log_one_m = _LOG2 - np.logaddexp(0.0, 2.0 * x)
    log_one_p = _LOG2 - np.logaddexp(0.0, -2.0 * x)
    q = 0.5 * (
        math.exp(-beta) * (special.expi(beta) - _ei_near0(math.log(beta) + log_one_m, 1.0))
        + math.exp(beta) * (_ei_near0(math.log(beta) + log_one_p, -1.0) - special.expi(-beta))
    )
    return (k - 1.0) * math.exp(beta) * q + k * x


def _hybrid_softmax_prob(beta, eps, z0, d):
    r"""SA hybrid: :math:`P(Z\to-1)` from each z0 (array) or, with ``z0=None``, averaged."""
    plus_attr = eps**2 < 2.0
    minus_attr = eps**2 > 1.0 + math.exp(-2.0 * beta)
    if not minus_attr or not plus_attr:
        value = 0.0 if not minus_attr else 1.0
        return value if z0 is None else np.full(np.shape(z0), value)
    k = 1.0 / eps**2
    # g vanishes at z*, where e^{-Lambda} peaks: e^{beta(1-z*)} = k/(1-k).
    x_star = math.atanh(1.0 - math.log(k / (1.0 - k)) / beta)
    lam_star = float(_hybrid_softmax_log_scale(x_star, beta, k))
    f = lambda x: math.exp(-(float(_hybrid_softmax_log_scale(x, beta, k)) - lam_star))  # noqa: E731
    opts = dict(epsabs=0.0, epsrel=1e-11, limit=400)
    left = integrate.quad(f, -np.inf, x_star, **opts)[0]
    right = integrate.quad(f, x_star, np.inf, **opts)[0]
    total = left + right
    if z0 is None:
        a = 0.5 * (d - 1)
        # Integration by parts: E[int_{X0}^inf f] = int f(x) P(atanh Z0 < x) dx.
        cdf = lambda x: special.betainc(a, a, special.expit(2.0 * x))  # noqa: E731
        num = integrate.quad(lambda x: f(x) * cdf(x), -np.inf, x_star, **opts)[0]
        num += integrate.quad(lambda x: f(x) * cdf(x), x_star, np.inf, **opts)[0]
        return num / total
    out = np.empty(np.shape(z0))
    flat, res = np.ravel(z0), out.reshape(-1)
    for i, z in enumerate(flat):
        if abs(z) == 1.0:
            res[i] = 1.0 if z < 0 else 0.0
            continue
        x0 = math.atanh(z)
        if x0 >= x_star:
            res[i] = integrate.quad(f, x0, np.inf, **opts)[0] / total
        else:
            res[i] = (right + integrate.quad(f, x0, x_star, **opts)[0]) / total
    return out


def hybrid_antipodal_probability(beta, epsilon, d=3, z0=None, attention="unnormalized"):
    r"""Probability of the antipodal outcome in the hybrid limit (two tokens).

    USA (Proposition 1).  In :math:`x = \mathrm{atanh}\,Z` the SDE of
    :func:`hybrid_overlap_drift` becomes, after Ito's formula,
    :math:`dX = e^{\beta Z}\bigl[(1-\varepsilon^2e^\beta/2)\,dt + \varepsilon\,dB\bigr]`, so
    :math:`2\mu/\nu^2 = (2/\varepsilon^2 - e^\beta)e^{-\beta z}` has one sign on the
    whole line.  The scale density :math:`\exp(-\int 2\mu/\nu^2\,dx)` is therefore
    integrable at exactly one end: at :math:`+\infty` (single cluster) iff
    :math:`\varepsilon^2 < 2e^{-\beta}`, at :math:`-\infty` (antipodal) iff
    :math:`\varepsilon^2 > 2e^{-\beta}`.  The exit probability
    :math:`(S(1)-S(z_0))/(S(1)-S(-1))` is then exactly 0 or 1 for every
    :math:`z_0 \in (-1, 1)` and every ``d``: Proposition 1's "almost surely", with
    nothing in between.  At :math:`\varepsilon = \varepsilon_c` the drift in x
    vanishes (a time-changed Brownian motion, which never settles); we return 0
    there, as for :math:`\varepsilon = 0` (the deterministic flow, which clusters).

    SA (an extension, derived here by the same Ito computation; two-token softmax
    attention is USA times :math:`\lambda = 2/(e^\beta+e^{\beta z})`):
    :math:`2\mu/\nu^2 = (1/\varepsilon^2-1)e^{\beta(1-z)} + 1/\varepsilon^2` changes sign;
    +1 attracts iff :math:`\varepsilon^2 < 2`, -1 iff :math:`\varepsilon^2 > 1+e^{-2\beta}`,
    and in between the probability is strictly between 0 and 1 (quadrature of the
    scale density, relative accuracy about 1e-10).

    Parameters
    ----------
    beta : float, 0 <= beta <= 700
    epsilon : float, 0 to EPSILON_MAX (1e6)
    d : int >= 2
        Only used for ``z0=None`` (uniform initial tokens on :math:`S^{d-1}`); the
        hybrid overlap SDE does not depend on d.
    z0 : None, float or array in [-1, 1]
        At the fixed points, ``z0 = -1`` gives 1 and ``z0 = 1`` gives 0.
    attention : {"unnormalized", "softmax"}
    """
    beta = check_real("beta", beta, 0.0, 700.0)
    eps = check_real("epsilon", epsilon, 0.0, EPSILON_MAX)
    d = check_int("d", d, 2)
    check_choice("attention", attention, ATTENTIONS)
    if z0 is not None:
        z0 = check_real_array("z0", z0, -1.0, 1.0)
    if attention == "unnormalized":
        # 2 mu / nu^2 < 0 everywhere iff eps^2 e^beta > 2; compared in logs.
        anti = float(eps > 0.0 and 2.0 * math.log(eps) + beta > _LOG2)
        if z0 is None:
            return anti
        out = np.full(np.shape(z0), anti)
    elif eps == 0.0:
        if z0 is None:
            return 0.0
        out = np.zeros(np.shape(z0))
    else:
        out = _hybrid_softmax_prob(beta, eps, z0, d)
        if z0 is None:
            return float(out)
    out = np.where(z0 == -1.0, 1.0, np.where(z0 == 1.0, 0.0, out))
    return _out(out)


# ------------------------------------------------------- the hybrid model: the discrete chain
def hybrid_step_size(beta, epsilon, L):
    r"""Random part of one step of the hybrid model near the antipodal pole,
    :math:`\varepsilon e^\beta / (2\sqrt L)`.

    With unnormalised attention and two tokens at overlap -1 the attention output of a
    token is :math:`(e^\beta x_i + e^{-\beta} x_j)/2`, of norm about :math:`e^\beta/2`,
    and the random factor of the residual is :math:`\varepsilon\xi/\sqrt L`.  Broadcasts
    over its arguments (beta >= 0, epsilon >= 0, L > 0).
    """
    beta = check_real_array("beta", beta, 0.0, 700.0)
    epsilon = check_real_array("epsilon", epsilon, 0.0, EPSILON_MAX)
    L = check_real_array("L", L, 0.0, strict_min=True)
    return _out(epsilon * np.exp(beta) / (2.0 * np.sqrt(L)))


def _mean_log_abs_normal(r):
    r""":math:`E\log|\xi - r|` for a standard normal :math:`\xi`, in closed form.

    :math:`(\xi - r)^2` is noncentral chi-square with one degree of freedom, a Poisson
    (mean :math:`r^2/2`) mixture of central ones with :math:`1 + 2K` degrees of freedom,
    and :math:`E\log\chi^2_\nu = \log 2 + \psi(\nu/2)`; so the value is
    :math:`\tfrac12(\log 2 + E\,\psi(\tfrac12 + K))`, summed over the Poisson weights
    (normalised over the range summed, 40 standard deviations on each side).
    """
    from scipy.stats import poisson

    lam = 0.5 * r * r
    spread = 40.0 * math.sqrt(lam) + 40.0
    k = np.arange(max(0, int(lam - spread)), int(lam + spread) + 1)
    w = poisson.pmf(k, lam)
    return 0.5 * (_LOG2 + float(np.sum(w * special.digamma(0.5 + k)) / np.sum(w)))


def hybrid_antipodal_rate(beta, epsilon, L=None) -> float:
    r"""Drift per unit time of :math:`X = \operatorname{atanh} Z` next to the antipodal pole,
    in the hybrid model's limit (``L=None``) or its discrete chain at depth scale ``L``.

    :math:`X = \log(|x_1 + x_2| / |x_1 - x_2|)`; negative values mean the pair approaches
    -1.  In the limit, from Proposition 1's SDE by Ito's formula,
    :math:`e^{-\beta} - \varepsilon^2/2` (the drift of :func:`atanh_coefficients` at
    Z = -1; negative exactly above :func:`critical_epsilon`).  In the discrete chain a
    layer multiplies :math:`|x_1 + x_2|` by :math:`|1 + w(a+b)|` and :math:`|x_1 - x_2|` by
    :math:`|1 + w(a-b)|` (:math:`a = e^\beta/2`, :math:`b = e^{-\beta}/2` the unnormalised
    attention weights at Z = -1, :math:`w = 1/L + \varepsilon\xi/\sqrt L`), so the drift
    is exactly :math:`L\,E[\log|1 + w(a+b)| - \log|1 + w(a-b)|]`, in closed form here
    (:func:`_mean_log_abs_normal`).  Expanding the logarithms (our computation),
    :math:`L(\text{rate}_L - \text{rate}) \to -\tfrac12 + \tfrac14\varepsilon^2(3e^\beta +
    e^{-3\beta}) - \tfrac38\varepsilon^4(e^{2\beta} + e^{-2\beta})` as :math:`L \to \infty`,
    and the next orders carry higher powers of :math:`\varepsilon e^\beta`: a small step's
    random part alone does not make the two rates agree.  ``beta`` and ``epsilon`` as in
    :func:`hybrid_antipodal_probability`; ``L`` > 0, or None (the limit).
    """
    beta = check_real("beta", beta, 0.0, 700.0)
    epsilon = check_real("epsilon", epsilon, 0.0, EPSILON_MAX)
    if L is None:
        return math.exp(-beta) - 0.5 * epsilon**2
    L = check_real("L", L, 0.0, strict_min=True)
    a, b = 0.5 * math.exp(beta), 0.5 * math.exp(-beta)
    if epsilon == 0.0:
        return L * (math.log1p((a + b) / L) - math.log1p((a - b) / L))
    # log|1 + w c| = log(c h) + log|xi - r| with h = eps / sqrt(L), r = -(1 + c/L) / (c h)
    h = epsilon / math.sqrt(L)
    total = 0.0
    for c, sign in ((a + b, 1.0), (a - b, -1.0)):
        if c > 0.0:   # c = a - b = 0 at beta = 0: log|1 + 0| = 0
            total += sign * (math.log(c * h) + _mean_log_abs_normal(-(1.0 + c / L) / (c * h)))
    return L * total
