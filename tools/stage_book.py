"""Stage the book for an offline build, and the small Sphinx extension it uses.

``python tools/stage_book.py STAGING_DIR`` makes the math of the
book render without the internet: it copies a locally installed MathJax 3 into
``STAGING_DIR/_mathjax/mathjax``.  ``_config.yml`` lists ``_mathjax`` in Sphinx's
``html_static_path``, so the site serves it as ``_static/mathjax``, and points
``mathjax_path`` there.  (The folder is not called ``_static``: Jupyter Book would
add a ``<script>`` tag for every ``.js`` file in a source folder of that name.)
MathJax comes from npm's ``mathjax`` package, which ``make book`` installs into the
ignored folder ``_build/node_modules``; it is never copied into git.

Given ``--executed DIR``, the command also lays out the whole source tree of the book
in ``STAGING_DIR``: the narrative pages of ``book/``, the configuration, the
bibliography and the notebooks that papermill executed into ``DIR`` (only those whose
text source still exists, with their links to sibling ``name.md`` notebooks pointed
at the executed ``name.ipynb``).  It copies only what changed and keeps modification
times, so that Sphinx's incremental build sees an unchanged tree as unchanged.

"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

#: the MathJax 3 component the book loads (TeX and MathML input, CommonHTML output).
MATHJAX_ENTRY = "tex-mml-chtml.js"
#: the folders of ``mathjax/es5`` that the entry point may load lazily (fonts,
#: TeX extensions, the context menu, accessibility and its speech-rule engine).
MATHJAX_DIRS = ("a11y", "adaptors", "input", "output", "sre", "ui")
#: the staging folder that Sphinx copies into the site's ``_static`` (see ``_config.yml``).
STATIC_DIR = "_mathjax"
#: where ``make book`` installs npm's ``mathjax`` package.
DEFAULT_NODE_MODULES = Path("_build") / "node_modules"
#: the name under which Sphinx loads the book's extension, and where it lives in the tree.
EXTENSION_NAME = "companion_ext"
EXTENSION_SOURCE = Path(__file__).resolve().parents[1] / "book" / "_ext" / f"{EXTENSION_NAME}.py"


# --------------------------------------------------------------------------
# File mirroring that keeps modification times (an rsync -a --delete in Python)
# --------------------------------------------------------------------------

def _same_file(src: Path, dst: Path) -> bool:
    try:
        a, b = src.stat(), dst.stat()
    except FileNotFoundError:
        return False
    return a.st_size == b.st_size and int(a.st_mtime) == int(b.st_mtime)


def copy_if_changed(src: Path, dst: Path) -> bool:
    """Copy ``src`` onto ``dst`` (with its mtime) unless they already match."""
    if _same_file(src, dst):
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    shutil.copy2(src, tmp)
    os.replace(tmp, dst)
    return True


def _files(src: Path, keep=lambda rel: True) -> dict[Path, Path]:
    """``{relative path: path}`` of the files under ``src`` that ``keep`` accepts."""
    found = {}
    if src.is_dir():
        for path in sorted(src.rglob("*")):
            rel = path.relative_to(src)
            if path.is_dir() or any(part.startswith(".") or part == "__pycache__"
                                    for part in rel.parts) or not keep(rel):
                continue
            found[rel] = path
    return found


def sync(files: dict[Path, Path], dst: Path) -> int:
    """Make ``dst`` hold exactly ``files`` (``{relative path: source}``), like rsync -a --delete.

    A file is copied only when its size or mtime differ; files of ``dst`` not in
    ``files`` are removed.  Returns the number of files changed.
    """
    changed = sum(copy_if_changed(src, dst / rel) for rel, src in files.items())
    if dst.is_dir():
        for path in sorted(dst.rglob("*"), reverse=True):
            rel = path.relative_to(dst)
            if path.is_file() and rel not in files:
                path.unlink()
                changed += 1
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
    return changed


def mirror(src: Path, dst: Path, keep=lambda rel: True) -> int:
    """Make ``dst`` a copy of the files of ``src`` that ``keep(relative path)`` accepts."""
    return sync(_files(src, keep), dst)


# --------------------------------------------------------------------------
# MathJax
# --------------------------------------------------------------------------

def find_mathjax(explicit: str | os.PathLike | None = None, root: Path | None = None) -> Path:
    """Return the ``es5`` folder of an installed MathJax 3, or raise saying how to get one."""
    root = Path.cwd() if root is None else Path(root)
    candidates = []
    if explicit:
        candidates.append(Path(explicit))
    if os.environ.get("MATHJAX_DIR"):
        candidates.append(Path(os.environ["MATHJAX_DIR"]))
    candidates += [root / DEFAULT_NODE_MODULES / "mathjax", Path.cwd() / DEFAULT_NODE_MODULES / "mathjax"]
    for cand in candidates:
        for es5 in (cand, cand / "es5"):
            if (es5 / MATHJAX_ENTRY).is_file():
                return es5.resolve()
    tried = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"no MathJax 3 found (looked for {MATHJAX_ENTRY} under {tried}). "
        "Install it with `npm install --prefix _build --no-save mathjax@3` "
        "(make book does this), or point --mathjax / MATHJAX_DIR at a mathjax folder.")


def stage_mathjax(staging: Path, es5: Path) -> int:
    """Copy the parts of MathJax that the book loads into ``staging/_mathjax/mathjax``."""
    def keep(rel: Path) -> bool:
        return rel.as_posix() == MATHJAX_ENTRY or rel.parts[0] in MATHJAX_DIRS
    return mirror(es5, staging / STATIC_DIR / "mathjax", keep=keep)


# --------------------------------------------------------------------------
# The whole staging tree
# --------------------------------------------------------------------------

def stage_sources(staging: Path, root: Path, executed: Path) -> int:
    """Lay out the book's sources under ``staging``; return the number of files changed."""
    changed = 0
    for name in ("_config.yml", "_toc.yml", "references.bib"):
        if (root / name).is_file():
            changed += copy_if_changed(root / name, staging / name)
    # Narrative pages and their images; scripts that draw the images stay behind.
    changed += mirror(root / "book", staging / "book", keep=lambda rel: rel.suffix != ".py")
    # Executed notebooks whose text source still exists (papermill's half-written
    # files are skipped), and the images that the notebooks' markdown may reference.
    def executed_notebook(rel: Path) -> bool:
        return (len(rel.parts) == 1 and rel.suffix == ".ipynb"
                and not rel.name.endswith((".in.ipynb", ".tmp.ipynb"))
                and (root / "notebooks" / f"{rel.stem}.md").is_file())
    notebooks = _files(executed, executed_notebook)
    names = {rel.stem for rel in notebooks}
    images = {Path("images") / rel: path
              for rel, path in _files(root / "notebooks" / "images").items()}
    # Notebooks first, with their links to sibling notebooks pointed at the executed
    # copies; then the images; then everything else in staging/notebooks goes.
    for rel, path in notebooks.items():
        changed += stage_notebook(path, staging / "notebooks" / rel, names)
    changed += sync({**{rel: staging / "notebooks" / rel for rel in notebooks}, **images},
                    staging / "notebooks")
    return changed


