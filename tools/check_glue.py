"""Check the book's glued numbers against executed notebooks, without building the book.

``python tools/check_glue.py EXECUTED_DIR [PAGE.md ...]`` reads every ``{glue:...}`` role of
the pages (default: ``notebooks/*.md`` and ``book/*.md``), finds the key in the executed
notebook it names (the page itself for a notebook, ``../notebooks/NAME.ipynb::KEY`` for a
chapter) and applies the role's format to the glued value, as myst-nb will.  It prints one
line per problem (a missing notebook or key, a format that fails) and exits 1 if there is
any.  ``make book`` finds the same problems (its build treats warnings as errors) but only
after executing and rendering everything; this takes a second.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROLE = re.compile(r"\{glue(?::(text|md|any))?\}`([^`]+)`")


def glued(ipynb: Path) -> dict[str, str]:
    """``{key: text}`` of the values glued in an executed notebook (the Markdown of a glued
    Markdown object, else the plain text)."""
    nb = json.loads(ipynb.read_text())
    out = {}
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            book = output.get("metadata", {}).get("scrapbook")
            if book:
                data = output.get("data", {})
                prefix = book.get("mime_prefix", "")
                # A Markdown object's plain text is only its repr: read its Markdown.
                out[book["name"]] = data.get(prefix + "text/markdown", data.get(prefix + "text/plain", ""))
    return out


def roles(page: Path):
    """``(line, kind, target)`` of every glue role of a page (code cells included)."""
    for n, line in enumerate(page.read_text().splitlines(), 1):
        for match in ROLE.finditer(line):
            yield n, match.group(1) or "any", match.group(2)


def check_format(text: str, fmt: str) -> str | None:
    """The error of formatting a glued plain text with ``fmt`` as myst-nb does, or None."""
    from myst_nb.core.variables import format_plain_text

    try:
        format_plain_text(text, fmt)
    except (ValueError, TypeError) as err:
        return f"format {fmt!r} of {text!r}: {err}"
    return None


def check(executed: Path, pages) -> list[str]:
    problems, cache = [], {}

    def keys_of(name: str):
        if name not in cache:
            path = executed / f"{name}.ipynb"
            cache[name] = glued(path) if path.exists() else None
        return cache[name]

    for page in pages:
        for line, kind, target in roles(page):
            where = f"{page.relative_to(ROOT)}:{line}"
            if "::" in target:
                doc, rest = target.split("::", 1)
                name = Path(doc).stem
                if kind != "text":
                    problems.append(f"{where}: {target!r}: only {{glue:text}} can quote another "
                                    "page")
                    continue
                if ":" not in rest:
                    # myst-nb splits the target at its last ':': without a format it would
                    # read 'PAGE.ipynb:' as the key.
                    problems.append(f"{where}: {target!r}: a role that quotes another page "
                                    "needs a format (':s' for text)")
                    continue
            else:
                name, rest = (page.stem if page.parent.name == "notebooks" else None), target
            key, _, fmt = rest.partition(":")
            if name is None:
                problems.append(f"{where}: {target!r}: a chapter must name the notebook (PAGE.ipynb::KEY)")
                continue
            values = keys_of(name)
            if values is None:
                problems.append(f"{where}: no executed notebook {name}.ipynb in {executed}")
            elif key not in values:
                problems.append(f"{where}: key {key!r} is not glued in {name}.ipynb")
            elif kind == "md":
                # Glued Markdown is read as CommonMark unless the role asks for MyST, and
                # CommonMark leaves $...$ as dollar signs.
                if "$" in values[key] and fmt != "myst":
                    problems.append(f"{where}: {key!r} holds math: write {{glue:md}}`{key}:myst`")
            elif fmt:
                error = check_format(values[key], fmt)
                if error:
                    problems.append(f"{where}: {error}")
    return problems


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__)
        return 2
    executed = Path(args[0])
    pages = [Path(p).resolve() for p in args[1:]] or sorted(
        [*(ROOT / "notebooks").glob("*.md"), *(ROOT / "book").glob("*.md")])
    problems = check(executed, pages)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
