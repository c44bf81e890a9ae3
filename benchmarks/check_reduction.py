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
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from stochastic_transformers import simulate
from stochastic_transformers.classification import has_antipodal_pair, is_clustered
from stochastic_transformers import ModelConfig, RunConfig, configs_from_flat

CASES = [(3, 2.0, "softmax"), (3, 4.0, "softmax"), (4, 1.0, "softmax"), (4, 4.0, "softmax"),
         (5, 3.0, "softmax"), (8, 2.0, "softmax"), (8, 6.0, "softmax"),
         (3, 0.5, "unnormalized"), (4, 1.0, "unnormalized"), (5, 1.5, "unnormalized")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n_traj, T = (300, 50.0) if args.quick else (2000, 200.0)
    simulate(ModelConfig(d=4, beta=1.0),
             RunConfig(n_tokens=3, n_traj=2, L=10, T=1.0, method="snap"))
    simulate(ModelConfig(d=4, beta=1.0),
             RunConfig(n_tokens=3, n_traj=2, L=10, T=1.0, method="literal"))
    print(f"{n_traj} trajectories per case, d = 4, L = 100, T = {T:g}\n")
    print("| N | beta | attention | merged by T | snap vs literal: antipodal differs | "
          "clustered differs | P(antipodal) reduced | literal | difference (SE) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    start = time.perf_counter()
    for n, beta, att in CASES:
        kw = dict(n_traj=n_traj, L=100, T=T, attention=att, seed=21)
        lit = simulate(*configs_from_flat(n_tokens=n, d=4, beta=beta, method="literal", **kw))
        snap = simulate(*configs_from_flat(n_tokens=n, d=4, beta=beta, method="snap", **kw))
        red = simulate(*configs_from_flat(n_tokens=n, d=4, beta=beta, **{**kw, "seed": 22}))
        a_lit, a_snap, a_red = (has_antipodal_pair(x.gram.values) for x in (lit, snap, red))
        c_lit, c_snap = is_clustered(lit.gram.values), is_clustered(snap.gram.values)
        p1, p2 = a_red.mean(), a_lit.mean()
        se = math.sqrt(max(p1 * (1 - p1) + p2 * (1 - p2), 1e-300) / n_traj)
        z = (p1 - p2) / se if p1 != p2 else 0.0
        print(f"| {n} | {beta:g} | {att} | {np.mean(snap.merge_layer.values >= 0):.1%} | "
              f"{int(np.sum(a_lit != a_snap))} | {int(np.sum(c_lit != c_snap))} | "
              f"{p1:.3f} | {p2:.3f} | {z:+.1f} |", flush=True)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
