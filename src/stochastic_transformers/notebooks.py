"""Execute one notebook of the book with papermill, from its jupytext (MyST) text.

The notebooks are kept as MyST text (``notebooks/*.md``); papermill reads only the
``.ipynb`` format, so :func:`execute` converts the text with jupytext into a notebook
object and hands that object to :func:`papermill.execute_notebook`, which injects the
parameters after the notebook's ``parameters`` cell.  The shell equivalent is::

    jupytext --to ipynb -o - notebooks/fig3_phase_transition.md \\
        | papermill --cwd notebooks -p scale smoke - out/fig3.ipynb

Parameters are read like ``reproduce --set``: typed after the figure's knob at that
scale (a list ``4,6,8``, a range ``0:4:0.5``), or kept as text for the notebook's
other parameters; an unknown name is refused before anything runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .figures.base import repo_root

__all__ = ["available", "find", "parameters_of", "parse_parameters", "execute", "glue_key",
           "glue_values"]

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=", re.MULTILINE)


def notebooks_dir() -> Path:
    """The folder of the text notebooks (in the source tree of an editable install)."""
    return repo_root() / "notebooks"


def available() -> dict[str, Path]:
    """``{id: path}``: every text notebook, named by its figure id where it has one
    (``fig3_phase_transition.md`` is ``fig3``), else by its file name."""
    from . import figures

    fig_ids = set(figures.FIGURES)
    found = {}
    for path in sorted(notebooks_dir().glob("*.md")):
        head = path.stem.split("_")[0]
        found[head if head in fig_ids else path.stem] = path
    return found


def find(nb_id: str) -> Path:
    """Path of notebook ``nb_id`` (a figure id or a file name without ``.md``)."""
    nbs = available()
    if nb_id in nbs:
        return nbs[nb_id]
    for path in nbs.values():
        if path.stem == nb_id:
            return path
    raise ValueError(f"notebook id must be one of {', '.join(nbs)}; got {nb_id!r}")


def _read(path: Path):
    import jupytext

    return jupytext.read(path)


def parameters_of(path: Path) -> dict[str, str]:
    """Names assigned in the notebook's ``parameters`` cell, with their source text."""
    nb = _read(path)
    for cell in nb.cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            lines = cell.source.splitlines()
            out = {}
            for line in lines:
                match = _ASSIGN.match(line)
                if match:
                    out[match.group(1)] = line.split("=", 1)[1].split("#")[0].strip()
            return out
    raise ValueError(f"{path.name} has no cell tagged 'parameters'")


def parse_parameters(path: Path, pairs, scale: str = "quick") -> dict:
    """``[(key, text), ...]`` -> typed papermill parameters, ``scale`` included.

    A key that is a knob of the notebook's figure is read like ``reproduce --set`` and
    checked, with the scale's other knobs, by the figure's knob schema
    (:meth:`.figures.spec.Figure.knobs`, what its ``compute`` runs first); any other key
    must be a name of the notebook's parameters cell and is read as a Python literal when
    it is one (a number, ``True``, ``None``, a quoted string), else kept as text.
    """
    import ast

    from . import figures
    from ._validation import SCALE_NAMES, check_choice
    from .figures.knobs import parse_settings

    check_choice("scale", scale, SCALE_NAMES)
    names = parameters_of(path)
    nb_id = next((k for k, v in available().items() if v == path), path.stem)
    knobs = figures.settings(nb_id, scale) if nb_id in figures.FIGURES else {}
    params = {"scale": scale}
    for key, text in pairs:
        if key == "scale":
            raise ValueError("give the scale with --scale, not -p scale")
        if key not in names:
            raise ValueError(f"-p {key}: not a parameter of {path.name}; it takes "
                             f"{', '.join(sorted(names))}")
        if key in knobs:
            value = parse_settings([f"{key}={text}"], knobs)[key]
            params[key] = list(value) if isinstance(value, tuple) else value
        else:
            try:
                params[key] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                params[key] = text
    given = {k: v for k, v in params.items() if k in knobs}
    if given:
        figures.get(nb_id).knobs(scale, given)
    return params


