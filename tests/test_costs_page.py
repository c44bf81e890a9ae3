"""The cost page: provenance records the machine and the load, the benchmark scripts write
their numbers with --json, the table builder reads results and records, and the committed
files it reads are what the page promises."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from stochastic_transformers import costs
from stochastic_transformers import io as st_io
from stochastic_transformers.sweep import run_sweep, summed_attrs

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
PROVENANCE = ("package_version", "git_commit", "created", "machine_cpu", "machine_cores")
SCRIPTS = ("bench_simulators", "bench_random_attention", "bench_other_layers", "profile_layer",
           "check_reduction")


def _script(name):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check_record(record, name, tables):
    assert record["benchmark"] == name and record["format"] == costs.BENCHMARK_FORMAT
    for key in PROVENANCE + ("started", "wall_time_s", "settings", "quick", "niceness"):
        assert key in record, key
    assert record["machine_cores"] == os.cpu_count()
    assert record["wall_time_s"] > 0
    for key in ("load_average_start", "load_average_end"):
        assert len(record[key]) == 3 and all(x >= 0 for x in record[key])
    assert set(tables) <= set(record["tables"])
    for table in tables:
        assert record["tables"][table], table


# --------------------------------------------------------------------------- provenance
def test_provenance_records_the_machine_and_the_load():
    prov = st_io.provenance(load_start=[1.5, 2, 3])
    assert set(PROVENANCE) <= set(prov)
    assert prov["machine_cpu"] and prov["machine_cpu"] == st_io.cpu_model()
    assert prov["machine_cores"] == os.cpu_count()
    assert prov["load_average_start"] == [1.5, 2.0, 3.0]
    assert len(prov["load_average_end"]) == 3
    assert "load_average_start" not in st_io.provenance()


def test_cpu_model_and_load_where_the_system_does_not_tell(monkeypatch):
    def no_file(*args, **kwargs):
        raise FileNotFoundError("/proc/cpuinfo")

    monkeypatch.setattr(st_io, "open", no_file, raising=False)
    monkeypatch.setattr(st_io.platform, "processor", lambda: "some cpu")
    assert st_io.cpu_model() == "some cpu"
    monkeypatch.setattr(st_io.platform, "processor", lambda: "")
    assert st_io.cpu_model() == "unknown"

    def no_load():
        raise OSError("no load average")

    monkeypatch.setattr(st_io.os, "getloadavg", no_load)
    assert st_io.load_average() is None
    prov = st_io.provenance()
    assert "load_average_end" not in prov and "load_average_start" not in prov


def _cell(*, n, seed):
    return {"x": float(n)}


def test_a_sweep_records_the_machine_and_its_load(tmp_path):
    ds = run_sweep(_cell, {"n": [1, 2]}, scheduler="synchronous", progress=False)
    for key in PROVENANCE + ("load_average_start", "load_average_end"):
        assert key in ds.attrs, key
    path = st_io.write_netcdf(ds, tmp_path / "sweep.nc")
    with xr.open_dataset(path) as back:
        assert back.attrs["machine_cores"] == os.cpu_count()
        assert list(back.attrs["load_average_start"]) == ds.attrs["load_average_start"]
        assert costs.machine_of(back.attrs)["cpu"] == ds.attrs["machine_cpu"]


def test_old_files_read_the_machine_as_unknown():
    machine = costs.machine_of({"git_commit": "abc", "wall_time_s": 1.0})
    assert machine["cpu"] == machine["cores"] == costs.UNKNOWN
    assert math.isnan(machine["load_start"]) and math.isnan(machine["load_end"])


def test_summed_attrs_add_every_count_and_time():
    parts = [xr.Dataset(attrs={"n_cells": 25, "n_cells_computed": 25, "n_cells_cached": 0,
                               "cell_time_s": 2.0, "cell_time_computed_s": 2.0,
                               "wall_time_s": 1.0}),
             xr.Dataset(attrs={"n_cells": 15, "n_cells_computed": 5, "n_cells_cached": 10,
                               "cell_time_s": 3.0, "cell_time_computed_s": 0.5,
                               "wall_time_s": 0.5})]
    got = summed_attrs(parts)
    assert got == {"n_cells": 40, "n_cells_computed": 30, "n_cells_cached": 10,
                   "cell_time_s": 5.0, "cell_time_computed_s": 2.5, "wall_time_s": 1.5}
    assert isinstance(got["n_cells"], int)
    assert "n_cells" not in summed_attrs([parts[0], xr.Dataset()])


def test_update_attrs_leaves_the_variables_alone(tmp_path):
    ds = xr.Dataset({"v": (("a",), np.arange(4.0))}, attrs={"n_cells": 3})
    path = st_io.write_netcdf(ds, tmp_path / "r.nc")
    st_io.update_attrs(path, {"n_cells": 4, "cell_time_computed_s": math.nan}, "first")
    st_io.update_attrs(path, {}, "second")
    with xr.open_dataset(path) as back:
        assert back.attrs["n_cells"] == 4 and math.isnan(back.attrs["cell_time_computed_s"])
        assert back.attrs["attrs_corrected"] == "first | second"
        np.testing.assert_array_equal(back.v.values, np.arange(4.0))
    assert not list(tmp_path.glob(".*.tmp"))


# --------------------------------------------------------------------------- --json writers
def test_bench_simulators_writes_every_row(tmp_path):
    path = tmp_path / "sim.json"
    _script("bench_simulators").main(["--only", "chain", "--workload", "8,2",
                                      "--json", str(path)])
    record = json.loads(path.read_text())
    _check_record(record, "bench_simulators", ["N2_d4", "N2_d10"])
    assert record["settings"]["n_traj"] == 8 and record["settings"]["n_layers"] == 2
    rows = record["tables"]["N2_d4"]
    assert rows[0]["method"] == "numpy reference" and rows[0]["speedup"] == 1.0
    assert {(r["method"], r["threads"]) for r in rows[1:]} == {
        (m, t) for m in ("literal", "gaussian_dn", "overlap_chain") for t in (1, os.cpu_count())}
    assert all(r["rate"] > 0 for r in rows)


def test_bench_simulators_figure_workloads_are_recorded():
    bench = _script("bench_simulators")
    rows, totals = bench.bench_fig6(n_sample=1, betas=(0.0,))
    assert [r["n_tokens"] for r in rows] == [3, 4, 5, 8]
    assert totals["ratio"] == pytest.approx(totals["full_s"] / totals["reduced_s"])
    assert totals["projected_full_h"] > 0 and totals["projected_reduced_min"] > 0


def test_bench_random_attention_writes_every_row(tmp_path):
    path = tmp_path / "ra.json"
    _script("bench_random_attention").main(quick=True, json_path=str(path), workload=(4, 2))
    record = json.loads(path.read_text())
    _check_record(record, "bench_random_attention", ["methods"])
    rows = record["tables"]["methods"]
    assert [(r["method"], r["threads"]) for r in rows] == [
        ("numpy reference", 1), ("literal", 1), ("literal", 2), ("subspace", 1), ("subspace", 2)]
    from stochastic_transformers.random_attention import normals_per_layer

    assert rows[3]["normals_per_layer"] == normals_per_layer(8, 16, 4, "subspace")


def test_profile_layer_writes_every_row(tmp_path):
    path = tmp_path / "p.json"
    _script("profile_layer").main(["--layers", "200", "--json", str(path)])
    record = json.loads(path.read_text())
    _check_record(record, "profile_layer", ["parts"])
    assert [(r["n_tokens"], r["path"]) for r in record["tables"]["parts"]] == [
        (3, "literal"), (3, "d*N"), (8, "literal")]
    assert record["settings"]["n_layers"] == 200


def test_check_reduction_writes_every_row(tmp_path):
    path = tmp_path / "c.json"
    _script("check_reduction").main(["--quick", "--cases", "2", "--workload", "20,2",
                                     "--json", str(path)])
    record = json.loads(path.read_text())
    _check_record(record, "check_reduction", ["cases"])
    assert record["quick"] is True and len(record["tables"]["cases"]) == 2
    totals = record["results"]["totals"]
    assert totals["n_trajectories"] == 40
    assert totals["n_changed"] == sum(r["changed"] for r in record["tables"]["cases"])


# --------------------------------------------------------------------------- table builder
def _result(path, **attrs):
    ds = xr.Dataset({"n_traj": (("beta",), np.array([10, 10]))},
                    coords={"beta": [1.0, 2.0]}, attrs=attrs)
    ds.to_netcdf(path)
    return path


def test_result_costs_sum_the_parts_and_mark_what_is_unknown(tmp_path):
    _result(tmp_path / "figa_paper.nc", figure="figa", wall_time_s=100.0, cell_time_s=180.0,
            refine_cell_time_s=20.0, check_wall_time_s=5.0, created="2026-12-01T10:00:00+00:00",
            git_commit="0" * 40, n_cells=2, n_cells_cached=1, grid_params='["beta"]',
            grid_beta=[1.0, 2.0], fixed_n_traj=10, fixed_L=100, machine_cpu="cpu X",
            machine_cores=2, load_average_start=[1.0, 1, 1], load_average_end=[2.0, 2, 2])
    _result(tmp_path / "figb_cpu.nc", figure="figb", wall_time_s=50.0,
            created="2026-11-30T10:00:00+00:00", git_commit="1" * 40,
            wall_time_note="two runs")
    rows = costs.result_costs(tmp_path)
    a, b = rows
    assert (a["result"], b["result"]) == ("figa_paper", "figb_cpu")
    assert a["wall_time_s"] == 105.0 and a["cell_time_s"] == 200.0
    assert a["wall_parts"] == {"main": 100.0, "check": 5.0}
    assert a["cell_parts"] == {"main": 180.0, "refine": 20.0}
    assert (a["cpu"], a["cores"], a["load_start"], a["load_end"]) == ("cpu X", 2, 1.0, 2.0)
    assert a["settings"] == "β = 1, 2; n_traj = 10, L = 100"
    assert b["cpu"] == costs.UNKNOWN and math.isnan(b["cell_time_s"])
    assert b["notes"] == {"wall_time_note": "two runs"}
    table = costs.results_table(rows)
    assert table.count("\n") == 3 and "| `figa_paper` | 1 of 2 | 105 s | 200 s | 2026-12-01 |" in table
    assert "| `figb_cpu` | — | 50 s | — | 2026-11-30 |" in table
    assert costs.UNKNOWN in costs.provenance_table(rows)
    assert costs.notes_markdown(rows).splitlines() == [
        "- `figa_paper`: wall time 100 s + 5 s (check) = 105 s",
        "- `figa_paper`: cell time 180 s + 20 s (refine) = 200 s",
        "- `figb_cpu`: two runs"]


def test_summary_reads_results_and_records(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    _result(results / "fig3_paper.nc", figure="fig3", wall_time_s=120.0, cell_time_s=3600.0,
            created="2026-12-01", git_commit="2" * 40)
    bench = results / "benchmarks"
    _script("profile_layer").main(["--layers", "100", "--json", str(bench / "p.json")])
    stats = costs.summary(results, bench)
    assert stats["results"]["n"] == 1 and stats["results"]["longest"] == "fig3_paper"
    assert stats["results"]["longest_wall_min"] == pytest.approx(2.0)
    assert stats["results"]["cell_total_h"] == pytest.approx(1.0)
    assert "universality" in stats["projected"] and "fig4" in stats["projected"]
    assert "fig3" not in stats["projected"]
    assert set(stats["profile"]) >= {"run", "consistent", "N3_literal", "N3_dN", "N8_literal"}
    assert stats["profile"]["N8_literal"]["largest_part"] in costs.PROFILE_PARTS
    assert "simulators" not in stats    # no record, no entry


def test_markdown_table_formats():
    table = costs.markdown_table([("a", "A"), ("b", "B")],
                                 [{"a": 1234.5, "b": "x|y"}, {"a": math.nan, "b": 2.0}],
                                 {"b": lambda v: f"<{v}>"})
    assert table.splitlines() == ["| A | B |", "|---|---|", "| 1,234 | <x|y> |", "| — | <2.0> |"]


def test_bench_other_layers_writes_every_row(tmp_path):
    path = tmp_path / "other.json"
    _script("bench_other_layers").main(json_path=str(path), workload=(4, 2), dims=(4,))
    record = json.loads(path.read_text())
    _check_record(record, "bench_other_layers", ["methods"])
    rows = record["tables"]["methods"]
    assert [(r["layer"], r["method"]) for r in rows[:3]] == [
        ("pre-LN", "literal"), ("pre-LN", "gaussian_dn"), ("pre-LN", "overlap_chain")]
    assert len(rows) == 12 and rows[0]["speedup"] == 1.0
    table = costs.other_layers_table(record)
    assert "overlap_chain" in table and "post-LN, causal" in table


# --------------------------------------------------------------------------- committed files
def test_the_committed_benchmark_records_are_complete():
    records = costs.read_benchmarks()
    assert set(SCRIPTS) <= set(records)
    for name in SCRIPTS:
        record = records[name]
        for key in PROVENANCE + ("load_average_start", "load_average_end", "settings", "tables",
                                 "quick"):
            assert key in record, (name, key)
    stats = costs.summary()
    for key in ("simulators", "random_attention", "other_layers", "profile", "reduction"):
        assert key in stats, key
    # the simulator table has the four workloads of the page
    assert {"N2_d4", "N2_d10", "N3_d4", "N8_d4", "fig6"} <= set(records["bench_simulators"]["tables"])


def test_every_committed_result_is_in_the_cost_table():
    rows = costs.result_costs()
    assert {r["result"] for r in rows} == {p.stem for p in (ROOT / "results").glob("*.nc")}
    for row in rows:
        assert math.isfinite(row["wall_time_s"]) and row["created"] != costs.UNKNOWN, row
    by = {r["result"]: r for r in rows}
    # the corrected attributes: counts and times cover every part of the figure
    assert by["clusters_paper"]["n_cells"] == 40
    with xr.open_dataset(ROOT / "results" / "clusters_paper.nc") as ds:
        assert int((ds.n_traj > 0).sum()) == 40 and "attrs_corrected" in ds.attrs
    with xr.open_dataset(ROOT / "results" / "fig4_paper.nc") as ds:
        assert ds.attrs["n_cells"] == ds.sizes["L"] * ds.sizes["beta"] * ds.sizes["epsilon"]
        assert "attrs_corrected" in ds.attrs


# --------------------------------------------------------------------------- the page's text
# The page displays what these functions return; the committed records are checked above,
# so these use small made-up records whose every cell is known.
def _run(**changes):
    run = {"date": "2026-12-01", "commit": "abc1234", "commit_clean": True, "cpu": "cpu X",
           "cores": 16, "workload": "the full workload", "command": "bench.py --json r.json",
           "niceness": 0, "wall_time_min": 12.34, "load_start": 1.04, "load_end": 2.96}
    return {**run, **changes}


def test_run_sentence_says_where_and_at_what_priority():
    assert costs.run_sentence(_run()) == (
        "measured on 2026-12-01 at commit `abc1234` on cpu X (16 cores), the full workload "
        "(`bench.py --json r.json`), at normal priority, in 12.3 minutes; the 1-minute load "
        "average was 1.0 at the start and 3.0 at the end")
    assert "at normal priority" in costs.run_sentence(_run(niceness=None))
    low = costs.run_sentence(_run(niceness=10, commit_clean=False))
    assert "at low priority (niceness 10)" in low
    assert "`abc1234 with uncommitted changes`" in low


def test_dn_sentence_follows_which_path_was_faster():
    slower = costs.dn_sentence({"dn_slower": True, "dn_over_literal": 0.8})
    assert slower.startswith("At $N = 3 < d$ the $d\\cdot N$ path, which `auto` runs")
    assert "reached 0.80 of the literal path's rate" in slower
    assert slower.endswith("deliberate version bump.")
    faster = costs.dn_sentence({"dn_slower": False, "dn_over_literal": 1.25})
    assert faster.endswith("ran 1.25 times as fast as the literal path on one thread.")


def test_profile_sentence_names_the_largest_part_only_when_the_parts_add_up():
    def profile(at3, at8, consistent=True):
        return {"consistent": consistent, "N3_literal": {"largest_part": at3},
                "N8_literal": {"largest_part": at8}}

    head = ("Of the random numbers, the exponentials of the attention and the rest of the "
            "attention, the largest part of a literal layer was ")
    assert costs.profile_sentence(profile("normals", "normals")) == (
        head + "the normals at both $N = 3$ and $N = 8$.")
    assert costs.profile_sentence(profile("normals", "exponentials")) == (
        head + "the normals at $N = 3$ and the exponentials at $N = 8$.")
    broken = costs.profile_sentence(profile("normals", "normals", consistent=False))
    assert broken.startswith("In this run the parts do not add up") and "normals" not in broken


def test_page_phrases_are_keyed_as_the_page_glues_them():
    stats = {"profile": {"run": _run(), "consistent": False}, "reduction": {"run": _run()}}
    assert set(costs.page_phrases(stats)) == {"profile.run.sentence", "reduction.run.sentence",
                                              "profile_sentence"}
    # the committed records give every phrase the page's prose takes with {glue:md}
    page = (ROOT / "notebooks" / "reproducing_costs.md").read_text()
    wanted = {m.removeprefix("costs.").split(":")[0]
              for m in re.findall(r"\{glue:md\}`([^`]+)`", page)}
    assert wanted and wanted <= set(costs.page_phrases(costs.summary()))


def _rows_of(table):
    """The body rows of a Markdown table, after its header and rule."""
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|---"))
    return lines[start - 1], lines[start + 1:]


def test_notes_read_unknown_values_as_unknown_not_nan(tmp_path):
    _result(tmp_path / "figa_paper.nc", figure="figa", wall_time_s=0.2,
            created="2026-12-01", git_commit="0" * 40, wall_time_note="two runs | one more",
            attrs_corrected="n_cells_cached is now NaN (unknown); set to " + "ab12cd3" * 5
            + "abcde[:7], the clean commit")
    _result(tmp_path / "figb_cpu.nc", figure="figb", wall_time_s=30.0,
            created="2026-12-01", git_commit="1" * 40)
    rows = costs.result_costs(tmp_path)
    assert costs.notes_markdown(rows).splitlines() == [
        "- `figa_paper`: two runs; one more",
        "- `figa_paper`: n_cells_cached is now unknown; set to ab12cd3, the clean commit"]
    assert costs.notes_markdown(rows[1:]) == "No file carries a note."
    assert "| `figa_paper` | — | < 1 s | — | 2026-12-01 |" in costs.results_table(rows)


def test_the_committed_page_shows_no_nan_minus_zero_or_zero_seconds():
    rows, records = costs.result_costs(), costs.read_benchmarks()
    stats = costs.summary()
    tables = costs.page_tables(rows, records, stats)
    text = "\n".join([costs.results_table(rows), *tables.values(),
                      *costs.page_phrases(stats).values()])
    assert not re.search(r"\bnan\b", text, re.IGNORECASE)
    assert "-0.0" not in text and not re.search(r"(?<![\d.,])0 s\b", text)
    # the page glues every table it pastes
    page = (ROOT / "notebooks" / "reproducing_costs.md").read_text()
    pasted = set(re.findall(r"\{glue:md\} costs\.table\.(\w+)", page))
    assert pasted and pasted <= set(tables)


def test_projected_table_or_the_sentence_when_nothing_is_projected():
    header, body = _rows_of(costs.projected_table({"fig4": 12.345, "fig8": 0.5}))
    assert header == "| figure | projected CPU-hours at the paper scale |"
    assert body == ["| fig4 | 12.3 |", "| fig8 | 0.5 |"]
    assert costs.projected_table({}) == (
        "Every figure with a cost model has a committed paper-scale result.")


def _simulator_record():
    def rows(n, extra=()):
        return [{"method": "numpy reference", "engine": "numpy", "threads": 1,
                 "rate": 1234500.0, "speedup": 1.0},
                {"method": "literal", "engine": "library", "threads": n, "rate": 98765400.0,
                 "speedup": 80.04}, *extra]

    torch = {"method": "torch reference, float32", "engine": "torch", "threads": 4,
             "rate": 2e6, "speedup": 1.6}
    fig6 = [{"n_tokens": 3, "beta": 0.5, "full_s": 1.234, "reduced_s": 0.1, "ratio": 12.34},
            {"n_tokens": 4, "beta": 2.0, "full_s": 1.0, "reduced_s": 0.5, "ratio": 2.0}]
    return {"settings": {"n_traj": 10000, "n_layers": 50},
            "tables": {"N3_d4": rows(4, [torch]), "fig6": fig6, "N8_d10": rows(8)}}


def test_simulator_table_has_a_row_per_method_and_a_column_per_workload():
    title, table = costs.simulator_table(_simulator_record()).split("\n\n")
    assert title.startswith("10,000 trajectories × 50 layers a workload")
    header, body = _rows_of(table)
    assert header == "| method | N, d = 3, 4 | N, d = 8, 10 |"
    assert body == ["| numpy reference (1 thread) | 1.2 (1.0×) | 1.2 (1.0×) |",
                    "| literal (4 threads) | 98.8 (80.0×) | — |",
                    "| torch float32 (4 threads) | 2.0 (1.6×) | — |",
                    "| literal (8 threads) | — | 98.8 (80.0×) |"]


def test_fig6_table_gives_the_ratio_by_beta_and_n():
    header, body = _rows_of(costs.fig6_table(_simulator_record()))
    assert header == "| β | N = 3 | N = 4 |"
    assert body == ["| 0.5 | 12.3× | — |", "| 2 | — | 2.0× |"]


def test_random_attention_table_has_its_workload_and_one_row_per_method():
    record = {"settings": {"n_traj": 2000, "n_layers": 100}, "tables": {"methods": [
        {"method": m, "threads": 1, "normals_per_layer": 12345, "rate": 1e6, "speedup": s}
        for m, s in (("numpy reference", 1.0), ("subspace", 7.25))]}}
    text = costs.random_attention_table(record)
    assert text.startswith("2,000 trajectories × 100 layers\n\n")
    header, body = _rows_of(text)
    assert header.startswith("| method | threads | random numbers a layer |")
    assert body[1] == "| subspace | 1 | 12,345 | 1,000,000 | 7.2× |"


def test_profile_table_has_one_row_per_part_row():
    parts = [{"n_tokens": n, "d": 4, "path": "literal", "whole_ns": 1500.4, "normals_ns": 700.0,
              "n_normals": 48, "attention_ns": 600.0, "exp_ns": 300.0, "n_exp": n * n,
              "qr_ns": 0.0} for n in (3, 8)]
    text = costs.profile_table({"settings": {"n_layers": 100000}, "tables": {"parts": parts}})
    assert text.startswith("100,000 layers a part; nanoseconds a layer\n\n")
    header, body = _rows_of(text)
    assert header.count("|") == 11 and "| whole layer |" in header
    assert body == ["| 3 | 4 | literal | 1,500 | 700 | 48 | 600 | 300 | 9 | 0 |",
                    "| 8 | 4 | literal | 1,500 | 700 | 48 | 600 | 300 | 64 | 0 |"]


def test_reduction_table_has_one_row_per_case():
    case = {"n_tokens": 4, "beta": 1.0, "attention": "softmax", "merged_fraction": 0.875,
            "antipodal_differs": 0, "clustered_differs": 2, "p_reduced": 0.1234,
            "p_literal": 0.125, "z": -0.44}
    zero = {**case, "z": -0.04}
    header, body = _rows_of(costs.reduction_table({"tables": {"cases": [case, zero]}}))
    assert header.startswith("| N | β | attention | merged by T |")
    assert body == ["| 4 | 1 | softmax | 88% | 0 / 2 | 0.123 / 0.125 | -0.4 |",
                    "| 4 | 1 | softmax | 88% | 0 / 2 | 0.123 / 0.125 | 0.0 |"]
