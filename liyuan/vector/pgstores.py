"""Every chat of a card in one PostgreSQL database: ``Card(chunk_stores=PostgresChunkStores(...))``.

Invariants: a chat's store is opened once and kept (one connection per chat); dropping a
chat deletes its rows in one transaction and closes its connection; :meth:`close` closes
every connection (call it after the card has closed). Needs the ``postgres`` extra.
"""

from __future__ import annotations

import threading

from liyuan.clock import Clock, system_clock
from liyuan.vector.pgstore import PostgresChunkStore

__all__ = ["PostgresChunkStores"]


class PostgresChunkStores:
    """The chunk stores of one card's chats (:class:`~liyuan.vector.chunkstore.ChunkStores`).

    Args:
        conninfo: A libpq connection string or URI.
        scope: The card's id in the database (chats of two scopes never mix).
        clock: Timestamps for the rows.
    """

    def __init__(self, conninfo: str, *, scope: str, clock: Clock = system_clock) -> None:
        self._conninfo = conninfo
        self._scope = scope
        self._clock = clock
        self._open: dict[str, PostgresChunkStore] = {}
        self._guard = threading.Lock()

    def open(self, chat_id: str) -> PostgresChunkStore:
        """The chat's store, created (and its schema migrated) on first use."""
        with self._guard:
            if chat_id not in self._open:
                self._open[chat_id] = PostgresChunkStore(self._conninfo, scope=self._scope, chat=chat_id,
                                                         clock=self._clock)
            return self._open[chat_id]

    def drop(self, chat_id: str) -> None:
        """Delete the chat's rows and close its connection."""
        store = self.open(chat_id)
        store.drop()
        store.close()
        with self._guard:
            self._open.pop(chat_id, None)

    def close(self) -> None:
        """Close every chat's connection."""
        with self._guard:
            stores, self._open = list(self._open.values()), {}
        for store in stores:
            store.close()
