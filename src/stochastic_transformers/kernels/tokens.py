r"""N tokens through the full layer map (methods ``literal`` and ``gaussian_dn``; the hybrid model).

``literal``
    draws the whole :math:`d\times d` value matrix of every layer from the requested law
    (Gaussian, uniform or Rademacher) and applies it: the reference every faster path is
    tested against.
``gaussian_dn``
    Gaussian values only.  :math:`V[A_1\dots A_N] = (VQ)R` with :math:`R` the triangular
    factor of the attention outputs, and :math:`VQ` is a :math:`d\times\min(d,N)` standard
    Gaussian matrix: :math:`dN` normals a layer instead of :math:`d^2`.
hybrid
    the scalar weight :math:`w = 1/L + \varepsilon\xi/\sqrt L`: one normal a layer.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .. import attention as _att
from .. import rng as _rng
from .._jit import JIT, JIT_PARALLEL
from .common import Runner, fill_random, given_tokens, record_grams, recorded, start_tokens

_LAW_CODES = {"gaussian": 0, "uniform": 1, "rademacher": 2}
#: The compiled code of each layer normalisation (:data:`stochastic_transformers.config.NORMS`).
NORM_CODES = {"post": _att.POST, "pre": _att.PRE, "peri": _att.PERI, "ngpt": _att.NGPT}


def dn_is_faster(n_tokens: int, d: int) -> bool:
    """Whether the d*N path beats the literal one for N Gaussian tokens in dimension d.

    It draws d*min(d, N) normals a layer instead of d^2 but pays a QR factorisation of the
    attention outputs; measured on the project's 2-core machine (benchmarks/bench_simulators.py
    and repeated runs of both methods), it wins for N = 2 from d = 4 on and for N = 3 from
    d = 6 on (by 20-60%), and at N >= 3 with d < 2N it is 5-18% slower (N = 3, d = 4: 14% in
    the benchmark).  Near d = 2N the two are within the run-to-run spread.
    """
    return d >= 2 * n_tokens
_SQRT3 = math.sqrt(3.0)


@nb.njit(**JIT)
def _value_entry(state, law, sigma):
    """One centred entry of V with variance sigma^2 from law 0/1/2 (Gauss/uniform/Rademacher)."""
    if law == 0:
        return sigma * _rng.normal(state)
    if law == 1:
        return sigma * _SQRT3 * (2.0 * _rng.uniform(state) - 1.0)
    return sigma if (_rng.next_u64(state) >> np.uint64(63)) != 0 else -sigma


@nb.njit(inline="always", **JIT)
def token_layer(state, kind, law, x, h, B, beta, softmax, b_identity, sigma, inv_l, epsilon,
                 v, g, att, m, r, y, bx, weights, hv, self_scale, norm=_att.POST, causal=False):
    """One layer of N tokens, in place on ``x``, drawing its noise from ``state``.

    ``kind`` 0: literal (a full d x d V of law ``law``); 1: Gaussian d*N reduction
    (``g`` is d x min(d, N)); 2: hybrid (one normal).  ``norm`` is the layer's
    normalisation (:data:`NORM_CODES`), ``causal`` the decoder's mask.  The other arrays
    are scratch space.
    """
    d = x.shape[1]
    if kind == 0:
        if law == 0:   # the Gaussian entry of _value_entry, without a call per entry
            fill_random(state, v, sigma, False)
        else:
            for a in range(d):
                for b in range(d):
                    v[a, b] = _value_entry(state, law, sigma)
        _att.layer_literal(x, v, h, B, beta, softmax, att, y, bx, weights, b_identity,
                           self_scale, norm, causal)
    elif kind == 1:
        fill_random(state, g, sigma, False)
        _att.layer_gaussian_dn(x, g, h, B, beta, softmax, att, m, r, y, bx, weights,
                               b_identity, hv, self_scale, norm, causal)
    else:
        w = inv_l + epsilon * _rng.normal(state) * h
        _att.layer_hybrid(x, w, B, beta, softmax, att, y, bx, weights, b_identity,
                          self_scale, norm, causal)


@nb.njit(inline="always", **JIT)
def layer_scratch(n_tok, d):
    """Scratch arrays of :func:`token_layer` for one trajectory (allocated once, reused
    every layer): att, y, bx (N, d); m (d, N); r (k, N) and g (d, k) with k = min(d, N);
    v (d, d); weights, self_scale (N,); hv (d,)."""
    k = min(d, n_tok)
    return (np.empty((n_tok, d)), np.empty((n_tok, d)), np.empty((d, n_tok)),
            np.empty((k, n_tok)), np.empty((d, d)), np.empty((d, k)), np.empty((n_tok, d)),
            np.empty(n_tok), np.empty(n_tok), np.empty(d))


@nb.njit(**JIT_PARALLEL)
def _tokens_kernel(key0, key1, first, n, n_tok, d, n_layers, kind, law, beta, softmax, B,
                   b_identity, h, sigma, inv_l, epsilon, x0, init_mode, z0, rec_layers, rec_gram,
                   x_out, norm, causal):
    """Run ``n`` trajectories of N tokens.

    ``kind`` 0: literal (a full d x d V of law ``law`` per layer); 1: Gaussian d*N
    reduction; 2: hybrid (one normal per layer).  ``init_mode`` 0: i.i.d. uniform
    tokens; 1: the given ``x0[t]``; 2: a uniformly random pair at overlap ``z0``.
    """
    for t in nb.prange(n):
        state, x = start_tokens(key0, key1, first + t, n_tok, d, init_mode, x0[t], z0)
        att, y, m, r, v, g, bx, weights, self_scale, hv = layer_scratch(n_tok, d)
        ptr = 0
        for layer in range(0, n_layers + 1):
            if layer > 0:
                token_layer(state, kind, law, x, h, B, beta, softmax, b_identity, sigma, inv_l,
                             epsilon, v, g, att, m, r, y, bx, weights, hv, self_scale, norm,
                             causal)
            ptr = record_grams(rec_gram[t], rec_layers, ptr, layer, x)
        x_out[t] = x


def layer_kind(plan) -> int:
    """The ``kind`` code of :func:`token_layer` for a plan: 0 literal, 1 the d*N
    reduction, 2 hybrid."""
    if plan.kind == "hybrid":
        return 2
    return {"literal": 0, "gaussian_dn": 1}[plan.method]


def init_mode(plan) -> int:
    """The ``init_mode`` of :func:`.common.init_tokens` for a plan: 1 given tokens, 2 a pair
    at overlap z0, 0 i.i.d. uniform."""
    return 1 if plan.x0 is not None else (2 if plan.z0 is not None else 0)


def allocate_tokens(plan):
    """The given tokens, the final tokens and the recorded Gram matrices of a run."""
    n, n_tok = plan.n_traj, plan.n_tokens
    return dict(x0=given_tokens(plan), x=np.empty((n, n_tok, plan.d)),
                rec_gram=np.empty((n, plan.rec.size, n_tok, n_tok)))


def _run(plan, a, lo, hi):
    _tokens_kernel(plan.key0, plan.key1, plan.first_trajectory + lo, hi - lo, plan.n_tokens,
                   plan.d, plan.n_layers, layer_kind(plan), _LAW_CODES[plan.values], plan.beta,
                   plan.softmax, plan.B, plan.b_is_identity, plan.h, plan.sigma, 1.0 / plan.L,
                   plan.epsilon, a["x0"][lo:hi], init_mode(plan),
                   0.0 if plan.z0 is None else plan.z0, plan.rec, a["rec_gram"][lo:hi],
                   a["x"][lo:hi], NORM_CODES[plan.norm], plan.causal)


def assemble_tokens(plan, a):
    """Final Gram matrices and tokens, and the recorded Gram matrices (no early stopping)."""
    x = a["x"]
    data = {"gram": (("trajectory", "i", "j"), np.einsum("tia,tja->tij", x, x)),
            "tokens": (("trajectory", "i", "component"), x)}
    if plan.times is not None:
        data["gram_t"] = recorded(plan, a["rec_gram"])
    return data, np.full(plan.n_traj, -1)


RUNNER = Runner(allocate_tokens, _run, assemble_tokens)
