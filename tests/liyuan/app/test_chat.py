"""The facade as an app uses it: a turn, branches, background work, failures, agent mode."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from liyuan import (
    Activity,
    AsyncCard,
    Card,
    Completion,
    ConfigError,
    FunctionModel,
    Ledger,
    MemoryConfig,
    ModelError,
    ModelRequest,
    StateError,
    TreeError,
)
from liyuan.app.activity import Lane
from liyuan.clock import counter_ids
from liyuan.story.scribe import SUMMARY_HEADINGS

from .cards import open_card

SUMMARY = "\n\n".join(f"{h}\n- 测试用的脚本摘要（不是模型输出）" for h in SUMMARY_HEADINGS)
BODY = "雾" * 80


def summariser(gate: threading.Event | None = None) -> FunctionModel:
    def answer(request: ModelRequest) -> Completion:
        if gate is not None:
            assert gate.wait(10)
        if request.purpose != "summary":
            raise ModelError(f"这个测试不该请求 {request.purpose}")
        return Completion(SUMMARY)

    return FunctionModel(answer)



def play(chat_card: Card, turns: int, chat_id: str = "jA") -> None:
    chat = chat_card.chat(chat_id)
    for i in range(turns):
        chat.prepare(f"第{i}拍。{BODY}")
        chat.record(f"回应{i}。{BODY}")


def test_a_turn_appends_user_then_reply_and_the_tail_ends_with_the_users_words(tmp_path: Path) -> None:
    with open_card(tmp_path, background=False) as card:
        chat = card.chat("jA", greeting="铁门外起了大雾。")
        turn = chat.prepare("我把伞递给她。", ledger=Ledger(location="灯塔"))
        assert [m.role for m in turn.messages] == ["assistant", "user"]
        assert turn.messages[-1].content.endswith("我把伞递给她。")
        assert "【世界状态】" in turn.messages[-1].content and "灯塔" in turn.messages[-1].content
        reply = chat.record("她没接。", ledger=Ledger(location="灯塔二楼"))
        roles = [(e.type, e.role) for e in chat.branch()]
        assert roles == [("message", "assistant"), ("message", "user"), ("message", "assistant"), ("custom", None)]
        assert reply.parent_id == turn.user_entry.id
        # the next turn shows the ledger recorded with the reply
        assert "灯塔二楼" in chat.prepare("然后呢？").messages[-1].content


def test_record_without_a_waiting_user_message_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    with open_card(tmp_path, background=False) as card:
        chat = card.chat("jA", greeting="雾。")
        before = len(chat.tree)
        with pytest.raises(StateError, match="prepare") as refused:
            chat.record("没人问我。")
        # a state error, not a caller's bad argument: an app's ValueError handler must not swallow it
        assert not isinstance(refused.value, ConfigError | ValueError)
        assert len(chat.tree) == before
        with pytest.raises(ConfigError):
            chat.prepare("   ")


def test_reroll_forks_a_sibling_reply_and_rewind_forks_from_the_entry(tmp_path: Path) -> None:
    with open_card(tmp_path, background=False) as card:
        chat = card.chat("jA")
        first = chat.prepare("开门。")
        old = chat.record("她没开。")
        again = chat.reroll()
        assert again.user_entry.id == first.user_entry.id and again.messages[-1].content.endswith("开门。")
        new = chat.record("她开了门。")
        assert new.parent_id == old.parent_id == first.user_entry.id and new.id != old.id
        assert [e.text for e in chat.branch() if e.role == "assistant"] == ["她开了门。"]
        chat.rewind(first.user_entry.id)
        assert chat.tree.leaf_id == first.user_entry.id
        with pytest.raises(TreeError):
            chat.rewind("no-such-entry")


def test_compaction_replaces_old_turns_with_one_opening_message(tmp_path: Path) -> None:
    with open_card(tmp_path, side_model=summariser(), background=False) as card:
        play(card, 36)
        chat = card.chat("jA")
        assert chat.summary == SUMMARY
        turn = chat.prepare("天亮了。")
        assert turn.messages[0].content.startswith("【前情提要】") and turn.summary == SUMMARY
        assert sum(m.content.startswith("【前情提要】") for m in turn.messages) == 1
        assert sum(m.role == "user" for m in turn.messages) == 1 + 6 + 1  # summary, 6 kept turns, this one
        assert [a.text[:6] for a in card.activity if a.kind == "compact"] == ["正在压缩前情", "前情已压缩："]


def test_record_returns_before_the_compaction_and_the_next_prepare_does_not_wait_for_it(tmp_path: Path) -> None:
    gate = threading.Event()
    card = open_card(tmp_path, side_model=summariser(gate))
    try:
        play(card, 36)  # the 36th record queues the compaction, which waits on the gate
        chat = card.chat("jA")
        assert not chat.flush(timeout=0.05) and chat.summary is None
        turn = chat.prepare("下一拍。")  # returns with the gate still shut: no wait for the lane
        assert not gate.is_set() and turn.summary is None
        gate.set()
        assert chat.flush(10) and chat.summary is None  # ready mid-turn: held until the reply
        chat.record("回应。")
        assert chat.summary == SUMMARY
        assert not [a for a in card.activity if "丢弃" in a.text]  # nothing was thrown away as stale
    finally:
        gate.set()
        card.close()


def test_a_failing_side_model_never_raises_into_the_turn(tmp_path: Path) -> None:
    def broken(request: ModelRequest) -> Completion:
        raise ModelError("接口超时")

    seen: list[Activity] = []
    with open_card(tmp_path, side_model=FunctionModel(broken), background=False, on_activity=seen.append) as card:
        play(card, 36)
        assert card.chat("jA").summary is None
    assert any(a.kind == "compact" and "前情压缩失败" in a.text for a in seen)


def test_whatever_the_side_model_raises_the_turn_goes_on(tmp_path: Path) -> None:
    def crash(request: ModelRequest) -> Completion:
        raise RuntimeError("boom")

    with open_card(tmp_path, side_model=FunctionModel(crash)) as card:
        play(card, 36)
        chat = card.chat("jA")
        assert chat.flush(10)
        chat.prepare("还能接着演吗？")  # the turn goes on
    assert any(a.kind == "compact" and "前情压缩失败" in a.text for a in card.activity)
    assert not [a for a in card.activity if a.kind == "error"]


def test_a_crash_in_background_work_becomes_an_error_activity_and_the_lane_goes_on() -> None:
    seen: list[Activity] = []
    lane = Lane("test", seen.append, chat_id="jA")
    done = threading.Event()
    lane.submit(lambda: 1 / 0)  # type: ignore[func-returns-value]
    lane.submit(done.set)
    assert lane.wait(10) and done.is_set()
    assert [(a.kind, a.chat_id) for a in seen] == [("error", "jA")] and "ZeroDivisionError" in seen[0].text
    assert isinstance(lane.errors[0], ZeroDivisionError)
    lane.close()


def test_a_listener_that_raises_does_not_break_the_memory(tmp_path: Path) -> None:
    def listener(_activity: Activity) -> None:
        raise ValueError("app bug")

    with open_card(tmp_path, side_model=summariser(), background=False, on_activity=listener) as card:
        play(card, 36)
        assert card.chat("jA").summary == SUMMARY


def test_without_a_side_model_nothing_is_sent_and_manual_compaction_is_refused(tmp_path: Path) -> None:
    with open_card(tmp_path, background=False) as card:
        play(card, 40)
        chat = card.chat("jA")
        assert chat.summary is None and card.sync() is None
        with pytest.raises(StateError, match="side_model"):
            chat.compact_now()
        assert card.memory.list_memory() == []


def test_manual_compaction_does_not_wait_for_the_period(tmp_path: Path) -> None:
    with open_card(tmp_path, side_model=summariser(), background=False,
                   config=MemoryConfig(every_n_turns=0)) as card:
        play(card, 10)
        chat = card.chat("jA")
        assert chat.summary is None  # period 0: no automatic compaction
        outcome = chat.compact_now()
        assert outcome.kind == "compacted" and chat.summary == SUMMARY


def test_chat_ids_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    with open_card(tmp_path, background=False) as card:
        for bad in ("../x", "a/b", "", "局"):
            with pytest.raises(ConfigError):
                card.chat(bad)
            with pytest.raises(ConfigError):
                card.delete_chat(bad)
        assert not (tmp_path / "x").exists() and card.chat_ids() == []
        assert card.delete_chat("never") is False


def test_the_budget_setting_reaches_the_turn(tmp_path: Path) -> None:
    with open_card(tmp_path, background=False, config=MemoryConfig(budget_chars=10)) as card:
        memory_dir = card.path / "记忆"
        memory_dir.mkdir(parents=True)
        resident = "# 往局记忆（同一世界更早的几局）\n\n" + "旧事。" * 200
        (memory_dir / "常驻摘要.md").write_text(resident, encoding="utf-8")
        turn = card.chat("jA").prepare("你好。")
        assert turn.resident is None and not turn.messages[0].content.startswith("【前情提要】")
    with open_card(tmp_path, background=False, ids=counter_ids("f-")) as card:
        turn = card.chat("jA").prepare("你好。")
        assert turn.resident is not None and turn.messages[0].content.startswith("【前情提要】")


def test_agent_mode_compacts_the_discussion_on_real_usage(tmp_path: Path) -> None:
    def answer(request: ModelRequest) -> Completion:
        assert request.purpose == "discussion"
        return Completion("- 已定：灯塔那一章按第二稿写（脚本摘要，不是模型输出）")

    config = MemoryConfig(discussion_window=20000, discussion_reserve=1000, discussion_keep=100)
    with open_card(tmp_path, side_model=FunctionModel(answer), background=False, config=config) as card:
        chat = card.chat("jA")
        for i in range(4):
            turn = chat.prepare(f"第{i}轮：帮我改灯塔那一章。{BODY}", mode="agent")
            assert all(not m.content.startswith("【前情提要】") for m in turn.messages)
            chat.record_tool("read_file", {"path": "灯塔.md"}, "（文件内容）" + BODY)
            chat.record(f"改好了。{BODY}", usage={"prompt_tokens": 19500, "completion_tokens": 200})
        assert any(e.custom_type == "liyuan-discussion-summary" for e in chat.branch())
        turn = chat.prepare("继续。", mode="agent")
        assert turn.messages[0].content.startswith("【讨论摘要】")
    assert any(a.kind == "discussion" for a in card.activity)


def test_the_async_twin_runs_the_same_turn(tmp_path: Path) -> None:
    async def scenario() -> list[str]:
        async with await AsyncCard.open(tmp_path / "cards" / "雾港", side_model=summariser(),
                                        user_name="阿简", char_name="林溯") as card:
            chat = await card.chat("jA")
            for i in range(36):
                await chat.prepare(f"第{i}拍。{BODY}")
                await chat.record(f"回应{i}。{BODY}")
            assert await chat.flush(10)
            turn = await chat.prepare("天亮了。")
            return [m.content[:6] for m in turn.messages]

    heads = asyncio.run(scenario())
    assert heads[0] == "【前情提要】"


IMPORTS = Path(__file__).resolve().parents[3] / "sim" / "imports"


def test_an_imported_chat_continues_from_its_end(tmp_path: Path) -> None:
    from liyuan import ChatImportError

    with open_card(tmp_path, background=False) as card:
        chat = card.import_chat(IMPORTS / "bookshop.jsonl", "shop", title="旧书店")
        last = chat.branch()[-1]
        turn = chat.prepare("我把那本书放回架上。")
        assert turn.user_entry.parent_id == last.id
        assert len(turn.messages) > 10 and turn.messages[-1].content.endswith("我把那本书放回架上。")
        with pytest.raises(StateError, match="已经有会话"):
            card.import_chat(IMPORTS / "bookshop.jsonl", "shop")
        broken = tmp_path / "broken.jsonl"
        broken.write_text('{"user_name": "甲", "character_name": "乙"}\n{"mes": \n', encoding="utf-8")
        with pytest.raises(ChatImportError):
            card.import_chat(broken, "other", format="sillytavern")
        assert "other" not in card.chat_ids() and not (card.path / "对话" / "other").exists()


def test_card_memory_is_one_object_until_the_side_model_is_replaced(tmp_path: Path) -> None:
    with open_card(tmp_path, background=False) as card:
        first = card.memory
        assert card.memory is first  # every turn reads the resident summary through it
        side = summariser()
        card.side_model = side
        replaced = card.memory
        assert replaced is not first and replaced.model is side and card.memory is replaced
