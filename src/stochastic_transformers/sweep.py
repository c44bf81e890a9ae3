"""The sweep engine: run one cell function over a parameter grid.

Every figure is a grid of independent simulations ("cells").  :func:`run_sweep`
runs the Cartesian product of a grid, on a Dask cluster or in-process, caches
each finished cell on disk so that an interrupted run resumes, and gathers the
results into one labelled :class:`xarray.Dataset`.

A cell is a plain module-level function::

    def cell(*, n_tokens, beta, n_runs, seed):
        rng = np.random.default_rng(seed)
        ...
        return {"clustered": count, "energy": array_over_depth}

It receives one value per grid parameter, every ``fixed`` parameter, and an
integer ``seed``; it returns a dict of scalars or numpy arrays (an array output
must have the same shape in every cell).

Seeds
-----
A cell's ``seed`` is :func:`cell_seed` of the sweep ``seed`` and the cell's
full set of keyword arguments (its grid values merged with ``fixed``):

1. the arguments are written as canonical JSON (names sorted; values encoded
   by value, so ``1``, ``1.0`` and ``numpy.int64(1)`` are the same value, and a
   numpy array is the same as the nested list of its entries; booleans stay
   distinct from numbers);
2. its SHA-256 digest, as eight 32-bit words, is the ``spawn_key`` of a
   :class:`numpy.random.SeedSequence` whose entropy is the sweep ``seed`` -
   each cell is a child of the sweep's root seed, named by its parameters;
3. the cell seed is the first 64-bit word of that sequence's state, shifted
   right by one bit so that it fits an int64 (it is stored as ``cell_seed``).

A cell's seed therefore depends neither on the other cells of the grid, nor on
their order, nor on whether a parameter was swept or fixed, nor on the sweep
name: the same parameters and ``seed`` always give the same random numbers.

Cache
-----
With ``cache_dir``, each finished cell is written to
``cache_dir/NAME/KEY.npz``, where ``KEY`` is the SHA-256 of the canonical JSON
of (cache format, sweep name, the cell function's ``module.qualname``,
``code_version``, the cell's keyword arguments, the sweep ``seed``).  Files are
written through :func:`stochastic_transformers.io.atomic_path` (temporary file,
``fsync``, atomic rename), so a run killed at any moment, even by SIGKILL,
leaves only complete files under their final names.  A file is trusted only if
it opens, passes the zip CRC checks, and names its own key; anything else is
reported and recomputed.  Changing ``code_version`` (by default
``stochastic_transformers.SIMULATION_CODE_VERSION`` when the package defines
it, else the package version, followed by ``+ID.CELL_VERSION`` of the module that
defines the cell when it has one) invalidates every cell at once.  A cached cell whose
output names differ from those of the newest cached cell, or of a cell computed in the
same call, is treated as a miss and recomputed (a cell edited without a version bump).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import math
import os
import re
import sys
import time
import zipfile
from collections.abc import Mapping
from concurrent.futures import CancelledError
from numbers import Integral, Real
from pathlib import Path

import numpy as np

from ._validation import check_int
from .io import atomic_path, load_average, provenance, writable_folder, write_netcdf

__all__ = ["run_sweep", "cell_seed", "cache_key", "save_sweep", "load_sweep", "summed_attrs"]

logger = logging.getLogger(__name__)

#: Bumped whenever the layout of a cache file changes, so old files are ignored.
CACHE_FORMAT = 1
#: Name of the per-cell seed variable added to every sweep dataset.
CELL_SEED_VAR = "cell_seed"
#: Temporary files older than this are orphans of a killed run (a write takes
#: milliseconds), so they may be removed without racing a live writer.
_STALE_TMP_S = 3600.0

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ADDRESS_PREFIXES = ("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")
_SCHEDULER_HELP = ("None (a local cluster), 'local', 'synchronous', a scheduler address such "
                   "as 'tcp://host:8786', or a distributed.Client")
#: Seconds to wait for a scheduler given by its address: a live one answers in well under
#: a second, and a closed port must not hold the caller for distributed's 30 s default.
SCHEDULER_CONNECT_TIMEOUT_S = 5


# --------------------------------------------------------------------------
# canonical encoding, seeds and cache keys
# --------------------------------------------------------------------------

def _canonical(value, where: str):
    """JSON-able, tagged encoding of ``value`` that identifies it by value."""
    if value is None:
        return ["none"]
    if isinstance(value, (bool, np.bool_)):
        return ["bool", bool(value)]
    if isinstance(value, Integral):
        return ["num", str(int(value))]
    if isinstance(value, Real):
        x = float(value)
        # An integral float names the same number as the int; encoding both as
        # the int keeps seeds stable when a grid comes as a float array.
        if math.isfinite(x) and x.is_integer():
            return ["num", str(int(x))]
        return ["num", repr(x)]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufU":
            raise ValueError(f"{where} must hold numbers, booleans or strings, "
                             f"got an array of dtype {value.dtype}")
        return _canonical(value.tolist(), where)
    if isinstance(value, (list, tuple)):
        return ["seq", [_canonical(v, f"{where}[{i}]") for i, v in enumerate(value)]]
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise ValueError(f"{where} must have string keys, got {key!r}")
        return ["map", [[key, _canonical(value[key], f"{where}[{key!r}]")]
                        for key in sorted(value)]]
    raise ValueError(f"{where} must be a number, bool, str, None, or a list, tuple, dict or "
                     f"numpy array of those; got {type(value).__name__}")


def _canonical_json(obj, where: str = "params") -> str:
    """Deterministic JSON text of ``obj`` (see :func:`_canonical`)."""
    return json.dumps(_canonical(obj, where), separators=(",", ":"), ensure_ascii=True)


def cell_seed(seed: int, params: Mapping) -> int:
    """Seed passed to the cell with keyword arguments ``params`` in a sweep seeded ``seed``.

    The canonical JSON of ``params`` is hashed with SHA-256; the digest, as
    eight 32-bit words, is the ``spawn_key`` of a
    ``numpy.random.SeedSequence(seed)``, whose first 64-bit state word, shifted
    right by one bit, is the result.

    Parameters
    ----------
    seed : int
        The sweep's seed, ``>= 0``.
    params : Mapping
        Every keyword argument of the cell except ``seed`` (grid and fixed).

    Returns
    -------
    int
        A seed in ``[0, 2**63)``, independent of any other cell.
    """
    seed = check_int("seed", seed, 0)
    digest = hashlib.sha256(_canonical_json(dict(params)).encode()).digest()
    words = tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 32, 4))
    state = np.random.SeedSequence(seed, spawn_key=words).generate_state(1, np.uint64)[0]
    return int(state >> np.uint64(1))


def cache_key(name: str, cell_id: str, code_version: str, params: Mapping, seed: int) -> str:
    """Hex SHA-256 naming the cache file of one cell.

    Parameters
    ----------
    name : str
        The sweep name.
    cell_id : str
        ``module.qualname`` of the cell function.
    code_version : str
        Version of the simulation code; a change invalidates every cell.
    params : Mapping
        Every keyword argument of the cell except ``seed``.
    seed : int
        The sweep's seed.

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    blob = _canonical_json({"format": CACHE_FORMAT, "name": name, "cell": cell_id,
                            "code_version": str(code_version), "params": dict(params),
                            "seed": int(seed)})
    return hashlib.sha256(blob.encode()).hexdigest()


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------

