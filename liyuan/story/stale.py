"""Which summaries an edit or deletion made stale (issue 38).

A relay summary stands for everything from the start of the branch through its anchor
(``coversThroughId``): each one merges the one before. So a summary is **stale** when a
revision (``rp-edit``, ``rp-delete``, ``rp-draft-op``; see :mod:`liyuan.session.edits`)
written *after* it changes a message at or before its anchor: it was written from the old
text. A stale summary is never replayed again: the story view leaves it out
(:func:`liyuan.story.view.story_view`), so the summary before it (the last one that did
not cover the changed message) is the active one, and the planner rewrites the relay from
there, at most ``every_n_turns`` turns per compaction until it again covers as far as the
withheld summaries did (:func:`rewrite_goal`). A summary written after the revision
read the revised text and is not stale.

Pure; on the tree's current branch the work is the number of revisions and summaries,
found through the branch index, and nothing at all for a chat never edited.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from liyuan.session.branch import BranchIds, BranchView
from liyuan.session.edits import REVISION_TYPES, revision_target, revisions
from liyuan.session.entries import Entry
from liyuan.story.view import SUMMARY_ENTRY_TYPE, summary_fields

__all__ = ["REWRITE_UNTIL_KEY", "Withheld", "rewrite_goal", "stale_summaries"]


@dataclass(frozen=True)
class Withheld:
    """A summary left out because a message it covers was revised after it."""

    entry_id: str
    """The summary entry."""
    anchor: str
    """Its ``coversThroughId``."""
    targets: tuple[str, ...]
    """The revised messages it covered."""


def stale_summaries(branch: Sequence[Entry]) -> dict[str, Withheld]:
    """The stale summaries of ``branch`` (raw entries, root to leaf), by summary entry id.

    Only a revision written after the latest summary can change which summary is
    active, so when there is none the answer is empty, found without reading the covered
    part: on the tree's current branch from its index, on any other sequence by reading
    back from the leaf to the latest summary (the live part, as the history does).
    """
    if not _revised_since_last_summary(branch):
        return {}
    found = revisions(branch)
    summary_at = branch.custom_positions((SUMMARY_ENTRY_TYPE,)) if isinstance(branch, BranchView) else None
    if isinstance(branch, BranchView) and summary_at is not None:
        ids = branch.ids()
        size = len(branch)

        def where(entry_id: str) -> int | None:
            at = ids.places([entry_id])[0] if isinstance(ids, BranchIds) else -1
            return at if 0 <= at < size else None
    else:
        summary_at = [i for i, e in enumerate(branch) if summary_fields(e) is not None]
        places = {e.id: i for i, e in enumerate(branch)}

        def where(entry_id: str) -> int | None:
            return places.get(entry_id)
    targets = [(at, where(target)) for at, entry in found if (target := revision_target(entry)) is not None]
    out: dict[str, Withheld] = {}
    for index in summary_at:
        entry = branch[index]
        fields = summary_fields(entry)
        if fields is None:
            continue
        anchor = where(fields[1])
        reach = index if anchor is None else anchor
        hit = [branch[t].id for at, t in targets if at > index and t is not None and t <= reach]
        if hit:
            out[entry.id] = Withheld(entry.id, fields[1], tuple(dict.fromkeys(hit)))
    return out


def _revised_since_last_summary(branch: Sequence[Entry]) -> bool:
    if isinstance(branch, BranchView):
        revised = branch.custom_positions(REVISION_TYPES)
        if revised is not None and not revised:
            return False  # never edited: the summaries' positions are not read
        summaries = branch.custom_positions((SUMMARY_ENTRY_TYPE,))
        if revised is not None and summaries is not None:
            valid = next((at for at in reversed(summaries) if summary_fields(branch[at]) is not None), -1)
            return revised[-1] > valid
    for entry in reversed(branch):
        if revision_target(entry) is not None:
            return True
        if summary_fields(entry) is not None:
            return False
    return False


REWRITE_UNTIL_KEY = "rewriteUntil"
"""Data field of a summary written while the relay's rewrite had not yet reached a withheld
summary's anchor: that anchor, so the next plans keep going a period at a time."""


def rewrite_goal(branch: Sequence[Entry], live: Sequence[Entry], carried: object) -> int | None:
    """Where in ``live`` (the live part of the story view) the relay's rewrite must reach:
    the furthest anchor of a withheld summary, or the one the active summary carried
    (:data:`REWRITE_UNTIL_KEY`); ``None`` when no rewrite is under way."""
    goals = {item.anchor for item in stale_summaries(branch).values()}
    if isinstance(carried, str) and carried:
        goals.add(carried)
    if not goals:
        return None
    found = [at for at, entry in enumerate(live) if entry.id in goals]
    return max(found) if found else None
