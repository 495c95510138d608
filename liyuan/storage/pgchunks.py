"""The chunk store in PostgreSQL with pgvector: many chats, many machines, one database.

Same contract as the SQLite file (:class:`~liyuan.vector.chunkstore.ChunkStore`); ranking
stays in the library, so a chat recalls the same hits on either backend. Part of
``CardStorage.postgres(...)``; needs the ``postgres`` extra (psycopg 3, its pool and
pgvector); without it, opening one is a :class:`~liyuan.errors.ConfigError` naming the extra.

Invariants:

- One schema, versioned in ``liyuan_schema`` (:mod:`liyuan.storage.pgschema`): the card's
  connections create it when absent and migrate an older one, and refuse a newer version.
- Rows are keyed by ``(scope, chat, store, seq)``: ``scope`` is what the chats belong to
  (a card), ``chat`` the chat; every read is filtered by ``(scope, chat)`` and walks an
  index on ``(scope, chat, seq)``. Branch visibility is not filtered here: the snapshot
  holds every chunk of the chat and the library's ranking decides what a branch sees.
- Each write (chunks added + eviction + counts + generation, a re-embed, a delete, a
  turn and its queued text, a queue clear) is one transaction that first takes
  ``pg_advisory_xact_lock`` on a hash of the chat key: writers to one chat take turns,
  so none loses rows, eviction stays FIFO, and ``seq`` (drawn inside the lock) grows in
  commit order within a chat, which is what lets a snapshot catch up by reading only
  ``seq`` beyond its last.
- A snapshot is read in one ``REPEATABLE READ`` transaction, so its generation and its
  rows agree. Vectors travel in pgvector's binary format, both ways.
- PostgreSQL text cannot hold NUL: a ``"\\x00"`` in a chunk's text or title or in a
  queued turn is stored as U+FFFD (the one way the two backends' rows may differ),
  rather than failing the write and with it every later ingest of the chat.
- A store holds no connection: every call borrows one from the card's pool
  (:class:`~liyuan.storage.pgdb.PostgresDatabase`), so 50 open chats use the pool's few.
  A failure is a :class:`~liyuan.errors.StorageError` (never a raw driver error).
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from liyuan.clock import Clock, system_clock
from liyuan.storage.pgdb import PostgresDatabase, checked_name, storage_error
from liyuan.storage.requires import postgres_missing
from liyuan.vector.chunkstore import CHUNK_COLUMNS, NewChunk, RewrittenIds, chunk_from_row, rebuilt
from liyuan.vector.index import Chunk, Snapshot, TermCache, reusable_rows

try:
    import psycopg
except ModuleNotFoundError as exc:
    raise postgres_missing(exc) from exc

__all__ = ["PostgresChunkStore"]

_WHAT = "PostgreSQL 向量记忆库"

_CHAT = "scope = %(scope)s AND chat = %(chat)s"

_INSERT = f"""
INSERT INTO liyuan_chunks (scope, chat, store, id, text, text_hash, embedding, dim, embedder, source, title,
                           node_id, parent, merge_count, created_at, updated_at)
SELECT %(scope)s, %(chat)s, %(store)s, %(id)s, %(text)s, %(hash)s, %(embedding)b::vector, %(dim)s::integer,
       %(embedder)s, %(source)s, %(title)s::text, %(node_id)s::text, %(parent)s::text, %(merges)s::integer,
       %(now)s, %(now)s
WHERE NOT EXISTS (SELECT 1 FROM liyuan_chunks WHERE {_CHAT} AND store = %(store)s AND text_hash = %(hash)s
                  AND text = %(text)s AND node_id IS NOT DISTINCT FROM %(node_id)s::text)
