r"""Limits of the non-centred random-attention model: the mean attention field, ODE I, ODE II, SDE.

The follow-up's layer (:mod:`stochastic_transformers.random_attention`) with weight means
:math:`\bar V = E V_h` and :math:`\bar A = E A_h` adds to token :math:`x_i` the increment
:math:`\frac{\eta}{H}\sum_h B_{\theta_h}(x_i)`, :math:`B_\theta(x_i) = V m_A(x_i)`,
:math:`m_A(x_i) = \sum_j \operatorname{softmax}_j(\beta\langle A x_i, x_j\rangle)\,x_j`.
Its mean is the *mean attention field*

.. math::

    F_i(X) = E_\theta B_\theta(x_i) = \bar V\, E_A\, m_A(x_i)

(V is independent of A), and the follow-up's drift is its tangent part
:math:`b_i = P^\perp_{x_i} F_i` (its Section 3).  With :math:`\sigma_{qk} = 0`
(:math:`A = \bar A`) the expectation is the deterministic attention of the "mathematical
perspective" papers; otherwise it is a Gaussian (or Rademacher) expectation over
:math:`W, W'`, done here by Monte Carlo over a fixed antithetic sample (common to every
configuration, so the field is smooth in X), with its standard error.

**ODE I** is :math:`\dot X = b(X)` (the follow-up's ballistic Corollary).  **ODE II** is
its modified equation.  For the normalised Euler step :math:`x \mapsto (x + \eta F)/|x + \eta F|`
write :math:`F = b + c\,x`, :math:`c = \langle x, F\rangle`; expanding the normalisation,
one step is :math:`x + \eta b - \eta^2(c\,b + \tfrac12|b|^2 x) + O(\eta^3)`, and matching
it with the flow of :math:`\dot y = b + \eta b_1` over time :math:`\eta` gives (our
derivation)

.. math::

    b_1 = -\tfrac12\nabla_b b - c\,b,\qquad \nabla_b b = P^\perp\,(Db)[b],

the covariant derivative of b along itself.  The follow-up's modified drift (its Section 4.1)
is :math:`b - \frac\eta2\nabla_b b`; the extra :math:`-\eta c b` comes from the
normalisation when F has a normal component (:math:`c \ne 0`), and slows the motion along
the flow (a change of clock).  :func:`modified_drift` gives both forms; the tests check
that ours matches one step of the chain to :math:`O(\eta^3)` and the printed one only to
:math:`O(\eta^2)` when :math:`c \ne 0`.

**SDE** (the follow-up's Theorem 1, its eq. 3.5 with the modified drift): the same drift
plus the common noise of covariance :math:`\frac{\eta}{H}\operatorname{Cov}(\xi_\theta)` per
unit time, :math:`\xi_\theta = B_\theta - F`, and the normalisation's Ito correction.
:func:`sde_paths` integrates it by the normalised Euler scheme at a step :math:`h = \eta/k`
(the same noise per unit time, drawn from the weights' own law), with the field
:math:`F + (h - \eta)(\tfrac12\nabla_b b + c\,b)` so that the scheme's own :math:`O(h)`
modified drift is replaced by the one at the chain's :math:`\eta`: its weak error is
:math:`O(h)` below the chain's, a factor k smaller (ours, a weak scheme).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import integrate

from .._validation import ETA_MAX, check_choice, check_int, check_real, check_real_array
from ..config import ModelConfig

__all__ = ["mean_field", "drift", "covariant_derivative", "modified_drift", "ode_path",
           "sde_paths", "CORRECTIONS", "turning_mean_value", "turning_group",
           "upper_hemisphere_tokens", "phase", "expected_limit", "head_output_moments",
           "linear_noise_covariance", "linear_noise_spread"]

#: Forms of the ODE II drift: ``ours`` (:math:`b - \eta(\frac12\nabla_b b + cb)`) and
#: ``printed`` (the follow-up's :math:`b - \frac\eta2\nabla_b b`).
CORRECTIONS = ("ours", "printed")


def _check_model(model):
    if not isinstance(model, ModelConfig) or model.kind != "random_attention":
        raise ValueError("the limits take a ModelConfig with kind='random_attention'")
    return model


def _weight_sample(model, n_samples, seed):
    """A fixed antithetic sample of (W, W') of the model's law: shape (2, 2 n_samples, d, d)."""
    rng = np.random.default_rng(seed)
    d = model.d
    if model.qk_law == "gaussian":
        half = rng.standard_normal((2, n_samples, d, d))
    else:
        half = rng.choice([-1.0, 1.0], size=(2, n_samples, d, d))
    w = model.sigma_qk * half
    # (W, W') and (-W, W') have the same law; the pair cancels the odd part of the error.
    return np.concatenate([w, w * np.array([-1.0, 1.0])[:, None, None, None]], axis=1)


def _attend(scores, x):
    """softmax over the last axis of ``scores`` (..., N, N) applied to tokens x (..., N, d)."""
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ x


def _check_points(x, model):
    """Tokens ``x`` at which a field is evaluated: a finite float array (..., N, d) with the
    model's d, so that a wrong dimension is named instead of failing inside einsum."""
    x = check_real_array("x", x)
    if x.ndim < 2 or x.shape[-1] != model.d or x.shape[-2] < 1:
        raise ValueError(f"x must be a (..., N, {model.d}) array of tokens (the model's "
                         f"d = {model.d} on the last axis); got shape {x.shape}")
    return x


def mean_field(x, model: ModelConfig, *, n_samples=2048, seed=0, return_se=False):
    r"""The mean attention field :math:`F_i = \bar V E_A m_A(x_i)` at tokens ``x`` (..., N, d).

    Exact when ``model.sigma_qk`` is 0; otherwise a Monte Carlo mean over ``2 n_samples``
    antithetic draws of :math:`(W, W')` fixed by ``seed`` (the same draws for every X, so
    the field is smooth in X), and with ``return_se`` its standard error (from the
    ``n_samples`` antithetic pair means).
    """
    model = _check_model(model)
    x = _check_points(x, model)
    vbar, abar = model.mean_v_matrix, model.mean_qk_matrix
    base = model.beta * np.einsum("...ia,ba,...jb->...ij", x, abar, x)  # beta <Abar x_i, x_j>
    if model.sigma_qk == 0.0:
        f = _attend(base, x) @ vbar.T
        return (f, np.zeros_like(f)) if return_se else f
    n_samples = check_int("n_samples", n_samples, 1)
    w, wp = _weight_sample(model, n_samples, seed)
    q = np.einsum("...ja,sab->s...jb", x, w)     # W^T x_j
    p = np.einsum("...ia,sab->s...ib", x, wp)    # W'^T x_i
    outs = _attend(base + model.beta * np.einsum("s...ib,s...jb->s...ij", p, q), x) @ vbar.T
    pairs = 0.5 * (outs[:n_samples] + outs[n_samples:])
    f = pairs.mean(axis=0)
    if return_se:
        return f, pairs.std(axis=0, ddof=1) / math.sqrt(n_samples)
    return f


def _tangent(x, v):
    return v - np.sum(v * x, axis=-1, keepdims=True) * x


def drift(x, model: ModelConfig, **quad):
    r"""The follow-up's drift :math:`b_i = P^\perp_{x_i} F_i(X)` (tokens on the last axis)."""
    x = np.asarray(x, dtype=float)
    return _tangent(x, mean_field(x, model, **quad))


def covariant_derivative(x, u, model: ModelConfig, *, step=1e-5, **quad):
    r""":math:`\nabla_u b = P^\perp (Db)[u]`, by a central difference of the drift along the
    tangent field ``u`` (``step`` relative to the size of u; error :math:`O(\text{step}^2)`)."""
    x = np.asarray(x, dtype=float)
    size = max(float(np.max(np.abs(u))), 1e-300)
    eps = step / size
    db = (drift(x + eps * u, model, **quad) - drift(x - eps * u, model, **quad)) / (2.0 * eps)
    return _tangent(x, db)


def _correction(x, model, form, f=None, **quad):
    """The O(eta) part ``-b_1`` of the modified drift: 1/2 nabla_b b (+ c b for ``ours``);
    ``f``, the mean field at ``x``, when the caller has it already."""
    if f is None:
        f = mean_field(x, model, **quad)
    b = _tangent(x, f)
    corr = 0.5 * covariant_derivative(x, b, model, **quad)
    if form == "ours":
        corr = corr + np.sum(f * x, axis=-1, keepdims=True) * b
    return b, corr


def modified_drift(x, model: ModelConfig, eta, *, form="ours", **quad):
    r"""The ODE II drift: ``ours`` :math:`b - \eta(\frac12\nabla_b b + \langle x, F\rangle b)`
    or ``printed`` :math:`b - \frac\eta2\nabla_b b` (module docstring)."""
    eta = check_real("eta", eta, 0.0, ETA_MAX)
    form = check_choice("form", form, CORRECTIONS)
    b, corr = _correction(np.asarray(x, dtype=float), model, form, **quad)
    return b - eta * corr


def _check_tokens(x0, model):
    x0 = np.asarray(x0, dtype=float)
    if x0.ndim != 2 or x0.shape[1] != model.d or x0.shape[0] < 1 or not np.all(np.isfinite(x0)):
        raise ValueError(f"x0 must be a finite (N, {model.d}) array of tokens; got shape {x0.shape}")
    norms = np.linalg.norm(x0, axis=1)
    if np.any(np.abs(norms - 1.0) > 1e-9):
        raise ValueError("x0 must hold unit vectors (tokens on the sphere)")
    return x0


def ode_path(x0, model: ModelConfig, times, *, eta=0.0, form="ours", rtol=1e-10, atol=1e-12,
             **quad):
    r"""Tokens of ODE I (``eta`` = 0) or ODE II (``eta`` > 0, drift :func:`modified_drift`)
    at ``times`` (increasing, from 0), from ``x0`` (N, d).  Returns (len(times), N, d).

    Integrated by scipy's DOP853 at tolerances ``rtol``, ``atol`` (the drift is tangent, so
    the flow stays on the sphere to that accuracy).
    """
    model = _check_model(model)
    x0 = _check_tokens(x0, model)
    times = np.atleast_1d(check_real_array("times", times, 0.0))
    if np.any(np.diff(times) < 0):
        raise ValueError("times must be increasing")
    shape = x0.shape

    def rhs(_t, y):
        return modified_drift(y.reshape(shape), model, eta, form=form, **quad).ravel()

    if eta == 0.0:
        def rhs(_t, y):  # noqa: F811 - ODE I needs no derivative of b
            return drift(y.reshape(shape), model, **quad).ravel()

    sol = integrate.solve_ivp(rhs, (0.0, float(times[-1])), x0.ravel(), method="DOP853",
                              t_eval=times, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"ODE integration failed: {sol.message}")
    return sol.y.T.reshape(times.size, *shape)


def _check_sde_args(model, x0, eta, times, n_paths, substeps):
    """The arguments of :func:`sde_paths`, checked (each error names its argument)."""
    model = _check_model(model)
    if model.noise != "common":
        raise ValueError("sde_paths integrates the follow-up's common-noise SDE; got "
                         f"noise={model.noise!r}")
    x0 = _check_tokens(x0, model)
    eta = check_real("eta", eta, 0.0, ETA_MAX, strict_min=True)
    times = np.atleast_1d(check_real_array("times", times, 0.0))
    if np.any(np.diff(times) < 0):
        raise ValueError("times must be increasing")
    return (model, x0, eta, times, check_int("n_paths", n_paths, 1),
            check_int("substeps", substeps, 1))


def sde_paths(x0, model: ModelConfig, eta, times, n_paths, *, substeps=8, seed=0,
              drift_correction=True, n_samples=256, progress=False):
    r"""Tokens at ``times`` (increasing, from 0) of ``n_paths`` paths of the SDE (module
    docstring) for the chain of step ``eta`` (the model's noise per unit time
    :math:`\frac{\eta}{H}\operatorname{Cov}\xi`), from ``x0`` (N, d): shape
    (len(times), n_paths, N, d).

    Normalised Euler at step :math:`h = \eta/`\ ``substeps``, shortened where needed to
    land on every time.  ``drift_correction`` gives the drift the chain's modified part
    (eq. 3.5 of the follow-up, in our form); without it the limit is the SDE with drift b.
    The weights' fluctuations are drawn from the model's own laws with ``seed`` (with
    :math:`\sigma_{qk} > 0`, each as the difference of two independent draws over
    :math:`\sqrt2`, exactly centred); the mean field of such a model (in the drift only)
    uses ``n_samples`` antithetic pairs.
    """
    model, x0, eta, times, n_paths, substeps = _check_sde_args(model, x0, eta, times, n_paths,
                                                               substeps)
    rng = np.random.default_rng(seed)
    h_nominal = eta / substeps
    # the step grid: nominal steps, cut at every requested time
    edges = np.union1d(np.arange(0.0, times[-1], h_nominal), times)
    edges = edges[np.r_[True, np.diff(edges) > 1e-12 * max(1.0, times[-1])]]
    x = np.broadcast_to(x0, (n_paths, *x0.shape)).copy()
    out = np.empty((times.size, *x.shape))
    out[times == 0.0] = x
    ptr = int(np.sum(times == 0.0))
    d, heads = model.d, model.n_heads
    vbar, abar = model.mean_v_matrix, model.mean_qk_matrix
    quad = {"n_samples": n_samples}

    def draw(law, size):
        if law == "gaussian":
            return rng.standard_normal(size)
        return rng.choice([-1.0, 1.0], size=size)

    def self_output(x, base):
        """B_theta(x_i) = V m_A(x_i) for one fresh draw of (V, W, W') per path."""
        scores = base
        if model.sigma_qk > 0.0:
            w = model.sigma_qk * draw(model.qk_law, (n_paths, d, d))
            wp = model.sigma_qk * draw(model.qk_law, (n_paths, d, d))
            scores = base + model.beta * np.einsum("pia,pab,pjc,pcb->pij", x, wp, x, w)
        v = vbar + model.sigma * draw(model.values, (n_paths, d, d))
        return np.einsum("pab,pib->pia", v, _attend(scores, x))

    steps = range(edges.size - 1)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc="SDE paths", unit="step")
    for k in steps:
        h = edges[k + 1] - edges[k]
        f = mean_field(x, model, **quad)
        field = f
        if drift_correction:
            _b, corr = _correction(x, model, "ours", f, **quad)
            field = f + (h - eta) * corr
        # The heads' fluctuations xi = B_theta - F, scaled so that their variance per unit
        # time is the chain's (eta / H) Cov(xi): sqrt(eta / h) per step.  With sigma_qk = 0
        # the field is exact and xi = B_theta - f; otherwise f is a Monte Carlo mean and
        # B_theta - f would carry its error into the drift (times sqrt(eta / h)), so xi is
        # drawn as (B_theta - B_theta') / sqrt(2) from two independent draws: exactly
        # centred, with the covariance of xi.
        fluct = np.zeros_like(x)
        base = model.beta * np.einsum("pia,ba,pjb->pij", x, abar, x)
        for _head in range(heads):
            if model.sigma_qk == 0.0:
                fluct += self_output(x, base) - f
            else:
                fluct += (self_output(x, base) - self_output(x, base)) / math.sqrt(2.0)
        x = x + h * field + math.sqrt(h * eta) / heads * fluct
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
        while ptr < times.size and abs(times[ptr] - edges[k + 1]) <= 1e-9 * max(1.0, times[-1]):
            out[ptr] = x
            ptr += 1
    return out


