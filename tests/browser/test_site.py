"""A real browser over the built book: images, math, navigation, and nothing from outside.

Run by ``make test-browser``, which builds a smoke-scale site into ``_build/smoke`` and sets
``BOOK_HTML``; elsewhere the browser tests skip and say why (see ``conftest.py``).  The site is
served by a small ``http.server`` thread on 127.0.0.1 and visited by Debian's headless
Chromium through playwright.  Every page listed in ``_toc.yml`` is visited once; the checks
below then read what the visit recorded:

* every ``<img>`` loads (``naturalWidth > 0``), and the figures of the narrative pages have
  alt text;
* math is typeset: every ``.math`` element holds MathJax output (``mjx-container``), and
  the prose (code aside) has no raw ``$$`` and no TeX left between single dollars;
* no request leaves localhost (every request is recorded, and any other host is refused),
  no local request fails, and no script error is raised;
* the "next" buttons, followed from the landing page, walk through every chapter of
  ``_toc.yml`` in order, and the sidebar links to all of them;
* screenshots of three pages are saved in ``test-artifacts/``.

The first three tests need no browser and always run: every notebook is in ``_toc.yml``,
and two helpers of the build tooling (``tools/stage_book.py``, ``book/_ext/companion_ext.py``)
do what the build relies on.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = {"book/intro": "01-landing.png", "book/model": "02-model-figure5.png",
               "book/two_tokens": "03-two-tokens-theorem.png"}
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


def toc_files() -> list[str]:
    """Every file of ``_toc.yml`` in reading order, without extension."""
    data = yaml.safe_load((REPO / "_toc.yml").read_text(encoding="utf-8"))
    files = [data["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    for part in data.get("parts") or []:
        walk(part.get("chapters"))
    walk(data.get("chapters"))
    walk(data.get("sections"))
    return [str(Path(f).with_suffix("")) if Path(f).suffix in (".md", ".ipynb") else f
            for f in files]


def _page_id(url: str, base: str) -> str:
    path = urlparse(url).path
    prefix = urlparse(base).path.rstrip("/")
    rel = path[len(prefix):].lstrip("/")
    return rel[:-5] if rel.endswith(".html") else rel


# --------------------------------------------------------------------------
# Without a browser
# --------------------------------------------------------------------------

def test_toc_lists_every_notebook():
    """Every figure notebook is in the book, and every entry of the toc has a source."""
    listed = toc_files()
    notebooks = sorted(p.stem for p in (REPO / "notebooks").glob("*.md"))
    missing = [nb for nb in notebooks if f"notebooks/{nb}" not in listed]
    assert not missing, (f"notebooks not in _toc.yml: {missing}; un-comment (or add) their "
                         "lines where they belong")
    no_source = [f for f in listed
                 if not any((REPO / f).with_suffix(s).is_file() for s in (".md", ".ipynb"))]
    assert not no_source, f"_toc.yml lists files that do not exist: {no_source}"
    assert len(set(listed)) == len(listed), "a file appears twice in _toc.yml"


def _tool(relpath):
    """A build-tooling module (not part of the library) loaded from its file."""
    path = Path(__file__).resolve().parents[2] / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_offline_check_flags_what_a_page_would_load():
    """The build-time check of the book's extension finds loads from other hosts, not links."""
    external_loads = _tool("book/_ext/companion_ext.py").external_loads

    page = """<link rel="stylesheet" href="https://cdn.example.org/a.css">
    <script src="//cdn.example.org/b.js"></script><img src="https://x.example.org/c.png">
    <style>@font-face { src: url("https://fonts.example.org/d.woff2"); }</style>
    <a href="https://arxiv.org/abs/2601.21942">the paper</a>
    <link rel="canonical" href="https://example.org/book/"><script src="../_static/e.js"></script>"""
    assert external_loads(page) == sorted([
        "https://cdn.example.org/a.css", "//cdn.example.org/b.js",
        "https://x.example.org/c.png", "https://fonts.example.org/d.woff2"])


def test_links_between_notebooks_point_at_executed_copies():
    link_notebooks = _tool("tools/stage_book.py").link_notebooks

    names = {"fig6_antipodal_pairs", "fig7_persistence"}
    text = ("[Figure 7](fig7_persistence.md), [6](./fig6_antipodal_pairs.md#setup), "
            "[a page](../book/beyond.md), [unknown](fig5.md)")
    assert link_notebooks(text, names) == (
        "[Figure 7](fig7_persistence.ipynb), [6](./fig6_antipodal_pairs.ipynb#setup), "
        "[a page](../book/beyond.md), [unknown](fig5.md)")


