"""Activation rules, one by one: keys, secondary AND/NOT, case, whole word vs CJK, scan
depth, constant, order, recursion cap, the budget cut at entry boundaries (reported)."""

from __future__ import annotations

import time

import pytest

from liyuan.errors import LoreError
from liyuan.lore import LoreBook, LoreEntry
from liyuan.lore.activate import activate_entries, fit_lore, lore_for_turn, turn_segments
from liyuan.lore.match import LoreIndex, RegexClock
from liyuan.lore.model import DEFAULT_SCAN_TURNS, LORE_INDEX_MAX_CHARS


def titles(book: LoreBook, items: list[tuple[str, str]], new: str) -> list[str]:
    index = LoreIndex(book)
    return [hit.title for _, hit in activate_entries(index, turn_segments(items, new, index.max_depth))]


def e(title: str, *keys: str, **fields: object) -> LoreEntry:
    return LoreEntry(title, content=fields.pop("content", f"{title}的设定。"), keys=keys, **fields)  # type: ignore[arg-type]


def test_plain_key_activates_and_absent_key_does_not() -> None:
    book = LoreBook((e("雾港", "雾港"), e("钟楼", "钟楼")))
    assert titles(book, [], "我们去雾港吧") == ["雾港"]
    assert titles(book, [], "今天下雨") == []


def test_any_of_several_keys() -> None:
    book = LoreBook((e("雾港", "雾港", "港城"),))
    assert titles(book, [], "回港城") == ["雾港"]


@pytest.mark.parametrize(("logic", "text", "active"), [
    ("and_any", "雾港的灯塔", True), ("and_any", "雾港的街", False),
    ("and_all", "雾港的灯塔和码头", True), ("and_all", "雾港的灯塔", False),
    ("not_any", "雾港的街", True), ("not_any", "雾港的码头", False),
    ("not_all", "雾港的码头", True), ("not_all", "雾港的灯塔和码头", False),
])
def test_secondary_keys_logic(logic: str, text: str, active: bool) -> None:
    book = LoreBook((e("雾港", "雾港", secondary_keys=("灯塔", "码头"), logic=logic),))
    assert titles(book, [], text) == (["雾港"] if active else [])


def test_case_insensitive_by_default_and_sensitive_on_request() -> None:
    book = LoreBook((e("Ann", "Ann"), e("NASA", "NASA", case_sensitive=True)))
    assert titles(book, [], "ann and nasa") == ["Ann"]
    assert titles(book, [], "ANN and NASA") == ["Ann", "NASA"]


def test_whole_word_for_latin_and_substring_for_cjk() -> None:
    book = LoreBook((e("Ann", "Ann"), e("雾港", "雾港"), e("Ann 整词关", "Ann", whole_word=False)),
                    recursion_steps=0)  # only the chat text: each content names its own key
    assert titles(book, [], "Anna 到了雾港城") == ["雾港", "Ann 整词关"]
    assert titles(book, [], "Ann到了") == ["Ann", "Ann 整词关"]  # a CJK neighbour is a word boundary
    assert titles(book, [], "Anna, then Ann.") == ["Ann", "Ann 整词关"]  # a later occurrence counts


def test_scan_depth_in_turns_with_per_entry_override() -> None:
    items = [("user", "提到雾港"), ("assistant", "嗯"), ("user", "别的"), ("assistant", "好"),
             ("user", "又别的"), ("assistant", "行")]
    book = LoreBook((e("雾港", "雾港"), e("雾港近", "雾港", scan_turns=2), e("雾港只看新话", "雾港", scan_turns=0)),
                    recursion_steps=0)  # recursion scans content whatever the depth; off to see the depth
    assert titles(book, items, "继续") == ["雾港"]  # 3 turns back: within the default 6, not within 2
    assert titles(book, items, "雾港") == ["雾港", "雾港近", "雾港只看新话"]
    assert titles(LoreBook((e("雾港", "雾港"),), scan_turns=2), items, "继续") == []


def test_default_scan_depth_is_the_kept_turns() -> None:
    from liyuan.story.compact import KEEP_RECENT_TURNS

    assert DEFAULT_SCAN_TURNS == KEEP_RECENT_TURNS


def test_turn_segments_newest_first() -> None:
    items = [("assistant", "开场"), ("user", "一"), ("assistant", "甲"), ("user", "二"), ("assistant", "乙")]
    assert turn_segments(items, "三", 6) == ["三", "二\n乙", "一\n甲", "开场"]
    assert turn_segments(items, "三", 1) == ["三", "二\n乙"]
    assert turn_segments(items, "三", 0) == ["三"]


def test_constant_and_disabled() -> None:
    book = LoreBook((e("规则", constant=True), e("雾港", "雾港", enabled=False), e("关着的常驻", constant=True,
                                                                                enabled=False)))
    assert titles(book, [], "雾港") == ["规则"]


def test_order_constant_then_priority_then_order_then_position() -> None:
    book = LoreBook((e("低序", "港", order=5), e("高优先", "港", priority=10), e("常驻", constant=True, priority=-5),
                     e("默认甲", "港"), e("默认乙", "港"), e("高序", "港", order=500)))
    assert titles(book, [], "港") == ["常驻", "高优先", "高序", "默认甲", "默认乙", "低序"]