def _scalar(value, where: str):
    """A grid value as a plain Python bool, int, float or str."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"{where} must hold numbers, booleans or strings, got {value!r}")


def _check_grid(grid) -> dict[str, list]:
    """Validated copy of ``grid``: ``{name: [python scalars]}`` in the given order."""
    if not isinstance(grid, Mapping):
        raise ValueError(f"grid must be a dict {{parameter: values}}, got {type(grid).__name__}")
    out = {}
    for key, values in grid.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"grid keys must be parameter names (identifiers), got {key!r}")
        where = f"grid[{key!r}]"
        if key == "seed":
            raise ValueError(f"{where}: 'seed' is reserved (the sweep derives each cell's seed)")
        if isinstance(values, np.ndarray) and values.ndim != 1:
            raise ValueError(f"{where} must be a 1-d sequence of values, got an array of "
                             f"shape {values.shape}")
        if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__"):
            raise ValueError(f"{where} must be a 1-d sequence of values, got {values!r}")
        values = [_scalar(v, where) for v in values]
        if not values:
            raise ValueError(f"{where} must hold at least one value, got an empty sequence")
        kinds = {"bool" if isinstance(v, bool) else "str" if isinstance(v, str) else "number"
                 for v in values}
        if len(kinds) > 1:
            raise ValueError(f"{where} must hold values of one kind (numbers, booleans or "
                             f"strings), got {sorted(kinds)}")
        if kinds == {"number"} and not all(math.isfinite(v) for v in values):
            raise ValueError(f"{where} must hold finite numbers, got {values!r}")
        seen = {}
        for v in values:
            enc = _canonical_json(v, where)
            if enc in seen:
                raise ValueError(f"{where} must not repeat a value, got {seen[enc]!r} and {v!r}")
            seen[enc] = v
        out[key] = values
    return out


def _check_fixed(fixed, grid: Mapping) -> dict:
    """Validated copy of ``fixed``."""
    out = {}
    for key, value in _mapping_or_none("fixed", fixed, "{parameter: value}").items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"fixed keys must be parameter names (identifiers), got {key!r}")
        if key == "seed":
            raise ValueError("fixed['seed']: 'seed' is reserved (the sweep derives each "
                             "cell's seed); pass seed=... to run_sweep")
        if key in grid:
            raise ValueError(f"fixed[{key!r}] is also a grid parameter; give it in one place")
        _canonical(value, f"fixed[{key!r}]")  # raises on values that cannot be hashed
        out[key] = value
    return out


def _cell_id(cell) -> str:
    """``module.qualname`` of a module-level function, else ValueError."""
    if not callable(cell):
        raise ValueError(f"cell must be a callable (a module-level function), got {cell!r}")
    module = getattr(cell, "__module__", None)
    qualname = getattr(cell, "__qualname__", None)
    # The qualified name keys the cache and lets Dask import the function on a
    # worker; lambdas and nested functions have neither a unique nor an
    # importable name.
    if not module or not qualname or "<" in qualname:
        raise ValueError("cell must be a module-level function (not a lambda, a nested "
                         f"function or a partial), got {cell!r}")
    return f"{module}.{qualname}"


def _check_signature(cell, kwargs: dict) -> None:
    """Raise if ``cell`` cannot be called with ``kwargs`` and ``seed``."""
    import inspect

    try:
        sig = inspect.signature(cell)
    except (TypeError, ValueError):  # builtins without a signature: trust the caller
        return
    try:
        sig.bind(**kwargs, seed=0)
    except TypeError as err:
        raise ValueError(f"cell {_cell_id(cell)} cannot take the sweep's parameters "
                         f"{sorted(kwargs)} plus seed: {err}") from None


def _scheduler_mode(scheduler) -> str:
    """One of ``'local'``, ``'synchronous'``, ``'address'``, ``'client'``."""
    if scheduler is None or scheduler == "local":
        return "local"
    if scheduler == "synchronous":
        return "synchronous"
    if isinstance(scheduler, str):
        if scheduler.startswith(_ADDRESS_PREFIXES):
            return "address"
        raise ValueError(f"scheduler must be {_SCHEDULER_HELP}; got {scheduler!r}")
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - distributed is a dependency
        Client = ()
    if isinstance(scheduler, Client):
        return "client"
    raise ValueError(f"scheduler must be {_SCHEDULER_HELP}; got {scheduler!r}")


def _mapping_or_none(name: str, value, form: str) -> Mapping:
    """``value`` if it is a mapping, {} for None; else a ValueError naming ``form``."""
    if value is not None and not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a dict {form} or None, got {type(value).__name__}")
    return {} if value is None else value


def _check_output_layout(output_dims, output_coords, grid) -> tuple[dict, dict]:
    """Validated copies of ``output_dims`` and ``output_coords``."""
    dims = {}
    for var, names in _mapping_or_none("output_dims", output_dims, "{output: (dim, ...)}").items():
        names = (names,) if isinstance(names, str) else tuple(names)
        for d in names:
            if not isinstance(d, str) or not _VAR_RE.match(d):
                raise ValueError(f"output_dims[{var!r}] must be a tuple of dimension "
                                 f"names (identifiers), got {output_dims[var]!r}")
            if d in grid:
                raise ValueError(f"output_dims[{var!r}] reuses the grid parameter {d!r} "
                                 "as an output dimension")
        if len(set(names)) != len(names):
            raise ValueError(f"output_dims[{var!r}] repeats a dimension: {names}")
        dims[var] = names
    coords = {}
    known = {d for names in dims.values() for d in names}
    for dim, values in _mapping_or_none("output_coords", output_coords, "{dim: values}").items():
        if dim not in known:
            raise ValueError(f"output_coords[{dim!r}] names no dimension of output_dims "
                             f"(known: {sorted(known)})")
        coords[dim] = np.asarray(values)
        if coords[dim].ndim != 1:
            raise ValueError(f"output_coords[{dim!r}] must be 1-d, got shape "
                             f"{coords[dim].shape}")
    return dims, coords


def _cell_version_suffix(cell) -> str:
    """``+ID.CELL_VERSION`` of the module that defines ``cell``, or '' if it has none.

    Folded into the default ``code_version``, so that bumping a figure module's
    ``CELL_VERSION`` invalidates that figure's cached cells and no other's.
    """
    module = sys.modules.get(getattr(cell, "__module__", ""), None)
    version = getattr(module, "CELL_VERSION", None)
    if version is None:
        return ""
    return f"+{getattr(module, 'ID', module.__name__)}.{version}"


def _default_code_version() -> str:
    """``SIMULATION_CODE_VERSION`` of the package if defined, else its version."""
    import importlib

    # Imported lazily: the package's __init__ imports the simulation modules,
    # which may import this one.
    package = importlib.import_module(__package__)
    return str(getattr(package, "SIMULATION_CODE_VERSION", package.__version__))


# --------------------------------------------------------------------------
# running one cell and the cache
# --------------------------------------------------------------------------

def _run_cell(cell, kwargs: dict, seed: int):
    """Call ``cell(**kwargs, seed=seed)``; return ``(outputs, seconds)``.

    Runs on a Dask worker (or in-process); the outputs are converted to numpy
    arrays here so that every scheduler hands back the same objects.
    """
    start = time.perf_counter()
    out = cell(**kwargs, seed=seed)
    elapsed = time.perf_counter() - start
    if not isinstance(out, Mapping):
        raise ValueError(f"cell must return a dict {{output: scalar or array}}, "
                         f"got {type(out).__name__}")
    return {key: np.asarray(value) for key, value in out.items()}, elapsed


def _check_outputs(outputs: dict, reference: dict | None, reserved: set, where: str) -> dict:
    """Raise if a cell's outputs are unusable or differ in layout from ``reference``."""
    if not outputs:
        raise ValueError(f"cell returned no outputs at {where}")
    for key, arr in outputs.items():
        if not isinstance(key, str) or not _VAR_RE.match(key):
            raise ValueError(f"cell output names must be identifiers, got {key!r} at {where}")
        if key in reserved:
            raise ValueError(f"cell output {key!r} clashes with a grid parameter or "
                             f"{CELL_SEED_VAR!r} at {where}")
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"cell output {key!r} must be numeric or boolean, "
                             f"got dtype {arr.dtype} at {where}")
    if reference is not None:
        if set(outputs) != set(reference):
            raise ValueError(f"cell returned outputs {sorted(outputs)} at {where} but "
                             f"{sorted(reference)} elsewhere")
        for key, arr in outputs.items():
            if arr.shape != reference[key].shape:
                raise ValueError(f"cell output {key!r} has shape {arr.shape} at {where} but "
                                 f"{reference[key].shape} elsewhere")
    return outputs


