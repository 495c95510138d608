"""One card's connections to PostgreSQL: a pool of a fixed size, and one connection apart.

:class:`PostgresDatabase` is what every PostgreSQL part of a card (its sessions, memory
documents, write lock and chats' chunk stores) takes its connections from. Needs the
``postgres`` extra (psycopg 3, psycopg's pool, pgvector).

Invariants:

- **Bounded.** At most ``pool_size`` pooled connections (default :data:`DEFAULT_POOL_SIZE`),
  however many chats are open, plus one connection the pool never hands out: the sync
  lock's, a session-level advisory lock that must stay on the connection that took it.
  So a card holds at most ``pool_size + 1`` server connections.
- **Borrowed per call.** A call takes a pooled connection and gives it back when it
  returns; the write lock keeps one for as long as it is held (its transaction). A
  connection goes back idle (no transaction open).
- **Recovers at once.** A connection that comes back broken (the server restarted or
  went away) takes its pool with it: the next call connects directly, so it fails at
  once while the server is down and succeeds the moment it is back (a pool's own
  reconnect backoff would wait up to seconds more), then opens a new pool.
- **A read may ride along a write.** A statement that also reads something another part
  will need right after it (a turn's user line brings back the resident summary's stamp)
  leaves that value for its own thread (:meth:`PostgresDatabase.keep_alongside`); the
  part takes it at most once (:meth:`PostgresDatabase.take_alongside`), else reads anew.
- **Migrated once.** The schema is created or migrated (:func:`~liyuan.storage.pgschema.migrate`)
  on a connection of its own before the pool opens.
- **Closed means released, not dead.** :meth:`PostgresDatabase.close` closes every
  connection; the next call opens a new pool.
- **One error family.** A failure is translated by :func:`storage_error` into the
  :class:`~liyuan.errors.StorageError` that says what happened: the server cannot be
  reached (or no pooled connection came free in time) is
  :class:`~liyuan.errors.StorageUnavailable`, a name PostgreSQL cannot hold is
  :class:`~liyuan.errors.StorageRefused`, tables not as this library left them
  :class:`~liyuan.errors.StorageDamaged`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from liyuan.errors import ConfigError, StorageConflict, StorageDamaged, StorageError, StorageRefused, StorageUnavailable
from liyuan.storage.pgschema import migrate
from liyuan.storage.requires import postgres_missing

try:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout
except ModuleNotFoundError as exc:
    raise postgres_missing(exc) from exc

__all__ = ["DEFAULT_POOL_SIZE", "LazyConnection", "PostgresDatabase", "checked_name", "connect", "storage_error"]

DEFAULT_POOL_SIZE = 8
"""Pooled connections per card by default: with the sync lock's, 9 server connections at most."""
DEFAULT_TIMEOUT_S = 10.0
"""How long a call waits for a pooled connection (all busy, or the server not answering)."""


def storage_error(exc: BaseException, what: str) -> StorageError:
    """The :class:`~liyuan.errors.StorageError` saying what ``exc`` means for ``what``."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout, PoolClosed)):
        return StorageUnavailable(f"{what}暂时连不上 PostgreSQL（这一步没有写入，稍后重试）：{exc}")
    if isinstance(exc, psycopg.IntegrityError):
        return StorageConflict(f"{what}：别处先写了同一行，这一步没有写入：{exc}")
    if isinstance(exc, (psycopg.DataError, UnicodeError)):
        return StorageRefused(f"{what}：PostgreSQL 存不下这个值，没有写入：{exc}")
    return StorageDamaged(f"{what}：PostgreSQL 里的表和梨园记忆写下的不一样（没有写入）：{exc}")


def checked_name(value: str, what: str) -> str:
    """``value`` when PostgreSQL text can hold it (UTF-8, no NUL).

    Raises:
        StorageRefused: It cannot (a lone surrogate, a NUL character).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise StorageRefused(f"{what} {value!r} 里有无法存进 PostgreSQL 的字符（单独的代理码位）：换一个名字") from None
    if "\x00" in value:
        raise StorageRefused(f"{what} {value!r} 里有 NUL 字符，PostgreSQL 存不下：换一个名字")
    return value


def connect(conninfo: str, what: str) -> psycopg.Connection[Any]:
    """An autocommit connection to ``conninfo``.

    Raises:
        StorageUnavailable: The server cannot be reached (the message names ``what`` it is for).
    """
    try:
        return psycopg.connect(conninfo, autocommit=True)
    except psycopg.OperationalError as exc:
        raise StorageUnavailable(f"无法连接 {what}（服务器没有启动、地址不对或不接受连接）：{exc}") from exc


