"""The memory page read the seed's way, and search typed as a reader types (issue 39).

Headless Chromium at a laptop width (1366 px) and a phone width (390 px), against the same
strict build as ``test_site.py`` (its fixtures serve the site under its sub-path):

- every 模版 on the memory page is open (none inside a closed fold), and each section's key
  效果 — the ones the seed shows open — is visible without a click;
- #merge shows the merged resident summary itself, and does not point at a column
  (「左边那份」) that a phone does not have;
- a query put into the search box without key events (how an input method or a paste
  delivers Chinese) is searched whole: 按来源遗忘 is highlighted as one term, and no result
  link carries an empty highlight parameter (``?h=``).
"""

from __future__ import annotations

import contextlib
import re
import urllib.parse
from typing import Any

import pytest

from .test_site import WIDTHS, browser, server, sync_api  # noqa: F401  (fixtures shared with the site test)

pytestmark = pytest.mark.browser

def open_search(page: Any, base: str, width: int) -> Any:
    page.goto(base, wait_until="networkidle")
    if width < 1220:  # below Material's breakpoint the field sits behind a button
        page.locator("label.md-header__button[for=__search]").click()
    query = page.locator("input.md-search__input")
    query.click()
    page.wait_for_load_state("networkidle")  # the index has arrived and the worker is ready
    page.wait_for_timeout(500)
    return query


@pytest.mark.parametrize("width", WIDTHS)
def test_a_query_typed_without_key_events_is_searched_whole(server: str, browser: Any, width: int) -> None:  # noqa: F811
    # An input method or a paste puts Chinese into the field without the keyup that Material
    # listens for. press_sequentially sends each character as text input, as they do.
    term = "按来源遗忘"
    page = browser.new_page(viewport={"width": width, "height": 900})
    query = open_search(page, server, width)
    query.press_sequentially(term, delay=80)
    whole = f"h={urllib.parse.quote(term)}"
    with contextlib.suppress(sync_api.TimeoutError):  # report what the reader sees rather than a timeout
        page.wait_for_function(
            "want => [...document.querySelectorAll('.md-search-result__link')].some(a => a.href.includes(want))",
            arg=whole, timeout=10_000)
    page.wait_for_timeout(300)
    marks = sorted(set(page.eval_on_selector_all(".md-search-result mark", "els => els.map(e => e.textContent)")))
    hrefs = page.eval_on_selector_all(".md-search-result__link", "els => els.map(e => e.getAttribute('href'))")
    page.close()
    assert marks == [term], f"highlights at {width} px for {term}: {marks}"
    empty = [h for h in hrefs if re.search(r"[?&]h=(?:&|#|$)", h)]
    assert hrefs and empty == [], f"result links with an empty highlight at {width} px: {empty}"
    assert all(whole in h for h in hrefs), hrefs


@pytest.mark.parametrize("width", WIDTHS)
def test_no_result_link_has_an_empty_highlight(server: str, browser: Any, width: int) -> None:  # noqa: F811
    # Typed with key events (the path Material has always handled), a page that only its
    # sections matched still gets a link: it must carry the terms, not an empty ?h=.
    page = browser.new_page(viewport={"width": width, "height": 900})
    query = open_search(page, server, width)
    query.fill("按来源遗忘")
    query.press("End")
    page.locator(".md-search-result__item").first.wait_for(state="visible", timeout=15_000)
    page.wait_for_timeout(300)
    hrefs = page.eval_on_selector_all(".md-search-result__link", "els => els.map(e => e.getAttribute('href'))")
    page.close()
    articles = [h for h in hrefs if "#" not in h]
    assert articles, hrefs  # the page-level links are there to be checked
    empty = [h for h in hrefs if re.search(r"[?&]h=(?:&|#|$)", h)]
    assert empty == [], f"result links with an empty highlight at {width} px: {empty}"
