"""Syncing a card's memory: recap each changed chat, then merge and forget.

Phase 1 (recaps): for every chat whose sessions' fingerprint moved, collect its evidence
and have the model write ``局/<chatId>.md``. Phase 2 (merge): if recaps were added,
changed or deleted since the last merge, ONE model call rewrites both the handbook and
the resident summary; chats whose merged recap is gone are sent as ``<deleted-chats>``,
under the rule "Delete only memory supported by deleted inputs" (the wording OpenAI
Codex's memories use, which the original quotes).

Invariants:

- One sync at a time per card within the process (a per-card lock). The input stamp (a
  hash of manifest, handbook, resident and recaps) is taken before every model call and
  all the call is built from is read after it, under the card's write lock (which every
  hard-path change and :meth:`CardMemory.delete_chat` take too); after the call it is
  compared, under that lock, together with the writes that follow. Any difference (a
  hand edit, a deletion, another sync, another process) discards the result: a recap
  counts as failed, a merge as ``skipped``.
- A hand-edited aggregate pins merging: sync recaps as usual but skips the merge (and
  says so) until :meth:`CardMemory.resume_merging`.
- Write order makes every crash heal at the next sync without losing memory: the recap
  file is written before the manifest records its fingerprint (a crash costs one
  repeated recap); both aggregates are written before the manifest records the merge
  (a crash repeats the same merge); the hard path records its decisions in the
  manifest before touching files (see :mod:`liyuan.card.manual`).
- A model failure or a malformed reply writes nothing; the same work is retried next
  sync. A chat that fails does not stop the others. A file that cannot be written
  raises :class:`~liyuan.errors.MemoryFileError` out of :meth:`CardMemory.sync`.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from liyuan.card import manual as card_manual
from liyuan.card.files import CardLayout, MemoryFiles, source_mark_of
from liyuan.card.inputs import RecapDiff, collect_chat_evidence, diff_recaps
from liyuan.card.manifest import Manifest, finish_pending, load_manifest, save_manifest
from liyuan.card.prompts import build_merge_prompt, build_recap_prompt, parse_merge_result, validate_recap
from liyuan.clock import Clock, IdFactory, random_ids, system_clock
from liyuan.context.budget import RESIDENT_MAX_CHARS
from liyuan.errors import MemoryFileError, ModelError, ModelOutputError
from liyuan.model import ChatModel
from liyuan.text import utf16_len

__all__ = ["CardMemory", "MergeStatus", "SyncOutcome", "card_locks"]

log = logging.getLogger("liyuan.card")

MergeStatus = Literal["no-change", "ok", "failed", "skipped"]


@dataclass(frozen=True)
class SyncOutcome:
    """What one sync did."""

    recapped: list[str] = field(default_factory=list)
    """Chats whose recap was (re)written."""
    failed: list[str] = field(default_factory=list)
    """Chats whose recap failed (model error, blank reply, inputs changed meanwhile)."""
    merged: MergeStatus = "no-change"
    forgotten: list[str] = field(default_factory=list)
    """Deleted chats the merge was told to forget."""


@dataclass
class _CardLocks:
    run: threading.Lock = field(default_factory=threading.Lock)
    """Held for a whole sync: one at a time per card."""
    write: threading.RLock = field(default_factory=threading.RLock)
    """Held briefly around compare-and-write; never across a model call."""


_LOCKS: dict[Path, _CardLocks] = {}
_LOCKS_GUARD = threading.Lock()


def card_locks(card_dir: Path) -> _CardLocks:
    """The process-wide locks of one card (the same object for every path spelling)."""
    key = card_dir.resolve()
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, _CardLocks())


def _off_limits(manifest: Manifest, chat_id: str) -> bool:
    """True when sync must not (re)write this chat's recap: forgotten, or edited by hand."""
    return chat_id in manifest.forgotten() or manifest.is_protected(card_manual.recap_ref(chat_id))


