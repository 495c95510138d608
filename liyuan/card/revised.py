"""An edited chat's old lines, taken back out of the card's memory (issue 38).

When a chat's message is edited or deleted (``chat.edit`` / ``chat.delete``), its old recap
and what the merges built from it may hold the old text. The card takes it back in three
steps, all by the chat's source, never by asking a model to find it:

1. The chat's next recap is written from its evidence alone (the story view, edits applied,
   stale summaries left out): the previous recap is not shown to the model
   (:func:`fresh_revisions`). Its record notes the revisions it saw and that it is
   ``retracted`` until merged (:func:`note_revisions`).
2. The merge that takes that recap gets the previous handbook **without** the chat's block
   and without the cross-chat lines only the chat supported (its ``[局:<id>]`` tag removed
   from lines other chats support too) (:func:`take_back`), and no previous resident
   summary at all: the resident summary is written again from the handbook and the recaps
   it is sent, so no line of it can carry the old text over. The prompt names the chats
   (``<revised-chats>``) and says why.
3. Until that merge, a turn of the edited chat does not send the resident summary (it was
   merged from the old text): :func:`resident_held_back`.

Pure, except :func:`resident_held_back`, which reads the manifest.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from liyuan.card.handbook import split_handbook, without_chats
from liyuan.card.inputs import ChatEvidence, RecapDiff
from liyuan.card.manifest import Manifest, RecapRecord, load_manifest
from liyuan.card.memstore import MemoryStore
from liyuan.errors import ManifestError, MemoryFileError

__all__ = ["fresh_revisions", "note_revisions", "resident_held_back", "revised_chats", "take_back"]



def fresh_revisions(record: RecapRecord | None, evidence: ChatEvidence) -> bool:
    """True when the evidence holds an edit or deletion the chat's last recap was not written after."""
    return bool(set(evidence.revisions) - set(record.revisions if record is not None else ()))


def note_revisions(record: RecapRecord, evidence: ChatEvidence, fresh: bool) -> None:
    """Record, with a recap just written, the revisions it saw (and that it awaits a merge)."""
    record.revisions = list(evidence.revisions)
    record.retracted = record.retracted or fresh


def revised_chats(diff: RecapDiff, manifest: Manifest) -> list[str]:
    """The chats of this merge whose new recap follows an edit or deletion."""
    return [recap.chat_id for recap in diff.changed
            if (record := manifest.recaps.get(recap.chat_id)) is not None and record.retracted]


def take_back(handbook: str | None, chats: Sequence[str]) -> str | None:
    """The handbook without ``chats``' blocks and the cross-chat lines only they supported."""
    if not chats or not handbook:
        return handbook
    parts = [part.text if part.kind != "shared" else without_chats(part.text, chats)
             for part in split_handbook(handbook) if not (part.kind == "block" and part.chat_id in chats)]
    return "\n\n".join(parts)


def resident_held_back(files: MemoryStore, chat_id: str, revisions: Collection[str]) -> bool:
    """True while the resident summary may hold text a revision of ``chat_id`` took back: some
    of ``revisions`` (the chat's, on its branch) has not been recapped, or that recap not merged."""
    if not revisions:
        return False
    try:
        record = load_manifest(files).recaps.get(chat_id)
    except (ManifestError, MemoryFileError):
        return True  # cannot tell: do not send what may be stale
    return record is None or record.retracted or not set(revisions) <= set(record.revisions)
