"""Command line: ``python -m stochastic_transformers reproduce ID [--scale ...] [--set k=v ...]``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ._validation import SCALE_NAMES


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m stochastic_transformers",
        description="Reproduce the figures of 'Clustering in Deep Stochastic Transformers'.")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("reproduce", help="compute one figure (or all) and write ID.nc, ID.png, ID.svg")
    rep.add_argument("fig_id", nargs="?", help="figure id (see --list)")
    rep.add_argument("--list", action="store_true", help="list every figure id and exit")
    rep.add_argument("--knobs", action="store_true",
                     help="list the knobs of FIG_ID at --scale, with any --set applied "
                          "(what --set accepts), and exit")
    rep.add_argument("--all", action="store_true",
                     help="every figure in turn (a failure is reported and the others go on); "
                          "prints a table of what each cost")
    rep.add_argument("--skip", default="", metavar="ID,ID",
                     help="with --all: figure ids to leave out")
    rep.add_argument("--scale", default="quick", choices=SCALE_NAMES,
                     help="smoke: seconds, for tests; quick (the default): minutes, every "
                          "phenomenon with readable error bands; paper: the paper's settings "
                          "(the book shows their committed results)")
    rep.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                     help="override one knob of the scale (repeatable): n_traj=1000, "
                          "betas=0:4:0.25 (a range, both ends included), d=4,6,8 (a list)")
    rep.add_argument("--scheduler", default=None,
                     help="address of a running Dask scheduler (default: a local cluster)")
    rep.add_argument("--out", default="out", help="output folder (default: ./out)")
    rep.add_argument("--cache-dir", default=None,
                     help="folder of finished sweep cells; a killed run resumes from it "
                          "(default: OUT/cache)")
    rep.add_argument("--no-progress", action="store_true", help="hide progress bars")

    nb = sub.add_parser("notebook", help="execute one notebook of the book with papermill, "
                                         "writing DIR/ID.ipynb")
    nb.add_argument("nb_id", nargs="?", help="notebook id: a figure id (fig3) or a notebook "
                                             "name (overlap_trajectories); see --list")
    nb.add_argument("--list", action="store_true", help="list the notebooks and exit")
    nb.add_argument("--scale", default="quick", choices=SCALE_NAMES,
                    help="the notebook's scale parameter (default: quick); paper shows the "
                         "figure's committed result where there is one")
    nb.add_argument("-p", "--parameter", dest="parameters", nargs=2, action="append", default=[],
                    metavar=("KEY", "VALUE"),
                    help="a parameter of the notebook (repeatable), read like reproduce --set: "
                         "-p n_traj 1000 -p betas 0:4:0.5")
    nb.add_argument("--out", default="out", help="output folder (default: ./out)")
    nb.add_argument("--kernel", default="python3", help="Jupyter kernel (default: python3)")

    card = sub.add_parser("scorecard", help="every numbered result of both papers with its "
                                            "verdict, judged on the committed results")
    card.add_argument("--paper", choices=("paper", "followup"), default=None,
                      help="one paper's results only (default: both)")
    return parser


def _fail(message: str) -> int:
    print(f"reproduce: {message}", file=sys.stderr)
    return 2


def _listing(rows, width: int) -> int:
    """Print ``(name, text)`` rows in two columns; exit status 0.

    The first column is at least ``width`` wide and wide enough for the longest name plus
    two spaces, so that no name runs into its text."""
    rows = list(rows)
    width = max([width] + [len(str(name)) + 2 for name, _ in rows])
    for name, text in rows:
        print(f"{name:<{width}}{text}")
    return 0


def _output_folders(args) -> str:
    """Create --out and the cache folder and check that both take files; return the cache
    folder.  Runs before any compute: a figure must not compute for hours, then fail to
    write (a ValueError in one line otherwise)."""
    from .io import writable_folder

    writable_folder(args.out, "--out")
    cache_dir = args.cache_dir or str(Path(args.out) / "cache")
    writable_folder(cache_dir, "--cache-dir" if args.cache_dir else "--out's cache folder")
    return cache_dir


def _run_all(args, figures) -> int:
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    for fig_id in sorted(skip):
        if fig_id not in figures.FIGURES:
            return _fail(f"--skip: unknown figure id {fig_id!r}; ids: "
                         f"{', '.join(figures.FIGURES)}")
    try:
        cache_dir = _output_folders(args)
    except ValueError as err:
        return _fail(str(err))
    rows = []
    for fig_id in figures.FIGURES:
        if fig_id in skip:
            rows.append((fig_id, "skipped", float("nan")))
            continue
        print(f"--- {fig_id} ({args.scale})", flush=True)
        start = time.perf_counter()
        try:
            figures.reproduce(fig_id, args.scale, args.out, scheduler=args.scheduler,
                              cache_dir=cache_dir, progress=not args.no_progress)
            status = "ok"
        except Exception as err:  # noqa: BLE001 - one figure's failure must not stop the rest
            status = f"failed: {type(err).__name__}: {str(err).splitlines()[0][:100]}"
            print(f"reproduce: {fig_id}: {status}", file=sys.stderr, flush=True)
        rows.append((fig_id, status, time.perf_counter() - start))
    print(f"\n{'figure':<14}{'wall time':>12}  status")
    for fig_id, status, wall in rows:
        shown = "" if wall != wall else f"{wall:,.1f} s"
        print(f"{fig_id:<14}{shown:>12}  {status}")
    total = sum(w for _, _, w in rows if w == w)
    print(f"{'total':<14}{total:>10,.1f} s")
    return 0 if all(s in ("ok", "skipped") for _, s, _ in rows) else 1


def main(argv=None) -> int:
    from . import figures

    args = _parser().parse_args(argv)
    if args.command == "notebook":
        return _notebook(args)
    if args.command == "scorecard":
        from . import scorecard

        rows = scorecard.rows()
        for paper in (args.paper,) if args.paper else ("paper", "followup"):
            print(f"\n{'The paper' if paper == 'paper' else 'The follow-up'}\n")
            print(scorecard.table(rows, paper))
        return 0
    if args.command != "reproduce":  # pragma: no cover
        return 2
    if args.list:
        return _listing(((i, f.description) for i, f in figures.FIGURES.items()), 14)
    if args.all:
        if args.fig_id or args.settings:
            return _fail("--all takes no figure id and no --set (each figure runs at its scale)")
        return _run_all(args, figures)
    if not args.fig_id:
        return _fail("give a figure id, or --list to see them, or --all")
    try:
        defaults = figures.settings(args.fig_id, args.scale)
        overrides = figures.parse_settings(args.settings, defaults)
        # Every knob is checked before anything is written or computed (and the listing
        # shows only what a run would accept).
        figures.get(args.fig_id).knobs(args.scale, overrides)
    except (ValueError, ModuleNotFoundError) as err:
        return _fail(str(err))
    if args.knobs:
        from .figures.knobs import format_knob

        return _listing(((k, format_knob(v)) for k, v in {**defaults, **overrides}.items()), 18)
    start = time.perf_counter()
    try:
        cache_dir = _output_folders(args)
        figures.reproduce(args.fig_id, args.scale, args.out, scheduler=args.scheduler,
                          cache_dir=cache_dir, progress=not args.no_progress, **overrides)
    except (ValueError, OSError, ModuleNotFoundError) as err:
        # Bad knobs and unwritable folders are refused before any compute, a scheduler
        # that does not answer or dies mid-run is an OSError (ConnectionError): one line.
        return _fail(f"{args.fig_id}: {str(err).splitlines()[0]}")
    print(f"{args.fig_id} ({args.scale}) written to {args.out}/ in "
          f"{time.perf_counter() - start:.1f} s")
    return 0


def _notebook(args) -> int:
    from . import notebooks

    if args.list:
        return _listing(((i, p.name) for i, p in notebooks.available().items()), 22)
    if not args.nb_id:
        print("notebook: give a notebook id, or --list to see them", file=sys.stderr)
        return 2
    from .io import writable_folder

    try:
        path = notebooks.find(args.nb_id)
        params = notebooks.parse_parameters(path, args.parameters, args.scale)
        writable_folder(args.out, "--out")  # before the notebook runs, not after
    except ValueError as err:
        print(f"notebook: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    try:
        out = notebooks.execute(path, args.out, params, kernel=args.kernel)
    except OSError as err:  # the folder became unwritable while the notebook ran
        print(f"notebook: {args.nb_id}: {err}", file=sys.stderr)
        return 2
    print(f"{args.nb_id} ({args.scale}) executed into {out} in "
          f"{time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
