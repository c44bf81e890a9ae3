r"""The follow-up's slow motion (its Theorem 4) measured on the attention itself (ours).

Two tracer tokens :math:`x, y` with overlap :math:`R` attend to a measure :math:`\mu` on the
sphere through random key-query matrices :math:`A = WW'^\top` (:math:`W, W'` with i.i.d.
:math:`N(0, \sigma_{qk}^2)` entries):

.. math::

    m(x) = \frac{\int e^{\beta\langle Ax, z\rangle} z\,\mu(dz)}
                {\int e^{\beta\langle Ax, z\rangle}\,\mu(dz)} .

With fresh Gaussian values in every layer, the overlap's drift on the noise clock
:math:`\tau` is (the proposition on random attention's overlap, :mod:`.homogenized`)

.. math::

    D(R) = c_{xy}(d - 2 + R^2) - \tfrac{d-1}{2}(c_{xx} + c_{yy})R,\qquad
    c_{xy} = E_A\langle m(x), m(y)\rangle,

and the slow-motion constant is :math:`k = -D/(R(1-R^2))`: the follow-up's Theorem 4 states
:math:`k = 1`, its Step 2 expansion gives :math:`3/2` and ours :math:`2` (the book's
proposition on the slow-motion drift), all up to :math:`O(1/d)`.

**The mean-field sea** (:math:`\mu` uniform, the limit of infinitely many tokens).  By
rotation invariance :math:`m(x) = A_d(\beta|Ax|)\,Ax/|Ax|` with
:math:`A_d(\kappa) = I_{d/2}(\kappa)/I_{d/2-1}(\kappa)`, the mean resultant length of the
von Mises-Fisher law.  Only :math:`|Ax|, |Ay|, \langle Ax, Ay\rangle` enter, and they have
an exact law of three numbers: :math:`(a, b) = (W'^\top x, W'^\top y)` has the Gram matrix
:math:`\text{Wishart}_2(d, \sigma_{qk}^2\Sigma_R)`, :math:`\Sigma_R = (1, R; R, 1)`, and given
it :math:`(Wa, Wb)` has the Gram matrix :math:`\text{Wishart}_2(d, \sigma_{qk}^2
\operatorname{Gram}(a, b))`.  A draw costs :math:`O(1)` whatever :math:`d`.  At
:math:`\beta = \infty` (:math:`A_d = 1`), given :math:`(a, b)` the mean of the output cosine
is :math:`\varphi_d(R')` in closed form (:func:`gaussian_cosine_mean`) with
:math:`R' = \cos(a, b)`, and :math:`E R' = \varphi_d(R)`: both serve as control variates.

**A finite sea**: the tracers among :math:`n` tokens, the other :math:`n - 2` uniform on the
sphere and drawn afresh with every :math:`(W, W')`; :math:`m` is the literal softmax over
the :math:`n` tokens, :math:`O(nd)` a draw, with the same draw's mean-field :math:`m` as its
control variate.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from .._validation import check_int, check_real

__all__ = ["gaussian_cosine_mean", "resultant_length", "slow_drift_constant",
           "mean_field_kernel", "sea_kernel", "CONSTANTS"]

#: The slow-motion constant k of dR = -k R (1 - R^2) dt + dM by its source.
CONSTANTS = {"ours": 2.0, "printed expansion": 1.5, "Theorem 4": 1.0}


def gaussian_cosine_mean(r, d):
    r""":math:`\varphi_d(r) = E\langle u/|u|, v/|v|\rangle` for Gaussian vectors of
    :math:`R^d` with correlation :math:`r`:
    :math:`\frac2d\bigl(\Gamma(\frac{d+1}2)/\Gamma(\frac d2)\bigr)^2 r\,
    {}_2F_1(\frac12, \frac12; \frac d2 + 1; r^2)`."""
    r = np.asarray(r, dtype=float)
    c = math.exp(special.gammaln((d + 1) / 2) - special.gammaln(d / 2))
    f = np.atleast_1d(special.hyp2f1(0.5, 0.5, d / 2 + 1, r * r))
    bad = ~np.isfinite(f)
    if bad.any():
        # scipy returns nan for large d and r^2 near 1; the series converges fast there
        z, term = np.atleast_1d(r * r)[bad], np.ones(int(bad.sum()))
        total = term.copy()
        for k in range(20_000):
            term = term * (0.5 + k) ** 2 / ((d / 2 + 1 + k) * (k + 1)) * z
            total += term
            if np.all(term < 1e-17 * total):
                break
        f[bad] = total
    return (2.0 / d) * c * c * r * f.reshape(np.shape(r))


def resultant_length(kappa, d):
    r""":math:`A_d(\kappa) = I_{d/2}(\kappa)/I_{d/2-1}(\kappa)`: the length of the mean of the
    von Mises-Fisher law on :math:`S^{d-1}` with concentration :math:`\kappa` (the softmax
    over a uniform sphere, :math:`A_d \approx 1 - \frac{d-1}{2\kappa}` for large
    :math:`\kappa`).  Where the scaled Bessel functions underflow (:math:`\kappa \ll d`)
    Gauss's continued fraction, which converges fast there, takes over."""
    kappa = np.asarray(kappa, dtype=float)
    nu = d / 2.0
    with np.errstate(invalid="ignore", divide="ignore", under="ignore"):
        below = special.ive(nu - 1.0, kappa)
        out = np.atleast_1d(special.ive(nu, kappa) / below)
        bad = ~(np.isfinite(out) & (np.atleast_1d(below) > 1e-280))
        small = np.atleast_1d(kappa)[bad]
        # I_nu / I_(nu-1) = 1 / (2 nu / kappa + 1 / (2 (nu + 1) / kappa + ...))
        tail = np.zeros_like(small)
        for k in range(200, -1, -1):
            tail = 1.0 / (2.0 * (nu + k) / small + tail)
    out[bad] = tail
    return np.where(kappa == 0.0, 0.0, out.reshape(kappa.shape))


