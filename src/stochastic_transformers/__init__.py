"""Reference companion to *Clustering in Deep Stochastic Transformers*.

Fedorov, Sander, Elie, Marion and Lauriere (ICML 2026, arXiv:2601.21942) study
tokens on the unit sphere pushed through a deep stack of attention layers whose
value matrices are random, fresh at every layer and shared by all tokens.  This
package simulates that model exactly, integrates its depth limit, and evaluates
the exact two-token theory.

The one entry point for simulations is :func:`simulate`; the theory lives in
:mod:`stochastic_transformers.theory`.
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("stochastic-transformers")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

from . import theory  # noqa: E402
from .simulate import simulate  # noqa: E402

__all__ = ["simulate", "theory", "__version__"]
