"""A long chat end to end through Card and Chat (issue 24).

1,000 turns in the default run (a few seconds); ``nox -s bench`` runs it at 100,000
turns (``LIYUAN_LONG_TURNS=100000``, minutes). The side model is the scripted
summariser (replies made by rule, labelled scripted); vector memory uses the hashing
embedder. The chat is written by :func:`harness.bench.longchat.build_chat` with ids that
never repeat (the 8-hex ids collide by about 50,000 turns; widening them is issue 26).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.bench.longchat import CHAR, USER, build_chat, fill_store, memory_config, replies_on_branch
from harness.eval.scripted import scripted_summariser
from liyuan import Activity, Card
from liyuan.session.state import Ledger, state_from_branch

TURNS = int(os.environ.get("LIYUAN_LONG_TURNS", "1000"))


@pytest.mark.slow
def test_a_long_chat_runs_end_to_end(tmp_path: Path) -> None:
    card_dir = tmp_path / "卡"
    path, ids = build_chat(card_dir, "long", TURNS, ledger=True)
    replies = replies_on_branch(path)
    fill_store(card_dir, "long", memory_config(True).vector, min(5000, TURNS // 3), replies)
    seen: list[Activity] = []
    with Card.open(card_dir, side_model=scripted_summariser(USER, CHAR), config=memory_config(True),
                   user_name=USER, char_name=CHAR, ids=ids, on_activity=seen.append) as card:
        chat = card.chat("long")
        first = chat.prepare("那把青伞是谁留下的？")
        assert first.recall, "the first recall after the open found nothing"
        assert first.summary is not None and len(first.messages) < 40
        for turn in range(12):
            chat.record(f"（脚本回复）第{turn}次：她摇了摇头。", ledger=Ledger(location=f"第{turn}个渡口"))
            chat.prepare(f"第{turn}次追问：是谁？")
        chat.record("（脚本回复）她终于开口。")
        rerolled = chat.reroll()
        chat.record("（脚本回复）另一种回答。")
        assert rerolled.user_text == "第11次追问：是谁？"
        assert state_from_branch(chat.branch()) == Ledger(location="第11个渡口")
        chat.rewind(replies[len(replies) // 2])
        chat.prepare("回到中途。")
        chat.record("（脚本回复）中途的另一条路。")
        card.flush()
        length = len(chat.branch())
    errors = [a.text for a in seen if a.kind == "error"]
    assert errors == []
    with Card.open(card_dir, config=memory_config(False), ids=ids) as again:
        assert len(again.chat("long").branch()) == length
