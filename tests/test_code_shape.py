"""The shape of the library: its imports form no circle, the kernels import nothing above
them, no function outside the compiled kernels is longer than 60 lines of code, and the
figure layer stays lean (figures by source, no kernel and no literal font size in it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = "stochastic_transformers"
ROOT = Path(__file__).resolve().parents[1] / "src" / PACKAGE
#: Lines of code (docstrings, comments and blank lines aside) a function may have.
MAX_FUNCTION_LINES = 60
#: What the compiled kernels may import inside the package: the layers below them.
KERNEL_IMPORTS = {"attention", "activations", "rng", "_jit"}
FIGURES = ROOT / "figures"
#: Lines a figure module may have, and the figure layer in all.  The layer's cap is a ratchet
#: on its size (9,536 lines before the first cut, 8,414 after it, 8,525 with the statistics
#: that the claims' audit added: misfit-inflated and multiple-comparison-controlled counts,
#: an unbiased threshold fit, calibrated agreement shares; 8,447 once the measured work of a
#: run was read from its knobs in one place instead of rebuilt in sixteen modules, the range
#: of the feedforward strengths checked before compute, the log-log slopes one function;
#: 8,500 once the 22 knob values that an audit found failing inside a running cell, or in
#: ``summary``, were refused before compute).
#: The target of 6,000 lines needs pages that quote fewer numbers: lower the cap as the
#: layer shrinks.  A new figure that an experiment needs adds its own module's lines (and a
#: registry line), and no more (the decisive experiments).
MAX_FIGURE_FILE_LINES = 400
NEW_FIGURE_LINES = {"homog_slow_motion": 294, "persistence_long": 271, "homog_mean_field": 215,
                    "homog_hemisphere": 61, "weak_order": 305, "homog_heads": 219,
                    "norm_pairs": 183, "norm_clock": 234,
                    "norm_tokens": 152, "train_phase": 397 + 2,  # with its registry lines
                    "train_width": 236 + 2}
MAX_FIGURE_LAYER_LINES = 8_500 + sum(NEW_FIGURE_LINES.values())


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """Package modules that ``name`` imports anywhere in its body (functions included)."""
    tree = ast.parse(path.read_text())
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(PACKAGE)}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith(PACKAGE):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycle():
    """One circle of imports, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(GRAPH):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _ancestors(name):
    parts = name.split(".")
    return {".".join(parts[:k]) for k in range(1, len(parts))}


def test_the_imports_form_no_circle():
    # A package's own __init__ stands above its modules: a module may use its parent
    # package's namespace (``from .. import theory``), so edges to ancestors are left out.
    global GRAPH
    full = GRAPH
    GRAPH = {n: {m for m in deps if m not in _ancestors(n)} for n, deps in full.items()}
    try:
        assert _cycle() is None, " -> ".join(_cycle())
    finally:
        GRAPH = full


def test_the_kernels_import_only_what_lies_below_them():
    allowed = {f"{PACKAGE}.{m}" for m in KERNEL_IMPORTS}
    for name, deps in GRAPH.items():
        if name.startswith(f"{PACKAGE}.kernels"):
            above = {d for d in deps if not d.startswith(f"{PACKAGE}.kernels")} - allowed
            assert not above, f"{name} imports {sorted(above)}"


def _is_numba_kernel(func: ast.FunctionDef) -> bool:
    for dec in func.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        text = ast.unparse(target)
        if text.endswith(("njit", "jit", "vectorize")):
            return True
    return False


def _code_lines(func: ast.FunctionDef, source_lines: list[str]) -> int:
    """Lines of code of a function: blank lines, comments and docstrings aside."""
    skip = set()
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None),
                                                               ast.Constant):
        skip |= set(range(body[0].lineno, body[0].end_lineno + 1))
    count = 0
    for number in range(func.lineno, func.end_lineno + 1):
        text = source_lines[number - 1].strip()
        if number in skip or not text or text.startswith("#"):
            continue
        count += 1
    return count


def _long_functions():
    for name, path in MODULES.items():
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and not _is_numba_kernel(node):
                n = _code_lines(node, lines)
                if n > MAX_FUNCTION_LINES:
                    yield f"{name}.{node.name} ({n} lines)"


def test_no_function_outside_the_kernels_is_longer_than_60_lines():
    assert list(_long_functions()) == []


def test_the_shape_checks_can_fail():
    """The detectors find what they look for (a circle, a long function)."""
    global GRAPH
    saved = GRAPH
    GRAPH = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    try:
        assert _cycle() == ["a", "b", "c", "a"]
    finally:
        GRAPH = saved
    code = "def f():\n    '''doc'''\n" + "    x = 1\n" * 81 + "    # note\n"
    func = ast.parse(code).body[0]
    assert _code_lines(func, code.splitlines()) == 82  # the def line and 81 statements
    assert _font_sizes("ax.legend(fontsize=8)\nax.text(0, 0, 's', size=9)\n") == [1, 2]


@pytest.mark.parametrize("name", ["simulation", "config", "kernels"])
def test_the_entry_points_are_not_hidden_by_names_of_the_package(name):
    import importlib

    import stochastic_transformers as st

    module = importlib.import_module(f"{PACKAGE}.{name}")
    assert getattr(st, name, module) is module


# ----------------------------------------------------------------------------- the figure layer
#: Calls whose ``size=`` is a text size (elsewhere ``size=`` is an array's, as in rng.normal).
_TEXT_CALLS = {"text", "annotate", "set_title", "set_xlabel", "set_ylabel", "suptitle",
               "legend", "figtext", "set_text", "table"}


def _font_sizes(source: str) -> list[int]:
    """Lines that set a text size by hand (``fontsize=``, ``size=`` of text, a font dict,
    ``set_fontsize``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            sizes = {"fontsize", "labelsize", "title_fontsize"} | (
                {"size"} if name in _TEXT_CALLS else set())
            found += [k.value.lineno for k in node.keywords if k.arg in sizes]
            if name == "set_fontsize":
                found.append(node.lineno)
        elif isinstance(node, ast.Constant) and node.value == "fontsize":
            found.append(node.lineno)
    return sorted(set(found))


FIGURE_FILES = sorted(FIGURES.rglob("*.py"))


def test_figures_are_grouped_by_source():
    sources = {p.parent.name for p in FIGURE_FILES if p.parent != FIGURES}
    assert sources == {"paper", "followup", "ours"}


@pytest.mark.parametrize("path", FIGURE_FILES, ids=lambda p: str(p.relative_to(FIGURES)))
def test_a_figure_file_is_short_and_holds_no_kernel_or_font_size(path):
    source = path.read_text()
    assert len(source.splitlines()) <= MAX_FIGURE_FILE_LINES
    compiled = re.search(r"^\s*(import numba|from numba|from \.+_jit|@\S*jit)", source, re.M)
    assert compiled is None, "kernels live in stochastic_transformers.kernels"
    assert _font_sizes(source) == [], "text sizes are set once, by style.use_style"


def test_the_figure_layer_stays_lean():
    assert sum(len(p.read_text().splitlines()) for p in FIGURE_FILES) <= MAX_FIGURE_LAYER_LINES
