"""The memory guard of :func:`stochastic_transformers.simulate`: refuse, before any compute,
a call whose arrays cannot fit in memory, and say how to cut it into pieces.

Two parts are counted: what grows with the number of trajectories (:func:`memory_estimate`,
the results and the per-trajectory inputs) and what does not (:func:`fixed_memory`, the
d x d matrices of the plan and the scratch arrays every thread of the compiled loop
allocates for the trajectory it runs, a d x d value matrix among them).  A dimension
such as d = 10**9 is refused here, whatever n_traj, instead of failing inside numpy."""

from __future__ import annotations

import os

#: Methods whose state is a pair of half angles (two tokens).
_PAIR_METHODS = ("overlap_chain",)
#: Methods whose records carry 1 + the smallest overlap beside the Gram matrices.
_TWO_POINT_METHODS = ("cluster_chain", "reduced", "snap")


def memory_estimate(method: str, n_traj: int, n_tokens: int, d: int, n_times: int,
                    x0_given: bool = False, *, fixed: int = 0) -> int:
    """Bytes that :func:`simulate` holds at its peak for these sizes (an upper estimate).

    Overlap chain: the half-angle states (and, under the other layers, the norms) and their
    records, their reordered copy, the 2 x 2 Gram matrices and the gaps (about
    ``88 + 192 n_times`` bytes a trajectory).  N tokens: the tokens, the
    recorded Gram matrices, their reordered copy and the final Gram matrix.  A quarter is
    added for xarray's bookkeeping and temporaries.  ``fixed`` (:func:`fixed_memory`) is
    added as it is.
    """
    if method in _PAIR_METHODS:
        per_traj = 88 + 192 * n_times
    elif method in _TWO_POINT_METHODS:
        per_traj = 8 * (2 * n_tokens * d + 16 + 2 * n_tokens**2 + 2 * n_times * (n_tokens**2 + 1))
    else:
        per_traj = 8 * (2 * n_tokens * d + n_tokens**2 + 2 * n_times * n_tokens**2)
        if x0_given:
            per_traj += 8 * n_tokens * d
    return int(1.25 * per_traj * n_traj) + fixed


def _scratch_per_thread(method, kind, n_tokens, d, n_heads, ff_width) -> int:
    """Bytes of the scratch arrays one thread allocates for the trajectory it runs."""
    k = min(d, n_tokens)
    if kind == "random_attention":
        hk = n_heads * k
        # w, w', v (d x d); nine (N, d) or (d, N) arrays; the (k, k), (Hk, N), (d, kv) blocks.
        return 8 * (3 * d * d + 9 * n_tokens * d + 3 * k * k + hk * (n_tokens + 1)
                    + d * min(hk, n_tokens) + d + 2 * n_tokens * n_tokens)
    if ff_width:
        if method != "literal":
            return 8 * 4 * ff_width
        # v (d x d), w1 and w2 (width x d), four (N, d) arrays.
        return 8 * (d * d + 2 * ff_width * d + 4 * n_tokens * d + ff_width + 2 * n_tokens)
    if method in ("literal", "gaussian_dn", "reduced", "snap"):
        # :func:`~.kernels.tokens.layer_scratch`: v (d x d), g (d x k), five (N, d) arrays.
        return 8 * (d * d + d * k + 5 * n_tokens * d + k * n_tokens + 2 * n_tokens + d)
    return 0


def fixed_memory(method: str, kind: str, n_tokens: int, d: int, *, n_threads: int = 1,
                 n_heads: int = 1, ff_width: int = 0) -> int:
    """Bytes a run holds whatever its number of trajectories: the d x d key-query matrix B of
    the plan (the random-attention model's two mean matrices instead), and the scratch
    arrays of ``n_threads`` threads (``ff_width`` > 0: the feedforward block's kernels)."""
    matrices = 2 if kind == "random_attention" else 1
    scratch = _scratch_per_thread(method, kind, n_tokens, d, n_heads, ff_width)
    return 8 * matrices * d * d + n_threads * scratch


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


def check_memory(method, n_traj, n_tokens, d, n_times, x0_given, *, fixed=0):
    """Raise a ValueError, before any compute, if the call's arrays cannot fit in memory
    (``fixed``: the bytes of :func:`fixed_memory`, held whatever ``n_traj``)."""
    need = memory_estimate(method, n_traj, n_tokens, d, n_times, x0_given, fixed=fixed)
    have = available_memory()
    if need <= have:
        return
    if 2 * fixed > have:
        raise ValueError(
            f"d={d:,} needs about {fixed / 2**30:,.1f} GiB for its d x d matrices and the "
            f"scratch arrays of the compiled loop alone (method={method!r}), whatever n_traj, "
            f"more than half the {have / 2**30:,.1f} GiB available; lower d (or n_threads)")
    per_traj = max(1, (need - fixed) // n_traj)
    fits = max(1, int((0.5 * have - fixed) // per_traj))
    raise ValueError(
        f"n_traj={n_traj:,} needs about {need / 2**30:,.1f} GiB for its results "
        f"({per_traj:,} bytes a trajectory with method={method!r}), more than the "
        f"{have / 2**30:,.1f} GiB available; run it in pieces of at most {fits:,} "
        f"trajectories with first_trajectory=0, {fits}, {2 * fits}, ... (the pieces give the "
        f"same bits as one call), or as a sweep of cells (stochastic_transformers.sweep.run_sweep)")