def slow_drift_constant(c_xy, c_xx, r, d):
    r"""The constant :math:`k = -D/(R(1-R^2))` of the drift
    :math:`D = c_{xy}(d-2+R^2) - (d-1)c_{xx}R` (with :math:`c_{yy} = c_{xx}`)."""
    drift = c_xy * (d - 2.0 + r * r) - (d - 1.0) * c_xx * r
    return -drift / (r * (1.0 - r * r))


def _check(r, d, beta, sigma_qk, n_samples):
    r = check_real("r", r, -1.0, 1.0, strict_min=True, strict_max=True)
    if r == 0.0:
        raise ValueError("r must be nonzero: the slow-motion constant divides by R(1 - R^2)")
    beta = math.inf if beta == math.inf else check_real("beta", beta, 0.0)
    return (r, check_int("d", d, 3), beta,
            check_real("sigma_qk", sigma_qk, 0.0, strict_min=True),
            check_int("n_samples", n_samples, 2))


def _wishart2(rng, d, cov):
    """Gram matrices of d i.i.d. N(0, cov) pairs, one per row of ``cov`` (n, 2, 2): Bartlett's
    factor (chi_d, 0; N, chi_(d-1)) under the Cholesky factor of ``cov``."""
    n = cov.shape[0]
    low = np.linalg.cholesky(cov)
    bart = np.zeros((n, 2, 2))
    bart[:, 0, 0] = np.sqrt(rng.chisquare(d, n))
    bart[:, 1, 1] = np.sqrt(rng.chisquare(d - 1, n))
    bart[:, 1, 0] = rng.standard_normal(n)
    f = low @ bart
    return f @ np.swapaxes(f, 1, 2)


def _mean_and_se(v):
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


