"""The chunk store: one SQLite file per chat, plus an in-memory search snapshot.

Invariants:

- Every write is one transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``) in WAL mode with
  ``synchronous=FULL``: a process killed mid-write loses at most the write in flight,
  never a committed chunk, and the file stays consistent (tested by killing a child).
- Each write that may change a chunk (add, re-embed, delete) bumps ``meta.generation``
  in the same transaction; the turn counter and the pending queue are not chunks and
  leave it alone. A :class:`Snapshot` is refreshed only when the generation it was
  built from is stale, so a recall after a mere :meth:`SqliteChunkStore.next_turn` costs
  one small query plus numpy, not a rebuild. When chunks were only added or evicted
  since (``meta.rewrites``, bumped by a re-embed or a deletion, is unchanged), a refresh
  reads just the new rows and drops the evicted ones: its cost follows what changed,
  not the store's size (the BM25 postings are appended too,
  :mod:`liyuan.vector.postings`); the rows evicted meanwhile are read from the ``evicted``
  log (the seqs each write evicted, by generation) rather than by reading every row's
  seq (issue 36); otherwise it rebuilds, reusing the vectors and encoded terms of
  chunks it already holds.
- Rows are never edited in place except to re-embed: a narrative merge inserts a new
  version whose ``parent`` is the chunk it extends (copy-on-write), so a reroll that
  abandons the newer version brings the older one back (see
  :func:`liyuan.vector.search.visible_mask`).
- ``seq`` is the creation order. Beyond a store's cap, rows that another version
  extends go first (their text lives on in the newer one), then the oldest rows.
  Eviction is never silent: ``meta`` counts the rows evicted per store (in the same
  transaction, :meth:`SqliteChunkStore.evicted`) and ``add``'s ``on_evict`` hears of it.
- Within a store, no two chunks have the same text and the same ``node_id`` (checked
  by a hash column). The same words written on two branches are two chunks, one
  visible on each; otherwise the second branch would find its text hidden under the
  first branch's id.
- A store keeps one connection, opened with the store and closed by :meth:`SqliteChunkStore.close`
  (its card's storage closes it), shared by every thread under a lock (the recall runs in
  a worker thread with a timeout). A failure is a :class:`~liyuan.errors.StorageError`.

Rows: ``id`` (16 hex), ``store``, ``text``, ``embedding`` (float32 blob), ``dim``,
``embedder`` (label of what wrote the vector), ``source`` (narrative | archive | import
| manual), ``title``, ``node_id`` (narrative: assistant entry id of the turn; archive:
the compaction's anchor, ``NULL`` in files written before anchors were stored; ``NULL``
for import and manual chunks), ``parent`` (the version this one extends), ``seq``,
``merge_count``, ``created_at``, ``updated_at``.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import numpy.typing as npt

from liyuan.clock import Clock, system_clock
from liyuan.errors import StorageDamaged, StorageUnavailable
from liyuan.vector.chunkstore import CHUNK_COLUMNS, NewChunk, RewrittenIds, chunk_from_row, rebuilt
from liyuan.vector.index import Chunk, Snapshot, TermCache, reusable_rows

__all__ = ["SqliteChunkStore"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    store TEXT NOT NULL,
    text TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    embedding BLOB NOT NULL,
    dim INTEGER NOT NULL,
    embedder TEXT NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('narrative', 'archive', 'import', 'manual')),
    title TEXT,
    node_id TEXT,
    parent TEXT,
    merge_count INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_store ON chunks (store, seq);
CREATE INDEX IF NOT EXISTS chunks_by_text ON chunks (store, text_hash);
CREATE INDEX IF NOT EXISTS chunks_by_parent ON chunks (parent);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS evicted (generation INTEGER NOT NULL, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS evicted_by_generation ON evicted (generation);
CREATE TABLE IF NOT EXISTS pending (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id TEXT,
    text TEXT NOT NULL
);
"""

_COLUMNS = CHUNK_COLUMNS


def _text_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _eviction_order(db: sqlite3.Connection, store: str, excess: int) -> list[int]:
    """The ``excess`` rows of ``store`` to evict: those another version extends first (their
    text lives on in it), then the oldest. Both queries walk indexes, not the table."""
    superseded = [r[0] for r in db.execute(
        "SELECT DISTINCT c.seq FROM chunks AS d CROSS JOIN chunks AS c ON c.id = d.parent"
        " WHERE d.parent IS NOT NULL AND c.store = ? ORDER BY c.seq LIMIT ?", (store, excess))]
    if len(superseded) >= excess:
        return superseded
    chosen = set(superseded)
    oldest = [r[0] for r in db.execute("SELECT seq FROM chunks WHERE store = ? ORDER BY seq LIMIT ?",
                                       (store, excess + len(superseded)))]
    return superseded + [seq for seq in oldest if seq not in chosen][:excess - len(superseded)]


