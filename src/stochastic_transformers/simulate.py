r"""The simulators of the discrete model and the one entry point :func:`simulate`.

Three exact methods, fastest last:

``literal``
    draws the whole :math:`d\times d` value matrix of every layer from the requested
    law (Gaussian, uniform or Rademacher) and applies it.  It is the reference every
    faster path is tested against.
``gaussian_dn``
    Gaussian values only.  :math:`V[A_1\dots A_N] = (VQ)R` with :math:`R` the triangular
    factor of the attention outputs, and :math:`VQ` is a :math:`d\times\min(d,N)`
    standard Gaussian matrix: :math:`dN` normals a layer instead of :math:`d^2`.
``overlap_chain``
    two tokens, Gaussian values, :math:`B = I`.  By rotation invariance the overlap
    :math:`Z_n = \langle X^1_n, X^2_n\rangle` is itself a Markov chain, driven by a
    :math:`2\times2` Gaussian block and a :math:`2\times2` Wishart(:math:`d-2`) matrix
    (Bartlett factor): seven random numbers a layer, whatever :math:`d`.  For the hybrid
    model the same chain needs one normal a layer.

Random numbers.  Every trajectory owns a random stream (:mod:`stochastic_transformers.rng`)
identified by the seed and its global index, and the kernels draw inside the compiled
loop.  Results are bit-identical whatever the number of threads and however
trajectories are split across calls or workers (``first_trajectory``).
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import xarray as xr

from . import attention as _att
from . import rng as _rng
from ._validation import check_choice, check_int, check_real, check_whole_layers

#: Bumped whenever a change alters the numbers a given seed produces; part of every
#: sweep cache key.
SIMULATION_CODE_VERSION = "1"

ATTENTIONS = ("softmax", "unnormalized")
VALUE_LAWS = ("gaussian", "uniform", "rademacher")
MODELS = ("stochastic", "hybrid")
METHODS = ("auto", "literal", "gaussian_dn", "overlap_chain")


# ----------------------------------------------------------------------------- kernels

_PAR = dict(cache=True, nogil=True, parallel=True, error_model="numpy")
_LAW_CODES = {"gaussian": 0, "uniform": 1, "rademacher": 2}
_SQRT3 = math.sqrt(3.0)


@_att.nb.njit(**_att._JIT)
def _value_entry(state, law, sigma):
    """One centred entry of V with variance sigma^2 from law 0/1/2 (Gauss/uniform/Rademacher)."""
    if law == 0:
        return sigma * _rng.normal(state)
    if law == 1:
        return sigma * _SQRT3 * (2.0 * _rng.uniform(state) - 1.0)
    return sigma if (_rng.next_u64(state) >> np.uint64(63)) != 0 else -sigma


@_att.nb.njit(**_att._JIT)
def _uniform_half_angles(state, d):
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


@_att.nb.njit(**_PAR)
def _pair_kernel(key0, key1, first, n, d, n_layers, beta, softmax, h, sigma, inv_l, epsilon,
                 hybrid, s0, c0, init_mode, s_stop, c_stop, rec_layers, rec_s, rec_c,
                 s_out, c_out, stopped_layer):
    """Run ``n`` two-token trajectories (global indices first..first+n-1) of the overlap chain.

    ``init_mode`` 0: uniform independent tokens; 1: the given (s0[t], c0[t]).
    Stochastic layers use 7 random numbers (see :func:`attention.pair_layer_stochastic`),
    hybrid layers one.  A trajectory stops once ``s < s_stop`` or ``c < c_stop``; its
    remaining records then carry the frozen state.
    """
    for t in _att.nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        _rng.seed_stream(state, key0, key1, first + t)
        if init_mode == 0:
            s, c = _uniform_half_angles(state, d)
        else:
            s, c = s0[t], c0[t]
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
                for k in range(4):
                    z[k] = _rng.normal(state)
                z[5] = _rng.normal(state) if d >= 3 else 0.0
                z[4] = _rng.sqrt_chi2(state, d - 2)
                z[6] = _rng.sqrt_chi2(state, d - 3)
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


@_att.nb.njit(**_PAR)
def _tokens_kernel(key0, key1, first, n, n_tok, d, n_layers, kind, law, beta, softmax, B,
                   b_identity, h, sigma, inv_l, epsilon, x0, init_mode, z0, rec_layers, rec_gram,
                   x_out):
    """Run ``n`` trajectories of N tokens.

    ``kind`` 0: literal (a full d x d V of law ``law`` per layer); 1: Gaussian d*N
    reduction; 2: hybrid (one normal per layer).  ``init_mode`` 0: i.i.d. uniform
    tokens; 1: the given ``x0[t]``; 2: a uniformly random pair at overlap ``z0``.
    """
    k = min(d, n_tok)
    for t in _att.nb.prange(n):
        state = np.empty(4, dtype=np.uint64)
        _rng.seed_stream(state, key0, key1, first + t)
        x = np.empty((n_tok, d))
        if init_mode == 1:
            x[:, :] = x0[t]
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
        att = np.empty((n_tok, d))
        y = np.empty((n_tok, d))
        m = np.empty((d, n_tok))
        r = np.empty((k, n_tok))
        v = np.empty((d, d))
        g = np.empty((d, k))
        bx = np.empty((n_tok, d))
        weights = np.empty(n_tok)
        self_scale = np.empty(n_tok)
        hv = np.empty(d)
        ptr = 0
        for layer in range(0, n_layers + 1):
            if layer > 0:
                if kind == 0:
                    for a in range(d):
                        for b in range(d):
                            v[a, b] = _value_entry(state, law, sigma)
                    _att.layer_literal(x, v, h, B, beta, softmax, att, y, bx, weights, b_identity,
                                       self_scale)
                elif kind == 1:
                    for a in range(d):
                        for b in range(k):
                            g[a, b] = sigma * _rng.normal(state)
                    _att.layer_gaussian_dn(x, g, h, B, beta, softmax, att, m, r, y, bx, weights,
                                           b_identity, hv, self_scale)
                else:
                    w = inv_l + epsilon * _rng.normal(state) * h
                    _att.layer_hybrid(x, w, B, beta, softmax, att, y, bx, weights, b_identity,
                                      self_scale)
            while ptr < rec_layers.size and rec_layers[ptr] == layer:
                for i in range(n_tok):
                    for j in range(n_tok):
                        acc = 0.0
                        for a in range(d):
                            acc += x[i, a] * x[j, a]
                        rec_gram[t, ptr, i, j] = acc
                ptr += 1
        x_out[t] = x


# ----------------------------------------------------------------------------- API

def _resolve_method(method, model, n_tokens, d, values, b_is_identity):
    chain_ok = n_tokens == 2 and b_is_identity and (model == "hybrid" or values == "gaussian")
    if method == "auto":
        if chain_ok:
            return "overlap_chain"
        if model == "stochastic" and values == "gaussian" and n_tokens < d:
            return "gaussian_dn"
        return "literal"
    if method == "overlap_chain" and not chain_ok:
        raise ValueError("method='overlap_chain' needs n_tokens == 2, B = identity and, for "
                         "model='stochastic', values='gaussian'")
    if method == "gaussian_dn" and not (model == "stochastic" and values == "gaussian"):
        raise ValueError("method='gaussian_dn' needs model='stochastic' and values='gaussian'")
    return method


def simulate(n_tokens, d, beta, *, n_traj, L, T, attention="softmax", values="gaussian",
             sigma=1.0, model="stochastic", epsilon=0.0, method="auto", seed=0, times=None,
             B=None, x0=None, z0=None, stop_level=None, tol=1e-3, n_threads=None,
             first_trajectory=0, progress=False):
    r"""Simulate the discrete deep-transformer model and return the final Gram matrices.

    Stochastic model (paper eq. 4), :math:`h = L^{-1/2}`:
    :math:`X^i_{n+1} = \operatorname{normalize}(X^i_n + h V_{n+1} A_\beta(X^i_n, X_n))`,
    with :math:`V_{n+1}` a fresh :math:`d\times d` matrix of i.i.d. centred entries of
    variance :math:`\sigma^2`, shared by all tokens.  Hybrid model (eq. 7):
    :math:`X^i_{n+1} = \operatorname{normalize}(X^i_n + w_{n+1} A_\beta(X^i_n, X_n))`,
    :math:`w_{n+1} = 1/L + \varepsilon\,\xi_{n+1}/\sqrt L`; :math:`\varepsilon = 0` is the
    deterministic attention flow.  ``T * L`` layers are run (time :math:`t = n/L`).

    Parameters
    ----------
    n_tokens : int
        Number of tokens, >= 2.
    d : int
        Dimension of the space, >= 2 (tokens live on :math:`S^{d-1}`).
    beta : float
        Inverse temperature, >= 0.
    n_traj : int
        Number of independent trajectories, >= 1.
    L : int
        Layers per unit time, >= 1.
    T : float
        Horizon, >= 0; ``T * L`` (the number of layers) must be whole.
    attention : {"softmax", "unnormalized"}
        Softmax or unnormalised attention; unnormalised weights are rescaled exactly
        where they would overflow (:func:`stochastic_transformers.attention.attention`).
    values : {"gaussian", "uniform", "rademacher"}
        Law of the entries of V (uniform on :math:`[-\sqrt3\sigma, \sqrt3\sigma]`,
        Rademacher :math:`\pm\sigma`).  Ignored by the hybrid model.
    sigma : float
        Standard deviation of the entries of V, > 0.
    model : {"stochastic", "hybrid"}
    epsilon : float
        Noise level of the hybrid model, >= 0 (must be 0 for the stochastic model).
    method : {"auto", "literal", "gaussian_dn", "overlap_chain"}
        ``auto`` picks the fastest exact method for the request.
    seed : int
        Seed of the per-block random streams (see the module docstring).
    times : sequence of float, optional
        Also record the Gram matrices at these times (each in [0, T]).
    B : array (d, d), optional
        :math:`Q^\top K`; identity when omitted.
    x0 : array (N, d) or (n_traj, N, d), optional
        Initial tokens (unit vectors); default i.i.d. uniform on the sphere.
    z0 : float, optional
        Two tokens only: start every trajectory at overlap ``z0`` in [-1, 1] (a uniformly
        random pair with that overlap).
    stop_level : float, optional
        Overlap chain, stochastic model: stop a trajectory once the limit diffusion's
        probability of ever leaving its pole (reaching ``1 - tol`` from +1 or
        ``-1 + tol`` from -1; :func:`theory.stopping_angles`) is below this level.
        ``None`` means 1e-6 when ``times`` is not given and off otherwise; 0 turns it off.
    tol : float
        Classification tolerance used by early stopping, in (0, 1).
    n_threads : int, optional
        Threads for the compiled loop over trajectories (default: numba's setting, all
        cores).  Results do not depend on it.
    first_trajectory : int
        Global index of the first trajectory, so that workers can each run a slice of
        one big ensemble and get the bits of the whole run.
    progress : bool
        Show a progress bar over trajectories.

    Returns
    -------
    xarray.Dataset
        ``gram`` (trajectory, i, j) at time T, and ``gram_t`` (trajectory, time, i, j)
        when ``times`` is given.  For the overlap chain also ``one_minus_overlap`` and
        ``one_plus_overlap`` (full relative precision near both poles) and
        ``stopped_layer`` (-1 if never stopped).  Every parameter, the method, the seed,
        the code version and the wall time are in ``attrs``.
    """
    t_start = time.perf_counter()
    n_tokens = check_int("n_tokens", n_tokens, 2)
    d = check_int("d", d, 2)
    beta = check_real("beta", beta, 0.0)
    n_traj = check_int("n_traj", n_traj, 1)
    L = check_int("L", L, 1)
    T = check_real("T", T, 0.0)
    attention = check_choice("attention", attention, ATTENTIONS)
    values = check_choice("values", values, VALUE_LAWS)
    sigma = check_real("sigma", sigma, 0.0, strict_min=True)
    model = check_choice("model", model, MODELS)
    epsilon = check_real("epsilon", epsilon, 0.0)
    if model == "stochastic" and epsilon != 0.0:
        raise ValueError("epsilon must be 0 for model='stochastic' (it is the hybrid model's "
                         f"noise level); got {epsilon}")
    method = check_choice("method", method, METHODS)
    seed = check_int("seed", seed, 0)
    tol = check_real("tol", tol, 0.0, 1.0, strict_min=True)
    first_trajectory = check_int("first_trajectory", first_trajectory, 0)
    n_threads = None if n_threads is None else check_int("n_threads", n_threads, 1)
    n_layers = check_whole_layers(T, L)
    if B is None:
        B_arr = np.eye(d)
        b_is_identity = True
    else:
        B_arr = np.array(B, dtype=float)
        if B_arr.shape != (d, d) or not np.all(np.isfinite(B_arr)):
            raise ValueError(f"B must be a finite ({d}, {d}) array; got shape {B_arr.shape}")
        b_is_identity = bool(np.array_equal(B_arr, np.eye(d)))
    if z0 is not None:
        if n_tokens != 2:
            raise ValueError("z0 (an initial overlap) needs n_tokens == 2")
        z0 = check_real("z0", z0, -1.0, 1.0)
    x0_arr = None
    if x0 is not None:
        if z0 is not None:
            raise ValueError("give at most one of x0 and z0")
        x0_arr = np.array(x0, dtype=float)
        if x0_arr.shape == (n_tokens, d):
            x0_arr = np.broadcast_to(x0_arr, (n_traj, n_tokens, d))
        if x0_arr.shape != (n_traj, n_tokens, d):
            raise ValueError(f"x0 must have shape ({n_tokens}, {d}) or ({n_traj}, {n_tokens}, "
                             f"{d}); got {np.shape(x0)}")
        if not np.allclose(np.linalg.norm(x0_arr, axis=-1), 1.0, atol=1e-10):
            raise ValueError("x0 must hold unit vectors (tokens on the sphere)")
    times_arr = np.zeros(0) if times is None else np.atleast_1d(np.array(times, dtype=float))
    if times_arr.ndim != 1 or np.any(~np.isfinite(times_arr)) or np.any(times_arr < 0) \
            or np.any(times_arr > T + 1e-12):
        raise ValueError(f"times must be a 1-d sequence of values in [0, T={T}]")
    rec_layers = np.rint(times_arr * L).astype(np.int64)
    order = np.argsort(rec_layers, kind="stable")
    method = _resolve_method(method, model, n_tokens, d, values, b_is_identity)
    _check_memory(method, n_traj, n_tokens, d, rec_layers.size, x0_arr is not None)

    if stop_level is None:
        stop_level = 1e-6 if (times is None and method == "overlap_chain"
                              and model == "stochastic") else 0.0
    stop_level = check_real("stop_level", stop_level, 0.0, 1.0)
    s_stop = c_stop = 0.0
    if stop_level > 0.0:
        if method != "overlap_chain" or model != "stochastic":
            raise ValueError("stop_level > 0 needs the overlap chain of the stochastic model")
        from .theory import stopping_angles

        theta_stop, psi_stop = stopping_angles(beta, d, tol=tol, level=stop_level)
        s_stop, c_stop = math.sin(theta_stop / 2.0), math.sin(psi_stop / 2.0)

    key0, key1 = _rng.stream_keys(seed)
    rec = np.ascontiguousarray(rec_layers[order])
    inverse = np.argsort(order, kind="stable")  # back to the caller's order of times
    softmax = attention == "softmax"
    h, inv_l = 1.0 / math.sqrt(L), 1.0 / L
    with _att.numba_threads(n_threads):  # process-wide state: restored after the call
        data, stopped = _run(method, model, n_traj, n_tokens, d, n_layers, beta, softmax, h,
                             sigma, inv_l, epsilon, values, B_arr, b_is_identity, x0_arr, z0,
                             s_stop, c_stop, rec, inverse, times, key0, key1,
                             first_trajectory, progress)
    coords = {"trajectory": np.arange(first_trajectory, first_trajectory + n_traj)}
    if times is not None:
        coords["time"] = times_arr
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(dict(
        n_tokens=n_tokens, d=d, beta=beta, n_traj=n_traj, L=L, T=T, n_layers=n_layers,
        attention=attention, values=values if model == "stochastic" else "none",
        sigma=sigma, model=model, epsilon=epsilon, method=method, seed=seed,
        B="identity" if b_is_identity else repr(B_arr.tolist()),
        z0="uniform" if z0 is None and x0 is None else ("given" if x0 is not None else z0),
        stop_level=stop_level, tol=tol, stopped_fraction=float(np.mean(stopped >= 0)),
        first_trajectory=first_trajectory, code_version=SIMULATION_CODE_VERSION,
        wall_time_s=time.perf_counter() - t_start,
    ))
    return ds


def memory_estimate(method: str, n_traj: int, n_tokens: int, d: int, n_times: int,
                    x0_given: bool = False) -> int:
    """Bytes that :func:`simulate` holds at its peak for these sizes (an upper estimate).

    Overlap chain: the half-angle states and their records, the 2 x 2 Gram matrices and
    the gaps (about ``88 + 96 n_times`` bytes a trajectory).  N tokens: the tokens, the
    recorded Gram matrices, their reordered copy and the final Gram matrix.  A quarter is
    added for xarray's bookkeeping and temporaries.
    """
    if method == "overlap_chain":
        per_traj = 88 + 96 * n_times
    else:
        per_traj = 8 * (2 * n_tokens * d + n_tokens**2 + 2 * n_times * n_tokens**2)
        if x0_given:
            per_traj += 8 * n_tokens * d
    return int(1.25 * per_traj * n_traj)


def available_memory() -> int:
    """Bytes of memory available to this process now (MemAvailable on Linux), or the
    machine's physical memory where that cannot be read."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - exotic platforms
        return 2**63 - 1