# --------------------------------------------------------------------------
# One visit of every page, shared by the checks
# --------------------------------------------------------------------------

_WAIT_FOR_MATH = """
async () => {
  if (!document.querySelector('.math')) return 'no math';
  for (let i = 0; i < 400; i++) {
    if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) break;
    await new Promise(r => setTimeout(r, 50));
  }
  if (!(window.MathJax && window.MathJax.startup && window.MathJax.startup.promise))
    return 'MathJax never started';
  await window.MathJax.startup.promise;
  return 'typeset';
}
"""

_IMAGES = """
async () => {
  const imgs = Array.from(document.images);
  for (const img of imgs) {
    img.loading = 'eager';
    if (!img.complete) img.scrollIntoView();
    try { await img.decode(); } catch (e) { /* a broken image: naturalWidth stays 0 */ }
  }
  return imgs.map(img => {
    const link = img.closest('a');
    return {src: img.currentSrc || img.src, width: img.naturalWidth,
            shown: img.getBoundingClientRect().width,
            alt: img.getAttribute('alt') || '',
            inArticle: !!img.closest('article'), output: !!img.closest('.cell_output'),
            opens: !!link && link.href === (img.currentSrc || img.src)};
  });
}
"""

_MATH = r"""
() => {
  const elems = Array.from(document.querySelectorAll('.math'));
  const raw = elems.filter(e => !e.querySelector('mjx-container'))
                   .map(e => e.textContent.trim().slice(0, 80));
  // The prose of the page, without code, scripts and typeset math: any TeX left
  // between dollars there was never handed to MathJax.
  const main = (document.querySelector('main') || document.body).cloneNode(true);
  main.querySelectorAll('pre, code, script, style, mjx-container, .highlight')
      .forEach(e => e.remove());
  const text = main.textContent;
  const inline = (text.match(/\$[^$\n]{0,120}?[\\^_{}][^$\n]{0,120}?\$/g) || [])
                   .map(m => m.slice(0, 80));
  return {count: elems.length, typeset: document.querySelectorAll('mjx-container').length,
          raw: raw, dollars: (text.match(/\$\$/g) || []).length, inline: inline};
}
"""


_LAYOUT = r"""
() => {
  // Display equations wider than their column, and the visible ways to search.
  const wide = [], scrolling = [];
  for (const eq of document.querySelectorAll('mjx-container[display="true"]')) {
    const column = eq.closest('article, main') || document.body;
    const right = column.getBoundingClientRect().right;
    // The container may fit while its formula spills out of it: what counts is the
    // formula's right edge, unless the container scrolls (and so clips it).
    const math = eq.querySelector('mjx-math') || eq;
    const box = math.getBoundingClientRect();
    const scrolls = ['auto', 'scroll'].includes(getComputedStyle(eq).overflowX);
    if (box.width > 0 && !scrolls && box.right > right + 1)
      wide.push(Math.round(box.right - right) + ' px: ' + eq.textContent.slice(0, 60));
    // A formula wider than its container makes the reader scroll sideways to read it.
    if (box.width > 0 && scrolls && eq.scrollWidth > eq.clientWidth + 1)
      scrolling.push(Math.round(eq.scrollWidth - eq.clientWidth) + ' px: '
                     + eq.textContent.slice(0, 60));
  }
  const visible = e => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length)
                       && getComputedStyle(e).visibility !== 'hidden';
  const search = Array.from(document.querySelectorAll('.search-button, .search-button-field'))
                      .filter(visible).length;
  return {wide: wide, scrolling: scrolling, search: search};
}
"""