EVICTION_LOG_SPAN = 1000
"""Generations the eviction log reaches back; a snapshot older than that reads every seq instead."""


def _log_evicted(db: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Note ``seqs`` as evicted by the write under way (it will be the next generation), so a
    refresh learns what went without reading every row's seq (issue 36)."""
    upcoming = int(db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]) + 1
    db.executemany("INSERT INTO evicted (generation, seq) VALUES (?, ?)", [(upcoming, seq) for seq in seqs])
    db.execute("DELETE FROM evicted WHERE generation < ?", (upcoming - EVICTION_LOG_SPAN,))


class SqliteChunkStore:
    """Chunks of one chat in one SQLite file.

    Args:
        path: The database file (created with its folder when missing).
        clock: Timestamps for ``created_at`` / ``updated_at``.
    """

    def __init__(self, path: str | Path, *, clock: Clock = system_clock) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._terms = TermCache()
        self._rewritten = RewrittenIds()  # a refresh never reuses a re-embedded chunk's old vector
        self._db: sqlite3.Connection | None = None
        self._db_lock = threading.RLock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(_SCHEMA)
                db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                db.execute("INSERT OR IGNORE INTO meta VALUES ('generation', '0')")
                db.execute("INSERT OR IGNORE INTO meta VALUES ('turn_counter', '0')")
                db.execute("INSERT OR IGNORE INTO meta VALUES ('rewrites', '0')")
        except StorageDamaged as exc:
            raise StorageDamaged(f"向量记忆库无法打开（{self.path}）：{exc.__cause__}") from exc

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """The store's connection (opened on first use), held by one thread at a time; a
        failure is a :class:`~liyuan.errors.StorageError`."""
        with self._db_lock:
            try:
                if self._db is None:
                    self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                                               check_same_thread=False)
                    self._db.execute("PRAGMA synchronous=FULL")
                yield self._db
            except sqlite3.OperationalError as exc:
                raise StorageUnavailable(f"向量记忆库暂时不能读写（{self.path}）：{exc}") from exc
            except sqlite3.DatabaseError as exc:
                raise StorageDamaged(f"向量记忆库已损坏（{self.path}）：{exc}") from exc

    def close(self) -> None:
        """Close the connection (the next call opens it again)."""
        with self._db_lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    @contextmanager
    def _write(self, *, chunks_changed: bool = True, rewrites: bool = False) -> Iterator[sqlite3.Connection]:
        """One write transaction; ``chunks_changed=False`` only for writes that touch no
        chunk row (the snapshot built for the current generation stays valid);
        ``rewrites`` for writes that change or delete rows other than by eviction (the
        next snapshot is rebuilt rather than extended)."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                if chunks_changed:
                    db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
                if rewrites:
                    db.execute("INSERT INTO meta VALUES ('rewrites', '1') ON CONFLICT(key) DO UPDATE SET"
                               " value = CAST(value AS INTEGER) + 1")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    # -- writing ---------------------------------------------------------------------

    def add(
        self, chunks: Sequence[NewChunk], *, max_chunks: int, clear_pending_through: int | None = None,
        on_evict: Callable[[str, int], None] | None = None,
    ) -> list[str]:
        """Insert chunks, skipping those whose text and ``node_id`` are already in their
        store; evict FIFO beyond the cap.

        ``clear_pending_through`` drops queued turns up to that ``seq`` in the same
        transaction (they are what was just ingested). ``on_evict(store, count)`` is
        called after the commit for every store that lost rows to its cap.

        Returns:
            Ids of the chunks inserted (and not immediately evicted), in order.
        """
        now = self._clock()
        added: list[str] = []
        stores: set[str] = set()
        evicted: dict[str, int] = {}
        with self._write() as db:
            for chunk in chunks:
                digest = _text_hash(chunk.text)
                seen = db.execute("SELECT 1 FROM chunks WHERE store = ? AND text_hash = ? AND text = ?"
                                  " AND node_id IS ?", (chunk.store, digest, chunk.text, chunk.node_id)).fetchone()
                if seen:
                    continue
                cid = uuid.uuid4().hex[:16]
                vector = np.ascontiguousarray(chunk.embedding, dtype=np.float32)
                db.execute(
                    "INSERT INTO chunks (id, store, text, text_hash, embedding, dim, embedder, source, title,"
                    " node_id, parent, merge_count, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (cid, chunk.store, chunk.text, digest, vector.tobytes(), int(vector.size), chunk.embedder,
                     chunk.source, chunk.title, chunk.node_id, chunk.parent, chunk.merge_count, now, now),
                )
                added.append(cid)
                stores.add(chunk.store)
            for store in stores:
                excess = db.execute("SELECT COUNT(*) FROM chunks WHERE store = ?", (store,)).fetchone()[0]
                excess -= max(1, max_chunks)
                if excess > 0:
                    doomed = _eviction_order(db, store, excess)
                    db.execute(f"DELETE FROM chunks WHERE seq IN ({','.join('?' * len(doomed))})", doomed)
                    _log_evicted(db, doomed)
                    db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET"
                               " value = CAST(value AS INTEGER) + excluded.value", (f"evicted:{store}", str(excess)))
                    evicted[store] = excess
            if clear_pending_through is not None:
                db.execute("DELETE FROM pending WHERE seq <= ?", (clear_pending_through,))
            kept = {r[0] for r in db.execute(
                f"SELECT id FROM chunks WHERE id IN ({','.join('?' * len(added))})", added)} if added else set()
        if on_evict is not None:
            for store, count in evicted.items():
                on_evict(store, count)
        return [cid for cid in added if cid in kept]

    def set_embeddings(self, updates: Sequence[tuple[str, npt.NDArray[np.float32]]], embedder: str) -> None:
        """Store new vectors for existing chunks (re-embedding); texts are untouched."""
        self._rewritten.add(chunk_id for chunk_id, _vector in updates)
        with self._write(rewrites=True) as db:
            now = self._clock()
            rows = [(np.ascontiguousarray(vector, dtype=np.float32), chunk_id) for chunk_id, vector in updates]
            db.executemany("UPDATE chunks SET embedding = ?, dim = ?, embedder = ?, updated_at = ? WHERE id = ?",
                           [(row.tobytes(), int(row.size), embedder, now, cid) for row, cid in rows])

    def delete(self, chunk_id: str) -> bool:
        """Delete one chunk and the older versions it extends; ``False`` if there was none."""
        with self._write(rewrites=True) as db:
            doomed: list[str] = []
            current: str | None = chunk_id
            while current is not None and current not in doomed:
                row = db.execute("SELECT parent FROM chunks WHERE id = ?", (current,)).fetchone()
                if row is None:
                    break
                doomed.append(current)
                current = row[0]
            for cid in doomed:
                db.execute("DELETE FROM chunks WHERE id = ?", (cid,))
            return bool(doomed)

    def next_turn(self, pending: tuple[str | None, str] | None = None) -> int:
        """Increment and return the chat's turn counter (it drives the ingest period).

        Args:
            pending: ``(node_id, text)`` of this turn, queued in the same transaction.
        """
        with self._write(chunks_changed=False) as db:
            db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'turn_counter'")
            if pending is not None:
                db.execute("INSERT INTO pending (node_id, text) VALUES (?, ?)", pending)
            return int(db.execute("SELECT value FROM meta WHERE key = 'turn_counter'").fetchone()[0])

    def pending(self) -> list[tuple[int, str | None, str]]:
        """Queued turns as ``(seq, node_id, text)``, oldest first."""
        with self._connect() as db:
            return list(db.execute("SELECT seq, node_id, text FROM pending ORDER BY seq"))

    def clear_pending(self, through_seq: int) -> None:
        """Drop queued turns up to ``through_seq`` (after they were ingested)."""
        with self._write(chunks_changed=False) as db:
            db.execute("DELETE FROM pending WHERE seq <= ?", (through_seq,))

    # -- reading ---------------------------------------------------------------------

    def get(self, chunk_id: str) -> Chunk | None:
        """The chunk with this id, or ``None``."""
        with self._connect() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
        return chunk_from_row(row) if row else None

    def chunks(self, store: str | None = None) -> list[Chunk]:
        """Chunks in creation order, of one store or of all."""
        with self._connect() as db:
            if store is None:
                rows = db.execute(f"SELECT {_COLUMNS} FROM chunks ORDER BY seq").fetchall()
            else:
                rows = db.execute(f"SELECT {_COLUMNS} FROM chunks WHERE store = ? ORDER BY seq",
                                  (store,)).fetchall()
        return [chunk_from_row(r) for r in rows]

    def count(self, store: str | None = None) -> int:
        """Number of chunks, of one store or of all."""
        with self._connect() as db:
            if store is None:
                return int(db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
            return int(db.execute("SELECT COUNT(*) FROM chunks WHERE store = ?", (store,)).fetchone()[0])

    def evicted(self, store: str) -> int:
        """How many chunks ``store`` has lost to its cap since the file was created."""
        with self._connect() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (f"evicted:{store}",)).fetchone()
        return int(row[0]) if row else 0

    def snapshot(self) -> Snapshot:
        """The current search snapshot, refreshed only when the file changed.

        A refresh reads the light columns of every row but fetches vectors only for
        chunks the previous snapshot did not hold (or whose vector was rewritten), and
        reuses every chunk's encoded terms, so a write costs little on a big store.
        """
        with self._lock:
            current = self._snapshot
            with self._connect() as db:
                db.execute("BEGIN")  # one read transaction: generation and rows agree
                generation = int(db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
                if current is not None and current.generation == generation:
                    db.execute("COMMIT")
                    return current
                row = db.execute("SELECT value FROM meta WHERE key = 'rewrites'").fetchone()
                rewrites = int(row[0]) if row else 0
                if current is not None and current.rewrites == rewrites:
                    grown = self._grown(db, current)
                    db.execute("COMMIT")
                    self._snapshot = current.extended(generation, *grown)
                    return self._snapshot
                fetched: dict[str, npt.NDArray[np.float32]] = {}
                if current is None:  # a cold start: every vector is wanted, read them in the same pass
                    rows = db.execute(f"SELECT {_COLUMNS}, embedding FROM chunks ORDER BY seq").fetchall()
                    chunks = tuple(chunk_from_row(r[:-1]) for r in rows)
                    fetched = {r[1]: np.frombuffer(r[-1], dtype=np.float32) for r in rows}
                else:
                    chunks = tuple(chunk_from_row(r) for r in db.execute(f"SELECT {_COLUMNS} FROM chunks ORDER BY seq"))
                reuse = reusable_rows(current, chunks, self._rewritten.ids)
                wanted = [c.id for c in chunks if c.id not in reuse and c.id not in fetched]
                for start in range(0, len(wanted), 500):
                    part = wanted[start : start + 500]
                    for cid, blob in db.execute(
                            f"SELECT id, embedding FROM chunks WHERE id IN ({','.join('?' * len(part))})", part):
                        fetched[cid] = np.frombuffer(blob, dtype=np.float32)
                db.execute("COMMIT")
            self._snapshot = rebuilt(current, generation, rewrites, chunks, reuse, fetched, self._terms)
            return self._snapshot

    @staticmethod
    def _grown(db: sqlite3.Connection, current: Snapshot) -> tuple[
            list[Chunk], list[npt.NDArray[np.float32]], npt.NDArray[np.int64] | None, npt.NDArray[np.int64] | None]:
        """Rows added since ``current`` (with vectors); if some of its rows went, their seqs
        from the eviction log (``gone``) or, when the log does not account for them all (it
        reaches back :data:`EVICTION_LOG_SPAN` generations), every seq still there (``present``)."""
        last = current.chunks[-1].seq if current.chunks else 0
        added: list[Chunk] = []
        vectors: list[npt.NDArray[np.float32]] = []
        for row in db.execute(f"SELECT {_COLUMNS}, embedding FROM chunks WHERE seq > ? ORDER BY seq", (last,)):
            added.append(chunk_from_row(row[:-1]))
            vectors.append(np.frombuffer(row[-1], dtype=np.float32))
        # Through indexes: a scan of the table would read every vector.
        kept = int(db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]) - len(added)
        if kept == len(current.chunks):
            return added, vectors, None, None
        gone = np.array([r[0] for r in db.execute("SELECT seq FROM evicted WHERE generation > ? AND seq <= ?",
                                                   (current.generation, last))], dtype=np.int64)
        gone = np.unique(gone)
        at = np.searchsorted(current.seqs, gone)
        inside = at < current.seqs.size
        if int(np.count_nonzero(current.seqs[at[inside]] == gone[inside])) == len(current.chunks) - kept:
            return added, vectors, None, gone
        rows = db.execute("SELECT seq FROM chunks INDEXED BY chunks_by_store WHERE store >= '' AND seq <= ?", (last,))
        present = np.fromiter((r[0] for r in rows), dtype=np.int64, count=kept)
        return added, vectors, present, None
