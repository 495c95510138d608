"""A card's two locks in PostgreSQL: advisory locks that every app server sees.

Each lock pairs a thread lock (threads of this process) with an advisory lock on a key
made of the card's scope (every process, every server):

- :class:`WriteLock` borrows a connection from the card's pool, begins a transaction and
  takes ``pg_advisory_xact_lock``: what the holding thread reads and writes through
  :meth:`WriteLock.held` is that transaction, committed when the lock is left (and the
  connection given back), rolled back when an exception leaves the outermost ``with``.
  A transaction-scoped lock is released by the server with the transaction.
- :class:`SyncLock` takes a session ``pg_advisory_lock`` on the one connection the pool
  never hands out (:attr:`~liyuan.storage.pgdb.PostgresDatabase.lock_connection`), held
  across model calls and freed by the server when that connection ends (a crash, ``kill -9``).

See :mod:`liyuan.storage.pgmemory` for what they guard.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from liyuan.errors import MemoryFileError, StorageUnavailable
from liyuan.storage.pgdb import PostgresDatabase, storage_error
from liyuan.storage.requires import postgres_missing

try:
    import psycopg
    from psycopg.pq import TransactionStatus
except ModuleNotFoundError as exc:
    raise postgres_missing(exc) from exc

__all__ = ["SyncLock", "WriteLock", "lock_key"]

def lock_key(kind: str, scope: str) -> int:
    """The advisory lock key (a signed 64-bit number) of one lock of one card."""
    digest = hashlib.blake2b("\x00".join(("memory", kind, scope)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class _AdvisoryLock:
    """A thread lock (this process) around an advisory lock (every process)."""

    def __init__(self, db: PostgresDatabase, key: int, *, reentrant: bool) -> None:
        self._db = db
        self._key = key
        self._thread_lock: threading.Lock | threading.RLock = threading.RLock() if reentrant else threading.Lock()
        self._depth = 0

    @property
    def in_use(self) -> bool:
        """Whether a thread of this process holds the lock."""
        return self._depth > 0

    def _take(self, blocking: bool) -> bool:
        raise NotImplementedError

    def _give(self, failed: bool) -> None:
        raise NotImplementedError

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock; with ``blocking=False`` return False at once when it is taken."""
        if not self._thread_lock.acquire(blocking):
            return False
        if self._depth == 0:
            try:
                got = self._take(blocking)
            except psycopg.Error as exc:
                self._thread_lock.release()
                raise storage_error(exc, "无法在 PostgreSQL 里锁住这张卡的记忆") from exc
            except BaseException:
                self._thread_lock.release()
                raise
            if not got:
                self._thread_lock.release()
                return False
        self._depth += 1
        return True

    def release(self, failed: bool = False) -> None:
        """Leave once; the advisory lock goes when the owner leaves for the last time."""
        self._depth -= 1
        try:
            if self._depth == 0:
                try:
                    self._give(failed)
                except psycopg.Error as exc:
                    raise storage_error(exc, "PostgreSQL 里的记忆写入没能提交") from exc
        finally:
            self._thread_lock.release()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the lock around a read (there is no read-only case to go without it)."""
        with self:
            yield

    def __enter__(self) -> _AdvisoryLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release(failed=exc is not None)


class WriteLock(_AdvisoryLock):
    """The write lock: a transaction holding ``pg_advisory_xact_lock`` (see the module)."""

    def __init__(self, db: PostgresDatabase, scope: str) -> None:
        super().__init__(db, lock_key("write", scope), reentrant=True)
        self._owner: int | None = None
        self._held: psycopg.Connection[Any] | None = None

    def held(self) -> psycopg.Connection[Any] | None:
        """The lock's transaction when the calling thread holds it, else ``None``."""
        return self._held if self._owner == threading.get_ident() else None

    def _take(self, blocking: bool) -> bool:
        db = self._db.getconn()
        got = False
        try:
            if db.info.transaction_status != TransactionStatus.IDLE:
                db.execute("ROLLBACK")  # a commit cut short left a transaction open: never build on it
            db.execute("BEGIN")
            if blocking:
                db.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
                got = True
            else:
                row = db.execute("SELECT pg_try_advisory_xact_lock(%s)", (self._key,)).fetchone()
                got = bool(row and row[0])
        finally:
            if not got:
                if not (db.closed or db.broken):
                    db.execute("ROLLBACK")  # not taken (or the wait failed): end the transaction
                self._db.putconn(db)
        if got:
            self._owner = threading.get_ident()
            self._held = db
        return got

    def _give(self, failed: bool) -> None:
        db, self._held, self._owner = self._held, None, None
        if db is None:
            return
        try:
            if db.closed or db.broken:
                if failed:
                    return
                raise StorageUnavailable(_NOT_COMMITTED)
            if failed:
                db.execute("ROLLBACK")
                return
            if db.info.transaction_status != TransactionStatus.INTRANS:
                # A statement failed inside the transaction and its error was caught: a COMMIT
                # would quietly roll back. Say so instead.
                db.execute("ROLLBACK")
                raise MemoryFileError(_NOT_COMMITTED)
            db.execute("COMMIT")
        finally:
            self._db.putconn(db)


_NOT_COMMITTED = ("这一步对记忆的写入没有提交（PostgreSQL 里的事务中途出错或连接断了），什么都没写进去：重做这一步")


class SyncLock(_AdvisoryLock):
    """The sync lock: a session advisory lock (see the module)."""

    def __init__(self, db: PostgresDatabase, scope: str) -> None:
        super().__init__(db, lock_key("sync", scope), reentrant=False)

    def _take(self, blocking: bool) -> bool:
        db = self._db.lock_connection.get()
        if blocking:
            db.execute("SELECT pg_advisory_lock(%s)", (self._key,))
            return True
        row = db.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()
        return bool(row and row[0])

    def _give(self, failed: bool) -> None:
        db = self._db.lock_connection.current
        if db is not None and not db.closed and not db.broken:
            db.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