@pytest.fixture(scope="session")
def crawl(browser, server, artifacts):
    """Visit every page of the toc once and record what the checks need."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    requests, failures, errors = [], [], []

    def route(route_, request):
        requests.append(request.url)
        scheme = urlparse(request.url).scheme
        host = urlparse(request.url).hostname
        if scheme in ("data", "blob", "about") or host in LOCAL_HOSTS:
            route_.continue_()
        else:
            route_.abort()  # never let a page reach the internet, even if it tries

    context.route("**/*", route)
    context.on("requestfailed", lambda req: failures.append(f"{req.url} ({req.failure})"))
    context.on("response", lambda resp: resp.status >= 400 and not resp.url.endswith(
        "favicon.ico") and failures.append(f"{resp.url} (HTTP {resp.status})"))

    pages = {}
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(f"{page.url}: {exc}"))
    for doc in toc_files():
        url = f"{server}/{doc}.html"
        response = page.goto(url, wait_until="load")
        status = response.status if response else None
        math_state = page.evaluate(_WAIT_FOR_MATH)
        record = {"status": status, "math_state": math_state,
                  "images": page.evaluate(_IMAGES), "math": page.evaluate(_MATH),
                  "layout": page.evaluate(_LAYOUT),
                  "title": page.title()}
        if doc in SCREENSHOTS:
            page.screenshot(path=str(artifacts / SCREENSHOTS[doc]), full_page=True)
        pages[doc] = record
    context.close()
    return {"pages": pages, "requests": requests, "failures": failures, "errors": errors}


def test_every_page_loads(crawl):
    bad = {doc: rec["status"] for doc, rec in crawl["pages"].items() if rec["status"] != 200}
    assert not bad, f"pages that did not load: {bad}"


def test_every_image_loads(crawl):
    broken, no_alt, total = [], [], 0
    for doc, rec in crawl["pages"].items():
        for img in rec["images"]:
            total += 1
            if img["width"] <= 0:
                broken.append(f"{doc}: {img['src']}")
            if doc.startswith("book/") and img["inArticle"] and not img["alt"].strip():
                no_alt.append(f"{doc}: {img['src']}")
    assert total > 0, "the site shows no image at all"
    assert not broken, "images that did not load:\n" + "\n".join(broken)
    assert not no_alt, "figures without alt text:\n" + "\n".join(no_alt)


def test_math_is_typeset(crawl):
    problems = []
    with_math = 0
    for doc, rec in crawl["pages"].items():
        math = rec["math"]
        if math["count"]:
            with_math += 1
            if rec["math_state"] != "typeset":
                problems.append(f"{doc}: {rec['math_state']}")
        if math["raw"]:
            problems.append(f"{doc}: {len(math['raw'])} formula(s) left raw, e.g. {math['raw'][0]!r}")
        if math["dollars"]:
            problems.append(f"{doc}: {math['dollars']} raw '$$' in the text")
        if math["inline"]:
            problems.append(f"{doc}: raw TeX between dollars, e.g. {math['inline'][0]!r}")
    assert with_math >= 5, f"only {with_math} page(s) contain math; the build lost it"
    assert not problems, "\n".join(problems)


def test_no_display_equation_runs_past_its_column(crawl):
    """At a laptop's width every display equation fits its column or scrolls inside it."""
    wide = {doc: rec["layout"]["wide"] for doc, rec in crawl["pages"].items()
            if rec["layout"]["wide"]}
    assert not wide, f"display equations past the column's right edge: {wide}"


def test_no_display_equation_of_a_chapter_scrolls_sideways(crawl):
    """A long formula is broken over lines where it stands (the API pages, whose formulas
    are the docstrings', may scroll)."""
    scrolling = {doc: rec["layout"]["scrolling"] for doc, rec in crawl["pages"].items()
                 if rec["layout"]["scrolling"] and not doc.startswith("book/api")}
    assert not scrolling, f"display equations that scroll sideways: {scrolling}"


def _largest_shrink() -> float:
    """How much a figure may be shrunk on its page and keep its smallest text at 9 CSS px:
    the style's smallest font, at the dpi of the notebooks' inline figures."""
    from stochastic_transformers.style import use_style
    import matplotlib as mpl
    from matplotlib.font_manager import FontProperties

    use_style()
    sizes = [FontProperties(size=mpl.rcParams[key]).get_size_in_points() for key in (
        "font.size", "axes.titlesize", "axes.labelsize", "xtick.labelsize", "ytick.labelsize",
        "legend.fontsize")]
    return min(sizes) * mpl.rcParams["figure.dpi"] / 72.0 / 9.0


def test_figures_are_drawn_for_the_column_they_stand_in(crawl):
    """A figure's PNG is shown at most as much narrower than it is drawn as keeps the style's
    smallest text at 9 CSS px or more (at a 1280-px window)."""
    limit = _largest_shrink()
    shrunk = []
    for doc, rec in crawl["pages"].items():
        for img in rec["images"]:
            if img["output"] and img["shown"] > 0 and img["width"] / img["shown"] > limit:
                shrunk.append(f"{doc}: {img['src'].rsplit('/', 1)[-1]} drawn {img['width']} px, "
                              f"shown {img['shown']:.0f} px")
    assert not shrunk, f"figures shrunk past {limit:.2f}x:\n" + "\n".join(shrunk)


