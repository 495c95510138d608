"""The hard path as :class:`~liyuan.card.sync.CardMemory` offers it: reading and changing by reference.

Each method takes the card's write lock (an OS file lock across processes, see
:mod:`liyuan.card.lock`) around the function of :mod:`liyuan.card.manual` or
:mod:`liyuan.card.repair` that does the work, so a hard-path change never interleaves
with a sync's read-decide-write, in this process or another.
"""

from __future__ import annotations

from liyuan.card import manual as card_manual
from liyuan.card.housekeeping import remove_inside
from liyuan.card.layout import CHATS_DIR, CardLayout
from liyuan.card.memstore import CardLocks, MemoryStore
from liyuan.card.repair import ManifestRepair, repair_manifest
from liyuan.card.sessions import SessionStore
from liyuan.errors import MemoryFileError

__all__ = ["HandPath"]


class HandPath:
    """Base of :class:`~liyuan.card.sync.CardMemory`: the hard path and the reading calls."""

    layout: CardLayout
    files: MemoryStore
    sessions: SessionStore
    _locks: CardLocks

    def _say(self, line: str) -> None:
        raise NotImplementedError

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
