"""The manifest ``记忆/.清单.json``: the card memory's bookkeeping (not memory itself).

Shape (JSON, 2-space indent, non-ASCII kept, trailing newline; ``checksum`` is the
sha256 of the rest, keys sorted and compact, so a flipped byte that still parses is
caught too; a manifest without one, from an older liyuan, is read as before)::

    {"version": 1,
     "recaps": {"<chatId>": {"sourceMark": "...", "recapAt": "...", "mergedHash": "..."}},
     "mergedAt": "...",
     "manual": {"protectedRefs": [], "forgottenChats": [], "supersededRecaps": {},
                "aggregatePinned": false, "mergeRequested": false, "epoch": 0, "pending": []},
     "refusedMerge": {"inputs": "<sha1>", "reason": "..."},
     "checksum": "sha256:..."}

A recap record may also hold ``"revisions": [...]`` (the ids of the edits and deletions its
recap was written after) and ``"retracted": true`` (rewritten after a new one, not merged
since); both are absent otherwise (issue 38).

``refusedMerge`` (present only after a refused merge reply) is what a merge was built
from when its reply was refused: a sync on the same inputs does not pay for it again.

Invariants: parsing never crashes (deep nesting and endless numbers included); no entry
under an invalid chat id or a journal path outside the three kinds of memory file
survives parsing, so a hand-edited manifest cannot point the code outside the card. A
manifest that exists but is not a readable version-1 manifest is **never** read as empty
(that would drop the forgotten chats, the hand-protected documents and the pin):
:func:`load_manifest` raises :class:`~liyuan.errors.ManifestError`, which stops the
card's sync and the hard path until :func:`liyuan.card.repair.repair_manifest` rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from liyuan.card.layout import HANDBOOK_FILE, RECAPS_DIR, RESIDENT_FILE, is_valid_chat_id
from liyuan.card.memstore import MemoryStore
from liyuan.errors import ManifestError

__all__ = [
    "MANIFEST_VERSION",
    "REPAIR_HINT",
    "Manifest",
    "ManualState",
    "RecapRecord",
    "RefusedMerge",
    "finish_pending",
    "load_manifest",
    "manifest_checksum_ok",
    "manifest_problem",
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
    revisions: list[str] = field(default_factory=list)
    """Ids of the edits and deletions (issue 38) the current recap was written after."""
    retracted: bool = False
    """The recap was rewritten after a new edit or deletion and has not been merged since:
    the next merge takes the chat's old lines back (:mod:`liyuan.card.revised`)."""


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


@dataclass(frozen=True)
class RefusedMerge:
    """A merge whose reply was refused: what it was built from, and why it was refused."""

    inputs: str
    """sha1 of the merge's inputs (:func:`liyuan.card.merge_memo.merge_inputs`)."""
    reason: str
    """The refusal, as the activity line said it."""


@dataclass
class Manifest:
    """The manifest ``记忆/.清单.json`` (mutable: load, change, save)."""

    recaps: dict[str, RecapRecord] = field(default_factory=dict)
    merged_at: str | None = None
    manual: ManualState | None = None
    refused_merge: RefusedMerge | None = None
    """The last merge refused on its inputs; cleared by the next merge written."""

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
            if rec.revisions:
                item["revisions"] = list(rec.revisions)
            if rec.retracted:
                item["retracted"] = True
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
        if self.refused_merge is not None:
            obj["refusedMerge"] = {"inputs": self.refused_merge.inputs, "reason": self.refused_merge.reason}
        obj["checksum"] = _checksum(obj)
        return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest | None:
        """Parse a manifest; ``None`` when it is not one (bad JSON, wrong version, no recaps).

        Entries under an invalid chat id are dropped: a hand-edited manifest must not be
        able to name a path outside the card.
        """
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError):  # bad JSON, an endless number, too deep
            return None
        if not isinstance(raw, dict) or raw.get("version") != MANIFEST_VERSION:
            return None
        return cls.from_raw(raw)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Manifest | None:
        """The manifest a decoded JSON object describes, whatever its ``version`` says.

        ``None`` without a ``recaps`` object. For :meth:`from_json` and for the repair,
        which reads what it can from a manifest with an unknown version.
        """
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
                revisions=_strs(rec.get("revisions")),
                retracted=rec.get("retracted") is True,
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
        refused_raw = raw.get("refusedMerge")
        refused = RefusedMerge(refused_raw["inputs"], _str(refused_raw.get("reason"))) \
            if isinstance(refused_raw, dict) and isinstance(refused_raw.get("inputs"), str) else None
        return cls(recaps, merged_at if isinstance(merged_at, str) else None, manual, refused)


def _checksum(obj: dict[str, Any]) -> str:
    """sha256 of the content without ``checksum`` (keys sorted, compact): formatting does not count."""
    body = {k: v for k, v in obj.items() if k != "checksum"}
    canonical = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def manifest_checksum_ok(raw: dict[str, Any]) -> bool:
    """True when a decoded manifest has no ``checksum`` (an older liyuan) or a matching one."""
    return "checksum" not in raw or raw["checksum"] == _checksum(raw)


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


def manifest_problem(data: bytes) -> str | None:
    """Why these bytes are not a usable manifest (Chinese), or ``None`` when they are one."""
    parsed = _parse(data)
    return parsed if isinstance(parsed, str) else None


def _parse(data: bytes) -> Manifest | str:
    """The manifest these bytes hold, or why they hold none (Chinese); decoded once."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "不是合法的 UTF-8，有字节损坏"
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return "不是完整合法的 JSON，可能被截断或有字节损坏"
    if not isinstance(raw, dict):
        return "不是 JSON 对象"
    if raw.get("version") != MANIFEST_VERSION:
        return f"版本 {raw.get('version')!r} 不认识（这个版本的 liyuan 只读版本 {MANIFEST_VERSION}）"
    if not manifest_checksum_ok(raw):
        return "校验和不符，内容有字节损坏或被手工改过"
    manifest = Manifest.from_raw(raw)
    return manifest if manifest is not None else "缺少 recaps 记录"


REPAIR_HINT = ("修复请调用 card.repair_manifest()（liyuan.Card；只用 CardMemory 时是 CardMemory.repair_manifest()）："
               "它先把损坏的文件原样存进 .history/，再重建清单，读不回的部分按最保守的方式处理。")
"""The sentence every damaged-manifest error and activity line ends with: exactly what to call."""


def load_manifest(files: MemoryStore) -> Manifest:
    """The card's manifest; empty only when the file does not exist.

    Raises:
        ManifestError: The file exists but is damaged (bad UTF-8, bad or truncated JSON,
            an unknown version, no ``recaps``). Nothing is changed, not even a backup:
            the caller stops, and :func:`liyuan.card.repair.repair_manifest` repairs.
        MemoryFileError: The file cannot be read at all (or is a symlink).
    """
    path = files.layout.manifest
    data = files.read_bytes(path)
    if data is None:
        return Manifest()
    parsed = _parse(data)  # decoded and checked in one pass
    if isinstance(parsed, str):
        raise ManifestError(
            f"记忆清单 {path} 已损坏（{parsed}）。这张卡的记忆同步和手工修改已停止，没有改动任何文件；"
            f"{REPAIR_HINT}"
        )
    return parsed


def save_manifest(files: MemoryStore, manifest: Manifest) -> None:
    """Write the manifest atomically."""
    files.write_text(files.layout.manifest, manifest.to_json())


def finish_pending(files: MemoryStore, manifest: Manifest) -> bool:
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
