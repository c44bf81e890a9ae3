"""No chapter or notebook types a computed number by hand.

A sentence that quotes a result of a computation (a z-score, a probability, a fraction, an
exponent, a wall time) takes it from the computation at build time, through myst-nb's glue
(``{glue:text}`KEY:FORMAT```; a chapter names the notebook, ``NB.ipynb::KEY``), so that a
rerun at another scale cannot leave a stale number on the page.

This test reads the prose of every text notebook (``notebooks/*.md``, Markdown cells only) and
every chapter (``book/*.md``) with the code, the math, the inline code and the glue roles taken
out, and flags the shapes a measured number takes:

* a decimal with two or more digits after the point (``0.651``, ``-0.85``, ``3.68``);
* a number followed by a unit of measurement or of statistics (``1.8 standard errors``,
  ``12 SE``, ``40 s``, ``3 min``, ``2.5x``);
* a ``z``, ``p`` or ``q`` value (``z = +1.1``, ``p = 0.11``);
* a percentage with a decimal (``5.7%``).

What a page may still type is listed in :data:`ALLOWED`, each with its reason: settings of a
run (inputs, not results), constants the page derives in closed form next to the number,
and the paper's own printed values.  An entry that no longer occurs fails the test too, so
that the list never outlives its reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([*(ROOT / "notebooks").glob("*.md"), *(ROOT / "book").glob("*.md")])

_FENCE = re.compile(r"^(`{3,}|~{3,}|:{3,})")
_DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.DOTALL)
_INLINE_MATH = re.compile(r"(?<!\\)\$[^$\n]+?(?<!\\)\$")
_ROLE = re.compile(r"\{[a-z:-]+\}`[^`]*`")
_CODE = re.compile(r"`[^`\n]*`")
_DECIMAL = re.compile(r"(?<![\w.])[+\-\u2212]?\d+\.\d{2,}(?![\w.])")
_LINK_TARGET = re.compile(r"\]\([^)]*\)|<https?://[^>]*>|https?://\S+")
_MEASURED = re.compile(
    r"(?<![\w.])[+\-\u2212]?\d+\.\d{2,}(?![\w.])"                     # 0.651, -0.85
    r"|(?<![\w.])\d[\d,]*(?:\.\d+)?\s*(?:standard errors?|SE|s|min|seconds?|minutes?|hours?"
    r"|h)(?![\w])"                                                    # 1.8 SE, 40 s, 3 min
    r"|(?<![\w.])\d+(?:\.\d+)?x(?![\w])"                              # 2.5x
    r"|\b[zpq]\s*=\s*[+\-\u2212]?\d"                                  # z = +1.1
    r"|(?<![\w.])\d+\.\d+\s*%",                                       # 5.7%
)

#: ``{page: {literal text: reason}}``: numbers a page may type (settings, derived constants,
#: the paper's printed values).  Each must still occur on its page.
_CHECKED = "a Monte Carlo or quadrature of a proof, too slow for the page; " \
           "tests/committed/test_random_attention_glue.py reads it from the page and recomputes it"
ALLOWED: dict[str, dict[str, str]] = {
    "book/random_attention.md": {
        "0.04": "a setting: the step eta of the one-step moment check",
        "0.05": "a criterion: the one-step moment check's allowance for the drift's bias",
        "0.165": _CHECKED, "0.264": _CHECKED, "0.446": _CHECKED,
        "0.125": "1/N at N = 8, a closed form",
        "0.202": _CHECKED, "0.145": _CHECKED,
    },
    "book/random_attention_noise.md": {
        "0.33": _CHECKED, "0.37": _CHECKED,
        "0.35": "sqrt(2T/d) at T = 1, d = 16, a closed form",
        "0.06": "T/d at T = 1, d = 16, a closed form",
        "-0.355": _CHECKED, "-0.370": _CHECKED, "-0.374": _CHECKED, "0.0003": _CHECKED,
        "-0.372": _CHECKED, "0.014": _CHECKED,
        "-0.375": "-(R - R^3) at R = 0.5, a closed form",
        "-0.19": _CHECKED,
    },
    "notebooks/homog_simplex.md": {"0.165": _CHECKED, "0.264": _CHECKED, "0.446": _CHECKED},
    "notebooks/clusters_two_point.md": {
        "0.1%": "a setting: where a prediction counts as informative",
        "99.9%": "a setting: where a prediction counts as informative"},
    "notebooks/fig2_vit_training.md": {"0.999": "a setting: Adam's second-moment decay"},
    "notebooks/fig3_phase_transition.md": {
        "2 standard errors": "a criterion (within 2 standard errors), not a result"},
    "notebooks/fig8_horizons.md": {"0.25": "a setting: the smallest beta of the figure"},
    "notebooks/thm1_weak_convergence.md": {"0.58": "L^(-1/2) at L = 3, a closed form"},
    "notebooks/ff_pairs.md": {
        "99.7%": "the share of a normal law within 3 standard deviations, for reference",
        "2 standard errors": "a criterion (within 2 standard errors), not a result"},
}


def prose_lines(page: Path):
    """``(line number, text, math)`` of the page's prose: Markdown outside code cells and
    fences, front matter, directive options and HTML comments; ``text`` without its math,
    roles, inline code and link targets, ``math`` the line's math (inline, and display math
    that starts on it)."""
    lines = page.read_text().splitlines()
    out, fence, front = [], None, lines[:1] == ["---"]
    for n, line in enumerate(lines, 1):
        if front:
            if n > 1 and line.strip() == "---":
                front = False
            continue
        match = _FENCE.match(line.strip())
        if fence is None and match:
            fence = match.group(1)
            # A MyST directive that holds prose (a proof, a note) stays prose; code does not.
            if not re.match(r"^(`{3,}|:{3,})\{(prf:\w+|note|warning|admonition|important|tip"
                            r"|figure|math)\}", line.strip()):
                out.append((n, None))
                fence = ("code", fence)
            else:
                fence = ("prose", fence)
            continue
        if fence is not None and line.strip().startswith(fence[1][:3]) \
                and line.strip().strip(fence[1][0]) == "":
            fence = None
            continue
        if fence is not None and fence[0] == "code":
            continue
        if re.match(r"^\s*:[a-z-]+:", line) or line.strip().startswith("<!--"):
            continue
        out.append((n, line))
    # Rejoin to take out display math that spans lines (kept aside, by line), then split again.
    text = "\n".join(line if line is not None else "" for _, line in out)
    numbers = [n for n, _ in out]
    display = {}

    def aside(match):
        first = text.count("\n", 0, match.start())
        display[numbers[first]] = display.get(numbers[first], "") + " " + match.group(0)
        return "\n" * match.group(0).count("\n")

    text = _DISPLAY_MATH.sub(aside, text)
    for n, line in zip(numbers, text.split("\n")):
        for pattern in (_ROLE, _CODE, _LINK_TARGET):
            line = pattern.sub(" ", line)
        math = " ".join(_INLINE_MATH.findall(line)) + display.get(n, "")
        yield n, _INLINE_MATH.sub(" ", line), math


def typed_numbers(page: Path):
    """``(line, match)`` of every number on the page's prose that looks measured: the
    shapes above in the text, and decimals of two or more digits inside math (a formula's
    coefficients are integers or symbols; a decimal there is a value)."""
    for n, line, math in prose_lines(page):
        for match in _MEASURED.finditer(line):
            yield n, match.group(0).strip()
        for match in _DECIMAL.finditer(math):
            yield n, match.group(0).strip()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_computed_number_is_typed_by_hand(page):
    rel = f"{page.parent.name}/{page.name}"
    allowed = ALLOWED.get(rel, {})
    found = list(typed_numbers(page))
    typed = [f"{rel}:{n}: {text!r}" for n, text in found
             if not any(text in key or key in text for key in allowed)]
    assert not typed, ("numbers typed by hand in prose (glue them from the computation, or "
                       "list a setting or derived constant in ALLOWED with its reason):\n"
                       + "\n".join(typed))
    text = page.read_text()
    stale = [key for key in allowed if key not in text]
    assert not stale, f"ALLOWED entries of {rel} that no longer occur: {stale}"


def test_the_scanner_sees_what_it_should(tmp_path):
    """The scanner flags typed results and ignores math, code, roles and settings."""
    page = tmp_path / "page.md"
    page.write_text(
        "---\nfront: 0.123\n---\n# Title\n\n"
        "The gap is 0.651 and z = +1.1, within 1.8 standard errors; it took 40 s.\n"
        "Glued: {glue:text}`fig.z:.2f`; math $\\beta = 0.658$; code `x = 0.123`.\n"
        "```{code-cell} ipython3\nprint(0.999)\n```\n"
        "$$\nE = 0.577\n$$\n"
        "Settings: d = 4, L = 100, 40,000 trajectories, 5.7% of runs.\n")
    found = [text for _, text in typed_numbers(page)]
    assert found == ["0.651", "z = +1", "1.8 standard errors", "40 s", "0.658", "0.577", "5.7%"]
