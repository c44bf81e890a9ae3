"""environment.yml lists what pyproject.toml requires, with the same version bounds."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

#: PyPI name -> conda-forge name(s), where they differ.
CONDA_NAMES = {"torch": ["pytorch"], "netcdf4": ["netcdf4"], "dask": ["dask", "distributed"]}
_REQ = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*?)\s*$")


def _split(req: str):
    name, extras, spec = _REQ.match(req.split(";")[0].split("#")[0]).groups()
    return name.lower().replace("_", "-"), extras, set(s.strip() for s in spec.split(",") if s.strip())


def _pyproject_requirements() -> dict[str, set[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = data["project"]
    reqs = list(project["dependencies"])
    for extra in ("book", "test", "vit"):
        reqs += project["optional-dependencies"][extra]
    out = {}
    for req in reqs:
        name, _, spec = _split(req)
        out.setdefault(name, set()).update(spec)
    return out


def _environment() -> dict[str, set[str]]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    out = {}
    for dep in env["dependencies"]:
        entries = dep["pip"] if isinstance(dep, dict) else [dep]
        for entry in entries:
            if entry.startswith("-"):
                continue
            name, _, spec = _split(entry.replace(" ", ""))
            out[name] = spec
    return out


def test_environment_lists_every_requirement_with_the_same_bounds():
    env = _environment()
    for name, spec in _pyproject_requirements().items():
        for conda_name in CONDA_NAMES.get(name, [name]):
            assert conda_name in env, f"{name} ({conda_name}) is missing from environment.yml"
            assert env[conda_name] == spec, (name, env[conda_name], spec)


def test_environment_installs_the_package_editable_and_what_the_book_needs():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip
    names = {_split(d)[0] for d in env["dependencies"] if isinstance(d, str)}
    assert {"python", "pip", "nodejs"} <= names  # nodejs: npm fetches MathJax for the book
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    floor = _split(python)[2]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] in floor
