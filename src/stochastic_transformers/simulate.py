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

Random numbers.  Trajectories are grouped in *stream blocks* of ``STREAM_BLOCK``
consecutive indices; block ``b`` draws from its own PCG64 stream seeded by
``SeedSequence(seed, spawn_key=(b,))``, in chunks of a fixed number of layers.  A
trajectory's noise therefore depends only on the seed and its index, never on the
number of threads or on how blocks are spread over workers.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import xarray as xr

from . import attention as _att
from ._validation import check_choice, check_int, check_real

#: Bumped whenever a change alters the numbers a given seed produces; part of every
#: sweep cache key.
SIMULATION_CODE_VERSION = "1"

#: Trajectories per random stream.  Worker chunks must start on a multiple of it.
STREAM_BLOCK = 128

#: Layers drawn per call of the bulk generator, per method.  Fixed, because the
#: order in which a stream's numbers are consumed must not depend on anything else.
LAYER_CHUNK = {"literal": 32, "gaussian_dn": 64, "overlap_chain": 256}

ATTENTIONS = ("softmax", "unnormalized")
VALUE_LAWS = ("gaussian", "uniform", "rademacher")
MODELS = ("stochastic", "hybrid")
METHODS = ("auto", "literal", "gaussian_dn", "overlap_chain")


# ----------------------------------------------------------------------------- kernels

@_att.nb.njit(**_att._JIT)
def _run_tokens(x, noise, kind, h, sigma, inv_l, epsilon, B, beta, softmax, layer0,
                rec_layers, rec_gram):
    """Advance the token clouds ``x`` (n, N, d) through ``noise.shape[1]`` layers.

    ``kind`` 0: literal (noise (n, nl, d, d) = V entries, already scaled);
    1: Gaussian d*N (noise (n, nl, d, k), already scaled by sigma);
    2: hybrid (noise (n, nl, 1, 1) standard normals xi, w = 1/L + eps xi / sqrt(L)).
    Gram matrices are stored in ``rec_gram`` (n, n_rec, N, N) at the layers listed in
    ``rec_layers``.
    """
    n, n_tok, d = x.shape
    n_layers = noise.shape[1]
    k = min(d, n_tok)
    att = np.empty((n_tok, d))
    y = np.empty((n_tok, d))
    m = np.empty((d, n_tok))
    r = np.empty((k, n_tok))
    first = 0
    while first < rec_layers.size and rec_layers[first] <= layer0:
        first += 1
    for t in range(n):
        xt = x[t]
        ptr = first
        for l in range(n_layers):
            if kind == 0:
                _att.layer_literal(xt, noise[t, l], h, B, beta, softmax, att, y)
            elif kind == 1:
                _att.layer_gaussian_dn(xt, noise[t, l], h, B, beta, softmax, att, m, r, y)
            else:
                w = inv_l + epsilon * noise[t, l, 0, 0] * h
                _att.layer_hybrid(xt, w, B, beta, softmax, att, y)
            layer = layer0 + l + 1
            while ptr < rec_layers.size and rec_layers[ptr] == layer:
                for i in range(n_tok):
                    for j in range(n_tok):
                        acc = 0.0
                        for a in range(d):
                            acc += xt[i, a] * xt[j, a]
                        rec_gram[t, ptr, i, j] = acc
                ptr += 1


