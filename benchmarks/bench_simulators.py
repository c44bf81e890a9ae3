"""Benchmark of the simulators against a plain-numpy reference, in one run.

The reference is written the way a researcher would write it: a batch of
trajectories, a fresh (batch, d, d) Gaussian draw and a few einsums every layer.
Every method runs the same workload (same N, d, beta, number of trajectories and
layers); the table reports trajectory-layers per second and the speed-up over the
reference measured in this run, so the ratios stay meaningful on a busy machine.

    python benchmarks/bench_simulators.py            # full table (about 2 minutes)
    python benchmarks/bench_simulators.py --quick    # a smaller workload
    python benchmarks/bench_simulators.py --json results/benchmarks/bench_simulators.json

``--json PATH`` also writes every row of the tables, the settings, the date, the git commit,
the machine and the load average of the run to PATH, atomically
(:class:`stochastic_transformers.costs.BenchmarkRun`).

A second reference is the approach of public simulators of such models: the same batched
loop in torch (``torch.randn`` and ``bmm``), in float32 and in float64, on the same cores
(skipped when torch is not installed).

The last sections project the cost of the paper-scale Figure 3 sweep (40,000
trajectories x d = 4..10 x 33 beta values x 50,000 layers) with early stopping, and time
the paper-scale Figure 6 workload (N = 3, 4, 5, 8, d = 4, 50,000 layers) on the full
N-token map against the two-cluster reduced path, from samples of their cells run in full.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from stochastic_transformers import simulate
from stochastic_transformers import ModelConfig, RunConfig, configs_from_flat
from stochastic_transformers.costs import BenchmarkRun


def numpy_reference(n_tokens, d, beta, *, n_traj, n_layers, L, seed=0):
    """Softmax attention, Gaussian V, batched over trajectories: the baseline."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_traj, n_tokens, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    h = 1.0 / math.sqrt(L)
    for _ in range(n_layers):
        logits = beta * np.einsum("bia,bja->bij", x, x)
        logits -= logits.max(axis=-1, keepdims=True)
        w = np.exp(logits)
        w /= w.sum(axis=-1, keepdims=True)
        a = np.einsum("bij,bja->bia", w, x)
        v = rng.standard_normal((n_traj, d, d))
        y = x + h * np.einsum("bac,bic->bia", v, a)
        x = y / np.linalg.norm(y, axis=-1, keepdims=True)
    return x


