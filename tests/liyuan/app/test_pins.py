"""Issue 38 item 4: pinned facts reach every later turn, verbatim, through every layer.

``chat.pin(text)`` keeps a fact in every later turn of that chat, ``card.pin(text)`` in every
chat of the card: inside the shared envelope (they come out of the lore share first), listed in
``turn.record.pins``, untouched by compactions, recaps and merges; ``unpin`` removes one; a pin
larger than its share is refused with a clear error and nothing is written. Every summary,
recap and merge reply here is hand-written (a scripted side model), never model output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from liyuan import Card, FunctionModel, MemoryConfig, ModelRequest
from liyuan.app.chat import Chat
from liyuan.app.turn import Turn
from liyuan.clock import counter_ids, fixed_clock
from liyuan.context.record import RECORD_FORMAT
from liyuan.errors import ConfigError, MemoryFileError
from liyuan.lore.model import LoreBook, LoreEntry
from liyuan.story.scribe import SUMMARY_HEADINGS

from ..card.test_fixtures import merge_for, recap

SUMMARY = "\n\n".join(f"{h}\n- 测试用的脚本摘要（不是模型输出）" for h in SUMMARY_HEADINGS)
BODY = "雾" * 200
FACT = "林溯左手的小指缺了一截，是十年前在北礁救人时冻掉的。"
CARD_FACT = "灯塔的雾笛每到整点响三声。"
CONFIG = MemoryConfig(every_n_turns=6, keep=2, settle_turns=0)


def side(request: ModelRequest) -> str:
    """Hand-written replies per purpose (no model wrote them)."""
    if request.purpose == "summary":
        return SUMMARY
    if request.purpose == "recap":
        return recap("雾港的一局", "- 脚本复盘（不是模型输出）。")
    return merge_for("jA")


def opened(path: Path, config: MemoryConfig = CONFIG) -> Card:
    return Card.open(path / "雾港", user_name="阿简", char_name="林溯", side_model=FunctionModel(side),
                     config=config, background=False, clock=fixed_clock(), ids=counter_ids("e-"), auto_sync=False)


def play(chat: Chat, i: int) -> Turn:
    turn = chat.prepare(f"第{i}拍。{BODY}")
    chat.record(f"回应{i}。{BODY}")
    return turn


def sent(turn: Turn) -> str:
    return "\n".join(m.content for m in turn.messages)


def test_a_pinned_fact_reaches_every_later_turn_after_two_compactions_and_a_sync(tmp_path: Path) -> None:
    with opened(tmp_path) as card:
        chat = card.chat("jA")
        play(chat, 0)
        pin = chat.pin(FACT)
        card_pin = card.pin(CARD_FACT)
        for i in range(1, 41):
            turn = play(chat, i)
            assert FACT in sent(turn) and CARD_FACT in sent(turn), i
            assert turn.record is not None
            assert [(p.id, p.scope) for p in turn.record.pins] == [(card_pin.id, "card"), (pin.id, "chat")]
            if i == 20:
                assert card.sync().merged == "ok"
        assert sum(1 for e in chat.tree if e.custom_type == "rp-summary") >= 2
        assert FACT not in (chat.summary or "")  # the summaries never held it: the pin does
        other = play(card.chat("jB"), 1)  # a card pin reaches every chat; a chat pin only its own
        assert CARD_FACT in sent(other) and FACT not in sent(other)
        record = turn.record.to_json()
        assert record["format"] == RECORD_FORMAT
        assert record["pins"] == [{"id": card_pin.id, "scope": "card", "chars": len(CARD_FACT)},
                                  {"id": pin.id, "scope": "chat", "chars": len(FACT)}]
        lore = next(b for b in record["blocks"] if b["kind"] == "lore")
        assert lore["sources"][:2] == [f"pin:{card_pin.id}", f"pin:{pin.id}"]
        assert chat.unpin(pin.id) is True
        after = play(chat, 41)
        assert FACT not in sent(after) and CARD_FACT in sent(after)
        assert card.unpin(card_pin.id) is True
        assert CARD_FACT not in sent(play(chat, 42))
        assert chat.unpin(pin.id) is False  # already gone


def test_pins_are_kept_beside_the_card_and_read_again_on_reopen(tmp_path: Path) -> None:
    with opened(tmp_path) as card:
        pin = card.chat("jA").pin(FACT)
        card.pin(CARD_FACT)
    stored = json.loads((tmp_path / "雾港" / "置顶.json").read_text(encoding="utf-8"))
    assert [p["text"] for p in stored["pins"]] == [FACT, CARD_FACT]
    with opened(tmp_path) as card:
        chat = card.chat("jA")
        assert [p.text for p in chat.pins()] == [CARD_FACT, FACT]
        assert [p.text for p in card.pins()] == [CARD_FACT]
        assert FACT in sent(play(chat, 1))
        assert card.delete_chat("jA")
        assert pin.id not in {p.id for p in card.chat("jA").pins()}  # a deleted chat's pins go with it


def test_a_pin_larger_than_its_share_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    config = CONFIG.with_changes(budget_chars=1000, pin_share=0.1)  # 100 characters for all pins
    with opened(tmp_path, config) as card:
        chat = card.chat("jA")
        chat.pin("甲" * 60)
        before = (tmp_path / "雾港" / "置顶.json").read_bytes()
        with pytest.raises(ConfigError, match="置顶"):
            chat.pin("乙" * 60)  # 60 + 60 > 100: refused, never cut
        with pytest.raises(ConfigError, match="置顶"):
            card.pin("丙" * 60)  # a card pin counts in every chat's share
        with pytest.raises(ConfigError):
            chat.pin("   ")
        assert (tmp_path / "雾港" / "置顶.json").read_bytes() == before
        turn = play(chat, 1)
        assert "甲" * 60 in sent(turn) and "乙" not in sent(turn)


def test_pins_take_the_lore_share_first_and_the_book_reports_what_no_longer_fits(tmp_path: Path) -> None:
    config = CONFIG.with_changes(budget_chars=1000, lore_share=0.3, pin_share=0.2)  # 300 for lore, pins ≤ 200
    with opened(tmp_path, config) as card:
        card.save_lore(LoreBook(entries=(LoreEntry(title="北礁", content="礁" * 150, constant=True),)))
        chat = card.chat("jA")
        assert "礁" * 150 in sent(play(chat, 1))  # alone it fits
        chat.pin("钉" * 150)
        turn = play(chat, 2)
        assert "钉" * 150 in sent(turn) and "礁" * 150 not in sent(turn)
        assert turn.lore is not None and [c.title for c in turn.lore.cut] == ["北礁"]  # reported, not silent
        assert turn.record is not None
        assert turn.record.of("lore")[0].chars <= 300 + len("【相关设定】\n")


def test_a_pins_file_that_does_not_read_is_said_and_the_turn_goes_on(tmp_path: Path) -> None:
    with opened(tmp_path) as card:
        chat = card.chat("jA")
        chat.pin(FACT)
        path = tmp_path / "雾港" / "置顶.json"
        path.write_text("{不是 JSON", encoding="utf-8")  # a bad hand edit
        turn = play(chat, 1)
        assert FACT not in sent(turn)
        assert any(a.kind == "error" and "置顶.json 读不了" in a.text for a in card.activity)
        assert path.read_text(encoding="utf-8") == "{不是 JSON"  # left for the user to mend
        with pytest.raises(MemoryFileError, match=r"置顶\.json"):
            chat.pin("再钉一条")
        assert path.read_text(encoding="utf-8") == "{不是 JSON"


def test_pins_over_a_share_that_shrank_are_sent_whole_and_said_once(tmp_path: Path) -> None:
    with opened(tmp_path) as card:
        card.chat("jA").pin("甲" * 300)
    with opened(tmp_path, CONFIG.with_changes(pin_share=0.02)) as card:  # 86 characters now
        chat = card.chat("jA")
        for i in range(2):
            assert "甲" * 300 in sent(play(chat, i))  # never cut
        assert sum(1 for a in card.activity if a.kind == "error" and "置顶比现在的份额多" in a.text) == 1
