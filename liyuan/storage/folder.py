"""The card folder as a backend: what :meth:`~liyuan.storage.CardStorage.folder` bundles.

The sessions (:class:`~liyuan.card.sessions.FileSessions`) and memory documents
(:class:`~liyuan.card.files.MemoryFiles`) are the files they always were; here are the
two pieces the bundle adds: :class:`FolderMemory` (binds the card's memory documents with
the card's clock and ids) and :class:`FolderChunkStores` (each chat's ``向量记忆.sqlite``).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from liyuan.card.files import MemoryFiles
from liyuan.card.layout import CardLayout
from liyuan.clock import Clock, IdFactory, random_ids, system_clock

if TYPE_CHECKING:
    from liyuan.vector.store import SqliteChunkStore

__all__ = ["VECTOR_STORE_FILE", "FolderChunkStores", "FolderMemory"]

VECTOR_STORE_FILE = "向量记忆.sqlite"
"""The chat's vector store, inside its folder (deleted with the chat)."""
_SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")


class FolderMemory:
    """The memory documents in ``记忆/`` of the card folder (:class:`~liyuan.card.memstore.MemoryBackend`)."""

    def bind(self, layout: CardLayout, *, clock: Clock = system_clock, ids: IdFactory = random_ids) -> MemoryFiles:
        return MemoryFiles(layout, clock=clock, ids=ids)


class FolderChunkStores:
    """The folder's :class:`~liyuan.vector.chunkstore.ChunkStores`: ``向量记忆.sqlite`` in each
    chat's folder (deleted with the folder), none of its files a symlink (SQLite follows links)."""

    def __init__(self, layout: CardLayout, *, clock: Clock = system_clock) -> None:
        self.layout = layout
        self._clock = clock
        self._opened: weakref.WeakSet[SqliteChunkStore] = weakref.WeakSet()
        """The stores opened here and still in use (a dropped one closes with its object)."""
        self._guard = threading.Lock()

    def has(self, chat_id: str) -> bool:
        """Whether the chat has a vector store yet (opening one creates it)."""
        return self.layout.chat_file(chat_id, VECTOR_STORE_FILE).is_file()

    def open(self, chat_id: str) -> SqliteChunkStore:
        from liyuan.vector.store import SqliteChunkStore  # the `vector` extra

        for suffix in _SQLITE_SIDE_FILES:  # refused if any is a symlink
            self.layout.chat_file(chat_id, VECTOR_STORE_FILE + suffix)
        store = SqliteChunkStore(self.layout.chat_file(chat_id, VECTOR_STORE_FILE), clock=self._clock)
        with self._guard:
            self._opened.add(store)
        return store

    def drop(self, chat_id: str) -> None:
        """Nothing of its own: the file goes with the chat's folder."""

    def close(self) -> None:
        """Close the connection of every store opened here."""
        with self._guard:
            stores = list(self._opened)
        for store in stores:
            store.close()