class LazyConnection:
    """One autocommit connection outside any pool, opened on first use and again after it
    broke or was closed. Not a lock: its owner serialises the calls."""

    def __init__(self, conninfo: str, what: str) -> None:
        self._conninfo = conninfo
        self._what = what
        self.current: psycopg.Connection[Any] | None = None
        """The connection as it is (``None`` before the first use or after :meth:`close`)."""

    def get(self) -> psycopg.Connection[Any]:
        """The connection, opened (again) when there is no usable one."""
        db = self.current
        if db is not None and not db.closed and not db.broken:
            return db
        self.current = connect(self._conninfo, self._what)
        return self.current

    def close(self) -> None:
        """Close it (the next :meth:`get` opens a new one)."""
        if self.current is not None:
            self.current.close()
            self.current = None


def _configure(db: psycopg.Connection[Any]) -> None:
    register_vector(db)  # the chunk stores send and read vectors in pgvector's binary format


class PostgresDatabase:
    """The connections of one card (see the module).

    Args:
        conninfo: A libpq connection string or URI (``postgresql://user@host/db``).
        pool_size: Pooled connections at most (the sync lock's is one more).
        timeout: Seconds a call waits for a pooled connection before
            :class:`~liyuan.errors.StorageUnavailable`.
        what: What the connections are for (named in errors).
    """

    def __init__(self, conninfo: str, *, pool_size: int = DEFAULT_POOL_SIZE, timeout: float = DEFAULT_TIMEOUT_S,
                 what: str = "PostgreSQL 里的卡") -> None:
        if not isinstance(pool_size, int) or pool_size < 1:
            raise ConfigError(f"pool_size 应为正整数，实际是 {pool_size!r}")
        self.conninfo = conninfo
        self.pool_size = pool_size
        self.timeout = timeout
        self.what = what
        self.lock_connection = LazyConnection(conninfo, what)
        """The sync lock's connection: never from the pool (a session lock stays on its connection)."""
        self._pool: ConnectionPool[Any] | None = None
        self._guard = threading.Lock()
        self._alongside = threading.local()

    def _opened(self) -> ConnectionPool[Any]:
        with self._guard:
            if self._pool is None:
                first = connect(self.conninfo, self.what)
                try:
                    migrate(first)
                except psycopg.Error as exc:
                    raise storage_error(exc, self.what) from exc
                finally:
                    first.close()
                pool: ConnectionPool[Any] = ConnectionPool(
                    self.conninfo, min_size=1, max_size=self.pool_size, kwargs={"autocommit": True},
                    configure=_configure, timeout=self.timeout, num_workers=1, open=False, name="liyuan")
                pool.open(wait=False)
                self._pool = pool
            return self._pool

    def getconn(self) -> psycopg.Connection[Any]:
        """A pooled connection, to give back with :meth:`putconn` (the write lock's transaction).

        Raises:
            StorageUnavailable: None came free within the timeout, or the server is unreachable.
        """
        try:
            db: psycopg.Connection[Any] = self._opened().getconn()
            return db
        except (PoolTimeout, PoolClosed) as exc:
            raise storage_error(exc, self.what) from exc

    def putconn(self, db: psycopg.Connection[Any]) -> None:
        """Give a connection back to the pool it came from (a broken one is thrown away and
        replaced; one whose pool was closed meanwhile is closed)."""
        owner = getattr(db, "_pool", None)  # set by psycopg_pool on the connections it hands out
        if owner is None:
            db.close()
            return
        lost = db.broken or db.closed
        owner.putconn(db)
        if lost:  # the server went away (a restart): the idle ones are dead too
            self._drop_pool(owner)

    def _drop_pool(self, pool: ConnectionPool[Any]) -> None:
        """Let ``pool`` go after a lost connection: the next call connects directly (failing at
        once while the server is down, succeeding the moment it is back) and opens a new pool,
        instead of waiting out the old pool's reconnect backoff (1, 2, 4, 8 s ...)."""
        with self._guard:
            if self._pool is not pool:
                return
            self._pool = None
        with contextlib.suppress(Exception):
            pool.close(timeout=1.0)  # connections still lent out are closed as they come back

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for one call, given back when the block ends."""
        db = self.getconn()
        try:
            yield db
        finally:
            self.putconn(db)

    def run(self, work: Callable[[psycopg.Connection[Any]], Any], what: str) -> Any:
        """``work(connection)`` on a pooled connection; a failure is a :class:`~liyuan.errors.StorageError`."""
        try:
            with self.connection() as db:
                return work(db)
        except (psycopg.Error, UnicodeError) as exc:
            raise storage_error(exc, what) from exc

    def keep_alongside(self, values: dict[str, object]) -> None:
        """Leave what this thread's last statement read beside its own work (replacing what
        an earlier one left): each value for one :meth:`take_alongside` of this thread."""
        self._alongside.values = values

    def take_alongside(self, name: str) -> tuple[bool, object]:
        """``(True, value)`` and forget it, when this thread's last :meth:`keep_alongside` left
        ``name``; else ``(False, None)`` (the caller reads it anew)."""
        values: dict[str, object] = getattr(self._alongside, "values", {})
        if name not in values:
            return False, None
        return True, values.pop(name)

    def close(self) -> None:
        """Close every connection (the next call opens a new pool)."""
        with self._guard:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        self.lock_connection.close()
