"""Words the follow-up's pages share: a list of numbers as a phrase, and the run a page shows."""

from __future__ import annotations


def listed(values, fmt: str) -> str:
    """``'a, b and c'`` from numbers, each written with ``fmt``."""
    words = [format(v, fmt) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def run_name(source: str, ds) -> str:
    """The run a page shows, for its prose: the committed paper-scale run, or the run of this
    build at the scale shown (``source``: the sentence of :meth:`..spec.Figure.obtain`)."""
    if source.startswith("the committed paper-scale"):
        return "the committed paper-scale run"
    return f"the {ds.attrs['shown_scale']}-scale run of this build"
