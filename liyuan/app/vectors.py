"""A chat's vector memory, opened where the card keeps its chunks.

By default a chat's chunks live in ``向量记忆.sqlite`` in its folder, none of whose files
may be a symlink (SQLite follows links); a card given ``chunk_stores`` (PostgreSQL:
:class:`~liyuan.vector.pgstores.PostgresChunkStores`) keeps them there instead. Either
way the ranking is the library's, so a chat recalls the same hits on both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from liyuan.card.files import CardLayout
from liyuan.clock import Clock, system_clock

if TYPE_CHECKING:
    from liyuan.vector.chunkstore import ChunkStores
    from liyuan.vector.config import VectorConfig
    from liyuan.vector.memory import VectorMemory
    from liyuan.vector.store import SqliteChunkStore

__all__ = ["VECTOR_STORE_FILE", "FolderChunkStores", "open_vector"]

VECTOR_STORE_FILE = "向量记忆.sqlite"
"""The chat's vector store, inside its folder (deleted with the chat)."""
_SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")


class FolderChunkStores:
    """The default :class:`~liyuan.vector.chunkstore.ChunkStores`: ``向量记忆.sqlite`` in each
    chat's folder (deleted with the folder), none of its files a symlink."""

    def __init__(self, layout: CardLayout, *, clock: Clock = system_clock) -> None:
        self.layout = layout
        self._clock = clock

    def has(self, chat_id: str) -> bool:
        """Whether the chat has a vector store yet (opening one creates it)."""
        return self.layout.chat_file(chat_id, VECTOR_STORE_FILE).is_file()

    def open(self, chat_id: str) -> SqliteChunkStore:
        from liyuan.vector.store import SqliteChunkStore  # the `vector` extra

        for suffix in _SQLITE_SIDE_FILES:  # refused if any is a symlink
            self.layout.chat_file(chat_id, VECTOR_STORE_FILE + suffix)
        return SqliteChunkStore(self.layout.chat_file(chat_id, VECTOR_STORE_FILE), clock=self._clock)

    def drop(self, chat_id: str) -> None:
        """Nothing of its own: the file goes with the chat's folder."""


def open_vector(layout: CardLayout, chat_id: str, config: VectorConfig, stores: ChunkStores | None, *,
                clock: Clock, say: Callable[[str], None], background: bool) -> VectorMemory:
    """The chat's vector memory, its index warming on the store's worker (the first recall
    queues behind it); fallback and eviction lines go to ``say``."""
    # Imported here: vector memory needs the `vector` extra (numpy, jieba); the rest does not.
    from liyuan.vector.memory import VectorMemory
    from liyuan.vector.recall import warm_in_background

    store = (stores if stores is not None else FolderChunkStores(layout, clock=clock)).open(chat_id)
    vector = VectorMemory(config, store, on_activity=say)
    warm_in_background(vector, say, background=background)
    return vector
