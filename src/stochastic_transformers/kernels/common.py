r"""Helpers every token kernel shares: streams, initial tokens, the pair chain's noise.

Each trajectory seeds its own stream (:func:`stochastic_transformers.rng.seed_stream`) from
the run's keys and its global index, then draws its initial tokens here; what follows
depends on the model (the sibling modules of this package).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numba as nb
import numpy as np

from .. import attention as _att
from .. import rng as _rng
from .._jit import JIT


@nb.njit(**JIT)
def uniform_half_angles(state, d):
    """Half-angle state of two independent uniform tokens on S^{d-1}.

    By rotation invariance x1 = e1 and x2 = g/|g| with g standard normal in R^d, so
    cos(theta) = g1/|g| and sin(theta) = |g_{2..d}|/|g|.
    """
    g1 = _rng.normal(state)
    rest = 0.0
    for _ in range(d - 1):
        g = _rng.normal(state)
        rest += g * g
    return _att.half_angles(g1, math.sqrt(rest))


@nb.njit(inline="always", **JIT)
def start_pair(state, key0, key1, index, d, init_mode, s0, c0, t):
    """Seed trajectory ``index``'s stream into ``state``; return its initial half angles:
    two independent uniform points (``init_mode`` 0) or the given ``(s0[t], c0[t])``."""
    _rng.seed_stream(state, key0, key1, index)
    if init_mode == 0:
        return uniform_half_angles(state, d)
    return s0[t], c0[t]


@nb.njit(**JIT)
def init_tokens(state, x, init_mode, x0t, z0):
    """Initial tokens into ``x`` (N, d): 0 i.i.d. uniform; 1 the given ``x0t``; 2 a uniform
    pair at overlap ``z0``."""
    n_tok, d = x.shape
    if init_mode == 1:
        x[:, :] = x0t
    else:
        for i in range(n_tok):
            for a in range(d):
                x[i, a] = _rng.normal(state)
        _att.normalize_rows(x)
        if init_mode == 2:
            # x2 = z0 x1 + sqrt(1 - z0^2) e, e uniform on the sphere orthogonal to x1.
            dot = 0.0
            for a in range(d):
                dot += x[1, a] * x[0, a]
            for a in range(d):
                x[1, a] -= dot * x[0, a]
            nrm = 0.0
            for a in range(d):
                nrm += x[1, a] * x[1, a]
            nrm = math.sqrt(nrm)
            perp = math.sqrt(max(0.0, 1.0 - z0 * z0))
            for a in range(d):
                x[1, a] = z0 * x[0, a] + perp * x[1, a] / nrm


@nb.njit(inline="always", **JIT)
def start_tokens(key0, key1, index, n_tok, d, init_mode, x0t, z0):
    """Seed trajectory ``index``'s stream and draw its initial tokens: ``(state, x)``, with
    ``x`` (N, d) as :func:`init_tokens` makes it."""
    state = np.empty(4, dtype=np.uint64)
    _rng.seed_stream(state, key0, key1, index)
    x = np.empty((n_tok, d))
    init_tokens(state, x, init_mode, x0t, z0)
    return state, x


@nb.njit(inline="always", **JIT)
def record_gram(out, x):
    """The Gram matrix of the tokens ``x`` (N, d) into ``out`` (N, N)."""
    n_tok = x.shape[0]
    for i in range(n_tok):
        for j in range(n_tok):
            out[i, j] = _att.row_dot(x, i, x, j)


@nb.njit(inline="always", **JIT)
def record_grams(rec_gram, rec_layers, ptr, layer, x):
    """The Gram matrix of ``x`` into every record ``rec_gram[ptr]`` of layer ``layer`` (the
    sorted ``rec_layers`` from ``ptr`` on); return the next record's index."""
    while ptr < rec_layers.size and rec_layers[ptr] == layer:
        record_gram(rec_gram[ptr], x)
        ptr += 1
    return ptr


@nb.njit(inline="always", **JIT)
def fill_random(state, m, scale, rademacher):
    """Entries of ``m`` (row by row): ``scale`` times standard normals of ``state``, or
    ``scale`` times random signs (one bit of a 64-bit draw each) if ``rademacher``."""
    for a in range(m.shape[0]):
        for b in range(m.shape[1]):
            if rademacher:
                m[a, b] = scale if (_rng.next_u64(state) >> np.uint64(63)) != 0 else -scale
            else:
                m[a, b] = scale * _rng.normal(state)


@nb.njit(inline="always", **JIT)
def draw_pair_noise(state, d, z):
    """The seven random numbers of one overlap-chain layer, in the two-token chain's order."""
    for k in range(4):
        z[k] = _rng.normal(state)
    z[5] = _rng.normal(state) if d >= 3 else 0.0
    z[4] = _rng.sqrt_chi2(state, d - 2)
    z[6] = _rng.sqrt_chi2(state, d - 3)



# ------------------------------------------------------------------ the runner protocol

class Runner(NamedTuple):
    """How one method runs, in three steps that the one slice loop of
    :func:`stochastic_transformers.kernels.run` calls.

    ``allocate(plan) -> arrays``
        the outputs and the per-trajectory inputs (a dict of arrays over trajectories);
    ``run(plan, arrays, lo, hi)``
        trajectories ``lo .. hi - 1`` of the plan into their rows of ``arrays``; every
        trajectory owns its stream, so the bits do not depend on how the range is cut;
    ``assemble(plan, arrays) -> (data, stopped)``
        the dataset's variables (``name: (dims, values)``, records in the caller's order
        of times) and the layer at which each trajectory stopped (-1: never).

    ``plan`` is the validated plan of :func:`stochastic_transformers.simulation.simulate`,
    read by attribute only.
    """

    allocate: Callable
    run: Callable
    assemble: Callable


def half_angle_outputs(gram, s, c, stopped):
    """The final variables of a run whose state is a pair of half angles (s, c)."""
    return {"gram": (("trajectory", "i", "j"), gram),
            "one_minus_overlap": (("trajectory",), 2.0 * s * s),
            "one_plus_overlap": (("trajectory",), 2.0 * c * c),
            "stopped_layer": (("trajectory",), stopped)}


def given_tokens(plan) -> np.ndarray:
    """The initial tokens of the plan as a C-contiguous (n_traj, N, d) array (zeros if
    none are given: the kernels then draw them)."""
    if plan.x0 is not None:
        return np.ascontiguousarray(plan.x0)
    return np.zeros((plan.n_traj, plan.n_tokens, plan.d))


def recorded(plan, rec, dims=("i", "j")):
    """Records ``rec`` (trajectory, sorted record, ...) in the caller's order of times."""
    return (("trajectory", "time") + tuple(dims), rec[:, plan.inverse])
