"""Cross-session card memory (#cross, #merge, #forget): recaps, the handbook, the resident summary.

A card's memory lives in ``cards/<卡>/记忆/`` as plain Markdown (or, byte for byte the
same, in PostgreSQL: :mod:`liyuan.storage.pgmemory`): one recap per chat
(``局/<chatId>.md``), the merged handbook (``记忆.md``) and the resident summary
(``常驻摘要.md``) sent with every turn. Guarantees: every write is atomic; a chat's
recap is rewritten only when its fingerprint changed; a deleted chat takes away only
what it alone supported; a hand edit is never overwritten silently (stale versions
raise :class:`~liyuan.errors.VersionConflict`).

- :mod:`liyuan.card.layout`: folder names, chat ids, :class:`CardLayout`.
- :mod:`liyuan.card.files`: atomic writes, backups, fingerprints, input stamp.
- :mod:`liyuan.card.housekeeping`: the symlink guard, history pruning, orphan temp files.
- :mod:`liyuan.card.swap`: replacing a document only if it still holds what a change read.
- :mod:`liyuan.card.lock`: the card's locks across threads and processes (OS file locks).
- :mod:`liyuan.card.manifest`: the manifest ``.清单.json`` and its removal journal.
- :mod:`liyuan.card.repair`: rebuilding a damaged manifest (the damaged file is kept).
- :mod:`liyuan.card.sessions`: the sessions seam (:class:`SessionStore`; :class:`FileSessions`, the card folder).
- :mod:`liyuan.card.memstore`: the memory seam (:class:`MemoryStore`, :class:`MemoryBackend`; the
  card folder's is :class:`~liyuan.card.files.MemoryFiles`).
- :mod:`liyuan.card.inputs`: evidence from a chat's sessions; the recap diff.
- :mod:`liyuan.card.prompts`: the recap and merge prompts; the merge-reply parser.
- :mod:`liyuan.card.sync`: :class:`CardMemory` (sync, reading, the hard path).
- :mod:`liyuan.card.manual`: the hard path by reference (read, list, search, change).
- :mod:`liyuan.card.resident`: the resident summary as each turn reads it (:class:`ResidentReader`).
- :mod:`liyuan.card.worker`: :class:`SyncWorker`, syncs in background threads.
"""

from __future__ import annotations

from liyuan.card.layout import validate_chat_id
from liyuan.card.manual import MemoryDoc, MemoryHit
from liyuan.card.memstore import MemoryBackend, MemoryStore
from liyuan.card.repair import ManifestRepair
from liyuan.card.sessions import FileSessions, SessionStore
from liyuan.card.sync import CardMemory, MergeStatus, SyncOutcome

__all__ = [
    "CardMemory",
    "FileSessions",
    "ManifestRepair",
    "MemoryBackend",
    "MemoryDoc",
    "MemoryHit",
    "MemoryStore",
    "MergeStatus",
    "SessionStore",
    "SyncOutcome",
    "validate_chat_id",
]
