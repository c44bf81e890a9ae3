"""The words of the figure pages, written once: numbers in phrases, a verdict from its
checks, and a Markdown table.  Every figure module and the costs page use these."""

from __future__ import annotations

import math

__all__ = ["listed", "signed", "verdict", "markdown_table"]


def listed(values, fmt: str) -> str:
    """``'a, b and c'`` from numbers, each written with ``fmt``."""
    words = [format(v, fmt) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def signed(x: float, digits: int = 2) -> str:
    """``x`` with its sign and ``digits`` decimals, never ``-0.0`` (a value that rounds to
    zero is written ``+0.0``)."""
    return f"{round(float(x), digits) + 0.0:+.{digits}f}"


def verdict(checks, words=("Confirmed", "Partly confirmed", "Not confirmed")) -> str:
    """A page's verdict from ``[(holds, what holds, what does not), ...]``: the first of
    ``words`` if every check holds, the second if some do, the third if none, then each
    finding, e.g. ``"Partly confirmed: a; not b."``."""
    held = [bool(ok) for ok, _, _ in checks]
    word = words[0] if all(held) else words[1] if any(held) else words[2]
    return f"{word}: " + "; ".join(yes if ok else no for ok, yes, no in checks) + "."


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return str(value).replace("|", "\\|")


def markdown_table(head, rows, *, caption: str = "", numeric: bool = False) -> str:
    """A Markdown table: ``head`` the column titles, ``rows`` lists of cells (None and
    non-finite numbers show as a dash); ``numeric`` right-aligns every column after the
    first; ``caption`` is a line above the table."""
    rule = "|:--" + "|--:" * (len(head) - 1) + "|" if numeric else "|" + "---|" * len(head)
    lines = [caption, ""] if caption else []
    lines += ["| " + " | ".join(map(str, head)) + " |", rule]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
