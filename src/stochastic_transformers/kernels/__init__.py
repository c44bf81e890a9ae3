"""The compiled simulators, one module per model, each exposing one :class:`.common.Runner`.

=========================  ==============================================================
module                     methods
=========================  ==============================================================
:mod:`.pair`               ``overlap_chain``: two tokens, seven random numbers a layer
                           (under every normalisation and the causal mask)
:mod:`.tokens`             ``literal`` and ``gaussian_dn``: the N-token map (and hybrid)
:mod:`.two_point`          ``cluster_chain``, ``reduced`` and ``snap``: two-point states
:mod:`.random_attention`   the follow-up's ``literal`` and ``subspace``
:mod:`.feedforward`        the feedforward block: ``literal``, and the two-point chain
                           (``overlap_chain``, ``cluster_chain``)
:mod:`.common`             the shared token helpers and the runner protocol
=========================  ==============================================================

:func:`run` looks a plan's runner up in :data:`RUNNERS` and drives it through the one
slice-and-progress loop.  Nothing here imports the modules that build the plan.
"""

from __future__ import annotations

import numpy as np

from . import feedforward, pair, random_attention, tokens, two_point
from .common import Runner

#: Runner of each method of the paper's models; the follow-up's model has its own.
RUNNERS: dict[str, Runner] = {
    "overlap_chain": pair.RUNNER,
    "literal": tokens.RUNNER,
    "gaussian_dn": tokens.RUNNER,
    "cluster_chain": two_point.CLUSTER_RUNNER,
    "reduced": two_point.REDUCED_RUNNER,
    "snap": two_point.REDUCED_RUNNER,
}
RANDOM_ATTENTION_RUNNER = random_attention.RUNNER
#: Runner of each method of the stochastic model with the feedforward block.
FEEDFORWARD_RUNNERS: dict[str, Runner] = {
    "literal": feedforward.TOKENS_RUNNER,
    "overlap_chain": feedforward.CHAIN_RUNNER,
    "cluster_chain": feedforward.CHAIN_RUNNER,
}

#: Slices of a run with a progress bar (without one the run is a single slice).
PROGRESS_SLICES = 50


def runner_for(plan) -> Runner:
    """The runner of a plan's model and method."""
    if plan.kind == "random_attention":
        return RANDOM_ATTENTION_RUNNER
    if plan.model.has_feedforward:
        return FEEDFORWARD_RUNNERS[plan.method]
    if plan.method == "overlap_chain" and not plan.model.is_post_unmasked:
        return pair.OTHER_LAYER_RUNNER
    return RUNNERS[plan.method]


def run(plan, bar=None):
    """Run every trajectory of ``plan``; return ``(data, stopped)`` (see :class:`Runner`).

    Trajectories run in slices only so that the progress bar ``bar`` (a tqdm bar, or None)
    can move; the bits do not depend on the slicing because every trajectory owns its
    stream.
    """
    runner = runner_for(plan)
    n_slices = 1 if bar is None else min(plan.n_traj, PROGRESS_SLICES)
    bounds = np.linspace(0, plan.n_traj, n_slices + 1).astype(int)
    arrays = runner.allocate(plan)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        runner.run(plan, arrays, lo, hi)
        if bar is not None:
            bar.update(hi - lo)
    return runner.assemble(plan, arrays)


__all__ = ["RUNNERS", "FEEDFORWARD_RUNNERS", "Runner", "run", "runner_for"]