RETURNING id, seq
"""


def _vector(value: Any) -> npt.NDArray[np.float32]:
    """A vector read in binary (pgvector's ``Vector``), ``NULL`` (stored without one) as width 0."""
    if value is None:
        return np.zeros(0, dtype=np.float32)
    return np.asarray(value.to_numpy(), dtype=np.float32)


def _stored(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32] | None:
    """What goes into the ``embedding`` column: pgvector has no empty vector, so ``NULL``."""
    row = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
    return row if row.size else None


def _text(value: str) -> str:
    return value.replace("\x00", "\ufffd")


def _maybe(value: str | None) -> str | None:
    return None if value is None else _text(value)


def _chat_key(scope: str, chat: str) -> int:
    digest = hashlib.blake2b(f"{scope}\x00{chat}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresChunkStore:
    """Chunks of one chat in a PostgreSQL database (with the ``vector`` extension).

    Args:
        db: The card's connections (:class:`~liyuan.storage.pgdb.PostgresDatabase`).
        scope: What the chat belongs to (a card's id); chats of two scopes never mix.
        chat: The chat's id.
        clock: Timestamps for ``created_at`` / ``updated_at``.

    Raises:
        StorageUnavailable: The server cannot be reached.
        StorageRefused: ``scope`` or ``chat`` cannot be held by PostgreSQL text.
        ConfigError: The ``vector`` extension is missing and cannot be created, or the
            schema is newer than this library knows.
    """

    def __init__(self, db: PostgresDatabase, *, scope: str, chat: str, clock: Clock = system_clock) -> None:
        self._where = {"scope": checked_name(scope, "卡的 scope"), "chat": checked_name(chat, "局的 id")}
        self._key = _chat_key(scope, chat)
        self._clock = clock
        self._lock = threading.RLock()
        """Guards the cached snapshot (the calls themselves run on pooled connections)."""
        self._db = db
        self._snapshot: Snapshot | None = None
        self._rewritten = RewrittenIds()  # a refresh never reuses a re-embedded chunk's old vector
        self._terms = TermCache()
        with self._connection() as conn, conn.transaction():
            conn.execute("INSERT INTO liyuan_chats (scope, chat) VALUES (%(scope)s, %(chat)s)"
                         " ON CONFLICT (scope, chat) DO NOTHING", self._where)

    # -- connection ------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for one call; a failure is a :class:`~liyuan.errors.StorageError`."""
        try:
            with self._db.connection() as db:
                yield db
        except (psycopg.Error, UnicodeError) as exc:
            raise storage_error(exc, _WHAT) from exc

    def drop(self) -> None:
        """Delete every row of this chat (its chunks, queue, counts, counters): one transaction."""
        with self._write(chunks_changed=False) as cur:
            for table in ("liyuan_chunks", "liyuan_pending", "liyuan_evicted", "liyuan_chats"):
                cur.execute(f"DELETE FROM {table} WHERE {_CHAT}", self._where)
        self._snapshot = None

    @contextmanager
    def _write(self, *, chunks_changed: bool = True, rewrites: bool = False) -> Iterator[psycopg.Cursor[Any]]:
        """One write transaction holding the chat's advisory lock; the generation (and with
        ``rewrites`` the rewrite count) is bumped in it when chunks may have changed."""
        with self._connection() as db, db.transaction(), db.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
            yield cur
            if chunks_changed:
                cur.execute(f"UPDATE liyuan_chats SET generation = generation + 1,"
                            f" rewrites = rewrites + %(rewrites)s WHERE {_CHAT}",
                            {**self._where, "rewrites": int(rewrites)})

    # -- writing ---------------------------------------------------------------------

    def add(
        self, chunks: Sequence[NewChunk], *, max_chunks: int, clear_pending_through: int | None = None,
        on_evict: Callable[[str, int], None] | None = None,
    ) -> list[str]:
        """Insert chunks, skipping those whose text and ``node_id`` are already in their
        store; evict beyond the cap (superseded versions first, then the oldest).

        ``clear_pending_through`` drops queued turns up to that ``seq`` in the same
        transaction; ``on_evict(store, count)`` is called after the commit.

        Returns:
            Ids of the chunks inserted (and not immediately evicted), in order.
        """
        now = self._clock()
        added: list[tuple[str, int, str]] = []
        evicted: dict[str, int] = {}
        with self._write() as cur:
            if chunks:
                rows = [{**self._where, "store": c.store, "id": uuid.uuid4().hex[:16], "text": _text(c.text),
                         "hash": hashlib.sha1(_text(c.text).encode("utf-8")).hexdigest(),
                         "embedding": _stored(c.embedding), "dim": int(np.size(c.embedding)), "embedder": c.embedder,
                         "source": c.source, "title": _maybe(c.title), "node_id": c.node_id, "parent": c.parent,
                         "merges": c.merge_count, "now": now} for c in chunks]
                cur.executemany(_INSERT, rows, returning=True)
                for chunk in chunks:
                    found = cur.fetchone()
                    if found is not None:
                        added.append((found[0], found[1], chunk.store))
                    cur.nextset()
            for store in dict.fromkeys(store for _cid, _seq, store in added):
                where = {**self._where, "store": store}
                total = cur.execute(f"SELECT count(*) FROM liyuan_chunks WHERE {_CHAT} AND store = %(store)s",
                                    where).fetchone()
                excess = (total[0] if total else 0) - max(1, max_chunks)
                if excess > 0:
                    doomed = self._eviction_order(cur, store, excess)
                    cur.execute(f"DELETE FROM liyuan_chunks WHERE {_CHAT} AND store = %(store)s"
                                f" AND seq = ANY(%(doomed)s::bigint[])", {**where, "doomed": doomed})
                    cur.execute("INSERT INTO liyuan_evicted VALUES (%(scope)s, %(chat)s, %(store)s, %(n)s)"
                                " ON CONFLICT (scope, chat, store) DO UPDATE SET count = liyuan_evicted.count"
                                " + excluded.count", {**where, "n": excess})
                    evicted[store] = excess
                    gone = set(doomed)
                    added = [row for row in added if row[2] != store or row[1] not in gone]
            if clear_pending_through is not None:
                cur.execute(f"DELETE FROM liyuan_pending WHERE {_CHAT} AND seq <= %(through)s",
                            {**self._where, "through": clear_pending_through})
        if on_evict is not None:
            for store, count in evicted.items():
                on_evict(store, count)
        return [cid for cid, _seq, _store in added]

    def _eviction_order(self, cur: psycopg.Cursor[Any], store: str, excess: int) -> list[int]:
        """The ``excess`` seqs of ``store`` to evict: versions another one extends first (their
        text lives on in it), then the oldest."""
        where = {**self._where, "store": store, "n": excess}
        superseded = [r[0] for r in cur.execute(
            "SELECT DISTINCT c.seq FROM liyuan_chunks AS d JOIN liyuan_chunks AS c"
            " ON c.scope = d.scope AND c.chat = d.chat AND c.id = d.parent"
            " WHERE d.scope = %(scope)s AND d.chat = %(chat)s AND d.parent IS NOT NULL AND c.store = %(store)s"
            " ORDER BY c.seq LIMIT %(n)s", where).fetchall()]
        if len(superseded) >= excess:
            return superseded
        chosen = set(superseded)
        oldest = [r[0] for r in cur.execute(
            f"SELECT seq FROM liyuan_chunks WHERE {_CHAT} AND store = %(store)s ORDER BY seq LIMIT %(n)s",
            {**where, "n": excess + len(superseded)}).fetchall()]
        return superseded + [seq for seq in oldest if seq not in chosen][:excess - len(superseded)]

    def set_embeddings(self, updates: Sequence[tuple[str, npt.NDArray[np.float32]]], embedder: str) -> None:
        """Store new vectors for existing chunks (re-embedding); texts are untouched."""
        if not updates:
            return
        self._rewritten.add(cid for cid, _vector in updates)
        with self._write(rewrites=True) as cur:
            now = self._clock()
            cur.executemany(
                f"UPDATE liyuan_chunks SET embedding = %(embedding)b::vector, dim = %(dim)s, embedder = %(embedder)s,"
                f" updated_at = %(now)s WHERE {_CHAT} AND id = %(id)s",
                [{**self._where, "id": cid, "embedding": _stored(vector), "dim": int(np.size(vector)),
                  "embedder": embedder, "now": now} for cid, vector in updates])

    def delete(self, chunk_id: str) -> bool:
        """Delete one chunk and the older versions it extends; ``False`` if there was none."""
        with self._write(rewrites=True) as cur:
            doomed: list[str] = []
            current: str | None = chunk_id
            while current is not None and current not in doomed:
                row = cur.execute(f"SELECT parent FROM liyuan_chunks WHERE {_CHAT} AND id = %(id)s",
                                  {**self._where, "id": current}).fetchone()
                if row is None:
                    break
                doomed.append(current)
                current = row[0]
            for cid in doomed:
                cur.execute(f"DELETE FROM liyuan_chunks WHERE {_CHAT} AND id = %(id)s", {**self._where, "id": cid})
            return bool(doomed)

    def next_turn(self, pending: tuple[str | None, str] | None = None) -> int:
        """Increment and return the chat's turn counter, queueing ``(node_id, text)`` with it."""
        with self._write(chunks_changed=False) as cur:
            row = cur.execute(f"UPDATE liyuan_chats SET turn_counter = turn_counter + 1 WHERE {_CHAT}"
                              f" RETURNING turn_counter", self._where).fetchone()
            if pending is not None:
                cur.execute("INSERT INTO liyuan_pending (scope, chat, node_id, text)"
                            " VALUES (%(scope)s, %(chat)s, %(node_id)s, %(text)s)",
                            {**self._where, "node_id": pending[0], "text": _text(pending[1])})
            return int(row[0]) if row else 0

    def pending(self) -> list[tuple[int, str | None, str]]:
        """Queued turns as ``(seq, node_id, text)``, oldest first."""
        rows = self._read(f"SELECT seq, node_id, text FROM liyuan_pending WHERE {_CHAT} ORDER BY seq")
        return [(int(seq), node_id, text) for seq, node_id, text in rows]

    def clear_pending(self, through_seq: int) -> None:
        """Drop queued turns up to ``through_seq`` (after they were ingested)."""
        with self._write(chunks_changed=False) as cur:
            cur.execute(f"DELETE FROM liyuan_pending WHERE {_CHAT} AND seq <= %(through)s",
                        {**self._where, "through": through_seq})

    # -- reading ---------------------------------------------------------------------

    def _read(self, query: str, extra: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        with self._connection() as db:
            return db.execute(query, {**self._where, **(extra or {})}).fetchall()

    def get(self, chunk_id: str) -> Chunk | None:
        """The chunk with this id, or ``None``."""
        rows = self._read(f"SELECT {CHUNK_COLUMNS} FROM liyuan_chunks WHERE {_CHAT} AND id = %(id)s",
                          {"id": chunk_id})
        return chunk_from_row(rows[0]) if rows else None

    def chunks(self, store: str | None = None) -> list[Chunk]:
        """Chunks in creation order, of one store or of all."""
        only = "" if store is None else " AND store = %(store)s"
        rows = self._read(f"SELECT {CHUNK_COLUMNS} FROM liyuan_chunks WHERE {_CHAT}{only} ORDER BY seq",
                          {"store": store})
        return [chunk_from_row(r) for r in rows]

    def count(self, store: str | None = None) -> int:
        """Number of chunks, of one store or of all."""
        only = "" if store is None else " AND store = %(store)s"
        return int(self._read(f"SELECT count(*) FROM liyuan_chunks WHERE {_CHAT}{only}", {"store": store})[0][0])

    def evicted(self, store: str) -> int:
        """How many chunks ``store`` has lost to its cap."""
        rows = self._read(f"SELECT count FROM liyuan_evicted WHERE {_CHAT} AND store = %(store)s", {"store": store})
        return int(rows[0][0]) if rows else 0

    def snapshot(self) -> Snapshot:
        """The current search snapshot, refreshed only when the generation moved: after
        adds and evictions only the new rows are read; after a rewrite, only the vectors
        the snapshot before did not hold."""
        with self._lock, self._connection() as db:
            current = self._snapshot
            with db.transaction(), db.cursor(binary=True) as cur:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                found = cur.execute(f"SELECT generation, rewrites FROM liyuan_chats WHERE {_CHAT}",
                                    self._where).fetchone()
                generation, rewrites = (int(found[0]), int(found[1])) if found else (0, 0)
                if current is not None and current.generation == generation:
                    return current
                if current is not None and current.rewrites == rewrites:
                    self._snapshot = current.extended(generation, *self._grown(cur, current))
                    return self._snapshot
                fetched: dict[str, npt.NDArray[np.float32]] = {}
                if current is None:  # a cold start: every vector is wanted, read them in the same pass
                    rows = cur.execute(f"SELECT {CHUNK_COLUMNS}, embedding FROM liyuan_chunks WHERE {_CHAT}"
                                       f" ORDER BY seq", self._where).fetchall()
                    chunks = tuple(chunk_from_row(r[:-1]) for r in rows)
                    fetched = {r[1]: _vector(r[-1]) for r in rows}
                else:
                    chunks = tuple(chunk_from_row(r) for r in cur.execute(
                        f"SELECT {CHUNK_COLUMNS} FROM liyuan_chunks WHERE {_CHAT} ORDER BY seq", self._where))
                reuse = reusable_rows(current, chunks, self._rewritten.ids)
                wanted = [c.id for c in chunks if c.id not in reuse and c.id not in fetched]
                for start in range(0, len(wanted), 500):
                    for cid, vector in cur.execute(
                            f"SELECT id, embedding FROM liyuan_chunks WHERE {_CHAT} AND id = ANY(%(ids)s::text[])",
                            {**self._where, "ids": wanted[start : start + 500]}):
                        fetched[cid] = _vector(vector)
            self._snapshot = rebuilt(current, generation, rewrites, chunks, reuse, fetched, self._terms)
            return self._snapshot

    def _grown(self, cur: psycopg.Cursor[Any], current: Snapshot) -> tuple[
            list[Chunk], list[npt.NDArray[np.float32]], npt.NDArray[np.int64] | None]:
        """Rows added since ``current`` (with vectors); its rows' seqs still there if some went."""
        last = current.chunks[-1].seq if current.chunks else 0
        added: list[Chunk] = []
        vectors: list[npt.NDArray[np.float32]] = []
        for row in cur.execute(f"SELECT {CHUNK_COLUMNS}, embedding FROM liyuan_chunks WHERE {_CHAT}"
                               f" AND seq > %(last)s ORDER BY seq", {**self._where, "last": last}).fetchall():
            added.append(chunk_from_row(row[:-1]))
            vectors.append(_vector(row[-1]))
        total = cur.execute(f"SELECT count(*) FROM liyuan_chunks WHERE {_CHAT}", self._where).fetchone()
        kept = (int(total[0]) if total else 0) - len(added)
        present = None
        if kept != len(current.chunks):
            seqs = cur.execute(f"SELECT seq FROM liyuan_chunks WHERE {_CHAT} AND seq <= %(last)s",
                               {**self._where, "last": last}).fetchall()
            present = np.fromiter((r[0] for r in seqs), dtype=np.int64, count=len(seqs))
        return added, vectors, present

