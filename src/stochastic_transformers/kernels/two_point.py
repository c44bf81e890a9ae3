r"""Two-point configurations (``cluster_chain``) and the reduced N-token path (``reduced``, ``snap``).

``cluster_chain``
    a two-point configuration (``split=(m1, m2)``: m1 tokens at one point, m2 at another),
    Gaussian values, :math:`B = I`.  Tokens that coincide stay together, so the overlap of
    the two points is again a seven-random-number chain, with the points' attention weights
    (:func:`stochastic_transformers.attention.cluster_pair_layer`).
``reduced``
    N >= 3 Gaussian tokens, :math:`B = I`: the N-token map (the d*N path when N < d, else
    the literal one) until the tokens occupy at most two points
    (:data:`MERGE_ONE_MINUS_OVERLAP`), then nothing (one point is absorbing) or the
    weighted chain, with the two-token early stopping for a balanced split.  Up to the
    merge its bits are those of the full map.  ``snap`` is its validation twin: the
    literal map with merged tokens made to coincide exactly, never switching.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from .. import attention as _att
from .._jit import JIT, JIT_PARALLEL
from .common import (Runner, draw_pair_noise, given_tokens, half_angle_outputs, record_gram,
                     recorded, start_pair, start_tokens)
from .tokens import dn_is_faster, layer_scratch, token_layer

#: Two tokens count as one point once their overlap rounds to 1 in double precision:
#: :math:`1 - \langle x_i, x_j\rangle` (computed as :math:`|x_i - x_j|^2/2`, without
#: cancellation) at most :math:`2^{-53}`.  Below it the N-token state cannot tell them apart
#: any more (its coordinates carry rounding errors of that relative size every layer), and
#: for the two-token limit the chance that such a pair ever separates again to the
#: classification tolerance 1e-3 is 3.7e-20 in d = 4 and 1.1e-13 in d = 3, at every beta
#: (:func:`stochastic_transformers.theory.escape_probability`).
MERGE_ONE_MINUS_OVERLAP = 2.0**-53
#: Layers between two merge checks of the ``reduced`` method (a check costs about
#: N d operations while no pair has merged, N^2 d once some have).
MERGE_CHECK_EVERY = 4

@nb.njit(**JIT)
def record_two_point(rec_gram, rec_opo, ptr, labels, s, c, one_point):
    """Gram matrix and 1 + (smallest overlap) of a one- or two-point state into record ``ptr``."""
    n_tok = labels.size
    z = 1.0 if one_point else c * c - s * s
    for i in range(n_tok):
        for j in range(n_tok):
            rec_gram[ptr, i, j] = 1.0 if (one_point or labels[i] == labels[j]) else z
    rec_opo[ptr] = 2.0 if one_point else 2.0 * c * c

@nb.njit(inline="always", **JIT)
def record_two_points(rec_gram, rec_opo, ptr, rec_layers, layer, labels, s, c, one_point):
    """:func:`record_two_point` into every record of layer ``layer`` (the sorted
    ``rec_layers`` from ``ptr`` on); return the next record's index."""
    while ptr < rec_layers.size and rec_layers[ptr] == layer:
        record_two_point(rec_gram, rec_opo, ptr, labels, s, c, one_point)
        ptr += 1
    return ptr


@nb.njit(**JIT)
def finish_two_point(rec_gram, rec_opo, ptr, rec_layers, labels, s, c, merged):
    """Fill the records left from ``ptr`` with the final state; return the final (s, c), a
    merged pair as (0, 1)."""
    while ptr < rec_layers.size:
        record_two_point(rec_gram, rec_opo, ptr, labels, s, c, merged)
        ptr += 1
    return (0.0, 1.0) if merged else (s, c)

