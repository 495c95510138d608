"""Edits and deletions of earlier messages, kept as entries of the tree (issue 38).

The tree stays append-only: ``chat.edit`` and ``chat.delete`` append one custom entry
naming the message they change; the message itself, with its old text, stays on record.

- ``{"type": "custom", "customType": "rp-edit", "data": {"target": id, "text": str}}``:
  the message ``target`` reads ``text`` from now on (a later edit of it wins).
- ``{"type": "custom", "customType": "rp-delete", "data": {"target": id}}``: the message
  ``target`` is no longer part of the story.

Both apply only to a message written before them on the same branch (an entry on
another branch, or a later one, is left alone); the story view applies them
(:func:`liyuan.story.view.story_view`), so every reader of the story reads the edited
text. Together with the older ``rp-draft-op`` they are the *revisions* of a branch:
what was built from a revised message (a summary covering it, vector chunks holding
its text, the chat's recap) is taken back (:mod:`liyuan.story.stale`).

Pure: nothing here reads or writes a file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from liyuan.session.branch import BranchView
from liyuan.session.entries import Entry

__all__ = ["DELETE_ENTRY_TYPE", "DRAFT_OP_ENTRY_TYPE", "EDIT_ENTRY_TYPE", "REVISION_TYPES", "revised_text",
           "revision_target", "revisions"]

EDIT_ENTRY_TYPE = "rp-edit"
"""``chat.edit``: the whole new text of an earlier message (``target``, ``text``); the old text stays on record."""
DELETE_ENTRY_TYPE = "rp-delete"
"""``chat.delete``: an earlier message left out of the story from here on (``target``)."""
DRAFT_OP_ENTRY_TYPE = "rp-draft-op"
"""A revision of one passage of an earlier reply (``target``, ``old``, ``new``)."""
REVISION_TYPES = (DRAFT_OP_ENTRY_TYPE, EDIT_ENTRY_TYPE, DELETE_ENTRY_TYPE)
"""Custom entries that change an earlier message of their branch."""


def revision_target(entry: Entry) -> str | None:
    """The id of the message ``entry`` revises, or ``None`` when it is no revision."""
    if entry.type != "custom" or entry.custom_type not in REVISION_TYPES:
        return None
    target = entry.data.get("target")
    return target if isinstance(target, str) and target else None


def revisions(branch: Sequence[Entry]) -> list[tuple[int, Entry]]:
    """``(index, entry)`` of every revision on ``branch``, in branch order.

    On the tree's current branch the index of custom entries answers without a walk
    (:meth:`BranchView.custom_positions`), so a chat that was never edited pays nothing
    per turn however long it is; any other sequence is scanned.
    """
    if isinstance(branch, BranchView):
        found = branch.custom_positions(REVISION_TYPES)
        if found is not None:
            return [(at, branch[at]) for at in found if revision_target(branch[at]) is not None]
    return [(at, entry) for at, entry in enumerate(branch) if revision_target(entry) is not None]


def revised_text(text: str, data: Mapping[str, object], kind: str | None) -> str | None:
    """The message text after one revision (``None``: the message is deleted).

    An ``rp-edit`` replaces the whole text; an ``rp-draft-op`` replaces one passage
    (``old`` → ``new``; without ``old`` the whole reply), and leaves the text alone when
    the passage is no longer there (an op never guesses).
    """
    if kind == DELETE_ENTRY_TYPE:
        return None
    if kind == EDIT_ENTRY_TYPE:
        new = data.get("text")
        return new if isinstance(new, str) else text
    new, old = data.get("new"), data.get("old")
    if not isinstance(new, str):
        return text
    if not isinstance(old, str) or old == "":
        return new
    return text.replace(old, new, 1) if old in text else text