def _stale_hits(hits: dict, names: set, sweep: str) -> list:
    """Remove from ``hits`` the cells whose output names are not ``names``; return them as
    ``(index, kwargs, seed, key)`` to recompute."""
    stale = [index for index, hit in hits.items() if set(hit[3]) != names]
    if stale:
        logger.warning("sweep %s: %d cached cell(s) have outputs %s instead of %s; the cell "
                       "function changed without a CELL_VERSION bump: recomputing them",
                       sweep, len(stale), sorted(hits[stale[0]][3]), sorted(names))
    return [(index, *hits.pop(index)[:3]) for index in stale]


def _read_cache(path: Path, key: str):
    """``(outputs, seconds)`` from a cache file, or ``None`` if absent or untrustworthy."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            meta = json.loads(str(npz["__meta__"][()]))
            if meta.get("format") != CACHE_FORMAT or meta.get("key") != key:
                raise ValueError("the file belongs to another cell or cache format")
            # Reading each member to its end makes zipfile check its CRC, so a
            # damaged file fails here instead of feeding bad numbers downstream.
            outputs = {out: npz[f"out.{out}"] for out in meta["outputs"]}
            elapsed = float(meta["elapsed"])
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as err:
        logger.warning("ignoring unreadable sweep cache file %s (%s); recomputing the cell",
                       path, err)
        return None
    return outputs, elapsed


def _write_cache(path: Path, key: str, outputs: dict, elapsed: float) -> None:
    """Write one cell's outputs atomically to ``path``."""
    meta = {"format": CACHE_FORMAT, "key": key, "outputs": list(outputs), "elapsed": elapsed}
    with atomic_path(path) as tmp:
        # A file object, not a name: np.savez would append ".npz" to the name.
        with open(tmp, "wb") as fh:
            np.savez(fh, __meta__=np.array(json.dumps(meta)),
                     **{f"out.{name}": arr for name, arr in outputs.items()})


