"""A card's memory on disk: layout, chat ids, atomic writes, fingerprints, the input stamp.

Layout of one card (every memory file is plain Markdown, readable and editable by hand)::

    cards/<卡>/对话/<chatId>/会话/*.jsonl     the chat's sessions (session trees)
    cards/<卡>/对话/<chatId>/meta.json        optional: {"name": "<局名>"}
    cards/<卡>/记忆/局/<chatId>.md            one recap per chat
    cards/<卡>/记忆/记忆.md                   the handbook (merged, with sources)
    cards/<卡>/记忆/常驻摘要.md               the resident summary (sent every turn)
    cards/<卡>/记忆/.清单.json                the manifest (bookkeeping, not memory)
    cards/<卡>/记忆/.history/                 backups of replaced or invalidated files (last 20 of each)
    cards/<卡>/记忆/.sync.lock, .write.lock   the card's cross-process locks (empty files)

Invariants:

- A chat id is ``^[A-Za-z0-9_-]+$`` (ASCII) or it is refused with :class:`ConfigError`
  before it can become part of a path.
- Every write is atomic: a temp file in the same folder, fsync, ``os.replace``, then an
  fsync of the folder. A reader sees the old file or the new one, never a mix.
- Reading never guesses: a missing file is ``None``; a file that exists but cannot be
  read (a folder in its place, bad UTF-8, no permission) raises :class:`MemoryFileError`.
  Memory that cannot be read must not look like memory that was deleted.
- Every path :class:`MemoryFiles` touches is checked first: a symlink anywhere below the
  card folder, or a path that leaves it, raises :class:`~liyuan.errors.UnsafePathError`
  and nothing is read or written (see :mod:`liyuan.card.housekeeping`). The same holds for
  the chats: :class:`CardLayout` checks every chat path it gives, a symlink in ``对话/`` is
  no chat, and a chat folder is deleted relative to directory descriptors, never
  following a link (:func:`~liyuan.card.housekeeping.remove_inside`).
- A sync or hard-path write replaces a document only if it still holds the text the
  change was based on, with no window between that check and the replace
  (:meth:`MemoryFiles.replace_text`, :mod:`liyuan.card.swap`): an editor's save landing during the write is put
  back and kept in ``.history/``.
- Before a document is overwritten or retired, a copy goes to ``.history/``; the newest
  :data:`~liyuan.card.housekeeping.HISTORY_KEEP` copies of each document are kept.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
from collections.abc import Collection, Hashable, Mapping
from pathlib import Path

from liyuan import fileio
from liyuan.card.housekeeping import HISTORY_KEEP, check_inside, is_temp_name, prune_history, remove_orphan_temps
from liyuan.card.layout import CardLayout, is_valid_chat_id
from liyuan.card.lock import SYNC_LOCK_FILE, WRITE_LOCK_FILE, card_locks
from liyuan.card.memstore import CardLocks
from liyuan.card.swap import replace_text
from liyuan.clock import Clock, IdFactory, random_ids, system_clock
from liyuan.errors import MemoryFileError

__all__ = [
    "MemoryFiles",
    "content_copy_name",
    "history_copy_name",
    "history_suffix",
    "read_text_optional",
    "sha1_text",
    "sha256_text",
    "write_memory_file",
]

def sha1_text(text: str) -> str:
    """sha1 hex of the UTF-8 bytes (the manifest's ``mergedHash``)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def sha256_text(text: str) -> str:
    """sha256 hex of the UTF-8 bytes (a memory document's version)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_memory_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`liyuan.fileio.atomic_write_text`), as a memory file.

    Raises:
        MemoryFileError: The folder cannot be created or the file cannot be written;
            the old file, if any, is left as it was.
    """
    try:
        fileio.atomic_write_text(path, text)
    except OSError as exc:
        raise MemoryFileError(f"无法写入记忆文件 {path}：{exc}") from exc


def read_text_optional(path: Path) -> str | None:
    """The file's text, or ``None`` when it does not exist.

    Raises:
        MemoryFileError: The path exists but is not a readable UTF-8 file.
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise MemoryFileError(f"无法读取记忆文件 {path}：{exc}") from exc


def history_suffix(rel: str) -> str:
    """How every ``.history/`` copy of the document ``rel`` (relative to ``记忆/``) ends."""
    return "-" + rel.replace("/", "-")


def history_copy_name(rel: str, clock: Clock, ids: IdFactory) -> str:
    """A fresh ``.history/`` name for a copy of ``rel``: timestamp, unique id, the document's name."""
    stamp = re.sub(r"[^0-9A-Za-z]", "", clock())[:18]
    return f"{stamp}-{ids()}{history_suffix(rel)}"


def content_copy_name(rel: str, data: bytes) -> str:
    """The ``.history/`` name of a copy of ``rel`` holding ``data`` (the same bytes, the same name)."""
    return f"sha256-{hashlib.sha256(data).hexdigest()[:16]}{history_suffix(rel)}"


class MemoryFiles:
    """Every read and write of a card's memory folder goes through here: the file backend
    of :class:`~liyuan.card.memstore.MemoryStore`.

    Sync code receives one of these, so tests can inject failures (a crash between two
    writes) by overriding :meth:`write_text`.

    Args:
        layout: The card's layout.
        clock: Timestamps for backup names.
        ids: Unique suffixes for temp and backup names.
    """

    def __init__(self, layout: CardLayout, *, clock: Clock = system_clock, ids: IdFactory = random_ids) -> None:
        self.layout = layout
        self._clock = clock
        self._ids = ids

    @property
    def locks(self) -> CardLocks:
        """The card's OS file locks (:func:`~liyuan.card.lock.card_locks`)."""
        return card_locks(self.layout.card_dir)

    def safe(self, path: Path) -> Path:
        """``path`` if it stays inside the card without a symlink, else :class:`UnsafePathError`."""
        return check_inside(self.layout.card_dir, path)

    def read_text(self, path: Path) -> str | None:
        """See :func:`read_text_optional` (after :meth:`safe`)."""
        return read_text_optional(self.safe(path))

    def read_bytes(self, path: Path) -> bytes | None:
        """The file's bytes, or ``None`` when it does not exist (after :meth:`safe`).

        Raises:
            MemoryFileError: The path exists but cannot be read.
        """
        try:
            return self.safe(path).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise MemoryFileError(f"无法读取记忆文件 {path}：{exc}") from exc

    def exists(self, path: Path) -> bool:
        """Whether the file exists (after :meth:`safe`)."""
        return self.safe(path).exists()

    def stamp(self, path: Path, *, after_append: bool = False) -> Hashable | None:
        """The file's inode, size and modification time (an atomic rewrite, a hand edit or a
        symlink put in its place change one; looked at now, even ``after_append``); ``None``: missing.

        Raises:
            MemoryFileError: It cannot be looked at.
        """
        try:
            stat = os.lstat(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise MemoryFileError(f"无法读取记忆文件 {path}：{exc}") from exc
        return (stat.st_ino, stat.st_size, stat.st_mtime_ns)

    def snapshot(self) -> dict[str, bytes]:
        """Every file under ``记忆/`` by its path relative to it, ``.history/`` included; the lock
        files and what crashed writes left behind are not documents and are left out.

        Raises:
            UnsafePathError: A path in the folder is a symlink.
            MemoryFileError: A file cannot be read.
        """
        base = self.safe(self.layout.memory_dir)
        found: dict[str, bytes] = {}
        for folder, dirs, names in os.walk(base):
            dirs.sort()
            for name in sorted(names):
                path = self.safe(Path(folder) / name)
                rel = self.layout.relative(path)
                if rel in (SYNC_LOCK_FILE, WRITE_LOCK_FILE) or is_temp_name(name):
                    continue
                data = self.read_bytes(path)
                if data is not None:
                    found[rel] = data
        return dict(sorted(found.items()))

    def restore(self, documents: Mapping[str, bytes]) -> None:
        """Write every document of a :meth:`snapshot` (atomically, each checked by :meth:`safe`)."""
        for rel, data in documents.items():
            path = self.safe(self.layout.memory_dir / rel)
            try:
                fileio.atomic_write_bytes(path, data)
            except OSError as exc:
                raise MemoryFileError(f"无法写入记忆文件 {path}：{exc}") from exc

    def write_text(self, path: Path, text: str) -> None:
        """See :func:`write_memory_file` (after :meth:`safe`)."""
        write_memory_file(self.safe(path), text)

    def replace_text(self, path: Path, text: str, expected: str | None) -> bool:
        """Write ``text`` to ``path`` only if it still holds ``expected`` (``None``: missing), with no
        window; False (nothing of ``text`` stays) when it did not. See :func:`liyuan.card.swap.replace_text`."""
        return replace_text(self, path, text, expected)

    def keep_displaced(self, path: Path, data: bytes) -> None:
        """Keep a displaced version of ``path`` (bytes) in ``.history/``, older copies pruned."""
        fileio.atomic_write_bytes(self.history_path(path), data)
        prune_history(self.layout.history_dir, self._history_name(path), HISTORY_KEEP)

    def check_paths(self) -> None:
        """Check ``对话/``, every fixed memory path and every entry of ``局/`` (no symlink, inside the card).

        Raises:
            UnsafePathError: One of them is a symlink or leads outside the card.
        """
        layout = self.layout
        for path in (layout.chats_dir, layout.handbook, layout.resident, layout.manifest, layout.history_dir):
            self.safe(path)
        try:
            names = [entry.name for entry in os.scandir(self.safe(layout.recaps_dir))]
        except OSError:
            return  # missing or unlistable: the readers raise their own errors
        for name in names:
            self.safe(layout.recaps_dir / name)

    def remove_orphan_temps(self) -> int:
        """Remove temp files a crashed atomic write left in the memory folders (hold the write lock)."""
        layout = self.layout
        folders = [layout.memory_dir, layout.recaps_dir, layout.history_dir]
        return remove_orphan_temps([self.safe(folder) for folder in folders])

    def recap_texts(self, forgotten: Collection[str] = ()) -> dict[str, str]:
        """Every recap on disk: ``{chatId: text}``, sorted by chat id.

        Files in ``局/`` whose name is not ``<valid id>.md`` are not recaps of ours and
        are left out, as are the ``forgotten`` chats and a recap that vanishes between
        listing and reading. Blank recaps are included (callers decide what they mean).

        Args:
            forgotten: Chat ids to leave out (forgotten by the hard path).

        Returns:
            The recaps, read through :meth:`read_text`; ``{}`` when ``局/`` does not exist.

        Raises:
            MemoryFileError: ``局/`` exists but cannot be listed, or a recap cannot be
                read: unreadable memory must never look like deleted memory.
        """
        recaps_dir = self.safe(self.layout.recaps_dir)
        try:
            names = [p.name for p in recaps_dir.iterdir() if p.name.endswith(".md")]
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise MemoryFileError(f"无法列出复盘目录 {recaps_dir}：{exc}") from exc
        found: dict[str, str] = {}
        for chat_id in sorted(n[:-3] for n in names):
            if not is_valid_chat_id(chat_id) or chat_id in forgotten:
                continue
            text = self.read_text(recaps_dir / f"{chat_id}.md")
            if text is not None:
                found[chat_id] = text
        return found

    def delete(self, path: Path, *, at_once: bool = False) -> None:
        """Remove a file; a missing file is fine (``at_once`` changes nothing: it always is)."""
        try:
            self.safe(path).unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise MemoryFileError(f"无法删除记忆文件 {path}：{exc}") from exc

    def _history_name(self, path: Path) -> str:
        return history_suffix(self.layout.relative(path))

    def new_id(self) -> str:
        """A staged name's unique part; not from ``ids``, so a replay's entry ids never depend on the backend."""
        return secrets.token_hex(6)

    def history_path(self, path: Path) -> Path:
        """A fresh ``.history/`` name for a copy of ``path`` (timestamp, unique id, the document's name)."""
        name = history_copy_name(self.layout.relative(path), self._clock, self._ids)
        return self.safe(self.layout.history_dir / name)

    def backup_copy(self, path: Path) -> Path | None:
        """Copy ``path`` into ``.history/``; ``None`` when there is nothing to copy.

        Older copies of the same document beyond :data:`HISTORY_KEEP` are pruned.
        """
        if not self.safe(path).is_file():
            return None
        target = self.history_path(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        except OSError as exc:
            raise MemoryFileError(f"无法备份记忆文件 {path}：{exc}") from exc
        prune_history(self.layout.history_dir, self._history_name(path), HISTORY_KEEP)
        return target

    def backup_once(self, path: Path) -> Path | None:
        """Copy ``path`` into ``.history/`` under a name made from its content's sha256.

        The same bytes are copied once, however often this is called; ``None`` when
        there is nothing to copy. For files that are backed up on read (a corrupt
        manifest), where a timestamped copy per call would pile up.
        """
        data = self.read_bytes(path)
        if data is None:
            return None
        target = self.safe(self.layout.history_dir / content_copy_name(self.layout.relative(path), data))
        if target.is_file():
            return target
        try:
            fileio.atomic_write_bytes(target, data)  # atomic: a torn copy never counts as done
        except OSError as exc:
            raise MemoryFileError(f"无法备份记忆文件 {path}：{exc}") from exc
        return target

    def move_to_history(self, path: Path) -> Path | None:
        """Move ``path`` into ``.history/``; ``None`` when it does not exist (older copies pruned)."""
        if not self.safe(path).exists():
            return None
        target = self.history_path(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
        except OSError as exc:
            raise MemoryFileError(f"无法移走记忆文件 {path}：{exc}") from exc
        fileio.fsync_dir(path.parent)
        prune_history(self.layout.history_dir, self._history_name(path), HISTORY_KEEP)
        return target

    def input_stamp(self) -> str:
        """sha1 over the manifest, handbook, resident and every recap (by path, sorted).

        Taken before and after each model call: any difference means another writer
        (a hand edit, a deletion, a competing sync) touched the inputs meanwhile.
        """
        layout = self.layout
        paths = [layout.manifest, layout.handbook, layout.resident]
        try:
            paths += sorted(p for p in self.safe(layout.recaps_dir).iterdir() if p.name.endswith(".md"))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise MemoryFileError(f"无法列出复盘目录 {layout.recaps_dir}：{exc}") from exc
        digest = hashlib.sha1()
        for index, path in enumerate(paths):
            if index:
                digest.update(b"\0")
            digest.update(layout.relative(path).encode("utf-8") + b"\0")
            data = self.read_bytes(path)
            digest.update(b"<missing>" if data is None else data)
        return digest.hexdigest()