@_att.nb.njit(**_att._JIT)
def _run_pair(s, c, active, noise, hybrid, h, sigma, inv_l, epsilon, beta, softmax,
              s_stop, c_stop, stopped_layer, layer0, rec_layers, rec_s, rec_c):
    """Advance the two-token half-angle states of the trajectories listed in ``active``.

    ``noise`` has one row per active trajectory: (m, nl, 7) for the stochastic chain
    (see :func:`attention.pair_layer_stochastic`), (m, nl) normals for the hybrid one.
    A trajectory stops (its layer is written in ``stopped_layer``) once
    ``s < s_stop`` or ``c < c_stop``.
    """
    n_layers = noise.shape[1]
    first = 0
    while first < rec_layers.size and rec_layers[first] <= layer0:
        first += 1
    for j in range(active.size):
        t = active[j]
        st = s[t]
        ct = c[t]
        ptr = first
        for l in range(n_layers):
            ksum, kdiff = _att.pair_weights(st, beta, softmax)
            if hybrid:
                w = inv_l + epsilon * noise[j, l, 0] * h
                st, ct = _att.pair_step(st, ct, 1.0 + w * ksum, 0.0, 0.0,
                                        0.0, 1.0 + w * kdiff, 0.0, 0.0)
            else:
                st, ct = _att.pair_layer_stochastic(st, ct, h * sigma * ksum,
                                                    h * sigma * kdiff, noise[j, l])
            layer = layer0 + l + 1
            while ptr < rec_layers.size and rec_layers[ptr] == layer:
                rec_s[t, ptr] = st
                rec_c[t, ptr] = ct
                ptr += 1
            if st < s_stop or ct < c_stop:
                stopped_layer[t] = layer
                break
        s[t] = st
        c[t] = ct


# ----------------------------------------------------------------------------- noise