def _remove_stale_tmp(folder: Path) -> None:
    """Delete temporary files left by writers killed long ago."""
    now = time.time()
    for tmp in folder.glob(".*.npz.*.tmp"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > _STALE_TMP_S:
                tmp.unlink()


# --------------------------------------------------------------------------
# schedulers
# --------------------------------------------------------------------------

@contextlib.contextmanager
def _client(mode: str, scheduler, n_workers):
    """A ``distributed.Client`` for ``mode``, closed (with its cluster) on exit."""
    from distributed import Client, LocalCluster

    if mode == "client":
        yield scheduler  # the caller owns it
        return
    if mode == "address":
        client = _connect(scheduler)
        try:
            yield client
        finally:
            _close_quietly(client)
        return
    cluster = LocalCluster(n_workers=n_workers or os.cpu_count() or 1, threads_per_worker=1,
                           processes=True, dashboard_address=":0",  # any free port: never clash
                           silence_logs=logging.ERROR)
    try:
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def _connect(address):
    """A client of the scheduler at ``address``, or a ConnectionError saying that none
    answered within :data:`SCHEDULER_CONNECT_TIMEOUT_S` seconds."""
    from distributed import Client

    try:
        return Client(address, timeout=SCHEDULER_CONNECT_TIMEOUT_S)
    except OSError as err:  # distributed's timeouts and refusals are OSErrors
        raise ConnectionError(f"no Dask scheduler answered at {address} within "
                              f"{SCHEDULER_CONNECT_TIMEOUT_S} s ({err})") from None


def _close_quietly(client):
    """Close ``client``; a client that lost its scheduler logs the cancelled reconnection
    as a traceback while it closes, which only repeats the error the caller gets."""
    quiet = logging.getLogger("distributed.client")
    level = quiet.level
    if client.status != "running":
        quiet.setLevel(logging.CRITICAL)
    try:
        client.close()
    finally:
        quiet.setLevel(level)


def _lost_scheduler(err, scheduler, cache_root, n_done):
    """The error a sweep raises when its Dask futures are cancelled under it (the scheduler
    died or the connection dropped): one line, with where the finished cells are."""
    where = f"at {scheduler}" if isinstance(scheduler, str) else "of this sweep"
    kept = ("; rerun with the same cache folder to resume" if cache_root is not None
            else " (no cache folder: they are lost)")
    reason = getattr(err, "reason", None) or type(err).__name__
    return ConnectionError(f"lost the Dask scheduler {where} mid-run ({reason}) after "
                           f"{n_done} finished cell(s){kept}")


@contextlib.contextmanager
def _naming_cell(params: dict):
    """Attach the failing cell's parameters to the message of an exception raised inside."""
    try:
        yield
    except Exception as err:
        if hasattr(err, "add_note"):
            err.add_note(f"in sweep cell with parameters {params!r}")
        raise


# --------------------------------------------------------------------------
# attributes
# --------------------------------------------------------------------------

def _jsonable(value):
    """``value`` with numpy objects turned into plain Python, for json.dumps."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _attr(value):
    """A netCDF-safe attribute for a parameter value (number, string or 1-d array)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, Integral):
        return int(value) if -2**63 <= value < 2**63 else str(value)
    if isinstance(value, (Real, str)):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        arr = np.asarray(value)
        if arr.ndim == 1 and arr.size and arr.dtype.kind in "iuf":
            return arr
    return json.dumps(_jsonable(value))


