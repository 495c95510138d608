"""The built site in a real browser: Debian's Chromium driven by Playwright.

The site is built with ``mkdocs build --strict`` into a temporary folder, served on
127.0.0.1 by a thread running ``http.server``, and every page is opened. Checks: no
console errors or page errors, every internal href/src (pages, anchors, images, CSS,
scripts) resolves, images decode, a ``??? abstract`` block opens on click, search finds
``前情提要``, the palette toggle switches to dark. Screenshots of every page (light, and
dark for the pages with diagrams) go to ``test-output/screenshots/``.

No browser is downloaded: the test uses ``/usr/bin/chromium`` (``.ci/run`` installs it)
and is skipped, saying why, only where it is missing.
"""

from __future__ import annotations

import functools
import http.server
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .hook import ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-quic",
]
SCREENSHOTS = ROOT / "test-output" / "screenshots"

pytestmark = pytest.mark.browser

if not CHROMIUM.exists():
    pytest.skip(f"Chromium not found at {CHROMIUM}: install the Debian package `chromium` "
                "(.ci/run does this in CI)", allow_module_level=True)
# Not an importorskip: with Chromium present, a missing playwright is a broken install
# (`pip install -e .[browser]`), and the test must say so instead of quietly skipping.
from playwright import sync_api  # noqa: E402


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # silence per-request logging
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # The browser drops connections it no longer needs (navigation, prefetch): not a failure.
        pass


@pytest.fixture(scope="module")
def server(built_site: Path) -> Iterator[str]:
    """Base URL of the built site served on loopback."""
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    httpd = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def page_urls(site: Path, base: str) -> list[str]:
    """Every HTML page of the site, as URLs (``index.html`` shown as its folder)."""
    urls = []
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site).as_posix()
        urls.append(base + (rel.removesuffix("index.html")))
    return urls


def shot_name(url: str, base: str) -> str:
    rel = url.removeprefix(base).strip("/").replace("/", "-").removesuffix(".html")
    return rel or "index"


def fetch_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_every_page_renders_cleanly(built_site: Path, server: str, browser: Any) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    urls = page_urls(built_site, server)
    assert {shot_name(u, server) for u in urls} >= {"index", "memory", "branch"}
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light")
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("requestfailed", lambda req: errors.append(f"request failed: {req.url} {req.failure}"))

    links: dict[str, str] = {}  # url (with fragment) -> page it was found on
    ids: dict[str, set[str]] = {}  # page url without fragment -> element ids on it
    for url in urls:
        response = page.goto(url, wait_until="networkidle")
        assert response is not None and response.status == 200, url
        assert page.locator("h1").count() >= 1, f"no heading on {url}"
        # Every image decoded (a broken SVG has naturalWidth 0).
        broken = page.eval_on_selector_all("img", "els => els.filter(e => !e.complete || e.naturalWidth === 0)"
                                           ".map(e => e.src)")
        assert broken == [], f"images that did not load on {url}: {broken}"
        for ref in page.eval_on_selector_all(
            "a[href], img[src], link[href], script[src]", "els => els.map(e => e.href || e.src)"
        ):
            if ref.startswith(server):
                links.setdefault(ref, url)
        ids[url] = set(page.eval_on_selector_all("[id]", "els => els.map(e => e.id)"))
        page.screenshot(path=str(SCREENSHOTS / f"{shot_name(url, server)}-light.png"), full_page=True)
    context.close()
    assert errors == []

    bad = []
    status: dict[str, int] = {}
    for ref, found_on in sorted(links.items()):
        target, _, fragment = ref.partition("#")
        if target not in status:
            status[target] = fetch_status(target)
        if status[target] != 200:
            bad.append(f"{ref} (on {found_on})")
        elif fragment and target in ids and urllib.parse.unquote(fragment) not in ids[target]:
            bad.append(f"{ref}: no element with that id (on {found_on})")
    assert bad == [], "broken internal links:\n" + "\n".join(bad)
    assert len(links) > 20  # the check saw the navigation, not an empty page


def test_diagrams_in_dark_palette(server: str, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light")
    page = context.new_page()
    for name in ("index", "memory"):
        page.goto(server + ("" if name == "index" else f"{name}/"), wait_until="networkidle")
        if page.evaluate("document.body.getAttribute('data-md-color-scheme')") != "slate":
            page.locator("form[data-md-component=palette] label:visible").first.click()
        assert page.evaluate("document.body.getAttribute('data-md-color-scheme')") == "slate"
        diagrams = page.locator("figure.diagram img")
        assert diagrams.count() >= 1
        for index in range(diagrams.count()):
            assert diagrams.nth(index).evaluate("e => e.naturalWidth") > 0
        page.screenshot(path=str(SCREENSHOTS / f"{name}-dark.png"), full_page=True)
    context.close()


def test_abstract_block_opens_on_click(server: str, browser: Any) -> None:
    page = browser.new_page()
    page.goto(server + "memory/", wait_until="networkidle")
    block = page.locator("details.abstract").first
    assert block.get_attribute("open") is None
    block.locator("summary").click()
    page.wait_for_function("document.querySelector('details.abstract').open === true")
    assert block.get_attribute("open") is not None
    # The content inside is a real artifact, now visible.
    assert block.locator("pre").first.is_visible()
    page.close()


def test_search_finds_qianqing_tiyao(server: str, browser: Any) -> None:
    page = browser.new_page()
    page.goto(server, wait_until="networkidle")
    query = page.locator("input.md-search__input")
    if not query.is_visible():  # narrow layouts hide the field behind a button
        page.locator("label.md-header__button[for=__search]").click()
    query.click()
    query.fill("前情提要")
    query.press("End")  # fill() types no keys; the search box reacts to key events
    hits = page.locator(".md-search-result__item")
    hits.first.wait_for(state="visible", timeout=15_000)
    assert hits.count() >= 1
    assert "前情提要" in page.locator(".md-search-result").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "search.png"))
    page.close()
