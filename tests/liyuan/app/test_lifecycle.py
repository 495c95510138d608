"""The facade under concurrency and across its lifecycle: races, stale handles, closing."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from liyuan import AsyncCard, Card, Completion, ConfigError, FunctionModel, MemoryConfig, ModelRequest, StateError
from liyuan.app.chat import Chat
from liyuan.story import compact as compact_module
from liyuan.story.view import COMPACT_FAILED_TYPE

from .test_chat import BODY, SUMMARY, open_card, play, summariser


def test_two_threads_opening_the_same_chat_share_one_chat_object(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    card = open_card(tmp_path)
    opened = Card._open_chat
    calls: list[str] = []
    second = threading.Event()

    def slow_open(self: Card, chat_id: str, user_name: str, char_name: str, greeting: str | None,
                  first_turn: threading.Event) -> Chat:
        calls.append(chat_id)
        if len(calls) == 1:
            second.wait(0.5)  # racy code lets the second thread in meanwhile; a guarded one never does
        else:
            second.set()
        return opened(self, chat_id, user_name, char_name, greeting, first_turn)

    monkeypatch.setattr(Card, "_open_chat", slow_open)
    got: list[Chat] = []
    threads = [threading.Thread(target=lambda: got.append(card.chat("jA"))) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert len(got) == 2 and got[0] is got[1]
        assert calls == ["jA"]  # one session tree, one lane for the file
    finally:
        card.close()


def test_a_chat_handle_kept_after_delete_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    with open_card(tmp_path, background=False) as card:
        chat = card.chat("jA")
        chat.prepare("开门。")
        chat.record("她没开。")
        assert card.delete_chat("jA")
        with pytest.raises(StateError, match="已关闭"):
            chat.prepare("还在吗？")
        assert card.chat_ids() == []


def test_record_on_a_chat_of_a_closed_card_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    card = open_card(tmp_path, side_model=summariser())
    chat = card.chat("jA")
    chat.prepare("开门。")
    assert card.close()
    before = len(chat.tree)
    with pytest.raises(StateError, match="已关闭"):
        chat.record("她没开。")
    assert len(chat.tree) == before


def test_a_rejected_summary_is_not_noted_on_the_branch_a_reroll_moved_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at_check = threading.Event()
    gate = threading.Event()
    validate = compact_module.validate_summary

    def paused_validate(text: str, *, instructions: str = "") -> str:
        at_check.set()
        assert gate.wait(10)
        return validate(text, instructions=instructions)

    def nonsense(request: ModelRequest) -> Completion:
        return Completion("这不是摘要。")

    monkeypatch.setattr(compact_module, "validate_summary", paused_validate)
    card = open_card(tmp_path, side_model=FunctionModel(nonsense))
    try:
        play(card, 36)  # the 36th record queues the compaction; its reply is checked after the call
        chat = card.chat("jA")
        assert at_check.wait(10)
        turn = chat.reroll()  # the leaf moves while the rejected reply is being checked
        gate.set()
        assert chat.flush(10)
        reply = chat.record(f"另一个回应。{BODY}")  # the user message still waits for its reply
        assert reply.parent_id == turn.user_entry.id
        assert not [e for e in chat.branch() if e.type == "custom" and e.custom_type == COMPACT_FAILED_TYPE
                    and e.parent_id == turn.user_entry.id]
    finally:
        gate.set()
        card.close()


def test_close_timeout_bounds_the_whole_wait_not_each_chat(tmp_path: Path) -> None:
    gate = threading.Event()
    card = open_card(tmp_path, side_model=summariser(gate))
    chats = []
    try:
        for chat_id in ("jA", "jB", "jC"):
            play(card, 36, chat_id)  # each chat's 36th record queues a compaction held by the gate
            chats.append(card.chat(chat_id))
        started = time.monotonic()
        assert not card.close(timeout=0.3)
        assert time.monotonic() - started < 0.9  # it took 1.5 s: twice for flush, then again per chat
    finally:
        gate.set()
        assert all(chat.flush(10) for chat in chats) and card.flush(10)


def test_a_background_sync_that_crashed_is_reported_by_the_next_sync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from liyuan.card import CardMemory

    card = open_card(tmp_path, side_model=summariser())

    def crash(self: CardMemory) -> None:
        raise OSError("磁盘满了")

    monkeypatch.setattr(CardMemory, "sync", crash)
    try:
        outcome = card.sync(wait=True, timeout=10)
        assert outcome is not None
        assert outcome.errors == ["OSError: 磁盘满了"]  # not an empty outcome that reads "nothing to do"
        assert any(a.kind == "error" and "磁盘满了" in a.text for a in card.activity)
    finally:
        card.close(5)


def test_a_record_that_races_close_still_gets_its_memory_work(tmp_path: Path) -> None:
    card = open_card(tmp_path, side_model=summariser())
    play(card, 35)
    chat = card.chat("jA")
    chat.prepare(f"第35拍。{BODY}")
    check = chat._check_open

    def closed_right_after_the_check() -> None:
        check()
        card.close()  # another thread closes the card between the check and the lane

    chat._check_open = closed_right_after_the_check  # type: ignore[method-assign]
    entry = chat.record(f"回应35。{BODY}")  # raised RuntimeError from the shut-down lane
    assert chat.tree.get(entry.id) is not None
    assert chat.summary is not None  # the 36th record's compaction ran


def hung_summariser(release: threading.Event) -> FunctionModel:
    """A side model that does not return until ``release`` is set (at most 60 s)."""

    def answer(request: ModelRequest) -> Completion:
        release.wait(60)
        return Completion(SUMMARY)

    return FunctionModel(answer)


def test_a_side_model_that_never_returns_does_not_hang_the_next_turns(tmp_path: Path) -> None:
    release = threading.Event()
    card = open_card(tmp_path, side_model=hung_summariser(release), config=MemoryConfig(background_wait_s=0.5))
    try:
        play(card, 36)  # the 36th record queues a compaction whose model call hangs
        chat = card.chat("jA")
        turn = chat.prepare("下一拍。")  # a turn does not wait for the lane at all
        assert turn.summary is None and not release.is_set() and not chat.flush(0)
        chat.record("回应。")
        chat.prepare("再下一拍。")
        assert not [a for a in card.activity if "还没做完" in a.text]  # no turn waited
        started = time.monotonic()
        assert chat.compact_now().reason == "busy"  # /compact waits its bound, then says busy
        assert 0.5 <= time.monotonic() - started < 10
        stalls = [a for a in card.activity if a.kind == "error" and "还没做完" in a.text]
        assert len(stalls) == 1 and stalls[0].chat_id == "jA"
        assert chat.compact_now().reason == "busy"
        assert len([a for a in card.activity if "还没做完" in a.text]) == 1  # said once, not every call
        release.set()  # the model answers at last, mid-turn: held until the reply
        assert chat.flush(10)
        chat.record("回应。")
        assert chat.summary == SUMMARY  # its covered range is still on the branch: it landed
        chat.prepare("第三拍。")
        chat.compact_now()
        assert any("已经做完" in a.text for a in card.activity)
    finally:
        release.set()
        card.close()


def test_the_end_of_a_with_block_is_bounded_by_the_same_wait(tmp_path: Path) -> None:
    release = threading.Event()
    try:
        started = time.monotonic()
        with open_card(tmp_path, side_model=hung_summariser(release),
                       config=MemoryConfig(background_wait_s=0.5)) as card:
            play(card, 36)
        assert time.monotonic() - started < 30
        assert any(a.kind == "error" and "关闭时" in a.text for a in card.activity)
    finally:
        release.set()


def test_the_end_of_an_async_with_block_is_bounded_too(tmp_path: Path) -> None:
    release = threading.Event()

    async def scenario() -> AsyncCard:
        async with await AsyncCard.open(tmp_path / "cards" / "雾港", side_model=hung_summariser(release),
                                        config=MemoryConfig(background_wait_s=0.5),
                                        user_name="阿简", char_name="林溯") as card:
            chat = await card.chat("jA")
            for i in range(36):
                await chat.prepare(f"第{i}拍。{BODY}")
                await chat.record(f"回应{i}。{BODY}")
        return card

    try:
        started = time.monotonic()
        card = asyncio.run(scenario())
        assert time.monotonic() - started < 30
        assert any(a.kind == "error" and "关闭时" in a.text for a in card.sync_card.activity)
    finally:
        release.set()


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), True, "60"])
def test_background_wait_must_be_positive_seconds_or_none(value: object) -> None:
    with pytest.raises(ConfigError, match="background_wait_s"):
        MemoryConfig(background_wait_s=value)  # type: ignore[arg-type]
    assert MemoryConfig(background_wait_s=None).background_wait_s is None


def test_compact_now_between_prepare_and_record_leaves_the_turn_whole(tmp_path: Path) -> None:
    with open_card(tmp_path, side_model=summariser(), background=False) as card:
        play(card, 12)
        chat = card.chat("jA")
        chat.prepare("这一拍的话。")
        outcome = chat.compact_now()
        assert (outcome.kind, outcome.reason) == ("skipped", "busy") and chat.summary is None
        reply = chat.record("回应。")  # still the reply to the words just prepared
        parent = chat.tree.get(reply.parent_id or "")
        assert parent is not None and parent.text == "这一拍的话。"
        assert chat.compact_now().kind == "compacted"
