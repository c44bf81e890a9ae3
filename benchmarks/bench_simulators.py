"""Benchmark of the simulators against a plain-numpy reference, in one run.

The reference is written the way a researcher would write it: a batch of
trajectories, a fresh (batch, d, d) Gaussian draw and a few einsums every layer.
Every method runs the same workload (same N, d, beta, number of trajectories and
layers); the table reports trajectory-layers per second and the speed-up over the
reference measured in this run, so the ratios stay meaningful on a busy machine.

    python benchmarks/bench_simulators.py            # full table (about 2 minutes)
    python benchmarks/bench_simulators.py --quick    # a smaller workload

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
    work = n_traj * n_layers
    rows = [("numpy reference", _rate(lambda: numpy_reference(
        n_tokens, d, beta, n_traj=n_traj, n_layers=n_layers, L=L), work))]
    if torch_rows and _has_torch():
        import torch

        for dtype in ("float32", "float64"):
            label = f"torch reference, {dtype} ({torch.get_num_threads()} threads)"
            rows.append((label, _rate(lambda: torch_reference(
                n_tokens, d, beta, n_traj=n_traj, n_layers=n_layers, L=L, dtype=dtype), work)))
    for method in methods:
        for threads in (1, None):
            def run():
                simulate(ModelConfig(d=d, beta=beta),
                         RunConfig(n_tokens=n_tokens, n_traj=n_traj, L=L, T=n_layers / L,
                                   method=method, stop_level=0.0, n_threads=threads))
            run_small = lambda: simulate(ModelConfig(d=d, beta=beta),
                                         RunConfig(n_tokens=n_tokens, n_traj=4, L=L, T=1 / L,
                                                   method=method, stop_level=0.0))
            run_small()  # compile outside the timing
            label = f"{method} ({'1 thread' if threads == 1 else f'{os.cpu_count()} threads'})"
            rows.append((label, _rate(run, work)))
    return rows


def print_table(title, rows):
    ref = rows[0][1]
    print(f"\n{title}")
    print(f"| method | trajectory-layers / s | speed-up vs numpy |")
    print(f"|---|---:|---:|")
    for label, rate in rows:
        print(f"| {label} | {rate:,.0f} | {rate / ref:.1f}x |")


def project_fig3(n_sample=256, seed=0):
    """Time a sample of paper-scale Figure 3 cells with early stopping; extrapolate."""
    d_values = range(4, 11)
    betas = np.linspace(0.0, 4.0, 33)
    sample = [(d, b) for d in (4, 7, 10) for b in betas[::4]]
    simulate(ModelConfig(d=4, beta=1.0), RunConfig(n_tokens=2, n_traj=4, L=100, T=0.01))  # compile
    total = 0.0
    stopped = []
    start_all = time.perf_counter()
    for d, beta in sample:
        start = time.perf_counter()
        ds = simulate(ModelConfig(d=d, beta=beta),
                      RunConfig(n_tokens=2, n_traj=n_sample, L=100, T=500, seed=seed))
        total += time.perf_counter() - start
        stopped.append(ds.attrs["stopped_fraction"])
    per_traj = total / (len(sample) * n_sample)
    n_total = 40_000 * len(d_values) * len(betas)
    print(f"\nPaper-scale Figure 3 projection ({len(sample)} sampled cells x {n_sample} "
          f"trajectories, all threads, {time.perf_counter() - start_all:.0f} s):")
    print(f"  mean cost per trajectory (50,000 layers, early stopping at 1e-6): "
          f"{per_traj * 1e3:.3f} ms; stopped fraction {np.mean(stopped):.3f} "
          f"(min {np.min(stopped):.3f})")
    print(f"  projected for {n_total:,} trajectories: {per_traj * n_total / 60:.1f} minutes")


def bench_fig6(n_sample=200, betas=(0.0, 2.0, 4.0, 6.0, 8.0), seed=0):
    """Paper-scale Figure 6 cells (L = 100, T = 500) on the full map and on the reduced path.

    Both run the same ``n_sample`` trajectories of each sampled (N, beta); the table gives
    the time of each and the ratio, and the projection scales the reduced path's mean
    cost per trajectory to the 68 cells x 10,000 trajectories of the paper scale.
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
    full_total = reduced_total = 0.0
    per_n = {}
    for n in (3, 4, 5, 8):
        for beta in betas:
            start = time.perf_counter()
            simulate(*configs_from_flat(n_tokens=n, d=4, beta=beta, method=full_method(n, 4),
                                        **kw))
            t_full = time.perf_counter() - start
            start = time.perf_counter()
            simulate(*configs_from_flat(n_tokens=n, d=4, beta=beta, **kw))
            t_red = time.perf_counter() - start
            full_total += t_full
            reduced_total += t_red
            per_n.setdefault(n, []).append(t_red)
            print(f"| {n} | {beta:g} | {t_full:.2f} | {t_red:.2f} | {t_full / t_red:.1f}x |")
    print(f"| all | | {full_total:.1f} | {reduced_total:.1f} | "
          f"**{full_total / reduced_total:.1f}x** |")
    cells_per_n = 17
    projected = sum(np.mean(v) / n_sample * 10_000 * cells_per_n for v in per_n.values())
    print(f"  projected paper scale (68 cells x 10,000 trajectories, the sampled betas standing "
          f"for all 17): {projected / 60:.1f} minutes of wall time on the reduced path, "
          f"{projected * full_total / reduced_total / 3600:.1f} hours on the full map")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads")
    parser.add_argument("--skip-projection", action="store_true")
    parser.add_argument("--only", choices=("chain", "tokens", "fig6"), default=None,
                        help="run one section only")
    args = parser.parse_args()
    n_traj, n_layers = (512, 200) if args.quick else (2048, 500)
    if args.only in (None, "chain"):
        for d in (4, 10):
            print_table(f"N = 2, d = {d}, softmax, beta = 1, {n_traj} trajectories x {n_layers} "
                        "layers", bench_methods(2, d, n_traj, n_layers,
                                                ["literal", "gaussian_dn", "overlap_chain"]))
    if args.only in (None, "tokens"):
        for n in (3, 8):
            print_table(f"N = {n}, d = 4, softmax, beta = 1, {n_traj} trajectories x {n_layers} "
                        "layers", bench_methods(n, 4, n_traj, n_layers, ["literal", "gaussian_dn"],
                                                torch_rows=True))
    if args.only in (None, "fig6"):
        bench_fig6(n_sample=50 if args.quick else 200)
    if not args.skip_projection and args.only is None:
        project_fig3(n_sample=64 if args.quick else 256)


if __name__ == "__main__":
    main()
