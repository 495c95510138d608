"""What an app can inspect: each turn's record, a preview that writes nothing, outcomes on activity lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from liyuan import Completion, FunctionModel, Ledger, MemoryConfig, ModelRequest
from liyuan.card.files import write_memory_file
from liyuan.card.sync import SyncOutcome
from liyuan.compaction import CompactionOutcome
from liyuan.context.record import RECORD_FORMAT

from .cards import open_card
from .test_chat import SUMMARY, play, summariser

RESIDENT = "\n\n".join(f"## 第{i}节\n" + "往局里的一件事。" * 20 for i in range(1, 12))



def test_the_record_lists_every_block_with_sizes_sources_and_the_budgets_cut(tmp_path: Path) -> None:
    config = MemoryConfig(keep=1, every_n_turns=1, min_chars=0)
    with open_card(tmp_path, background=False, side_model=summariser(), config=config) as card:
        write_memory_file(card.memory.layout.resident, RESIDENT)
        chat = card.chat("jA", greeting="铁门外起了大雾。")
        play(card, 3)
        chat.prepare("我把伞递给她。", ledger=Ledger(location="灯塔"))
        chat.record("她接过伞。", ledger=Ledger(location="灯塔", time="夜里"))
        turn = chat.prepare("灯室在哪？", extra=["【作者注】慢一点。"])
    record = turn.record
    assert record is not None
    kinds = [b.kind for b in record.blocks]
    assert kinds == ["summary", "resident", "history", "state", "extra", "user", "framing"]
    summary, resident = record.of("summary")[0], record.of("resident")[0]
    assert summary.sources[0].startswith("entry:") and summary.chars == len(turn.summary or "")
    assert resident.sources == ("file:常驻摘要.md",)
    assert resident.cut is not None and resident.cut.action == "trimmed" and resident.cut.before_chars == len(RESIDENT)
    assert resident.chars == len(turn.resident or "") < len(RESIDENT)
    state = record.of("state")[0]
    snapshot = [e for e in chat.branch() if e.custom_type == "rp-state"][-1]
    assert state.sources == (f"entry:{snapshot.id}",)
    history = record.of("history")[0]
    kept = [e.id for e in chat.branch() if e.type == "message"][-3:-1]  # the last reply's turn, before the new words
    assert list(history.sources[-2:]) == [f"entry:{i}" for i in kept]
    assert record.of("user")[0].sources == (f"entry:{turn.user_entry.id}",)  # type: ignore[union-attr]
    assert record.messages == len(turn.messages) and record.chars == sum(len(m.content) for m in turn.messages)
    assert record.chars == sum(b.chars for b in record.blocks) and record.tokens == sum(b.tokens for b in record.blocks)
    data = record.to_json()
    assert data["format"] == RECORD_FORMAT and json.loads(json.dumps(data, ensure_ascii=False)) == data
    assert data["blocks"][1]["budget"]["action"] == "trimmed" and "按段落截到" in data["blocks"][1]["budget"]["reason"]


def test_a_resident_summary_with_no_room_is_listed_as_dropped_with_the_reason(tmp_path: Path) -> None:
    with open_card(tmp_path, background=False) as card:
        write_memory_file(card.memory.layout.resident, RESIDENT)
        chat = card.chat("jA", greeting="起雾了。")
        turn = chat.prepare("在吗？", ledger=Ledger(items=["很长的物品" * 10] * 80))
    assert turn.resident is None and turn.record is not None
    resident = turn.record.of("resident")[0]
    assert not resident.sent and resident.chars == 0 and resident.cut is not None
    assert resident.cut.action == "dropped" and "整段不送" in resident.cut.reason


def test_preview_assembles_the_same_turn_and_writes_nothing(tmp_path: Path) -> None:
    with open_card(tmp_path, background=False) as card:
        chat = card.chat("jA", greeting="起雾了。")
        play(card, 2)
        before = list(chat.tree)
        shown = chat.preview("灯室在哪？")
        assert list(chat.tree) == before and shown.user_entry is None
        sent = chat.prepare("灯室在哪？")
    assert shown.messages == sent.messages and shown.injection == sent.injection
    assert shown.record is not None and sent.record is not None
    assert [b.kind for b in shown.record.blocks] == [b.kind for b in sent.record.blocks]


def test_activity_lines_carry_their_outcome_objects(tmp_path: Path) -> None:
    def side(request: ModelRequest) -> Completion:
        if request.purpose == "summary":
            return Completion(SUMMARY)
        return Completion("# 复盘\n\n## 剧情脉络\n- 脚本复盘（不是模型输出）")

    seen = []
    with open_card(tmp_path, background=False, side_model=FunctionModel(side), on_activity=seen.append, auto_sync=False,
                   config=MemoryConfig(keep=1, every_n_turns=1, min_chars=0)) as card:
        card.chat("jA", greeting="起雾了。")
        assert seen == []  # auto_sync=False: entering the chat started no sync
        play(card, 3)
        compaction = [a for a in seen if a.kind == "compact"]
        assert compaction and all(isinstance(a.outcome, CompactionOutcome) for a in compaction)
        assert any(a.outcome.kind == "compacted" for a in compaction)  # type: ignore[union-attr]
        card.sync()
    synced = [a for a in seen if a.kind == "sync"]
    assert synced and all(isinstance(a.outcome, SyncOutcome) for a in synced)


def test_the_recap_budget_is_a_setting(tmp_path: Path) -> None:
    calls: list[ModelRequest] = []

    def side(request: ModelRequest) -> Completion:
        calls.append(request)
        return Completion("# 复盘\n\n## 剧情脉络\n- 脚本复盘（不是模型输出）")

    with open_card(tmp_path, background=False, side_model=FunctionModel(side), auto_sync=False,
                   config=MemoryConfig(every_n_turns=0, recap_input_max_chars=150)) as card:
        card.chat("jA", greeting="起雾了。")
        play(card, 3)
        card.sync()
    recap = next(r for r in calls if r.purpose == "recap")
    assert "篇幅所限，这一局最早的" in recap.messages[-1].content and "第0拍" not in recap.messages[-1].content


def _sums(turn: object) -> None:
    record = turn.record  # type: ignore[attr-defined]
    messages = turn.messages  # type: ignore[attr-defined]
    assert record is not None
    assert record.chars == sum(len(m.content) for m in messages) == sum(b.chars for b in record.blocks)
    assert record.tokens == sum(b.tokens for b in record.blocks)
    framing = record.of("framing")[0]
    assert framing.chars >= 0 and framing.sources == ()


def test_the_blocks_add_up_to_the_turn_in_every_shape_of_turn(tmp_path: Path) -> None:
    """No summary, a summary, a resident summary, a ledger, extra blocks, a regenerate, merged
    user turns: in each the blocks (separators included) add up to what was sent."""
    config = MemoryConfig(keep=1, every_n_turns=2, min_chars=0)
    with open_card(tmp_path, background=False, side_model=summariser(), config=config) as card:
        chat = card.chat("jA", greeting="铁门外起了大雾。")
        _sums(chat.prepare("第一句。"))  # greeting + words, no summary yet
        chat.record("回话一。")
        _sums(chat.prepare("第二句。", ledger=Ledger(location="灯塔", items=["伞"]), extra=["【作者注】慢。"]))
        chat.record("回话二。", ledger=Ledger(location="灯塔"))
        play(card, 4)
        write_memory_file(card.memory.layout.resident, RESIDENT)
        turn = chat.prepare("第三句。", extra=["一", "二"])
        assert turn.summary and turn.resident  # both summaries in the 【前情提要】 message
        _sums(turn)
        chat.record("回话三。")
        chat.prepare("第四句。")
        _sums(chat.reroll(extra=["【作者注】"]))  # the user's words are already on the branch


@pytest.mark.slow
def test_closed_chats_with_a_big_turn_each_leave_no_text_held_by_the_record(tmp_path: Path) -> None:
    """Issue 37, item 8: the token estimate's cache held whole texts (up to 2048 of them) after
    their chats were closed; the record holds sizes, so the texts go with the chats."""
    import gc
    import tracemalloc

    big = 200_000  # characters of one user turn (ASCII: one byte each)
    chats = 24
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with open_card(tmp_path, background=False) as card:
            for n in range(chats):
                chat = card.chat(f"j{n}")
                turn = chat.prepare(f"turn {n} " + "mist " * (big // 5))
                assert turn.record is not None and turn.record.of("user")[0].chars > big
                chat.record("ok")
                del chat, turn
        del card
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 2_000_000, f"{held / 1e6:.1f} MB still held after {chats} closed chats of {big / 1e6:.1f} MB turns"