# ------------------------------------------------------------------ the noise of many heads

def head_output_moments(x, model: ModelConfig, *, n_samples=2048, seed=0):
    r"""The two parts of the covariance of one head's output :math:`B_\theta(x_i) = V
    m_A(x_i)` across the tokens ``x`` (N, d), each of shape (N, d, N, d):

    .. math::

        \operatorname{Cov}(B_{ia}, B_{kb}) = \underbrace{\bigl(\bar V E[m_i m_k^\top]\bar V^\top
        - F_i F_k^\top\bigr)_{ab}}_{C^A} + \sigma^2\,\underbrace{E\langle m_i, m_k\rangle
        \,\delta_{ab}}_{C^V},

    exact in V (its entries are independent of A, mean :math:`\bar V`, variance
    :math:`\sigma^2`, whatever their law), a Monte Carlo mean over the antithetic sample of
    :func:`mean_field` for the keys and queries (exact when ``model.sigma_qk`` is 0, where
    :math:`C^A = 0`).  :math:`C^A` is the noise of the keys and queries alone, the
    follow-up's :math:`\int\xi_\theta\xi_\theta^\top\rho_*(d\theta)` at
    :math:`\sigma = 0`.
    """
    model = _check_model(model)
    x = _check_points(x, model)
    if x.ndim != 2:
        raise ValueError(f"x must be one configuration of tokens (N, d); got shape {x.shape}")
    vbar, abar = model.mean_v_matrix, model.mean_qk_matrix
    base = model.beta * np.einsum("ia,ba,jb->ij", x, abar, x)
    if model.sigma_qk == 0.0:
        m = _attend(base, x)[None]                                       # (1, N, d)
    else:
        w, wp = _weight_sample(model, check_int("n_samples", n_samples, 1), seed)
        scores = base + model.beta * np.einsum("ia,sab,jc,scb->sij", x, wp, x, w)
        m = _attend(scores, x[None])                                     # (S, N, d)
    out = m @ vbar.T                                                     # V-bar m, (S, N, d)
    f = out.mean(axis=0)
    c_a = (np.einsum("sia,skb->iakb", out, out) / out.shape[0]
           - np.einsum("ia,kb->iakb", f, f))
    gram = np.einsum("sia,ska->ik", m, m) / m.shape[0]                   # E <m_i, m_k>
    c_v = np.einsum("ik,ab->iakb", gram, np.eye(model.d))
    return c_a, c_v