def mean_field_kernel(r, d, beta, sigma_qk=1.0, *, n_samples=100_000, seed=0) -> dict:
    r""":math:`c_{xy}`, :math:`c_{xx}` and the constant :math:`k` over the mean-field sea,
    each with its standard error, by ``n_samples`` exact draws of the three numbers
    :math:`|Ax|^2, |Ay|^2, \langle Ax, Ay\rangle` (``beta = inf``: the Laplace limit
    :math:`m(x) = Ax/|Ax|`)."""
    r, d, beta, sigma_qk, n_samples = _check(r, d, beta, sigma_qk, n_samples)
    rng = np.random.default_rng(seed)
    s2 = sigma_qk * sigma_qk
    g1 = _wishart2(rng, d, np.broadcast_to(s2 * np.array([[1.0, r], [r, 1.0]]), (n_samples, 2, 2)))
    r1 = g1[:, 0, 1] / np.sqrt(g1[:, 0, 0] * g1[:, 1, 1])        # cos(W'^T x, W'^T y)
    g2 = _wishart2(rng, d, s2 * g1)
    nx, ny = np.sqrt(g2[:, 0, 0]), np.sqrt(g2[:, 1, 1])
    cos = g2[:, 0, 1] / (nx * ny)                                # cos(Ax, Ay)
    ax, ay = (np.ones(n_samples), np.ones(n_samples)) if math.isinf(beta) else (
        resultant_length(beta * nx, d), resultant_length(beta * ny, d))
    # c_xy = E[(A_x A_y - 1) cos] + E[phi_d(R') - k R'] + k phi_d(R): E[cos | a, b] is
    # phi_d(R') and E R' is phi_d(R), so the O(1/sqrt d) spread of the cosine cancels.
    k = 1.0 - 0.5 / d
    xy = (ax * ay - 1.0) * cos + gaussian_cosine_mean(r1, d) - k * r1 + k * gaussian_cosine_mean(r, d)
    xx = 0.5 * (ax * ax + ay * ay)
    return _kernel_out(xy, xx, r, d)


def _kernel_out(xy, xx, r, d):
    (c_xy, se_xy), (c_xx, se_xx) = _mean_and_se(xy), _mean_and_se(xx)
    const = slow_drift_constant(xy, xx, r, d)        # linear in (xy, xx): its mean is k
    k, se_k = _mean_and_se(const)
    return {"c_xy": c_xy, "c_xy_se": se_xy, "c_xx": c_xx, "c_xx_se": se_xx, "k": k, "k_se": se_k}


def sea_kernel(r, d, beta, n_tokens, sigma_qk=1.0, *, n_samples=10_000, seed=0,
               batch=64) -> dict:
    r""":math:`c_{xy}`, :math:`c_{xx}` and :math:`k` for tracers among ``n_tokens`` tokens, the
    others uniform on the sphere: the literal softmax attention, ``n_samples`` draws of
    :math:`(W, W')` and the sea, each minus the same draw's mean-field output (the control
    variate), plus :func:`mean_field_kernel` from its own ``4 n_samples`` draws."""
    r, d, beta, sigma_qk, n_samples = _check(r, d, beta, sigma_qk, n_samples)
    n_tokens = check_int("n_tokens", n_tokens, 2)
    if math.isinf(beta):
        raise ValueError("beta must be finite for a finite sea")
    rng = np.random.default_rng(seed)
    x = np.zeros(d)
    x[0] = 1.0
    y = np.zeros(d)
    y[0], y[1] = r, math.sqrt(1.0 - r * r)
    xy_parts, xx_parts = [], []
    for start in range(0, n_samples, batch):
        b = min(batch, n_samples - start)
        w = sigma_qk * rng.standard_normal((2, b, d, d))
        sea = rng.standard_normal((b, n_tokens - 2, d))
        sea /= np.linalg.norm(sea, axis=-1, keepdims=True)
        tokens = np.concatenate([np.broadcast_to(np.stack([x, y]), (b, 2, d)), sea], axis=1)
        q = np.einsum("sab,sbc,tc->sta", w[0], w[1].swapaxes(1, 2), np.stack([x, y]))  # A x, A y
        scores = beta * np.einsum("snd,std->stn", tokens, q)                 # (draw, tracer, n)
        scores -= scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        m = np.einsum("stn,snd->std", p / p.sum(axis=-1, keepdims=True), tokens)
        norm = np.linalg.norm(q, axis=-1)
        m_inf = resultant_length(beta * norm, d)[..., None] * q / norm[..., None]
        xy_parts.append(np.sum(m[:, 0] * m[:, 1], -1) - np.sum(m_inf[:, 0] * m_inf[:, 1], -1))
        xx_parts.append(0.5 * (np.sum(m * m, -1) - np.sum(m_inf * m_inf, -1)).sum(-1))
    field = mean_field_kernel(r, d, beta, sigma_qk, n_samples=4 * n_samples, seed=seed + 1)
    diff = _kernel_out(np.concatenate(xy_parts), np.concatenate(xx_parts), r, d)
    out = {}
    for key in ("c_xy", "c_xx", "k"):
        out[key] = field[key] + diff[key]
        out[f"{key}_se"] = math.hypot(field[f"{key}_se"], diff[f"{key}_se"])
    return out
