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
from pathlib import Path
from typing import Any

import pytest

from .hook import ROOT
from .test_site import MIN_CODE_PX, WIDTHS, browser, page_urls, server, sync_api  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.browser

KEY_EFFECTS: dict[str, tuple[str, ...]] = {
    "compact": ("五节接力摘要",),
    "replay": ("压缩后组装出的历史",),
    "why-own": ("第一次：通用压缩切在第 15 轮中间",),
    "vector": ("两次自动压缩", "第 41 轮的末端注入"),
    "lore": ("激活日志", "末端的【相关设定】和【设定集索引】", "【前情提要】是摘要，设定是原文",
             "这一轮的设定记录", "记录里的截掉"),
    "cross": ("局 jA 的复盘", "jB 的复盘"),
    "merge": ("合并出的手册", "合并出的常驻摘要"),
    "budget": ("两次截断",),
    "forget": ("遗忘时合并 prompt 的末尾", "常驻摘要，删 jB 前", "常驻摘要，删 jB 后", "删 jB 后的手册"),
    "discussion": ("两次检查", "讨论摘要"),
}
"""Per section of the memory page (h2 id): the 效果 a reader sees without opening anything."""

TEMPLATE_SECTIONS = ("compact", "replay", "why-own", "vector", "lore", "cross", "merge", "budget", "forget",
                     "discussion")
"""The sections that show code or a prompt: each shows at least one 模版, open."""

# Every code title and fold title on the page, with the h2 section it sits in, whether a
# closed fold hides it, and whether its code is on screen (laid out) as the page loads.
BLOCKS = r"""() => {
  const heads = [...document.querySelectorAll('.md-content h2[id]')];
  const sectionOf = el => {
    let id = null;
    for (const h of heads)
      if (h.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) id = h.id;
    return id;
  };
  const shown = el => el.getBoundingClientRect().height > 0;
  const out = [];
  for (const title of document.querySelectorAll('.md-content .filename, .md-content details > summary')) {
    const fold = title.tagName === 'SUMMARY' ? title.parentElement : null;
    const closed = title.closest('details:not([open])');
    const code = fold ? fold.querySelector('pre') : title.closest('.highlight').querySelector('pre');
    out.push({section: sectionOf(title), title: title.textContent.trim(), folded: closed !== null,
              shown: !!code && shown(code) && !code.closest('details:not([open])')});
  }
  return out;
}"""


@pytest.mark.parametrize("width", WIDTHS)
def test_every_template_and_key_effect_is_open(server: str, browser: Any, width: int) -> None:  # noqa: F811
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(server + "memory/", wait_until="networkidle")
    blocks = page.evaluate(BLOCKS)
    page.close()
    templates = [b for b in blocks if b["title"].startswith("模版")]
    assert len(templates) >= len(TEMPLATE_SECTIONS)
    folded = [f"#{b['section']}: {b['title']}" for b in templates if b["folded"]]
    unseen = [f"#{section}" for section in TEMPLATE_SECTIONS
              if not any(b["section"] == section and b["shown"] for b in templates)]
    missing = [f"#{section}: {want}" for section, wants in KEY_EFFECTS.items() for want in wants
               if not any(b["section"] == section and b["title"].startswith("效果")
                          and want in b["title"] and b["shown"] for b in blocks)]
    assert (folded, unseen, missing) == ([], [], []), (
        f"at {width} px — 模版 folded: {folded}; sections with no 模版 on screen: {unseen}; "
        f"key 效果 not open: {missing}")


@pytest.mark.parametrize("width", WIDTHS)
def test_merge_shows_the_merged_resident_summary(server: str, browser: Any, width: int) -> None:  # noqa: F811
    resident = (ROOT / "sim" / "txt" / "resident-1.txt").read_text(encoding="utf-8")
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(server + "memory/", wait_until="networkidle")
    texts = page.evaluate(r"""() => {
      const start = document.getElementById('merge');
      const out = {codes: [], prose: ''};
      for (let el = start.nextElementSibling; el && el.tagName !== 'H2'; el = el.nextElementSibling) {
        for (const pre of el.matches('pre') ? [el] : el.querySelectorAll('pre'))
          if (pre.getBoundingClientRect().height > 0 && !pre.closest('details:not([open])'))
            out.codes.push(pre.innerText);
        if (el.tagName === 'P') out.prose += el.innerText;
      }
      return out;
    }""")
    page.close()
    def lines(text: str) -> list[str]:  # each source line is a block span: innerText doubles the breaks
        return [line.strip() for line in text.splitlines() if line.strip()]

    assert any(lines(code) == lines(resident) for code in texts["codes"]), "#merge does not show 常驻摘要.md open"
    assert "左边" not in texts["prose"] and "右边" not in texts["prose"]


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


@pytest.mark.parametrize("width", WIDTHS)
def test_code_titles_are_12px_or_more_inside_folds_too(built_site: Path, server: str, browser: Any,  # noqa: F811
                                                       width: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    small: dict[str, list[str]] = {}
    seen = 0
    for url in page_urls(built_site, server):
        page.goto(url, wait_until="networkidle")
        sizes = page.evaluate("""() => { document.querySelectorAll('details').forEach(d => d.open = true);
          return [...document.querySelectorAll('.md-content .highlight .filename')]
            .map(f => [parseFloat(getComputedStyle(f).fontSize), !!f.closest('details'),
                       f.textContent.slice(0, 30)]); }""")
        seen += sum(1 for _, in_fold, _ in sizes if in_fold)
        found = [f"{size:.2f} px: {title}" for size, _, title in sizes if size < MIN_CODE_PX]
        if found:
            small[url.removeprefix(server)] = found
    page.close()
    assert seen >= 6  # the check met titles inside folds
    assert small == {}, f"code titles under {MIN_CODE_PX} px at {width} px: {small}"