def _layer_jacobian(step, x, fd_step):
    """The Jacobian (x.size, x.size) of the map ``step`` at x, by central differences."""
    jac = np.empty((x.size, x.size))
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = fd_step
        jac[:, k] = (step(x + e.reshape(x.shape)) - step(x - e.reshape(x.shape))).ravel()
    return jac / (2.0 * fd_step)


def linear_noise_covariance(x0, model: ModelConfig, n_layers, *, n_samples=2048, n_batches=8,
                            seed=0, fd_step=1e-6):
    r"""The covariance of the chain's tokens after ``n_layers`` layers from ``x0`` (N, d), at
    leading order in its noise (ours): per batch, the parts :math:`\Sigma^A, \Sigma^V` of
    :math:`H\Sigma = \Sigma^A + \sigma^2\Sigma^V`, shape (2, batches, N d, N d).

    About the noise-free path :math:`\bar X^{l+1} = G(\bar X^l)`,
    :math:`G(X) = \operatorname{normalize}(X + \eta F(X))` (the chain of infinitely many
    heads), a layer's deviation obeys
    :math:`\delta^{l+1} = J_l\delta^l + P_l\,\frac\eta H\sum_h\xi_h + O(|\delta|^2 + \eta^2/H)`,
    :math:`J_l = DG(\bar X^l)` and :math:`P_l` the derivative of the normalisation at
    :math:`\bar X^l + \eta F(\bar X^l)`.  The H heads' fluctuations are independent, each of
    covariance :math:`C = C^A + \sigma^2 C^V` (:func:`head_output_moments`), so the deviations'
    covariance obeys :math:`\Sigma^{l+1} = J_l\Sigma^l J_l^\top + \frac{\eta^2}{H}P_lC_lP_l^\top`,
    :math:`1/H` times a constant up to :math:`O(1/H^2)`: the heads enter only through the
    follow-up's :math:`\alpha\propto\eta/H`.  :math:`J_l` is a central difference of G (step
    ``fd_step``) and G uses the mean field of one sample of ``n_samples`` antithetic pairs;
    the covariances C come from ``n_batches`` further samples (one batch when
    ``model.sigma_qk`` is 0, where C is exact).  The spread of the batches measures C's
    sampling error only, not the mean field's.
    """
    model = _check_model(model)
    x = _check_tokens(x0, model)
    n_layers = check_int("n_layers", n_layers, 1)
    n_batches = check_int("n_batches", n_batches, 2)
    n_samples = check_int("n_samples", n_samples, 1)
    eta, size = model.eta, x.size
    field = {"n_samples": n_samples, "seed": seed}

    def step(y):
        y = y + eta * mean_field(y, model, **field)
        return y / np.linalg.norm(y, axis=-1, keepdims=True)

    batches = n_batches if model.sigma_qk > 0.0 else 1
    sigma = np.zeros((2, batches, size, size))          # the A and V parts, per batch
    for _layer in range(n_layers):
        jac = _layer_jacobian(step, x, fd_step)
        y = x + eta * mean_field(x, model, **field)
        r = np.linalg.norm(y, axis=-1)
        u = y / r[:, None]
        proj = np.zeros((size, size))
        for i in range(x.shape[0]):
            blk = slice(i * model.d, (i + 1) * model.d)
            proj[blk, blk] = (np.eye(model.d) - np.outer(u[i], u[i])) / r[i]
        for b in range(batches):
            parts = head_output_moments(x, model, n_samples=n_samples, seed=seed + 1 + b)
            for p, c in enumerate(parts):
                noise = proj @ c.reshape(size, size) @ proj.T
                sigma[p, b] = jac @ sigma[p, b] @ jac.T + eta * eta * noise
        x = u
    return sigma


