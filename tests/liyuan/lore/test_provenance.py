"""Lore learnt from the handbook carries its chats; deleting a chat removes lore only it supported."""

from __future__ import annotations

from pathlib import Path

from liyuan import Activity, Card, LoreBook, LoreEntry
from liyuan.card.layout import CardLayout
from liyuan.lore.provenance import adopt, forget_chat, propose_from_handbook

HANDBOOK = """# 局：雾夜借宿（jA）
- 既定事实：灯油只剩两桶。
来源：局/jA.md

# 人物（跨局）
- 林溯：雾港灯塔的守灯人，话少。[局:jA][局:jB]
- 林汐：林溯的妹妹，在对岸渡口撑船。[局:jB]

# 世界既定事实（跨局）
- 补给船「海鹞号」三天来一趟。[局:jA][局:jB]
- 没有林溯陪着，不许上灯室。[局:jA][局:jB]
- 青鸥号十年前沉在北礁。[局:jB]

# 用户的玩法偏好（跨局）
- 慢一点。[局:jA][局:jB]
"""


def test_stable_lines_become_entries_with_their_chats() -> None:
    proposals = {e.title: e for e in propose_from_handbook(HANDBOOK)}
    assert sorted(proposals) == ["林溯", "海鹞号"]  # single-source lines and preferences are not lore
    assert proposals["林溯"].keys == ("林溯",) and proposals["林溯"].sources == ("jA", "jB")
    assert proposals["海鹞号"].content == "补给船「海鹞号」三天来一趟。"
    assert "[局:" not in proposals["林溯"].content
    assert sorted(e.title for e in propose_from_handbook(HANDBOOK, min_sources=1)) == ["林汐", "林溯", "海鹞号"]


def test_forgetting_a_chat_removes_lore_only_it_supported() -> None:
    book = LoreBook((LoreEntry("手写", content="作者写的", keys=("手写",)),
                     LoreEntry("甲乙", content="两局", keys=("甲",), sources=("jA", "jB")),
                     LoreEntry("只甲", content="一局", keys=("只",), sources=("jA",))))
    kept, removed = forget_chat(book, "jA")
    assert removed == ["只甲"]
    assert [(e.title, e.sources) for e in kept.entries] == [("手写", ()), ("甲乙", ("jB",))]


def test_adopt_never_overwrites_authored_lore() -> None:
    book = LoreBook((LoreEntry("林溯", content="作者写的林溯", keys=("林溯",)),))
    merged = adopt(book, propose_from_handbook(HANDBOOK))
    assert [e.title for e in merged.entries] == ["林溯", "海鹞号"] and merged.entries[0].content == "作者写的林溯"


def test_card_delete_chat_forgets_lore_by_source(tmp_path: Path) -> None:
    lines: list[Activity] = []
    layout = CardLayout(tmp_path / "卡")
    layout.memory_dir.mkdir(parents=True)
    layout.handbook.write_text(HANDBOOK, encoding="utf-8")
    with Card.open(tmp_path / "卡", background=False, on_activity=lines.append) as card:
        card.adopt_lore(card.propose_lore(min_sources=1))
        assert card.lore is not None and len(card.lore.entries) == 3
        card.delete_chat("jB")
        book = card.lore
        assert book is not None and [(e.title, e.sources) for e in book.entries] == [("林溯", ("jA",)),
                                                                                   ("海鹞号", ("jA",))]
    assert any(a.kind == "lore" and "「林汐」" in a.text for a in lines)
