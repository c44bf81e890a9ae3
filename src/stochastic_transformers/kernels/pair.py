r"""Two tokens: the overlap chain (methods ``overlap_chain`` of the stochastic and hybrid models).

By rotation invariance the overlap :math:`Z_n = \langle X^1_n, X^2_n\rangle` of two tokens
with Gaussian values and :math:`B = I` is itself a Markov chain.  Its state is the pair of
half angles :math:`(s, c) = (\sin\frac\theta2, \cos\frac\theta2)`, which keeps full relative
precision at both poles; a stochastic layer draws seven numbers (a :math:`2\times2` Gaussian
block and the Bartlett factor of a Wishart(:math:`d-2`) matrix,
:func:`stochastic_transformers.attention.pair_layer_stochastic`), a hybrid layer one.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .. import attention as _att
from .. import rng as _rng
from .._jit import JIT_PARALLEL
from .common import Runner, draw_pair_noise, half_angle_outputs, start_pair
from .tokens import NORM_CODES


@nb.njit(**JIT_PARALLEL)
def _pair_kernel(key0, key1, first, n, d, n_layers, beta, softmax, h, sigma, inv_l, epsilon,
                 hybrid, s0, c0, init_mode, s_stop, c_stop, rec_layers, rec_s, rec_c,
                 s_out, c_out, stopped_layer):
    """Run ``n`` two-token trajectories (global indices first..first+n-1) of the overlap chain.

    ``init_mode`` 0: uniform independent tokens; 1: the given (s0[t], c0[t]).
    Stochastic layers use 7 random numbers (see :func:`attention.pair_layer_stochastic`),
    hybrid layers one.  A trajectory stops once ``s < s_stop`` or ``c < c_stop``; its
    remaining records then carry the frozen state.
    """
    for t in nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        s, c = start_pair(state, key0, key1, first + t, d, init_mode, s0, c0, t)
        ptr = 0
        while ptr < rec_layers.size and rec_layers[ptr] == 0:
            rec_s[t, ptr] = s
            rec_c[t, ptr] = c
            ptr += 1
        stop = -1
        z = np.empty(7)
        for layer in range(1, n_layers + 1):
            one, ksum, kdiff = _att.pair_weights_scaled(s, beta, softmax)
            if hybrid:
                w = inv_l + epsilon * _rng.normal(state) * h
                s, c = _att.pair_step(s, c, one + w * ksum, 0.0, 0.0,
                                      0.0, one + w * kdiff, 0.0, 0.0)
            else:
                draw_pair_noise(state, d, z)
                s, c = _att.pair_layer_stochastic_scaled(s, c, one, h * sigma * ksum,
                                                         h * sigma * kdiff, z)
            while ptr < rec_layers.size and rec_layers[ptr] == layer:
                rec_s[t, ptr] = s
                rec_c[t, ptr] = c
                ptr += 1
            if s < s_stop or c < c_stop:
                stop = layer
                break
        while ptr < rec_layers.size:
            rec_s[t, ptr] = s
            rec_c[t, ptr] = c
            ptr += 1
        s_out[t] = s
        c_out[t] = c
        stopped_layer[t] = stop


@nb.njit(**JIT_PARALLEL)
def _other_layer_kernel(key0, key1, first, n, d, n_layers, beta, norm, causal, h, sigma,
                        inv_l, epsilon, hybrid, s0, c0, init_mode, rec_layers, rec_state,
                        state_out):
    """Run ``n`` two-token trajectories under another layer (pre-, peri-LN, nGPT-style or the
    causal mask; :func:`attention.pair_layer_other`).  The state (s, c, r1, r2) adds the two
    norms to the half angles; records and ``state_out`` hold it in that order.  The same
    seven numbers a stochastic layer as :func:`_pair_kernel`, one a hybrid layer."""
    for t in nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        s, c = start_pair(state, key0, key1, first + t, d, init_mode, s0, c0, t)
        r1 = r2 = 1.0
        z = np.zeros(7)
        ptr = 0
        for layer in range(n_layers + 1):
            if layer > 0:
                weights = (_att.causal_pair_weights(s, beta) if causal
                           else _att.cluster_pair_weights(s, beta, True, 1.0, 1.0))
                if hybrid:
                    # V = w I: the frame's images are u and w themselves.
                    z[0], z[3] = 1.0, 1.0
                    kappa = inv_l + epsilon * _rng.normal(state) * h
                else:
                    draw_pair_noise(state, d, z)
                    kappa = h if norm == _att.PERI or norm == _att.NGPT else h * sigma
                s, c, r1, r2 = _att.pair_layer_other(s, c, r1, r2, kappa, weights, norm, z)
            while ptr < rec_layers.size and rec_layers[ptr] == layer:
                rec_state[t, ptr, 0], rec_state[t, ptr, 1] = s, c
                rec_state[t, ptr, 2], rec_state[t, ptr, 3] = r1, r2
                ptr += 1
        state_out[t, 0], state_out[t, 1], state_out[t, 2], state_out[t, 3] = s, c, r1, r2


def _initial_half_angles(plan):
    """(s0, c0, init_mode): the given starts (x0 or z0) as half angles, mode 1; else mode 0
    (the kernel draws two independent uniform tokens)."""
    n = plan.n_traj
    if plan.x0 is not None:
        x0 = plan.x0
        s0 = np.linalg.norm(x0[:, 1] - x0[:, 0], axis=-1) / 2.0
        c0 = np.linalg.norm(x0[:, 1] + x0[:, 0], axis=-1) / 2.0
        return s0, c0, 1
    if plan.z0 is not None:
        return (np.full(n, math.sqrt((1.0 - plan.z0) / 2.0)),
                np.full(n, math.sqrt((1.0 + plan.z0) / 2.0)), 1)
    return np.zeros(n), np.zeros(n), 0


def _allocate(plan):
    n, n_rec = plan.n_traj, plan.rec.size
    s0, c0, init_mode = _initial_half_angles(plan)
    return dict(s0=s0, c0=c0, init_mode=init_mode, s=np.empty(n), c=np.empty(n),
                stopped=np.empty(n, dtype=np.int64), rec_s=np.empty((n, n_rec)),
                rec_c=np.empty((n, n_rec)))


def _run(plan, a, lo, hi):
    _pair_kernel(plan.key0, plan.key1, plan.first_trajectory + lo, hi - lo, plan.d,
                 plan.n_layers, plan.beta, plan.softmax, plan.h, plan.sigma, 1.0 / plan.L,
                 plan.epsilon, plan.kind == "hybrid", a["s0"][lo:hi], a["c0"][lo:hi],
                 a["init_mode"], plan.s_stop, plan.c_stop, plan.rec, a["rec_s"][lo:hi],
                 a["rec_c"][lo:hi], a["s"][lo:hi], a["c"][lo:hi], a["stopped"][lo:hi])


def pair_gram(s, c):
    """2x2 Gram matrices from half-angle states: overlap z = c^2 - s^2."""
    z = c * c - s * s
    gram = np.ones(z.shape + (2, 2))
    gram[..., 0, 1] = z
    gram[..., 1, 0] = z
    return gram


def _assemble(plan, a):
    s, c = a["s"], a["c"]
    data = half_angle_outputs(pair_gram(s, c), s, c, a["stopped"])
    if plan.times is not None:
        rs, rc = a["rec_s"][:, plan.inverse], a["rec_c"][:, plan.inverse]
        data["gram_t"] = (("trajectory", "time", "i", "j"), pair_gram(rs, rc))
        data["one_minus_overlap_t"] = (("trajectory", "time"), 2.0 * rs * rs)
        data["one_plus_overlap_t"] = (("trajectory", "time"), 2.0 * rc * rc)
    return data, a["stopped"]


RUNNER = Runner(_allocate, _run, _assemble)

def _allocate_other(plan):
    s0, c0, init_mode = _initial_half_angles(plan)
    return dict(s0=s0, c0=c0, init_mode=init_mode, state=np.empty((plan.n_traj, 4)),
                rec=np.empty((plan.n_traj, plan.rec.size, 4)))


def _run_other(plan, a, lo, hi):
    _other_layer_kernel(plan.key0, plan.key1, plan.first_trajectory + lo, hi - lo, plan.d,
                        plan.n_layers, plan.beta, NORM_CODES[plan.norm], plan.causal, plan.h,
                        plan.sigma, 1.0 / plan.L, plan.epsilon, plan.kind == "hybrid",
                        a["s0"][lo:hi], a["c0"][lo:hi], a["init_mode"], plan.rec,
                        a["rec"][lo:hi], a["state"][lo:hi])


def _state_gram(state):
    """2x2 Gram matrices of the tokens r_k y_k from states (..., 4) = (s, c, r1, r2)."""
    s, c, r1, r2 = np.moveaxis(state, -1, 0)
    gram = pair_gram(s, c)
    gram *= np.stack([r1, r2], -1)[..., :, None] * np.stack([r1, r2], -1)[..., None, :]
    return gram


def _assemble_other(plan, a):
    """As :func:`_assemble`, with the norms in ``gram`` and ``gram_t``; the overlaps
    ``one_minus_overlap`` and ``one_plus_overlap`` are those of the directions."""
    state, stopped = a["state"], np.full(plan.n_traj, -1, dtype=np.int64)
    data = half_angle_outputs(_state_gram(state), state[:, 0], state[:, 1], stopped)
    if plan.times is not None:
        rec = a["rec"][:, plan.inverse]
        data["gram_t"] = (("trajectory", "time", "i", "j"), _state_gram(rec))
        data["one_minus_overlap_t"] = (("trajectory", "time"), 2.0 * rec[..., 0] ** 2)
        data["one_plus_overlap_t"] = (("trajectory", "time"), 2.0 * rec[..., 1] ** 2)
    return data, stopped


#: Two tokens under the other layers: the same method name, ``overlap_chain``.
OTHER_LAYER_RUNNER = Runner(_allocate_other, _run_other, _assemble_other)
