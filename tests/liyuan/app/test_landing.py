"""Issue 36 item 4: a turn does not wait for the last turn's compaction, and the summary still lands.

A story summary lands while its covered range is still the live start of the branch,
however many turns were appended during its side call (anchored at what it covers); a
reroll, rewind or edit inside the range drops it. A summary ready mid-turn lands right
after the reply. No timings here: the side model waits on an event the test sets only
after it played on, so a ``prepare`` that waited for the lane would never get there (the
model then gives up after ``WAIT`` and the test fails instead of hanging).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from liyuan import Card, Completion, FunctionModel, MemoryConfig, ModelError, ModelRequest
from liyuan.app.chat import Chat
from liyuan.clock import counter_ids, fixed_clock
from liyuan.session.entries import Entry
from liyuan.story.scribe import SUMMARY_HEADINGS

SUMMARY = "\n\n".join(f"{h}\n- 测试用的脚本摘要（不是模型输出）" for h in SUMMARY_HEADINGS)
BODY = "雾" * 200
WAIT = 10.0  # only a bound against hanging: the test sets every event itself
CONFIG = MemoryConfig(every_n_turns=6, keep=2)
TURNS = 40


class GatedSummariser:
    """A scripted side model (no model wrote its summaries) that answers once let through."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.gate = threading.Event()
        self.model = FunctionModel(self._answer)
        self.calls = 0

    def _answer(self, request: ModelRequest) -> Completion:
        if request.purpose != "summary":
            raise ModelError(f"这个测试不该请求 {request.purpose}")
        self.calls += 1
        self.inside.set()
        if not self.gate.wait(WAIT):
            raise ModelError("测试一直没放行：有一次 prepare() 在等这次压缩")
        self.gate.clear()
        return Completion(SUMMARY)

    def in_call(self, chat: Chat) -> bool:
        """Wait until the lane is idle (False) or inside a side call (True)."""
        while not self.inside.is_set():
            if chat.flush(0.01):
                return self.inside.is_set()
        self.inside.clear()
        return True


@contextmanager
def opened(path: Path, model: FunctionModel | None, *, background: bool = True) -> Iterator[Card]:
    card = Card.open(path / "cards" / "雾港", user_name="阿简", char_name="林溯", side_model=model,
                     config=CONFIG, background=background, clock=fixed_clock(), ids=counter_ids("e-"))
    try:
        yield card
    finally:
        card.close(WAIT)


def summaries(chat: Chat) -> list[Entry]:
    return [e for e in chat.tree if e.custom_type == "rp-summary"]


def anchored_texts(chat: Chat) -> list[str]:
    """What each summary covers through, by the anchor's text (ids shift with when it landed)."""
    return [chat.tree.get(e.data["coversThroughId"]).text for e in summaries(chat)]  # type: ignore[union-attr]


def inline_anchors(path: Path) -> list[str]:
    with opened(path / "inline", FunctionModel(lambda _r: Completion(SUMMARY)), background=False) as card:
        chat = card.chat("jA")
        for i in range(TURNS):
            chat.prepare(f"第{i}拍。{BODY}")
            chat.record(f"回应{i}。{BODY}")
        return anchored_texts(chat)


def test_in_a_back_to_back_loop_every_compaction_lands_as_in_the_inline_run(tmp_path: Path) -> None:
    # Every compaction's side call is still under way while the next turn is played: the
    # model answers after that turn's prepare (it lands after the reply: held) or after
    # its record (it lands at once, after the new turn), alternately.
    expected = inline_anchors(tmp_path)
    assert len(expected) == 6
    side = GatedSummariser()
    with opened(tmp_path / "loop", side.model) as card:
        chat = card.chat("jA")
        overlapped = 0
        pending = False
        for i in range(TURNS):
            chat.prepare(f"第{i}拍。{BODY}")
            if pending and overlapped % 2 == 1:
                side.gate.set()  # the summary is ready mid-turn
                assert chat.flush(WAIT) and chat.tree.get(chat.tree.leaf_id).role == "user"  # held, not appended
            reply = chat.record(f"回应{i}。{BODY}")
            if pending and overlapped % 2 == 1:
                assert chat.tree.get(chat.tree.leaf_id).parent_id == reply.id  # landed right after the reply
            if pending and overlapped % 2 == 0:
                side.gate.set()  # the summary is ready after the next turn was appended
            pending = False
            if side.in_call(chat):
                pending = True
                overlapped += 1
        side.gate.set()
        assert chat.flush(WAIT)
        assert overlapped == len(expected) == side.calls  # no side call paid twice for one summary
        assert anchored_texts(chat) == expected  # the same summaries, anchored at the same turns
        assert not [a for a in card.activity if a.kind == "compact" and ("丢弃" in a.text or "失败" in a.text)]
        landed = [a.text for a in card.activity if a.text.startswith("前情已压缩")]
        assert len(landed) == len(expected)  # each said once, held or not


def due_and_in_call(card: Card, side: GatedSummariser) -> Chat:
    """Play turns until a compaction is inside its side call."""
    chat = card.chat("jA")
    for i in range(TURNS):
        chat.prepare(f"第{i}拍。{BODY}")
        chat.record(f"回应{i}。{BODY}")
        if side.in_call(chat):
            return chat
    raise AssertionError("no compaction became due")


def user_of(chat: Chat, turn: int) -> Entry:
    return next(e for e in chat.branch() if e.role == "user" and e.text.startswith(f"第{turn}拍"))


@pytest.mark.parametrize("how", ["reroll", "rewind", "edit"])
def test_a_compaction_whose_covered_range_left_the_branch_is_dropped(tmp_path: Path, how: str) -> None:
    side = GatedSummariser()
    with opened(tmp_path, side.model) as card:
        chat = due_and_in_call(card, side)  # turn 8 recorded: the plan covers turns 0-5
        if how == "reroll":  # turn 3 answered again: a sibling reply forks inside the range
            chat.rewind(user_of(chat, 3).id)
            chat.reroll()
            chat.record(f"回应3的另一种写法。{BODY}")
        elif how == "rewind":
            chat.rewind(user_of(chat, 2).id)
        else:  # a covered reply revised by hand
            target = next(e for e in chat.branch() if e.text.startswith("回应4。"))
            chat.tree.append_custom("rp-draft-op", {"target": target.id, "new": "回应4，改过。"})
        side.gate.set()
        assert chat.flush(WAIT)
        assert summaries(chat) == []
        dropped = [a for a in card.activity if a.kind == "compact" and "丢弃" in a.text]
        assert len(dropped) == 1 and dropped[0].outcome is not None and dropped[0].outcome.kind == "stale"


def test_a_reroll_of_the_last_turn_during_the_call_keeps_the_summary(tmp_path: Path) -> None:
    # The old leaf guard dropped it; the covered range (turns 0-5) is untouched by a reroll of turn 7.
    side = GatedSummariser()
    with opened(tmp_path, side.model) as card:
        chat = due_and_in_call(card, side)
        chat.reroll()
        side.gate.set()
        assert chat.flush(WAIT) and summaries(chat) == []  # held: the rerolled turn awaits its reply
        reply = chat.record(f"回应7的另一种写法。{BODY}")
        [summary] = summaries(chat)
        assert summary.parent_id == reply.id
        assert chat.tree.get(summary.data["coversThroughId"]).text.startswith("回应5。")  # type: ignore[union-attr]
        assert chat.summary == SUMMARY
