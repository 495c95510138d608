"""Taking an edited or deleted message back out of a chat's vector memory (issue 38).

What vector memory holds of one message (all in the story's own store, ``narrative``; an
imported or hand-added document is never touched): narrative chunks (its text, condensed, alone or
merged with the turns around it; tagged with the newest turn they hold), archive chunks
of every compaction that covered it (tagged with that compaction's anchor), and, until the
next ingest, its queued text. :func:`retract_message` removes all of them:

- every chunk tagged with the message itself or with the anchor of a summary the change
  made stale (the rewrite of the relay archives that range again, from the revised text);
- every chunk holding a sentence of the old text that the new text no longer has (a
  merged chunk goes whole: the other turns it held are still in the archive chunks of the
  compaction that covers them, or will be once the rewrite does);
- the queued text, if the message was still waiting for the ingest period (the other
  queued turns are archived at once under their own ids instead of waiting).

Then an edit's new text is archived under the id of the edit entry (on the branch exactly
while the edit is). Runs on the chat's background lane; a failure is reported, never raised
into the turn (:func:`liyuan.app.edits.retract_in_vectors`).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import TYPE_CHECKING

from liyuan.vector.chunking import MIN_INGEST_CHARS, condense
from liyuan.vector.config import NARRATIVE

if TYPE_CHECKING:
    from liyuan.vector.memory import VectorMemory

__all__ = ["old_passages", "retract_message"]

_SENTENCE = re.compile(r"[^。！？!?…\n]+[。！？!?…]*")
MIN_PASSAGE_CHARS = 4
"""Shorter sentences ("嗯。") are too common to mark a chunk as holding the old text."""


def old_passages(old: str, new: str | None) -> list[str]:
    """The sentences of ``old`` (and of its condensed form) that ``new`` no longer has
    (all of them when ``new`` is ``None``, a deletion)."""
    found: list[str] = []
    for text in (old, condense(old.strip())):
        for match in _SENTENCE.finditer(text):
            piece = match.group(0).strip()
            if len(piece) >= MIN_PASSAGE_CHARS and (new is None or piece not in new):
                found.append(piece)
    return list(dict.fromkeys(found))


def retract_message(memory: VectorMemory, *, entry_id: str, old: str, new: str | None, anchors: Collection[str],
                    edit_id: str) -> int:
    """Remove what ``memory`` holds of message ``entry_id``'s old text; archive an edit's new text.

    Args:
        memory: The chat's vector memory.
        entry_id: The edited or deleted message.
        old: Its text before the change.
        new: Its text after an edit; ``None`` for a deletion.
        anchors: ``coversThroughId`` of each summary the change made stale.
        edit_id: The ``rp-edit`` / ``rp-delete`` entry (the new text's chunks are tagged with it).

    Returns:
        How many chunks were deleted.
    """
    passages = old_passages(old, new)
    tags = {entry_id, *anchors}
    store = memory.store
    doomed = [chunk.id for chunk in store.chunks(NARRATIVE)  # the story's own store, never imported documents
              if chunk.node_id in tags or any(piece in chunk.text for piece in passages)]
    removed = sum(1 for chunk_id in doomed if store.delete(chunk_id))
    queued = store.pending()
    if any(node == entry_id or any(piece in text for piece in passages) for _seq, node, text in queued):
        store.clear_pending(queued[-1][0])
        for _seq, node, text in queued:
            if node != entry_id and not any(piece in text for piece in passages):
                memory.archive_compacted(text, node)
    if new is not None and len(new.strip()) >= MIN_INGEST_CHARS:
        memory.archive_compacted(new, edit_id)
    return removed
