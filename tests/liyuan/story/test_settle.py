"""The settle check read from the tree alone (:func:`liyuan.story.settle.unsettled`)."""

from __future__ import annotations

from datetime import datetime, timedelta

from liyuan.clock import counter_ids
from liyuan.session.tree import SessionTree
from liyuan.story.settle import unsettled

START = datetime.fromisoformat("2026-01-01T00:00:00+00:00")


def tree_with_clock() -> tuple[SessionTree, list[datetime]]:
    now = [START]
    return SessionTree(clock=lambda: now[0].isoformat(), ids=counter_ids("e")), now


def turn(tree: SessionTree, i: int, now: list[datetime]) -> str:
    user = tree.append_message("user", f"第{i}拍")
    tree.append_message("assistant", f"回应{i}")
    now[0] += timedelta(minutes=10)
    return user.id


def test_a_move_back_to_an_older_swipe_is_seen_in_turns() -> None:
    tree, now = tree_with_clock()
    for i in range(3):
        last = turn(tree, i, now)
    first = tree.branch()[-1].id
    tree.navigate(last)
    tree.append_message("assistant", "回应2（重来）")
    tree.navigate(first)  # back to the first swipe: nothing is written
    assert unsettled(tree.entries(), tree.branch(), turns=1) is not None
    assert unsettled(tree.entries(), tree.branch(), turns=0) is None


def test_an_edit_written_during_the_window_counts_and_an_old_one_does_not() -> None:
    tree, now = tree_with_clock()
    turn(tree, 0, now)
    target = tree.branch()[-1].id
    tree.append_custom("rp-draft-op", {"target": target, "old": "回应0", "new": "回应零"})
    turn(tree, 1, now)
    assert "改过" in (unsettled(tree.entries(), tree.branch(), turns=2) or "")
    for i in range(2, 4):
        turn(tree, i, now)
    assert unsettled(tree.entries(), tree.branch(), turns=2) is None


def test_in_time_the_swipe_counts_until_the_window_has_passed_whatever_the_turns() -> None:
    tree, now = tree_with_clock()
    for i in range(3):
        last = turn(tree, i, now)
    tree.navigate(last)
    tree.append_message("assistant", "回应2（重来）")
    swiped = now[0]
    for i in range(3, 8):
        turn(tree, i, now)  # five turns, fifty minutes
    assert unsettled(tree.entries(), tree.branch(), turns=2) is None
    assert unsettled(tree.entries(), tree.branch(), turns=0, seconds=3600, now=now[0]) is not None
    assert unsettled(tree.entries(), tree.branch(), turns=0, seconds=3600,
                     now=swiped + timedelta(seconds=3601)) is None
