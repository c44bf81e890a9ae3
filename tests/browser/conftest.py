"""Fixtures of the browser test: the built site on a localhost server, and headless Chromium.

The site is the folder named by ``BOOK_HTML`` (``make test-browser`` builds a smoke-scale
site in ``_build/smoke/_build/html`` and sets it).  The browser is Debian's Chromium,
driven by playwright through ``executable_path``: playwright never downloads a browser
here.  Every fixture skips, saying why, when its prerequisite is missing.
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")


def chromium_path() -> str | None:
    """The system Chromium, or None."""
    env = os.environ.get("CHROMIUM")
    if env and Path(env).is_file():
        return env
    for cand in CHROMIUM_CANDIDATES:
        if Path(cand).is_file():
            return cand
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
def site_dir() -> Path:
    value = os.environ.get("BOOK_HTML")
    if not value:
        pytest.skip("BOOK_HTML is not set: `make test-browser` builds a smoke-scale site and "
                    "runs this test on it")
    site = Path(value)
    if not site.is_absolute():
        site = REPO / site
    if not (site / "index.html").is_file():
        pytest.fail(f"BOOK_HTML={value} has no index.html: build the site first "
                    "(make book SCALE=smoke BOOK_ROOT=_build/smoke)")
    return site


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="session")
def server(site_dir):
    """Serve the site on 127.0.0.1 (a free port) from a daemon thread."""
    handler = functools.partial(_QuietHandler, directory=str(site_dir))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="session")
def browser():
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium "
                    "chromium-driver); playwright cannot download a browser here, so the "
                    "browser test needs the system one")
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="the playwright package is missing (it is in the `test` extra of pyproject.toml)")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=path, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"])
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
