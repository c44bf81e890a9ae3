"""Does the two-cluster reduction change outcomes?  Two checks, in one run.

1. **The merge itself.** ``method="snap"`` is the literal N-token map in which tokens whose
   overlap rounds to 1 are made to coincide exactly; it draws the same random numbers as
   ``method="literal"`` with the same seed, so the two runs of one trajectory differ only
   by the merge.  The table counts trajectories whose classification at T (an antipodal
   pair; clustered) differs.
2. **The chain after the merge.** The reduced path continues a two-point configuration on
   the weighted overlap chain, exact in law but with other random numbers, so single
   trajectories are not comparable after the merge; the fractions are.  The table gives
   the antipodal fraction of the reduced path and of the literal map and their difference
   in standard errors of the difference (two independent binomials).

    python benchmarks/check_reduction.py            # 2,000 trajectories, T = 200 (about 10 min)
    python benchmarks/check_reduction.py --quick    # 300 trajectories, T = 50
    python benchmarks/check_reduction.py --json results/benchmarks/check_reduction.json

``--json PATH`` also writes every row of the table, the settings, the date, the git commit,
the machine and the load average of the run to PATH, atomically
(:class:`stochastic_transformers.costs.BenchmarkRun`).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from stochastic_transformers import simulate
from stochastic_transformers.classification import has_antipodal_pair, is_clustered
from stochastic_transformers import ModelConfig, RunConfig, configs_from_flat
from stochastic_transformers.costs import BenchmarkRun

CASES = [(3, 2.0, "softmax"), (3, 4.0, "softmax"), (4, 1.0, "softmax"), (4, 4.0, "softmax"),
         (5, 3.0, "softmax"), (8, 2.0, "softmax"), (8, 6.0, "softmax"),
         (3, 0.5, "unnormalized"), (4, 1.0, "unnormalized"), (5, 1.5, "unnormalized")]


def check_case(n, beta, att, n_traj, T):
    """One case: the merge's effect (snap against literal, same random numbers) and the
    reduced path's antipodal fraction against the literal map's, in standard errors."""
    kw = dict(n_traj=n_traj, L=100, T=T, attention=att, seed=21)
    lit = simulate(*configs_from_flat(n_tokens=n, d=4, beta=beta, method="literal", **kw))
    snap = simulate(*configs_from_flat(n_tokens=n, d=4, beta=beta, method="snap", **kw))
    red = simulate(*configs_from_flat(n_tokens=n, d=4, beta=beta, **{**kw, "seed": 22}))
    a_lit, a_snap, a_red = (has_antipodal_pair(x.gram.values) for x in (lit, snap, red))
    c_lit, c_snap = is_clustered(lit.gram.values), is_clustered(snap.gram.values)
    p1, p2 = float(a_red.mean()), float(a_lit.mean())
    se = math.sqrt(max(p1 * (1 - p1) + p2 * (1 - p2), 1e-300) / n_traj)
    return {"n_tokens": n, "beta": beta, "attention": att,
            "merged_fraction": float(np.mean(snap.merge_layer.values >= 0)),
            "antipodal_differs": int(np.sum(a_lit != a_snap)),
            "clustered_differs": int(np.sum(c_lit != c_snap)),
            "changed": int(np.sum((a_lit != a_snap) | (c_lit != c_snap))),
            "p_reduced": p1, "p_literal": p2, "z": (p1 - p2) / se if p1 != p2 else 0.0}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write every row, the settings and the run's provenance here")
    parser.add_argument("--cases", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workload", default=None, help=argparse.SUPPRESS)  # tests: "n_traj,T"
    args = parser.parse_args(argv)
    n_traj, T = (300, 50.0) if args.quick else (2000, 200.0)
    if args.workload:
        n_traj, T = int(args.workload.split(",")[0]), float(args.workload.split(",")[1])
    cases = CASES[:args.cases] if args.cases else CASES
    record = BenchmarkRun("check_reduction", quick=args.quick, settings=dict(
        n_traj=n_traj, T=T, L=100, d=4, seeds="literal and snap 21, reduced 22",
        n_cases=len(cases)))
    simulate(ModelConfig(d=4, beta=1.0),
             RunConfig(n_tokens=3, n_traj=2, L=10, T=1.0, method="snap"))
    simulate(ModelConfig(d=4, beta=1.0),
             RunConfig(n_tokens=3, n_traj=2, L=10, T=1.0, method="literal"))
    print(f"{n_traj} trajectories per case, d = 4, L = 100, T = {T:g}\n")
    print("| N | beta | attention | merged by T | snap vs literal: antipodal differs | "
          "clustered differs | P(antipodal) reduced | literal | difference (SE) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    start = time.perf_counter()
    rows = []
    for n, beta, att in cases:
        row = check_case(n, beta, att, n_traj, T)
        rows.append(row)
        print(f"| {n} | {beta:g} | {att} | {row['merged_fraction']:.1%} | "
              f"{row['antipodal_differs']} | {row['clustered_differs']} | "
              f"{row['p_reduced']:.3f} | {row['p_literal']:.3f} | {row['z']:+.1f} |", flush=True)
    elapsed = time.perf_counter() - start
    record.table("cases", rows)
    record.result("totals", {
        "elapsed_s": elapsed, "n_trajectories": n_traj * len(rows),
        "n_changed": sum(r["changed"] for r in rows),
        "n_antipodal_differs": sum(r["antipodal_differs"] for r in rows),
        "n_clustered_differs": sum(r["clustered_differs"] for r in rows),
        "max_abs_z": max(abs(r["z"]) for r in rows),
        "min_merged_fraction": min(r["merged_fraction"] for r in rows)})
    print(f"\n{elapsed:.0f} s")
    if args.json:
        print(f"written: {record.write(args.json)}")
    return record


if __name__ == "__main__":
    main()
