"""What the committed results and the benchmark runs cost, read from the files they wrote.

Two kinds of file record a measured cost, each with the date, the git commit, the machine
and the load average of its run (:func:`stochastic_transformers.io.provenance`):

* ``results/*.nc``, the committed results: their attributes ``wall_time_s`` and
  ``cell_time_s`` (with the parts a figure runs besides its main sweep, such as
  ``refine_cell_time_s`` or ``check_wall_time_s``), ``created``, ``git_commit``,
  ``machine_cpu``, ``machine_cores``, ``load_average_start`` and ``load_average_end``.
  Files written before the machine was recorded lack the last four: they read as
  unknown.
* ``results/benchmarks/*.json``, written by the scripts of ``benchmarks/`` with ``--json``
  through :class:`BenchmarkRun`: every row of their tables, their settings and the same
  provenance.

:func:`result_costs` and :func:`read_benchmarks` read them; :func:`summary` gathers the
numbers the book's cost page quotes; :func:`page_phrases` and :func:`page_tables` are its
sentences and tables (one compact table per kind, with the provenance beside it).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from .io import load_average, provenance, write_json

__all__ = ["BenchmarkRun", "machine_of", "commit_date", "result_cost", "result_costs",
           "read_benchmarks", "projected_costs", "markdown_table", "results_table",
           "provenance_table", "notes_markdown", "fig3_committed", "summary", "run_sentence",
           "dn_sentence", "profile_sentence", "page_phrases", "page_tables", "projected_table",
           "simulator_table", "fig6_table", "random_attention_table", "profile_table",
           "reduction_table"]

#: The committed results, and the benchmark records under them.
RESULTS_DIR = Path(__file__).resolve().parents[2] / "results"
BENCHMARKS_DIR = RESULTS_DIR / "benchmarks"
#: Version of the benchmark record's layout (its ``format`` field).
BENCHMARK_FORMAT = 1
#: What a missing machine or load attribute reads as.
UNKNOWN = "not recorded"


# ----------------------------------------------------------------------------- writing
class BenchmarkRun:
    """One run of a benchmark script, recorded for ``--json``.

    Created when the run starts (it takes the load average then); ``table`` adds a table
    (a list of rows, each a dict of one row's cells), ``result`` a named dict of scalars;
    ``record()`` is the whole run as a dict and ``write(path)`` writes it atomically as
    JSON: ``benchmark`` (the script's name), ``format``, ``quick`` (the script's smaller
    workload), ``settings``, ``tables``, ``results``, ``started``, ``wall_time_s``,
    ``command``, ``niceness`` (the process's priority, 0 normal) and the provenance of
    :func:`stochastic_transformers.io.provenance` (``created`` is when the run ended).
    """

    def __init__(self, name: str, *, quick: bool = False, settings: dict | None = None):
        self.name, self.quick, self.settings = name, bool(quick), dict(settings or {})
        self.tables: dict[str, list[dict]] = {}
        self.results: dict[str, dict] = {}
        self.started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.load_start = load_average()
        self._start = time.perf_counter()

    def table(self, key: str, rows) -> list[dict]:
        self.tables[key] = [dict(row) for row in rows]
        return self.tables[key]

    def result(self, key: str, values: dict) -> dict:
        self.results[key] = dict(values)
        return self.results[key]

    def record(self) -> dict:
        try:
            niceness = os.nice(0)
        except (OSError, AttributeError):
            niceness = None
        return {"benchmark": self.name, "format": BENCHMARK_FORMAT, "quick": self.quick,
                "settings": self.settings, "tables": self.tables, "results": self.results,
                "started": self.started, "wall_time_s": time.perf_counter() - self._start,
                "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                "niceness": niceness, **provenance(self.load_start)}

    def write(self, path) -> Path:
        return write_json(self.record(), path)


# ----------------------------------------------------------------------------- reading
def _attr_list(value) -> list[float] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    try:
        return [float(x) for x in list(value)]
    except TypeError:
        return None


def machine_of(attrs: dict) -> dict:
    """``cpu``, ``cores``, ``load_start`` and ``load_end`` (1-minute load averages) of a
    result's or a record's attributes; a missing one is :data:`UNKNOWN` (the loads: NaN)."""
    cores = attrs.get("machine_cores")
    start, end = (_attr_list(attrs.get(k)) for k in ("load_average_start", "load_average_end"))
    return {"cpu": str(attrs.get("machine_cpu", UNKNOWN)),
            "cores": int(cores) if cores is not None and int(cores) > 0 else UNKNOWN,
            "load_start": start[0] if start else math.nan,
            "load_end": end[0] if end else math.nan}


def commit_date(commit: str) -> str:
    """The date (YYYY-MM-DD) of a git commit of this repository, or :data:`UNKNOWN`."""
    commit = str(commit).removesuffix("-dirty")
    try:
        out = subprocess.run(["git", "show", "-s", "--format=%cs", commit, "--"],
                             cwd=RESULTS_DIR.parent, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    text = out.stdout.strip().splitlines()
    return text[0] if out.returncode == 0 and text else UNKNOWN


_GREEK = {"beta": "β", "epsilon": "ε", "gamma": "γ", "n_tokens": "N", "n_heads": "H"}


def _values_text(values) -> str:
    if isinstance(values, str):
        try:
            values = json.loads(values.replace("'", '"'))
        except ValueError:
            return values
    values = list(values) if hasattr(values, "__len__") else [values]
    if all(isinstance(v, (int, float)) or hasattr(v, "dtype") for v in values):
        nums = sorted(float(v) for v in values)
        if len(nums) <= 5:
            return ", ".join(f"{v:g}" for v in nums)
        return f"{nums[0]:g}..{nums[-1]:g} ({len(nums)} values)"
    return ", ".join(map(str, values)) if len(values) <= 5 else f"{len(values)} values"


def _number_text(value) -> str:
    value = float(value)
    return f"{int(value):,}" if value.is_integer() else f"{value:g}"


def settings_text(attrs: dict, sizes: dict) -> str:
    """The settings of a result, from its grid (``grid_params``, ``grid_*``) and the fixed
    ``n_traj``, ``L`` and ``T``; a result with no grid gives its dimensions' sizes."""
    try:
        names = json.loads(attrs["grid_params"])
    except (KeyError, ValueError):
        names = None
    if names:
        parts = [f"{_GREEK.get(p, p)} = {_values_text(attrs.get(f'grid_{p}', []))}"
                 for p in names]
    else:
        parts = [f"{dim} ({size})" for dim, size in sizes.items()]
    fixed = [f"{_GREEK.get(k, k)} = {_number_text(attrs[f'fixed_{k}'])}"
             for k in ("n_traj", "L", "T") if isinstance(attrs.get(f"fixed_{k}"), (int, float))
             or hasattr(attrs.get(f"fixed_{k}"), "dtype")]
    return " × ".join(parts) + (f"; {', '.join(fixed)}" if fixed else "")


def _parts(attrs: dict, data: dict, what: str) -> dict[str, float]:
    """``{part: seconds}`` of a result's ``what`` time ("wall" or "cell"): the main sweep's
    ``<what>_time_s`` and the parts ``<part>_<what>_time_s`` (attributes) or
    ``<what>_time_<part>_s`` (data variables, summed)."""
    main = f"{what}_time_s"
    out = {"main": float(attrs[main])} if main in attrs else {}
    for key, value in attrs.items():
        if key.endswith(f"_{main}"):
            out[key.removesuffix(f"_{main}")] = float(value)
    for key, value in data.items():
        if key.startswith(f"{what}_time_") and key.endswith("_s") and key != main:
            out[key.removeprefix(f"{what}_time_").removesuffix("_s")] = float(value)
    return {k: v for k, v in out.items() if math.isfinite(v)}


def result_cost(path) -> dict:
    """One committed result's cost, from its attributes: ``result`` (the file's stem),
    ``figure``, ``settings``, ``created`` (date), ``commit`` (7 characters),
    ``commit_date``, ``wall_time_s`` and ``cell_time_s`` (summed over the parts, NaN when
    absent) with ``wall_parts`` and ``cell_parts`` (``{part: seconds}``), ``n_cells``,
    ``n_cells_cached`` (NaN when not recorded), ``n_traj`` (trajectories of the main
    sweep), ``notes`` (the file's own notes on its times and corrections) and the
    machine (:func:`machine_of`)."""
    import xarray as xr

    path = Path(path)
    with xr.open_dataset(path) as ds:
        attrs = dict(ds.attrs)
        data = {k: float(ds[k].sum()) for k in ds.data_vars
                if (k.startswith("wall_time_") or k.startswith("cell_time_"))
                and k.endswith("_s") and k not in ("wall_time_s", "cell_time_s")}
        sizes = dict(ds.sizes)
        n_traj = float(ds["n_traj"].sum()) if "n_traj" in ds else math.nan
    wall, cell = _parts(attrs, data, "wall"), _parts(attrs, data, "cell")
    created = str(attrs.get("created", UNKNOWN))[:10]
    commit = str(attrs.get("git_commit", UNKNOWN))
    notes = {k: str(attrs[k]) for k in ("wall_time_note", "attrs_corrected") if k in attrs}

    def number(key):
        try:
            return float(attrs[key])
        except (KeyError, TypeError, ValueError):
            return math.nan

    return {"result": path.stem, "figure": str(attrs.get("figure", path.stem.split("_")[0])),
            "settings": settings_text(attrs, sizes), "created": created,
            "commit": commit[:7], "commit_date": commit_date(commit) if commit != UNKNOWN
            else UNKNOWN, "wall_time_s": sum(wall.values()) if wall else math.nan,
            "cell_time_s": sum(cell.values()) if cell else math.nan, "wall_parts": wall,
            "cell_parts": cell, "n_cells": number("n_cells"),
            "n_cells_cached": number("n_cells_cached"), "n_traj": n_traj, "notes": notes,
            **machine_of(attrs)}


def result_costs(folder=RESULTS_DIR) -> list[dict]:
    """:func:`result_cost` of every ``*.nc`` of ``folder``, in the order of their names."""
    return [result_cost(p) for p in sorted(Path(folder).glob("*.nc"))]


def read_benchmarks(folder=BENCHMARKS_DIR) -> dict[str, dict]:
    """``{benchmark: record}`` of the ``*.json`` records in ``folder`` (see
    :class:`BenchmarkRun`)."""
    out = {}
    for path in sorted(Path(folder).glob("*.json")):
        record = json.loads(path.read_text())
        out[str(record.get("benchmark", path.stem))] = record
    return out


def projected_costs(done) -> dict[str, float]:
    """``{figure: projected seconds of simulation}`` at the paper scale of every registered
    figure with a ``cost`` function and no committed paper-scale result (``done``: the
    figures that have one); a figure whose projection fails is left out."""
    from . import figures

    out = {}
    for fig_id, figure in figures.FIGURES.items():
        if fig_id in done or figure.work is None:
            continue
        try:
            out[fig_id] = float(figure.cost("paper"))
        except (ValueError, KeyError, TypeError):
            continue
    return out


# ----------------------------------------------------------------------------- layout
def markdown_table(columns: list[tuple[str, str]], rows: list[dict], formats=None) -> str:
    """A Markdown table: ``columns`` is ``[(key, header), ...]``; ``formats`` maps a key to
    a format spec or a function (numbers default to ``:,.0f``, NaN shows as a dash)."""
    formats = dict(formats or {})

    def cell(row, key):
        value = row.get(key, "")
        fmt = formats.get(key)
        if callable(fmt):
            return str(fmt(value))
        if isinstance(value, float) and not math.isfinite(value):
            return "—"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return format(value, fmt or ",.0f")
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(h for _, h in columns) + " |",
             "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(cell(r, k) for k, _ in columns) + " |" for r in rows]
    return "\n".join(lines)


def _seconds_text(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "—"
    return "< 1 s" if seconds < 0.5 else f"{seconds:,.0f} s"


def _parts_text(parts: dict[str, float]) -> str:
    """``1,146 s + 55 s (check) = 1,201 s``: the main part first, each other part named."""
    main = [_seconds_text(parts["main"])] if "main" in parts else []
    rest = [f"{_seconds_text(v)} ({k})" for k, v in parts.items() if k != "main"]
    return " + ".join(main + rest) + f" = {_seconds_text(sum(parts.values()))}"


def _machine_text(row: dict) -> str:
    if row["cpu"] == UNKNOWN and row["cores"] == UNKNOWN:
        return UNKNOWN
    start, end = (f"{row[k]:.1f}" if math.isfinite(row[k]) else "—"
                  for k in ("load_start", "load_end"))
    load = f"; load {start} → {end}" if (start, end) != ("—", "—") else ""
    return f"{row['cpu']}, {row['cores']} cores{load}"


def _cells_text(row: dict) -> str:
    n, cached = row["n_cells"], row["n_cells_cached"]
    if not math.isfinite(n):
        return "—"
    if math.isfinite(cached) and cached > 0:
        return f"{n - cached:,.0f} of {n:,.0f}"
    return f"{n:,.0f}"


def results_table(rows: list[dict]) -> str:
    """The compact table of :func:`result_costs`: result, cells computed (of all, where some
    were read from the cache), wall time and cell time (each summed over its parts) and the
    date of the run; a missing value is a dash."""
    shown = [{"result": f"`{r['result']}`", "cells": _cells_text(r),
              "wall": _seconds_text(r["wall_time_s"]), "cell": _seconds_text(r["cell_time_s"]),
              "date": r["created"]} for r in rows]
    return markdown_table([("result", "result"), ("cells", "cells computed"),
                           ("wall", "wall time"), ("cell", "cell time"), ("date", "run on")],
                          shown)


def provenance_table(rows: list[dict]) -> str:
    """Where each committed result comes from: its settings, the commit of its code (with the
    commit's date) and the machine with its 1-minute load at the start and end."""
    return markdown_table([("result", "result"), ("settings", "settings"),
                           ("commit", "commit (its date)"), ("machine", "machine, load")],
                          [{"result": f"`{r['result']}`", "settings": r["settings"],
                            "commit": f"{r['commit']} ({r['commit_date']})",
                            "machine": _machine_text(r)} for r in rows])


def _clean_note(text: str) -> str:
    """A file's note as the page prints it: an unknown value reads "unknown" (not NaN), a
    commit its seven characters, and a note's earlier note follows a semicolon."""
    text = re.sub(r"\bNaN\b(\s*\(unknown\))?", "unknown", text)
    text = re.sub(r"\b([0-9a-f]{7})[0-9a-f]{33}\[:7\]", r"\1", text)
    return text.replace(" | ", "; ")


def notes_markdown(rows: list[dict]) -> str:
    """The times by part of the results that ran several sweeps, then the notes the files
    carry (on their times, on corrections of their attributes), as a Markdown list."""
    parts = [f"- `{r['result']}`: {what} time {_parts_text(r[what + '_parts'])}" for r in rows
             for what in ("wall", "cell") if len(r[what + "_parts"]) > 1]
    notes = [f"- `{r['result']}`: {_clean_note(t)}" for r in rows for t in r["notes"].values()]
    return "\n".join(parts + notes) if parts or notes else "No file carries a note."


# ----------------------------------------------------------------------------- summary
def _record_summary(record: dict) -> dict:
    """Date, commit, machine, load and workload of one benchmark record."""
    machine = machine_of(record)
    commit = str(record.get("git_commit", UNKNOWN))
    return {"date": str(record.get("created", UNKNOWN))[:10],
            "commit": commit[:7], "commit_clean": not commit.endswith("-dirty"),
            "cpu": machine["cpu"], "cores": machine["cores"],
            "load_start": machine["load_start"], "load_end": machine["load_end"],
            "niceness": record.get("niceness"), "quick": bool(record.get("quick")),
            "workload": "the quick workload" if record.get("quick")
            else "the full workload", "wall_time_min": float(record["wall_time_s"]) / 60,
            "command": str(record.get("command", UNKNOWN))}


def _longest(rows: list[dict]) -> dict:
    """``longest`` (a result's name), ``longest_wall_min`` and ``cell_total_h`` of ``rows``."""
    walls = [r for r in rows if math.isfinite(r["wall_time_s"])]
    longest = max(walls, key=lambda r: r["wall_time_s"]) if walls else None
    cells = [r["cell_time_s"] for r in rows if math.isfinite(r["cell_time_s"])]
    return {"longest": longest["result"] if longest else "none",
            "longest_wall_min": longest["wall_time_s"] / 60 if longest else math.nan,
            "cell_total_h": sum(cells) / 3600}


def _results_summary(rows: list[dict]) -> dict:
    """Counts and totals of the committed results (``paper``: of the ``*_paper`` ones alone)
    and ``by_result``: each one's ``wall_min``."""
    paper = [r for r in rows if r["result"].endswith("_paper")]
    return {"n": len(rows), "n_with_machine": sum(r["cpu"] != UNKNOWN for r in rows),
            **_longest(rows), "paper": _longest(paper),
            "by_result": {r["result"]: {"wall_min": r["wall_time_s"] / 60} for r in rows}}


def _simulator_summary(record: dict) -> dict:
    """``run``; ``tables.N3_d4`` and ``tables.N8_d4``: ``literal_over_torch32`` (the literal
    kernel on all cores over the torch float32 loop) and ``dn_over_literal`` (the d·N path
    over the literal one on one thread, the comparison a loaded machine disturbs least) with
    ``dn_slower``; ``fig6`` and ``fig3``: the record's results for those workloads."""
    out = {"run": _record_summary(record), "tables": {}}
    for key in ("N3_d4", "N8_d4"):
        rate = {(r["method"], r["threads"] == 1): r["rate"] / 1e6     # millions a second
                for r in record["tables"].get(key, [])}
        t = out["tables"][key] = {}
        if ("literal", False) in rate and ("torch reference, float32", False) in rate:
            t["literal_over_torch32"] = (rate[("literal", False)]
                                         / rate[("torch reference, float32", False)])
        if ("literal", True) in rate and ("gaussian_dn", True) in rate:
            t["dn_over_literal"] = rate[("gaussian_dn", True)] / rate[("literal", True)]
            t["dn_slower"] = t["dn_over_literal"] < 1
    for key, name in (("fig6", "fig6"), ("fig3", "fig3_projection")):
        if name in record["results"]:
            out[key] = dict(record["results"][name])
    return out


def _random_attention_summary(record: dict) -> dict:
    out = {"run": _record_summary(record)}
    for row in record["tables"]["methods"]:
        name = row["method"].replace("numpy reference", "numpy")
        out.setdefault(name, {})[f"t{row['threads']}"] = {
            "rate": row["rate"], "speedup": row["speedup"], "normals": row["normals_per_layer"]}
    out["subspace_over_literal"] = out["subspace"]["t1"]["rate"] / out["literal"]["t1"]["rate"]
    return out


def _other_layers_summary(record: dict) -> dict:
    """``run``; ``largest_d``, and at that width ``chain_over_literal_min`` and ``_max`` (the
    two-token chain's rate over the literal map's, across the layers timed)."""
    rows = record["tables"]["methods"]
    largest = max(r["d"] for r in rows)
    ratios = [r["speedup"] for r in rows if r["d"] == largest and r["method"] == "overlap_chain"]
    return {"run": _record_summary(record), "largest_d": largest,
            "chain_over_literal_min": min(ratios), "chain_over_literal_max": max(ratios)}


#: The parts of a layer that :func:`_profile_summary` compares: the random numbers, the
#: exponentials of the attention, the rest of the attention.
PROFILE_PARTS = ("normals", "exponentials", "rest of the attention")


def _profile_summary(record: dict) -> dict:
    """Per row (``N3_literal``, ``N3_dN``, ``N8_literal``) its times and ``largest_part``
    (of :data:`PROFILE_PARTS`); ``consistent``: whether every part took no longer than the
    whole it belongs to (the exponentials within the attention, each part within the whole
    layer), which a loaded machine can break, as the parts are timed one after another."""
    out = {"run": _record_summary(record)}
    rows = record["tables"]["parts"]
    out["consistent"] = all(r["exp_ns"] <= r["attention_ns"] and
                            max(r["normals_ns"], r["attention_ns"], r["qr_ns"]) <= r["whole_ns"]
                            for r in rows)
    for row in rows:
        key = f"N{row['n_tokens']}_{'literal' if row['path'] == 'literal' else 'dN'}"
        parts = {"normals": row["normals_ns"], "exponentials": row["exp_ns"],
                 "rest of the attention": max(row["attention_ns"] - row["exp_ns"], 0.0)}
        out[key] = {**{k: row[k] for k in row if k.endswith("_ns") or k.startswith("n_")},
                    "largest_part": max(parts, key=parts.get)}
    return out


def _reduction_summary(record: dict) -> dict:
    return {"run": _record_summary(record), **record["results"]["totals"],
            "n_traj": record["settings"]["n_traj"], "T": record["settings"]["T"],
            "n_cases": len(record["tables"]["cases"])}


def fig3_committed(folder=RESULTS_DIR) -> dict:
    """The committed paper-scale Figure 3 run, for the comparison with its projection:
    ``wall_min``, ``n_cells``, ``n_cells_computed``, ``cell_time_h``, ``core_ms_per_traj``
    (cell time over trajectories) and ``mean_layers`` (layers a trajectory ran before it
    stopped); NaN where the file lacks one, and an empty dict without the file."""
    import xarray as xr

    path = Path(folder) / "fig3_paper.nc"
    if not path.exists():
        return {}
    with xr.open_dataset(path) as ds:
        a = {k: float(ds.attrs.get(k, math.nan)) for k in
             ("wall_time_s", "cell_time_s", "n_cells", "n_cells_computed")}
        n_traj = float(ds.n_traj.sum()) if "n_traj" in ds else math.nan
        layers = float(ds.mean_layers.mean()) if "mean_layers" in ds else math.nan
    return {"wall_min": a["wall_time_s"] / 60, "n_cells": a["n_cells"],
            "n_cells_computed": a["n_cells_computed"], "cell_time_h": a["cell_time_s"] / 3600,
            "core_ms_per_traj": a["cell_time_s"] / n_traj * 1e3, "mean_layers": layers}


def summary(results=RESULTS_DIR, benchmarks=BENCHMARKS_DIR) -> dict:
    """Every number the cost page quotes: ``results`` (the committed results, see
    :func:`result_costs`), ``projected`` (CPU-hours, :func:`projected_costs`), ``fig3``
    (:func:`fig3_committed`) and one entry per benchmark record present: ``simulators``,
    ``random_attention``, ``other_layers``, ``profile`` and ``reduction``."""
    rows = result_costs(results)
    done = {r["figure"] for r in rows if r["result"].endswith("_paper")}
    out = {"results": _results_summary(rows), "fig3": fig3_committed(results),
           "projected": {k: v / 3600 for k, v in projected_costs(done).items()}}
    return out | _per_record(read_benchmarks(benchmarks), (
        ("bench_simulators", "simulators", _simulator_summary),
        ("bench_random_attention", "random_attention", _random_attention_summary),
        ("bench_other_layers", "other_layers", _other_layers_summary),
        ("profile_layer", "profile", _profile_summary),
        ("check_reduction", "reduction", _reduction_summary)))


def _per_record(records: dict, entries) -> dict:
    """``{key: fn(records[name])}`` for each ``(name, key, fn)`` of ``entries`` whose
    benchmark record is present."""
    return {key: fn(records[name]) for name, key, fn in entries if name in records}


# ----------------------------------------------------------------------------- the page
# The cost page (notebooks/reproducing_costs.md) glues the phrases below into its prose and
# displays the tables; their wording is the page's, so a change here is a change of the page.
def run_sentence(run: dict) -> str:
    """Where and how a benchmark ran (a ``run`` entry of :func:`summary`), as the clause the
    page puts after "The record on this page was" (Markdown)."""
    commit = run["commit"] + ("" if run["commit_clean"] else " with uncommitted changes")
    niceness = run["niceness"]
    # niceness None (not recorded) reads as normal priority, as 0 does
    priority = (f"at low priority (niceness {niceness})" if niceness
                else "at normal priority")
    return (f"measured on {run['date']} at commit `{commit}` on {run['cpu']} "
            f"({run['cores']} cores), {run['workload']} (`{run['command']}`), {priority}, in "
            f"{run['wall_time_min']:.1f} minutes; the 1-minute load average was "
            f"{run['load_start']:.1f} at the start and {run['load_end']:.1f} at the end")


def dn_sentence(n3: dict) -> str:
    """What the d·N path's rate at N = 3 means (the ``N3_d4`` table of
    ``summary()["simulators"]``), whichever path was faster (Markdown)."""
    if n3["dn_slower"]:
        return (f"At $N = 3 < d$ the $d\\cdot N$ path, which `auto` runs before a merge, "
                f"reached {n3['dn_over_literal']:.2f} of the literal path's rate on one "
                "thread: its QR costs more than the normals it saves. Switching `auto` to the "
                "literal path there would change the bits of the committed Figure 6, so it is "
                "left for a deliberate version bump.")
    return (f"At $N = 3 < d$ the $d\\cdot N$ path, which `auto` runs before a merge, ran "
            f"{n3['dn_over_literal']:.2f} times as fast as the literal path on one thread.")


def profile_sentence(profile: dict) -> str:
    """The largest part of a literal layer (``summary()["profile"]``), or why this run cannot
    say which it is when its parts do not add up (Markdown)."""
    if not profile["consistent"]:
        return ("In this run the parts do not add up: a part took longer than the whole it "
                "belongs to (the exponentials than the attention, or a part than the whole "
                "layer). The parts are timed one after another, and the load of the machine "
                "changed between them, so this run does not say which part costs most.")
    at3 = profile["N3_literal"]["largest_part"]
    at8 = profile["N8_literal"]["largest_part"]
    where = (f"the {at3} at both $N = 3$ and $N = 8$." if at3 == at8
             else f"the {at3} at $N = 3$ and the {at8} at $N = 8$.")
    return ("Of the random numbers, the exponentials of the attention and the rest of the "
            "attention, the largest part of a literal layer was " + where)


#: The benchmark entries of :func:`summary` whose run the page describes in a sentence.
RUN_SENTENCES = ("simulators", "random_attention", "other_layers", "profile", "reduction")


def page_phrases(stats: dict) -> dict[str, str]:
    """The Markdown phrases the page glues, keyed by their glue key without the page's
    ``costs.`` prefix: ``<benchmark>.run.sentence`` (:func:`run_sentence`) of every benchmark
    of :data:`RUN_SENTENCES` that ``stats`` (:func:`summary`) has, ``dn_sentence`` and
    ``profile_sentence`` when their records are there."""
    out = {f"{key}.run.sentence": run_sentence(stats[key]["run"])
           for key in RUN_SENTENCES if key in stats}
    if "simulators" in stats:
        out["dn_sentence"] = dn_sentence(stats["simulators"]["tables"]["N3_d4"])
    if "profile" in stats:
        out["profile_sentence"] = profile_sentence(stats["profile"])
    return out


def _times(value: float) -> str:
    """A ratio as the tables print it: ``12.3×``; a dash when missing."""
    return f"{value:.1f}×" if math.isfinite(value) else "—"


def _signed(value: float) -> str:
    """One decimal with its sign; zero reads ``0.0``, never ``-0.0``."""
    text = f"{value:+.1f}"
    return "0.0" if float(text) == 0 else text


def projected_table(projected: dict[str, float]) -> str:
    """The projected CPU-hours at the paper scale (``summary()["projected"]``), or the
    sentence saying that every figure with a cost model has a committed result."""
    if not projected:
        return "Every figure with a cost model has a committed paper-scale result."
    return markdown_table(
        [("figure", "figure"), ("hours", "projected CPU-hours at the paper scale")],
        [{"figure": k, "hours": v} for k, v in projected.items()], {"hours": ".1f"})


def simulator_table(record: dict) -> str:
    """The simulator benchmark in one table under its workload: a row per method and thread
    count, a column per ``N<n>_d<d>`` workload, each cell the rate in millions of
    trajectory-layers a second with its ratio to the NumPy reference of that workload."""
    keys = [k for k in record["tables"] if k.startswith("N")]
    cells: dict = {}
    for key in keys:
        for r in record["tables"][key]:
            name = (f"{r['method'].replace('torch reference, ', 'torch ')} ({r['threads']} "
                    f"thread{'s' if r['threads'] > 1 else ''})")
            cells.setdefault(name, {})[key] = f"{r['rate'] / 1e6:.1f} ({_times(r['speedup'])})"
    settings = record["settings"]
    return (f"{settings['n_traj']:,} trajectories × {settings['n_layers']} layers a workload "
            "(N tokens in dimension d); millions of trajectory-layers a second (× the NumPy "
            "reference)\n\n"
            + markdown_table([("method", "method")] + [(k, "N, d = {}, {}".format(
                *k[1:].split("_d"))) for k in keys],
                [{"method": m, **{k: v.get(k, "—") for k in keys}} for m, v in cells.items()]))


def fig6_table(record: dict) -> str:
    """The sampled Figure 6 cells of the simulator benchmark: the full map's time over the
    reduced path's, a row per β and a column per N."""
    rows = record["tables"]["fig6"]
    ns = sorted({r["n_tokens"] for r in rows})
    ratio = {(r["beta"], r["n_tokens"]): r["ratio"] for r in rows}
    return markdown_table([("beta", "β")] + [(n, f"N = {n}") for n in ns],
                          [{"beta": b, **{n: ratio.get((b, n), math.nan) for n in ns}}
                           for b in sorted({r["beta"] for r in rows})],
                          {"beta": "g", **{n: _times for n in ns}})


def random_attention_table(record: dict) -> str:
    """The methods of the random-attention benchmark, under its workload."""
    settings = record["settings"]
    return (f"{settings['n_traj']:,} trajectories × {settings['n_layers']} layers\n\n"
            + markdown_table(
                [("method", "method"), ("threads", "threads"),
                 ("normals_per_layer", "random numbers a layer"),
                 ("rate", "trajectory-layers / s"), ("speedup", "vs NumPy")],
                record["tables"]["methods"],
                {"threads": "d", "normals_per_layer": ",d", "rate": ",.0f",
                 "speedup": _times}))


def other_layers_table(record: dict) -> str:
    """The two-token benchmark of the other layers: a row per layer and width, a column per
    method, each cell the rate in millions of trajectory-layers a second with its ratio to
    the literal map."""
    settings = record["settings"]
    cells: dict = {}
    for r in record["tables"]["methods"]:
        cells.setdefault((r["layer"], r["d"]), {})[r["method"]] = (
            f"{r['rate'] / 1e6:.2f} ({_times(r['speedup'])})")
    methods = list(dict.fromkeys(r["method"] for r in record["tables"]["methods"]))
    return (f"two tokens, {settings['n_traj']:,} trajectories × {settings['n_layers']} layers, "
            "one thread; millions of trajectory-layers a second (× the literal map)\n\n"
            + markdown_table([("layer", "layer"), ("d", "d")] + [(m, m) for m in methods],
                             [{"layer": k[0], "d": k[1], **v} for k, v in cells.items()],
                             {"d": "d"}))


def profile_table(record: dict) -> str:
    """The parts of a layer (nanoseconds) of the layer profile, under its layer count."""
    counts = ("n_tokens", "d", "n_normals", "n_exp")
    times = ("whole_ns", "normals_ns", "attention_ns", "exp_ns", "qr_ns")
    return (f"{record['settings']['n_layers']:,} layers a part; nanoseconds a layer\n\n"
            + markdown_table(
                [("n_tokens", "N"), ("d", "d"), ("path", "path"), ("whole_ns", "whole layer"),
                 ("normals_ns", "normals"), ("n_normals", "of them"),
                 ("attention_ns", "attention"), ("exp_ns", "its exponentials"),
                 ("n_exp", "of them"), ("qr_ns", "QR")], record["tables"]["parts"],
                {**{k: "d" for k in counts}, **{k: ",.0f" for k in times}}))


def reduction_table(record: dict) -> str:
    """The cases of the reduction check: merged fraction, classifications changed by the
    merge (antipodal pair / clustered), the antipodal fractions of both paths and their
    difference in standard errors."""
    rows = [{**c, "changed": f"{c['antipodal_differs']:d} / {c['clustered_differs']:d}",
             "p": f"{c['p_reduced']:.3f} / {c['p_literal']:.3f}"}
            for c in record["tables"]["cases"]]
    return markdown_table(
        [("n_tokens", "N"), ("beta", "β"), ("attention", "attention"),
         ("merged_fraction", "merged by T"), ("changed", "changed: pair / clustered"),
         ("p", "P(pair): reduced / literal"), ("z", "difference (SE)")], rows,
        {"n_tokens": "d", "beta": "g", "merged_fraction": ".0%", "z": _signed})


def page_tables(rows: list[dict], records: dict, stats: dict) -> dict[str, str]:
    """Every table of the cost page but the first (Markdown), keyed as the page glues them:
    ``provenance`` and ``notes`` of the committed results (``rows``), ``projected`` (from
    ``stats``, :func:`summary`), and one per benchmark record present: ``simulators``,
    ``fig6``, ``random_attention``, ``other_layers``, ``profile`` and ``reduction``."""
    return {"provenance": provenance_table(rows), "notes": notes_markdown(rows),
            "projected": projected_table(stats["projected"])} | _per_record(records, (
        ("bench_simulators", "simulators", simulator_table),
        ("bench_simulators", "fig6", fig6_table),
        ("bench_random_attention", "random_attention", random_attention_table),
        ("bench_other_layers", "other_layers", other_layers_table),
        ("profile_layer", "profile", profile_table),
        ("check_reduction", "reduction", reduction_table)))
