"""Words of open prose on the book's pages, counted from their MyST sources.

    python tools/page_words.py [PAGE.md ...]     (default: notebooks/*.md and book/*.md)

Open prose is what a reader meets without unfolding anything: the Markdown text outside
code cells, display and inline mathematics, tables, figure captions, directives' options
and folded blocks (``:class: dropdown`` admonitions, ``{dropdown}`` and ``{toggle}``
blocks).  A glue role or a cross-reference counts as one word.  Prints one line a page
with its count and the limit (700 words for a figure page in notebooks/, 3,000 for a
chapter in book/) and exits 1 if a page is over.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURE_PAGE_MAX = 700
CHAPTER_MAX = 3000

_FENCE = re.compile(r"^(`{3,}|:{3,})(.*)$")
_ROLE = re.compile(r"\{[a-z:]+\}`[^`]*`")
_INLINE_MATH = re.compile(r"\$[^$\n]+\$")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def _blocks(lines):
    """Yield the lines of open prose: skip front matter, fenced code and folded blocks,
    directive options, display maths, tables and targets."""
    i, n = 0, len(lines)
    if lines and lines[0].strip() == "---":
        i = next((k + 1 for k in range(1, n) if lines[k].strip() == "---"), n)
    while i < n:
        line = lines[i]
        fence = _FENCE.match(line.strip())
        if fence:
            mark, rest = fence.group(1), fence.group(2)
            j = i + 1
            depth = 1
            body = []
            while j < n and depth:
                inner = _FENCE.match(lines[j].strip())
                if inner and inner.group(1).startswith(mark[0]) and len(inner.group(1)) >= len(mark):
                    depth += 1 if inner.group(2).strip() else -1
                    if not depth:
                        break
                body.append(lines[j])
                j += 1
            folded = "dropdown" in " ".join(body[:4]) or any(
                k in rest for k in ("{dropdown}", "{toggle}", "{code-cell}", "{math}",
                                    "{list-table}", "{table}", "{figure}", "{glue:figure}",
                                    "{eval-rst}", "{bibliography}"))
            if not folded and rest.strip().startswith("{"):
                # an open admonition (note, warning, proof...): its body is prose
                yield from _blocks([l for l in body if not l.strip().startswith(":")])
            elif not rest.strip() or not rest.strip().startswith("{"):
                pass  # plain fenced code
            i = j + 1
            continue
        stripped = line.strip()
        if stripped.startswith("$$"):
            j = i
            if stripped == "$$" or not (len(stripped) > 2 and stripped.endswith("$$")):
                j = i + 1   # a display block over several lines: skip to its closing $$
                while j < n and not (lines[j].strip().startswith("$$") or lines[j].strip().endswith("$$")):
                    j += 1
            i = j + 1
            continue
        if line.lstrip().startswith("|") or re.match(r"^\(.*\)=\s*$", line.strip()):
            i += 1
            continue
        yield line
        i += 1


def words(text: str) -> int:
    """Words of open prose of a MyST page."""
    count = 0
    for line in _blocks(text.splitlines()):
        line = _ROLE.sub(" X ", line)
        line = _INLINE_MATH.sub(" X ", line)
        line = _LINK.sub(r"\1", line)
        line = re.sub(r"^#+\s*", "", line)
        count += len(re.findall(r"[A-Za-z0-9][\w'’-]*", line))
    return count


def main(argv=None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])] or sorted(
        list((ROOT / "notebooks").glob("*.md")) + list((ROOT / "book").glob("*.md")))
    over = 0
    for path in paths:
        limit = FIGURE_PAGE_MAX if path.parent.name == "notebooks" else CHAPTER_MAX
        n = words(path.read_text())
        flag = "OVER" if n > limit else ""
        over += bool(flag)
        print(f"{n:6d} / {limit:5d}  {path.relative_to(ROOT) if path.is_absolute() else path} {flag}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
