"""Where one layer of the N-token map spends its time (single thread, numba).

Each part of a layer is run alone in a compiled loop over ``n`` layers on one state, so
the parts can be compared with each other and with the whole layer:

* the random numbers (d*d normals for the literal path, d*min(d, N) for the d*N path);
* the attention (N^2 logits, N^2 exponentials, the weighted sums);
* the thin QR of the attention outputs (the d*N path only);
* the whole layer as ``simulate`` runs it.

    python benchmarks/profile_layer.py
    python benchmarks/profile_layer.py --quick      # 200,000 layers a part instead of 2,000,000
    python benchmarks/profile_layer.py --json results/benchmarks/profile_layer.json

``--json PATH`` also writes every row of the table, the settings, the date, the git commit,
the machine and the load average of the run to PATH, atomically
(:class:`stochastic_transformers.costs.BenchmarkRun`).
"""

from __future__ import annotations

import argparse
import time

import numba as nb
import numpy as np

from stochastic_transformers import attention as att
from stochastic_transformers import rng as _rng
from stochastic_transformers.costs import BenchmarkRun
from stochastic_transformers.kernels.tokens import token_layer as _token_layer


@nb.njit(cache=False)
def _normals(state, count, n):
    acc = 0.0
    for _ in range(n):
        for _ in range(count):
            acc += _rng.normal(state)
    return acc


@nb.njit(cache=False)
def _attention_only(x, beta, n):
    n_tok, d = x.shape
    out, bx, w, sc = np.empty((n_tok, d)), np.empty((n_tok, d)), np.empty(n_tok), np.empty(n_tok)
    eye = np.eye(d)
    acc = 0.0
    for _ in range(n):
        att.attention(x, eye, beta, True, out, bx, w, True, sc)
        acc += out[0, 0]
    return acc


@nb.njit(cache=False)
def _exps_only(n_exp, n):
    """``n`` layers of ``n_exp`` exponentials of arguments in [-0.1, 0.1].  The argument
    restarts at 0.1 every layer: left to shrink, it would reach the subnormal numbers, whose
    arithmetic is many times slower on some processors.  The restart goes through ``acc``
    (adding nothing) so that the compiler cannot hoist the layer out of the loop."""
    acc = 0.0
    for _ in range(n):
        y = 0.1 + acc * 1e-300
        for _ in range(n_exp):
            y = -y * 0.999
            acc += np.exp(y)
    return acc


@nb.njit(cache=False)
def _qr_only(x, n):
    n_tok, d = x.shape
    k = min(d, n_tok)
    m, r, v = np.empty((d, n_tok)), np.empty((k, n_tok)), np.empty(d)
    acc = 0.0
    for _ in range(n):
        for i in range(n_tok):
            for a in range(d):
                m[a, i] = x[i, a]
        att.householder_r(m, r, v)
        acc += r[0, 0]
    return acc


@nb.njit(cache=False)
def _layers(state, x, kind, beta, n):
    n_tok, d = x.shape
    k = min(d, n_tok)
    eye = np.eye(d)
    att_, y, bx = np.empty((n_tok, d)), np.empty((n_tok, d)), np.empty((n_tok, d))
    m, r, v, g = np.empty((d, n_tok)), np.empty((k, n_tok)), np.empty((d, d)), np.empty((d, k))
    w, sc, hv = np.empty(n_tok), np.empty(n_tok), np.empty(d)
    for _ in range(n):
        _token_layer(state, kind, 0, x, 0.1, eye, beta, True, True, 1.0, 0.0, 0.0,
                     v, g, att_, m, r, y, bx, w, hv, sc)
    return x[0, 0]


def _time(fn, *args):
    """Seconds for ``fn(*args)``; the last argument is the number of layers."""
    fn(*args[:-1], 10)  # compile
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200,000 layers a part")
    parser.add_argument("--layers", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write every row, the settings and the run's provenance here")
    args = parser.parse_args(argv)
    n = args.layers or (200_000 if args.quick else 2_000_000)
    record = BenchmarkRun("profile_layer", quick=args.quick,
                          settings=dict(n_layers=n, threads=1, beta=1.0, attention="softmax"))
    with att.numba_threads(1):   # numba's thread count is restored afterwards
        record.table("parts", _table(n))
    if args.json:
        print(f"\nwritten: {record.write(args.json)}")
    return record


def _table(n):
    """Rows ``{n_tokens, d, path, whole_ns, normals_ns, n_normals, attention_ns, exp_ns,
    n_exp, qr_ns}`` (ns per layer; ``qr_ns`` 0 on the literal path, which has no QR)."""
    state = np.empty(4, dtype=np.uint64)
    _rng.seed_stream(state, np.uint64(1), np.uint64(2), 0)
    print(f"one thread, {n:,} layers; ns per layer\n")
    print("| N, d | path | whole layer | normals | attention | of which exp | QR |")
    print("|---|---|---:|---:|---:|---:|---:|")
    rows = []
    for n_tok, d in ((3, 4), (8, 4)):
        x = np.random.default_rng(0).standard_normal((n_tok, d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        for kind, name in ((0, "literal"), (1, "d*N")):
            if kind == 1 and n_tok >= d:
                continue
            count = d * d if kind == 0 else d * min(d, n_tok)
            row = {"n_tokens": n_tok, "d": d, "path": name, "n_normals": count,
                   "n_exp": n_tok * n_tok,
                   "whole_ns": _time(_layers, state, x.copy(), kind, 1.0, n) / n * 1e9,
                   "normals_ns": _time(_normals, state, count, n) / n * 1e9,
                   "attention_ns": _time(_attention_only, x.copy(), 1.0, n) / n * 1e9,
                   "exp_ns": _time(_exps_only, n_tok * n_tok, n) / n * 1e9,
                   "qr_ns": _time(_qr_only, x.copy(), n) / n * 1e9 if kind == 1 else 0.0}
            rows.append(row)
            print(f"| {n_tok}, {d} | {name} | {row['whole_ns']:.0f} | {row['normals_ns']:.0f} "
                  f"({count}) | {row['attention_ns']:.0f} | {row['exp_ns']:.0f} | "
                  f"{row['qr_ns']:.0f} |")
    return rows


if __name__ == "__main__":
    main()
