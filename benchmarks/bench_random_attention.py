"""Benchmark of the random-attention model (fresh V, W, W' every layer and head).

Reference: the model as a researcher would write it in numpy, batched over trajectories,
with fresh full (batch, H, d, d) Gaussian matrices every layer and a few einsums/matmuls.
Against it, in the same run and on the same workload: the compiled ``literal`` method
(the same full matrices, drawn inside the loop) and ``subspace`` (the exact reductions of
:mod:`stochastic_transformers.random_attention`), with 1 and 2 threads.  The table gives
trajectory-layers per second and the ratio to the reference measured in this run.

    python benchmarks/bench_random_attention.py           # N = 8, d = 16, H = 4 (about 1 min)
    python benchmarks/bench_random_attention.py --quick
    python benchmarks/bench_random_attention.py --json results/benchmarks/bench_random_attention.json

``--json PATH`` also writes every row of the table, the settings, the date, the git commit,
the machine and the load average of the run to PATH, atomically
(:class:`stochastic_transformers.costs.BenchmarkRun`).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from stochastic_transformers import ModelConfig, RunConfig, simulate
from stochastic_transformers.costs import BenchmarkRun
from stochastic_transformers.random_attention import normals_per_layer


def numpy_reference(n_tokens, d, beta, n_heads, *, n_traj, n_layers, eta, sigma_qk=1.0, seed=0):
    """Batched numpy: per layer, (n_traj, H, d, d) draws of W, W', V; softmax; update."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_traj, n_tokens, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    for _ in range(n_layers):
        w = sigma_qk * rng.standard_normal((n_traj, n_heads, d, d))
        wp = sigma_qk * rng.standard_normal((n_traj, n_heads, d, d))
        v = rng.standard_normal((n_traj, n_heads, d, d))
        xh = x[:, None]                                    # (b, 1, N, d)
        p = xh @ wp                                        # (b, H, N, d): W'^T x_i
        q = xh @ w                                         # (b, H, N, d): W^T x_j
        s = beta * (p @ q.transpose(0, 1, 3, 2))           # (b, H, N, N)
        s -= s.max(axis=-1, keepdims=True)
        a = np.exp(s)
        a /= a.sum(axis=-1, keepdims=True)
        m = a @ xh                                         # (b, H, N, d)
        u = (m @ v.transpose(0, 1, 3, 2)).sum(axis=1)      # sum_h V_h m_h,i
        y = x + (eta / n_heads) * u
        x = y / np.linalg.norm(y, axis=-1, keepdims=True)
    return x


def _rate(fn, work):
    t0 = time.perf_counter()
    fn()
    return work / (time.perf_counter() - t0)


def main(quick=False, json_path=None, workload=None):
    """Run the table (``workload``: ``(n_traj, n_layers)`` instead of the scale's, for tests)."""
    n_tokens, d, n_heads, beta = 8, 16, 4, 1.0
    n_traj, n_layers = workload or ((400, 64) if quick else (2000, 128))
    L = n_layers
    eta = 1.0 / math.sqrt(L)
    work = n_traj * n_layers
    record = BenchmarkRun("bench_random_attention", quick=quick, settings=dict(
        n_tokens=n_tokens, d=d, n_heads=n_heads, beta=beta, n_traj=n_traj,
        n_layers=n_layers, L=L, eta=eta, timing="one run"))
    model = ModelConfig(d=d, beta=beta, kind="random_attention", n_heads=n_heads)
    # compile outside the timing
    for method in ("literal", "subspace"):
        simulate(model, RunConfig(n_tokens=n_tokens, n_traj=2, L=2, T=1, method=method))
    rows = [{"method": "numpy reference", "threads": 1,
             "normals_per_layer": 3 * n_heads * d * d,
             "rate": _rate(lambda: numpy_reference(n_tokens, d, beta, n_heads, n_traj=n_traj,
                                                   n_layers=n_layers, eta=eta), work)}]
    for method in ("literal", "subspace"):
        for threads in (1, 2):
            rows.append({"method": method, "threads": threads,
                         "normals_per_layer": normals_per_layer(n_tokens, d, n_heads, method),
                         "rate": _rate(lambda: simulate(model, RunConfig(
                             n_tokens=n_tokens, n_traj=n_traj, L=L, T=1, method=method,
                             n_threads=threads)), work)})
    for row in rows:
        row["speedup"] = row["rate"] / rows[0]["rate"]
    record.table("methods", rows)
    print(f"N = {n_tokens}, d = {d}, H = {n_heads}, beta = {beta}: {n_traj} trajectories x "
          f"{n_layers} layers\n")
    print("| method | threads | random numbers a layer | trajectory-layers / s | vs numpy |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['method']} | {row['threads']} | {row['normals_per_layer']:,} | "
              f"{row['rate']:,.0f} | {row['speedup']:.1f}x |")
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
