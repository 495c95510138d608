"""Issue 38 item 3: swipes settle before memory runs.

A compaction waits while the last turns are not stable: a reroll (a sibling reply), a
rewind that forked, or an edit within the last ``MemoryConfig.settle_turns`` turns, or less
than ``MemoryConfig.settle_s`` seconds ago by the card's clock (injected here, so no test
waits for real time). Every summary below is hand-written (a scripted side model).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from liyuan import Card, Completion, FunctionModel, MemoryConfig
from liyuan.app.chat import Chat
from liyuan.clock import counter_ids, fixed_clock
from liyuan.errors import ConfigError
from liyuan.story.scribe import SUMMARY_HEADINGS

SUMMARY = "\n\n".join(f"{h}\n- 测试用的脚本摘要（不是模型输出）" for h in SUMMARY_HEADINGS)
BODY = "雾" * 200


def scripted() -> FunctionModel:
    return FunctionModel(lambda _r: Completion(SUMMARY))


def summaries(chat: Chat) -> int:
    return sum(1 for e in chat.tree if e.custom_type == "rp-summary")


def turn(chat: Chat, i: int, *, reroll: bool = False) -> None:
    chat.prepare(f"第{i}拍。{BODY}")
    chat.record(f"回应{i}。{BODY}")
    if reroll:  # the user swipes: a second reply to the same words
        chat.flush(10)
        chat.reroll()
        chat.record(f"回应{i}（重来）。{BODY}")
    assert chat.flush(10)  # on the background lane: let the compaction check run before counting


def first_compaction(path: Path, config: MemoryConfig) -> int:
    """The turn whose record compacted first, in a run without swipes."""
    with Card.open(path, side_model=scripted(), config=config, background=False, clock=fixed_clock(),
                   ids=counter_ids("e-"), auto_sync=False) as card:
        chat = card.chat("jA")
        for i in range(1, 40):
            turn(chat, i)
            if summaries(chat):
                return i
    raise AssertionError("没有压缩")


@pytest.mark.parametrize("background", [False, True], ids=["inline", "lane"])
def test_a_reroll_inside_the_settle_window_delays_the_compaction_by_turns(tmp_path: Path, background: bool) -> None:
    config = MemoryConfig(every_n_turns=6, keep=2, settle_turns=2)
    due = first_compaction(tmp_path / "plain", config)
    with Card.open(tmp_path / "swiped", side_model=scripted(), config=config, background=background,
                   clock=fixed_clock(), ids=counter_ids("e-"), auto_sync=False) as card:
        chat = card.chat("jA")
        for i in range(1, due - 1):
            turn(chat, i)
        turn(chat, due - 1, reroll=True)  # the turn before the one that would compact is swiped
        turn(chat, due)  # the swiped turn is still one of the last two: the compaction waits
        assert summaries(chat) == 0
        assert any("重来" in a.text and "等" in a.text for a in card.activity if a.kind == "compact")
        turn(chat, due + 1)  # now it has settled
        assert summaries(chat) == 1


def test_a_reroll_inside_the_settle_window_delays_the_compaction_by_the_injected_clock(tmp_path: Path) -> None:
    now = [datetime(2026, 1, 1, 8, 0, tzinfo=datetime.now().astimezone().tzinfo)]

    def clock() -> str:
        return now[0].isoformat()

    config = MemoryConfig(every_n_turns=6, keep=2, settle_turns=0, settle_s=600)
    due = first_compaction(tmp_path / "plain", config)
    with Card.open(tmp_path / "swiped", side_model=scripted(), config=config, background=False, clock=clock,
                   ids=counter_ids("e-"), auto_sync=False) as card:
        chat = card.chat("jA")
        for i in range(1, due - 1):
            turn(chat, i)
            now[0] += timedelta(minutes=30)  # far apart: no turn count is involved
        turn(chat, due - 1, reroll=True)
        now[0] += timedelta(seconds=300)
        turn(chat, due)
        assert summaries(chat) == 0  # five minutes after the swipe: still inside the ten
        assert any("秒前有过重来" in a.text for a in card.activity if a.kind == "compact")
        now[0] += timedelta(seconds=301)
        turn(chat, due + 1)
        assert summaries(chat) == 1  # past the window: it runs


def test_without_swipes_the_settle_window_changes_nothing(tmp_path: Path) -> None:
    plain = first_compaction(tmp_path / "a", MemoryConfig(every_n_turns=6, keep=2, settle_turns=0))
    assert first_compaction(tmp_path / "b", MemoryConfig(every_n_turns=6, keep=2, settle_turns=3)) == plain


def test_a_swipe_older_than_the_window_does_not_hold_the_compaction(tmp_path: Path) -> None:
    config = MemoryConfig(every_n_turns=6, keep=2, settle_turns=2)
    due = first_compaction(tmp_path / "plain", config)
    with Card.open(tmp_path / "old", side_model=scripted(), config=config, background=False,
                   clock=fixed_clock(), ids=counter_ids("e-"), auto_sync=False) as card:
        chat = card.chat("jA")
        for i in range(1, due + 1):
            turn(chat, i, reroll=i == due - 2)
        assert summaries(chat) == 1


def test_manual_compact_does_not_wait_for_the_window(tmp_path: Path) -> None:
    config = MemoryConfig(every_n_turns=0, keep=2, settle_turns=5)
    with Card.open(tmp_path, side_model=scripted(), config=config, background=False, clock=fixed_clock(),
                   ids=counter_ids("e-"), auto_sync=False) as card:
        chat = card.chat("jA")
        for i in range(1, 8):
            turn(chat, i, reroll=i == 7)
        assert chat.compact_now().kind == "compacted"


@pytest.mark.parametrize("bad", [{"settle_turns": -1}, {"settle_s": -1.0}, {"settle_s": float("nan")}])
def test_a_bad_settle_setting_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        MemoryConfig(**bad)  # type: ignore[arg-type]


def turns_until_the_rewrite(path: Path, settle_turns: int) -> int:
    """Edit turn 2's reply after 19 turns; count the turns played before a summary lands again."""
    config = MemoryConfig(every_n_turns=6, keep=2, settle_turns=settle_turns)
    with Card.open(path, side_model=scripted(), config=config, background=False, clock=fixed_clock(),
                   ids=counter_ids("e-"), auto_sync=False) as card:
        chat = card.chat("jA")
        for i in range(1, 20):
            turn(chat, i)
        assert summaries(chat)
        reply = next(e.id for e in chat.branch() if e.role == "assistant" and e.text.startswith("回应2。"))
        landed = summaries(chat)
        chat.edit(reply, f"回应2，改过了。{BODY}")
        assert chat.flush(10)
        for played in range(0, 10):
            if summaries(chat) > landed:
                return played
            turn(chat, 20 + played)
    raise AssertionError("改动之后一直没有重写")


def test_an_edit_inside_the_settle_window_delays_the_rewrite_like_a_swipe(tmp_path: Path) -> None:
    # An edit is written to the tree like a swipe: the rewrite of the summaries it made stale
    # waits until the edit has left the window (issue 38 item 3), and runs at once without one.
    assert turns_until_the_rewrite(tmp_path / "none", 0) == 0
    assert turns_until_the_rewrite(tmp_path / "two", 2) == 2
