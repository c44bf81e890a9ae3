r"""The one entry point :func:`simulate`: validate, plan, run the kernels, assemble a dataset.

A call takes the layer map and the run whole (:class:`~stochastic_transformers.config.ModelConfig`,
:class:`~stochastic_transformers.config.RunConfig`), picks the method
(:func:`resolve_method`), checks that the result fits in memory
(:mod:`stochastic_transformers.memory`), derives what the kernels need into one frozen
plan, and hands it to the runner of its method (:mod:`stochastic_transformers.kernels`).

The exact methods, each in its kernel module:

``literal``, ``gaussian_dn`` (:mod:`.kernels.tokens`)
    the N-token map with the whole :math:`d\times d` value matrix of every layer, or its
    exact :math:`dN`-normal reduction for Gaussian values;
``overlap_chain`` (:mod:`.kernels.pair`)
    two tokens, Gaussian values, :math:`B = I`: the overlap is a Markov chain of seven
    random numbers a layer whatever :math:`d` (one for the hybrid model);
``cluster_chain``, ``reduced``, ``snap`` (:mod:`.kernels.two_point`)
    a two-point configuration, and N >= 3 Gaussian tokens that run the N-token map until
    they occupy at most two points and the weighted chain after;
``literal``, ``subspace`` (:mod:`.kernels.random_attention`)
    the follow-up's random keys, queries and values.

Random numbers.  Every trajectory owns a random stream (:mod:`stochastic_transformers.rng`)
identified by the seed and its global index, and the kernels draw inside the compiled
loop.  Results are bit-identical whatever the number of threads and however trajectories
are split across calls or workers (``first_trajectory``).
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import xarray as xr

from . import attention as _att
from . import kernels
from . import rng as _rng
from .config import METHODS, MODEL_KINDS, VALUE_LAWS, ModelConfig, RunConfig
from .kernels.tokens import dn_is_faster
from .kernels.two_point import MERGE_ONE_MINUS_OVERLAP
from .memory import check_memory, fixed_memory
from .random_attention import noise_clock

#: Bumped whenever a change alters the numbers a given seed produces; part of every
#: sweep cache key.
SIMULATION_CODE_VERSION = "4"  # 2: N >= 3 Gaussian tokens take the reduced path; 3: the
                               # d*N path only where it is the faster (d >= 2N); 4: two
                               # tokens under the other layers take the overlap chain
#: Methods that can stop a trajectory early (the overlap chains).
CHAIN_METHODS = ("overlap_chain", "cluster_chain", "reduced")

__all__ = ["simulate", "resolve_method", "full_method", "SIMULATION_CODE_VERSION",
           "MERGE_ONE_MINUS_OVERLAP", "METHODS", "MODEL_KINDS", "VALUE_LAWS"]


def _resolve_random_attention(model, method):
    if method not in ("auto", "literal", "subspace"):
        raise ValueError("model='random_attention' runs with method 'auto' (= 'subspace' for "
                         "Gaussian weights, 'literal' otherwise) or 'literal'; got "
                         f"{method!r}")
    if method == "subspace" and not model.gaussian_fluctuations:
        raise ValueError("method='subspace' needs Gaussian fluctuations shared by all tokens "
                         "(values='gaussian', qk_law='gaussian', noise='common'): its "
                         "reductions use their rotation invariance; use 'literal'")
    if method == "auto":
        return "subspace" if model.gaussian_fluctuations else "literal"
    return method


def _resolve_feedforward(model, run):
    """Methods of the model with the feedforward block: the two-point chain (two tokens or
    a split; Gaussian V, B = identity) or the literal map."""
    method = run.method
    chain_ok = model.values == "gaussian" and model.b_is_identity
    chain = "cluster_chain" if run.split is not None else "overlap_chain"
    if run.split is not None and (method not in ("auto", "cluster_chain") or not chain_ok):
        raise ValueError("split with the feedforward block runs on the two-point chain: it "
                         "needs method='auto' or 'cluster_chain', values='gaussian' and "
                         "B = identity; pass a two-point configuration as x0 for the literal map")
    if method == "auto":
        return chain if (chain_ok and (run.n_tokens == 2 or run.split is not None)) else "literal"
    if method == chain and chain_ok and (run.n_tokens == 2 or run.split is not None):
        return method
    if method == "literal":
        return method
    raise ValueError(f"method={method!r} does not run the feedforward block (ff_strength > 0): "
                     "use 'literal', or 'overlap_chain' for two tokens with values='gaussian' "
                     "and B = identity")


def _resolve_other_layer(model, run):
    """Methods of the other normalisations and of the causal mask: the N-token map
    (``literal``, or ``gaussian_dn`` for Gaussian values; the hybrid model's token path),
    and for two tokens with B = I the overlap chain, whose state then adds the two norms
    (:func:`~stochastic_transformers.attention.pair_layer_other`).  The two-cluster chains
    assume the paper's symmetric post-LN layer."""
    method = run.method
    gaussian = model.kind == "stochastic" and model.values == "gaussian"
    chain_ok = run.n_tokens == 2 and model.b_is_identity and (model.kind == "hybrid" or gaussian)
    what = "norm=" + repr(model.norm) if model.norm != "post" else "causal=True"
    if run.split is not None:
        raise ValueError(f"split (the two-point chain) does not run {what}: pass the "
                         "two-point configuration as x0 for the N-token map")
    if method == "gaussian_dn" and gaussian or method == "overlap_chain" and chain_ok:
        return method
    if method not in ("auto", "literal"):
        raise ValueError(f"{what} runs on the N-token map (method 'auto', 'literal' or, for "
                         "Gaussian values, 'gaussian_dn') or, for two tokens with B = identity "
                         f"and Gaussian values or the hybrid model, 'overlap_chain'; got {method!r}")
    if method == "auto" and chain_ok:
        return "overlap_chain"
    if method == "auto" and gaussian and dn_is_faster(run.n_tokens, model.d):
        return "gaussian_dn"
    return "literal"


def _check_explicit(method, gaussian_b, chain_ok, gaussian_values):
    """Raise unless an explicitly requested method applies to the request."""
    if method == "overlap_chain" and not chain_ok:
        raise ValueError("method='overlap_chain' needs n_tokens == 2, B = identity and, for "
                         "model='stochastic', values='gaussian'")
    if method == "cluster_chain":
        raise ValueError("method='cluster_chain' needs split=(m1, m2), the two-point initial "
                         "configuration")
    if method in ("reduced", "snap") and not gaussian_b:
        raise ValueError(f"method={method!r} (the two-cluster reduction) needs "
                         "model='stochastic', values='gaussian' and B = identity")
    if method == "gaussian_dn" and not gaussian_values:
        raise ValueError("method='gaussian_dn' needs model='stochastic' and values='gaussian'")


def resolve_method(model: ModelConfig, run: RunConfig) -> str:
    """The method that runs ``run`` through ``model``: ``run.method`` checked, or for
    ``auto`` the fastest exact one (the overlap chain for two tokens, the weighted chain for
    a ``split``, ``reduced`` for N >= 3 Gaussian tokens with B = identity, the d*N path for
    other Gaussian requests where it is the faster (d >= 2N), the literal map otherwise)."""
    method, kind = run.method, model.kind
    if kind == "random_attention":
        return _resolve_random_attention(model, method)
    if model.has_feedforward:
        return _resolve_feedforward(model, run)
    if not model.is_post_unmasked:
        return _resolve_other_layer(model, run)
    if method == "subspace":
        raise ValueError("method='subspace' belongs to model='random_attention'")
    b_identity = model.b_is_identity
    gaussian_values = kind == "stochastic" and model.values == "gaussian"
    gaussian_b = b_identity and gaussian_values
    chain_ok = (run.n_tokens == 2 and b_identity
                and (kind == "hybrid" or model.values == "gaussian"))
    if run.split is not None:
        if method not in ("auto", "cluster_chain") or not gaussian_b:
            raise ValueError("split (a two-point initial configuration) runs on the weighted "
                             "overlap chain: it needs method='auto' or 'cluster_chain', "
                             "model='stochastic', values='gaussian' and B = identity; to push a "
                             "two-point configuration through the full N-token map, pass it as x0")
        return "cluster_chain"
    if method != "auto":
        _check_explicit(method, gaussian_b, chain_ok, gaussian_values)
        return method
    if chain_ok:
        return "overlap_chain"
    if gaussian_b:
        return "reduced"
    if gaussian_values and dn_is_faster(run.n_tokens, model.d):
        return "gaussian_dn"
    return "literal"


def full_method(n_tokens, d):
    """The N-token method ``auto`` uses for N Gaussian tokens (also inside the reduced path
    before a merge): the exact d*N path where it is the faster, d >= 2N
    (:func:`~stochastic_transformers.kernels.tokens.dn_is_faster`), the literal one otherwise.

    Figures that measure the N-token map itself below the merge threshold (Figure 9's
    clustering gap) pass it explicitly.  Before code version 3 the rule was N < d: the
    same method, hence the same bits, except for d < 2N with N < d (e.g. N = 3, d = 4).
    """
    return "gaussian_dn" if dn_is_faster(n_tokens, d) else "literal"


@dataclasses.dataclass(frozen=True)
class _Plan:
    """The model and the run flattened, with what the kernels need derived once; every
    runner reads it by attribute (:class:`stochastic_transformers.kernels.common.Runner`)."""

    model: ModelConfig
    run: RunConfig
    method: str
    n_layers: int
    B: np.ndarray             # (d, d)
    b_is_identity: bool
    x0: np.ndarray | None     # (n_traj, N, d) or None
    times: np.ndarray | None  # the caller's times, in their order (None: not recorded)
    rec: np.ndarray           # their layers, sorted
    inverse: np.ndarray       # sorted records -> the caller's order
    stop_level: float
    s_stop: float             # early-stopping half angles (0: off)
    c_stop: float
    key0: np.uint64
    key1: np.uint64
    eta: float | None         # the random-attention residual step (None for other models)

    def __getattr__(self, name):
        # Fields of the two configurations read as the plan's own (plan.d, plan.n_traj).
        for config in (self.model, self.run):
            if name in config.__dataclass_fields__:
                return getattr(config, name)
        raise AttributeError(name)

    @property
    def softmax(self) -> bool:
        return self.model.attention == "softmax"

    @property
    def h(self) -> float:
        """The main paper's residual step L^{-1/2}."""
        return 1.0 / math.sqrt(self.run.L)


def _stopping(model, run, method):
    """(stop_level, s_stop, c_stop): the early-stopping level resolved and its half angles."""
    level = run.stop_level
    if not model.is_post_unmasked:
        # The stopping angles are the paper's layer's; pre- and peri-LN pairs can also leave
        # a pole (tokens of one direction and unequal norms move apart).
        if level is not None and level > 0.0:
            raise ValueError("stop_level > 0 needs the paper's layer (norm='post', "
                             "causal=False): the stopping angles are its own")
        return 0.0, 0.0, 0.0
    if model.has_feedforward:
        # The stopping angles come from the diffusion without the block.
        if level is not None and level > 0.0:
            raise ValueError("stop_level > 0 is not available with the feedforward block "
                             "(ff_strength > 0): the stopping angles are those of the model "
                             "without it")
        return 0.0, 0.0, 0.0
    if level is None:
        level = 1e-6 if (run.times is None and method in CHAIN_METHODS
                         and model.kind == "stochastic") else 0.0
    if level > 0.0:
        if model.kind == "random_attention":
            raise ValueError("stop_level applies to the overlap chains of model='stochastic'; "
                             "model='random_attention' has no early stopping")
        if method not in CHAIN_METHODS or model.kind != "stochastic":
            raise ValueError("stop_level > 0 needs the overlap chain of the stochastic model "
                             "(methods 'overlap_chain', 'cluster_chain', 'reduced')")
        from .theory import stopping_angles

        theta, psi = stopping_angles(model.beta, model.d, tol=run.tol, level=level)
        return level, math.sin(theta / 2.0), math.sin(psi / 2.0)
    return level, 0.0, 0.0


def _fixed_memory(model, run, method):
    """Bytes the run holds whatever n_traj (:func:`~.memory.fixed_memory`), with as many
    threads as the compiled loop will run at once."""
    from numba import config as nb_config

    most = nb_config.NUMBA_NUM_THREADS
    threads = min(run.n_threads or most, most, run.n_traj)
    return fixed_memory(method, model.kind, run.n_tokens, model.d, n_threads=threads,
                        n_heads=model.n_heads,
                        ff_width=model.ff_width if model.has_feedforward else 0)


def make_plan(model: ModelConfig, run: RunConfig) -> _Plan:
    """Check what ties the model to the run, resolve the method, refuse a result that cannot
    fit in memory, and derive the kernels' inputs (all before any compute)."""
    if not isinstance(model, ModelConfig) or not isinstance(run, RunConfig):
        raise TypeError("simulate takes a ModelConfig and a RunConfig (configs_from_flat "
                        f"builds both from flat fields); got {type(model).__name__} and "
                        f"{type(run).__name__}")
    if model.kind == "random_attention" and run.split is not None:
        raise ValueError("model='random_attention' draws its own key-query matrices every "
                         "layer: B and split do not apply")
    x0 = run.initial_tokens(model.d)
    times = None if run.times is None else np.array(run.times, dtype=float)
    rec_layers = np.rint((np.zeros(0) if times is None else times) * run.L).astype(np.int64)
    order = np.argsort(rec_layers, kind="stable")
    method = resolve_method(model, run)
    check_memory(method, run.n_traj, run.n_tokens, model.d, rec_layers.size, x0 is not None,
                 fixed=_fixed_memory(model, run, method))
    stop_level, s_stop, c_stop = _stopping(model, run, method)
    key0, key1 = _rng.stream_keys(run.seed)
    return _Plan(model=model, run=run, method=method, n_layers=run.n_layers,
                 B=model.b_matrix, b_is_identity=model.b_is_identity, x0=x0, times=times,
                 rec=np.ascontiguousarray(rec_layers[order]),
                 inverse=np.argsort(order, kind="stable"), stop_level=stop_level,
                 s_stop=s_stop, c_stop=c_stop, key0=key0, key1=key1,
                 eta=model.eta_for(run.L) if model.kind == "random_attention" else None)


def simulate(model: ModelConfig, run: RunConfig) -> xr.Dataset:
    r"""Run ``run`` through the layer map ``model``; return the final Gram matrices.

    Parameters
    ----------
    model : ModelConfig
        The layer map (:class:`stochastic_transformers.config.ModelConfig`: the model
        kind, d, beta, attention, the law and scale of V, B, epsilon, heads).
    run : RunConfig
        The run (:class:`stochastic_transformers.config.RunConfig`: tokens, trajectories,
        L, T, seed, method, initial tokens, records, early stopping, threads).

    Returns
    -------
    xarray.Dataset
        ``gram`` (trajectory, i, j) at time T, and ``gram_t`` (trajectory, time, i, j)
        when ``run.times`` is given.  For the overlap chain also ``one_minus_overlap`` and
        ``one_plus_overlap`` (full relative precision near both poles) and
        ``stopped_layer`` (-1 if never stopped); the same for ``cluster_chain``, with an
        N x N ``gram``.  ``reduced`` gives ``gram``, ``one_plus_min_overlap`` (1 + the
        smallest pairwise overlap, precise near -1), ``merge_layer`` (first layer with at
        most two points, -1 if none), ``merge_points`` (1 or 2; 0 if never merged),
        ``merge_m1`` (tokens in token 0's point), ``merge_one_plus_overlap`` and
        ``merge_one_minus_overlap`` (the state handed to the chain) and ``stopped_layer``;
        it has no ``tokens`` (the chain keeps only the overlap).  The N-token methods give
        ``tokens``.  Every field of both configurations, the method, the code version and
        the wall time are in ``attrs``.
    """
    t_start = time.perf_counter()
    plan = make_plan(model, run)
    bar = None
    if run.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=run.n_traj, desc=f"simulate ({plan.method})", unit="traj")
    try:
        with _att.numba_threads(run.n_threads):  # process-wide state: restored after the call
            data, stopped = kernels.run(plan, bar)
    finally:
        if bar is not None:
            bar.close()
    return _dataset(plan, data, stopped, time.perf_counter() - t_start)