@nb.njit(**JIT)
def _two_point_layers(state, s, c, m1, m2, layer0, n_layers, d, beta, softmax, kappa, s_stop,
                      c_stop, labels, rec_layers, ptr, rec_gram, rec_opo, z):
    """Advance a two-point state (m1 tokens at y1, m2 at y2) from layer ``layer0`` on.

    A balanced split (m1 = m2) is the two-token chain exactly (same weights, same bits,
    same early stopping at the poles when ``s_stop`` or ``c_stop`` > 0); an unbalanced one
    takes :func:`attention.cluster_pair_layer`.  Either stops once the two points merge
    (:data:`MERGE_ONE_MINUS_OVERLAP`).  Returns ``(s, c, ptr, stopped_layer, merged)``.
    """
    balanced = m1 == m2
    for layer in range(layer0 + 1, n_layers + 1):
        draw_pair_noise(state, d, z)
        if balanced:
            one, ksum, kdiff = _att.pair_weights_scaled(s, beta, softmax)
            s, c = _att.pair_layer_stochastic_scaled(s, c, one, kappa * ksum, kappa * kdiff, z)
        else:
            s, c = _att.cluster_pair_layer(s, c, kappa,
                                           _att.cluster_pair_weights(s, beta, softmax, m1, m2), z)
        merged = 2.0 * s * s <= MERGE_ONE_MINUS_OVERLAP
        ptr = record_two_points(rec_gram, rec_opo, ptr, rec_layers, layer, labels, s, c, merged)
        if merged:
            return s, c, ptr, layer, True
        if balanced and (s < s_stop or c < c_stop):
            return s, c, ptr, layer, False
    return s, c, ptr, -1, False

@nb.njit(**JIT_PARALLEL)
def _cluster_kernel(key0, key1, first, n, m1, m2, d, n_layers, beta, softmax, kappa, s0, c0,
                    init_mode, s_stop, c_stop, rec_layers, rec_gram, rec_opo, s_out, c_out,
                    stopped_layer):
    """Run ``n`` trajectories of a two-point configuration (m1 tokens at y1, m2 at y2).

    ``init_mode`` 0: y1, y2 independent uniform (the two-token chain's draw); 1: the given
    half-angle states.  Records carry the N x N Gram matrix (tokens 0..m1-1 at y1).
    """
    n_tok = m1 + m2
    labels = np.zeros(n_tok, dtype=np.int64)
    labels[m1:] = 1
    for t in nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        s, c = start_pair(state, key0, key1, first + t, d, init_mode, s0, c0, t)
        merged = 2.0 * s * s <= MERGE_ONE_MINUS_OVERLAP
        ptr = record_two_points(rec_gram[t], rec_opo[t], 0, rec_layers, 0, labels, s, c, merged)
        stop = 0 if merged else -1
        if not merged:
            z = np.empty(7)
            s, c, ptr, stop, merged = _two_point_layers(
                state, s, c, m1, m2, 0, n_layers, d, beta, softmax, kappa, s_stop, c_stop,
                labels, rec_layers, ptr, rec_gram[t], rec_opo[t], z)
        s_out[t], c_out[t] = finish_two_point(rec_gram[t], rec_opo[t], ptr, rec_layers, labels,
                                              s, c, merged)
        stopped_layer[t] = stop

@nb.njit(**JIT)
def _merge_groups(x, labels, reps):
    """Group tokens whose overlap rounds to 1; return the number of groups (3 means >= 3).

    Token j joins the group of the first earlier representative it coincides with
    (:data:`MERGE_ONE_MINUS_OVERLAP`); the scan stops at the third group, so a check
    costs little while the tokens are apart.
    """
    n_tok, d = x.shape
    for i in range(n_tok):
        labels[i] = -1
    n_groups = 0
    for i in range(n_tok):
        if labels[i] >= 0:
            continue
        if n_groups == 2:
            return 3
        labels[i] = n_groups
        reps[n_groups] = i
        for j in range(i + 1, n_tok):
            if labels[j] < 0:
                acc = 0.0
                for a in range(d):
                    diff = x[i, a] - x[j, a]
                    acc += diff * diff
                if 0.5 * acc <= MERGE_ONE_MINUS_OVERLAP:
                    labels[j] = n_groups
        n_groups += 1
    return n_groups

@nb.njit(**JIT)
def _record_tokens(rec_gram, rec_opo, ptr, x):
    """Gram matrix of the tokens and 1 + their smallest overlap (as min |x_i + x_j|^2 / 2)."""
    n_tok, d = x.shape
    record_gram(rec_gram[ptr], x)
    low = 2.0
    for i in range(n_tok):
        for j in range(i + 1, n_tok):
            acc = 0.0
            for a in range(d):
                plus = x[i, a] + x[j, a]
                acc += plus * plus
            low = min(low, 0.5 * acc)
    rec_opo[ptr] = low


