"""Command line: ``python -m stochastic_transformers reproduce ID [--scale ...]``."""

from __future__ import annotations

import argparse
import sys
import time


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m stochastic_transformers",
        description="Reproduce the figures of 'Clustering in Deep Stochastic Transformers'.")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("reproduce", help="compute one figure and write ID.nc, ID.png, ID.svg")
    rep.add_argument("fig_id", nargs="?", help="figure id (see --list)")
    rep.add_argument("--list", action="store_true", help="list every figure id and exit")
    rep.add_argument("--scale", default="quick", choices=("smoke", "quick", "paper"),
                     help="smoke: seconds; quick: minutes (the book's default); paper: the paper's numbers")
    rep.add_argument("--scheduler", default=None,
                     help="address of a running Dask scheduler (default: a local cluster)")
    rep.add_argument("--out", default="out", help="output folder (default: ./out)")
    rep.add_argument("--cache-dir", default=None,
                     help="folder of finished sweep cells; a killed run resumes from it "
                          "(default: OUT/cache)")
    rep.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return parser


def main(argv=None) -> int:
    from . import figures

    args = _parser().parse_args(argv)
    if args.command == "reproduce":
        if args.list:
            for fig_id, module in figures.available().items():
                print(f"{fig_id:<14}{module.DESCRIPTION}")
            return 0
        if not args.fig_id:
            print("reproduce: give a figure id, or --list to see them", file=sys.stderr)
            return 2
        try:
            figures.get(args.fig_id)
        except ValueError as err:
            print(f"reproduce: {err}", file=sys.stderr)
            return 2
        from pathlib import Path

        cache_dir = args.cache_dir or str(Path(args.out) / "cache")
        start = time.perf_counter()
        figures.reproduce(args.fig_id, args.scale, args.out, scheduler=args.scheduler,
                          cache_dir=cache_dir, progress=not args.no_progress)
        print(f"{args.fig_id} ({args.scale}) written to {args.out}/ in "
              f"{time.perf_counter() - start:.1f} s")
        return 0
    return 2  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
