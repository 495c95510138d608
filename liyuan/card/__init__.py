"""Cross-session card memory (#cross, #merge, #forget): recaps, the handbook, the resident summary.

A card's memory lives in ``cards/<卡>/记忆/`` as plain Markdown: one recap per chat
(``局/<chatId>.md``), the merged handbook (``记忆.md``) and the resident summary
(``常驻摘要.md``) sent with every beat. Guarantees: every write is atomic; a chat's
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
- :mod:`liyuan.card.inputs`: evidence from a chat's sessions; the recap diff.
- :mod:`liyuan.card.prompts`: the recap and merge prompts; the merge-reply parser.
- :mod:`liyuan.card.sync`: :class:`CardMemory` (sync, reading, the hard path).
- :mod:`liyuan.card.manual`: the hard path by reference (read, list, search, change).
- :mod:`liyuan.card.handpath`: the hard path as :class:`CardMemory` offers it (locked).
- :mod:`liyuan.card.worker`: :class:`SyncWorker`, syncs in background threads.
"""

from __future__ import annotations

from liyuan.card.files import (
    CHAT_META_FILE,
    CHATS_DIR,
    HANDBOOK_FILE,
    HISTORY_DIR,
    HISTORY_KEEP,
    MANIFEST_FILE,
    MEMORY_DIR,
    RECAPS_DIR,
    RESIDENT_FILE,
    SESSIONS_DIR,
    CardLayout,
    MemoryFiles,
    atomic_write_text,
    source_mark_of,
    validate_chat_id,
)
from liyuan.card.inputs import (
    RECAP_INPUT_MAX_CHARS,
    ChangedRecap,
    ChatEvidence,
    RecapDiff,
    branch_of_session_file,
    collect_chat_evidence,
    diff_recaps,
)
from liyuan.card.manifest import Manifest, ManualState, RecapRecord, load_manifest
from liyuan.card.manual import (
    HANDBOOK_REF,
    RESIDENT_REF,
    STALE_VERSION_MESSAGE,
    MemoryDoc,
    MemoryHit,
    recap_ref,
)
from liyuan.card.prompts import (
    HANDBOOK_MARK,
    RESIDENT_HEADING,
    RESIDENT_MARK,
    build_merge_prompt,
    build_recap_prompt,
    neutralize,
    parse_merge_result,
    strip_fence,
)
from liyuan.card.repair import ManifestRepair, repair_manifest
from liyuan.card.sync import CardMemory, MergeStatus, SyncOutcome
from liyuan.card.worker import SyncWorker

__all__ = [
    "CHATS_DIR",
    "CHAT_META_FILE",
    "HANDBOOK_FILE",
    "HANDBOOK_MARK",
    "HANDBOOK_REF",
    "HISTORY_DIR",
    "HISTORY_KEEP",
    "MANIFEST_FILE",
    "MEMORY_DIR",
    "RECAPS_DIR",
    "RECAP_INPUT_MAX_CHARS",
    "RESIDENT_FILE",
    "RESIDENT_HEADING",
    "RESIDENT_MARK",
    "RESIDENT_REF",
    "SESSIONS_DIR",
    "STALE_VERSION_MESSAGE",
    "CardLayout",
    "CardMemory",
    "ChangedRecap",
    "ChatEvidence",
    "Manifest",
    "ManifestRepair",
    "ManualState",
    "MemoryDoc",
    "MemoryFiles",
    "MemoryHit",
    "MergeStatus",
    "RecapDiff",
    "RecapRecord",
    "SyncOutcome",
    "SyncWorker",
    "atomic_write_text",
    "branch_of_session_file",
    "build_merge_prompt",
    "build_recap_prompt",
    "collect_chat_evidence",
    "diff_recaps",
    "load_manifest",
    "neutralize",
    "parse_merge_result",
    "recap_ref",
    "repair_manifest",
    "source_mark_of",
    "strip_fence",
    "validate_chat_id",
]
