"""Which summary counts, and what history remains for the context.

Invariants:

- Only the last valid summary on a branch counts (each compaction merges the previous
  one in), and the entries it covers do not exist for the history: they are sliced away.
- Everything here is pure: data in, data out.

The story view (:func:`~liyuan.story.view.story_view`) is what all of this works on:
authoring and agent exchanges, process entries and the revision entries themselves are
removed, and revisions are applied to the earlier replies they target. Indices
(``ActiveSummary.cut``) refer to the sequence the function was given.

Cost: :func:`rebuild_history` and :func:`~liyuan.story.compact.plan_compaction` read only
the live part of the branch (from the user turn holding the active summary's anchor to
the leaf), found by scanning back from the leaf, and give exactly what the whole branch
would give (see :func:`story_tail`). On a :meth:`~liyuan.session.tree.SessionTree.branch`
view a turn therefore costs the same at ten thousand turns as at a hundred.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from liyuan.session.entries import Entry
from liyuan.story.stale import stale_summaries
from liyuan.story.view import SUMMARY_ENTRY_TYPE, last_index, live_start, story_view, summary_fields

__all__ = [
    "ActiveSummary",
    "History",
    "HistoryItem",
    "active_summary",
    "rebuild_history",
    "serialize_for_summary",
]

# -- which summary counts ------------------------------------------------------------


@dataclass(frozen=True)
class ActiveSummary:
    """The summary that applies to a branch and where its covered prefix ends."""

    summary: str
    cut: int
    """Entries before this index are covered: they do not exist for the history."""
    index: int
    """Position of the summary (or legacy compaction) entry in the branch."""


# --8<-- [start:active_summary]
def active_summary(branch: Sequence[Entry]) -> ActiveSummary | None:
    """Find the summary that applies to ``branch``: the last valid one wins.

    A valid ``rp-summary`` has a non-blank ``summary`` and a non-empty ``coversThroughId``;
    the cut lies just after that anchor. If the anchor is not on the branch, everything
    before the summary entry is dropped. A legacy pi ``compaction`` entry (non-blank
    ``summary`` and ``firstKeptEntryId``) keeps the branch from ``firstKeptEntryId`` on,
    or from the entry itself when that id is missing.

    Args:
        branch: Root-to-leaf entries (raw or a :func:`story_view`).

    Returns:
        The active summary, or ``None`` when the branch has none.
    """
    for index in range(len(branch) - 1, -1, -1):
        fields = summary_fields(branch[index])
        if fields is None:
            continue  # not a summary, or a broken one: it must not hide the one before it
        summary, anchor, kind = fields
        at = last_index(branch, anchor)
        if kind == SUMMARY_ENTRY_TYPE:
            return ActiveSummary(summary, index if at is None else at + 1, index)
        return ActiveSummary(summary, index if at is None else at, index)
    return None
# --8<-- [end:active_summary]


def story_tail(branch: Sequence[Entry]) -> tuple[list[Entry], ActiveSummary | None]:
    """The story view of the branch's live part and its active summary, read from the leaf.

    With ``view, active = story_tail(branch)`` and ``full = story_view(branch)``, the
    result is ``view == full[k:]`` for some ``k`` and ``active`` is
    ``active_summary(full)`` shifted by ``k``, so ``view[active.cut:]`` (or ``view``
    without a summary) equals the whole branch's live region.

    Why this holds: the slice starts at a user message, so its view is a suffix of the
    full view (see :func:`story_view`); scanning that suffix from its end meets the same
    last valid summary first; and when that summary's anchor is found in the suffix, its
    last occurrence there is its last occurrence overall. When any of this cannot be
    shown (no summary, a summary hidden in an authoring segment, an anchor off the
    branch) the whole branch is read, which gives the same answer more slowly. Summaries
    an edit or deletion made stale are left out of both (:mod:`liyuan.story.stale`).
    """
    stale = stale_summaries(branch)
    start = live_start(branch, stale)
    if start > 0:
        view = story_view(branch[start:], stale)
        active = active_summary(view)
        if active is not None:
            fields = summary_fields(view[active.index])
            if fields is not None and last_index(view, fields[1]) is not None:
                return view, active
    view = story_view(branch, stale)
    return view, active_summary(view)


@dataclass(frozen=True)
class HistoryItem:
    """One merged turn of history, as text."""

    role: Literal["user", "assistant"]
    text: str


@dataclass(frozen=True)
class History:
    """What remains of a branch for the model: kept turns and the active summary."""

    items: tuple[HistoryItem, ...]
    summary: str | None


def _history_items(entries: Sequence[Entry]) -> list[HistoryItem]:
    items: list[HistoryItem] = []
    for entry in entries:
        if entry.type != "message" or entry.role not in ("user", "assistant"):
            continue  # tool results, custom entries, thinking and tool calls carry no story text
        text = entry.text.strip()
        if not text:
            continue
        role: Literal["user", "assistant"] = "user" if entry.role == "user" else "assistant"
        if items and items[-1].role == role:
            items[-1] = HistoryItem(role, f"{items[-1].text}\n\n{text}")
        else:
            items.append(HistoryItem(role, text))
    return items


def rebuild_history(branch: Sequence[Entry]) -> History:
    """The history sent to the model for ``branch``.

    Works on the :func:`story_view`. The active summary's covered prefix is sliced away;
    only user and assistant text remains (the greeting is an assistant message), trimmed,
    empty items dropped, same-role neighbours merged with a blank line.
    """
    return history_of_tail(*story_tail(branch))


def history_of_tail(view: Sequence[Entry], active: ActiveSummary | None, skip: int = 0) -> History:
    """:func:`rebuild_history` from what :func:`story_tail` returned (for a caller that needs both);
    ``skip`` leaves out that many entries after the summary (the oldest turns, over a bound)."""
    live = view[active.cut:] if active else view
    return History(tuple(_history_items(live[skip:])), active.summary if active else None)


def serialize_for_summary(entries: Sequence[Entry], user_name: str, char_name: str) -> str:
    """The covered region as ``名字：正文`` blocks joined by blank lines.

    Summaries inside the region (``rp-summary``, legacy ``compaction``) cut nothing
    away: the blocks are the user and assistant text of the region's whole
    :func:`story_view`, merged as in :func:`rebuild_history`, and no summary is applied.
    Otherwise an older summary would make the history cut the body away; its text
    travels separately as the previous summary anyway.
    """
    # story_view keeps summary entries, but _history_items reads only messages, so they
    # add no text; and no active_summary is looked up, so none of them cuts the region.
    items = _history_items(story_view(entries))
    return "\n\n".join(f"{user_name if item.role == 'user' else char_name}：{item.text}" for item in items)


# -- planning ---------------------------------------------------------------------
