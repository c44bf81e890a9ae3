"""`python -m stochastic_transformers notebook ID`: one notebook, executed with papermill."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from stochastic_transformers import notebooks


def _run(*args):
    return subprocess.run([sys.executable, "-m", "stochastic_transformers", "notebook", *args],
                          capture_output=True, text=True)


def test_every_notebook_has_an_id_and_a_parameters_cell():
    found = notebooks.available()
    assert {"fig1", "fig3", "thm1", "overlap", "clusters"} <= set(found)
    assert notebooks.find("overlap_trajectories") == found["overlap"]  # by file name too
    for nb_id, path in found.items():
        assert "scale" in notebooks.parameters_of(path), nb_id


@pytest.mark.notebooks
def test_notebook_runs_at_smoke_scale_with_parameters(tmp_path):
    res = _run("fig1", "--scale", "smoke", "-p", "beta", "2.0", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    nb = json.loads((tmp_path / "fig1.ipynb").read_text())
    injected = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert len(injected) == 1
    source = "".join(injected[0]["source"])
    assert 'scale = "smoke"' in source and "beta = 2.0" in source
    assert any(o.get("output_type") == "display_data" for c in nb["cells"]
               for o in c.get("outputs", []))
    assert not any(o.get("output_type") == "error" for c in nb["cells"]
                   for o in c.get("outputs", []))


@pytest.mark.parametrize("args, message", [
    (("fig3", "-p", "n_trj", "3"), "not a parameter of fig3_phase_transition.md"),
    (("fig3", "-p", "n_traj", "-3"), "n_traj must be an integer >= 1"),
    (("fig3", "-p", "betas", "0:x"), "betas takes a list of numbers"),
    (("fig4", "-p", "Ls", "0"), "Ls must be an integer >= 1"),
    (("fig99",), "notebook id must be one of"),
    (("fig3", "-p", "scale", "paper"), "--scale"),
])
def test_bad_parameters_are_refused_in_one_line_before_running(tmp_path, args, message):
    res = _run(*args, "--scale", "smoke", "--out", str(tmp_path))
    assert res.returncode == 2
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_parameters_are_typed_like_reproduce_set():
    path = notebooks.find("fig3")
    got = notebooks.parse_parameters(path, [("betas", "0:1:0.5"), ("d", "4,6"),
                                            ("n_traj", "100"), ("cache_dir", "None")], "smoke")
    assert got == {"scale": "smoke", "betas": [0.0, 0.5, 1.0], "d": [4, 6], "n_traj": 100,
                   "cache_dir": None}


def test_the_figure_list_keeps_every_id_apart_from_its_description(capsys):
    """Every row of ``reproduce --list`` is an id, at least two spaces, then its description,
    even for the longest id."""
    from stochastic_transformers import figures
    from stochastic_transformers.cli import main

    assert main(["reproduce", "--list"]) == 0
    rows = capsys.readouterr().out.splitlines()
    found = figures.FIGURES
    assert len(rows) == len(found)
    for row, (fig_id, module) in zip(rows, found.items()):
        assert row.startswith(fig_id + "  ") and row.endswith(module.description)
