"""Digest every committed result's ``summary()``: a refactor must leave each one unchanged.

    python tools/summary_digest.py --write /tmp/before.json   # on the old code
    python tools/summary_digest.py --check /tmp/before.json   # on the new code

Each figure's summary of ``results/ID_paper.nc`` (or its stand-in) is written as JSON
with floats at full precision; ``--check`` lists every key whose value changed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np


def _plain(value):
    """A summary value as JSON: floats kept to the bit (repr), NaN as a string."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.generic,)):
        value = value.item()
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, float):
        return repr(value) if not math.isfinite(value) else value
    if isinstance(value, (int, str, bool)) or value is None:
        return value
    return repr(value)


def digests() -> dict:
    from stochastic_transformers import figures
    from stochastic_transformers.figures.base import load_committed

    out = {}
    for fig_id in figures.FIGURES:
        figure = figures.get(fig_id)
        stand_in = getattr(figure, "STAND_IN", None) or getattr(figure, "stand_in", None)
        for scale in ("paper",) + ((stand_in[0],) if stand_in else ()):
            ds = load_committed(fig_id, scale)
            if ds is not None:
                out[f"{fig_id}_{scale}"] = _plain(figure.summary(ds))
    return out


def _diff(old, new, path=""):
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if key not in old or key not in new:
                yield f"{path}/{key}: only in {'new' if key in new else 'old'}"
            else:
                yield from _diff(old[key], new[key], f"{path}/{key}")
    elif old != new:
        yield f"{path}: {old!r} -> {new!r}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write")
    group.add_argument("--check")
    args = parser.parse_args(argv)
    now = digests()
    if args.write:
        with open(args.write, "w") as fh:
            json.dump(now, fh, indent=1, sort_keys=True)
        print(f"wrote {len(now)} summaries to {args.write}")
        return 0
    with open(args.check) as fh:
        before = json.load(fh)
    changes = list(_diff(before, json.loads(json.dumps(now))))
    for line in changes:
        print(line)
    print(f"{len(now)} summaries, {len(changes)} changed")
    return 1 if changes else 0


if __name__ == "__main__":
    sys.exit(main())
