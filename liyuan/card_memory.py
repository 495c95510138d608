"""Cross-session card memory: the public face, and the background sync worker.

A card's memory lives in ``cards/<卡>/记忆/`` as plain Markdown: one recap per chat
(``局/<chatId>.md``), the merged handbook (``记忆.md``) and the resident summary
(``常驻摘要.md``) that is sent with every beat. The pieces live in submodules and are
re-exported here:

- :mod:`liyuan.card_files`: layout, chat ids, atomic writes, fingerprints, input stamp.
- :mod:`liyuan.card_manifest`: the manifest ``.清单.json`` and its removal journal.
- :mod:`liyuan.card_inputs`: evidence from a chat's sessions; the recap diff.
- :mod:`liyuan.card_prompts`: the recap and merge prompts; the merge-reply parser.
- :mod:`liyuan.card_sync`: :class:`CardMemory` (sync, reading, the hard path).
- :mod:`liyuan.card_manual`: the hard path by reference (read, list, search, change).

:class:`SyncWorker` runs syncs in background threads. Invariant: per card at most one
sync runs at a time, and triggers that arrive during a run collapse into exactly one
further run after it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from .card_files import (
    CHAT_META_FILE,
    CHATS_DIR,
    HANDBOOK_FILE,
    HISTORY_DIR,
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
from .card_inputs import (
    RECAP_INPUT_MAX_CHARS,
    ChangedRecap,
    ChatEvidence,
    RecapDiff,
    branch_of_session_file,
    collect_chat_evidence,
    diff_recaps,
)
from .card_manifest import Manifest, ManualState, RecapRecord, load_manifest
from .card_manual import (
    HANDBOOK_REF,
    RESIDENT_REF,
    STALE_VERSION_MESSAGE,
    MemoryDoc,
    MemoryHit,
    recap_ref,
)
from .card_prompts import (
    HANDBOOK_MARK,
    RESIDENT_HEADING,
    RESIDENT_MARK,
    build_merge_prompt,
    build_recap_prompt,
    neutralize,
    parse_merge_result,
    strip_fence,
)
from .card_sync import CardMemory, MergeStatus, SyncOutcome

__all__ = [
    "CHATS_DIR",
    "CHAT_META_FILE",
    "HANDBOOK_FILE",
    "HANDBOOK_MARK",
    "HANDBOOK_REF",
    "HISTORY_DIR",
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
    "source_mark_of",
    "strip_fence",
    "validate_chat_id",
]

log = logging.getLogger("liyuan.card_memory")


class SyncWorker:
    """Runs :meth:`CardMemory.sync` in the background, one run at a time per card.

    The app calls :meth:`trigger` when a session of a card is entered and after a chat
    is deleted. A trigger while that card's sync runs marks it queued; however many
    triggers arrive, exactly one more run follows the current one.

    Args:
        factory: Builds the card's :class:`CardMemory` fresh for each run (names,
            language and model are read anew), or returns ``None`` when no model is
            configured (the run is then skipped silently).
        on_outcome: Called after every finished run.
        on_error: Called when a run raised; the worker itself keeps going.
    """

    def __init__(
        self,
        factory: Callable[[Path], CardMemory | None],
        *,
        on_outcome: Callable[[Path, SyncOutcome], None] | None = None,
        on_error: Callable[[Path, BaseException], None] | None = None,
    ) -> None:
        self._factory = factory
        self._on_outcome = on_outcome
        self._on_error = on_error
        self._cond = threading.Condition()
        self._running: set[Path] = set()
        self._queued: set[Path] = set()
        self.runs = 0
        """Finished runs, over all cards (for tests and stats)."""

    def trigger(self, card_dir: str | Path) -> None:
        """Ask for a sync of this card; returns at once."""
        key = Path(card_dir).resolve()
        with self._cond:
            if key in self._running:
                self._queued.add(key)
                return
            self._running.add(key)
        threading.Thread(target=self._loop, args=(key,), name=f"card-sync-{key.name}", daemon=True).start()

    def delete_chat(self, card_dir: str | Path, chat_id: str) -> bool:
        """Delete a chat (see :meth:`CardMemory.delete_chat`), then trigger a sync."""
        key = Path(card_dir).resolve()
        memory = self._factory(key)
        if memory is None:
            return False
        deleted = memory.delete_chat(chat_id)
        self.trigger(key)
        return deleted

    def _loop(self, key: Path) -> None:
        while True:
            self._run_once(key)
            with self._cond:
                self.runs += 1
                if key in self._queued:
                    self._queued.discard(key)
                    continue
                self._running.discard(key)
                self._cond.notify_all()
                return

    def _run_once(self, key: Path) -> None:
        try:
            memory = self._factory(key)
            if memory is None:
                return
            outcome = memory.sync()
        except Exception as exc:  # a background thread must report, never die silently
            log.exception("card memory sync failed for %s", key)
            if self._on_error is not None:
                self._on_error(key, exc)
            return
        if self._on_outcome is not None:
            self._on_outcome(key, outcome)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no sync runs or is queued. Returns False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._running, timeout)
