"""A card's chats' sessions, wherever they are kept: the seam the card and its sync read through.

:class:`SessionStore` is what :class:`~liyuan.Card` and the card's sync
(:class:`~liyuan.card.sync.CardMemory`) need of the sessions: which chats have any, a
chat's sessions in order, one session's log (:class:`~liyuan.session.log.SessionLog`),
a fingerprint that changes whenever a session of the chat grows, and the heads that
tell the same sessions from new ones under the same chat id. Everything a session means
is read by one loader from the log's bytes, so the recaps are the same on every backend.

:class:`FileSessions` is the default: ``对话/<chatId>/会话/*.jsonl`` in the card folder,
read and checked exactly as before the seam (a symlinked file is no session, a chat
folder that leads outside the card raises :class:`~liyuan.errors.UnsafePathError`).
``liyuan.storage.pgsessions.PostgresSessions`` keeps them in PostgreSQL.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from liyuan.card.layout import CHAT_META_FILE, SESSIONS_DIR, CardLayout, chat_name_from
from liyuan.errors import LiyuanError, MemoryFileError, TreeError
from liyuan.fileio import atomic_write_bytes
from liyuan.session.loader import SessionContent
from liyuan.session.log import FileSessionLog, SessionLog

__all__ = ["FileSessions", "SessionStore", "chat_name", "import_by_copy", "session_heads", "sessions_kept",
           "source_mark_of"]

_log = logging.getLogger(__name__)


def source_mark_of(sessions_dir: Path) -> str:
    """The fingerprint of a chat's sessions: ``name:size:mtime_ms`` per file, ``|``-joined.

    Only ``*.jsonl`` files count, in name order. A file that vanishes between listing and
    stat is skipped. A missing or unreadable folder gives ``""``, which means "skip".
    """
    try:
        names = sorted(p.name for p in sessions_dir.iterdir() if p.name.endswith(".jsonl"))
    except OSError:
        return ""
    parts: list[str] = []
    for name in names:
        try:
            stat = (sessions_dir / name).stat()
        except OSError:
            continue
        parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns // 1_000_000}")
    return "|".join(parts)


SESSION_HEAD_BYTES = 4096
"""How much of each session file :func:`session_heads` keeps."""


def session_heads(sessions_dir: Path) -> dict[str, bytes]:
    """The first bytes of every ``*.jsonl`` session file: which files a recap is built from.

    Session files are only ever appended to, so a head stays the same while the chat
    goes on; a chat deleted and started again under the same id has new files whose
    heads differ (other entry ids and timestamps). A missing folder gives ``{}``.
    """
    try:
        names = sorted(p.name for p in sessions_dir.iterdir() if p.name.endswith(".jsonl"))
    except OSError:
        return {}
    heads: dict[str, bytes] = {}
    for name in names:
        try:
            with open(sessions_dir / name, "rb") as file:
                heads[name] = file.read(SESSION_HEAD_BYTES)
        except OSError:
            continue
    return heads


def sessions_kept(sessions_dir: Path, heads: dict[str, bytes]) -> bool:
    """True when every file of ``heads`` is still there and still starts with its head (grown or not).

    False for no heads at all: there is nothing the sessions could still be.
    """
    if not heads:
        return False
    for name, head in heads.items():
        try:
            with open(sessions_dir / name, "rb") as file:
                if file.read(len(head)) != head:
                    return False
        except OSError:
            return False
    return True


class SessionStore(Protocol):
    """The sessions of one card's chats."""

    def chat_ids(self) -> list[str]:
        """The chats of the card, sorted."""
        ...

    def names(self, chat_id: str) -> list[str]:
        """The chat's sessions in order (``001.jsonl`` ...); empty when it has none."""
        ...

    def log(self, chat_id: str, name: str, *, fsync: bool = True) -> SessionLog:
        """One session of the chat, to read and append to (created on its first write)."""
        ...

    def read(self, chat_id: str, name: str) -> SessionContent | None:
        """One session's content, read-only; ``None`` when it is gone or unreadable."""
        ...

    def raw(self, chat_id: str, name: str) -> bytes | None:
        """One session's bytes exactly as stored (what a file of it holds); ``None`` when gone."""
        ...

    def mark(self, chat_id: str) -> str:
        """A fingerprint of the chat's sessions that changes when any of them grows;
        ``""`` when it has none (the sync skips it)."""
        ...

    def heads(self, chat_id: str) -> dict[str, bytes]:
        """The first bytes of each session: which sessions a recap is built from."""
        ...

    def kept(self, chat_id: str, heads: dict[str, bytes]) -> bool:
        """True when every session of ``heads`` is still there with its head (grown or not)."""
        ...

    def meta(self, chat_id: str) -> bytes | None:
        """The chat's ``meta.json`` bytes (its display name), ``None`` when it has none."""
        ...

    def set_meta(self, chat_id: str, data: bytes) -> None:
        """Store the chat's ``meta.json`` bytes whole."""
        ...

    def drop(self, chat_id: str) -> None:
        """Delete every session of the chat (and its meta)."""
        ...

    def import_into(self, chat_id: str, name: str, write: Callable[[Path], object]) -> None:
        """Store a whole new session that ``write(path)`` writes as a file (all or nothing:
        ``write`` creates ``path`` atomically, or raises having stored nothing)."""
        ...

    def clean_dead_imports(self) -> int:
        """Remove what imports killed mid-way left behind; how many pieces went."""
        ...


