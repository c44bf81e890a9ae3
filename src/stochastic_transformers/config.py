r"""The model and the run, as two frozen configurations passed whole to :func:`simulate`.

:class:`ModelConfig` is the layer map: what one layer does to the tokens (the attention,
its temperature, the law and scale of the value matrices, the key-query matrix, the
follow-up's heads and key-query law).  :class:`RunConfig` is what is run through it: how
many tokens and trajectories, the depth and the horizon, where the tokens start, what is
recorded, the seed and the method.  Each validates its own fields once, when it is made
(a ``ValueError`` naming the field and its allowed range, before any compute);
:func:`stochastic_transformers.simulation.simulate` checks only what ties the two
together (the dimension of given tokens, the methods a model has).

A new block of the layer map is a new field of :class:`ModelConfig`, validated in its
``__post_init__``, not a new keyword of :func:`simulate`.

Example::

    from stochastic_transformers import ModelConfig, RunConfig, simulate
    ds = simulate(ModelConfig(d=4, beta=2.0), RunConfig(n_tokens=2, n_traj=1000, L=100, T=10))
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ._validation import (ATTENTIONS, EPSILON_MAX, ETA_MAX, FF_STRENGTH_MAX, MAX_TRAJECTORY,
                          SIGMA_MAX, check_bool, check_choice, check_int, check_layer_times,
                          check_level, check_real, check_real_array, check_real_matrix,
                          check_tol, check_whole_layers)
from .activations import ACTIVATIONS

#: Laws of the entries of V (uniform on :math:`[-\sqrt3\sigma, \sqrt3\sigma]`, Rademacher
#: :math:`\pm\sigma`).
VALUE_LAWS = ("gaussian", "uniform", "rademacher")
#: Laws of the entries of the random-attention model's V, W and W' (Rademacher: :math:`\pm`
#: the standard deviation).
RANDOM_ATTENTION_LAWS = ("gaussian", "rademacher")
#: How the random-attention model's weights are shared: by all tokens (the follow-up's common
#: noise) or drawn per token (independent noise, the kernel K zero off the diagonal).
NOISES = ("common", "independent")
#: Largest absolute entry of the random-attention model's mean matrices E V and E A, and
#: largest standard deviation of its fluctuations (beyond, scores and steps overflow; the
#: same bound as every model's sigma, :data:`~stochastic_transformers._validation.SIGMA_MAX`).
MEAN_MAX = 1e3
SCALE_MAX = SIGMA_MAX
#: The layer maps: the paper's stochastic model (eq. 4), its hybrid model (eq. 7), and the
#: follow-up's random keys, queries and values.
MODEL_KINDS = ("stochastic", "hybrid", "random_attention")
#: Every method; :func:`stochastic_transformers.simulation.resolve_method` says which
#: apply to which model.
METHODS = ("auto", "literal", "gaussian_dn", "overlap_chain", "cluster_chain", "reduced", "snap",
           "subspace")
#: Where a layer normalises (:func:`stochastic_transformers.attention.layer_literal`), with
#: :math:`N(y) = y/|y|` and :math:`u_i` the block's output (:math:`hVA_i`, or :math:`wA_i` in
#: the hybrid model): "post", the paper's, :math:`N(x_i + u_i)`; "pre", :math:`x_i + u_i`
#: (attention reads the directions :math:`N(x_j)`); "peri", :math:`x_i + hN(VA_i)`; "ngpt",
#: :math:`N(x_i + hN(VA_i))` (nGPT-style: on the sphere, a unit-norm update).
NORMS = ("post", "pre", "peri", "ngpt")
#: Largest number of heads of the random-attention model (a bound on scratch memory).
MAX_HEADS = 4096
#: Largest width of the feedforward block (a bound on scratch memory and on the cost of a
#: layer, which draws the width's worth of normals per token).
MAX_FF_WIDTH = 1 << 16


def _set(obj, **values):
    """Store converted values on a frozen dataclass (validation happens in __post_init__)."""
    for name, value in values.items():
        object.__setattr__(obj, name, value)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    r"""One layer of the model, for tokens on :math:`S^{d-1}`.

    Stochastic model (paper eq. 4), :math:`h = L^{-1/2}`:
    :math:`X^i_{n+1} = \operatorname{normalize}(X^i_n + h V_{n+1} A_\beta(X^i_n, X_n))`, with
    :math:`V_{n+1}` a fresh :math:`d\times d` matrix of i.i.d. centred entries of variance
    :math:`\sigma^2` (law ``values``), shared by all tokens.  Hybrid model (eq. 7):
    :math:`X^i_{n+1} = \operatorname{normalize}(X^i_n + w_{n+1} A_\beta(X^i_n, X_n))`,
    :math:`w_{n+1} = 1/L + \varepsilon\,\xi_{n+1}/\sqrt L` (:math:`\varepsilon = 0` is the
    deterministic attention flow).  Random-attention model (the follow-up of Koubbi,
    Geshkovski and Rigollet; :mod:`stochastic_transformers.random_attention`): ``n_heads``
    heads with, in every layer and head, fresh :math:`V_h = \bar V + \sigma Z_h` and
    :math:`A_h = \bar A + W_h W_h'^\top` (:math:`Z_h, W_h, W'_h` of i.i.d. centred entries of
    variances 1, :math:`\sigma_{qk}^2`, :math:`\sigma_{qk}^2`; means
    :math:`\bar V, \bar A`, zero in the follow-up's Gaussian case), and residual step ``eta``.

    Feedforward block (ours, the book's chapter "Feedforward blocks"; stochastic model
    only): with ``ff_strength`` :math:`r > 0` every layer adds a random two-layer
    perceptron, fresh every layer and shared by all tokens, to the attention update,
    :math:`X^i_{n+1} = \operatorname{normalize}(X^i_n + h[V_{n+1} A_\beta(X^i_n, X_n) +
    \sqrt r\, W_2\varphi(W_1 X^i_n)])`, with :math:`W_1` (``ff_width`` x d) of
    :math:`N(0, 1)` entries and :math:`W_2` (d x ``ff_width``) of :math:`N(0, 1/m)` entries.

    Attributes
    ----------
    d : int
        Dimension of the space, >= 2.
    beta : float
        Inverse temperature, >= 0.
    kind : {"stochastic", "hybrid", "random_attention"}
        The layer map (the ``model`` attribute of a simulated dataset).
    attention : {"softmax", "unnormalized"}
        Softmax or unnormalised attention (unnormalised weights are rescaled exactly where
        they would overflow, :func:`stochastic_transformers.attention.attention`).
    values : {"gaussian", "uniform", "rademacher"}
        Law of the entries of V; the hybrid model has none.
    sigma : float
        Standard deviation of the entries of V, > 0 and at most
        :data:`~stochastic_transformers._validation.SIGMA_MAX` (1e6; beyond, a layer can
        overflow).
    epsilon : float
        Noise level of the hybrid model, 0 to
        :data:`~stochastic_transformers._validation.EPSILON_MAX` (1e6; 0 for the other models).
    B : (d, d) nested sequence, optional
        The fixed key-query matrix :math:`Q^\top K` (identity when omitted), real and finite;
        stored as a tuple of tuples so that the configuration stays hashable.
    n_heads, sigma_qk, eta
        Random-attention model only: heads per layer (1 to :data:`MAX_HEADS`), the standard
        deviation of the entries of :math:`W, W'` (0 to :data:`SCALE_MAX`), and the residual
        step (> 0 and at most :data:`~stochastic_transformers._validation.ETA_MAX`, 1e6;
        ``None`` means :math:`L^{-1/2}`).  ``sigma`` and ``sigma_qk`` may be 0 in this
        model (V or A equal to its mean).
    mean_v, mean_qk
        Random-attention model only: the means :math:`\bar V = E V_h` and
        :math:`\bar A = E A_h`, a number c (the matrix :math:`cI`) or a (d, d) nested
        sequence, entries at most :data:`MEAN_MAX` in absolute value (0: the follow-up's
        centred case, no attention drift).
    qk_law : {"gaussian", "rademacher"}
        Random-attention model only: the law of the entries of :math:`W_h, W'_h`
        (``values`` gives that of :math:`Z_h`: "gaussian" or "rademacher").
    noise : {"common", "independent"}
        Random-attention model only: one draw of the weights per layer and head shared by
        all tokens (the follow-up's model, common noise), or one per token (independent
        noise: the increments of different tokens are independent; literal method only).
    ff_strength : float
        Strength :math:`r` of the feedforward block relative to the value noise, 0 to
        :data:`~stochastic_transformers._validation.FF_STRENGTH_MAX` (0: no block, the
        paper's model).
    ff_width : int
        Width :math:`m` of the block's hidden layer, 1 to :data:`MAX_FF_WIDTH` (the depth
        limit does not depend on it).
    ff_activation : {"relu", "gelu", "erf", "tanh", "identity"}
        The activation :math:`\varphi` (:mod:`stochastic_transformers.activations`).
    norm : {"post", "pre", "peri", "ngpt"}
        Where the layer normalises (:data:`NORMS`; ours, the book's chapter "Other
        normalisations"): "post" is the paper's model.  The others belong to the stochastic
        and hybrid models with softmax attention and no feedforward block; "pre" and "peri"
        tokens leave the sphere (attention reads their directions, and the Gram matrices a
        run returns keep their norms).
    causal : bool
        A decoder's causal mask: token i attends to tokens j <= i only (softmax attention,
        stochastic and hybrid models).
    """

    d: int
    beta: float
    kind: str = "stochastic"
    attention: str = "softmax"
    values: str = "gaussian"
    sigma: float = 1.0
    epsilon: float = 0.0
    B: tuple | None = None
    n_heads: int = 1
    sigma_qk: float = 1.0
    eta: float | None = None
    mean_v: float | tuple = 0.0
    mean_qk: float | tuple = 0.0
    qk_law: str = "gaussian"
    noise: str = "common"
    ff_strength: float = 0.0
    ff_width: int = 16
    ff_activation: str = "relu"
    norm: str = "post"
    causal: bool = False

    def __post_init__(self):
        _set(self, d=check_int("d", self.d, 2), beta=check_real("beta", self.beta, 0.0),
             attention=check_choice("attention", self.attention, ATTENTIONS),
             values=check_choice("values", self.values, VALUE_LAWS),
             kind=check_choice("model", self.kind, MODEL_KINDS),
             epsilon=check_real("epsilon", self.epsilon, 0.0, EPSILON_MAX))
        if self.kind != "hybrid" and self.epsilon != 0.0:
            raise ValueError(f"epsilon must be 0 for model={self.kind!r} (it is the hybrid "
                             f"model's noise level); got {self.epsilon}")
        # V may equal its mean only in the random-attention model (elsewhere V is centred).
        _set(self, sigma=check_real("sigma", self.sigma, 0.0, SIGMA_MAX,
                                    strict_min=self.kind != "random_attention"))
        if self.B is not None:
            B = check_real_matrix("B", self.B, (self.d, self.d))
            _set(self, B=tuple(tuple(float(v) for v in row) for row in B))
        if self.kind == "random_attention":
            self._check_random_attention()
        elif (self.n_heads != 1 or self.sigma_qk != 1.0 or self.eta is not None
              or self.qk_law != "gaussian" or self.noise != "common" or not (_is_zero(self.mean_v)
                                                   and _is_zero(self.mean_qk))):
            raise ValueError("n_heads, sigma_qk, eta, mean_v, mean_qk, qk_law and noise belong to "
                             f"model='random_attention'; got model={self.kind!r}")
        self._check_feedforward()
        self._check_norm()

    def _check_norm(self):
        _set(self, norm=check_choice("norm", self.norm, NORMS),
             causal=check_bool("causal", self.causal))
        if self.is_post_unmasked:
            return
        what = (f"norm={self.norm!r}" if self.norm != "post" else "") + (
            " and " if self.norm != "post" and self.causal else "") + (
            "causal=True" if self.causal else "")
        if self.kind not in ("stochastic", "hybrid"):
            raise ValueError(f"{what} belongs to model='stochastic' or 'hybrid'; got "
                             f"model={self.kind!r}")
        if self.attention != "softmax":
            raise ValueError(f"{what} needs attention='softmax'; got {self.attention!r}")
        if self.has_feedforward:
            raise ValueError(f"{what} does not combine with the feedforward block "
                             "(ff_strength must be 0)")

    @property
    def is_post_unmasked(self) -> bool:
        """Whether the layer is the paper's: normalised after the update, no causal mask."""
        return self.norm == "post" and not self.causal

    @property
    def on_sphere(self) -> bool:
        """Whether the tokens stay on the unit sphere (post-LN and nGPT-style layers)."""
        return self.norm in ("post", "ngpt")

    def _check_feedforward(self):
        _set(self, ff_strength=check_real("ff_strength", self.ff_strength, 0.0, FF_STRENGTH_MAX),
             ff_width=check_int("ff_width", self.ff_width, 1, MAX_FF_WIDTH),
             ff_activation=check_choice("ff_activation", self.ff_activation, ACTIVATIONS))
        if self.ff_strength > 0.0 and self.kind != "stochastic":
            raise ValueError("the feedforward block (ff_strength > 0) belongs to "
                             f"model='stochastic'; got model={self.kind!r}")

    @property
    def has_feedforward(self) -> bool:
        """Whether the layer map carries the feedforward block (``ff_strength`` > 0)."""
        return self.ff_strength > 0.0

    def _check_random_attention(self):
        _set(self, n_heads=check_int("n_heads", self.n_heads, 1, MAX_HEADS),
             sigma_qk=check_real("sigma_qk", self.sigma_qk, 0.0, SCALE_MAX),
             qk_law=check_choice("qk_law", self.qk_law, RANDOM_ATTENTION_LAWS),
             noise=check_choice("noise", self.noise, NOISES),
             mean_v=_mean_field("mean_v", self.mean_v, self.d),
             mean_qk=_mean_field("mean_qk", self.mean_qk, self.d))
        if self.eta is not None:
            _set(self, eta=check_real("eta", self.eta, 0.0, ETA_MAX, strict_min=True))
        if self.attention != "softmax":
            raise ValueError("model='random_attention' is the follow-up's softmax model: it "
                             f"needs attention='softmax'; got {self.attention!r}")
        if self.values not in RANDOM_ATTENTION_LAWS:
            raise ValueError("model='random_attention' takes values in "
                             f"{RANDOM_ATTENTION_LAWS}; got {self.values!r}")
        if self.B is not None:
            raise ValueError("model='random_attention' draws its own key-query matrices every "
                             "layer: B and split do not apply")

    @property
    def mean_v_matrix(self) -> np.ndarray:
        """:math:`\bar V = E V_h` as a (d, d) array."""
        return _mean_matrix(self.mean_v, self.d)

    @property
    def mean_qk_matrix(self) -> np.ndarray:
        """:math:`\bar A = E A_h` as a (d, d) array."""
        return _mean_matrix(self.mean_qk, self.d)

    @property
    def gaussian_fluctuations(self) -> bool:
        """Whether the random-attention weights fluctuate by Gaussian entries (V and W, W')
        shared by all tokens: what the subspace reductions need."""
        return (self.values == "gaussian" and self.qk_law == "gaussian"
                and self.noise == "common")

    @property
    def b_matrix(self) -> np.ndarray:
        """:math:`B` as a (d, d) array."""
        return np.eye(self.d) if self.B is None else np.array(self.B, dtype=float)

    @property
    def b_is_identity(self) -> bool:
        return self.B is None or bool(np.array_equal(self.b_matrix, np.eye(self.d)))

    def eta_for(self, L: int) -> float:
        """The random-attention residual step for ``L`` layers per unit time."""
        return 1.0 / math.sqrt(L) if self.eta is None else self.eta


def _is_zero(mean) -> bool:
    return not isinstance(mean, (tuple, list, np.ndarray)) and mean == 0.0


def _mean_field(name, value, d):
    """A mean matrix field: a number c (for cI) as a float, a (d, d) matrix as a tuple of
    tuples (hashable), both finite with entries at most MEAN_MAX in absolute value."""
    if isinstance(value, (tuple, list, np.ndarray)):
        m = check_real_matrix(f"{name} (a number or a matrix)", value, (d, d), MEAN_MAX)
        return tuple(tuple(float(x) for x in row) for row in m)
    return check_real(name, value, -MEAN_MAX, MEAN_MAX)


def _mean_matrix(mean, d):
    if isinstance(mean, tuple):
        return np.array(mean, dtype=float)
    return mean * np.eye(d)


@dataclasses.dataclass(frozen=True, eq=False)
class RunConfig:
    r"""What is run through the layer map: tokens, trajectories, depth, records, seed, method.

    ``T * L`` layers are run (time :math:`t = n / L`).  Compared by identity (it may hold
    an array of initial tokens).

    Attributes
    ----------
    n_tokens : int
        Number of tokens, >= 2.
    n_traj : int
        Number of independent trajectories, >= 1.
    L : int
        Layers per unit time, >= 1.
    T : float
        Horizon, >= 0; ``T * L`` must be whole.
    seed : int
        Seed of the per-trajectory random streams (:mod:`stochastic_transformers.rng`), >= 0.
    method : str
        One of :data:`METHODS`; ``auto`` picks the fastest exact method for the request
        (:func:`stochastic_transformers.simulation.resolve_method`).
    times : sequence of float, optional
        Also record the Gram matrices at these times (each in [0, T], on the layer grid:
        within :data:`~stochastic_transformers._validation.LAYER_TOL` of a layer).
    x0 : array (N, d) or (n_traj, N, d), optional
        Initial tokens (unit vectors); default i.i.d. uniform on the sphere.
    z0 : float, optional
        Two tokens (or a ``split``) only: start at overlap ``z0`` in [-1, 1] (a uniformly
        random pair with that overlap).
    split : (int, int), optional
        A two-point initial configuration: ``m1`` tokens at one point and ``m2`` at another
        (``m1 + m2 = n_tokens``), the points independent uniform or at overlap ``z0``.
    stop_level : float, optional
        Overlap chains of the stochastic model: stop a trajectory once the limit diffusion's
        probability of ever leaving its pole is below this level
        (:func:`stochastic_transformers.theory.stopping_angles`), in [0, 1).  ``None``:
        1e-6 when ``times`` is not given and the method is a chain, off otherwise; 0 turns
        it off.
    tol : float
        Classification tolerance used by early stopping, in (0, 1).
    n_threads : int, optional
        Threads of the compiled loop over trajectories (default: numba's setting).  Results
        do not depend on it.
    first_trajectory : int
        Global index of the first trajectory, so that pieces of one ensemble run anywhere
        give the bits of the whole run; ``first_trajectory + n_traj`` at most
        :data:`~stochastic_transformers._validation.MAX_TRAJECTORY` (indices are int64).
    progress : bool
        Show a progress bar over trajectories (True or False).
    """

    n_tokens: int
    n_traj: int
    L: int
    T: float
    seed: int = 0
    method: str = "auto"
    times: tuple | None = None
    x0: np.ndarray | None = None
    z0: float | None = None
    split: tuple | None = None
    stop_level: float | None = None
    tol: float = 1e-3
    n_threads: int | None = None
    first_trajectory: int = 0
    progress: bool = False

    def __post_init__(self):
        _set(self, n_tokens=check_int("n_tokens", self.n_tokens, 2),
             n_traj=check_int("n_traj", self.n_traj, 1), L=check_int("L", self.L, 1),
             T=check_real("T", self.T, 0.0), method=check_choice("method", self.method, METHODS),
             seed=check_int("seed", self.seed, 0),
             tol=check_tol(self.tol), progress=check_bool("progress", self.progress))
        self._check_first_trajectory()
        if self.n_threads is not None:
            _set(self, n_threads=check_int("n_threads", self.n_threads, 1))
        check_whole_layers(self.T, self.L)
        if self.stop_level is not None:
            _set(self, stop_level=check_level("stop_level", self.stop_level, off=True))
        self._check_start()
        if self.times is not None:
            times = check_layer_times("times", self.times, self.L, self.T)
            _set(self, times=tuple(float(t) for t in times))

    def _check_first_trajectory(self):
        """first_trajectory as an int that keeps every trajectory index in int64 (beyond, the
        trajectory coordinate would silently turn into float64 and repeat values)."""
        first = check_int("first_trajectory", self.first_trajectory, 0)
        if first + self.n_traj > MAX_TRAJECTORY:
            raise ValueError(f"first_trajectory must be <= 2**63 - 1 - n_traj = "
                             f"{MAX_TRAJECTORY - self.n_traj} (trajectory indices are int64); "
                             f"got first_trajectory={first}, n_traj={self.n_traj}")
        _set(self, first_trajectory=first)

    def _check_start(self):
        """split, z0 and x0: each valid, and at most one way of placing the tokens."""
        if self.split is not None:
            split = self.split
            if isinstance(split, (str, bytes)) or not hasattr(split, "__len__") \
                    or len(split) != 2:
                raise ValueError(f"split must be a pair (m1, m2) of token counts; got {split!r}")
            split = (check_int("split[0]", split[0], 1), check_int("split[1]", split[1], 1))
            if sum(split) != self.n_tokens:
                raise ValueError(f"split={split} must add up to n_tokens={self.n_tokens}")
            if self.x0 is not None:
                raise ValueError("give at most one of x0 and split")
            _set(self, split=split)
        if self.z0 is not None:
            if self.n_tokens != 2 and self.split is None:
                raise ValueError("z0 (an initial overlap) needs n_tokens == 2 or a split")
            _set(self, z0=check_real("z0", self.z0, -1.0, 1.0))
        if self.x0 is not None:
            if self.z0 is not None:
                raise ValueError("give at most one of x0 and z0")
            if isinstance(self.x0, (str, bytes)):
                raise ValueError("x0 must be an (N, d) or (n_traj, N, d) array of unit vectors; "
                                 f"got {self.x0!r}")
            x0 = check_real_array("x0", self.x0)
            if x0.ndim not in (2, 3):
                raise ValueError("x0 must be an (N, d) or (n_traj, N, d) array of unit vectors; "
                                 f"got shape {x0.shape}")
            x0.setflags(write=False)
            _set(self, x0=x0)

    @property
    def n_layers(self) -> int:
        return check_whole_layers(self.T, self.L)

    def initial_tokens(self, d: int) -> np.ndarray | None:
        """The given initial tokens as an (n_traj, N, d) array, checked against ``d``."""
        if self.x0 is None:
            return None
        n, n_tok = self.n_traj, self.n_tokens
        x0 = self.x0
        if x0.shape == (n_tok, d):
            x0 = np.broadcast_to(x0, (n, n_tok, d))
        if x0.shape != (n, n_tok, d):
            raise ValueError(f"x0 must have shape ({n_tok}, {d}) or ({n}, {n_tok}, {d}); got "
                             f"{self.x0.shape}")
        if not np.allclose(np.linalg.norm(x0, axis=-1), 1.0, atol=1e-10):
            raise ValueError("x0 must hold unit vectors (tokens on the sphere)")
        return x0


#: The flat name of each field (``model`` is :attr:`ModelConfig.kind`).
_MODEL_FIELDS = {f.name: f.name for f in dataclasses.fields(ModelConfig)} | {"model": "kind"}
_MODEL_FIELDS.pop("kind")
_RUN_FIELDS = {f.name for f in dataclasses.fields(RunConfig)}


def configs_from_flat(**fields) -> tuple[ModelConfig, RunConfig]:
    """Split one flat set of fields (``d=4, beta=2.0, n_tokens=2, model="hybrid", ...``)
    into the model's and the run's configurations; an unknown name raises a ValueError."""
    unknown = sorted(set(fields) - set(_MODEL_FIELDS) - _RUN_FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}; the model takes "
                         f"{', '.join(sorted(_MODEL_FIELDS))} and the run takes "
                         f"{', '.join(sorted(_RUN_FIELDS))}")
    model = ModelConfig(**{_MODEL_FIELDS[k]: v for k, v in fields.items() if k in _MODEL_FIELDS})
    run = RunConfig(**{k: v for k, v in fields.items() if k in _RUN_FIELDS})
    return model, run
