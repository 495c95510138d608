"""Syncing a card's memory: recap each changed chat, then merge and forget.

Phase 1 (recaps): for every chat whose sessions' fingerprint moved, collect its evidence
and have the model write ``局/<chatId>.md``. Phase 2 (merge): if recaps were added,
changed or deleted since the last merge, ONE model call rewrites both the handbook and
the resident summary; chats whose merged recap is gone are sent as ``<deleted-chats>``,
under the rule "Delete only memory supported by deleted inputs" (the wording OpenAI
Codex's memories use, which the original quotes).

Invariants:

- One sync at a time per card, across threads and processes (the card's run lock, an
  OS file lock: :mod:`liyuan.card.lock`); a second sync waits for the first and says so.
  Everything a model call is built from is read under the card's write lock (an OS
  file lock too, which every hard-path change and :meth:`CardMemory.delete_chat` take)
  and checked again under it after the call, together with the writes that follow. A
  merge compares the input stamp (a hash of manifest, handbook, resident and recaps): any
  difference (a hand edit, a deletion, another sync) discards it as ``skipped``. A recap
  compares only what it was built from, its chat's previous recap, sessions (the same
  files, perhaps grown) and forgotten/protected state, so a change elsewhere in the card
  does not pay for the same recap twice; a difference counts it as failed. Right before
  each memory file is written its current text is compared with the text the call was
  built from (a hand edit made in an editor, which takes no lock, is never overwritten),
  and before an aggregate is overwritten its previous text goes to ``.history/``.
- The reading calls and the hard path (:meth:`CardMemory.change_memory`, ``forget_chat_recap``,
  ``resume_merging``, ``repair_manifest``, ``delete_chat``) take the same write lock around
  the function of :mod:`liyuan.card.manual` or :mod:`liyuan.card.repair` that does the work,
  so a hand change never interleaves with a sync's read-decide-write, here or in another process.
- A damaged manifest stops the sync (:class:`~liyuan.errors.ManifestError`, and an
  activity line) before anything is read or written; :meth:`CardMemory.repair_manifest`
  repairs it. Temp files a crashed write left behind are removed when a sync starts.
- A hand-edited aggregate pins merging: sync recaps as usual but skips the merge (and
  says so) until :meth:`CardMemory.resume_merging`. A handbook left without any chat
  block (``来源：局/<id>.md``) is rebuilt from every recap by the next merge due, and says so.
- Write order makes every crash heal at the next sync without losing memory: the recap
  file is written before the manifest records its fingerprint (a crash costs one
  repeated recap); both aggregates are written before the manifest records the merge
  (a crash repeats the same merge); the hard path records its decisions in the
  manifest before touching files (see :mod:`liyuan.card.manual`).
- A model failure or a malformed reply writes nothing (a merge reply must pass
  :func:`liyuan.card.merge_check.check_merge`: no lost chat block, no unknown chat,
  no cut-off reply ...; an over-long resident summary is cut at a paragraph); the same work is retried next
  sync. A model failure is anything the model object's ``complete()`` raises (an
  ``Exception``) and a reply holding a lone surrogate (:func:`liyuan.model.side_call`);
  errors of this package's own code are not caught. A chat that fails does not stop
  the others. A file that cannot be written raises
  :class:`~liyuan.errors.MemoryFileError` out of :meth:`CardMemory.sync`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from liyuan.card import manual as card_manual
from liyuan.card.files import MemoryFiles
from liyuan.card.housekeeping import remove_inside
from liyuan.card.inputs import (
    MERGE_BATCH_RECAPS,
    LoadedBranch,
    SyncSettings,
    collect_chat_evidence,
    diff_recaps,
)
from liyuan.card.layout import CHATS_DIR, CardLayout
from liyuan.card.manifest import Manifest, finish_pending, load_manifest, save_manifest
from liyuan.card.memstore import MemoryStore
from liyuan.card.merge_check import check_merge, merge_needs_every_recap
from liyuan.card.merge_memo import merge_inputs, refusal_line, remember_refusal, unsourced_hint
from liyuan.card.merge_write import still_holds, write_merge
from liyuan.card.prompts import build_merge_prompt, build_recap_prompt, validate_recap
from liyuan.card.repair import ManifestRepair, repair_manifest
from liyuan.card.resident import read_resident
from liyuan.card.revised import fresh_revisions, note_revisions, revised_chats, take_back
from liyuan.card.sessions import FileSessions, SessionStore, chat_name
from liyuan.clock import Clock, IdFactory, random_ids, system_clock
from liyuan.context.budget import RESIDENT_MAX_CHARS
from liyuan.errors import ManifestError, MemoryFileError, ModelError, ModelOutputError, UnsafePathError
from liyuan.model import ChatModel, require_finished, side_call
from liyuan.text import utf16_len

__all__ = ["CardMemory", "MergeStatus", "SyncOutcome"]

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
    errors: list[str] = field(default_factory=list)
    """Background syncs that stopped on an error (not a model failure, which is in
    ``failed``/``merged``), as ``type: message``; set by :meth:`liyuan.Card.sync`."""


def _off_limits(manifest: Manifest, chat_id: str) -> bool:
    """True when sync must not (re)write this chat's recap: forgotten, or edited by hand."""
    return chat_id in manifest.forgotten() or manifest.is_protected(card_manual.recap_ref(chat_id))


