"""Reference companion to *Clustering in Deep Stochastic Transformers*.

Fedorov, Sander, Elie, Marion and Lauriere (ICML 2026, arXiv:2601.21942) study
tokens on the unit sphere pushed through a deep stack of attention layers whose
value matrices are random, fresh at every layer and shared by all tokens.  This
package simulates that model exactly, integrates its depth limit, and evaluates
the exact two-token theory.

The one entry point for simulations is :func:`simulate`, which takes the layer map and
the run as two frozen configurations (:class:`ModelConfig`, :class:`RunConfig`); the
theory lives in :mod:`stochastic_transformers.theory`.
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("stochastic-transformers")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"



def _configure_numba_cache() -> None:
    """Point numba's on-disk cache at a folder keyed by the hash of the kernels' sources.

    numba invalidates a cached function only when *its own* file changes, not when a
    function it calls (in another file) does; keying the folder by every kernel file
    makes a stale cache impossible.
    """
    import hashlib
    import os
    from pathlib import Path

    import numba

    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted([here / "_jit.py", here / "rng.py", here / "attention.py",
                        *(here / "kernels").glob("*.py")]):
        digest.update(path.read_bytes())
    base = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "stochastic_transformers")
    numba.config.CACHE_DIR = os.path.join(base, "numba-" + digest.hexdigest()[:16])


_configure_numba_cache()

from .config import ModelConfig, RunConfig, configs_from_flat  # noqa: E402
from .simulation import SIMULATION_CODE_VERSION, simulate  # noqa: E402

__all__ = ["simulate", "ModelConfig", "RunConfig", "configs_from_flat", "theory",
           "SIMULATION_CODE_VERSION", "__version__"]


def __getattr__(name):
    # Submodules load on first use, so `import stochastic_transformers` stays light.
    import importlib

    if name in {"theory", "sde", "kolmogorov", "homogenized", "two_clusters", "classification",
                "sweep", "stats", "figures", "vit"}:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
