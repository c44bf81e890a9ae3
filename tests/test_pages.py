"""The pages as a reader meets them: what each notebook shows and how much it says.

* the parameters cell loads the committed result by default (``scale = "paper"``);
* a notebook hides no more code than it shows (its hidden cells only glue numbers);
* a figure page has at most 700 words of open prose and a chapter at most 3,000
  (``tools/page_words.py``: prose outside code, mathematics, tables and folded blocks);
* the visible code of a figure page, run alone in a fresh Python started in notebooks/,
  draws the figure the page shows.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.md"))
CHAPTERS = sorted((ROOT / "book").glob("*.md"))
_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)
_HIDDEN = ("remove-cell", "remove-input", "hide-input")

sys.path.insert(0, str(ROOT / "tools"))
import page_words  # noqa: E402


def _cells(path: Path) -> list[tuple[str, list[str]]]:
    """``(tags, code lines)`` of every code cell of a MyST notebook (comments and blank
    lines left out of the code)."""
    cells = []
    for match in _CELL.finditer(path.read_text()):
        lines = match.group(1).splitlines()
        tags = " ".join(line for line in lines if line.startswith(":tags:"))
        code = [line for line in lines if line.strip() and not line.startswith(":")
                and not line.strip().startswith("#")]
        cells.append((tags, code))
    return cells


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_page_loads_the_committed_result_by_default(path):
    params = [code for tags, code in _cells(path) if "parameters" in tags]
    assert len(params) == 1, "one parameters cell"
    assert any(re.match(r'scale\s*=\s*"paper"', line) for line in params[0]), params[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_hides_no_more_code_than_it_shows(path):
    hidden = sum(len(code) for tags, code in _cells(path) if any(t in tags for t in _HIDDEN))
    shown = sum(len(code) for tags, code in _cells(path)
                if not any(t in tags for t in _HIDDEN))
    assert hidden <= shown, f"{hidden} hidden lines of code against {shown} shown"


@pytest.mark.parametrize("path", NOTEBOOKS + CHAPTERS, ids=lambda p: p.parent.name + "/" + p.stem)
def test_open_prose_stays_within_its_limit(path):
    limit = page_words.FIGURE_PAGE_MAX if path.parent.name == "notebooks" else \
        page_words.CHAPTER_MAX
    assert page_words.words(path.read_text()) <= limit


def test_the_word_count_skips_code_maths_tables_and_folded_blocks():
    page = "\n".join([
        "# Title words", "", "Open prose of seven words here.", "",
        "```{code-cell} ipython3", "x = 1 + 2", "```", "",
        "$$", "a + b = c", "$$ (eq-x)", "",
        "| a | b |", "|---|---|", "| 1 | 2 |", "",
        "```{admonition} Folded", ":class: dropdown", "many words that nobody sees", "```", "",
        "A {glue:text}`fig3.max_abs_z:.1f` and $x^2$ count one each.",
    ])
    assert page_words.words(page) == 2 + 6 + 7


def _visible_script(path: Path) -> str:
    """The page's visible code cells in order, with a non-interactive backend."""
    code = ["import matplotlib", "matplotlib.use('Agg')"]
    for match in _CELL.finditer(path.read_text()):
        lines = match.group(1).splitlines()
        tags = " ".join(line for line in lines if line.startswith(":tags:"))
        if any(t in tags for t in _HIDDEN):
            continue
        code += [line for line in lines if not line.startswith(":")]
    code += ["import matplotlib.pyplot as plt", "assert plt.get_fignums(), 'no figure drawn'"]
    return "\n".join(code)


FIGURE_PAGES = [p for p in NOTEBOOKS if p.stem != "reproducing_costs"]


@pytest.mark.slow
@pytest.mark.parametrize("path", FIGURE_PAGES, ids=lambda p: p.stem)
def test_the_visible_code_alone_draws_the_figure(path, tmp_path):
    script = tmp_path / "visible.py"
    script.write_text(_visible_script(path))
    res = subprocess.run([sys.executable, str(script)], cwd=ROOT / "notebooks",
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
