"""The built site: every 模版 title agrees with the code block under it, and no block is empty.

This reads the HTML that MkDocs wrote, not the hook's own bookkeeping: the title's
``path:start-end`` is checked against the file on disk and against the code that
pymdownx.snippets actually rendered under that title.
"""

from __future__ import annotations

import html
import re
import textwrap
from pathlib import Path

import pytest

from .hook import ROOT

_TITLED_BLOCK = re.compile(
    r'<span class="filename">(?P<title>[^<]*)</span>\s*<pre[^>]*>(?P<code>.*?)</pre>', re.DOTALL
)
_ANY_BLOCK = re.compile(r"<pre[^>]*>(?P<code>.*?)</pre>", re.DOTALL)
_TEMPLATE_TITLE = re.compile(r"^模版 · (?P<path>[^:]+):(?P<start>\d+)(?:-(?P<end>\d+))?$")
_MARKER = re.compile(r"-{1,}8<-{1,}[ \t]+\[[ \t]*(?:start|end)[ \t]*:")
_TAG = re.compile(r"<[^>]+>")


def code_text(fragment: str) -> list[str]:
    """The text of a rendered code block, line by line, without trailing blank lines."""
    lines = [line.rstrip() for line in html.unescape(_TAG.sub("", fragment)).split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def expected_lines(path: str, start: int, end: int) -> list[str] | None:
    """Lines ``start..end`` of the file, as snippets renders them (markers out, dedented).

    ``None`` when the span is impossible: past the end of the file, or (for a part of a
    file) starting or ending on a section marker line, which never renders.
    """
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    if not 1 <= start <= end <= len(lines):
        return None
    whole_file = start == 1 and end == len(lines)
    if not whole_file and (_MARKER.search(lines[start - 1]) or _MARKER.search(lines[end - 1])):
        return None
    kept = [line for line in lines[start - 1 : end] if not _MARKER.search(line)]
    block = kept if whole_file else textwrap.dedent("\n".join(kept)).split("\n")
    while block and not block[-1].strip():
        block.pop()
    return block


def title_mismatches(page_html: str) -> list[str]:
    """Every 模版 title on a page whose lines differ from the code rendered under it."""
    problems = []
    for block in _TITLED_BLOCK.finditer(page_html):
        title = html.unescape(block.group("title"))
        if not title.startswith("模版"):
            continue
        match = _TEMPLATE_TITLE.match(title)
        if match is None:
            problems.append(f"not a generated title: {title!r}")
            continue
        start = int(match.group("start"))
        end = int(match.group("end") or start)
        rendered = code_text(block.group("code"))
        expected = expected_lines(match.group("path"), start, end)
        if not rendered:
            problems.append(f"{title}: empty block")
        elif expected is None:
            problems.append(f"{title}: no such span in the file")
        elif rendered != [line.rstrip() for line in expected]:
            problems.append(f"{title}: rendered code differs from those lines")
    return problems


def pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_titles_agree_with_rendered_code_on_every_page(built_site: Path) -> None:
    checked = 0
    for page in pages(built_site):
        text = page.read_text(encoding="utf-8")
        assert title_mismatches(text) == [], page.relative_to(built_site)
        checked += sum(1 for b in _TITLED_BLOCK.finditer(text) if html.unescape(b.group("title")).startswith("模版"))
    assert checked >= 12, f"only {checked} 模版 blocks found: did the pages lose their includes?"


def test_no_code_block_on_the_site_is_empty(built_site: Path) -> None:
    for page in pages(built_site):
        for block in _ANY_BLOCK.finditer(page.read_text(encoding="utf-8")):
            assert code_text(block.group("code")), f"empty code block in {page.relative_to(built_site)}"


def test_generated_titles_are_on_the_pages(built_site: Path) -> None:
    memory = (built_site / "memory" / "index.html").read_text(encoding="utf-8")
    assert "模版 · liyuan/story/compact.py:" in memory
    assert "模版 · liyuan/prompts/merge_system.j2:" in memory


# -- the checker itself must be able to fail ----------------------------------------------

SAMPLE = (
    '<div class="language-python highlight"><span class="filename">{title}</span>'
    "<pre><span></span><code>{code}\n</code></pre></div>"
)


@pytest.fixture
def budget_block() -> tuple[str, int, int]:
    lines = (ROOT / "liyuan" / "context" / "budget.py").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if "[start:fit_resident_summary]" in line) + 2
    end = next(i for i, line in enumerate(lines) if "[end:fit_resident_summary]" in line)
    # Nested section markers (fit_rule) are not rendered, as pymdownx.snippets drops them;
    # the span ends on the last line that renders.
    while "# --8<-- [" in lines[end - 1]:
        end -= 1
    shown = [line for line in lines[start - 1 : end] if "# --8<-- [" not in line]
    return "\n".join(html.escape(line) for line in shown), start, end


def test_checker_accepts_a_correct_title(budget_block: tuple[str, int, int]) -> None:
    code, start, end = budget_block
    page = SAMPLE.format(title=f"模版 · liyuan/context/budget.py:{start}-{end}", code=code)
    assert title_mismatches(page) == []


@pytest.mark.parametrize("shift", [(-1, -1), (1, 1), (0, 1), (0, -1)])
def test_checker_rejects_a_title_off_by_a_line(budget_block: tuple[str, int, int], shift: tuple[int, int]) -> None:
    code, start, end = budget_block
    page = SAMPLE.format(title=f"模版 · liyuan/context/budget.py:{start + shift[0]}-{end + shift[1]}", code=code)
    assert title_mismatches(page) != []


def test_checker_rejects_an_empty_block_and_a_typed_title() -> None:
    assert title_mismatches(SAMPLE.format(title="模版 · liyuan/context/budget.py:1-3", code="")) != []
    assert title_mismatches(SAMPLE.format(title="模版 · 见 budget.py", code="x")) != []
