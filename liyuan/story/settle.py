"""Swipes settle before memory runs: whether the last turns are stable enough to compact.

A user who rerolls, rewinds or edits is steering the story; a summary planned meanwhile is
likely to be thrown away (the landing rule of :func:`liyuan.story.compact.covered_range_holds`
drops one whose range left the branch) or to summarise a reply about to be replaced. So an
automatic compaction waits while the newest turns are unsettled.

Rules (each has its test in ``tests/liyuan/app/test_settle.py`` and ``tests/liyuan/story/test_settle.py``):

- Read from the tree alone, nothing kept beside it: a reroll is a second reply to the same
  user message, a rewind that went on is a second child of the entry it went back to; both
  are an entry of the tree with more than one child (:func:`unsettled`).
- Counted in turns (``MemoryConfig.settle_turns``): unsettled while such a fork lies on the
  branch within its last ``turns`` turns (a turn starts at a user message), or an edit was
  written during them.
- Counted in time (``MemoryConfig.settle_s``, by the card's clock, which a replay injects):
  unsettled while the newest fork or edit anywhere in the tree is younger than ``seconds``.
  A fork's moment is its newest child's timestamp (a move back to an older swipe writes
  nothing, so it is not seen in time; in turns it is).
- Edits: an entry whose type is in :data:`EDIT_TYPES` counts as an edit. This is the one
  hook for new edit kinds: a kind of entry that changes an earlier message (an
  ``edit``/``delete`` entry) is added there and is then counted in turns and in time.
- Only the automatic compaction waits; a manual ``/compact`` (``Chat.compact_now``) is the
  user's own call and runs at once. A summary already planned is not called back: whether
  it lands is the landing rule's business.

The scan reads the tree's entries newest first and stops once it has passed the window
(and the parents of what it found there), so its cost follows what was written since the
window began, not the chat's length; it runs only on a turn where a compaction is due.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from liyuan.session.edits import REVISION_TYPES
from liyuan.session.entries import Entry
from liyuan.session.tree import SessionTree

__all__ = ["EDIT_TYPES", "SETTLE_TURNS", "Settle", "settle_check", "unsettled"]

SETTLE_TURNS = 2
"""Default window in turns: a compaction waits two turns after a swipe."""

EDIT_TYPES: frozenset[str] = frozenset(REVISION_TYPES)
"""Entry types (``type``, or ``customType`` of a custom entry) that edit an earlier message:
every revision kind of :mod:`liyuan.session.edits` (``rp-draft-op``, ``rp-edit``, ``rp-delete``)."""

Settle = Callable[[Sequence[Entry]], str | None]
"""Given the branch a compaction would plan on: why it must wait, or ``None`` when settled."""


def _is_edit(entry: Entry) -> bool:
    return entry.type in EDIT_TYPES or (entry.custom_type or "") in EDIT_TYPES


def _moment(entry: Entry) -> datetime | None:
    stamp = entry.body.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp)
    except ValueError:
        return None


def _window(branch: Sequence[Entry], turns: int) -> list[Entry]:
    """The branch's last ``turns`` turns (from the ``turns``-th last user message on)."""
    if turns <= 0:
        return []
    seen = 0
    for at in range(len(branch) - 1, -1, -1):
        entry = branch[at]
        if entry.type == "message" and entry.role == "user":
            seen += 1
            if seen == turns:
                return list(branch[at:])
    return list(branch)


def unsettled(entries: Sequence[Entry], branch: Sequence[Entry], *, turns: int, seconds: float = 0.0,
              now: datetime | None = None) -> str | None:
    """Why the last turns are not stable yet, or ``None`` when a compaction may run.

    Args:
        entries: The tree's entries in file order (what was written, every branch).
        branch: The branch the compaction would plan on, root to leaf.
        turns: The window in turns (0: not by turns).
        seconds: The window in seconds (0: not by time).
        now: The card clock's time (needed when ``seconds`` is set).
    """
    window = _window(branch, turns)
    in_window = {e.id for e in window}
    fork_points = set(in_window)
    if window and window[0].parent_id is not None:
        fork_points.add(window[0].parent_id)
    cutoff = now.timestamp() - seconds if seconds > 0 and now is not None else None
    start = window[0].parent_id if window else None  # written before the window: where its region ends
    region = bool(window)
    pending: set[str | None] = {start} if window else set()  # scan at least back to these
    children: dict[str, list[Entry]] = {}
    newest_steer: datetime | None = None
    edited_in_window = False
    for entry in reversed(entries):
        moment = _moment(entry)
        young = cutoff is not None and moment is not None and moment.timestamp() >= cutoff
        if entry.id == start:
            region = False
        if not pending and not young:
            break
        pending.discard(entry.id)
        if entry.parent_id is not None:
            children.setdefault(entry.parent_id, []).append(entry)
            if young:
                pending.add(entry.parent_id)  # its siblings lie between it and its parent
        if _is_edit(entry):
            edited_in_window = edited_in_window or region
            if young and moment is not None and (newest_steer is None or moment > newest_steer):
                newest_steer = moment
    # --8<-- [start:settle_rule]
    for parent, kids in children.items():
        if len(kids) < 2:
            continue
        if parent in fork_points and any(k.id in in_window for k in kids):
            return f"最近 {turns} 轮里有重来或回档：压缩等这几轮稳定下来再做（settle_turns={turns}）"
        stamps = [m for m in map(_moment, kids) if m is not None]
        if cutoff is not None and stamps and max(stamps).timestamp() >= cutoff:
            newest_steer = max(stamps) if newest_steer is None else max(newest_steer, *stamps)
    if edited_in_window:
        return f"最近 {turns} 轮里改过早先的消息：压缩等这几轮稳定下来再做（settle_turns={turns}）"
    if newest_steer is not None and now is not None:
        ago = int(now.timestamp() - newest_steer.timestamp())
        return (f"{ago} 秒前有过重来、回档或改动，不到 {seconds:g} 秒：压缩等稳定下来再做"
                f"（settle_s={seconds:g}）")
    return None
    # --8<-- [end:settle_rule]


def settle_check(tree: SessionTree, clock: Callable[[], str], *, turns: int, seconds: float) -> Settle | None:
    """The check a chat's automatic compaction runs (``None`` when both windows are off).

    The clock is read only when the time window is on, so a replay without it reads the
    same clock values as before.
    """
    if turns <= 0 and seconds <= 0:
        return None

    def check(branch: Sequence[Entry]) -> str | None:
        now = datetime.fromisoformat(clock()) if seconds > 0 else None
        with tree.lock:  # a turn may be appending on another thread (the check runs on the chat's lane)
            entries = tree.entries()
        return unsettled(entries, branch, turns=turns, seconds=seconds, now=now)

    return check
