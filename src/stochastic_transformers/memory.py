"""The memory guard of :func:`stochastic_transformers.simulate`: refuse, before any compute,
a call whose result arrays cannot fit in memory, and say how to cut it into pieces."""

from __future__ import annotations

import os

#: Methods whose state is a pair of half angles (two tokens).
_PAIR_METHODS = ("overlap_chain",)
#: Methods whose records carry 1 + the smallest overlap beside the Gram matrices.
_TWO_POINT_METHODS = ("cluster_chain", "reduced", "snap")


def memory_estimate(method: str, n_traj: int, n_tokens: int, d: int, n_times: int,
                    x0_given: bool = False) -> int:
    """Bytes that :func:`simulate` holds at its peak for these sizes (an upper estimate).

    Overlap chain: the half-angle states and their records, the 2 x 2 Gram matrices and
    the gaps (about ``88 + 96 n_times`` bytes a trajectory).  N tokens: the tokens, the
    recorded Gram matrices, their reordered copy and the final Gram matrix.  A quarter is
    added for xarray's bookkeeping and temporaries.
    """
    if method in _PAIR_METHODS:
        per_traj = 88 + 96 * n_times
    elif method in _TWO_POINT_METHODS:
        per_traj = 8 * (2 * n_tokens * d + 16 + 2 * n_tokens**2 + 2 * n_times * (n_tokens**2 + 1))
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


def check_memory(method, n_traj, n_tokens, d, n_times, x0_given):
    """Raise a ValueError, before any compute, if the call's arrays cannot fit in memory."""
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
