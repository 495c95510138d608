"""A long chat end to end through Card and Chat (issue 24).

1,000 turns in the default run (a few seconds); ``nox -s bench`` runs it at 100,000
turns (``LIYUAN_LONG_TURNS=100000``, minutes). The side model is the scripted
summariser (replies made by rule, labelled scripted); vector memory uses the hashing
embedder. The chat is written by :func:`harness.bench.longchat.build_chat` with ids that
never repeat (the 8-hex ids collide by about 50,000 turns; widening them is issue 26).
"""

from __future__ import annotations

import json
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


def test_the_back_to_back_row_says_how_far_the_relay_reached_and_judges_it(tmp_path: Path) -> None:
    """The bench counts the user turns up to the newest summary's anchor, and the verdict
    says a relay that stayed a whole period behind the inline run as missed."""
    from harness.bench.backtoback import back_to_back
    from harness.eval.figures import PERIOD, long_markdown

    row = back_to_back(tmp_path, turns=60, played=40, side_ms=0.0, gap_ms=0.0)
    inline = row["inline"]
    assert inline["summaries"] >= 1
    # 100 turns, the newest summary keeps at most keep + period turns uncovered
    assert 100 - 6 - PERIOD <= inline["covered_turns"] <= 100 - 6

    snapshot = json.loads((Path(__file__).resolve().parents[2] / "sim/eval/long.json").read_text(encoding="utf-8"))
    table = {**snapshot, "back_to_back": [row]}
    behind = {**row, "background": {**row["background"], "covered_turns": inline["covered_turns"] - PERIOD}}
    assert "接力到的轮次不比一轮一轮等着压时少一个周期（30 轮）以上：达到" in long_markdown(table)
    assert "接力到的轮次不比一轮一轮等着压时少一个周期（30 轮）以上：**没达到**" in long_markdown(
        {**table, "back_to_back": [behind]})