class CardMemory:
    """One card's cross-session memory.

    Args:
        card_dir: ``cards/<卡>``.
        model: The side model for recaps and merges.
        settings: The names and the settings read (:class:`SyncSettings`).
        clock: Timestamps for the manifest and backups.
        on_activity: Receives one-line progress notes in Chinese (the app shows them).
        files: Where the memory documents are (:class:`~liyuan.card.memstore.MemoryStore`);
            default: the card folder (:class:`~liyuan.card.files.MemoryFiles`, where tests inject failures).
        ids: Unique suffixes for temp and backup files.
        loaded: Session branches an open chat holds already (see
            :func:`~liyuan.card.inputs.collect_chat_evidence`); :class:`liyuan.Card` passes them.
        sessions: Where the chats' sessions are (:class:`~liyuan.card.sessions.SessionStore`);
            default: the files in the card folder.
    """

    def __init__(
        self,
        card_dir: str | Path,
        model: ChatModel,
        settings: SyncSettings,
        *,
        clock: Clock = system_clock,
        on_activity: Callable[[str], None] | None = None,
        files: MemoryStore | None = None,
        ids: IdFactory = random_ids,
        loaded: LoadedBranch | None = None,
        sessions: SessionStore | None = None,
    ) -> None:
        self.layout = CardLayout(Path(card_dir))
        self.sessions: SessionStore = sessions if sessions is not None else FileSessions(self.layout)
        self.settings = settings
        self._loaded = loaded
        self.model = model
        self._clock = clock
        self._on_activity = on_activity
        self.files: MemoryStore = files if files is not None else MemoryFiles(self.layout, clock=clock, ids=ids)
        self._locks = self.files.locks

    def _say(self, line: str) -> None:
        log.info("%s: %s", self.layout.card_dir.name, line)
        if self._on_activity is not None:
            self._on_activity(line)

    # -- reading ----------------------------------------------------------------------

    def load_resident_summary(self) -> str | None:
        """The resident summary, trimmed; ``None`` when there is none (fit it before sending).

        Raises:
            MemoryFileError: The file exists but cannot be read.
        """
        return read_resident(self.files, self.layout)

    def read_memory(self, ref: str) -> tuple[str, str] | None:
        """See :func:`liyuan.card.manual.read_memory`."""
        return card_manual.read_memory(self.files, ref)

    def list_memory(self) -> list[card_manual.MemoryDoc]:
        """See :func:`liyuan.card.manual.list_memory` (works on a read-only card folder too)."""
        with self._locks.write.reading():
            return card_manual.list_memory(self.files)

    def search_memory(self, query: str, limit: int = 6) -> list[card_manual.MemoryHit]:
        """See :func:`liyuan.card.manual.search_memory` (works on a read-only card folder too)."""
        with self._locks.write.reading():
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

    def repair_manifest(self) -> ManifestRepair:
        """Rebuild a damaged manifest; the damaged file is kept in ``.history/``.

        See :func:`liyuan.card.repair.repair_manifest` for what is read back and which
        fail-closed defaults fill what cannot be. A healthy or missing manifest is left alone.
        """
        with self._locks.write:
            repair = repair_manifest(self.files, self.sessions)
        if repair.kept_at is not None:
            unknown = f"；读不回的部分按最保守的方式处理：{'、'.join(repair.unknown)}" if repair.unknown else ""
            self._say(f"记忆清单已重建，损坏的文件保存在 {repair.kept_at.name}{unknown}")
        return repair

    def delete_chat(self, chat_id: str) -> bool:
        """Delete a chat: its recap first, then its folder (sessions, meta, vectors).

        The next sync sees a merged recap gone and sends the chat to ``<deleted-chats>``
        (the soft forget). The recap goes first so that a crash in between still
        forgets the chat rather than keeping memory of a chat that no longer exists.

        Returns:
            False when neither the chat folder nor its recap existed.

        Raises:
            ConfigError: Invalid chat id.
            UnsafePathError: ``对话/`` or the chat folder is a symlink (nothing is removed).
            MemoryFileError: Something could not be removed.
        """
        recap = self.layout.recap_path(chat_id)  # validates the id before any path is used
        folder = self.layout.chat_dir(chat_id)  # a symlink on the way: UnsafePathError, nothing removed
        with self._locks.write:
            existed = self.files.exists(recap) or folder.exists() or bool(self.sessions.names(chat_id))
            self.files.delete(recap, at_once=True)  # gone before the sessions, on every backend
            self.sessions.drop(chat_id)  # sessions kept elsewhere (a database); files go with the folder
            try:
                # Relative to directory descriptors: a link swapped in after the check above
                # still cannot make this remove anything outside the card.
                remove_inside(self.layout.card_dir, (CHATS_DIR, chat_id))
            except OSError as exc:
                raise MemoryFileError(f"无法删除这一局的文件夹 {folder}：{exc}") from exc
        if existed:
            self._say(f"已删除一局：{chat_id}")
        return existed

    # -- sync -------------------------------------------------------------------------

    def sync(self) -> SyncOutcome:
        """Recap changed chats, then merge and forget. Blocks while another sync of this card runs.

        Returns:
            What was recapped, what failed, how the merge went, what was forgotten.

        Raises:
            ManifestError: The manifest is damaged; nothing was read or written (see
                :meth:`repair_manifest`).
            UnsafePathError: A memory path is a symlink or leads outside the card.
            MemoryFileError: A memory file could not be written (nothing half-done stays:
                the next sync repeats the interrupted step).
        """
        run = self._locks.run
        try:
            free = run.acquire(blocking=False)
        except UnsafePathError as exc:  # the lock file itself, or 记忆/, is a symlink
            self._say(f"记忆同步已停止：{exc}")
            raise
        if not free:
            self._say("这张卡的记忆正在别处同步，等它做完再接着同步…")
            run.acquire()
        try:
            manifest = self._prepare()
            recapped, failed = self._recap_all(manifest)
            merged, forgotten, left = self._merge()
            for _ in range(left // MERGE_BATCH_RECAPS + 1):  # the rest of the changed recaps, a batch a call
                if merged != "ok" or not left:
                    break
                merged, more, left = self._merge()
                forgotten += more
        finally:
            run.release()
        if recapped or forgotten:
            tail = f"、遗忘 {len(forgotten)} 局" if forgotten else ""
            self._say(f"记忆已更新：复盘 {len(recapped)} 局{tail}")
        return SyncOutcome(recapped, failed, merged, forgotten)

    def _prepare(self) -> Manifest:
        """Stop on a symlink or a damaged manifest; remove temp files a crashed write left behind.
        Returns the manifest as read, for picking the chats with work."""
        try:
            with self._locks.write:
                self.files.check_paths()
                manifest = load_manifest(self.files)
                removed = self.files.remove_orphan_temps()
        except UnsafePathError as exc:
            self._say(f"记忆同步已停止：{exc}")
            raise
        except ManifestError as exc:
            self._say(f"记忆清单已损坏，同步已停止：{exc}")
            raise
        if removed:
            self._say(f"清理了 {removed} 个写入中断时留下的临时文件")
        return manifest

    def _recap_all(self, manifest: Manifest) -> tuple[list[str], list[str]]:
        """Recap every chat whose sessions moved: picked with the manifest read once (a stat per
        chat), each checked again under the write lock before its recap (:meth:`_recap_one`)."""
        recapped: list[str] = []
        failed: list[str] = []
        for chat_id in self.sessions.chat_ids():
            if _off_limits(manifest, chat_id):
                continue
            record = manifest.recaps.get(chat_id)
            try:
                mark = self.sessions.mark(chat_id)
            except UnsafePathError as exc:  # this chat's folder leads outside: skip it, sync the others
                self._say(f"复盘「{chat_id}」已跳过：{exc}")
                failed.append(chat_id)
                continue
            if not mark or (record is not None and record.source_mark == mark):
                continue
            result = self._recap_one(chat_id)
            if result is True:
                recapped.append(chat_id)
            elif result is False:
                failed.append(chat_id)
        return recapped, failed

    def _recap_one(self, chat_id: str) -> bool | None:
        """True: recapped; False: failed; None: nothing to do."""
        layout, files, sessions = self.layout, self.files, self.sessions
        # Decide and stamp in one critical section: a forget landing between the two
        # would otherwise get the recap of the chat it just forgot written back.
        with self._locks.write:
            manifest = load_manifest(files)
            if _off_limits(manifest, chat_id):
                return None
            mark = sessions.mark(chat_id)
            record = manifest.recaps.get(chat_id)
            if not mark or (record is not None and record.source_mark == mark):
                return None
            name = chat_name(sessions, chat_id)  # read only for chats with work: most syncs stop above
            heads = sessions.heads(chat_id)  # which sessions the recap is built from (checked after the call)
            try:
                previous = files.read_text(layout.recap_path(chat_id))
                if _off_limits(load_manifest(files), chat_id):
                    return None  # forgotten or edited by a writer that took no lock
            except (ManifestError, UnsafePathError):
                raise
            except MemoryFileError as exc:
                self._say(f"复盘「{name}」失败：{exc}")
                return False
        cfg = self.settings
        evidence = collect_chat_evidence(sessions, chat_id, user_name=cfg.user_name, char_name=cfg.char_name,
                                         max_chars=cfg.recap_input_max_chars, loaded=self._loaded,
                                         on_damage=lambda note: self._say(f"「{name}」的会话文件有损坏的行：{note}"))
        if evidence is None:
            # Nothing to recap (e.g. a greeting only): remember the fingerprint so the
            # chat is not re-read on every sync, but claim no recap.
            with self._locks.write:
                manifest = load_manifest(files)
                manifest.record(chat_id).source_mark = mark
                save_manifest(files, manifest)
            return None
        fresh = fresh_revisions(record, evidence)  # after an edit the old recap may hold the old text: not shown
        prompt = build_recap_prompt(evidence, chat_name=name, previous_recap=None if fresh else previous,
                                    language=cfg.language, user_name=cfg.user_name, char_name=cfg.char_name)
        self._say(f"正在复盘「{name}」（{evidence.turns} 轮 · {utf16_len(evidence.transcript)} 字）…")
        try:
            completion = side_call(self.model, prompt.request())
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
            # Built from this chat's sessions and previous recap only: a change elsewhere leaves
            # it valid (discarding it would pay twice). Its sessions may have grown, but must be
            # the same files (a chat deleted, or deleted and reopened under its id, has others).
            if not still_holds(files, layout.recap_path(chat_id), previous) or not sessions.kept(chat_id, heads):
                self._say(f"复盘「{name}」已丢弃：期间这一局或它的复盘被改动")
                return False
            try:
                text = validate_recap(completion.text, instructions=prompt.system)
                require_finished(completion, "复盘")
            except ModelOutputError as exc:
                self._say(f"复盘「{name}」失败：{exc}")
                return False
            if not files.replace_text(layout.recap_path(chat_id), text + "\n", previous):
                self._say(f"复盘「{name}」已丢弃：写入时复盘正好被改动（改动已保留）")
                return False
            record = manifest.record(chat_id)
            record.source_mark = mark  # taken before the call: newer sessions get a new recap
            record.recap_at = self._clock()
            note_revisions(record, evidence, fresh)
            save_manifest(files, manifest)
        return True

    def _merge(self) -> tuple[MergeStatus, list[str], int]:
        layout, files = self.layout, self.files
        # Stamp, then read all the merge decides from, in one critical section: a forget landing
        # between a manifest read and the stamp would be merged from the old manifest.
        with self._locks.write:
            finish_pending(files, load_manifest(files))  # a crash may have left removals undone
            try:
                before = files.input_stamp()
                # Read after the stamp: a writer outside this process (no shared lock) that
                # lands before the stamp is seen here; one that lands after moves the stamp.
                manifest = load_manifest(files)
                diff = diff_recaps(files, manifest, self.sessions)
                handbook = files.read_text(layout.handbook)
                resident = files.read_text(layout.resident)
                unsourced = merge_needs_every_recap(handbook, resident, diff, manifest)
                if unsourced:
                    diff = diff_recaps(files, manifest, self.sessions, every=True)
            except (ManifestError, UnsafePathError):
                raise
            except MemoryFileError as exc:
                self._say(f"合并记忆失败：{exc}")
                return "failed", [], 0
        if manifest.manual is not None and manifest.manual.pending:
            self._say("合并记忆暂缓：另一处的删除还没做完，下次同步再合并")
            return "skipped", [], 0  # never merge around removals still owed (a leak back)
        manual = manifest.manual
        if manual is not None and manual.aggregate_pinned:
            waiting = len(diff.changed) + len(diff.deleted)
            tail = f"，{waiting} 局的改动等着并入" if waiting else ""
            self._say(f"记忆已手工固定：自动合并暂停{tail}（resume_merging() 可恢复）")
            return "skipped", [], 0
        requested = manual is not None and manual.merge_requested and bool(handbook or resident)
        if diff.empty and not requested:
            return "no-change", [], 0
        # A rebuild from every recap (no source lines) must see them all in one call.
        diff, left = (diff, 0) if unsourced else diff.first(MERGE_BATCH_RECAPS)
        inputs = merge_inputs(handbook, resident, diff, requested)
        if manifest.refused_merge is not None and manifest.refused_merge.inputs == inputs:
            self._say(refusal_line(manifest.refused_merge, unsourced))
            return "skipped", [], 0  # the same inputs would buy the same refusal
        if unsourced:
            self._say(f"手册里没有任何「来源：局/<id>.md」行（像是手改的）：这次合并附上全部 {len(diff.changed)} "
                      "局的复盘，以手改的内容为底按局重建；以后手改手册请保留各局的来源行")
        revised = revised_chats(diff, manifest)  # their old lines are taken back by source, not sent
        sent = (take_back(handbook, revised), None if revised else resident)
        prompt = build_merge_prompt(self.settings, handbook=sent[0], resident=sent[1], changed=diff.changed,
                                    deleted=diff.deleted, revised=revised)
        tail = f"，遗忘 {len(diff.deleted)} 局" if diff.deleted else ""
        later = f"；另有 {left} 局下一批再并" if left else ""
        self._say(f"正在合并记忆（{len(diff.changed)} 局有更新{tail}{later}）…")
        try:
            completion = side_call(self.model, prompt.request())
        except ModelError as exc:
            self._say(f"合并记忆失败：{exc}")
            return "failed", [], 0
        with self._locks.write:
            if files.input_stamp() != before:
                self._say("合并结果已丢弃：期间记忆被改动，下次同步重来")
                return "skipped", [], 0
            try:
                checked = check_merge(completion, previous_handbook=sent[0], previous_resident=sent[1],
                                      chats={*diff.hashes, *self.sessions.chat_ids()}, deleted=diff.deleted,
                                      forgotten=manifest.forgotten(), instructions=prompt.system, sent=diff.sent)
            except ModelOutputError as exc:
                remember_refusal(files, inputs, str(exc))
                self._say(f"合并记忆失败：{exc}。同样的输入不再重复请求{unsourced_hint(unsourced)}")
                return "failed", [], 0
            written = write_merge(files, diff, checked.handbook, checked.resident, before=(handbook, resident),
                                  now=self._clock())
            if written is None:
                self._say("合并结果已丢弃：手册或常驻摘要在写入前被改动，下次同步重来")
                return "skipped", [], 0
            self._say(written)
            if checked.resident_cut:
                self._say(f"常驻摘要超出 {RESIDENT_MAX_CHARS} 字（写了 {checked.resident_chars_written} 字），"
                          f"已在段落处截到 {utf16_len(checked.resident)} 字")
        return "ok", list(diff.deleted), left
