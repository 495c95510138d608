"""Every chat's vector memory of one card in PostgreSQL: the chunk stores of ``CardStorage.postgres``.

Invariants: a chat's store is made once and kept; it holds no connection of its own (every
call borrows one from the card's pool), so opening 50 chats opens no connection more.
Dropping a chat deletes its rows in one transaction. Needs the ``postgres`` extra.
"""

from __future__ import annotations

import threading

from liyuan.clock import Clock, system_clock
from liyuan.storage.pgchunks import PostgresChunkStore
from liyuan.storage.pgdb import PostgresDatabase

__all__ = ["PostgresChunkStores"]


class PostgresChunkStores:
    """The chunk stores of one card's chats (:class:`~liyuan.vector.chunkstore.ChunkStores`).

    Args:
        db: The card's connections (:class:`~liyuan.storage.pgdb.PostgresDatabase`).
        scope: The card's id in the database (chats of two scopes never mix).
        clock: Timestamps for the rows.
    """

    def __init__(self, db: PostgresDatabase, *, scope: str, clock: Clock = system_clock) -> None:
        self._db = db
        self._scope = scope
        self._clock = clock
        self._open: dict[str, PostgresChunkStore] = {}
        self._guard = threading.Lock()

    def has(self, chat_id: str) -> bool:
        """Whether the chat has any chunks or queued turns (nothing is created to find out)."""
        def work(db: object) -> bool:
            row = db.execute(  # type: ignore[attr-defined]
                "SELECT EXISTS (SELECT 1 FROM liyuan_chunks WHERE scope = %(s)s AND chat = %(c)s)"
                " OR EXISTS (SELECT 1 FROM liyuan_pending WHERE scope = %(s)s AND chat = %(c)s)",
                {"s": self._scope, "c": chat_id}).fetchone()
            return bool(row and row[0])

        return bool(self._db.run(work, "PostgreSQL 向量记忆库"))

    def open(self, chat_id: str) -> PostgresChunkStore:
        """The chat's store, created on first use."""
        with self._guard:
            if chat_id not in self._open:
                self._open[chat_id] = PostgresChunkStore(self._db, scope=self._scope, chat=chat_id,
                                                         clock=self._clock)
            return self._open[chat_id]

    def drop(self, chat_id: str) -> None:
        """Delete the chat's rows."""
        store = self.open(chat_id)
        store.drop()
        with self._guard:
            self._open.pop(chat_id, None)