def import_by_copy(store: SessionStore, chat_id: str, name: str, write: Callable[[Path], object]) -> None:
    """:meth:`SessionStore.import_into` for a store that is not a folder: the session is
    written as a file in a temporary folder first, then stored whole as a new session."""
    with tempfile.TemporaryDirectory(prefix="liyuan-import-") as folder:
        target = Path(folder) / name
        write(target)
        store.log(chat_id, name).create(target.read_bytes())


def chat_name(sessions: SessionStore, chat_id: str) -> str:
    """The chat's display name (its meta's ``name``), else its id; never raises for a bad meta."""
    try:
        meta = sessions.meta(chat_id)
    except (OSError, LiyuanError):
        meta = None
    return chat_name_from(meta, chat_id)


class FileSessions:
    """Sessions as JSONL files in the card folder (the default; see the module docstring)."""

    def __init__(self, layout: CardLayout) -> None:
        self.layout = layout

    def chat_ids(self) -> list[str]:
        return self.layout.chat_ids()

    def names(self, chat_id: str) -> list[str]:
        folder = self.layout.sessions_dir(chat_id)
        try:
            # A symlinked session file would read from outside the card: it is no session.
            return sorted(p.name for p in folder.iterdir()
                          if p.name.endswith(".jsonl") and p.is_file() and not p.is_symlink())
        except OSError:
            return []

    def path(self, chat_id: str, name: str) -> Path:
        """Where the session's file is (checked: a symlinked file or folder is refused)."""
        return self.layout.chat_file(chat_id, SESSIONS_DIR, name)

    def log(self, chat_id: str, name: str, *, fsync: bool = True) -> FileSessionLog:
        return FileSessionLog(self.path(chat_id, name), fsync=fsync)

    def read(self, chat_id: str, name: str) -> SessionContent | None:
        try:
            return FileSessionLog(self.layout.sessions_dir(chat_id) / name).read()
        except TreeError:  # an unreadable file reads as no session, as it always did
            return None

    def raw(self, chat_id: str, name: str) -> bytes | None:
        try:
            return self.path(chat_id, name).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TreeError(f"无法读取会话文件 {chat_id}/{name}：{exc}") from exc

    def mark(self, chat_id: str) -> str:
        return source_mark_of(self.layout.sessions_dir(chat_id))

    def heads(self, chat_id: str) -> dict[str, bytes]:
        return session_heads(self.layout.sessions_dir(chat_id))

    def kept(self, chat_id: str, heads: dict[str, bytes]) -> bool:
        return sessions_kept(self.layout.sessions_dir(chat_id), heads)

    def meta(self, chat_id: str) -> bytes | None:
        try:
            return self.layout.chat_file(chat_id, CHAT_META_FILE).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise MemoryFileError(f"无法读取这一局的 {CHAT_META_FILE}：{exc}") from exc

    def set_meta(self, chat_id: str, data: bytes) -> None:
        path = self.layout.chat_file(chat_id, CHAT_META_FILE)
        try:
            atomic_write_bytes(path, data)
        except OSError as exc:
            raise MemoryFileError(f"无法写入 {path}：{exc}") from exc

    def drop(self, chat_id: str) -> None:
        """Nothing of its own: the chat's folder, sessions and meta included, is deleted with the chat."""

    def import_into(self, chat_id: str, name: str, write: Callable[[Path], object]) -> None:
        """The import writes the session file in place (its temporary file beside it)."""
        write(self.path(chat_id, name))

    def clean_dead_imports(self) -> int:
        """Remove what imports killed mid-way left: their temporary files, and the chat folders
        they had created that hold nothing else (a phantom chat :meth:`chat_ids` would list).
        Returns how many files went; a symlink or an unreadable folder is logged and skipped."""
        from liyuan.session.imports import remove_dead_import_temps

        removed = 0
        try:
            for chat_id in self.layout.chat_ids():
                sessions = self.layout.sessions_dir(chat_id)
                count = remove_dead_import_temps(sessions)
                if count:
                    removed += count
                    for folder in (sessions, sessions.parent):
                        with contextlib.suppress(OSError):  # not empty: a real chat, kept
                            folder.rmdir()
        except (OSError, MemoryFileError) as exc:  # a symlink or an unreadable folder: the calls say so
            _log.warning("清理导入残留时出错：%s", exc)
        return removed
