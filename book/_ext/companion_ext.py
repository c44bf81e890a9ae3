"""The book's local Sphinx extension ``companion_ext``: ``tools/stage_book.py`` copies this
file into ``STAGING_DIR/_ext``, where ``_config.yml`` loads it (it imports nothing from
the library, so the build never pays for numba).  It adds

* the role ``{nb}`Title <notebook_name>``` that links a narrative page to a figure
  notebook, and prints the title with "(notebook not in this build yet)" while that
  notebook has not landed, instead of failing the ``-W`` build (a notebook that
  exists but is missing from ``_toc.yml`` is a warning, hence an error);
* unnumbered figures: a figure with ``:figclass: unnumbered`` is not numbered by
  Sphinx, so that the paper's own figure numbers, given in the captions, are the only
  ones a reader sees;
* a check, after the HTML is written, that no page loads a script, a style sheet,
  an image or a font from another host; the build fails if one does;
* the removal of sphinx-thebe's scripts (Jupyter Book always loads it; thebe is off
  here) and of scripts that a page would otherwise include twice;
* figures that open full size on a click: after the HTML is written, every image of the
  book that no link holds yet is wrapped in a link to its own file.
"""

from __future__ import annotations

import re
from pathlib import Path

#: attributes of tags that make a browser fetch something while rendering a page.
_LOADING_ATTR = re.compile(
    r"<(script|link|img|iframe|source|video|audio|embed|object)\b[^>]*?"
    r"\b(src|href|data)\s*=\s*[\"']((?:https?:)?//[^\"']+)[\"']", re.IGNORECASE)
_CSS_URL = re.compile(r"url\(\s*[\"']?((?:https?:)?//[^)\"']+)", re.IGNORECASE)
_CSS_IMPORT = re.compile(r"@import\s+[\"']((?:https?:)?//[^\"']+)", re.IGNORECASE)


def external_loads(html: str) -> list[str]:
    """The external addresses a page would load by itself (links a reader clicks excluded)."""
    found = []
    for match in _LOADING_ATTR.finditer(html):
        tag = match.group(0)
        if match.group(1).lower() == "link" and re.search(
                r"rel\s*=\s*[\"'](canonical|alternate|author|license|help|search|next|prev)\b",
                tag, re.IGNORECASE):
            continue  # a <link> that names a page is not a load
        found.append(match.group(3))
    found += _CSS_URL.findall(html) + _CSS_IMPORT.findall(html)
    return sorted(set(found))


def _nb_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    from docutils import nodes
    from sphinx import addnodes
    from sphinx.util.nodes import split_explicit_title

    has_title, title, target = split_explicit_title(text)
    target = target.strip()
    if not has_title:
        title = target
    node = addnodes.pending_xref(rawtext, refdomain="std", reftype="doc",
                                 reftarget=f"/notebooks/{target}", refexplicit=True,
                                 refwarn=True, companion_optional_notebook=target)
    node += nodes.inline(rawtext, title, classes=["xref", "std", "std-doc"])
    return [node], []


def _missing_notebook(app, env, node, contnode):
    """A notebook that has not landed yet reads as plain text, not as a broken link."""
    from docutils import nodes

    target = node.get("companion_optional_notebook")
    if not target:
        return None
    if (Path(app.srcdir) / "notebooks" / f"{target}.ipynb").exists():
        from sphinx.util import logging

        logging.getLogger(__name__).warning(
            f"notebook {target!r} exists but _toc.yml does not list it: un-comment its "
            "line there", location=node, type="companion", subtype="toc")
    text = nodes.inline("", "", classes=["companion-missing-notebook"])
    text += nodes.emphasis("", contnode.astext())
    text += nodes.Text(" (notebook not in this build yet)")
    return text


def _unnumber_figures(app, doctree):
    """Figures with the class ``unnumbered`` keep the paper's number in their caption.

    Sphinx numbers every figure that has an id.  The ids are set aside when the page is
    read, so that numbering skips the figure, and put back before it is written.
    """
    from docutils import nodes

    for figure in doctree.findall(nodes.figure):
        if "unnumbered" in figure.get("classes", []) and figure["ids"]:
            figure["companion_ids"] = list(figure["ids"])
            figure["ids"] = []