def test_every_figure_opens_full_size_on_a_click(crawl):
    closed = [f"{doc}: {img['src']}" for doc, rec in crawl["pages"].items()
              for img in rec["images"] if img["output"] and not img["opens"]]
    assert not closed, "figures without a link to their full size:\n" + "\n".join(closed)


def test_every_page_shows_one_search_box(crawl):
    counts = {doc: rec["layout"]["search"] for doc, rec in crawl["pages"].items()}
    assert all(n == 1 for n in counts.values()), f"visible search boxes per page: {counts}"


def test_no_request_leaves_localhost(crawl):
    outside = sorted({url for url in crawl["requests"]
                      if urlparse(url).scheme not in ("data", "blob", "about")
                      and urlparse(url).hostname not in LOCAL_HOSTS})
    assert crawl["requests"], "no request was recorded at all"
    assert not outside, "requests to other hosts:\n" + "\n".join(outside)
    assert not crawl["failures"], "local requests that failed:\n" + "\n".join(crawl["failures"])
    mathjax = [u for u in crawl["requests"] if "/_static/mathjax/" in u]
    assert mathjax, "MathJax was not loaded from the site's own _static folder"


def test_no_script_errors(crawl):
    assert not crawl["errors"], "script errors:\n" + "\n".join(crawl["errors"])


def test_navigation_reaches_every_chapter(browser, server):
    """Following "next" from the landing page walks the whole toc; the sidebar lists it."""
    expected = toc_files()
    context = browser.new_context()
    context.route("**/*", lambda route_, request: route_.continue_()
                  if urlparse(request.url).hostname in LOCAL_HOSTS else route_.abort())
    page = context.new_page()
    page.goto(f"{server}/index.html", wait_until="load")
    page.wait_for_url(lambda url: not url.endswith("/index.html"), timeout=10_000)
    assert _page_id(page.url, server) == expected[0], f"index.html leads to {page.url}"

    sidebar = {_page_id(urljoin(page.url, href), server)
               for href in page.eval_on_selector_all(
                   "a.navbar-brand, nav.bd-docs-nav a.reference.internal",
                   "els => els.map(e => e.getAttribute('href'))")}
    missing = [doc for doc in expected if doc not in sidebar]
    assert not missing, f"the sidebar does not link to {missing}"

    visited = [_page_id(page.url, server)]
    for _ in range(len(expected) + 5):
        nxt = page.query_selector("a.right-next")
        if nxt is None:
            break
        nxt.click()
        page.wait_for_load_state("load")
        visited.append(_page_id(page.url, server))
    context.close()
    assert visited == expected, f"'next' walks {visited}, the toc lists {expected}"


def test_screenshots_saved(crawl, artifacts):
    for name in SCREENSHOTS.values():
        shot = artifacts / name
        assert shot.is_file() and shot.stat().st_size > 10_000, f"no screenshot {shot}"


# --------------------------------------------------------------------------
# The executed notebooks behind the pages (no browser needed, only the built site)
# --------------------------------------------------------------------------
def _executed_notebooks(site_dir: Path) -> list[Path]:
    # BOOK_HTML is <root>/_build/html; make executes into <root>/_build/executed/<scale>/.
    folders = sorted((site_dir.parent / "executed").glob("*"))
    return sorted(p for folder in folders for p in folder.glob("*.ipynb")
                  if not p.name.endswith((".in.ipynb", ".tmp.ipynb")))


def test_no_executed_notebook_shows_a_warning_or_an_error(site_dir):
    import json

    found = _executed_notebooks(site_dir)
    assert found, f"no executed notebooks next to {site_dir}"
    problems = []
    for path in found:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for k, cell in enumerate(nb["cells"]):
            for out in cell.get("outputs", []):
                text = "".join(out.get("text", "")) if out.get("output_type") == "stream" else ""
                if out.get("output_type") == "error":
                    problems.append(f"{path.name} cell {k}: error {out.get('ename')}")
                elif out.get("name") == "stderr" and text.strip():
                    problems.append(f"{path.name} cell {k}: stderr {text.strip()[:120]!r}")
                elif "Warning" in text:
                    problems.append(f"{path.name} cell {k}: {text.strip()[:120]!r}")
    assert not problems, "\n".join(problems)


def test_injected_parameters_are_hidden_on_the_pages(site_dir):
    pages = sorted((site_dir / "notebooks").glob("*.html"))
    assert pages
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert "tag_injected-parameters" not in html, page.name
        if "tag_parameters" in html:  # the documented parameters cell stays visible
            assert "tag_remove-cell" not in html.split("tag_parameters")[0][-200:]
