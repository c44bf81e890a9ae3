r"""Limits of the random-attention model (Koubbi, Geshkovski and Rigollet's homogenised transformer).

The layer (:mod:`stochastic_transformers.random_attention`) adds to token :math:`i` the
increment :math:`u_i = \frac{\eta}{H}\sum_h V_h m_h(x_i)`.  Given the key-query matrices it
is centred Gaussian with :math:`\operatorname{Cov}(u_i, u_j) = \varepsilon\, c^{(A)}_{ij} I_d`,
:math:`\varepsilon = \eta^2\sigma^2/H` and :math:`c^{(A)}_{ij} = \frac1H\sum_h\langle m_h(x_i),
m_h(x_j)\rangle`.  Expanding the normalisation to second order (our derivation) gives, with
:math:`c_{ij} = E_A\langle m(x_i), m(x_j)\rangle` and the noise clock
:math:`\tau = (\text{layers})\,\varepsilon`,

.. math::

    dR_{ij} = \bigl[c_{ij}(d - 2 + R_{ij}^2) - \tfrac{d-1}{2}(c_{ii} + c_{jj})R_{ij}\bigr]d\tau
              + dM_{ij},\qquad
    d\langle M_{ij}\rangle = (1 - R_{ij}^2)\bigl(c_{ii} + c_{jj} - 2c_{ij}R_{ij}\bigr)d\tau .

There is no attention drift (E V = 0): only the common noise and the Ito correction of
the normalisation.  At :math:`\beta = 0`, :math:`c_{ij} = |\bar x|^2` for all pairs and the
drift is :math:`|\bar x|^2(1 - R_{ij})(d - 2 - R_{ij})`: the common noise synchronises.

**Two tokens** (ours).  Write :math:`m_1 = \frac{x_1+x_2}2 + q_1(x_1 - x_2)`,
:math:`m_2 = \frac{x_1+x_2}2 - q_2(x_1 - x_2)` with :math:`q_i = p_i - \frac12` and
:math:`p_i` the weight token i gives itself.  The two score differences are
:math:`a = \beta(S + D)`, :math:`b = \beta(S - D)` with
:math:`S = \sigma_{qk}^2(1-R)\rho\,n_1`, :math:`D = \sigma_{qk}^2\sqrt{1-R^2}\,\rho\, n_2`,
:math:`n_1, n_2, \rho` independent, :math:`n_1, n_2` standard normal and
:math:`\rho^2 \sim \chi^2_d` (the key-query vectors of the two tokens are Gaussian with
covariance :math:`\sigma_{qk}^2 R\, I_d`).  S and D share :math:`\rho`: they are independent
given :math:`\rho`, not independent, hence the integral over all three.  With
:math:`r = \cosh\beta D/\cosh\beta S`:

.. math::

    1 + 4q_1q_2 = \frac{2}{1+r},\quad q_1 + q_2 = \frac{\tanh\beta S}{1 + r},\quad
    q_1 - q_2 = \frac{r\tanh\beta D}{1 + r},

all free of cancellation, and in :math:`x = \operatorname{atanh}R`, :math:`w = 1 + R`,

.. math::

    \nu^2 = E[1 + 4q_1q_2] + \frac{2}{w}E[(q_1-q_2)^2],\qquad
    \mu = \frac{d-1-w}{2} + \frac{d-1}{w}E[(q_1-q_2)^2] - (d-1)E[q_1^2+q_2^2]
          + 2(2-w)E[q_1q_2] + R\,\nu^2 .

The expectations are three-dimensional integrals (over :math:`\rho, n_1, n_2`), done by
Gauss quadrature.  With :math:`q_1 = q_2 = \frac12\tanh\frac{\beta(1-R)}2` (a fixed
:math:`A = I`) these are the main paper's coefficients (tested).  At :math:`R = -1`,
:math:`\mu \to \frac{d-3}{2} - 2(d-1)E[q^2] + (d-3)\lambda` with
:math:`\lambda = \lim E[(q_1-q_2)^2]/w`: antipodal pairs attract iff this is negative.

**Many tokens, high dimension.**  At :math:`\beta = 0` the mean overlap
:math:`m = |\bar x|^2` has, on the noise clock, the drift
:math:`m[(d-1)(1-m) - \frac1{n^2}\sum_{ij}(1-R_{ij}^2)] = d\,m(1-m) + O(1)` and a martingale
part with :math:`d\langle M\rangle = 4m|(I - G)\bar x|^2 d\tau \le 4m^2 d\tau`,
:math:`G = \frac1n\sum_i x_ix_i^\top`.  On the clock :math:`t = d\tau` the drift is
:math:`m(1-m) + O(1/d)` and :math:`d\langle M\rangle = O(dt/d)`: each trajectory of :math:`m`
follows the logistic law :math:`\dot u = u(1-u)` up to fluctuations of order
:math:`d^{-1/2}`, and its mean :math:`E[m]` up to :math:`O(1/d)` (the follow-up's Theorem 3).

**Simplex.**  For :math:`R = (1-\gamma)I + \gamma\mathbf 1\mathbf 1^\top`, :math:`c_{ij} = \gamma +
(1-\gamma)g(\gamma)` and :math:`c_{ii} = \gamma + (1-\gamma)f(\gamma)` with
:math:`f = E\sum_k\pi_{ik}^2`, :math:`g = E\sum_k\pi_{ik}\pi_{jk}`, so every off-diagonal
overlap has the drift :math:`b(\gamma) = [\gamma + (1-\gamma)g](d-2+\gamma^2) - (d-1)\gamma[\gamma
+ (1-\gamma)f]` (our form of the scalar dynamics of the follow-up's Theorem 2; on
:math:`t = d\tau` as :math:`d \to \infty` it is :math:`(1-\gamma)[\gamma(1-f) + g]`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import integrate, interpolate, special

from .. import theory
from .._validation import (SIGMA_MAX, check_choice, check_int, check_real, check_real_array,
                          check_times, check_tol)
from ..kolmogorov import banded_generator, propagate

__all__ = ["pair_coefficients", "independent_pair_coefficients", "pair_moments", "fixed_identity_coefficients", "overlap_moments",
           "antipodal_by", "antipodal_limit",
           "antipodal_attracting", "logistic", "simplex_moments", "simplex_drift",
           "simplex_path", "logistic_floor", "uniform_overlap_density"]

#: Largest score scale beta * sigma_qk^2 accepted (the quadrature resolves the attention's
#: switch from one token to the other on the scale 1 / (beta sigma_qk^2)).
BETA_QK_MAX = 20.0


def _check_pair(beta, d, sigma_qk):
    beta = check_real("beta", beta, 0.0)
    d = check_int("d", d, 2)
    sigma_qk = check_real("sigma_qk", sigma_qk, 0.0, SIGMA_MAX, strict_min=True)
    if beta * sigma_qk**2 > BETA_QK_MAX:
        raise ValueError(f"beta * sigma_qk^2 must be <= {BETA_QK_MAX}; got {beta * sigma_qk**2}")
    return beta, d, sigma_qk


def _chi_nodes(d, scale, m):
    r"""Nodes and weights for :math:`E F(\rho)`, :math:`\rho^2 \sim \chi^2_d`, where F varies on
    the scale 1/scale near 0: Gauss-Legendre in :math:`y = \operatorname{asinh}(c\rho)`,
    :math:`c = \max(1, \text{scale})`, on :math:`[0, \sqrt d + 10]` (the tail beyond is
    below 1e-20)."""
    c = max(1.0, float(scale))
    y01, w01 = _legendre(m)
    top = math.asinh(c * (math.sqrt(d) + 10.0))
    y = top * y01
    rho = np.sinh(y) / c
    log_density = ((d - 1) * np.log(np.maximum(rho, 1e-300)) - 0.5 * rho * rho
                   - (d / 2.0 - 1.0) * math.log(2.0) - special.gammaln(d / 2.0))
    return rho, top * w01 * np.cosh(y) / c * np.exp(log_density)


@functools.lru_cache(maxsize=None)
def _legendre(m):
    y, w = np.polynomial.legendre.leggauss(m)
    return 0.5 * (y + 1.0), 0.5 * w


def _half_normal_nodes(scale, m):
    r"""Nodes and weights for :math:`2\int_0^\infty \varphi(n) F(\text{scale}\cdot n)\,dn`.

    The integrands vary on the scale 1/scale near 0 (the attention switches) and on the
    scale 1 of the Gaussian: in :math:`y = \operatorname{asinh}(c\,n)`, :math:`c = \max(1,
    \text{scale})`, both are smooth, and Gauss-Legendre on :math:`[0, \operatorname{asinh}(9c)]`
    converges fast.  ``scale`` is an array (one rule per entry): shape (len(scale), m).
    """
    c = np.maximum(1.0, np.asarray(scale, dtype=float))[:, None]
    y01, w01 = _legendre(m)
    top = np.arcsinh(9.0 * c)
    y = top * y01[None, :]
    n = np.sinh(y) / c
    w = top * w01[None, :] * np.cosh(y) / c * 2.0 * np.exp(-0.5 * n * n) / math.sqrt(2 * math.pi)
    return n, w


def _log_cosh(y):
    y = np.abs(y)
    return y + np.log1p(np.exp(-2.0 * y)) - math.log(2.0)


def pair_moments(x, beta, d, sigma_qk=1.0, *, n_normal=64, n_chi=32):
    r"""The four attention moments of two tokens at overlap :math:`R = \tanh x` (random A).

    Returns ``(e_p, e_sq, e_q1q2, e_dif2_w)``: :math:`E[1 + 4q_1q_2]`, :math:`E[q_1^2+q_2^2]`,
    :math:`E[q_1q_2]`, :math:`E[(q_1-q_2)^2]/(1+R)` (module docstring), arrays like ``x``.
    ``x`` is the atanh of the overlap so that both :math:`1 \pm R` are exact near the poles.
    The integrands are even in :math:`n_1` and in :math:`n_2`, so both run over half-lines
    (:func:`_half_normal_nodes`, ``n_normal`` points each) and :math:`\rho` by ``n_chi``
    points (:func:`_chi_nodes`), each rule adapted to the scale on which the attention
    switches.
    """
    beta, d, sigma_qk = _check_pair(beta, d, sigma_qk)
    x = np.atleast_1d(np.asarray(x, dtype=float))
    one_minus = 2.0 / (1.0 + np.exp(np.clip(2.0 * x, -700, 700)))
    one_plus = 2.0 / (1.0 + np.exp(np.clip(-2.0 * x, -700, 700)))
    out = np.empty((4, x.size))
    bq = beta * sigma_qk**2
    for k in range(x.size):
        rho, w_rho = _chi_nodes(d, bq * max(one_minus[k], math.sqrt(one_minus[k] * one_plus[k])),
                                n_chi)
        c1 = bq * one_minus[k] * rho                          # beta S = c1 n1
        ct = bq * math.sqrt(one_minus[k]) * rho               # beta D / sqrt(1 + R) = ct n2
        c2 = ct * math.sqrt(one_plus[k])                      # beta D = c2 n2
        n1, w1 = _half_normal_nodes(c1, n_normal)             # (n_chi, m)
        n2, w2 = _half_normal_nodes(c2, n_normal)
        a = (c1[:, None] * n1)[:, :, None]                    # (n_chi, m, 1)
        b = (c2[:, None] * n2)[:, None, :]                    # (n_chi, 1, m)
        b_tilde = (ct[:, None] * n2)[:, None, :]
        r = np.exp(np.clip(_log_cosh(b) - _log_cosh(a), -700.0, 700.0))
        p = 2.0 / (1.0 + r)
        total = np.tanh(a) / (1.0 + r)
        safe_b = np.where(b > 1e-8, b, 1.0)
        tanh_over = np.where(b > 1e-8, np.tanh(b) / safe_b, 1.0)
        dif_w = (tanh_over * b_tilde * r / (1.0 + r)) ** 2   # (q1 - q2)^2 / (1 + R)
        dif2 = dif_w * one_plus[k]
        weight = w_rho[:, None, None] * w1[:, :, None] * w2[:, None, :]
        out[0, k] = np.sum(weight * p)
        out[1, k] = np.sum(weight * 0.5 * (total**2 + dif2))
        out[2, k] = np.sum(weight * 0.25 * (p - 1.0))
        out[3, k] = np.sum(weight * dif_w)
    return out[0], out[1], out[2], out[3]


def _coefficients_from_moments(x, d, e_p, e_sq, e_q1q2, e_dif2_w):
    r"""Drift :math:`\mu` and :math:`\nu^2` of atanh(R) per unit of the noise clock, from the
    four attention moments of :func:`pair_moments` (module docstring)."""
    one_plus = 2.0 / (1.0 + np.exp(np.clip(-2.0 * x, -700, 700)))
    R = np.tanh(x)
    nu2 = e_p + 2.0 * e_dif2_w
    mu = ((d - 1.0 - one_plus) / 2.0 + (d - 1.0) * e_dif2_w - (d - 1.0) * e_sq
          + 2.0 * (2.0 - one_plus) * e_q1q2 + R * nu2)
    return mu, nu2


def pair_coefficients(x, beta, d, sigma_qk=1.0, **quad):
    r"""Drift :math:`\mu` and :math:`\nu^2` of :math:`X = \operatorname{atanh}\langle x_1, x_2\rangle`
    per unit of the noise clock :math:`\tau` (module docstring), two tokens, random A."""
    x = np.atleast_1d(np.asarray(x, dtype=float))
    return _coefficients_from_moments(x, d, *pair_moments(x, beta, d, sigma_qk, **quad))


def independent_pair_coefficients(x, beta, d, sigma_qk=1.0, **quad):
    r"""Drift :math:`\mu` and :math:`\nu^2` of :math:`\operatorname{atanh}R` per unit of the noise
    clock when each token draws its own weights (independent noise, :math:`c_{12} = 0`).

    Ours, from the overlap equation of the module docstring with :math:`c_{12} = 0` and
    :math:`C = c_{11} + c_{22} = (1 + R) + 2(1 - R)E[q_1^2 + q_2^2]` (as
    :math:`|m_i|^2 = \frac{1+R}2 + 2q_i^2(1-R)`): :math:`dR = -\frac{d-1}2 C R\,d\tau + dM`,
    :math:`d\langle M\rangle = (1-R^2)C\,d\tau`, so in :math:`x = \operatorname{atanh}R`,
    :math:`\nu^2 = C\cosh^2 x` and :math:`\mu = -\frac{d-3}2 C\,R\cosh^2 x`.  The pair never
    meets nor becomes antipodal (for d > 3 the drift pulls R to 0).
    """
    x = np.atleast_1d(np.asarray(x, dtype=float))
    _, e_sq, _, _ = pair_moments(x, beta, d, sigma_qk, **quad)
    R = np.tanh(x)
    c = (1.0 + R) + 2.0 * (1.0 - R) * e_sq
    cosh2 = np.cosh(x) ** 2
    return -(d - 3.0) / 2.0 * c * R * cosh2, c * cosh2


def fixed_identity_coefficients(x, beta, d):
    r"""Drift :math:`\mu` and :math:`\nu^2` of :math:`\operatorname{atanh}R` with a fixed A = I.

    The main paper's two-token coefficients (Lemma 4, softmax, :math:`\sigma = 1`, so
    that its time is the noise clock :math:`\tau = \sigma^2 t`), evaluated by
    :func:`stochastic_transformers.theory.atanh_coefficients` at :math:`R = \tanh x`.
    The formulas of :func:`pair_coefficients` with :math:`q_1 = q_2 =
    \frac12\tanh\frac{\beta(1-R)}2` give the same functions (tested).
    """
    x = np.atleast_1d(np.asarray(x, dtype=float))
    mu, nu = theory.atanh_coefficients(np.tanh(x), beta, d, "softmax", 1.0)
    return mu, nu * nu


def antipodal_attracting(beta, d, sigma_qk=1.0):
    r"""Limit drift of :math:`\operatorname{atanh}R` at :math:`R = -1` (negative: antipodal
    pairs are reached with positive probability)."""
    mu, _ = pair_coefficients(np.array([-40.0]), beta, d, sigma_qk)
    return float(mu[0])


def uniform_overlap_density(x, d):
    r"""Density in :math:`x = \operatorname{atanh}R` of the overlap of two independent uniform
    points of :math:`S^{d-1}`: :math:`\propto (1 - R^2)^{(d-1)/2}`."""
    d = check_int("d", d, 2)
    x = np.asarray(x, dtype=float)
    log_c = special.gammaln(d / 2.0) - 0.5 * math.log(math.pi) - special.gammaln((d - 1) / 2.0)
    return np.exp(log_c - (d - 1) * _log_cosh(x))  # 1 - tanh^2 = sech^2


#: The two-token models the limit tables know: the follow-up's random A, the same with
#: independent noise (:func:`independent_pair_coefficients`), and the main paper's fixed
#: A = I (the same formulas, :func:`fixed_identity_coefficients`).
PAIR_MODELS = ("random_attention", "stochastic", "random_attention_independent")
#: Half-width of the x = atanh R grid of the independent-noise table: its coefficients grow
#: like cosh^2 x, and its poles are not reached (for d > 3 the density there vanishes); the
#: Dirichlet ends leak probability in (about 5e-5 into P(1 + R < 1e-3) by tau = 8 at d = 4),
#: which the returned error includes (:func:`_backward`).
X_MAX_INDEPENDENT = 12.0


class _PairTable:
    """The coefficients tabulated on [-X, X] and splined (they are smooth in x)."""

    def __init__(self, beta, d, sigma_qk, model, x_max=24.0):
        if model == "random_attention_independent":
            x_max = X_MAX_INDEPENDENT
        # dense where the attention switches (|x| < 3), sparse towards the poles
        xs = np.unique(np.concatenate([np.linspace(-x_max, -3.0, 43), np.linspace(-3.0, 3.0, 241),
                                       np.linspace(3.0, x_max, 43)]))
        if model == "random_attention":
            mu, nu2 = pair_coefficients(xs, beta, d, sigma_qk)
        elif model == "random_attention_independent":
            mu, nu2 = independent_pair_coefficients(xs, beta, d, sigma_qk)
        else:
            mu, nu2 = fixed_identity_coefficients(xs, beta, d)
        self.x_max = x_max
        self.mu = interpolate.CubicSpline(xs, mu)
        self.nu2 = interpolate.CubicSpline(xs, nu2)


@functools.lru_cache(maxsize=64)
def _table(beta, d, sigma_qk, model="random_attention"):
    return _PairTable(beta, d, sigma_qk, model)


def _check_model(model):
    return check_choice("model", model, PAIR_MODELS)


def _backward(fs, taus, beta, d, sigma_qk, model, z0, h):
    """E[f(X_tau)] for each f of ``fs`` (functions of x), on two nested grids.

    From the uniform start it returns, for each f, both :math:`E[f(X_\tau)]` and
    :math:`E[R_0 f(X_\tau)]` (shape (n_f, 2, n_tau)); from ``z0``, the value at ``z0`` (shape
    (n_f, 1, n_tau)).  Also the largest change under the grid halving.
    """
    table = _table(float(beta), int(d), float(sigma_qk), model)
    x_max = table.x_max
    h = h or min(0.05, 0.05 / max(1.0, beta * sigma_qk**2))
    order = np.argsort(taus)
    levels = []
    for step in (2 * h, h):
        n = int(round(2 * x_max / step)) + 1
        xs = np.linspace(-x_max, x_max, n)
        ab = banded_generator(xs[1] - xs[0], table.mu(xs), 0.5 * table.nu2(xs))
        vals = []
        for f in fs:
            u = propagate(ab, np.asarray(f(xs), dtype=float), taus[order], 1e-9)
            if z0 is None:
                wq = uniform_overlap_density(xs, d)
                wq = wq / wq.sum()
                vals.append([wq @ u, (wq * np.tanh(xs)) @ u])
            else:
                x0 = math.atanh(z0)
                vals.append([[float(interpolate.CubicSpline(xs, u[:, j])(x0))
                              for j in range(u.shape[1])]])
        levels.append(np.array(vals))
    inv = np.empty_like(order)
    inv[order] = np.arange(order.size)
    err = np.max(np.abs(levels[1] - levels[0]), axis=(0, 1))
    if model == "random_attention_independent":
        # Its poles are natural boundaries: the Dirichlet ends of the grid let probability
        # leak in.  The leak, the probability of reaching an end by tau, bounds the error of
        # every expectation of a function within [-1, 1] (twice that of a mean overlap).
        ends = (np.abs(xs) >= x_max - 1e-12).astype(float)
        leak = propagate(ab, ends, taus[order], 1e-9)
        if z0 is None:
            leak = wq @ leak
        else:
            leak = np.array([float(interpolate.CubicSpline(xs, leak[:, j])(math.atanh(z0)))
                             for j in range(leak.shape[1])])
        err = np.maximum(err, 2.0 * np.abs(leak))
    return levels[1][:, :, inv], err[inv]


def _check_taus(tau, z0):
    taus = check_times("tau", tau)
    if z0 is not None:
        z0 = check_real("z0", z0, -1.0, 1.0, strict_min=True, strict_max=True)
    return taus, z0


def overlap_moments(tau, beta, d, sigma_qk=1.0, *, model="random_attention", z0=None, h=None):
    r"""Limit :math:`E[R_\tau]`, :math:`E[R_\tau^2]` and :math:`E[(R_\tau - R_0)^2]` for two tokens.

    Backward Kolmogorov equation of :math:`X = \operatorname{atanh}R` on :math:`[-X, X]`
    (Dirichlet ends: :math:`\pm1` are fixed points), 4th-order differences and the
    L-stable Pade steps of :mod:`stochastic_transformers.kolmogorov`, one grid halving as error
    estimate; averaged over the uniform initial overlap (``z0=None``) or at ``z0``.
    ``model="stochastic"`` is the main paper's (fixed A = I, tau = sigma^2 t).
    Returns ``(mean, second, msd, error)``, arrays over ``tau`` (error: the largest
    change of the three under the halving).
    """
    beta, d, sigma_qk = _check_pair(beta, d, sigma_qk)
    model = _check_model(model)
    taus, z0 = _check_taus(tau, z0)
    fs = [np.tanh, lambda x: np.tanh(x) ** 2]
    vals, err = _backward(fs, taus, beta, d, sigma_qk, model, z0, h)
    mean, second = vals[0, 0], vals[1, 0]
    if z0 is None:   # E[(R - R0)^2] = E[u2(R0)] - 2 E[R0 u1(R0)] + E[R0^2], E[R0^2] = 1/d
        msd = second - 2.0 * vals[0, 1] + 1.0 / d
    else:
        msd = second - 2.0 * z0 * mean + z0 * z0
    return mean, second, msd, err


def antipodal_by(tau, beta, d, sigma_qk=1.0, *, model="random_attention", tol=1e-3, h=None):
    r"""Limit :math:`P(1 + R_\tau < \text{tol})` from a uniform start: antipodal at a finite
    clock, the same backward equation with the indicator as data.  Returns (p, error)."""
    beta, d, sigma_qk = _check_pair(beta, d, sigma_qk)
    model = _check_model(model)
    taus, _ = _check_taus(tau, None)
    tol = check_tol(tol)
    x_tol = math.atanh(-1.0 + tol)
    vals, err = _backward([lambda x: (x < x_tol).astype(float)], taus, beta, d, sigma_qk,
                          model, None, h)
    return vals[0, 0], err


def antipodal_limit(beta, d, sigma_qk=1.0, *, model="random_attention", z0=None, x_max=None):
    r"""Limit probability that two tokens end antipodal (:math:`R_\tau \to -1`), random A.

    Scale function :math:`s'(x) = \exp(-\int_0^x 2\mu/\nu^2)`:
    :math:`P = \int_{x_0}^\infty s' / \int_{-\infty}^\infty s'`, with the constant-coefficient
    tails beyond :math:`\pm X` integrated in closed form; 0 when :math:`-1` repels
    (:func:`antipodal_attracting` >= 0).  Averaged over the uniform initial overlap unless
    ``z0`` is given.
    """
    beta, d, sigma_qk = _check_pair(beta, d, sigma_qk)
    if z0 is not None:
        z0 = check_real("z0", z0, -1.0, 1.0)
    model = _check_model(model)
    table = _table(float(beta), int(d), float(sigma_qk), model)
    if float(table.mu(-table.x_max)) >= 0.0:
        return 0.0
    return _exit_probability(table.mu, table.nu2, table.x_max if x_max is None else x_max, d, z0)


def _exit_probability(mu, nu2, x_max, d, z0):
    r"""P(X -> -inf) for the diffusion with coefficients ``mu(x)``, ``nu2(x)`` (callables),
    constant beyond ``x_max`` with an attracting end on each side; uniform start unless
    ``z0``.  Scale density :math:`s' = e^{-\phi}`, :math:`\phi' = 2\mu/\nu^2`."""
    xs = np.linspace(-x_max, x_max, 8001)
    rate = 2.0 * mu(xs) / nu2(xs)
    phi = integrate.cumulative_trapezoid(rate, xs, initial=0.0)
    sp = np.exp(-phi - np.max(-phi))       # normalised by the largest value: no overflow
    tail_hi = sp[-1] / rate[-1]            # int_X^inf e^{-rate (y - X)} dy, rate > 0 there
    tail_lo = sp[0] / (-rate[0])           # rate < 0 at the antipodal end
    inner = integrate.cumulative_trapezoid(sp, xs, initial=0.0)
    prob = (tail_hi + inner[-1] - inner) / (tail_lo + inner[-1] + tail_hi)
    if z0 is not None:
        z0 = min(max(z0, -1.0 + 1e-15), 1.0 - 1e-15)
        return float(np.interp(math.atanh(z0), xs, prob))
    dens = uniform_overlap_density(xs, d)
    return float(np.sum(dens * prob) / np.sum(dens))


def logistic(t, u0):
    r"""The follow-up's logistic law :math:`u(t) = u_0/(u_0 + (1-u_0)e^{-t})`: ``t`` finite
    (a number or an array), ``u0`` in [0, 1]."""
    t = check_real_array("t", t)
    u0 = check_real("u0", u0, 0.0, 1.0)
    return u0 / (u0 + (1.0 - u0) * np.exp(-t))


def simplex_moments(gamma, n_tokens, beta, d, sigma_qk=1.0, *, n_samples=20000, seed=0):
    r"""Monte Carlo :math:`f(\gamma) = E\sum_k\pi_{1k}^2` and :math:`g(\gamma) = E\sum_k\pi_{1k}\pi_{2k}`
    for the simplex Gram matrix, and their standard errors.

    The key and query vectors :math:`W'^\top x_i`, :math:`W^\top x_k` are independent Gaussian
    families with covariance :math:`\sigma_{qk}^2 R_{ik} I_d`; for the simplex,
    :math:`h_i = \sigma_{qk}(\sqrt{1-\gamma}\,\xi_i + \sqrt\gamma\,\xi_0)`.  Returns
    ``(f, g, f_se, g_se)`` over ``gamma`` (common random numbers across gamma).
    """
    n_tokens = check_int("n_tokens", n_tokens, 2)
    beta = check_real("beta", beta, 0.0)
    d = check_int("d", d, 2)
    # gamma is a nonnegative simplex overlap
    gam = np.atleast_1d(check_real_array("gamma", gamma, 0.0, 1.0))
    rng = np.random.default_rng(seed)
    xi = rng.standard_normal((2, n_samples, n_tokens + 1, d))
    f, g, fse, gse = (np.empty(gam.size) for _ in range(4))
    for k, gm in enumerate(gam):
        h = sigma_qk * (math.sqrt(1 - gm) * xi[0, :, 1:] + math.sqrt(gm) * xi[0, :, :1])
        q = sigma_qk * (math.sqrt(1 - gm) * xi[1, :, 1:] + math.sqrt(gm) * xi[1, :, :1])
        s = beta * np.einsum("sia,ska->sik", h[:, :2], q)
        s -= s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        fs = np.sum(p[:, 0] ** 2, axis=-1)
        gs = np.sum(p[:, 0] * p[:, 1], axis=-1)
        f[k], g[k] = fs.mean(), gs.mean()
        fse[k], gse[k] = fs.std() / math.sqrt(n_samples), gs.std() / math.sqrt(n_samples)
    return f, g, fse, gse


def simplex_drift(gamma, f, g, d):
    r""":math:`b(\gamma) = [\gamma + (1-\gamma)g](d-2+\gamma^2) - (d-1)\gamma[\gamma + (1-\gamma)f]`
    per unit of the noise clock."""
    gamma = np.asarray(gamma, dtype=float)
    return (gamma + (1 - gamma) * g) * (d - 2 + gamma**2) - (d - 1) * gamma * (gamma + (1 - gamma) * f)


def simplex_path(t, gamma0, n_tokens, beta, d, sigma_qk=1.0, *, n_samples=20000, seed=0,
                 n_grid=41):
    r"""The scalar dynamics :math:`d\gamma/dt = b(\gamma)/d` on the clock :math:`t = d\tau`.

    :math:`f, g` are tabulated by :func:`simplex_moments` on ``n_grid`` points of
    :math:`[\gamma_0, 1]` and splined.  Returns ``(gamma(t), spread)``: ``spread`` is the
    largest change of the path when f and g move by two standard errors (a bound on the
    Monte Carlo error of the curve).
    """
    t = np.atleast_1d(np.asarray(t, dtype=float))
    gamma0 = check_real("gamma0", gamma0, 0.0, 1.0)
    grid = np.linspace(gamma0, 1.0, n_grid)
    f, g, fse, gse = simplex_moments(grid, n_tokens, beta, d, sigma_qk, n_samples=n_samples,
                                     seed=seed)
    paths = []
    for sign in (0.0, -2.0, 2.0):
        b = simplex_drift(grid, f + sign * fse, g - sign * gse, d) / d
        spline = interpolate.CubicSpline(grid, b)
        sol = integrate.solve_ivp(lambda _t, y: spline(np.clip(y, gamma0, 1.0)), (0.0, t.max()),
                                  [gamma0], t_eval=t, rtol=1e-10, atol=1e-12)
        paths.append(sol.y[0])
    return paths[0], np.max(np.abs(np.array(paths[1:]) - paths[0]), axis=0)


def logistic_floor(b, n_tokens, t_max, *, n_samples=100_000, n_batches=10, seed=0, n_grid=11):
    r"""Largest distance over :math:`t \le t_{\max}` between the simplex law at
    :math:`d \to \infty` with :math:`\beta = b/\sqrt d`, :math:`\sigma_{qk} = 1`, and the logistic
    law, both from :math:`m(0) = 1/N`; returns ``(floor, standard error)``.

    At fixed b the scores' covariance does not depend on d: in the limit the scores of a
    row of the simplex are :math:`b[(1-\gamma)Z_{ik} + \sqrt{\gamma(1-\gamma)}\,V_k]` plus terms
    that do not depend on k (:math:`Z, V` standard normal, V shared by the rows), so
    :math:`f` and :math:`g` tend to b-dependent limits and the mean overlap
    :math:`m = \gamma + (1-\gamma)/N` follows
    :math:`\dot\gamma = (1-\gamma)[\gamma(1-f) + g]` (:func:`simplex_drift` as
    :math:`d \to \infty`) instead of the logistic law :math:`\dot m = m(1-m)`, which is the
    case :math:`f = g = 1/N`.  The drifts differ by :math:`(1-\gamma)[\gamma(1/N - f) + g - 1/N]`,
    estimated by Monte Carlo on ``n_grid`` values of :math:`\gamma` in [0, 1] (splined).
    The standard error is the spread of the floors of ``n_batches`` equal batches of the
    samples divided by the square root of their number.
    """
    b = check_real("b", b, 0.0)
    n_tokens = check_int("n_tokens", n_tokens, 2)
    t_max = check_real("t_max", t_max, 0.0)
    n_batches = check_int("n_batches", n_batches, 2)
    per = check_int("n_samples", n_samples, n_batches) // n_batches
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n_batches, per, 2, n_tokens))
    v = rng.standard_normal((n_batches, per, 1, n_tokens))
    grid = np.linspace(0.0, 1.0, n_grid)
    gap = np.empty((n_grid, n_batches))
    for i, gm in enumerate(grid):
        s = b * ((1 - gm) * z + math.sqrt(gm * (1 - gm)) * v)
        s -= s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        f = np.sum(p[:, :, 0] ** 2, axis=-1)
        g = np.sum(p[:, :, 0] * p[:, :, 1], axis=-1)
        gap[i] = np.mean(gm * (1 / n_tokens - f) + g - 1 / n_tokens, axis=1)
    t = np.linspace(0.0, t_max, 301)
    u = logistic(t, 1 / n_tokens)

    def floor(gap_of_grid):
        rhs = interpolate.CubicSpline(
            grid, (1 - grid) * (grid * (1 - 1 / n_tokens) + 1 / n_tokens + gap_of_grid))
        sol = integrate.solve_ivp(lambda _t, y: rhs(np.clip(y, 0.0, 1.0)), (0.0, t_max), [0.0],
                                  t_eval=t, rtol=1e-10, atol=1e-12)
        m = sol.y[0] + (1 - sol.y[0]) / n_tokens
        return float(np.max(np.abs(m - u)))

    batches = np.array([floor(gap[:, k]) for k in range(n_batches)])
    return floor(gap.mean(axis=1)), float(batches.std(ddof=1) / math.sqrt(n_batches))


# --------------------------------------------------------------------- the simplex start
__all__ += ["simplex_tokens", "hemisphere_tokens", "logistic_half_time"]


def simplex_tokens(n_tokens, d, gamma0):
    r"""Unit vectors with the simplex Gram matrix :math:`(1-\gamma_0)I + \gamma_0\mathbf 1\mathbf 1^\top`:
    :math:`x_i = \sqrt{\gamma_0}\,e_0 + \sqrt{1-\gamma_0}\,e_i` (needs ``d > n_tokens``)."""
    x = np.zeros((n_tokens, d))
    x[:, 0] = math.sqrt(gamma0)
    x[np.arange(n_tokens), np.arange(1, n_tokens + 1)] = math.sqrt(1.0 - gamma0)
    return x


def hemisphere_tokens(n_tokens, d):
    r"""A fixed start in the open hemisphere :math:`\{x_1 > 0\}` that is no simplex: token i
    at height :math:`h_i = (i - \frac12)/N` on the first axis,
    :math:`x_i = h_ie_0 + \sqrt{1-h_i^2}\,e_i` (needs ``d > n_tokens``).  Its Gram matrix is
    :math:`h_ih_j` off the diagonal at every d: all overlaps positive and unequal (3/256 to
    195/256 for N = 8), mean overlap :math:`((\sum_i h_i)^2 - \sum_i h_i^2 + N)/N^2`
    (0.333 for N = 8).  With Gaussian, centred weights the random-attention model is invariant
    under rotations, so the Gram matrix is all of the start that matters."""
    n_tokens, d = check_int("n_tokens", n_tokens, 2), check_int("d", d, 2)
    if d <= n_tokens:
        raise ValueError(f"d must be > n_tokens for the hemisphere start; got d={d}, "
                         f"n_tokens={n_tokens}")
    h = (np.arange(1, n_tokens + 1) - 0.5) / n_tokens
    x = np.zeros((n_tokens, d))
    x[:, 0] = h
    x[np.arange(n_tokens), np.arange(1, n_tokens + 1)] = np.sqrt(1.0 - h**2)
    return x


def logistic_half_time(n_tokens, gamma0):
    r"""The clock :math:`t` at which :math:`\gamma` reaches 1/2 from the simplex start if the
    mean overlap :math:`m = \frac1N + (1 - \frac1N)\gamma` follows the logistic law
    (:func:`logistic`) from :math:`m_0`:
    :math:`\log\frac{1-m_0}{m_0} - \log\frac{1-m_*}{m_*}`, :math:`m_* = \frac{1 + 1/N}2`
    (the diagonal's share 1/N makes it depend on N; it tends to
    :math:`\log\frac{1-\gamma_0}{\gamma_0}` as N grows)."""
    m0 = 1.0 / n_tokens + (1.0 - 1.0 / n_tokens) * gamma0
    m_star = 0.5 * (1.0 + 1.0 / n_tokens)
    return math.log((1.0 - m0) / m0) - math.log((1.0 - m_star) / m_star)
