"""A card opened without a side model (issue 37, item 6): it says so once, and each turn's
verbatim history stays within ``MemoryConfig.history_max_chars``, the cut reported in the record."""

from __future__ import annotations

from pathlib import Path

from liyuan import Activity, Card, MemoryConfig
from liyuan.context.window import HISTORY_MAX_CHARS

TURN = "雾" * 200  # 200 characters a message: 200 turns hold about 80,000


def test_turn_200_without_a_side_model_sends_no_more_than_the_limit_and_says_why_once(tmp_path: Path) -> None:
    seen: list[Activity] = []
    card = Card.open(tmp_path / "雾港", user_name="阿简", char_name="林溯", background=False, on_activity=seen.append)
    said_at_open = [a for a in seen if "旁路模型" in a.text]
    assert len(said_at_open) == 1 and "history_max_chars" in said_at_open[0].text
    chat = card.chat("jA")
    for i in range(199):
        chat.prepare(f"第{i}拍。{TURN}")
        chat.record(f"回应{i}。{TURN}")
    turn = chat.prepare(f"第199拍。{TURN}")
    assert turn.record is not None
    history = turn.record.of("history")[0]
    sent = history.chars + turn.record.of("user")[0].chars
    assert sent <= HISTORY_MAX_CHARS, f"turn 200 sent {sent} characters of history ({len(turn.messages)} messages)"
    assert turn.record.chars < HISTORY_MAX_CHARS + 2000  # the data blocks add little
    cut = turn.record.history_cut
    assert cut is not None and cut.limit_chars == HISTORY_MAX_CHARS
    assert cut.dropped_turns > 0 and cut.dropped_chars > 0
    assert cut.kept_turns + cut.dropped_turns == 200
    assert turn.record.to_json()["history_cut"]["dropped_turns"] == cut.dropped_turns
    assert history.cut is not None and history.cut.action == "trimmed"
    about_cuts = [a for a in seen if a.kind == "compact" and "略去" in a.text and a.chat_id == "jA"]
    assert len(about_cuts) == 1  # said once, not every turn
    card.close()


def test_the_limit_is_a_setting_and_a_short_chat_is_not_cut(tmp_path: Path) -> None:
    config = MemoryConfig(history_max_chars=3000)
    with Card.open(tmp_path / "雾港", user_name="阿简", char_name="林溯", background=False, config=config) as card:
        chat = card.chat("jA")
        turn = chat.prepare("开门。")
        assert turn.record is not None and turn.record.history_cut is None
        assert "history_cut" not in turn.record.to_json()
        for i in range(20):
            chat.record(f"回应{i}。{TURN}")
            turn = chat.prepare(f"第{i}拍。{TURN}")
        assert turn.record is not None and turn.record.history_cut is not None
        assert sum(len(m.content) for m in turn.messages[:-1]) + len(turn.messages[-1].content) <= 3000 + 500
        assert turn.messages[-1].content.endswith(f"第19拍。{TURN}")  # the user's words are never cut
