"""Issue 38 item 1: the rules of ``chat.edit`` / ``chat.delete`` (refusals, branches, the
turn record while the relay is rewritten, what a far-back edit costs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from liyuan import Card, Completion, FunctionModel, MemoryConfig, ModelRequest
from liyuan.app.chat import Chat
from liyuan.clock import counter_ids, fixed_clock
from liyuan.errors import ConfigError, StateError, TreeError
from liyuan.story.scribe import SUMMARY_HEADINGS
from liyuan.vector.config import VectorConfig

SCRIPTED = "（测试脚本写的摘要，不是模型输出）"
# settle_turns=0: these tests are about what an edit takes back, so the rewrite runs at once;
# test_settle.py shows an edit holding it for the window like a swipe.
CONFIG = MemoryConfig(every_n_turns=6, keep=2, min_chars=500, settle_turns=0)


def _summary(request: ModelRequest) -> Completion:
    return Completion("\n\n".join(f"{h}\n- {SCRIPTED}" for h in SUMMARY_HEADINGS), provenance="scripted")


@pytest.fixture
def card(tmp_path: Path) -> Iterator[Card]:
    opened = Card.open(tmp_path / "cards" / "雾港", user_name="阿简", char_name="林溯",
                       side_model=FunctionModel(_summary), config=CONFIG, background=False, auto_sync=False,
                       clock=fixed_clock(), ids=counter_ids("e-"))
    try:
        yield opened
    finally:
        opened.close(10.0)


def _play(chat: Chat, first: int, last: int) -> None:
    for turn in range(first, last + 1):
        chat.prepare(f"第{turn}轮的问话。")
        chat.record(f"第{turn}轮的回答，" + "潮" * 100)


def _reply(chat: Chat, turn: int) -> str:
    return next(e.id for e in chat.branch() if e.role == "assistant" and e.text.startswith(f"第{turn}轮的"))


def test_bad_edits_are_refused_and_write_nothing(card: Card) -> None:
    chat = card.chat("a")
    _play(chat, 1, 2)
    target = _reply(chat, 1)
    size = len(chat.tree)
    with pytest.raises(ConfigError):
        chat.edit(target, "  ")
    with pytest.raises(ConfigError):
        chat.edit(target, chat.tree.get(target).text)  # type: ignore[union-attr]
    with pytest.raises(TreeError):
        chat.edit("no-such-id", "新的")
    chat.prepare("第3轮的问话。")
    with pytest.raises(StateError, match="record"):
        chat.delete(target)  # between the user's words and their reply
    assert len(chat.tree) == size + 1  # only the user's words
    chat.record("第3轮的回答。")
    chat.delete(target)
    with pytest.raises(StateError, match="删掉"):
        chat.delete(target)
    with pytest.raises(StateError, match="删掉"):
        chat.edit(target, "复活")


def test_an_edit_reads_on_its_branch_only(card: Card) -> None:
    chat = card.chat("a")
    _play(chat, 1, 3)
    target = _reply(chat, 2)
    before_edit = chat.tree.leaf_id
    chat.edit(target, "第2轮的回答，改过了。")
    history = "\n".join(m.content for m in chat.preview("看看").messages)
    assert "第2轮的回答，改过了。" in history and "第2轮的回答，潮" not in history
    chat.rewind(before_edit)  # the branch without the edit
    history = "\n".join(m.content for m in chat.preview("看看").messages)
    assert "第2轮的回答，潮" in history and "改过了" not in history


def test_the_turn_record_says_what_was_withheld_until_the_rewrite_lands(card: Card) -> None:
    chat = card.chat("a")
    _play(chat, 1, 30)
    stale = [e.id for e in chat.tree if e.custom_type == "rp-summary"]
    assert len(stale) >= 2
    target = _reply(chat, 2)
    # The edit is written, and the rewrite is not run yet: the turn withholds every summary.
    lane_work: list[object] = []
    chat._lane.submit = lane_work.append  # type: ignore[method-assign]
    chat.edit(target, "第2轮的回答，改过了。")
    record = chat.preview("下一句").record
    assert record is not None and record.withheld is not None
    withheld = record.to_json()["withheld"]
    assert withheld["summaries"] == [f"entry:{s}" for s in stale]
    assert withheld["revised"] == [f"entry:{target}"]
    assert withheld["rewrite_until"] is not None
    assert record.to_json()["format"] == "liyuan-turn-record/6"
    assert chat.summary is None  # no summary left that did not cover turn 2
    for work in lane_work:
        work()  # type: ignore[operator]
    record = chat.preview("下一句").record
    assert record is not None and record.withheld is None
    assert chat.summary is not None


def test_a_far_back_edit_is_rewritten_a_period_at_a_time(card: Card) -> None:
    chat = card.chat("a")
    _play(chat, 1, 60)
    landed = len([e for e in chat.tree if e.custom_type == "rp-summary"])
    chat.edit(_reply(chat, 1), "第1轮的回答，改过了。")
    new = [e for e in chat.tree if e.custom_type == "rp-summary"][landed:]
    # each rewrite compaction covers one period (six turns), oldest first, until it covers
    # as far as the withheld ones did; 58 turns to redo at six a time: at least nine compactions
    assert all(e.data["turns"] == CONFIG.every_n_turns for e in new[:-1])
    assert len(new) >= 9
    assert "rewriteUntil" in new[0].data and "rewriteUntil" not in new[-1].data


def test_an_edit_takes_back_story_chunks_only_never_an_imported_document(tmp_path: Path) -> None:
    config = MemoryConfig(every_n_turns=6, keep=2, min_chars=500, settle_turns=0,
                          vector=VectorConfig(enabled=True, embedder="hash"))
    opened = Card.open(tmp_path / "cards" / "雾港", user_name="阿简", char_name="林溯",
                       side_model=FunctionModel(_summary), config=config, background=False, auto_sync=False,
                       clock=fixed_clock(), ids=counter_ids("e-"))
    try:
        chat = opened.chat("a")
        _play(chat, 1, 12)
        vector = chat.vector
        assert vector is not None
        target = _reply(chat, 2)
        note = vector.add_manual("码头的老规矩：" + chat.tree.get(target).text)  # type: ignore[union-attr]
        chat.delete(target)
        assert [c.id for c in vector.store.chunks() if c.id in note] == note  # the imported note stays
        assert not any("第2轮的回答，潮" in c.text for c in vector.store.chunks("narrative"))
    finally:
        opened.close(10.0)