# --------------------------------------------------------------------------
# the sweep
# --------------------------------------------------------------------------

def run_sweep(cell, grid, *, fixed=None, seed=0, name="sweep", cache_dir=None,
              scheduler=None, n_workers=None, progress=True, code_version=None,
              output_dims=None, output_coords=None):
    """Run ``cell`` on every point of the Cartesian product of ``grid``.

    Parameters
    ----------
    cell : callable
        Module-level function ``cell(**params, seed) -> dict`` returning, for
        each output name, a scalar or a numpy array whose shape is the same in
        every cell.  Outputs must be numeric or boolean.
    grid : dict
        ``{parameter: 1-d sequence of values}``, in the order the dataset's
        dimensions should take.  Values are numbers, booleans or strings, one
        kind per parameter, without repeats.  An empty dict runs one cell.
    fixed : dict, optional
        Keyword arguments passed unchanged to every cell (numbers, strings,
        booleans, ``None``, or lists, tuples, dicts or numpy arrays of those).
    seed : int, default 0
        Root seed; each cell gets :func:`cell_seed` ``(seed, its arguments)``.
    name : str, default "sweep"
        Sweep name: labels the progress bar, the cache folder and the dataset
        (letters, digits, ``_ . -``).
    cache_dir : path-like, optional
        Folder of finished cells; with it, a rerun (or a resumed, killed run)
        loads finished cells instead of recomputing them.
    scheduler : None, str or distributed.Client, optional
        ``None`` or ``"local"``: start a :class:`distributed.LocalCluster`
        (processes, one thread each, no dashboard) and close it afterwards;
        ``"tcp://host:port"``: connect to a running scheduler;
        ``"synchronous"``: run cells one after another in this process, without
        Dask; a ``distributed.Client``: use it and leave it open.  Every mode
        gives bit-identical results for a cell that is deterministic given
        its seed.  No cluster is started when every cell is cached.
    n_workers : int, optional
        Workers of the local cluster (default ``os.cpu_count()``); ignored by
        the other modes.
    progress : bool, default True
        Show a tqdm progress bar over cells.
    code_version : str, optional
        Part of every cache key; defaults to
        ``stochastic_transformers.SIMULATION_CODE_VERSION`` if it exists, else
        the package version.
    output_dims : dict, optional
        ``{output: (dim, ...)}`` naming the trailing dimensions of array
        outputs; unnamed ones become ``OUTPUT_dim0``, ``OUTPUT_dim1``, ...
    output_coords : dict, optional
        ``{dim: 1-d values}`` coordinates for dimensions named in
        ``output_dims``.

    Returns
    -------
    xarray.Dataset
        One variable per output with dimensions (grid parameters in grid
        order, then the output's own), coordinates for the grid and
        ``output_coords``, the int64 variable ``cell_seed``, and attributes:
        ``sweep_name``, ``sweep_seed``, ``cell_function``, ``code_version``,
        ``grid_params``, ``grid_<p>`` and ``fixed_<p>`` for each parameter,
        ``parameters`` (all of them, as JSON), ``seed_derivation``,
        ``scheduler``, ``n_cells``, ``n_cells_computed``, ``n_cells_cached``,
        ``wall_time_s``, ``cell_time_s`` (summed compute time of every cell,
        cached ones as originally measured), ``cell_time_computed_s`` (cells
        computed in this call), and :func:`stochastic_transformers.io.provenance`
        (``package_version``, ``git_commit``, ``created``, the machine
        ``machine_cpu`` and ``machine_cores``, and the load averages
        ``load_average_start`` and ``load_average_end`` of the sweep).

    Raises
    ------
    ValueError
        Before any compute, for an invalid argument (the message names it);
        during the sweep, for cell outputs that are not numeric or whose
        names or shapes change between cells.  An exception raised by a cell
        propagates with the cell's parameters attached as a note; cells
        finished before it stay cached.

    Notes
    -----
    With a local cluster, a script calling this must guard its entry point
    with ``if __name__ == "__main__":`` because Dask starts workers with the
    ``spawn`` method.
    """
    import xarray as xr

    start_wall = time.perf_counter()
    load_start = load_average()
    plan = _plan(cell, grid, fixed=fixed, seed=seed, name=name, cache_dir=cache_dir,
                 scheduler=scheduler, n_workers=n_workers, progress=progress,
                 code_version=code_version, output_dims=output_dims,
                 output_coords=output_coords)
    cache_root = _open_cache(cache_dir, name)
    run = _schedule(plan, cell, cache_root, scheduler=scheduler, progress=progress)
    data_vars, coords = _assemble(plan, run)
    attrs = _sweep_attrs(plan, run, scheduler, load_start)
    ds = xr.Dataset(data_vars, coords=coords)
    attrs["wall_time_s"] = time.perf_counter() - start_wall
    ds.attrs = attrs
    return ds


