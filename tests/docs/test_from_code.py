"""The reference hook: blocks generated from the code, and refusals for names that are gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from liyuan.card import layout, manifest
from liyuan.story.view import SUMMARY_ENTRY_TYPE

from .hook import ROOT, load_hook

hook = load_hook("from_code")


def test_rst_inline_markup_and_literal_blocks_become_markdown() -> None:
    doc = 'Title.\n\nSee :func:`~pkg.mod.fn` and ``x = 1``.\n\nShape::\n\n    {"a": 1}\n    {"b": 2}\n\nAfter.'
    out = hook.rst_to_markdown(doc)
    assert "See `pkg.mod.fn` and `x = 1`." in out
    assert 'Shape:\n\n```text\n{"a": 1}\n{"b": 2}\n```\n\nAfter.' in out


def test_constants_and_fields_come_from_the_code() -> None:
    table = hook.consts_table("liyuan.card.layout", ["MANIFEST_FILE", "MEMORY_DIR"])
    assert f"`{layout.MANIFEST_FILE}`" in table and f"`{layout.MEMORY_DIR}`" in table
    fields = hook.fields_table("liyuan.session.state.Ledger")
    assert "| `threads` |" in fields and "剧情线" in fields


@pytest.mark.parametrize(("line", "message"), [
    ("<!-- 源码: consts liyuan.card.files NO_SUCH_NAME -->", "没有常量 NO_SUCH_NAME"),
    ("<!-- 源码: doc liyuan.no_such_module -->", "没有这个模块"),
    ("<!-- 源码: fields liyuan.card.files.CardLayout_missing -->", "不是一个 dataclass"),
])
def test_a_name_the_code_no_longer_has_fails_the_build(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        hook.render(line, ROOT)


def test_the_reference_page_shows_the_formats(built_site: Path) -> None:
    page = (built_site / "reference" / "index.html").read_text(encoding="utf-8")
    for value in (SUMMARY_ENTRY_TYPE, layout.MANIFEST_FILE, layout.RESIDENT_FILE, "rp-state", "rp-draft-op"):
        assert value in page
    assert "源码里的说明 · liyuan/card/manifest.py" in page
    assert manifest.__doc__ is not None and "<!-- 源码:" not in page


def test_a_two_column_listing_becomes_a_list() -> None:
    # Columns of CJK text only line up where the monospace font has CJK glyphs (issue 27).
    listing = "cards/<卡>/记忆/记忆.md       the handbook\ncards/<卡>/记忆/.清单.json    the manifest\n" \
              "a/.sync.lock, .write.lock    locks"
    assert hook.two_column_list(listing) == ["- `cards/<卡>/记忆/记忆.md`：the handbook",
                                             "- `cards/<卡>/记忆/.清单.json`：the manifest",
                                             "- `a/.sync.lock, .write.lock`：locks"]
    assert hook.two_column_list('{"a": 1}\n{"b": 2}\n{"c": 3}') is None
