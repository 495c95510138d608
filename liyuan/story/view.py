"""The story view of a branch, and where its live part begins.

Invariants:

- Pure functions over a root-to-leaf sequence of entries; nothing here reads or writes
  a file, and the entries given are never changed (a revised reply is a new entry).
- :func:`story_view` is local: whether an entry stays, and what text it has, depends
  only on the entry itself, the latest user message before it and the revisions after
  it. So the view of ``branch[i:]`` is a suffix of the view of ``branch`` whenever
  ``branch[i]`` is a user message, which is what lets :mod:`liyuan.story.compact` read only
  the live part of a long branch.
- :func:`live_start` and :func:`failure_streak` read the branch from the leaf backwards
  and stop at the latest summary, so their cost does not grow with the covered part of
  the branch.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from liyuan.session.edits import REVISION_TYPES, revised_text, revision_target
from liyuan.session.entries import IMPORT_NOTE_TYPE, Entry

__all__ = [
    "COMPACT_FAILED_TYPE",
    "LEGACY_COMPACTION_TYPE",
    "PROCESS_ENTRY_TYPES",
    "SUMMARY_ENTRY_TYPE",
    "FailureStreak",
    "failure_streak",
    "last_index",
    "live_start",
    "story_view",
    "summary_fields",
]

SUMMARY_ENTRY_TYPE = "rp-summary"
COMPACT_FAILED_TYPE = "rp-compact-failed"
"""A story compaction that failed (see :func:`failure_streak`)."""
PROCESS_ENTRY_TYPES = frozenset({"liyuan-mode", "liyuan-process", COMPACT_FAILED_TYPE, IMPORT_NOTE_TYPE})
"""Custom entries that are never what happened in the story: how the app ran, and the
system, narrator and hidden messages of an imported chat."""
LEGACY_COMPACTION_TYPE = "compaction"
"""Entry type of pi's own compaction summaries, still read from old sessions."""


def _is_story_message(entry: Entry) -> bool:
    mode = entry.body.get("mode")
    return mode is None or mode == "roleplay"


def story_view(branch: Sequence[Entry], drop: Collection[str] = ()) -> list[Entry]:
    """The story as the model should remember it.

    Removes process entries (``liyuan-mode``, ``liyuan-process``, ``liyuan-import-note``), every authoring or
    agent segment (from a non-roleplay user message up to the next roleplay user
    message) and any other non-roleplay message. Applies the revisions (``rp-draft-op``,
    ``rp-edit``, ``rp-delete``; see :mod:`liyuan.session.edits`) to the earlier messages
    they target, in branch order: an edited message reads its new text, a deleted one is
    left out; and drops the revision entries (one that names a later entry changes nothing).
    Entry ids are kept, so anchors found here are also valid on the raw branch.

    Args:
        branch: Root-to-leaf entries.
        drop: Ids of entries to leave out: the stale summaries
            (:func:`liyuan.story.stale.stale_summaries` of the whole branch).

    Returns:
        The kept entries, revised messages replaced by revised copies.
    """
    # target id -> [(position of the op, kind, op data)]
    ops: dict[str, list[tuple[int, str | None, dict[str, object]]]] = {}
    for position, entry in enumerate(branch):
        target = revision_target(entry)
        if target is not None:
            ops.setdefault(target, []).append((position, entry.custom_type, dict(entry.data)))
    view: list[Entry] = []
    in_authoring = False
    for position, entry in enumerate(branch):
        if entry.type == "custom" and (
            entry.custom_type in PROCESS_ENTRY_TYPES or entry.custom_type in REVISION_TYPES
        ):
            continue
        if drop and entry.id in drop:
            continue
        if entry.type == "message":
            if entry.role == "user":
                in_authoring = not _is_story_message(entry)
            if in_authoring or not _is_story_message(entry):
                continue
            later = [(kind, data) for at, kind, data in ops.get(entry.id, ()) if at > position]
            if later:
                text: str | None = entry.text
                for kind, data in later:
                    text = revised_text(text, data, kind) if text is not None else None
                if text is None:
                    continue  # deleted
                entry = entry._replace(body={**entry.body, "text": text})
        elif in_authoring:
            continue
        view.append(entry)
    return view


