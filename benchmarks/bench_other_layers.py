"""Benchmark of the two-token chain of the other layers against the N-token map, in one run.

Two tokens under pre-LN, peri-LN, the nGPT-style layer and post-LN with the causal mask
(Gaussian values, B = identity): the overlap chain
(:func:`stochastic_transformers.attention.pair_layer_other`: seven random numbers a layer,
whatever d) against the ``literal`` map (a full d x d value matrix a layer) and its exact
``gaussian_dn`` reduction (2d numbers a layer), on one thread and the same workload.  The
table gives trajectory-layers per second and the ratio to ``literal`` measured in this run,
so the ratios stay meaningful on a busy machine.

    python benchmarks/bench_other_layers.py           # d = 4, 16, 64 (about 2 minutes)
    python benchmarks/bench_other_layers.py --quick
    python benchmarks/bench_other_layers.py --json results/benchmarks/bench_other_layers.json

``--json PATH`` also writes every row, the settings, the date, the git commit, the machine
and the load average of the run to PATH, atomically
(:class:`stochastic_transformers.costs.BenchmarkRun`).
"""

from __future__ import annotations

import argparse
import math
import time

from stochastic_transformers import ModelConfig, RunConfig, simulate
from stochastic_transformers.costs import BenchmarkRun

#: (label, norm, causal) of the layers timed.
LAYERS = (("pre-LN", "pre", False), ("peri-LN", "peri", False), ("nGPT-style", "ngpt", False),
          ("post-LN, causal", "post", True))
METHODS = ("literal", "gaussian_dn", "overlap_chain")


def _rate(model, method, n_traj, n_layers, repeat=2):
    """Best-of-``repeat`` trajectory-layers per second of one run on one thread."""
    run = RunConfig(n_tokens=2, n_traj=n_traj, L=n_layers, T=1.0, method=method, n_threads=1)
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        simulate(model, run)
        best = min(best, time.perf_counter() - start)
    return n_traj * n_layers / best


def main(quick=False, json_path=None, workload=None, dims=None):
    """Run the table (``workload``: ``(n_traj, n_layers)``, ``dims``: the widths, for tests)."""
    n_traj, n_layers = workload or ((300, 50) if quick else (2000, 100))
    dims = dims or ((4, 16) if quick else (4, 16, 64))
    beta = 1.0
    record = BenchmarkRun("bench_other_layers", quick=quick, settings=dict(
        n_tokens=2, beta=beta, n_traj=n_traj, n_layers=n_layers, dims=list(dims), threads=1,
        timing="best of two runs"))
    rows = []
    for label, norm, causal in LAYERS:
        for d in dims:
            model = ModelConfig(d=d, beta=beta, norm=norm, causal=causal)
            for method in METHODS:   # compile outside the timing
                simulate(model, RunConfig(n_tokens=2, n_traj=2, L=2, T=1.0, method=method))
            rates = {m: _rate(model, m, n_traj, n_layers) for m in METHODS}
            rows += [{"layer": label, "d": d, "method": m, "rate": rates[m],
                      "speedup": rates[m] / rates["literal"]} for m in METHODS]
    record.table("methods", rows)
    print(f"two tokens, beta = {beta}, one thread: {n_traj} trajectories x {n_layers} layers\n")
    print("| layer | d | method | trajectory-layers / s | vs literal |")
    print("|---|---:|---|---:|---:|")
    for row in rows:
        print(f"| {row['layer']} | {row['d']} | {row['method']} | {row['rate']:,.0f} | "
              f"{row['speedup']:.1f}x |")
    if json_path:
        print(f"\nwritten: {record.write(json_path)}")
    return record


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write every row, the settings and the run's provenance here")
    args = parser.parse_args()
    main(args.quick, args.json)