def test_recursion_follows_content_up_to_the_cap() -> None:
    chain = (e("甲", "起点", content="甲提到乙地"), e("乙", "乙地", content="乙提到丙地"),
             e("丙", "丙地", content="丙提到丁地"), e("丁", "丁地", content="完"))
    assert titles(LoreBook(chain), [], "起点") == ["甲", "乙", "丙", "丁"]  # recursion on by default
    assert titles(LoreBook(chain, recursion_steps=0), [], "起点") == ["甲"]
    assert titles(LoreBook(chain, recursion_steps=1), [], "起点") == ["甲", "乙"]
    assert titles(LoreBook(chain, recursion_steps=2), [], "起点") == ["甲", "乙", "丙"]
    assert titles(LoreBook(chain, recursion_steps=5), [], "起点") == ["甲", "乙", "丙", "丁"]
    with pytest.raises(LoreError):
        LoreBook(chain, recursion_steps=11)


def test_recursion_flags() -> None:
    book = LoreBook((e("甲", "起点", content="乙地"), e("乙", "乙地", recursive=False)), recursion_steps=3)
    assert titles(book, [], "起点") == ["甲"]
    book = LoreBook((e("甲", "起点", content="乙地", prevent_recursion=True), e("乙", "乙地")), recursion_steps=3)
    assert titles(book, [], "起点") == ["甲"]


def test_regex_keys_and_invalid_regex_refused() -> None:
    book = LoreBook((e("年份", r"/\d{4}年/"),))
    assert titles(book, [], "那是1987年") == ["年份"]
    assert titles(book, [], "那是去年") == []
    with pytest.raises(LoreError, match="正则"):
        e("坏", "/([/")


def test_catastrophic_regex_is_bounded_and_reported() -> None:
    book = LoreBook((e("回溯", r"/(x+x+)+y/"),))
    index = LoreIndex(book)
    clock = RegexClock()
    started = time.perf_counter()
    found = activate_entries(index, ["x" * 5000], clock)
    assert time.perf_counter() - started < 0.5
    assert found == [] and clock.timeouts == ["(x+x+)+y"]
    blocks = fit_lore(index, found, 1000, clock)
    assert any("超时" in line for line in blocks.report.lines())


def test_budget_cuts_at_entry_boundaries_and_reports_every_cut() -> None:
    book = LoreBook((e("甲", "港", content="一" * 40, priority=3), e("乙", "港", content="二" * 40, priority=2),
                     e("丙", "港", content="三" * 5, priority=1), e("丁", "无关")))
    blocks = lore_for_turn(LoreIndex(book), [], "港", 100)
    assert blocks.text == "「甲」\n" + "一" * 40 + "\n\n「乙」\n" + "二" * 40
    assert [cut.title for cut in blocks.report.cut] == ["丙"]  # it fits alone, but the order is kept
    assert blocks.report.included == ("甲", "乙")
    assert blocks.index.split("\n")[0] == "- 丙"  # a cut entry's title goes first into the index
    lines = blocks.report.lines()
    assert any("「丙」已激活但放不下" in line for line in lines)
    assert blocks.report.text_chars + blocks.report.index_chars + 2 <= 100


def test_nothing_fits_everything_is_reported() -> None:
    book = LoreBook((e("甲", "港", content="长" * 200), e("乙", "港", content="长" * 200)))
    blocks = lore_for_turn(LoreIndex(book), [], "港", 50)
    assert blocks.text == "" and [c.title for c in blocks.report.cut] == ["甲", "乙"]


def test_index_is_capped_at_2000_characters_at_a_title() -> None:
    book = LoreBook(tuple(e(f"条目{i:04d}", f"键{i}") for i in range(1000)))
    blocks = lore_for_turn(LoreIndex(book), [], "无", 10_000)
    assert len(blocks.index) <= LORE_INDEX_MAX_CHARS
    assert all(line.startswith("- 条目") and len(line) == 8 for line in blocks.index.split("\n"))
    assert blocks.report.index_left_out == 1000 - blocks.report.index_titles > 0


def test_empty_content_adds_nothing() -> None:
    book = LoreBook((e("空", "港", content=""),))
    blocks = lore_for_turn(LoreIndex(book), [], "港", 100)
    assert blocks.text == "" and blocks.report.cut == ()


@pytest.mark.slow
def test_hundred_thousand_entries_stay_fast() -> None:
    book = LoreBook(tuple(LoreEntry(f"地名{i}", content=f"地名{i}的设定", keys=(f"地名{i}号",))
                          for i in range(100_000)))
    index = LoreIndex(book)
    items = [("user", "我们去地名77号看看。" * 20), ("assistant", "好的，地名123号也不远。" * 20)] * 6
    started = time.perf_counter()
    blocks = lore_for_turn(index, items, "地名5号呢？", 1720)
    elapsed = time.perf_counter() - started
    assert set(blocks.report.included) == {"地名5", "地名77", "地名123"}
    assert elapsed < 0.5  # generous: the bench prints the real figure (a few ms)