class CardMemory:
    """One card's cross-session memory.

    Args:
        card_dir: ``cards/<卡>``.
        model: The side model for recaps and merges.
        user_name: The user's name in the story.
        char_name: The card's character name.
        language: Output language of recaps and merges.
        clock: Timestamps for the manifest and backups.
        on_activity: Receives one-line progress notes in Chinese (the app shows them).
        files: The file adapter (tests inject failures here).
        ids: Unique suffixes for temp and backup files.
    """

    def __init__(
        self,
        card_dir: str | Path,
        model: ChatModel,
        *,
        user_name: str,
        char_name: str,
        language: str = "中文",
        clock: Clock = system_clock,
        on_activity: Callable[[str], None] | None = None,
        files: MemoryFiles | None = None,
        ids: IdFactory = random_ids,
    ) -> None:
        self.layout = CardLayout(Path(card_dir))
        self.model = model
        self.user_name = user_name
        self.char_name = char_name
        self.language = language
        self._clock = clock
        self._on_activity = on_activity
        self.files = files if files is not None else MemoryFiles(self.layout, clock=clock, ids=ids)
        self._locks = card_locks(self.layout.card_dir)

    def _say(self, line: str) -> None:
        log.info("%s: %s", self.layout.card_dir.name, line)
        if self._on_activity is not None:
            self._on_activity(line)

    # -- sync -------------------------------------------------------------------------

    def sync(self) -> SyncOutcome:
        """Recap changed chats, then merge and forget. Blocks while another sync of this card runs.

        Returns:
            What was recapped, what failed, how the merge went, what was forgotten.

        Raises:
            MemoryFileError: A memory file could not be written (nothing half-done stays:
                the next sync repeats the interrupted step).
        """
        with self._locks.run:
            recapped, failed = self._recap_all()
            merged, forgotten = self._merge()
        if recapped or forgotten:
            tail = f"、遗忘 {len(forgotten)} 局" if forgotten else ""
            self._say(f"记忆已更新：复盘 {len(recapped)} 局{tail}")
        return SyncOutcome(recapped, failed, merged, forgotten)

    def _recap_all(self) -> tuple[list[str], list[str]]:
        recapped: list[str] = []
        failed: list[str] = []
        for chat_id in self.layout.chat_ids():
            result = self._recap_one(chat_id)
            if result is True:
                recapped.append(chat_id)
            elif result is False:
                failed.append(chat_id)
        return recapped, failed

    def _recap_one(self, chat_id: str) -> bool | None:
        """True: recapped; False: failed; None: nothing to do."""
        layout, files = self.layout, self.files
        sessions = layout.sessions_dir(chat_id)
        # Decide and stamp in one critical section: a forget landing between the two
        # would otherwise get the recap of the chat it just forgot written back.
        with self._locks.write:
            manifest = load_manifest(files)
            if _off_limits(manifest, chat_id):
                return None
            mark = source_mark_of(sessions)
            record = manifest.recaps.get(chat_id)
            if not mark or (record is not None and record.source_mark == mark):
                return None
            name = layout.chat_name(chat_id)  # read only for chats with work: most syncs stop above
            try:
                before = files.input_stamp()
                if _off_limits(load_manifest(files), chat_id):
                    return None  # forgotten or edited just before the stamp (another process)
                previous = files.read_text(layout.recap_path(chat_id))
            except MemoryFileError as exc:
                self._say(f"复盘「{name}」失败：{exc}")
                return False
        evidence = collect_chat_evidence(
            layout.chat_dir(chat_id), user_name=self.user_name, char_name=self.char_name
        )
        if evidence is None:
            # Nothing to recap (e.g. a greeting only): remember the fingerprint so the
            # chat is not re-read on every sync, but claim no recap.
            with self._locks.write:
                manifest = load_manifest(files)
                manifest.record(chat_id).source_mark = mark
                save_manifest(files, manifest)
            return None
        prompt = build_recap_prompt(
            evidence, chat_name=name, previous_recap=previous, language=self.language,
            user_name=self.user_name, char_name=self.char_name,
        )
        self._say(f"正在复盘「{name}」（{evidence.beats} 轮 · {utf16_len(evidence.transcript)} 字）…")
        try:
            reply = self.model.complete(prompt.request()).text
        except ModelError as exc:
            self._say(f"复盘「{name}」失败：{exc}")
            return False
        with self._locks.write:
            # The manifest is read again, not trusted to the stamp alone: a chat forgotten
            # or hand-protected during the call must never get a recap written back.
            manifest = load_manifest(files)
            if _off_limits(manifest, chat_id):
                self._say(f"复盘「{name}」已丢弃：期间这一局被遗忘或复盘被手工改过")
                return False
            if files.input_stamp() != before or not source_mark_of(sessions):
                self._say(f"复盘「{name}」已丢弃：期间记忆或这一局被改动")
                return False
            try:
                text = validate_recap(reply)
            except ModelOutputError as exc:
                self._say(f"复盘「{name}」失败：{exc}")
                return False
            files.write_text(layout.recap_path(chat_id), text + "\n")
            record = manifest.record(chat_id)
            record.source_mark = mark  # taken before the call: newer sessions get a new recap
            record.recap_at = self._clock()
            save_manifest(files, manifest)
        return True

    def _merge(self) -> tuple[MergeStatus, list[str]]:
        layout, files = self.layout, self.files
        # Stamp, then read all the merge decides from, in one critical section. A forget
        # landing between a manifest read and the stamp would otherwise be merged from
        # the old manifest: the chat sent through <deleted-chats>, the others marked
        # merged into an emptied handbook.
        with self._locks.write:
            finish_pending(files, load_manifest(files))  # a crash may have left removals undone
            try:
                before = files.input_stamp()
                # Read after the stamp: a writer outside this process (no shared lock) that
                # lands before the stamp is seen here; one that lands after moves the stamp.
                manifest = load_manifest(files)
                diff = diff_recaps(files, manifest)
                handbook = files.read_text(layout.handbook)
                resident = files.read_text(layout.resident)
            except MemoryFileError as exc:
                self._say(f"合并记忆失败：{exc}")
                return "failed", []
        if manifest.manual is not None and manifest.manual.pending:
            self._say("合并记忆暂缓：另一处的删除还没做完，下次同步再合并")
            return "skipped", []  # never merge around removals still owed (a leak back)
        manual = manifest.manual
        if manual is not None and manual.aggregate_pinned:
            waiting = len(diff.changed) + len(diff.deleted)
            tail = f"，{waiting} 局的改动等着并入" if waiting else ""
            self._say(f"记忆已手工固定：自动合并暂停{tail}（resume_merging() 可恢复）")
            return "skipped", []
        requested = manual is not None and manual.merge_requested and bool(handbook or resident)
        if diff.empty and not requested:
            return "no-change", []
        prompt = build_merge_prompt(
            handbook=handbook, resident=resident, changed=diff.changed, deleted=diff.deleted,
            language=self.language, user_name=self.user_name, char_name=self.char_name,
        )
        tail = f"，遗忘 {len(diff.deleted)} 局" if diff.deleted else ""
        self._say(f"正在合并记忆（{len(diff.changed)} 局有更新{tail}）…")
        try:
            reply = self.model.complete(prompt.request()).text
        except ModelError as exc:
            self._say(f"合并记忆失败：{exc}")
            return "failed", []
        with self._locks.write:
            if files.input_stamp() != before:
                self._say("合并结果已丢弃：期间记忆被改动，下次同步重来")
                return "skipped", []
            parsed = parse_merge_result(reply)
            if parsed is None:
                self._say("合并记忆失败：回复格式不对（缺少或重复标记行、顺序颠倒或有一份为空）")
                return "failed", []
            self._write_merge(diff, *parsed)
        return "ok", list(diff.deleted)

    def _write_merge(self, diff: RecapDiff, handbook: str, resident: str) -> None:
        layout, files = self.layout, self.files
        manifest = load_manifest(files)
        # Aggregates first, manifest last: a crash in between repeats this merge.
        if not manifest.is_protected(card_manual.HANDBOOK_REF):
            files.write_text(layout.handbook, handbook + "\n")
        if not manifest.is_protected(card_manual.RESIDENT_REF):
            files.write_text(layout.resident, resident + "\n")
        resident_chars = utf16_len(resident)
        if resident_chars > RESIDENT_MAX_CHARS:
            # Kept as written: the per-beat budget cuts it when it is sent.
            log.warning("resident summary is %d chars (cap %d)", resident_chars, RESIDENT_MAX_CHARS)
        now = self._clock()
        for chat_id, digest in diff.hashes.items():
            if chat_id not in manifest.recaps:
                manifest.record(chat_id).recap_at = now  # a recap written by hand, no chat behind it
            manifest.record(chat_id).merged_hash = digest
        for chat_id in diff.deleted:
            # Keep the fingerprint: an unchanged chat must not be recapped back to life.
            manifest.record(chat_id).merged_hash = None
        manifest.merged_at = now
        if manifest.manual is not None:
            manifest.manual.merge_requested = False  # resume_merging() asked for this merge
        save_manifest(files, manifest)
        self._say(f"记忆已更新：手册 {utf16_len(handbook)} 字 · 常驻摘要 {resident_chars} 字")

    # -- reading ----------------------------------------------------------------------

    def load_resident_summary(self) -> str | None:
        """The resident summary, trimmed; ``None`` when there is none (fit it before sending).

        Raises:
            MemoryFileError: The file exists but cannot be read.
        """
        text = self.files.read_text(self.layout.resident)
        if text is None or not text.strip():
            return None
        return text.strip()

    def read_memory(self, ref: str) -> tuple[str, str] | None:
        """See :func:`liyuan.card.manual.read_memory`."""
        return card_manual.read_memory(self.files, ref)

    def list_memory(self) -> list[card_manual.MemoryDoc]:
        """See :func:`liyuan.card.manual.list_memory`."""
        with self._locks.write:
            return card_manual.list_memory(self.files)

    def search_memory(self, query: str, limit: int = 6) -> list[card_manual.MemoryHit]:
        """See :func:`liyuan.card.manual.search_memory`."""
        with self._locks.write:
            return card_manual.search_memory(self.files, query, limit)

    # -- changing ---------------------------------------------------------------------

    def change_memory(self, ref: str, version: str, content: str | None) -> None:
        """Hard path: replace or delete a document by hand. See :func:`liyuan.card.manual.change_memory`."""
        with self._locks.write:
            card_manual.change_memory(self.files, ref, version, content)

    def forget_chat_recap(self, chat_id: str) -> bool:
        """Hard path: forget a chat for good. See :func:`liyuan.card.manual.forget_chat_recap`."""
        with self._locks.write:
            return card_manual.forget_chat_recap(self.files, chat_id)

    def resume_merging(self) -> bool:
        """Undo the pin of a hand-edited aggregate: the next sync merges again.

        That merge takes the hand-edited handbook and resident as its input (the merge
        prompt treats hand edits as memory to keep) and rewrites both, folding in what
        changed while merging was paused. See :func:`liyuan.card.manual.resume_merging`.

        Returns:
            False when merging was not paused.
        """
        with self._locks.write:
            resumed = card_manual.resume_merging(self.files)
        if resumed:
            self._say("已恢复自动合并：下次同步以手改过的记忆为底重新合并")
        return resumed

    def delete_chat(self, chat_id: str) -> bool:
        """Delete a chat: its recap first, then its folder (sessions, meta, vectors).

        The next sync sees a merged recap gone and sends the chat to ``<deleted-chats>``
        (the soft forget). The recap goes first so that a crash in between still
        forgets the chat rather than keeping memory of a chat that no longer exists.

        Returns:
            False when neither the chat folder nor its recap existed.

        Raises:
            ConfigError: Invalid chat id.
            MemoryFileError: Something could not be removed.
        """
        recap = self.layout.recap_path(chat_id)  # validates the id before any path is used
        folder = self.layout.chat_dir(chat_id)
        with self._locks.write:
            existed = recap.exists() or folder.exists()
            self.files.delete(recap)
            try:
                shutil.rmtree(folder)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise MemoryFileError(f"无法删除这一局的文件夹 {folder}：{exc}") from exc
        if existed:
            self._say(f"已删除一局：{chat_id}")
        return existed