def linear_noise_spread(x0, model: ModelConfig, n_layers, **options):
    r"""The spread :math:`S = \frac1N\sum_i E|x_i^L - E x_i^L|^2` of the chain after
    ``n_layers`` layers, at leading order in its noise (ours): the parts ``(S_A, S_V)`` of
    :math:`H S = S_A + \sigma^2 S_V`, each as (mean, s.e. over the batches); the trace over N
    of :func:`linear_noise_covariance` (same ``options``).
    """
    sigma = linear_noise_covariance(x0, model, n_layers, **options)
    spread = np.trace(sigma, axis1=2, axis2=3) / np.asarray(x0).shape[0]      # (2, batches)
    mean = spread.mean(axis=1)
    se = (spread.std(axis=1, ddof=1) / math.sqrt(spread.shape[1]) if spread.shape[1] > 1
          else np.zeros(2))
    return (float(mean[0]), float(se[0])), (float(mean[1]), float(se[1]))


# ------------------------------------------------------------------ the turning group
# The model on which the follow-up pages measure these limits (homog_limits, homog_rate).

def turning_mean_value(d, attract, turn):
    r""":math:`\bar V = vI + wJ` (``attract`` v, ``turn`` w), J the rotation generator of the
    first two coordinates, as a tuple of tuples (``ModelConfig.mean_v``)."""
    turn = check_real("turn", turn)
    m = check_real("attract", attract) * np.eye(check_int("d", d, 2))
    m[0, 1], m[1, 0] = -turn, turn
    return tuple(tuple(float(v) for v in row) for row in m)