# --------------------------------------------------------------------------
# the stages of run_sweep: validate, read the cache, schedule, assemble
# --------------------------------------------------------------------------

def _plan(cell, grid, *, fixed, seed, name, cache_dir, scheduler, n_workers, progress,
          code_version, output_dims, output_coords) -> dict:
    """Validate every argument of :func:`run_sweep` and list its cells; raises before
    a single cell runs.  The cells are ``(index, kwargs, cell seed, cache key)`` in grid
    order."""
    cell_id = _cell_id(cell)
    grid = _check_grid(grid)
    fixed = _check_fixed(fixed, grid)
    seed = check_int("seed", seed, 0)
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError("name must be a non-empty string of letters, digits, '_', '.' or '-' "
                         f"(starting with a letter or digit), got {name!r}")
    mode = _scheduler_mode(scheduler)
    if n_workers is not None:
        n_workers = check_int("n_workers", n_workers, 1)
    if not isinstance(progress, bool):
        raise ValueError(f"progress must be True or False, got {progress!r}")
    if code_version is None:
        code_version = _default_code_version() + _cell_version_suffix(cell)
    elif not isinstance(code_version, (str, Integral)) or isinstance(code_version, bool):
        raise ValueError(f"code_version must be a string (or None for the package's), "
                         f"got {code_version!r}")
    code_version = str(code_version)
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise ValueError(f"cache_dir must be a path or None, got {cache_dir!r}")
    out_dims, out_coords = _check_output_layout(output_dims, output_coords, grid)
    names = list(grid)
    grid_shape = tuple(len(grid[p]) for p in names)
    cells = []  # (index, kwargs, cell seed, cache key), in grid order
    for index in itertools.product(*(range(n) for n in grid_shape)):
        kwargs = {**fixed, **{p: grid[p][i] for p, i in zip(names, index)}}
        cells.append((index, kwargs, cell_seed(seed, kwargs),
                      cache_key(name, cell_id, code_version, kwargs, seed)))
    _check_signature(cell, cells[0][1])
    return {"cell_id": cell_id, "grid": grid, "fixed": fixed, "seed": seed, "name": name,
            "mode": mode, "n_workers": n_workers, "code_version": code_version,
            "out_dims": out_dims, "out_coords": out_coords, "names": names,
            "grid_shape": grid_shape, "cells": cells}


def _open_cache(cache_dir, name) -> Path | None:
    """The sweep's cache folder (created, orphaned temporary files removed), or None."""
    if cache_dir is None:
        return None
    writable_folder(cache_dir, "cache_dir")  # names the caller's folder if it is the culprit
    cache_root = writable_folder(Path(cache_dir) / name, "cache_dir")
    _remove_stale_tmp(cache_root)
    return cache_root


