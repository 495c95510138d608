"""Quickstart: one card, two chats, fifty turns, a compaction, a recap and merge, a forgotten chat.

Run it: ``python examples/quickstart.py [FOLDER]`` (default: a temporary folder).

The side model here is :func:`liyuan.testing.placeholder_side_model`, the library's test
double: rule-made placeholder replies, labelled, not model output (no capable chat model
runs where this is tested). The role-play replies are scripted lines too. Everything else is the real library, used
exactly as an app would use it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from liyuan import Activity, Card, Ledger
from liyuan.model import ChatMessage
from liyuan.testing import placeholder_side_model

USER_LINES = ["我把伞递给她。", "雾太大了，今晚能借宿吗？", "我去看看那台坏掉的电台。", "灯室的曲柄又卡住了。",
              "北礁那边好像有光。", "我把海图摊在桌上。"]


def role_play_model(messages: list[ChatMessage]) -> str:
    """Your own model goes here. This stand-in writes a scripted line (not model output)."""
    n = sum(1 for m in messages if m.role == "user")
    return f"（脚本回复，不是模型输出）林溯看了你一眼，第 {n} 次把马灯往你那边推了推，没说话。" * 3


def main(root: Path) -> list[ChatMessage]:
    """Play the story; returns the messages of the last turn (checked by the test suite)."""
    log: list[Activity] = []
    # --8<-- [start:quickstart]
    card = Card.open(root / "cards" / "雾港", side_model=placeholder_side_model(),
                     user_name="阿简", char_name="林溯", on_activity=log.append)
    chat = card.chat("jA", title="大雾夜借宿", greeting="铁门外起了大雾。")
    for n in range(50):
        turn = chat.prepare(USER_LINES[n % len(USER_LINES)])      # appends the user's words
        reply = role_play_model(turn.messages)                    # your model, your system prompt
        chat.record(reply, ledger=Ledger(time=f"第 {n // 10 + 1} 天", location="雾港灯塔"))
    chat.flush()                                                  # compaction ran in the background

    other = card.chat("jB", title="茶田来信")                    # a second chat of the same card
    for words in ("我拆开茶田寄来的信。", "信里夹着一片老梨树的叶子。"):
        other.prepare(words)
        other.record(role_play_model([]))
    first = card.sync()                                           # recap both chats, merge them

    card.delete_chat("jB")                                        # forget what only jB supported
    second = card.sync()

    turn = chat.prepare("天亮了，我们去北礁。")                  # 【前情提要】 + kept turns + tail
    # --8<-- [end:quickstart]
    chat.record(role_play_model(turn.messages))
    card.close()

    assert chat.summary is not None, "fifty turns must have compacted at least once"
    assert first is not None and sorted(first.recapped) == ["jA", "jB"] and first.merged == "ok"
    assert second is not None and second.forgotten == ["jB"]
    openings = [m for m in turn.messages if m.content.startswith("【前情提要】")]
    assert len(openings) == 1 and turn.messages[0] is openings[0]
    assert not [a for a in log if a.kind == "error"], [a.text for a in log if a.kind == "error"]
    for activity in log:
        print(f"[{activity.kind}] {activity.chat_id or '卡'}：{activity.text}")
    return turn.messages


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder))
