"""Writing a checked merge: the handbook and the resident summary, then the manifest.

Invariants:

- Nothing is written over a change the merge did not read: each target is compared (by
  hash) with the text the merge read, once before any write and again right before its
  own write; a hand-protected document is not a target at all.
- Aggregates first, manifest last: a crash in between repeats the merge. Each target's
  previous text is kept in ``.history/`` before it is replaced.
- The manifest records exactly the recaps the merge was sent (a batch's ``hashes``):
  a recap left for a later batch keeps its old record and is merged by that batch.
"""

from __future__ import annotations

from pathlib import Path

from liyuan.card import manual as card_manual
from liyuan.card.files import sha256_text
from liyuan.card.inputs import RecapDiff
from liyuan.card.manifest import load_manifest, save_manifest
from liyuan.card.memstore import MemoryStore
from liyuan.text import utf16_len

__all__ = ["still_holds", "write_merge"]


def still_holds(files: MemoryStore, path: Path, expected: str | None) -> bool:
    """True when ``path`` still holds ``expected`` (``None``: still missing), by hash."""
    current = files.read_text(path)
    if current is None or expected is None:
        return current is expected
    return sha256_text(current) == sha256_text(expected)


def write_merge(files: MemoryStore, diff: RecapDiff, handbook: str, resident: str, *,
                before: tuple[str | None, str | None], now: str) -> str | None:
    """Write a merge (the caller holds the card's write lock).

    Args:
        files: The card's file adapter.
        diff: What the merge was sent (its ``hashes`` become the merge records).
        handbook: The checked handbook.
        resident: The checked resident summary (within its cap: the check cut it).
        before: The handbook and resident summary as the merge read them.
        now: The timestamp for the manifest.

    Returns:
        The activity line, or ``None`` when a target changed since it was read (nothing
        of the merge is then kept in the manifest).
    """
    layout = files.layout
    manifest = load_manifest(files)
    targets = [(path, text, old) for ref, path, text, old in (
        (card_manual.HANDBOOK_REF, layout.handbook, handbook, before[0]),
        (card_manual.RESIDENT_REF, layout.resident, resident, before[1]),
    ) if not manifest.is_protected(ref)]
    if not all(still_holds(files, path, old) for path, _, old in targets):
        return None
    for path, text, old in targets:
        files.backup_copy(path)
        if not still_holds(files, path, old) or not files.replace_text(path, text + "\n", old):
            return None
    for chat_id, digest in diff.hashes.items():
        if chat_id not in manifest.recaps:
            manifest.record(chat_id).recap_at = now  # a recap written by hand, no chat behind it
        manifest.record(chat_id).merged_hash = digest
    for recap in diff.changed:
        manifest.record(recap.chat_id).retracted = False  # its old lines were taken back (card.revised)
    for chat_id in diff.deleted:
        # Keep the fingerprint: an unchanged chat must not be recapped back to life.
        manifest.record(chat_id).merged_hash = None
    manifest.merged_at = now
    manifest.refused_merge = None  # the inputs moved on and merged
    if manifest.manual is not None:
        manifest.manual.merge_requested = False  # resume_merging() asked for this merge
    save_manifest(files, manifest)
    return f"记忆已更新：手册 {utf16_len(handbook)} 字 · 常驻摘要 {utf16_len(resident)} 字"
