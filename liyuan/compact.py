"""Story compaction: which summary counts, what history remains, when and what to compact.

Invariants:

- The session tree is never rewritten. A compaction only appends one ``rp-summary``
  entry; everything it covers stays in the file and is merely left out of the context.
- Only the last valid summary on a branch counts (each compaction merges the previous
  one in), and the entries it covers do not exist for the history: they are sliced away.
- Every function here except :func:`run_compaction` is pure: data in, data out.
- All character counts are UTF-16 code units, as in the original (see :func:`utf16_len`).

The story view (:func:`story_view`) is what all of this works on: authoring and agent
exchanges, process entries and the revision entries themselves are removed, and
revisions are applied to the replies they target. Indices (``ActiveSummary.cut``) refer
to the sequence the function was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from .tree import Entry

__all__ = [
    "DEFAULT_EVERY_N_TURNS",
    "DRAFT_OP_ENTRY_TYPE",
    "KEEP_RECENT_BEATS",
    "MANUAL_MIN_COMPACT_CHARS",
    "MIN_COMPACT_CHARS",
    "PROCESS_ENTRY_TYPES",
    "SUMMARY_ENTRY_TYPE",
    "SUMMARY_MAX_TOKENS",
    "ActiveSummary",
    "History",
    "HistoryItem",
    "active_summary",
    "rebuild_history",
    "serialize_for_summary",
    "story_view",
    "utf16_len",
]

SUMMARY_ENTRY_TYPE = "rp-summary"
DRAFT_OP_ENTRY_TYPE = "rp-draft-op"
PROCESS_ENTRY_TYPES = frozenset({"liyuan-mode", "liyuan-process"})
"""Custom entries that record how the app ran, never what happened in the story."""
LEGACY_COMPACTION_TYPE = "compaction"
"""Entry type of pi's own compaction summaries, still read from old sessions."""

KEEP_RECENT_BEATS = 6
MIN_COMPACT_CHARS = 2000
MANUAL_MIN_COMPACT_CHARS = 500
DEFAULT_EVERY_N_TURNS = 30
SUMMARY_MAX_TOKENS = 4096


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (JavaScript ``String.length``): astral chars count 2."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


# -- which summary counts ------------------------------------------------------------


@dataclass(frozen=True)
class ActiveSummary:
    """The summary that applies to a branch and where its covered prefix ends."""

    summary: str
    cut: int
    """Entries before this index are covered: they do not exist for the history."""
    index: int
    """Position of the summary (or legacy compaction) entry in the branch."""


def _non_blank(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


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
    position = {entry.id: i for i, entry in enumerate(branch)}
    for index in range(len(branch) - 1, -1, -1):
        entry = branch[index]
        if entry.type == "custom" and entry.custom_type == SUMMARY_ENTRY_TYPE:
            summary = _non_blank(entry.data.get("summary"))
            anchor = entry.data.get("coversThroughId")
            if summary is None or not isinstance(anchor, str) or not anchor:
                continue  # a broken summary must not hide the one before it
            cut = position[anchor] + 1 if anchor in position else index
            return ActiveSummary(summary, cut, index)
        if entry.type == LEGACY_COMPACTION_TYPE:
            summary = _non_blank(entry.body.get("summary"))
            first_kept = entry.body.get("firstKeptEntryId")
            if summary is None or not isinstance(first_kept, str) or not first_kept:
                continue
            return ActiveSummary(summary, position.get(first_kept, index), index)
    return None
# --8<-- [end:active_summary]


# -- the story view and the history -----------------------------------------------


def _is_story_message(entry: Entry) -> bool:
    mode = entry.body.get("mode")
    return mode is None or mode == "roleplay"


def _apply_draft_op(text: str, data: object) -> str:
    # A revision either replaces one passage (old -> new) or, without ``old``, the whole
    # reply. A passage that is no longer there leaves the text alone: an op never guesses.
    if not isinstance(data, dict):
        return text
    new = data.get("new")
    old = data.get("old")
    if not isinstance(new, str):
        return text
    if not isinstance(old, str) or old == "":
        return new
    return text.replace(old, new, 1) if old in text else text


def story_view(branch: Sequence[Entry]) -> list[Entry]:
    """The story as the model should remember it.

    Removes process entries (``liyuan-mode``, ``liyuan-process``), every authoring or
    agent segment (from a non-roleplay user message up to the next roleplay user
    message) and any other non-roleplay message. Applies ``rp-draft-op`` revisions to
    the replies they target and drops the op entries. Entry ids are kept, so anchors
    found here are also valid on the raw branch.
    """
    revisions: dict[str, list[object]] = {}
    for entry in branch:
        if entry.type == "custom" and entry.custom_type == DRAFT_OP_ENTRY_TYPE:
            target = entry.data.get("target")
            if isinstance(target, str):
                revisions.setdefault(target, []).append(dict(entry.data))
    view: list[Entry] = []
    in_authoring = False
    for entry in branch:
        if entry.type == "custom" and (
            entry.custom_type in PROCESS_ENTRY_TYPES or entry.custom_type == DRAFT_OP_ENTRY_TYPE
        ):
            continue
        if entry.type == "message":
            if entry.role == "user":
                in_authoring = not _is_story_message(entry)
            if in_authoring or not _is_story_message(entry):
                continue
            ops = revisions.get(entry.id)
            if ops:
                text = entry.text
                for op in ops:
                    text = _apply_draft_op(text, op)
                entry = replace(entry, body={**entry.body, "text": text})
        elif in_authoring:
            continue
        view.append(entry)
    return view


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
    view = story_view(branch)
    active = active_summary(view)
    live = view[active.cut:] if active else view
    return History(tuple(_history_items(live)), active.summary if active else None)


def serialize_for_summary(entries: Sequence[Entry], user_name: str, char_name: str) -> str:
    """The covered region as ``名字：正文`` blocks joined by blank lines.

    Summaries inside the region (``rp-summary``, legacy ``compaction``) are removed
    first: otherwise an older summary would make the history cut the body away, and its
    text travels separately as the previous summary anyway.
    """
    region = [
        e for e in entries
        if e.type != LEGACY_COMPACTION_TYPE
        and not (e.type == "custom" and e.custom_type == SUMMARY_ENTRY_TYPE)
    ]
    history = rebuild_history(region)
    return "\n\n".join(
        f"{user_name if item.role == 'user' else char_name}：{item.text}" for item in history.items
    )