@nb.njit(**JIT_PARALLEL)
def _reduced_kernel(key0, key1, first, n, n_tok, d, n_layers, kind, beta, softmax, B, h, sigma,
                    x0, init_mode, s_stop, c_stop, snap_only, rec_layers, rec_gram, rec_opo,
                    gram_out, opo_out, merge_layer, merge_points, merge_m1, merge_s, merge_c,
                    stopped_layer):
    """N tokens through the N-token map until they occupy at most two points, then the chain.

    Layers are those of :func:`_tokens_kernel` (``kind`` 0 literal Gaussian, 1 the d*N
    reduction; same random numbers, so both kernels agree bit for bit up to the merge).
    Every :data:`MERGE_CHECK_EVERY` layers the tokens are grouped
    (:func:`_merge_groups`); one group stops the trajectory (one point is absorbing), two
    groups continue on :func:`_two_point_layers` from the representatives' half angles.
    ``snap_only`` (method ``snap``, for validation, with ``kind`` 0): never switch; instead
    set every token to its group's representative and keep the N-token map, so that a run
    differs from ``method="literal"`` with the same seed only by the merge itself.
    """
    for t in nb.prange(n):
        state, x = start_tokens(key0, key1, first + t, n_tok, d, init_mode, x0[t], 0.0)
        att, y, m, r, v, g, bx, weights, self_scale, hv = layer_scratch(n_tok, d)
        labels = np.empty(n_tok, dtype=np.int64)
        reps = np.zeros(2, dtype=np.int64)
        ptr = 0
        groups = n_tok
        at = -1
        for layer in range(0, n_layers + 1):
            if layer > 0:
                token_layer(state, kind, 0, x, h, B, beta, softmax, True, sigma, 0.0, 0.0,
                             v, g, att, m, r, y, bx, weights, hv, self_scale)
            while ptr < rec_layers.size and rec_layers[ptr] == layer:
                _record_tokens(rec_gram[t], rec_opo[t], ptr, x)
                ptr += 1
            if layer % MERGE_CHECK_EVERY == 0 and groups > 1:
                n_groups = _merge_groups(x, labels, reps)
                if n_groups <= 2:
                    if at < 0:
                        at = layer
                        groups = n_groups
                    if not snap_only:
                        break
                    # validation mode: make coinciding tokens coincide exactly, keep the map
                    groups = n_groups
                    for j in range(n_tok):
                        for a in range(d):
                            x[j, a] = x[reps[labels[j]], a]
        merge_layer[t] = at
        stop = -1
        if snap_only or at < 0:   # the N-token state is the result
            merge_points[t] = 0 if at < 0 else (1 if groups == 1 else 2)
            merge_m1[t] = 0
            merge_s[t] = 0.0
            merge_c[t] = 0.0
            _record_tokens(gram_out[t:t + 1], opo_out[t:t + 1], 0, x)
        else:
            merge_points[t] = groups
            m1 = 0
            for i in range(n_tok):
                if labels[i] == 0:
                    m1 += 1
            merge_m1[t] = m1
            merged = groups == 1
            s, c = 0.0, 1.0
            if not merged:
                i, j = reps[0], reps[1]
                dm, dp = 0.0, 0.0
                for a in range(d):
                    dm += (x[j, a] - x[i, a]) ** 2
                    dp += (x[j, a] + x[i, a]) ** 2
                s, c = 0.5 * math.sqrt(dm), 0.5 * math.sqrt(dp)
                nrm = math.sqrt(s * s + c * c)
                s, c = s / nrm, c / nrm
                merge_s[t] = s
                merge_c[t] = c
                z = np.empty(7)
                s, c, ptr, stop, merged = _two_point_layers(
                    state, s, c, m1, n_tok - m1, at, n_layers, d, beta, softmax, h * sigma,
                    s_stop, c_stop, labels, rec_layers, ptr, rec_gram[t], rec_opo[t], z)
            else:
                merge_s[t] = 0.0
                merge_c[t] = 1.0
                stop = at
            while ptr < rec_layers.size:
                record_two_point(rec_gram[t], rec_opo[t], ptr, labels, s, c, merged)
                ptr += 1
            record_two_point(gram_out[t:t + 1], opo_out[t:t + 1], 0, labels, s, c, merged)
        stopped_layer[t] = stop


def _split_labels(plan):
    m1, m2 = plan.split
    return np.r_[np.zeros(m1, int), np.ones(m2, int)]


def _with_records(plan, a, data, opo_name):
    """``data`` with the recorded Gram matrices and 1 + overlaps (when times are recorded),
    and the stopped layers."""
    if plan.times is not None:
        data["gram_t"] = recorded(plan, a["rec_gram"])
        data[opo_name] = recorded(plan, a["rec_opo"], ())
    return data, a["stopped"]