def _sqrt_chi2(rng, dof, shape):
    """Draw sqrt(chi^2_dof) with the cheapest exact recipe for small ``dof``."""
    if dof == 0:
        return np.zeros(shape)
    if dof == 1:
        return np.abs(rng.standard_normal(shape))
    if dof % 2 == 0:
        return np.sqrt(2.0 * rng.standard_gamma(dof // 2, shape))
    return np.sqrt(2.0 * rng.standard_gamma((dof - 1) // 2, shape) + rng.standard_normal(shape) ** 2)


def _pair_noise(rng, m, nl, d):
    """The 7 numbers a layer of the stochastic overlap chain uses, shape (m, nl, 7)."""
    z = np.empty((m, nl, 7))
    g = rng.standard_normal((m, nl, 5))
    z[:, :, 0:4] = g[:, :, 0:4]
    # Bartlett: T21 ~ N(0, 1) exists only when the orthogonal complement is non-empty.
    z[:, :, 5] = g[:, :, 4] if d >= 3 else 0.0
    z[:, :, 4] = _sqrt_chi2(rng, d - 2, (m, nl))
    z[:, :, 6] = _sqrt_chi2(rng, d - 3, (m, nl)) if d >= 3 else 0.0
    return z


def _value_entries(rng, law, sigma, shape):
    """i.i.d. centred entries of variance sigma^2 from ``law``."""
    if law == "gaussian":
        return sigma * rng.standard_normal(shape)
    if law == "uniform":
        return (sigma * math.sqrt(3.0)) * rng.uniform(-1.0, 1.0, shape)
    return sigma * (2.0 * rng.integers(0, 2, shape, dtype=np.int8) - 1.0)


def _uniform_pairs(rng, m, d, z0):
    """Half-angle states of ``m`` token pairs: uniform independent tokens, or overlap z0."""
    if z0 is not None:
        return (np.full(m, math.sqrt((1.0 - z0) / 2.0)), np.full(m, math.sqrt((1.0 + z0) / 2.0)))
    # By rotation invariance x1 = e1 and x2 = g/|g|: cos = g1/|g|, sin = |g_2..d|/|g|.
    g = rng.standard_normal((m, d))
    s = np.empty(m)
    c = np.empty(m)
    for t in range(m):
        s[t], c[t] = _att.half_angles(g[t, 0], math.sqrt(np.dot(g[t, 1:], g[t, 1:])))
    return s, c


def _uniform_tokens(rng, m, n_tok, d, z0):
    """Initial clouds (m, N, d): i.i.d. uniform tokens, or a random pair at overlap z0."""
    x = rng.standard_normal((m, n_tok, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    if z0 is not None:
        # x2 = z0 x1 + sqrt(1 - z0^2) e, with e uniform on the sphere orthogonal to x1.
        e = x[:, 1] - np.sum(x[:, 1] * x[:, 0], axis=-1, keepdims=True) * x[:, 0]
        e /= np.linalg.norm(e, axis=-1, keepdims=True)
        x[:, 1] = z0 * x[:, 0] + math.sqrt(max(0.0, 1.0 - z0 * z0)) * e
    return x


# ----------------------------------------------------------------------------- blocks

def _block_rng(seed, block):
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(block,))))


def _simulate_pair_block(cfg, block, m, x0_block):
    rng = _block_rng(cfg["seed"], block)
    d = cfg["d"]
    if x0_block is not None:
        s = np.linalg.norm(x0_block[:, 1] - x0_block[:, 0], axis=-1) / 2.0
        c = np.linalg.norm(x0_block[:, 1] + x0_block[:, 0], axis=-1) / 2.0
    else:
        s, c = _uniform_pairs(rng, m, d, cfg["z0"])
    rec = cfg["rec_layers"]
    rec_s = np.full((m, rec.size), np.nan)
    rec_c = np.full((m, rec.size), np.nan)
    at_zero = rec == 0
    rec_s[:, at_zero] = s[:, None]
    rec_c[:, at_zero] = c[:, None]
    stopped = np.full(m, -1, dtype=np.int64)
    chunk = LAYER_CHUNK["overlap_chain"]
    hybrid = cfg["model"] == "hybrid"
    done = 0
    while done < cfg["n_layers"]:
        nl = min(chunk, cfg["n_layers"] - done)
        active = np.flatnonzero(stopped < 0)
        if active.size == 0:
            break
        noise = (rng.standard_normal((active.size, nl, 1)) if hybrid
                 else _pair_noise(rng, active.size, nl, d))
        _run_pair(s, c, active, noise, hybrid, cfg["h"], cfg["sigma"], cfg["inv_l"],
                  cfg["epsilon"], cfg["beta"], cfg["softmax"], cfg["s_stop"], cfg["c_stop"],
                  stopped, done, rec, rec_s, rec_c)
        done += nl
    # A stopped trajectory is frozen: later records carry its final state.
    missing = np.isnan(rec_s)
    rec_s = np.where(missing, s[:, None], rec_s)
    rec_c = np.where(missing, c[:, None], rec_c)
    return {"s": s, "c": c, "rec_s": rec_s, "rec_c": rec_c, "stopped_layer": stopped}


def _simulate_token_block(cfg, block, m, x0_block):
    rng = _block_rng(cfg["seed"], block)
    n_tok, d = cfg["n_tokens"], cfg["d"]
    x = (np.array(x0_block, dtype=float) if x0_block is not None
         else _uniform_tokens(rng, m, n_tok, d, cfg["z0"]))
    rec = cfg["rec_layers"]
    rec_gram = np.full((m, rec.size, n_tok, n_tok), np.nan)
    rec_gram[:, rec == 0] = np.einsum("tia,tja->tij", x, x)[:, None]
    method = cfg["method"]
    kind = {"literal": 0, "gaussian_dn": 1}[method] if cfg["model"] == "stochastic" else 2
    chunk = LAYER_CHUNK[method]
    k = min(d, n_tok)
    done = 0
    while done < cfg["n_layers"]:
        nl = min(chunk, cfg["n_layers"] - done)
        if kind == 0:
            noise = _value_entries(rng, cfg["values"], cfg["sigma"], (m, nl, d, d))
        elif kind == 1:
            noise = cfg["sigma"] * rng.standard_normal((m, nl, d, k))
        else:
            noise = rng.standard_normal((m, nl, 1, 1))
        _run_tokens(x, noise, kind, cfg["h"], cfg["sigma"], cfg["inv_l"], cfg["epsilon"],
                    cfg["B"], cfg["beta"], cfg["softmax"], done, rec, rec_gram)
        done += nl
    return {"x": x, "rec_gram": rec_gram}


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
    n_tokens, d : int
        Number of tokens (>= 2) and dimension of the space (>= 2; tokens live on
        :math:`S^{d-1}`).
    beta : float
        Inverse temperature, >= 0.
    n_traj : int
        Number of independent trajectories, >= 1.
    L : int
        Layers per unit time, >= 1.  T : float, horizon >= 0; ``T * L`` must be whole.
    attention : {"softmax", "unnormalized"}
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
        Threads over stream blocks (default: all cores).  Results do not depend on it.
    first_trajectory : int
        Global index of the first trajectory (a multiple of ``STREAM_BLOCK``), so that
        workers can each run a slice of one big ensemble with identical bits.
    progress : bool
        Show a progress bar over stream blocks.

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
    if first_trajectory % STREAM_BLOCK:
        raise ValueError(f"first_trajectory must be a multiple of STREAM_BLOCK={STREAM_BLOCK}; "
                         f"got {first_trajectory}")
    n_threads = None if n_threads is None else check_int("n_threads", n_threads, 1)
    n_layers = int(round(T * L))
    if abs(T * L - n_layers) > 1e-9 * max(1.0, T * L):
        raise ValueError(f"T * L must be a whole number of layers; got T={T}, L={L}")
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

    cfg = dict(n_tokens=n_tokens, d=d, beta=beta, h=1.0 / math.sqrt(L), inv_l=1.0 / L,
               sigma=sigma, epsilon=epsilon, model=model, method=method, values=values,
               softmax=attention == "softmax", B=B_arr, seed=seed, z0=z0, n_layers=n_layers,
               rec_layers=np.ascontiguousarray(rec_layers[order]), s_stop=s_stop, c_stop=c_stop)
    first_block = first_trajectory // STREAM_BLOCK
    blocks = [(first_block + i, min(STREAM_BLOCK, n_traj - i * STREAM_BLOCK))
              for i in range(-(-n_traj // STREAM_BLOCK))]
    runner = _simulate_pair_block if method == "overlap_chain" else _simulate_token_block

    def run(item):
        index, (block, m) = item
        lo = index * STREAM_BLOCK
        return runner(cfg, block, m, None if x0_arr is None else x0_arr[lo:lo + m])

    n_workers = n_threads or _cpu_count()
    items = list(enumerate(blocks))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_traj, desc=f"simulate ({method})", unit="traj")
    results = []
    with ThreadPoolExecutor(max_workers=max(1, min(n_workers, len(items)))) as pool:
        for res, (_, (_, m)) in zip(pool.map(run, items), items):
            results.append(res)
            if bar is not None:
                bar.update(m)
    if bar is not None:
        bar.close()

    inverse = np.argsort(order, kind="stable")  # back to the caller's order of times
    data = {}
    if method == "overlap_chain":
        s = np.concatenate([r["s"] for r in results])
        c = np.concatenate([r["c"] for r in results])
        data["gram"] = (("trajectory", "i", "j"), _pair_gram(s, c))
        data["one_minus_overlap"] = (("trajectory",), 2.0 * s * s)
        data["one_plus_overlap"] = (("trajectory",), 2.0 * c * c)
        stopped = np.concatenate([r["stopped_layer"] for r in results])
        data["stopped_layer"] = (("trajectory",), stopped)
        if times is not None:
            rs = np.concatenate([r["rec_s"] for r in results])[:, inverse]
            rc = np.concatenate([r["rec_c"] for r in results])[:, inverse]
            data["gram_t"] = (("trajectory", "time", "i", "j"), _pair_gram(rs, rc))
            data["one_minus_overlap_t"] = (("trajectory", "time"), 2.0 * rs * rs)
            data["one_plus_overlap_t"] = (("trajectory", "time"), 2.0 * rc * rc)
    else:
        x = np.concatenate([r["x"] for r in results])
        data["gram"] = (("trajectory", "i", "j"), np.einsum("tia,tja->tij", x, x))
        data["tokens"] = (("trajectory", "i", "component"), x)
        if times is not None:
            data["gram_t"] = (("trajectory", "time", "i", "j"),
                              np.concatenate([r["rec_gram"] for r in results])[:, inverse])
        stopped = np.full(n_traj, -1)
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


def _pair_gram(s, c):
    """2x2 Gram matrices from half-angle states: overlap z = c^2 - s^2."""
    z = c * c - s * s
    gram = np.ones(z.shape + (2, 2))
    gram[..., 0, 1] = z
    gram[..., 1, 0] = z
    return gram


def _cpu_count():
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
