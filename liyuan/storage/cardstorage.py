"""Where one card's state is kept, as one object that owns its connections.

A card's state is four things: its chats' sessions (and names), its memory documents,
its two locks, its chats' vector memory. :class:`CardStorage` holds all four for one
backend and is the only thing :class:`liyuan.Card` is given::

    Card.open("cards/雾港")                                             # the folder (default)
    Card.open("cards/雾港", storage=CardStorage.postgres(dsn, scope="雾港"))  # PostgreSQL

Invariants:

- **One object per backend.** :meth:`CardStorage.folder` is the card folder (files, OS
  file locks, a SQLite file per chat); :meth:`CardStorage.postgres` is one PostgreSQL
  database, one pool of connections (:class:`~liyuan.storage.pgdb.PostgresDatabase`).
  Nothing above this seam asks which one it has: every difference is a method here or
  in the parts' protocols.
- **It owns its connections.** :meth:`CardStorage.close` releases every one; a card given
  a storage closes it when the card closes. Closing releases, it does not break: the
  next call opens again (an app may close a card and open a new one on the same object).
- **A half-copied card never opens.** A copy into it (:func:`~liyuan.storage.copy.copy_card`)
  marks it incomplete first and clears the mark last; :meth:`CardStorage.check_whole`
  (run when a card opens) refuses a marked one with :class:`~liyuan.errors.CardIncomplete`,
  saying how to clear it (:meth:`CardStorage.clear`).
- **One error family.** A failure of any part is a :class:`~liyuan.errors.StorageError`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from liyuan.card.layout import RESIDENT_FILE, CardLayout
from liyuan.card.memstore import MemoryBackend, MemoryStore
from liyuan.card.sessions import FileSessions, SessionStore
from liyuan.clock import Clock, IdFactory, random_ids, system_clock
from liyuan.errors import CardIncomplete, StorageRefused
from liyuan.storage.folder import FolderChunkStores, FolderMemory

if TYPE_CHECKING:
    from liyuan.vector.chunkstore import ChunkStores

__all__ = ["INCOMPLETE_MARK", "CardStorage", "prepare_folder"]

INCOMPLETE_MARK = ".复制未完成"
"""The memory document a copy into a card writes first and deletes last (under ``记忆/``)."""


def prepare_folder(path: Path) -> Path:
    """``path``, created when missing.

    Raises:
        StorageRefused: It cannot be created or is not a folder (a file, under a file,
            no permission).
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise StorageRefused(f"卡目录 {path} 不是文件夹（它或它上面的一级是个文件）：换一个路径") from exc
    except OSError as exc:
        raise StorageRefused(f"无法建立卡目录 {path}：{exc.strerror or exc}；检查这个路径的权限") from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise StorageRefused(f"卡目录 {path} 不可写：检查它的权限")
    return path


