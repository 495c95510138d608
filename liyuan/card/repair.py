"""Repairing a damaged manifest: rebuild from what is certain, keep the damaged file.

A damaged ``.清单.json`` stops the card's sync (:class:`~liyuan.errors.ManifestError`)
until :func:`repair_manifest` runs. The repair never guesses in the direction that loses
memory or brings forgotten memory back:

1. The damaged bytes are copied to ``.history/`` first (atomically), so nothing is lost
   even if the repair is interrupted; only then is the manifest replaced.
2. Each field is read back from the damaged text on its own (the whole JSON when it
   still parses, else one pattern per field), so a flipped byte costs at most the field
   it hit.
3. A field of the hard path that cannot be read back gets the default that does least:

   - ``forgottenChats`` unknown: every chat that has sessions but no recap on disk is
     taken as forgotten (a forgotten chat's recap is deleted; a chat never recapped
     looks the same and is listed in :attr:`ManifestRepair.assumed_forgotten`).
   - ``protectedRefs`` unknown: every memory document on disk counts as a hand edit,
     so sync overwrites none of them.
   - ``aggregatePinned`` unknown: merging stays paused when an aggregate exists
     (:meth:`~liyuan.card.sync.CardMemory.resume_merging` lifts it).

   Recap records that cannot be read back are dropped: the chat is recapped again
   (unless protected) and its recap merged again, which costs calls and loses nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from liyuan.card.layout import is_valid_chat_id
from liyuan.card.manifest import (
    Manifest,
    ManualState,
    RecapRecord,
    manifest_checksum_ok,
    manifest_problem,
    save_manifest,
)
from liyuan.card.manual import HANDBOOK_REF, RESIDENT_REF, recap_ref
from liyuan.card.memstore import MemoryStore
from liyuan.card.sessions import FileSessions, SessionStore

__all__ = ["ManifestRepair", "repair_manifest"]

_ID = r"[A-Za-z0-9_-]+"
_REF = rf"card:(?:handbook|resident|recap:{_ID})"
_RECORD_RE = re.compile(
    rf'"({_ID})"\s*:\s*\{{\s*"sourceMark"\s*:\s*"([^"\\]*)"\s*,\s*"recapAt"\s*:\s*"([^"\\]*)"'
    r'(?:\s*,\s*"mergedHash"\s*:\s*"([0-9a-f]{40})")?\s*\}'
)


@dataclass(frozen=True)
class ManifestRepair:
    """What :func:`repair_manifest` did."""

    kept_at: Path | None
    """Where the damaged file is kept (in ``.history/``); ``None`` when nothing needed repair."""
    salvaged: list[str] = field(default_factory=list)
    """Fields read back from the damaged file (``recaps:<n>`` counts the chats)."""
    unknown: list[str] = field(default_factory=list)
    """Hard-path fields that could not be read back and got the fail-closed default."""
    assumed_forgotten: list[str] = field(default_factory=list)
    """Chats taken as forgotten because ``forgottenChats`` was unknown."""


def _id_list(text: str, key: str, item: str) -> list[str] | None:
    """A JSON list of strings under ``key`` read by pattern; ``None`` unless wholly intact."""
    found = re.search(rf'"{key}"\s*:\s*\[([^\]]*)\]', text)
    if found is None:
        return None
    inner = found.group(1)
    items = re.findall(rf'"({item})"', inner)
    rest = re.sub(rf'"(?:{item})"', "", inner)
    return items if re.fullmatch(r"[\s,]*", rest) else None


def _salvage(text: str) -> tuple[Manifest, list[str], list[str]]:
    """``(manifest, salvaged fields, unknown hard-path fields)`` from damaged text."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raw = None
    if isinstance(raw, dict) and isinstance(raw.get("manual"), dict):
        whole = Manifest.from_raw(raw)  # e.g. an unknown version that still parses
        if whole is not None:
            if manifest_checksum_ok(raw):
                return whole, ["recaps", "manual"], []
            # It parses, but a byte changed somewhere: no field of the hard path can be trusted
            # alone. What it says is kept and the fail-closed defaults are added to it.
            return whole, ["recaps"], ["forgottenChats", "protectedRefs", "aggregatePinned"]
    records = {m.group(1): RecapRecord(m.group(2), m.group(3), m.group(4))
               for m in _RECORD_RE.finditer(text) if is_valid_chat_id(m.group(1))}
    salvaged = [f"recaps:{len(records)}"]
    unknown: list[str] = []
    forgotten = _id_list(text, "forgottenChats", _ID)
    protected = _id_list(text, "protectedRefs", _REF)
    pinned = re.search(r'"aggregatePinned"\s*:\s*(true|false)\b', text)
    pending = _id_list(text, "pending", r"[^\"\\]+")
    for name, value in (("forgottenChats", forgotten), ("protectedRefs", protected), ("aggregatePinned", pinned)):
        (salvaged if value is not None else unknown).append(name)
    manual = ManualState(
        protected_refs=protected or [],
        forgotten_chats=[c for c in forgotten or [] if is_valid_chat_id(c)],
        aggregate_pinned=pinned is not None and pinned.group(1) == "true",
    )
    merged_at = re.search(r'"mergedAt"\s*:\s*"([^"\\]*)"', text)
    # The journal is re-read through from_raw so only the three kinds of memory file survive.
    journal = Manifest.from_raw({"recaps": {}, "manual": {"pending": pending or []}})
    manual.pending = journal.manual.pending if journal is not None and journal.manual is not None else []
    return Manifest(records, merged_at.group(1) if merged_at else None, manual), salvaged, unknown


def repair_manifest(files: MemoryStore, sessions: SessionStore | None = None) -> ManifestRepair:
    """Rebuild a damaged manifest (see the module docstring); a healthy or missing one is left alone.

    The caller holds the card's write lock (:meth:`~liyuan.card.sync.CardMemory.repair_manifest`
    does). ``sessions``: where the chats' sessions are (default: the card folder's files).

    Returns:
        Where the damaged file is kept and what could and could not be read back.

    Raises:
        MemoryFileError: The damaged file cannot be copied aside or the new one written
            (then the damaged file is still in place and nothing else changed).
    """
    layout = files.layout
    data = files.read_bytes(layout.manifest)
    if data is None or manifest_problem(data) is None:
        return ManifestRepair(None)
    kept_at = files.backup_once(layout.manifest)  # the damaged bytes, before anything changes
    manifest, salvaged, unknown = _salvage(data.decode("utf-8", errors="replace"))
    manual = manifest.manual_state()
    recaps = files.recap_texts()
    assumed: list[str] = []
    if "forgottenChats" in unknown:
        sessions = sessions if sessions is not None else FileSessions(layout)
        for chat_id in sessions.chat_ids():
            if chat_id not in recaps and sessions.mark(chat_id):
                assumed.append(chat_id)
        manual.forgotten_chats = sorted(set(manual.forgotten_chats) | set(assumed))
    if "protectedRefs" in unknown:
        on_disk = [ref for ref, path in ((HANDBOOK_REF, layout.handbook), (RESIDENT_REF, layout.resident))
                   if files.read_bytes(path) is not None]
        refs = [*on_disk, *(recap_ref(c) for c in sorted(recaps))]
        manual.protected_refs = [*manual.protected_refs, *(r for r in refs if r not in manual.protected_refs)]
    if "aggregatePinned" in unknown:
        exists = any(files.read_bytes(p) is not None for p in (layout.handbook, layout.resident))
        manual.aggregate_pinned = manual.aggregate_pinned or exists
    save_manifest(files, manifest)
    return ManifestRepair(kept_at, salvaged, unknown, assumed)