_MD_LINK = re.compile(r"\]\((?P<target>[A-Za-z0-9_./-]+?)\.md(?P<anchor>#[^)\s]*)?\)")


def link_notebooks(text: str, names: set[str]) -> str:
    """Point markdown links ``[..](name.md)`` between notebooks at ``name.ipynb``.

    Authors link the text notebooks (``fig7_persistence.md``); the book is built from
    their executed ``.ipynb`` copies, where such a link would have no target.
    """
    def repl(match):
        target = match.group("target")
        if Path(target).name in names and "/" not in target.removeprefix("./"):
            return f"]({target}.ipynb{match.group('anchor') or ''})"
        return match.group(0)
    return _MD_LINK.sub(repl, text)


def stage_notebook(src: Path, dst: Path, names: set[str]) -> int:
    """Copy one executed notebook, with :func:`link_notebooks` applied to its markdown
    cells and to the Markdown its code displayed, and papermill's injected-parameters
    cell tagged ``remove-cell`` (hidden from the page).

    The copy keeps the source's mtime, so an unchanged notebook looks unchanged to Sphinx.
    """
    import json

    if _same_mtime(src, dst):
        return 0
    nb = json.loads(src.read_text(encoding="utf-8"))
    def relink(text):
        return link_notebooks("".join(text) if isinstance(text, list) else text, names)

    for cell in nb.get("cells", []):
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        # papermill's cell of injected values (scale = "smoke", ...) is build plumbing;
        # the page shows the parameters cell with its comments instead.
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
        if cell.get("cell_type") == "markdown":
            cell["source"] = relink(cell.get("source", ""))
        for output in cell.get("outputs", []):  # Markdown that the code displayed
            data = output.get("data", {})
            if "text/markdown" in data:
                data["text/markdown"] = relink(data["text/markdown"])
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    tmp.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    stat = src.stat()
    os.utime(tmp, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(tmp, dst)
    return 1


def _same_mtime(src: Path, dst: Path) -> bool:
    try:
        return src.stat().st_mtime_ns == dst.stat().st_mtime_ns
    except FileNotFoundError:
        return False


def stage_extension(staging: Path) -> int:
    """Copy the extension to ``staging/_ext`` where ``_config.yml`` loads it."""
    return copy_if_changed(EXTENSION_SOURCE, staging / "_ext" / f"{EXTENSION_NAME}.py")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/stage_book.py",
        description="Stage the book's sources and a local MathJax so that the site builds "
                    "and reads offline.")
    parser.add_argument("staging", help="the folder jupyter-book builds from (e.g. _build/src)")
    parser.add_argument("--executed", default=None,
                        help="folder of notebooks executed by papermill; when given, the whole "
                             "source tree (book/, configuration, notebooks) is staged too")
    parser.add_argument("--root", default=".", help="repository root (default: .)")
    parser.add_argument("--mathjax", default=None,
                        help="a mathjax package folder (default: _build/node_modules/mathjax)")
    args = parser.parse_args(argv)
    staging, root = Path(args.staging), Path(args.root)
    staging.mkdir(parents=True, exist_ok=True)
    try:
        es5 = find_mathjax(args.mathjax, root)
    except FileNotFoundError as err:
        print(f"stage_book: {err}", file=sys.stderr)
        return 1
    changed = stage_extension(staging)
    if changed:  # a new version of the extension: stage the notebooks afresh
        for path in (staging / "notebooks").glob("*.ipynb"):
            path.unlink()
    if args.executed is not None:
        changed += stage_sources(staging, root, Path(args.executed))
    stale = staging / "_static" / "mathjax"  # where an older layout put it
    if stale.is_dir():
        shutil.rmtree(stale)
    changed += stage_mathjax(staging, es5)
    print(f"stage_book: staged {staging} ({changed} file(s) changed; MathJax from {es5})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
