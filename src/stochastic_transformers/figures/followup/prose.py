"""Numbers in the words of the follow-up's pages: a list as a phrase, a signed number."""

from __future__ import annotations


def listed(values, fmt: str) -> str:
    """``'a, b and c'`` from numbers, each written with ``fmt``."""
    words = [format(v, fmt) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def signed(x: float, digits: int = 2) -> str:
    """``x`` with its sign and ``digits`` decimals, never ``-0.0`` (a value that rounds to
    zero is written ``+0.0``)."""
    return f"{round(float(x), digits) + 0.0:+.{digits}f}"