def _restore_figure_ids(app, doctree, docname):
    from docutils import nodes

    for figure in doctree.findall(nodes.figure):
        if figure.get("companion_ids"):
            figure["ids"] = list(figure["companion_ids"])


def _prune_scripts(app, pagename, templatename, context, doctree):
    """Drop thebe's scripts (thebe is off, and they name a CDN) and duplicated scripts.

    Jupyter Book always loads sphinx-thebe, which adds its inline configuration again every
    time documents are read; the second copy redeclares a ``const`` and raises a script
    error in every page.
    """
    scripts = context.get("script_files")
    if not scripts:
        return
    kept, seen = [], set()
    for js in scripts:
        filename = str(getattr(js, "filename", js) or "")
        attributes = dict(getattr(js, "attributes", {}) or {})
        body = str(attributes.get("body", ""))
        if filename.endswith("sphinx-thebe.js") or "thebe@" in filename or "THEBE_JS_URL" in body:
            continue
        key = (filename, repr(sorted(attributes.items())))
        if key in seen:
            continue
        seen.add(key)
        kept.append(js)
    scripts[:] = kept


def _check_offline(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    problems = []
    for path in sorted(out.rglob("*.html")) + sorted((out / "_static").rglob("*.css")):
        ext = external_loads(path.read_text(encoding="utf-8", errors="replace"))
        problems += [f"{path.relative_to(out)}: {url}" for url in ext]
    if problems:
        from sphinx.errors import ExtensionError

        shown = "\n  ".join(problems[:20])
        raise ExtensionError(
            f"{len(problems)} resource(s) would be loaded from the internet; the book must "
            f"read offline:\n  {shown}")


#: The book's own style sheet, written into the site's _static folder.  A display equation
#: wider than the text column scrolls inside it instead of running past its right edge.
_CSS_NAME = "companion.css"
_CSS = """\
mjx-container[display="true"] {
  display: block;
  max-width: 100%;
  overflow-x: auto;
  overflow-y: hidden;
}
a.companion-zoom img { cursor: zoom-in; }
/* Glued words read as the sentence around them, not in bold. */
span.pasted-text { font-weight: normal; }
"""

#: An image with what stands before it (an opening link, if any).
_IMAGE = re.compile(r'(<a\b[^>]*>\s*)?(<img\b[^>]*?\bsrc="([^"]*_images/[^"]+)"[^>]*>)')


def zoomable(html: str) -> str:
    """``html`` with every image of ``_images/`` that no link holds wrapped in a link to
    itself, so that a click opens the figure at full size."""
    def wrap(match):
        if match.group(1):
            return match.group(0)
        return f'<a class="companion-zoom" href="{match.group(3)}">{match.group(2)}</a>'

    return _IMAGE.sub(wrap, html)


def _zoom_figures(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        zoomed = zoomable(html)
        if zoomed != html:
            page.write_text(zoomed, encoding="utf-8")


def _write_css(app, exception):
    if exception is None and app.builder.format == "html":
        static = Path(app.outdir) / "_static"
        static.mkdir(parents=True, exist_ok=True)
        (static / _CSS_NAME).write_text(_CSS)


def setup(app):
    """Sphinx entry point."""
    app.add_role("nb", _nb_role)
    app.add_css_file(_CSS_NAME)
    app.connect("build-finished", _write_css)
    app.connect("missing-reference", _missing_notebook)
    app.connect("doctree-read", _unnumber_figures)
    app.connect("doctree-resolved", _restore_figure_ids)
    app.connect("html-page-context", _prune_scripts, priority=900)
    app.connect("build-finished", _check_offline)
    app.connect("build-finished", _zoom_figures)
    # A new version of this file invalidates Sphinx's saved environment, so that every
    # page is written again with it.
    import hashlib

    digest = hashlib.sha1(Path(__file__).read_bytes()).hexdigest()
    return {"version": digest[:12], "env_version": int(digest[:8], 16),
            "parallel_read_safe": True, "parallel_write_safe": True}

