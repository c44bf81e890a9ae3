"""The public text speaks of the mathematics and the code, never of how it was produced.

Scanned: README.md, CONTRIBUTING.md (if present), book/*.md, notebooks/*.md (whole files),
and the docstrings (module, class, function) and comments of src/**/*.py.  tests/ is not
public text and is not scanned (so pytest's ``scope="session"`` or a test named after an
issue is fine there).

Rules (case-insensitive, whole words):

* **Sessions.** Any "session" or "sessions" ("this session", "the previous session",
  "session 3", "this project's sessions") and "pre-session".  Allowed: the technical senses
  "pytest session", "Jupyter/IPython/kernel/interactive/Python/browser session",
  "session-scoped", ``scope="session"``.
* **Issues and their targets.** "issue" followed by a number ("issue 12", "issue #12",
  "issues 12 and 13"), the possessive "issue's", "issue target(s)", "target of the/this
  issue".  The plain word in its ordinary senses ("open an issue", "the issue tracker", a
  link to GitHub issues for bug reports) is allowed.
* **Helpers and agents.** "agent(s)", "sub-agent(s)", "engineer(s)", and "helper(s)" in the
  sense of a worker: "a/the/another helper" followed by a verb of work or report
  (wrote, derived, found, ran, checked, reported, said, asked, started), "helper session",
  "helper agent", "helper's", "by a helper".  "Helper" for code ("a helper for tests",
  "helpers every kernel shares", "helper function") is allowed.
* **Text extraction.** "extraction(s)" (except "tar/zip/archive/feature extraction"),
  "extracted" followed by text, proof, paper, formula(s), version or PDF, and "the text we
  have of".

Each hit is reported with its file and line.  README.md is maintained separately and may
fail this test while it is being rewritten.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_SESSION_OK = re.compile(
    r"(pytest|jupyter|ipython|kernel|interactive|python|browser)\s+sessions?\b"
    r"|\bsession-scoped\b|scope\s*=\s*[\"']session[\"']", re.IGNORECASE)
_RULES = {
    "session": re.compile(r"\bpre-session\b|\bsessions?\b", re.IGNORECASE),
    "issue": re.compile(
        r"\bissues?\s*#?\s*\d+|\bissue['\u2019]s\b|\bissues?\s+targets?\b"
        r"|\btarget\s+of\s+(the|this|that)\s+issue\b", re.IGNORECASE),
    "agent": re.compile(
        r"\b(sub-?)?agents?\b|\bengineers?\b|\bhelpers?['\u2019]s\b|\bby\s+a\s+helper\b"
        r"|\bhelper\s+(session|agent)s?\b"
        r"|\b(a|the|another|our)\s+helpers?\s+(wrote|derived|found|ran|checked|reported|said"
        r"|asked|started)\b", re.IGNORECASE),
    "extraction": re.compile(
        r"(?<!tar )(?<!zip )(?<!archive )(?<!feature )\bextractions?\b"
        r"|\bextracted\s+(text|proof|paper|formulas?|version|pdf)\b"
        r"|\bthe\s+text\s+we\s+have\s+of\b", re.IGNORECASE),
}


def _hits(text):
    """(rule, matched text, line offset) for every rule broken in ``text``."""
    out = []
    for name, rule in _RULES.items():
        for m in rule.finditer(text):
            if name == "session":
                line_start = text.rfind("\n", 0, m.start()) + 1
                line_end = text.find("\n", m.end())
                line = text[line_start:line_end if line_end >= 0 else None]
                if _SESSION_OK.search(line) and m.group(0).lower() != "pre-session":
                    continue
            out.append((name, m.group(0), text.count("\n", 0, m.start())))
    return out


def _python_public_text(path):
    """(first line, text) of every docstring and comment of a Python file."""
    source = path.read_text(encoding="utf-8")
    pieces = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None),
                                                                     ast.Constant) \
                    and isinstance(body[0].value.value, str):
                pieces.append((body[0].lineno, body[0].value.value))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            pieces.append((tok.start[0], tok.string))
    return pieces


def _public_files():
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    files += sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "notebooks").glob("*.md"))
    return [f for f in files if f.is_file()]


def _violations(paths):
    found = []
    for path in paths:
        rel = path.relative_to(ROOT)
        if path.suffix == ".py":
            pieces = _python_public_text(path)
        else:
            pieces = [(1, path.read_text(encoding="utf-8"))]
        for first_line, text in pieces:
            for name, word, offset in _hits(text):
                found.append(f"{rel}:{first_line + offset}: {name}: {word!r}")
    return found


def test_the_rules_catch_what_they_should_and_spare_the_rest():
    bad = ["measured this session", "in the previous session", "session 3", "pre-session kernel",
           "this project's sessions", "issue 12's target", "Against issue #13", "the issue's target",
           "issues 12 and 13", "a helper wrote this", "the helper's report", "another engineer",
           "agents", "lost in the text extraction", "the extracted proof", "the text we have of"]
    good = ["a helper for tests", "Helpers every token kernel shares", "helper function",
            "open an issue on GitHub", "the issue tracker", 'scope="session"',
            "a pytest session", "an interactive session", "extract only the expected files",
            "tar extraction", "the tokens were extracted from the batch"]
    for text in bad:
        assert _hits(text), text
    for text in good:
        assert not _hits(text), (text, _hits(text))


@pytest.mark.parametrize("path", _public_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_does_not_speak_of_how_it_was_made(path):
    found = _violations([path])
    assert not found, "\n".join(found)


def test_docstrings_and_comments_do_not_speak_of_how_they_were_made():
    found = _violations(sorted((ROOT / "src").rglob("*.py")))
    assert not found, "\n".join(found)