def execute(path: Path, out_dir, parameters: dict, *, kernel: str = "python3") -> Path:
    """Run the notebook at ``path`` with ``parameters``; write ``out_dir/<id>.ipynb``.

    The notebook runs in the notebooks folder (as in the book, so relative paths such as
    ``../_build/cache`` mean the same); the output is written atomically.  An ``out_dir``
    that cannot take the file is refused (ValueError) before the notebook runs.
    """
    import papermill

    from .io import atomic_path, writable_folder

    writable_folder(out_dir, "out_dir")
    nb = _read(path)
    nb_id = next((k for k, v in available().items() if v == path), path.stem)
    out = Path(out_dir) / f"{nb_id}.ipynb"
    with atomic_path(out) as tmp:
        tmp_ipynb = tmp.with_suffix(".ipynb")
        try:
            papermill.execute_notebook(nb, str(tmp_ipynb), parameters=parameters,
                                       cwd=str(path.parent), kernel_name=kernel,
                                       progress_bar=False)
            tmp_ipynb.replace(tmp)
        finally:
            tmp_ipynb.unlink(missing_ok=True)
    return out


# ----------------------------------------------------------------------------- numbers in prose
def glue_key(*parts) -> str:
    """The glue key of a value: its parts joined by dots (``fig7.per_beta.4.p_final``).

    A number that names a cell (a beta, a dimension) is written the shortest way that
    reads back to it (``4.0`` -> ``4``, ``0.5`` -> ``0.5``); a tuple is joined by ``-``.
    Keys cannot contain ``:``, which separates a key from its format in ``{glue:text}``.
    """
    def part(p):
        if isinstance(p, tuple):
            return "-".join(part(q) for q in p)
        if isinstance(p, (float, np.floating)):
            return f"{float(p):g}"
        if isinstance(p, (int, np.integer, bool, np.bool_)):
            return str(int(p)) if not isinstance(p, (bool, np.bool_)) else str(bool(p))
        return str(p)

    key = ".".join(part(p) for p in parts)
    if ":" in key or "`" in key or not key:
        raise ValueError(f"glue key {key!r}: must be non-empty, without ':' or '`'")
    return key


def _plain(value):
    """A NumPy scalar as the Python number it holds, so that its plain text is the number
    (NumPy 2 prints ``np.float64(1.5)``, which ``{glue:text}`` cannot format)."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def glue_values(prefix: str, values: dict, *, _glue=None) -> dict[str, object]:
    """Glue every scalar of ``values`` for the page's prose; return ``{key: value}``.

    The sentences of a page that quote a computed number take it with
    ``{glue:text}`KEY:FORMAT``` (``{glue:text}`fig3.max_abs_z:.1f```), and a chapter takes
    it from the figure's page with ``{glue:text}`../notebooks/PAGE.ipynb::KEY:FORMAT```,
    so that a rerun at another scale never leaves a stale number in the text.  Nested
    dictionaries (a figure's ``summary()``) are glued under dotted keys (:func:`glue_key`);
    lists and tuples by position; ``None`` as the text ``none``; a
    :class:`IPython.display.Markdown` object as itself (``{glue:md}`KEY```, same page
    only).  Nothing is displayed.
    """
    if _glue is None:
        from myst_nb import glue as _glue
    glued: dict[str, object] = {}

    def walk(parts, value):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(parts + (k,), v)
        elif isinstance(value, (list, tuple)) and not (parts and isinstance(parts[-1], tuple)):
            for i, v in enumerate(value):
                walk(parts + (i,), v)
        elif isinstance(value, np.ndarray):
            walk(parts, value.tolist())
        else:
            glued[glue_key(prefix, *parts)] = "none" if value is None else _plain(value)

    walk((), values)
    for key, value in glued.items():
        _glue(key, value, display=False)
    return glued


def glue_page(prefix: str, stats: dict, *, source: str, elapsed: float | None = None,
              markdown=None, _glue=None) -> dict[str, object]:
    """Glue everything a figure page quotes, in one call: the page's only hidden code.

    ``stats`` (the figure's ``summary()``) goes through :func:`glue_values`; ``source`` (the
    sentence :meth:`~.figures.spec.Figure.obtain` returns) is glued as ``PREFIX.source`` and
    ``elapsed`` (seconds the page spent obtaining its dataset, if the page says it) as
    ``PREFIX.elapsed_text`` ("loaded, not recomputed" for a committed result); ``markdown`` maps keys to Markdown
    text (data-dependent phrases that a figure module builds from ``stats``), glued as
    ``{glue:md}`` values under ``PREFIX.KEY``.
    """
    from IPython.display import Markdown

    if _glue is None:
        from myst_nb import glue as _glue
    committed = source.startswith("the committed")
    page = {"source": source}
    if elapsed is not None:
        page["elapsed_text"] = Markdown(
            "loaded, not recomputed" if committed else
            f"computed in {elapsed:.0f} s here" if elapsed >= 1 else "computed in under 1 s here")
    page.update({key: Markdown(text) for key, text in (markdown or {}).items()})
    return {**glue_values(prefix, stats, _glue=_glue), **glue_values(prefix, page, _glue=_glue)}
