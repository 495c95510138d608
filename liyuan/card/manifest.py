"""The manifest ``记忆/.清单.json``: the card memory's bookkeeping (not memory itself).

Shape (JSON, 2-space indent, non-ASCII kept, trailing newline)::

    {"version": 1,
     "recaps": {"<chatId>": {"sourceMark": "...", "recapAt": "...", "mergedHash": "..."}},
     "mergedAt": "...",
     "manual": {"protectedRefs": [], "forgottenChats": [], "supersededRecaps": {},
                "aggregatePinned": false, "mergeRequested": false, "epoch": 0, "pending": []}}

Invariants: parsing never fails (anything that is not a version-1 manifest reads as
``None`` and the caller starts from an empty one), and no entry under an invalid chat id
or a journal path outside the three kinds of memory file survives parsing, so a
hand-edited manifest cannot point the code outside the card. A corrupt manifest is
backed up once per distinct content, however often it is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from liyuan.card.files import HANDBOOK_FILE, RECAPS_DIR, RESIDENT_FILE, MemoryFiles, is_valid_chat_id

__all__ = [
    "MANIFEST_VERSION",
    "Manifest",
    "ManualState",
    "RecapRecord",
    "finish_pending",
    "load_manifest",
    "save_manifest",
]

MANIFEST_VERSION = 1


@dataclass
class RecapRecord:
    """What the manifest knows about one chat."""

    source_mark: str = ""
    """Fingerprint of the sessions the current recap was written from."""
    recap_at: str = ""
    """When the recap was written (ISO), or ``""`` when the chat had nothing to recap."""
    merged_hash: str | None = None
    """sha1 of the recap text as last merged; ``None`` when never merged (or forgotten)."""


@dataclass
class ManualState:
    """Hard-path bookkeeping (``change_memory`` / ``forget_chat_recap``)."""

    protected_refs: list[str] = field(default_factory=list)
    """Refs edited by hand through the hard path; automatic sync never overwrites them."""
    forgotten_chats: list[str] = field(default_factory=list)
    """Chats whose recap was removed by the hard path; never recapped again."""
    superseded_recaps: dict[str, str] = field(default_factory=dict)
    """Recap versions folded into a hand-edited aggregate (hidden while unchanged)."""
    aggregate_pinned: bool = False
    """A hand edit of the handbook or resident pauses automatic merging."""
    merge_requested: bool = False
    """Set by ``resume_merging``: the next sync merges even if no recap changed, so the
    hand-edited aggregate is carried into the other one. Cleared by that merge."""
    epoch: int = 0
    """Bumped by every hard-path change."""
    pending: list[str] = field(default_factory=list)
    """Journal of removals decided but maybe not yet done (paths relative to 记忆/):
    recaps are deleted, aggregates moved to ``.history``. Finished before any merge."""


@dataclass
class Manifest:
    """The manifest ``记忆/.清单.json`` (mutable: load, change, save)."""

    recaps: dict[str, RecapRecord] = field(default_factory=dict)
    merged_at: str | None = None
    manual: ManualState | None = None

    def record(self, chat_id: str) -> RecapRecord:
        """The chat's record, created empty if missing."""
        return self.recaps.setdefault(chat_id, RecapRecord())

    def manual_state(self) -> ManualState:
        """The hard-path state, created empty if missing."""
        if self.manual is None:
            self.manual = ManualState()
        return self.manual

    def forgotten(self) -> set[str]:
        """Chats the hard path forgot for good."""
        return set(self.manual.forgotten_chats) if self.manual else set()

    def is_protected(self, ref: str) -> bool:
        """True when ``ref`` was edited by hand through the hard path."""
        return bool(self.manual and ref in self.manual.protected_refs)

    def to_json(self) -> str:
        """2-space JSON, non-ASCII kept, chats in id order, trailing newline."""
        recaps: dict[str, Any] = {}
        for chat_id in sorted(self.recaps):
            rec = self.recaps[chat_id]
            item: dict[str, Any] = {"sourceMark": rec.source_mark, "recapAt": rec.recap_at}
            if rec.merged_hash is not None:
                item["mergedHash"] = rec.merged_hash
            recaps[chat_id] = item
        obj: dict[str, Any] = {"version": MANIFEST_VERSION, "recaps": recaps}
        if self.merged_at is not None:
            obj["mergedAt"] = self.merged_at
        if self.manual is not None:
            m = self.manual
            obj["manual"] = {
                "protectedRefs": list(m.protected_refs),
                "forgottenChats": list(m.forgotten_chats),
                "supersededRecaps": dict(sorted(m.superseded_recaps.items())),
                "aggregatePinned": m.aggregate_pinned,
                "mergeRequested": m.merge_requested,
                "epoch": m.epoch,
                "pending": list(m.pending),
            }
        return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest | None:
        """Parse a manifest; ``None`` when it is not one (bad JSON, wrong version, no recaps).

        Entries under an invalid chat id are dropped: a hand-edited manifest must not be
        able to name a path outside the card.
        """
        try:
            raw = json.loads(text)
        except json.JSONDecodeError:
            return None
        if not isinstance(raw, dict) or raw.get("version") != MANIFEST_VERSION:
            return None
        recaps_raw = raw.get("recaps")
        if not isinstance(recaps_raw, dict):
            return None
        recaps: dict[str, RecapRecord] = {}
        for chat_id, rec in recaps_raw.items():
            if not is_valid_chat_id(chat_id) or not isinstance(rec, dict):
                continue
            merged = rec.get("mergedHash")
            recaps[chat_id] = RecapRecord(
                source_mark=_str(rec.get("sourceMark")),
                recap_at=_str(rec.get("recapAt")),
                merged_hash=merged if isinstance(merged, str) and merged else None,
            )
        merged_at = raw.get("mergedAt")
        manual_raw = raw.get("manual")
        manual = None
        if isinstance(manual_raw, dict):
            superseded = manual_raw.get("supersededRecaps")
            epoch = manual_raw.get("epoch")
            manual = ManualState(
                protected_refs=_strs(manual_raw.get("protectedRefs")),
                forgotten_chats=[c for c in _strs(manual_raw.get("forgottenChats")) if is_valid_chat_id(c)],
                superseded_recaps={
                    k: v for k, v in superseded.items() if is_valid_chat_id(k) and isinstance(v, str)
                } if isinstance(superseded, dict) else {},
                aggregate_pinned=manual_raw.get("aggregatePinned") is True,
                merge_requested=manual_raw.get("mergeRequested") is True,
                epoch=epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0,
                pending=[p for p in _strs(manual_raw.get("pending")) if _is_journal_path(p)],
            )
        return cls(recaps, merged_at if isinstance(merged_at, str) else None, manual)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _strs(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _is_journal_path(rel: str) -> bool:
    # Only the three kinds of memory file may ever be removed through the journal.
    if rel in (HANDBOOK_FILE, RESIDENT_FILE):
        return True
    prefix, _, name = rel.partition("/")
    return prefix == RECAPS_DIR and name.endswith(".md") and is_valid_chat_id(name[:-3])


def load_manifest(files: MemoryFiles) -> Manifest:
    """The card's manifest; empty when missing.

    A corrupt manifest is copied to ``.history/`` (the next save overwrites it) and
    read as empty: every recap then counts as unmerged, which costs one full merge and
    loses no memory. The copy is named by the content's hash, so read-only callers
    (list, search) that load it again and again leave one copy, not one per call.
    """
    path = files.layout.manifest
    text = files.read_text(path)
    if text is None:
        return Manifest()
    manifest = Manifest.from_json(text)
    if manifest is None:
        files.backup_once(path)
        return Manifest()
    return manifest


def save_manifest(files: MemoryFiles, manifest: Manifest) -> None:
    """Write the manifest atomically."""
    files.write_text(files.layout.manifest, manifest.to_json())


def finish_pending(files: MemoryFiles, manifest: Manifest) -> bool:
    """Carry out the removal journal (after a crash, or right after deciding it).

    Recaps in the journal are deleted; the handbook and resident are moved to
    ``.history/``. The journal is emptied and the manifest saved only after every
    removal went through, so a second crash just repeats the (idempotent) removals.

    Returns:
        True when the journal had entries.
    """
    if manifest.manual is None or not manifest.manual.pending:
        return False
    for rel in manifest.manual.pending:
        path = files.layout.memory_dir / rel
        if rel.startswith(f"{RECAPS_DIR}/"):
            files.delete(path)
        else:
            files.move_to_history(path)
    manifest.manual.pending = []
    save_manifest(files, manifest)
    return True
