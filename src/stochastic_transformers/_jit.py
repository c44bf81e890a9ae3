"""The numba options of every kernel, defined once, and the notice of a first compilation.

``JIT`` for the per-layer kernels (on-disk cache, no GIL so that independent blocks can
run on threads, numpy's error model: a division by zero gives inf, not an exception);
``JIT_PARALLEL`` for the loops over trajectories (``prange``).
"""

from __future__ import annotations

import contextlib
import sys
import threading

JIT = dict(cache=True, nogil=True, error_model="numpy")
JIT_PARALLEL = dict(JIT, parallel=True)

#: Seconds a kernel's first call in a process may take before :func:`first_use_notice`
#: speaks: loading it from numba's on-disk cache takes well under a second, compiling it
#: (an empty cache) takes minutes.
NOTICE_AFTER_S = 2.0
#: What has been announced in this process (each once).
_ANNOUNCED: set[str] = set()


@contextlib.contextmanager
def first_use_notice(dispatcher, what: str, after_s: float | None = None):
    """Around a call of the compiled ``dispatcher``: if it has not run in this process and
    the call lasts more than ``after_s`` seconds (:data:`NOTICE_AFTER_S`), say on stderr,
    once, that ``what`` is compiling, so that minutes of silence are not taken for a hang.
    """
    if dispatcher.signatures or what in _ANNOUNCED:
        yield
        return

    def announce():
        _ANNOUNCED.add(what)
        print(f"compiling {what} (first use only; numba caches them on disk) ...",
              file=sys.stderr, flush=True)

    # A timer, not a look into numba's cache: a load from the cache ends before it fires.
    timer = threading.Timer(NOTICE_AFTER_S if after_s is None else after_s, announce)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