def _start_attr(run):
    if run.x0 is not None:
        return "given"
    return "uniform" if run.z0 is None else run.z0


def _dataset(plan, data, stopped, wall_time_s):
    """The returned dataset: the runner's arrays, coordinates and every parameter in attrs."""
    model, run = plan.model, plan.run
    coords = {"trajectory": np.arange(run.first_trajectory, run.first_trajectory + run.n_traj)}
    if plan.times is not None:
        coords["time"] = plan.times
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(dict(
        n_tokens=run.n_tokens, d=model.d, beta=model.beta, n_traj=run.n_traj, L=run.L,
        T=run.T, n_layers=plan.n_layers, attention=model.attention,
        values=model.values if model.kind != "hybrid" else "none",
        sigma=model.sigma, model=model.kind, epsilon=model.epsilon, method=plan.method,
        seed=run.seed, B="identity" if plan.b_is_identity else repr(plan.B.tolist()),
        z0=_start_attr(run), split="none" if run.split is None else f"{run.split[0]},{run.split[1]}",
        merge_one_minus_overlap=(MERGE_ONE_MINUS_OVERLAP
                                 if plan.method in ("cluster_chain", "reduced", "snap") else 0.0),
        stop_level=plan.stop_level, tol=run.tol, stopped_fraction=float(np.mean(stopped >= 0)),
        first_trajectory=run.first_trajectory, code_version=SIMULATION_CODE_VERSION,
        wall_time_s=wall_time_s,
    ))
    if not model.is_post_unmasked:
        ds.attrs.update(norm=model.norm, causal=int(model.causal))
    if model.has_feedforward:
        ds.attrs.update(ff_strength=model.ff_strength, ff_width=model.ff_width,
                        ff_activation=model.ff_activation)
    if model.kind == "random_attention":
        ds.attrs.update(n_heads=model.n_heads, sigma_qk=model.sigma_qk, eta=plan.eta,
                        qk_law=model.qk_law, noise=model.noise, mean_v=repr(model.mean_v),
                        mean_qk=repr(model.mean_qk),
                        noise_clock=noise_clock(plan.n_layers, plan.eta, model.sigma,
                                                model.n_heads))
    return ds