def torch_reference(n_tokens, d, beta, *, n_traj, n_layers, L, dtype="float32", seed=0):
    """The numpy reference written in torch: batched softmax attention and bmm."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    x = torch.randn(n_traj, n_tokens, d, generator=gen, dtype=dt)
    x = x / x.norm(dim=-1, keepdim=True)
    h = 1.0 / math.sqrt(L)
    with torch.no_grad():
        for _ in range(n_layers):
            w = torch.softmax(beta * torch.bmm(x, x.transpose(1, 2)), dim=-1)
            a = torch.bmm(w, x)                                   # (B, N, d)
            v = torch.randn(n_traj, d, d, generator=gen, dtype=dt)
            y = x + h * torch.bmm(a, v.transpose(1, 2))           # rows: V a_i
            x = y / y.norm(dim=-1, keepdim=True)
    return x


def _has_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _rate(fn, work, repeat=2):
    """Best-of-``repeat`` trajectory-layers per second of ``fn()``."""
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return work / best


def bench_methods(n_tokens, d, n_traj, n_layers, methods, beta=1.0, L=100, torch_rows=False):
    """Rows ``{method, engine, threads, rate, speedup}`` of one workload: the numpy
    reference first (one core), then torch (if asked and installed), then each library
    method on one thread and on all cores; ``rate`` in trajectory-layers a second."""
    work = n_traj * n_layers
    rows = [{"method": "numpy reference", "engine": "numpy", "threads": 1,
             "rate": _rate(lambda: numpy_reference(n_tokens, d, beta, n_traj=n_traj,
                                                   n_layers=n_layers, L=L), work)}]
    if torch_rows and _has_torch():
        import torch

        for dtype in ("float32", "float64"):
            rows.append({"method": f"torch reference, {dtype}", "engine": "torch",
                         "threads": torch.get_num_threads(),
                         "rate": _rate(lambda: torch_reference(
                             n_tokens, d, beta, n_traj=n_traj, n_layers=n_layers, L=L,
                             dtype=dtype), work)})
    for method in methods:
        simulate(ModelConfig(d=d, beta=beta),
                 RunConfig(n_tokens=n_tokens, n_traj=4, L=L, T=1 / L, method=method,
                           stop_level=0.0))   # compile outside the timing
        for threads in (1, None):
            def run():
                simulate(ModelConfig(d=d, beta=beta),
                         RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=n_layers / L,
                                   method=method, stop_level=0.0, n_threads=threads))
            rows.append({"method": method, "engine": "library",
                         "threads": 1 if threads == 1 else os.cpu_count(),
                         "rate": _rate(run, work)})
    for row in rows:
        row["speedup"] = row["rate"] / rows[0]["rate"]
    return rows


def print_table(title, rows):
    print(f"\n{title}")
    print("| method | threads | trajectory-layers / s | speed-up vs numpy |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['method']} | {row['threads']} | {row['rate']:,.0f} | "
              f"{row['speedup']:.1f}x |")


def project_fig3(n_sample=256, seed=0):
    """Time a sample of paper-scale Figure 3 cells with early stopping; extrapolate.

    Returns ``{n_cells_sampled, n_sample, elapsed_s, per_traj_ms, mean_layers,
    stopped_fraction, stopped_fraction_min, n_total, projected_min}``: wall time per
    trajectory on all cores, the layers a trajectory ran on average (of 50,000), and the
    projected wall time of the paper-scale sweep.
    """
    d_values = range(4, 11)
    betas = np.linspace(0.0, 4.0, 33)
    sample = [(d, b) for d in (4, 7, 10) for b in betas[::4]]
    simulate(ModelConfig(d=4, beta=1.0), RunConfig(n_tokens=2, n_traj=4, L=100, T=0.01))  # compile
    total = 0.0
    stopped, layers = [], []
    start_all = time.perf_counter()
    for d, beta in sample:
        start = time.perf_counter()
        ds = simulate(ModelConfig(d=d, beta=beta),
                      RunConfig(n_tokens=2, n_traj=n_sample, L=100, T=500, seed=seed))
        total += time.perf_counter() - start
        stopped.append(ds.attrs["stopped_fraction"])
        s_layer = ds.stopped_layer.values
        layers.append(float(np.where(s_layer >= 0, s_layer, ds.attrs["n_layers"]).mean()))
    per_traj = total / (len(sample) * n_sample)
    n_total = 40_000 * len(d_values) * len(betas)
    out = {"n_cells_sampled": len(sample), "n_sample": n_sample,
           "elapsed_s": time.perf_counter() - start_all, "per_traj_ms": per_traj * 1e3,
           "mean_layers": float(np.mean(layers)), "stopped_fraction": float(np.mean(stopped)),
           "stopped_fraction_min": float(np.min(stopped)), "n_total": n_total,
           "projected_min": per_traj * n_total / 60}
    print(f"\nPaper-scale Figure 3 projection ({len(sample)} sampled cells x {n_sample} "
          f"trajectories, all threads, {out['elapsed_s']:.0f} s):")
    print(f"  mean cost per trajectory (50,000 layers, early stopping at 1e-6): "
          f"{out['per_traj_ms']:.3f} ms; {out['mean_layers']:.0f} layers on average; stopped "
          f"fraction {out['stopped_fraction']:.3f} (min {out['stopped_fraction_min']:.3f})")
    print(f"  projected for {n_total:,} trajectories: {out['projected_min']:.1f} minutes")
    return out


def bench_fig6(n_sample=200, betas=(0.0, 2.0, 4.0, 6.0, 8.0), seed=0):
    """Paper-scale Figure 6 cells (L = 100, T = 500) on the full map and on the reduced path.

    Both run the same ``n_sample`` trajectories of each sampled (N, beta); the table gives
    the time of each and the ratio, and the projection scales the reduced path's mean
    cost per trajectory to the 68 cells x 10,000 trajectories of the paper scale.
    Returns ``(rows, totals)``: rows ``{n_tokens, beta, full_s, reduced_s, ratio}`` and
    ``{n_sample, full_s, reduced_s, ratio, projected_reduced_min, projected_full_h}``.
    """
    from stochastic_transformers.simulation import full_method

    kw = dict(n_traj=n_sample, L=100, T=500.0, seed=seed)
    for n in (3, 8):
        simulate(ModelConfig(d=4, beta=1.0),
                 RunConfig(n_tokens=n, n_traj=4, L=10, T=1.0))                        # compile
        simulate(ModelConfig(d=4, beta=1.0),
                 RunConfig(n_tokens=n, n_traj=4, L=10, T=1.0, method=full_method(n, 4)))
    print(f"\nPaper-scale Figure 6 workload, {n_sample} trajectories per sampled cell, "
          f"50,000 layers, d = 4, softmax, all threads:")
    print("| N | beta | full map (s) | reduced path (s) | ratio |")
    print("|---|---:|---:|---:|---:|")
    rows, per_n = [], {}
    for n in (3, 4, 5, 8):
        for beta in betas:
            start = time.perf_counter()
            simulate(*configs_from_flat(n_tokens=n, d=4, beta=beta, method=full_method(n, 4),
                                        **kw))
            t_full = time.perf_counter() - start
            start = time.perf_counter()
            simulate(*configs_from_flat(n_tokens=n, d=4, beta=beta, **kw))
            t_red = time.perf_counter() - start
            per_n.setdefault(n, []).append(t_red)
            rows.append({"n_tokens": n, "beta": float(beta), "full_s": t_full,
                         "reduced_s": t_red, "ratio": t_full / t_red})
            print(f"| {n} | {beta:g} | {t_full:.2f} | {t_red:.2f} | {t_full / t_red:.1f}x |")
    full_total = sum(r["full_s"] for r in rows)
    reduced_total = sum(r["reduced_s"] for r in rows)
    print(f"| all | | {full_total:.1f} | {reduced_total:.1f} | "
          f"**{full_total / reduced_total:.1f}x** |")
    cells_per_n = 17
    projected = sum(np.mean(v) / n_sample * 10_000 * cells_per_n for v in per_n.values())
    totals = {"n_sample": n_sample, "full_s": full_total, "reduced_s": reduced_total,
              "ratio": full_total / reduced_total, "projected_reduced_min": projected / 60,
              "projected_full_h": projected * full_total / reduced_total / 3600}
    print(f"  projected paper scale (68 cells x 10,000 trajectories, the sampled betas standing "
          f"for all 17): {totals['projected_reduced_min']:.1f} minutes of wall time on the "
          f"reduced path, {totals['projected_full_h']:.1f} hours on the full map")
    return rows, totals


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads")
    parser.add_argument("--skip-projection", action="store_true")
    parser.add_argument("--only", choices=("chain", "tokens", "fig6"), default=None,
                        help="run one section only")
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write every row, the settings and the run's provenance here")
    parser.add_argument("--workload", default=None, help=argparse.SUPPRESS)  # tests: "B,layers"
    args = parser.parse_args(argv)
    n_traj, n_layers = (512, 200) if args.quick else (2048, 500)
    if args.workload:
        n_traj, n_layers = (int(x) for x in args.workload.split(","))
    fig6_sample, fig3_sample = (50, 64) if args.quick else (200, 256)
    record = BenchmarkRun("bench_simulators", quick=args.quick, settings=dict(
        n_traj=n_traj, n_layers=n_layers, L=100, beta=1.0, attention="softmax",
        timing="best of 2", only=args.only, fig6_n_sample=fig6_sample,
        fig3_n_sample=fig3_sample))
    sections = []
    if args.only in (None, "chain"):
        sections += [(2, d, ["literal", "gaussian_dn", "overlap_chain"], False) for d in (4, 10)]
    if args.only in (None, "tokens"):
        sections += [(n, 4, ["literal", "gaussian_dn"], True) for n in (3, 8)]
    for n, d, methods, torch_rows in sections:
        rows = record.table(f"N{n}_d{d}", bench_methods(n, d, n_traj, n_layers, methods,
                                                        torch_rows=torch_rows))
        print_table(f"N = {n}, d = {d}, softmax, beta = 1, {n_traj} trajectories x {n_layers} "
                    "layers", rows)
    if args.only in (None, "fig6"):
        rows, totals = bench_fig6(n_sample=fig6_sample)
        record.table("fig6", rows)
        record.result("fig6", totals)
    if not args.skip_projection and args.only is None:
        record.result("fig3_projection", project_fig3(n_sample=fig3_sample))
    if args.json:
        print(f"\nwritten: {record.write(args.json)}")
    return record


if __name__ == "__main__":
    main()