def _read_hits(cells, cache_root, name) -> tuple[dict, list]:
    """``(hits, pending)``: the cells found in the cache, ``{index: (kwargs, cseed, key,
    outputs, elapsed, mtime)}``, and those to compute, ``[(index, kwargs, cseed, key)]``.

    A cached cell whose output names differ from the newest cached cell's was written by
    other code (a cell edited without a CELL_VERSION bump): it is moved to ``pending``.
    """
    hits, pending = {}, []
    for index, kwargs, cseed, key in cells:
        path = None if cache_root is None else cache_root / f"{key}.npz"
        hit = None if path is None else _read_cache(path, key)
        if hit is None:
            pending.append((index, kwargs, cseed, key))
        else:
            hits[index] = (kwargs, cseed, key, *hit, path.stat().st_mtime)
    if hits:
        newest = max(hits.values(), key=lambda h: h[5])
        pending.extend(_stale_hits(hits, set(newest[3]), name))
    return hits, pending


class _Run:
    """What the scheduling stage gathers: each cell's outputs and seconds, the reference
    layout of the outputs, and the counts of computed and cached cells."""

    def __init__(self, plan, cell, cache_root, bar):
        self.plan, self.cell, self.cache_root, self.bar = plan, cell, cache_root, bar
        self.reserved = set(plan["names"]) | {CELL_SEED_VAR}
        self.results: dict[tuple, dict] = {}
        self.times: dict[tuple, float] = {}
        self.computed_time = 0.0
        self.reference = None
        self.pending: list = []
        self.n_cached = 0

    def accept(self, index, kwargs, key, outputs, elapsed, fresh):
        """Check one cell's outputs against the others, cache it if fresh, record it."""
        outputs = _check_outputs(outputs, self.reference, self.reserved, repr(kwargs))
        if self.reference is None:
            self.reference = outputs
        if fresh:
            self.computed_time += elapsed
            if self.cache_root is not None:
                _write_cache(self.cache_root / f"{key}.npz", key, outputs, elapsed)
        self.results[index] = outputs
        self.times[index] = elapsed
        self.bar.update(1)

    def compute(self, todo, scheduler):
        """Run the cells of ``todo`` (synchronously or on Dask) and accept their outputs."""
        mode, cell, name = self.plan["mode"], self.cell, self.plan["name"]
        if todo and mode == "synchronous":
            for index, kwargs, cseed, key in todo:
                with _naming_cell(kwargs):
                    outputs, elapsed = _run_cell(cell, kwargs, cseed)
                self.accept(index, kwargs, key, outputs, elapsed, fresh=True)
        elif todo:
            from distributed import as_completed

            with _client(mode, scheduler, self.plan["n_workers"]) as client:
                futures = {}
                for index, kwargs, cseed, key in todo:
                    # The task key derives from the cache key: readable in the
                    # dashboard and the same cell is never run twice at once.
                    future = client.submit(_run_cell, cell, kwargs, cseed,
                                           key=f"{name}-cell-{key[:32]}-{len(self.results)}")
                    futures[future] = (index, kwargs, key)
                try:
                    for future in as_completed(list(futures)):
                        index, kwargs, key = futures.pop(future)
                        try:
                            with _naming_cell(kwargs):
                                outputs, elapsed = future.result()
                        except CancelledError as err:
                            # Nothing here cancels a pending future: the cluster did.
                            raise _lost_scheduler(err, scheduler, self.cache_root,
                                                  len(self.results)) from None
                        self.accept(index, kwargs, key, outputs, elapsed, fresh=True)
                        future.release()
                finally:
                    if futures and client.status == "running":
                        client.cancel(list(futures))


def _schedule(plan, cell, cache_root, *, scheduler, progress) -> _Run:
    """Read the cache, run the missing cells, and gather every cell's outputs."""
    from tqdm import tqdm

    name = plan["name"]
    bar = tqdm(total=len(plan["cells"]), desc=name, unit="cell", disable=not progress,
               dynamic_ncols=True)
    run = _Run(plan, cell, cache_root, bar)
    try:
        hits, run.pending = _read_hits(plan["cells"], cache_root, name)
        run.n_cached = len(hits)
        bar.set_postfix(cached=run.n_cached, refresh=False)
        run.compute(run.pending, scheduler)
        if run.reference is not None and hits:
            # Fresh cells define the outputs: cached ones that disagree are stale too.
            again = _stale_hits(hits, set(run.reference), name)
            if again:   # they replace their hits: the bar's total stays the number of cells
                run.pending.extend(again)
                run.n_cached = len(hits)
                run.compute(again, scheduler)
        for index, (kwargs, cseed, key, outputs, elapsed, _) in hits.items():
            run.accept(index, kwargs, key, outputs, elapsed, fresh=False)
        bar.set_postfix(cached=run.n_cached, refresh=False)
    finally:
        bar.close()
    return run