def _non_blank(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def summary_fields(entry: Entry) -> tuple[str, str, str] | None:
    """``(summary, anchor id, entry kind)`` when ``entry`` is a valid summary, else ``None``.

    A valid ``rp-summary`` custom entry has a non-blank ``summary`` and a non-empty
    ``coversThroughId`` (kind :data:`SUMMARY_ENTRY_TYPE`); a valid legacy pi
    ``compaction`` entry has a non-blank ``summary`` and a non-empty ``firstKeptEntryId``
    (kind :data:`LEGACY_COMPACTION_TYPE`).
    """
    if entry.type == "custom" and entry.custom_type == SUMMARY_ENTRY_TYPE:
        kind, fields, anchor_key = SUMMARY_ENTRY_TYPE, entry.data, "coversThroughId"
    elif entry.type == LEGACY_COMPACTION_TYPE:
        kind, fields, anchor_key = LEGACY_COMPACTION_TYPE, entry.body, "firstKeptEntryId"
    else:
        return None
    summary, anchor = _non_blank(fields.get("summary")), fields.get(anchor_key)
    if summary is None or not isinstance(anchor, str) or not anchor:
        return None
    return summary, anchor, kind


def last_index(branch: Sequence[Entry], entry_id: str) -> int | None:
    """Index of the last entry with ``entry_id``, searched from the end; ``None`` if absent.

    An anchor sits just before its summary near the leaf, so the search stops early; the
    last occurrence is the one that counts should a hand-built branch repeat an id.
    """
    for index, entry in zip(range(len(branch) - 1, -1, -1), reversed(branch), strict=True):
        if entry.id == entry_id:
            return index
    return None


def live_start(branch: Sequence[Entry], skip: Collection[str] = ()) -> int:
    """Where the live part of ``branch`` begins, found from the leaf backwards.

    The index of the user message that opens the turn holding the latest valid summary's
    anchor (or the summary, should the anchor come after it); 0 when there is no valid
    summary, its anchor is not on the branch, or no user message precedes it. Only the
    raw entries are read: whether that summary is the one the story view counts is for
    the caller to check (see :func:`liyuan.story.history.rebuild_history`). Summaries
    whose ids are in ``skip`` (the stale ones) are passed over.
    """
    for index, entry in zip(range(len(branch) - 1, -1, -1), reversed(branch), strict=True):
        fields = summary_fields(entry)
        if fields is None or (skip and entry.id in skip):
            continue
        anchor = last_index(branch, fields[1])
        if anchor is None:
            return 0
        for start in range(min(anchor, index), -1, -1):
            if branch[start].type == "message" and branch[start].role == "user":
                return start
        return 0
    return 0


@dataclass(frozen=True)
class FailureStreak:
    """Failed compactions since the branch's latest summary (see :func:`failure_streak`)."""

    failures: int
    """Consecutive ``rp-compact-failed`` entries after the latest valid summary."""
    turns_since: int
    """Story user turns after the latest of them (0 without any failure)."""


def failure_streak(branch: Sequence[Entry]) -> FailureStreak:
    """Count the failed compactions the branch has had since its latest summary.

    Read from the leaf backwards, stopping at the latest valid summary (a success ends
    a streak), so the cost is that of the live part. A failure on an abandoned branch
    (after a reroll or a rewind) is not on this branch and does not count. Authoring and
    agent user messages are not story turns and do not count as turns.
    """
    failures = turns = 0
    for entry in reversed(branch):
        if summary_fields(entry) is not None:
            break
        if entry.type == "custom" and entry.custom_type == COMPACT_FAILED_TYPE:
            failures += 1
        elif not failures and entry.type == "message" and entry.role == "user" and _is_story_message(entry):
            turns += 1
    return FailureStreak(failures, turns if failures else 0)