class CardStorage:
    """One card's sessions, memory documents, locks and vector memory in one backend.

    Make one with :meth:`folder` or :meth:`postgres`; the constructor is for a backend of
    one's own (its parts satisfy :class:`~liyuan.card.sessions.SessionStore`,
    :class:`~liyuan.card.memstore.MemoryBackend` and
    :class:`~liyuan.vector.chunkstore.ChunkStores`).

    Args:
        sessions: The chats' sessions and names.
        memory: Binds the memory documents and the card's locks.
        chunk_stores: The chats' vector memory, given the clock its rows are stamped with.
        path: The card folder when the backend has one (its lore book is read there).
        name: What the storage is, for messages (``卡目录 cards/雾港``).
        close: Releases the connections (``None``: nothing to release).
        clear: Deletes every session, memory document and chunk of the card.
    """

    def __init__(self, *, sessions: SessionStore, memory: MemoryBackend,
                 chunk_stores: Callable[[Clock], ChunkStores], path: Path | None, name: str,
                 close: Callable[[], None] | None = None, clear: Callable[[], None] | None = None) -> None:
        self.sessions = sessions
        self.path = path
        """The card folder (lore book, ``Card.open(storage=...)`` without a path), if any."""
        self.name = name
        self.database: object | None = None
        """The PostgreSQL connections (:class:`~liyuan.storage.pgdb.PostgresDatabase`), ``None`` on a folder."""
        self._memory = memory
        self._chunk_stores = chunk_stores
        self._close = close
        self._clear = clear
        self._default_memory: MemoryStore | None = None
        self._default_chunks: ChunkStores | None = None

    # -- the two backends ------------------------------------------------------------

    @classmethod
    def folder(cls, path: str | os.PathLike[str]) -> CardStorage:
        """The card folder ``path`` (``cards/<卡>``, created when missing): what
        ``Card.open(path)`` uses by default.

        Raises:
            StorageRefused: The folder cannot be created or written.
        """
        layout = CardLayout(prepare_folder(Path(path)))
        chunk_stores: list[FolderChunkStores] = []

        def chunks(clock: Clock) -> FolderChunkStores:
            chunk_stores.append(FolderChunkStores(layout, clock=clock))
            return chunk_stores[-1]

        def close() -> None:
            for stores in chunk_stores:
                stores.close()

        def clear() -> None:
            for part in (layout.chats_dir, layout.memory_dir):
                if part.is_symlink():
                    part.unlink()
                elif part.exists():
                    shutil.rmtree(part)

        return cls(sessions=FileSessions(layout), memory=FolderMemory(), chunk_stores=chunks, path=layout.card_dir,
                   name=f"卡目录 {layout.card_dir}", close=close, clear=clear)

    @classmethod
    def postgres(cls, conninfo: str, *, scope: str, folder: str | os.PathLike[str] | None = None,
                 pool_size: int | None = None, timeout: float | None = None) -> CardStorage:
        """The card ``scope`` in the PostgreSQL database ``conninfo`` (needs the ``postgres``
        extra and pgvector on the server).

        Args:
            conninfo: A libpq connection string or URI (``postgresql://user@host/db``).
            scope: The card's id in the database (two cards' scopes never mix).
            folder: The card folder, only for its lore book (may be empty otherwise).
            pool_size: Pooled connections at most (default
                :data:`~liyuan.storage.pgdb.DEFAULT_POOL_SIZE`); the card holds one more, the
                sync lock's. Fixed: it does not grow with the chats.
            timeout: Seconds a call waits for a pooled connection.

        Raises:
            StorageRefused: ``scope`` cannot be held by PostgreSQL text (a lone surrogate).
            ConfigError: The ``postgres`` extra is not installed, or ``pool_size`` is not positive.

        Nothing connects here: the first call does (and creates or migrates the tables).
        """
        from liyuan.storage.pgchunkstores import PostgresChunkStores
        from liyuan.storage.pgdb import DEFAULT_POOL_SIZE, DEFAULT_TIMEOUT_S, PostgresDatabase, checked_name
        from liyuan.storage.pgmemory import PostgresMemory
        from liyuan.storage.pgsessions import PostgresSessions

        checked_name(scope, "卡的 scope")
        db = PostgresDatabase(conninfo, pool_size=pool_size or DEFAULT_POOL_SIZE,
                              timeout=DEFAULT_TIMEOUT_S if timeout is None else timeout)
        memory = PostgresMemory(db, scope=scope)
        sessions = PostgresSessions(db, scope=scope, stamp_along=RESIDENT_FILE)  # a turn reads it after its user line

        def close() -> None:
            memory.check_closable()
            db.close()

        def clear() -> None:
            def work(conn: object) -> None:
                with conn.transaction():  # type: ignore[attr-defined]
                    for table in ("liyuan_session_lines", "liyuan_chat_meta", "liyuan_memory_files",
                                  "liyuan_chunks", "liyuan_pending", "liyuan_evicted", "liyuan_chats"):
                        conn.execute(f"DELETE FROM {table} WHERE scope = %s", (scope,))  # type: ignore[attr-defined]

            db.run(work, "清空 PostgreSQL 里的卡")

        storage = cls(sessions=sessions, memory=memory,
                      chunk_stores=lambda clock: PostgresChunkStores(db, scope=scope, clock=clock),
                      path=Path(folder) if folder is not None else None, name=f"PostgreSQL 里的卡 {scope}",
                      close=close, clear=clear)
        storage.database = db
        return storage

    # -- the parts -------------------------------------------------------------------

    def layout(self) -> CardLayout:
        """The names of the card's memory documents: the folder's, else one named by :attr:`name`."""
        return CardLayout(self.path if self.path is not None else Path(self.name))

    def memory_store(self, layout: CardLayout | None = None, *, clock: Clock = system_clock,
                     ids: IdFactory = random_ids) -> MemoryStore:
        """The card's memory documents and locks; ``clock`` and ``ids`` name ``.history/`` copies."""
        return self._memory.bind(layout or self.layout(), clock=clock, ids=ids)

    @property
    def memory(self) -> MemoryStore:
        """The memory documents as :meth:`memory_store` gives them by default (kept)."""
        if self._default_memory is None:
            self._default_memory = self.memory_store()
        return self._default_memory

    def chunk_stores(self, clock: Clock | None = None) -> ChunkStores:
        """The chats' vector memory (with ``clock``: a new object stamping rows with it)."""
        if clock is not None:
            return self._chunk_stores(clock)
        if self._default_chunks is None:
            self._default_chunks = self._chunk_stores(system_clock)
        return self._default_chunks

    # -- whole-card operations -------------------------------------------------------

    def check_whole(self, memory: MemoryStore | None = None) -> None:
        """Refuse a card a copy into did not finish.

        Raises:
            CardIncomplete: It is marked incomplete (the message says how to clear it).
        """
        store = memory or self.memory
        if store.exists(store.layout.memory_dir / INCOMPLETE_MARK):
            raise CardIncomplete(
                f"{self.name} 是一次没有做完的复制（复制卡的进程中途被杀或出错），只有一部分：不打开它。"
                "用 storage.clear() 清空这张卡，再重新 copy_card 一次")

    def clear(self) -> None:
        """Delete every session, chat name, memory document and chunk of the card (the lore
        book of a folder is kept): to start again after a copy that did not finish."""
        if self._clear is not None:
            self._clear()
        self._default_chunks = None

    def close(self) -> None:
        """Release every connection (the next call opens again).

        Raises:
            StateError: One of the card's locks is held (nothing is closed then).
        """
        if self._close is not None:
            self._close()

    def __enter__(self) -> CardStorage:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with contextlib.suppress(Exception) if exc is not None else contextlib.nullcontext():
            self.close()