def _assemble(plan, run) -> tuple[dict, dict]:
    """``(data_vars, coords)`` of the sweep dataset from every cell's outputs."""
    names, grid_shape, cells = plan["names"], plan["grid_shape"], plan["cells"]
    out_dims, out_coords = plan["out_dims"], plan["out_coords"]
    reference, results = run.reference, run.results
    coords = {p: (p, np.asarray(plan["grid"][p])) for p in names}
    data_vars = {}
    dim_sizes: dict[str, int] = {}
    for var, first in reference.items():
        tail = first.shape
        dims = out_dims.get(var, tuple(f"{var}_dim{i}" for i in range(len(tail))))
        if len(dims) != len(tail):
            raise ValueError(f"output_dims[{var!r}] names {len(dims)} dimensions but the "
                             f"output has shape {tail}")
        for d, size in zip(dims, tail):
            if dim_sizes.setdefault(d, size) != size:
                raise ValueError(f"dimension {d!r} has size {size} in output {var!r} but "
                                 f"{dim_sizes[d]} in another output")
        dtype = np.result_type(*(results[index][var] for index, *_ in cells))
        data = np.empty(grid_shape + tail, dtype=dtype)
        for index, *_ in cells:
            data[index] = results[index][var]
        data_vars[var] = (tuple(names) + dims, data)
    unused = set(out_dims) - set(reference)
    if unused:
        raise ValueError(f"output_dims names outputs the cell does not return: {sorted(unused)}")
    for dim, values in out_coords.items():
        if dim not in dim_sizes:
            raise ValueError(f"output_coords[{dim!r}] names a dimension of an output the "
                             "cell does not return")
        if len(values) != dim_sizes[dim]:
            raise ValueError(f"output_coords[{dim!r}] has {len(values)} values but the "
                             f"dimension has size {dim_sizes[dim]}")
        coords[dim] = (dim, values)
    seeds = np.empty(grid_shape, dtype=np.int64)
    for index, _, cseed, _ in cells:
        seeds[index] = cseed
    data_vars[CELL_SEED_VAR] = (tuple(names), seeds,
                                {"description": "seed passed to each cell (see seed_derivation)"})
    return data_vars, coords


def _sweep_attrs(plan, run, scheduler, load_start=None) -> dict:
    """The sweep dataset's attributes (all but ``wall_time_s``); ``load_start`` is the load
    average when the sweep began (:func:`stochastic_transformers.io.provenance`)."""
    grid, fixed, names, mode = plan["grid"], plan["fixed"], plan["names"], plan["mode"]
    return {
        "sweep_name": plan["name"],
        "sweep_seed": plan["seed"],
        "cell_function": plan["cell_id"],
        "code_version": plan["code_version"],
        "grid_params": json.dumps(names),
        **{f"grid_{p}": _attr(grid[p]) for p in names},
        **{f"fixed_{p}": _attr(v) for p, v in fixed.items()},
        "parameters": json.dumps({"grid": grid, "fixed": _jsonable(fixed)}, default=repr),
        "seed_derivation": ("cell_seed = SeedSequence(sweep_seed, spawn_key=sha256(canonical "
                            "JSON of the cell's parameters) as 8 uint32 words)"
                            ".generate_state(1, uint64)[0] >> 1"),
        "scheduler": mode if mode != "address" else scheduler,
        "n_cells": len(plan["cells"]),
        "n_cells_computed": len(run.pending),
        "n_cells_cached": run.n_cached,
        "cell_time_s": float(sum(run.times.values())),
        "cell_time_computed_s": float(run.computed_time),
        **provenance(load_start),
    }


#: Attributes of sweep datasets that add up over sweeps run one after another.
ADDITIVE_ATTRS = ("wall_time_s", "cell_time_s", "cell_time_computed_s", "n_cells",
                  "n_cells_computed", "n_cells_cached")


def summed_attrs(parts) -> dict:
    """The :data:`ADDITIVE_ATTRS` of the sweep datasets ``parts``, each summed over the parts
    (a count as an int); one that a part lacks is left out.  A figure that combines several
    sweeps into one dataset records these, so that its counts and times cover every part."""
    out = {}
    for key in ADDITIVE_ATTRS:
        if parts and all(key in p.attrs for p in parts):
            total = sum(p.attrs[key] for p in parts)
            out[key] = int(total) if key.startswith("n_cells") else float(total)
    return out


def save_sweep(ds, path) -> Path:
    """Write a sweep dataset to netCDF atomically, with provenance attributes.

    Parameters
    ----------
    ds : xarray.Dataset
        The dataset to write.
    path : path-like
        Destination ``.nc`` file.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    return write_netcdf(ds, path)


def load_sweep(path):
    """Read a dataset written by :func:`save_sweep` fully into memory (file closed).

    Parameters
    ----------
    path : path-like
        A ``.nc`` file.

    Returns
    -------
    xarray.Dataset
    """
    import xarray as xr

    with xr.open_dataset(path) as ds:
        return ds.load()
