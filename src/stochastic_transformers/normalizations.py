r"""Depth limits of the other layer normalisations and of the causal mask (ours).

The paper's layer normalises after the update (post-LN).  :class:`~.config.ModelConfig`
also runs, with :math:`N(y) = y/|y|`, :math:`h = L^{-1/2}` and :math:`A_i` the attention
output of the tokens' directions,

* pre-LN, :math:`X_i \leftarrow X_i + hVA_i` (the residual stream leaves the sphere);
* peri-LN, :math:`X_i \leftarrow X_i + hN(VA_i)`;
* nGPT-style, :math:`X_i \leftarrow N(X_i + hN(VA_i))`;

and a causal mask (token i attends to tokens j <= i).  This module holds what the book's
chapter "Other normalisations" derives.

**One form for the four layers.**  Write :math:`u_i` for the block's output (:math:`VA_i`,
or :math:`N(VA_i)`) and :math:`K_{ik}` for its covariance per coordinate,
:math:`E[u_iu_k^\top] = K_{ik}I`.  For Gaussian :math:`V` of variance :math:`\sigma^2`,
:math:`K_{ik} = \sigma^2\langle A_i, A_k\rangle` for :math:`VA_i`, and
:math:`K_{ik} = c_d(\rho_{ik})/d` for :math:`N(VA_i)`, with :math:`\rho_{ik}` the cosine of
:math:`A_i` and :math:`A_k` and :math:`c_d` of :func:`unit_gaussian_cosine` (the law of
:math:`V` is invariant under rotations on the left, so :math:`E[u_iu_k^\top]` commutes with
every rotation).  Let :math:`r_i = |X_i|` (1 on the sphere) and :math:`Y_i = X_i/r_i`.  The
directions of all four layers then follow, as :math:`L\to\infty`,

.. math::

    dY_i = P_{Y_i}\,dM_i - \tfrac{d-1}{2}\,a_{ii}\,Y_i\,dt,\qquad
    d\langle M_i, M_k\rangle = a_{ik}\,I\,dt,\qquad a_{ik} = K_{ik}/(r_ir_k),

by the second-order expansion of :math:`N(Y_i + hu_i/r_i)` (its mean is
:math:`Y_i - \tfrac{h^2}{2}(d-1)K_{ii}Y_i/r_i^2 + O(h^3)`, because
:math:`E[\langle Y, u\rangle P_Yu] = K P_Y Y = 0`).  Post-LN with :math:`a_{ik} =
\sigma^2\langle A_i, A_k\rangle` is Theorem 1.  For two tokens, Ito's formula with
:math:`\operatorname{tr}(P_{Y_1}P_{Y_2}) = d - 2 + Z^2` gives the overlap
:math:`Z = \langle Y_1, Y_2\rangle` the drift and squared diffusion of
:func:`stochastic_transformers.theory.kernel_coefficients`.  On the sphere (post, nGPT) it
is a closed diffusion; for pre- and peri-LN it is coupled to the norms, whose squares grow
as :math:`d(r_i^2) = 2r_i\langle Y_i, dX_i\rangle + dK_{ii}\,dt`: linearly in time, so
that the directions move on the clock :math:`\int dt/r^2`.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.optimize
import scipy.special

from . import theory
from ._validation import (BETA_MAX, SIGMA_MAX, check_bool, check_choice, check_int,
                          check_real, check_real_array, check_times, check_tol)
from .kolmogorov import log_gap_solution, uniform_start_average
from .config import NORMS

__all__ = ["unit_gaussian_cosine", "two_token_kernel", "two_token_coefficients",
           "pole_exponent", "critical_beta_ngpt", "causal_antipodal_dimension",
           "antipodal_at", "pre_layer_gram_moments", "peri_clock_rate"]

#: The layers whose two-token overlap is a closed diffusion (the tokens stay on the sphere).
SPHERE_NORMS = ("post", "ngpt")


def unit_gaussian_cosine(rho, d):
    r""":math:`c_d(\rho) = E\langle g_1/|g_1|, g_2/|g_2|\rangle` for standard Gaussian
    :math:`g_1, g_2 \in \mathbb R^d` whose coordinates have correlation :math:`\rho`.

    .. math::

        c_d(\rho) = \rho\,\frac{2}{d}\Bigl(\frac{\Gamma(\frac{d+1}{2})}{\Gamma(\frac d2)}\Bigr)^2
        {}_2F_1\bigl(\tfrac12, \tfrac12; \tfrac d2 + 1; \rho^2\bigr),

    so :math:`c_d(\pm1) = \pm1` (Gauss's sum), :math:`c_1(\rho) = \tfrac2\pi\arcsin\rho` and
    :math:`c_d(\rho) \to \rho` as :math:`d\to\infty`.  (Expand the cosine in
    :math:`g_2 = \rho g_1 + \sqrt{1-\rho^2}\,g'`: the radial and angular parts of
    :math:`g_1` are independent, and the odd powers of :math:`\rho` that remain sum to the
    hypergeometric series.)  The tests check it against direct draws.

    Parameters
    ----------
    rho : float or array in [-1, 1]
    d : int >= 1
    """
    rho = check_real_array("rho", rho, -1.0, 1.0)
    d = check_int("d", d, 1)
    ratio = math.exp(2.0 * (math.lgamma((d + 1) / 2.0) - math.lgamma(d / 2.0)))
    out = rho * (2.0 / d) * ratio * _hypergeometric_half(d / 2.0 + 1.0, rho * rho)
    # At rho = +-1 the series is Gauss's sum: exactly +-1.
    out = np.where(np.abs(rho) == 1.0, np.sign(rho), out)
    return float(out) if np.ndim(out) == 0 else out


#: From this d on, :func:`_hypergeometric_half` sums its series: scipy's ``hyp2f1`` returns
#: inf or NaN near x = 1 for even d >= 198 (where c - a - b = d/2 is an integer), and the
#: series' terms fall like :math:`n^{-d/2-1}` at x = 1, so 60 of them give double precision.
SERIES_FROM_D = 100
_SERIES_TERMS = 60


def _hypergeometric_half(c, x):
    """:math:`{}_2F_1(\\tfrac12, \\tfrac12; c; x)` for x in [0, 1]."""
    if c < SERIES_FROM_D / 2.0 + 1.0:
        return scipy.special.hyp2f1(0.5, 0.5, c, x)
    x = np.asarray(x, dtype=float)
    term, total = np.ones_like(x), np.ones_like(x)
    for n in range(_SERIES_TERMS):
        term = term * (n + 0.5) ** 2 / ((c + n) * (n + 1.0)) * x
        total = total + term
    return total


def _two_token_attention(z, beta, causal):
    """The attention outputs of two tokens on the sphere at overlap z, softmax, B = I:
    :math:`A_1 = p_1Y_1 + q_1Y_2` and :math:`A_2 = q_2Y_1 + p_2Y_2` as (p1, q1, p2, q2), with
    :math:`p = 1/(1 + e^{\\beta(z-1)})`; with the causal mask the first attends to itself."""
    p, q, _, _ = theory.two_cluster_weights(z, beta, 1, 1)
    if causal:
        return np.ones_like(p), np.zeros_like(q), p, q
    return p, q, p, q


def _check_layer(beta, d, norm, causal, norms=NORMS):
    """beta, d, the normalisation (among ``norms``) and the mask, checked."""
    return (check_real("beta", beta, 0.0, BETA_MAX), check_int("d", d, 2),
            check_choice("norm", norm, norms), check_bool("causal", causal))


def _check(z, beta, d, norm, causal, sigma):
    z = check_real_array("z", z, -1.0, 1.0)
    sigma = check_real("sigma", sigma, 0.0, SIGMA_MAX, strict_min=True)
    return (z, *_check_layer(beta, d, norm, causal), sigma)


def _kernel(z, beta, d, norm, causal, sigma):
    """:func:`two_token_kernel` of checked arguments."""
    p1, q1, p2, q2 = _two_token_attention(z, beta, causal)
    g11 = p1 * p1 + q1 * q1 + 2.0 * p1 * q1 * z           # |A_1|^2
    g22 = p2 * p2 + q2 * q2 + 2.0 * p2 * q2 * z
    g12 = (p1 * q2 + q1 * p2) + (p1 * p2 + q1 * q2) * z   # <A_1, A_2>
    if norm in ("post", "pre"):
        s2 = sigma * sigma
        return s2 * g11, s2 * g22, s2 * g12
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.clip(g12 / np.sqrt(g11 * g22), -1.0, 1.0)
    # An attention output vanishes only at beta = 0, z = -1 (equal weights on antipodal
    # tokens); there the kernel is its limit along z: A_1 = A_2 (rho = 1) without the mask,
    # A_1 = Y_1 orthogonal to the limit direction of A_2 (rho = 0) with it.
    rho = np.where(np.isfinite(rho), rho, 0.0 if causal else 1.0)
    one = np.full_like(rho, 1.0 / d)
    return one, one.copy(), np.asarray(unit_gaussian_cosine(rho, d)) / d


def two_token_kernel(z, beta, d, *, norm="post", causal=False, sigma=1.0):
    r"""The kernel :math:`(K_{11}, K_{22}, K_{12})` of two tokens at overlap ``z`` (softmax,
    :math:`B = I`): the covariance per coordinate of the blocks' outputs (module docstring).

    ``norm`` "post" or "pre" (:math:`u_i = VA_i`): :math:`K_{ik} = \sigma^2\langle A_i,
    A_k\rangle`; "peri" or "ngpt" (:math:`u_i = N(VA_i)`): :math:`K_{ii} = 1/d`,
    :math:`K_{12} = c_d(\rho_{12})/d`.  Without the mask :math:`A_1 = pY_1 + qY_2`,
    :math:`A_2 = qY_1 + pY_2`, :math:`p = 1/(1 + e^{\beta(z-1)})`, :math:`q = 1 - p`; with
    it :math:`A_1 = Y_1`.  For pre- and peri-LN the directions' kernel is
    :math:`K_{ik}/(r_ir_k)`.
    """
    z, beta, d, norm, causal, sigma = _check(z, beta, d, norm, causal, sigma)
    return tuple(theory._out(k) for k in _kernel(z, beta, d, norm, causal, sigma))


def two_token_coefficients(z, beta, d, *, norm="post", causal=False, sigma=1.0, ratio=1.0):
    r"""Drift and squared diffusion of the overlap of two tokens' directions in the depth
    limit: :func:`~stochastic_transformers.theory.kernel_coefficients` of the kernel
    :math:`a_{11} = K_{11}/r_1^2`, :math:`a_{22} = K_{22}/r_2^2`, :math:`a_{12} =
    K_{12}/(r_1r_2)` (:func:`two_token_kernel`), per unit of the clock :math:`t/r_1r_2`.

    ``ratio`` is :math:`r_1/r_2` (1 on the sphere, where the clock is time itself).  With
    ``norm="post"``, ``causal=False`` and ``ratio=1`` these are Lemma 4's coefficients.
    """
    z, beta, d, norm, causal, sigma = _check(z, beta, d, norm, causal, sigma)
    ratio = check_real("ratio", ratio, 0.0, strict_min=True)
    if norm in SPHERE_NORMS and ratio != 1.0:
        raise ValueError(f"ratio (r1/r2) must be 1 for norm={norm!r}: its tokens stay on the "
                         f"sphere; got {ratio}")
    k11, k22, k12 = _kernel(z, beta, d, norm, causal, sigma)
    return theory.kernel_coefficients(z, d, k11 / ratio, k22 * ratio, k12)


#: Distances to a pole at which :func:`pole_exponent` evaluates the coefficients (its
#: Richardson extrapolation removes the first-order term; what remains comes from the
#: non-analytic terms of c_d at -1, about 1e-5 in the exponent at d = 4).
_POLE_STEP = 1e-6


def _minus_one_fixed(beta, norm, causal) -> bool:
    """Whether -1 is a fixed point of the overlap of two tokens on the sphere."""
    if norm == "post":
        return not causal
    return beta > 0.0


def pole_exponent(beta, d, *, norm="post", causal=False, pole=-1):
    r"""The exponent :math:`\lambda` of the distance :math:`\varepsilon = 1 \mp Z` to a pole
    on the sphere: near a pole that the overlap diffusion keeps fixed,
    :math:`d\log\varepsilon = \lambda\,dt + O(1)\,dB`, with

    .. math::

        \lambda = \lim_{\varepsilon\to0}\Bigl(\frac{\pm\mu}{\varepsilon}
                  - \frac{s^2}{2\varepsilon^2}\Bigr),

    and the pole attracts the pair (with positive probability) iff :math:`\lambda < 0`.
    For post-LN at :math:`-1` it vanishes at Theorem 2's :math:`\beta_c(d)`.  Evaluated by
    a Richardson extrapolation of the exact coefficients at :math:`\varepsilon` = 1e-6 and
    2e-6.  Raises a ValueError where the pole is not fixed (post-LN with the causal mask at
    -1: see :func:`causal_antipodal_dimension`) or the tokens leave the sphere.
    """
    beta, d, norm, causal = _check_layer(beta, d, norm, causal, SPHERE_NORMS)
    pole = check_choice("pole", pole, (-1, 1))
    if pole == -1 and not _minus_one_fixed(beta, norm, causal):
        raise ValueError(f"-1 is not a fixed point of the overlap for norm={norm!r}, "
                         f"causal={causal}, beta={beta} (post-LN with the mask: the second "
                         "token's output is shorter than the first's, see "
                         "causal_antipodal_dimension; the nGPT-style layer at beta = 0: both "
                         "tokens get the same update direction)")

    def rate(eps):
        z = float(pole) * (1.0 - eps)
        mu, s2 = two_token_coefficients(z, beta, d, norm=norm, causal=causal)
        return -pole * mu / eps - s2 / (2.0 * eps * eps)

    return 2.0 * rate(_POLE_STEP) - rate(2.0 * _POLE_STEP)


def critical_beta_ngpt(d, causal=False):
    r"""The threshold of the nGPT-style layer: -1 attracts two tokens iff :math:`\beta`
    exceeds it.

    Near -1 (:math:`\varepsilon = 1 + Z`) the cosine of the attention outputs is
    :math:`\rho = -1 + \varepsilon/\tau^2 + O(\varepsilon^2)`, with :math:`\tau = p - q =
    \tanh\beta` without the mask and :math:`\tau = (p - q)/p = 1 - e^{-2\beta}` with it
    (:math:`p, q` the weights at :math:`Z = -1`), and :math:`c_d'(-1) = (d-1)/(d-2)`.  With
    :math:`K_{11} = K_{22} = 1/d` the exponent of :func:`pole_exponent` is

    .. math::

        \lambda = \frac1d\Bigl(1 - d + \frac{(d-3)\,c_d'(-1)}{\tau^2}\Bigr),

    negative iff :math:`\tau^2 > (d-3)/(d-2)`: without the mask :math:`\cosh 2\beta > 2d - 5`,
    :math:`\beta_c = \tfrac12\operatorname{arccosh}(2d-5)`, against post-LN's
    :math:`\cosh 2\beta > d - 2` (the same computation with :math:`c'` replaced by 1 and
    :math:`d - 2` by :math:`d - 1`); with it :math:`\beta_c = -\tfrac12\log(1 -
    \sqrt{(d-3)/(d-2)})`.  0 for :math:`d \le 3`, where -1 attracts at every
    :math:`\beta > 0`.  The tests check it against the root of :func:`pole_exponent`.
    """
    d = check_int("d", d, 2)
    if d <= 3:
        return 0.0
    tau = math.sqrt((d - 3.0) / (d - 2.0))
    return -0.5 * math.log1p(-tau) if check_bool("causal", causal) else math.atanh(tau)


def causal_antipodal_dimension(beta, d, *, norm="post"):
    r"""Near -1 the causal overlap behaves as a squared Bessel process of this dimension.

    With the mask, at :math:`Z = -1` the kernel gives :math:`\mu(-1) > 0` and
    :math:`s^2 \approx \kappa\,(1 + Z)`, so :math:`\varepsilon = 1 + Z` follows
    :math:`d\varepsilon = \mu(-1)\,dt + \sqrt{\kappa\varepsilon}\,dB` near 0: a squared
    Bessel process of dimension :math:`\delta = 4\mu(-1)/\kappa`, which reaches 0 iff
    :math:`\delta < 2` (Feller's test), and for :math:`\delta \ge 2` does not converge to it
    either (the scale function diverges there).  For post-LN :math:`\delta = d - 1` whatever
    :math:`\beta`: two antipodal tokens part, and for :math:`d \ge 3` the pair never becomes
    antipodal.  With the nGPT-style layer -1 is a fixed point for :math:`\beta > 0`
    (:func:`pole_exponent`), and this raises a ValueError.
    """
    beta, d, norm, _ = _check_layer(beta, d, norm, True, SPHERE_NORMS)
    if _minus_one_fixed(beta, norm, True):
        raise ValueError(f"-1 is a fixed point for norm={norm!r} with the mask at beta={beta}: "
                         "its exponent is pole_exponent's")
    mu0, _ = two_token_coefficients(-1.0, beta, d, norm=norm, causal=True)
    eps = 1e-6
    _, s2 = two_token_coefficients(-1.0 + eps, beta, d, norm=norm, causal=True)
    _, s2_2 = two_token_coefficients(-1.0 + 2 * eps, beta, d, norm=norm, causal=True)
    kappa = 2.0 * s2 / eps - s2_2 / (2 * eps)       # Richardson: s^2 = kappa eps + O(eps^2)
    if not kappa > 0.0:
        raise ValueError(f"the causal noise vanishes at -1 for beta = {beta}")
    return 4.0 * mu0 / kappa


#: Below this gap :math:`v = 1 + Z` the coefficients at a fixed -1 are their leading terms
#: :math:`\mu_1 v` and :math:`Bv^2` (evaluated directly they would lose their relative precision,
#: which the grid of :func:`antipodal_at` needs down to v = 1e-30).
FIXED_POLE_V = 1e-6


def _coefficients_v(v, beta, d, norm, causal):
    r""":math:`\mu` and :math:`s^2` of the overlap at :math:`Z = -1 + v` (arrays of v > 0)."""
    def direct(v):
        z = -1.0 + v
        k11, k22, k12 = _kernel(z, beta, d, norm, causal, 1.0)
        return theory.kernel_coefficients(z, d, k11, k22, k12, one_minus_z2=v * (2.0 - v))

    mu, s2 = (np.asarray(c, dtype=float) for c in direct(np.asarray(v, dtype=float)))
    if _minus_one_fixed(beta, norm, causal):      # mu ~ mu_1 v, s^2 ~ B v^2
        mu_1, s2_1 = (float(c) for c in direct(np.array(FIXED_POLE_V)))
        low = v < FIXED_POLE_V
        mu = np.where(low, mu_1 / FIXED_POLE_V * v, mu)
        s2 = np.where(low, s2_1 / FIXED_POLE_V**2 * v * v, s2)
    return mu, s2


def antipodal_at(t, beta, d, *, norm="post", causal=False, tol=1e-3, h=0.02):
    r"""The limit's :math:`P(1 + Z_t \le \mathrm{tol})` for two uniform tokens of a layer that
    keeps them on the sphere (post-LN or nGPT-style, with or without the causal mask).

    The backward Kolmogorov equation of the overlap diffusion (:func:`two_token_coefficients`)
    in :math:`y = \log(1 + Z)`, solved by
    :func:`stochastic_transformers.kolmogorov.log_gap_solution` (reflecting far below
    ``tol``, absorbing next to +1, which attracts in every variant) at steps ``h`` and
    ``h/2``, averaged over the uniform start
    (:func:`~stochastic_transformers.kolmogorov.uniform_start_average`).  The scheme is the
    feedforward chapter's (:func:`stochastic_transformers.feedforward.antipodal_at`); for
    post-LN the tests check it against :func:`stochastic_transformers.sde.antipodal_at`, an
    independent scheme in :math:`\operatorname{atanh} Z`.  With the mask and post-LN, -1 is
    not a fixed point, and the grid reaches a factor 1e6 below the depth
    :math:`\mu(-1)/(d-1)`.

    Returns ``(p, error)``: arrays over ``t`` (floats for a scalar ``t``), the error being
    the change under the halving of ``h``.
    """
    beta, d, norm, causal = _check_layer(beta, d, norm, causal, SPHERE_NORMS)
    tol = check_tol(tol)
    ts = check_times("t", t)
    h = check_real("h", h, 0.0, 0.5, strict_min=True)
    fixed = _minus_one_fixed(beta, norm, causal)
    depth = 0.0 if fixed else float(two_token_coefficients(
        -1.0, beta, d, norm=norm, causal=causal)[0]) / (d - 1)
    absorbs = pole_exponent(beta, d, norm=norm, causal=causal, pole=1) < 0.0
    results = []
    for step in (h, h / 2):
        y, u = log_gap_solution(lambda v: _coefficients_v(v, beta, d, norm, causal), depth,
                                tol, 1.0, step, ts, top_absorbs=absorbs)
        results.append(np.clip(uniform_start_average(y, u, d), 0.0, 1.0))
    value, error = results[1], np.abs(results[1] - results[0])
    if np.ndim(t) == 0:
        return float(value[0]), float(error[0])
    return value, error


def pre_layer_gram_moments(gram, att, d, h, sigma=1.0):
    r"""Exact mean and covariance of one pre-LN layer's change of the Gram matrix.

    With :math:`X_i' = X_i + hVA_i` (:math:`V` of i.i.d. :math:`N(0, \sigma^2)` entries),
    :math:`G = (\langle X_i, X_k\rangle)` and :math:`a = (\langle A_i, A_k\rangle)`:

    .. math::

        E[\Delta G_{ik}] = h^2\sigma^2 d\,a_{ik},\qquad
        \operatorname{Cov}(\Delta G_{ik}, \Delta G_{jl}) =
        h^2\sigma^2(G_{ij}a_{kl} + G_{il}a_{kj} + G_{kj}a_{il} + G_{kl}a_{ij})
        + h^4\sigma^4 d\,(a_{ij}a_{kl} + a_{il}a_{kj}),

    from :math:`E[(x^\top Va)(y^\top Vb)] = \sigma^2\langle x, y\rangle\langle a, b\rangle`,
    Isserlis' theorem for the quadratic part :math:`\langle VA_i, VA_k\rangle` (a sum of
    d independent rows) and the vanishing odd moments.  The depth limit keeps the
    :math:`h^2` terms: the Gram matrix is a diffusion, closed because :math:`A` depends on
    the directions' Gram matrix alone.

    Parameters
    ----------
    gram : (N, N) array
        The Gram matrix :math:`G`.
    att : (N, N) array
        The attention outputs' Gram matrix :math:`a`.
    d : int
        The dimension, at least 2.
    h : float
        The residual step, positive.
    sigma : float
        The standard deviation of the entries of V, positive.

    Returns
    -------
    mean : (N, N) array
        :math:`E[\Delta G]`.
    cov : (N, N, N, N) array
        ``cov[i, k, j, l]`` is :math:`\operatorname{Cov}(\Delta G_{ik}, \Delta G_{jl})`.
    """
    G = np.asarray(check_real_array("gram", gram), dtype=float)
    a = np.asarray(check_real_array("att", att), dtype=float)
    if G.ndim != 2 or G.shape[0] != G.shape[1] or a.shape != G.shape:
        raise ValueError(f"gram and att must be (N, N) arrays of one shape; got {G.shape} "
                         f"and {a.shape}")
    d = check_int("d", d, 2)
    h = check_real("h", h, 0.0, strict_min=True)
    sigma = check_real("sigma", sigma, 0.0, SIGMA_MAX, strict_min=True)
    s2, h2 = sigma * sigma, h * h
    linear = (np.einsum("ij,kl->ikjl", G, a) + np.einsum("il,kj->ikjl", G, a)
              + np.einsum("kj,il->ikjl", G, a) + np.einsum("kl,ij->ikjl", G, a))
    quadratic = np.einsum("ij,kl->ikjl", a, a) + np.einsum("il,kj->ikjl", a, a)
    return h2 * s2 * d * a, h2 * s2 * linear + h2 * h2 * s2 * s2 * d * quadratic


def peri_clock_rate(t, d):
    r""":math:`E[1/\lvert X_t\rvert^2]` for a token of a peri-LN layer in the depth limit: the
    rate of its directions' clock :math:`\tau = \int_0^t ds/\lvert X_s\rvert^2`.

    A peri-LN token adds :math:`hN(VA)`, which is uniform on the sphere and independent of
    the past whatever :math:`A \ne 0`, so :math:`X_t = X_0 + B_t/\sqrt d` with :math:`B` a
    standard Brownian motion of :math:`\mathbb R^d`, and :math:`d\lvert X_t\rvert^2/t` is a
    noncentral chi-square of d degrees of freedom and noncentrality :math:`d/t`.  From
    :math:`E[1/Q] = \int_0^\infty E[e^{-sQ}]\,ds` and its Laplace transform
    :math:`(1+2s)^{-d/2}e^{-\lambda s/(1+2s)}`,

    .. math::

        E\Bigl[\frac1{\lvert X_t\rvert^2}\Bigr] = \frac{d}{2t}\int_0^1
        u^{d/2-2}\,e^{-d(1-u)/(2t)}\,du \qquad (d \ge 3),

    which is 1 at :math:`t = 0` and :math:`d/((d-2)t)` for large t: the clock grows like
    :math:`\tfrac{d}{d-2}\log t`.  ``t`` >= 0 (scalar or 1-D array), ``d`` >= 3.
    """
    import scipy.integrate

    ts = np.atleast_1d(check_real_array("t", t, 0.0))
    d = check_int("d", d, 3)
    out = np.ones(ts.shape)
    for i, ti in enumerate(ts.ravel()):
        if ti > 0.0:
            a = d / (2.0 * ti)
            value, _ = scipy.integrate.quad(lambda u: u ** (d / 2.0 - 2.0) * math.exp(-a * (1.0 - u)),
                                            0.0, 1.0, epsabs=0.0, epsrel=1e-11, limit=200)
            out.flat[i] = a * value
    return float(out[0]) if np.ndim(t) == 0 else out