def _allocate_cluster(plan):
    n, n_tok, n_rec = plan.n_traj, plan.n_tokens, plan.rec.size
    z0 = plan.z0
    return dict(s0=np.full(n, math.sqrt((1.0 - z0) / 2.0) if z0 is not None else 0.0),
                c0=np.full(n, math.sqrt((1.0 + z0) / 2.0) if z0 is not None else 0.0),
                s=np.empty(n), c=np.empty(n), stopped=np.empty(n, dtype=np.int64),
                rec_gram=np.empty((n, n_rec, n_tok, n_tok)), rec_opo=np.empty((n, n_rec)))


def _run_cluster(plan, a, lo, hi):
    m1, m2 = plan.split
    _cluster_kernel(plan.key0, plan.key1, plan.first_trajectory + lo, hi - lo, m1, m2, plan.d,
                    plan.n_layers, plan.beta, plan.softmax, plan.h * plan.sigma,
                    a["s0"][lo:hi], a["c0"][lo:hi], 0 if plan.z0 is None else 1, plan.s_stop,
                    plan.c_stop, plan.rec, a["rec_gram"][lo:hi], a["rec_opo"][lo:hi],
                    a["s"][lo:hi], a["c"][lo:hi], a["stopped"][lo:hi])


def _assemble_cluster(plan, a):
    labels = _split_labels(plan)
    s, c = a["s"], a["c"]
    z = c * c - s * s
    gram = np.where(labels[:, None] == labels[None, :], 1.0, z[:, None, None])
    return _with_records(plan, a, half_angle_outputs(gram, s, c, a["stopped"]),
                         "one_plus_overlap_t")


#: Per-trajectory outputs of the reduced path: name -> dtype.
_REDUCED_OUTPUTS = dict(opo=float, merge_layer=np.int64, merge_points=np.int64,
                        merge_m1=np.int64, merge_s=float, merge_c=float, stopped=np.int64)


def _allocate_reduced(plan):
    n, n_tok, n_rec = plan.n_traj, plan.n_tokens, plan.rec.size
    a = {name: np.empty(n, dtype=dtype) for name, dtype in _REDUCED_OUTPUTS.items()}
    a.update(x0=given_tokens(plan), gram=np.empty((n, n_tok, n_tok)),
             rec_gram=np.empty((n, n_rec, n_tok, n_tok)), rec_opo=np.empty((n, n_rec)))
    return a


def _run_reduced(plan, a, lo, hi):
    # The d*N path where it is the faster (dn_is_faster); ``snap`` always draws the whole V, so that
    # it consumes its random numbers exactly as method="literal" does, before and after a
    # merge (the d*N path's use of its normals depends on the rank of the attention
    # outputs, which a merge changes).
    kind = 1 if (dn_is_faster(plan.n_tokens, plan.d) and plan.method == "reduced") else 0
    part = {name: arr[lo:hi] for name, arr in a.items()}
    _reduced_kernel(plan.key0, plan.key1, plan.first_trajectory + lo, hi - lo, plan.n_tokens,
                    plan.d, plan.n_layers, kind, plan.beta, plan.softmax, plan.B, plan.h,
                    plan.sigma, part["x0"], 1 if plan.x0 is not None else 0, plan.s_stop,
                    plan.c_stop, plan.method == "snap", plan.rec, part["rec_gram"],
                    part["rec_opo"], part["gram"], part["opo"], part["merge_layer"],
                    part["merge_points"], part["merge_m1"], part["merge_s"], part["merge_c"],
                    part["stopped"])


def _assemble_reduced(plan, a):
    per_traj = ("trajectory",)
    data = {"gram": (("trajectory", "i", "j"), a["gram"]),
            "one_plus_min_overlap": (per_traj, a["opo"]),
            "merge_layer": (per_traj, a["merge_layer"]),
            "merge_points": (per_traj, a["merge_points"]),
            "merge_m1": (per_traj, a["merge_m1"]),
            "merge_one_minus_overlap": (per_traj, 2.0 * a["merge_s"] * a["merge_s"]),
            "merge_one_plus_overlap": (per_traj, 2.0 * a["merge_c"] * a["merge_c"]),
            "stopped_layer": (per_traj, a["stopped"])}
    return _with_records(plan, a, data, "one_plus_min_overlap_t")


CLUSTER_RUNNER = Runner(_allocate_cluster, _run_cluster, _assemble_cluster)
REDUCED_RUNNER = Runner(_allocate_reduced, _run_reduced, _assemble_reduced)