def turning_group(d, beta, attract, turn, *, eta, sigma):
    r"""The follow-up's model, one head, with :math:`\bar A = I` exactly
    (:math:`\sigma_{qk} = 0`, so the mean field is exact) and :math:`\bar V` =
    :func:`turning_mean_value`: the tokens gather (``attract``) while the group turns about
    the last axis (``turn``).  Step ``eta``, value noise ``sigma``: the noise per unit time
    is :math:`\alpha = \eta\sigma^2`."""
    return ModelConfig(d=d, beta=beta, kind="random_attention", eta=eta, sigma=sigma,
                       sigma_qk=0.0, mean_qk=1.0, mean_v=turning_mean_value(d, attract, turn))


def upper_hemisphere_tokens(n_tokens, d, seed=12345):
    """Fixed starting tokens (n_tokens, d): Gaussian directions whose last coordinate is
    moved to ``|x_d| + 1/2`` before normalising, so all lie in the upper hemisphere."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((check_int("n_tokens", n_tokens, 1), check_int("d", d, 2)))
    x[:, -1] = np.abs(x[:, -1]) + 0.5
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def phase(x):
    r"""The observable :math:`\varphi(X) = \frac1N\sum_i\langle x_i, e_1\rangle` of tokens
    (..., N, d): it sees the turning group's phase about the last axis."""
    return np.asarray(x)[..., 0].mean(axis=-1)


def expected_limit(gamma, nu):
    r"""The limit the follow-up's corollaries give for :math:`\eta = L^{-\gamma}` and noise
    :math:`t_L\alpha = L^{\nu}` (our reading of their map): ``"noise"`` (noise dominates) for
    :math:`\nu > 0`, ``"sde"`` at :math:`\nu = 0` and :math:`\gamma > 1/3` (``"open"``, no
    definite prediction, at :math:`\gamma \le 1/3`, where the neglected :math:`O(\eta^2)`
    drift is not small), and for :math:`\nu < 0` the ballistic
    ``"ode1"`` when :math:`\gamma > 1/2`, the modified ``"ode2"`` when
    :math:`1/3 < \gamma \le 1/2`, ``"none"`` below (beyond the modified equation)."""
    gamma, nu = check_real("gamma", gamma), check_real("nu", nu)
    if nu > 0:
        return "noise"
    if nu == 0:
        return "sde" if gamma > 1.0 / 3.0 else "open"
    if gamma > 0.5:
        return "ode1"
    return "ode2" if gamma > 1.0 / 3.0 else "none"