def _check_memory(method, n_traj, n_tokens, d, n_times, x0_given):
    """Refuse, before any compute, a call whose arrays cannot fit in memory."""
    need = memory_estimate(method, n_traj, n_tokens, d, n_times, x0_given)
    have = available_memory()
    if need <= have:
        return
    per_traj = max(1, need // n_traj)
    fits = max(1, int(0.5 * have // per_traj))
    raise ValueError(
        f"n_traj={n_traj:,} needs about {need / 2**30:,.1f} GiB for its results "
        f"({per_traj:,} bytes a trajectory with method={method!r}), more than the "
        f"{have / 2**30:,.1f} GiB available; run it in pieces of at most {fits:,} "
        f"trajectories with first_trajectory=0, {fits}, {2 * fits}, ... (the pieces give the "
        f"same bits as one call), or as a sweep of cells (stochastic_transformers.sweep.run_sweep)")


def _run(method, model, n_traj, n_tokens, d, n_layers, beta, softmax, h, sigma, inv_l,
         epsilon, values, B_arr, b_is_identity, x0_arr, z0, s_stop, c_stop, rec, inverse, times,
         key0, key1, first_trajectory, progress):
    """Run the kernels of :func:`simulate` (arguments validated there); return the data."""
    # Trajectories run in slices only so that a progress bar can move; the bits do not
    # depend on the slicing because every trajectory owns its stream.
    n_slices = 1 if not progress else min(n_traj, 50)
    bounds = np.linspace(0, n_traj, n_slices + 1).astype(int)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_traj, desc=f"simulate ({method})", unit="traj")
    data = {}
    if method == "overlap_chain":
        s_out, c_out = np.empty(n_traj), np.empty(n_traj)
        stopped = np.empty(n_traj, dtype=np.int64)
        rec_s, rec_c = np.empty((n_traj, rec.size)), np.empty((n_traj, rec.size))
        if x0_arr is not None:
            s0 = np.linalg.norm(x0_arr[:, 1] - x0_arr[:, 0], axis=-1) / 2.0
            c0 = np.linalg.norm(x0_arr[:, 1] + x0_arr[:, 0], axis=-1) / 2.0
        elif z0 is not None:
            s0 = np.full(n_traj, math.sqrt((1.0 - z0) / 2.0))
            c0 = np.full(n_traj, math.sqrt((1.0 + z0) / 2.0))
        else:
            s0 = c0 = np.zeros(n_traj)
        init_mode = 0 if (x0_arr is None and z0 is None) else 1
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            _pair_kernel(key0, key1, first_trajectory + lo, hi - lo, d, n_layers, beta, softmax,
                         h, sigma, inv_l, epsilon, model == "hybrid", s0[lo:hi], c0[lo:hi],
                         init_mode, s_stop, c_stop, rec, rec_s[lo:hi], rec_c[lo:hi],
                         s_out[lo:hi], c_out[lo:hi], stopped[lo:hi])
            if bar is not None:
                bar.update(hi - lo)
        data["gram"] = (("trajectory", "i", "j"), _pair_gram(s_out, c_out))
        data["one_minus_overlap"] = (("trajectory",), 2.0 * s_out * s_out)
        data["one_plus_overlap"] = (("trajectory",), 2.0 * c_out * c_out)
        data["stopped_layer"] = (("trajectory",), stopped)
        if times is not None:
            rs, rc = rec_s[:, inverse], rec_c[:, inverse]
            data["gram_t"] = (("trajectory", "time", "i", "j"), _pair_gram(rs, rc))
            data["one_minus_overlap_t"] = (("trajectory", "time"), 2.0 * rs * rs)
            data["one_plus_overlap_t"] = (("trajectory", "time"), 2.0 * rc * rc)
    else:
        kind = {"literal": 0, "gaussian_dn": 1}[method] if model == "stochastic" else 2
        x_out = np.empty((n_traj, n_tokens, d))
        rec_gram = np.empty((n_traj, rec.size, n_tokens, n_tokens))
        x0_in = (np.ascontiguousarray(x0_arr) if x0_arr is not None
                 else np.zeros((n_traj, n_tokens, d)))
        init_mode = 1 if x0_arr is not None else (2 if z0 is not None else 0)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            _tokens_kernel(key0, key1, first_trajectory + lo, hi - lo, n_tokens, d, n_layers,
                           kind, _LAW_CODES[values], beta, softmax, B_arr, b_is_identity, h,
                           sigma, inv_l,
                           epsilon, x0_in[lo:hi], init_mode, 0.0 if z0 is None else z0, rec,
                           rec_gram[lo:hi], x_out[lo:hi])
            if bar is not None:
                bar.update(hi - lo)
        data["gram"] = (("trajectory", "i", "j"), np.einsum("tia,tja->tij", x_out, x_out))
        data["tokens"] = (("trajectory", "i", "component"), x_out)
        if times is not None:
            data["gram_t"] = (("trajectory", "time", "i", "j"), rec_gram[:, inverse])
        stopped = np.full(n_traj, -1)
    if bar is not None:
        bar.close()
    return data, stopped


def _pair_gram(s, c):
    """2x2 Gram matrices from half-angle states: overlap z = c^2 - s^2."""
    z = c * c - s * s
    gram = np.ones(z.shape + (2, 2))
    gram[..., 0, 1] = z
    gram[..., 1, 0] = z
    return gram
