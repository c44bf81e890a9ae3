"""The numba options of every kernel, defined once.

``JIT`` for the per-layer kernels (on-disk cache, no GIL so that independent blocks can
run on threads, numpy's error model: a division by zero gives inf, not an exception);
``JIT_PARALLEL`` for the loops over trajectories (``prange``).
"""

JIT = dict(cache=True, nogil=True, error_model="numpy")
JIT_PARALLEL = dict(JIT, parallel=True)
