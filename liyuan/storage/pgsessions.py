"""A card's sessions in PostgreSQL: several app servers, one chat, nothing lost.

Part of ``CardStorage.postgres(conninfo, scope="卡的 id")``: keeps every chat's sessions in
one table, ``liyuan_session_lines``, one row per appended line, the
bytes exactly as a session file holds them (so a session reads back through the same
loader and gives the same tree, and a session exports to a file byte for byte). Needs
the ``postgres`` extra (psycopg 3 and pgvector).

Invariants:

- Rows are keyed by ``(scope, chat, session, seq)``; ``seq`` counts a session's lines
  from 1 (the header) without gaps, and a row is never updated.
- Every append is one ``INSERT`` of the ``seq`` after the last one this log read or
  wrote, and of the ones after it when it carries several lines (a reply and its ledger):
  one round trip, its own transaction. The primary key lets only one writer have
  a ``seq``: of two servers appending to one chat on the same view, the second is refused
  with :class:`~liyuan.errors.SessionConflictError` and writes nothing (no entry lost,
  none duplicated, none forked behind the other's back); an append to a session deleted
  meanwhile is refused the same way. Creating a session and deleting a chat hold a
  transaction-scoped advisory lock on the chat's key, which a crashed holder frees with
  its connection and which is safe behind a connection pool.
- A chat's fingerprint (:meth:`PostgresSessions.mark`) is per session its name, line
  count, byte count and a digest of its header: it changes with every append, and a chat
  deleted and started again under the same id has other headers.
- An append also reads the stamp of one memory document (``stamp_along``: the resident
  summary, which a turn reads right after its user line) in its statement and leaves it
  for its thread (:meth:`~liyuan.storage.pgdb.PostgresDatabase.keep_alongside`): a turn is
  two round trips, the user line and the reply.
- Every call borrows a connection from the card's pool
  (:class:`~liyuan.storage.pgdb.PostgresDatabase`) for its round trip and gives it back.
- A session name PostgreSQL text cannot hold (a lone surrogate) is refused with
  :class:`~liyuan.errors.StorageRefused` before anything is sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from liyuan.card.sessions import import_by_copy
from liyuan.errors import SessionConflictError, StorageError, TreeError
from liyuan.session.damage import SessionProblem
from liyuan.session.loader import SessionContent, read_entries
from liyuan.storage.pgdb import PostgresDatabase, checked_name, storage_error
from liyuan.storage.pgmemory import STAMP_SQL, stamp_alongside
from liyuan.storage.requires import postgres_missing

try:
    import psycopg
except ModuleNotFoundError as exc:
    raise postgres_missing(exc) from exc

__all__ = ["PostgresSessionLog", "PostgresSessions"]

_T = TypeVar("_T")
_SESSION = "scope = %(scope)s AND chat = %(chat)s AND session = %(session)s"


_APPEND = f"""
INSERT INTO liyuan_session_lines (scope, chat, session, seq, line)
SELECT %(scope)s, %(chat)s, %(session)s, %(seq)s + n - 1, line
FROM unnest(%(lines)s::bytea[]) WITH ORDINALITY AS appended(line, n)
WHERE %(seq)s = 1 OR EXISTS (SELECT 1 FROM liyuan_session_lines WHERE {_SESSION} AND seq = %(seq)s - 1)
RETURNING ({STAMP_SQL.replace("%(path)s", "%(along)s")})
"""
"""One append, one statement, however many lines: the ``seq`` after the last this log saw
and the ones after it. The primary key lets one writer have them (the other's insert fails
whole: a conflict); the ``EXISTS`` refuses a session deleted meanwhile. Each stored line
comes back with the stamp of the memory document ``along`` (the resident summary's, which
the turn reads next; ``NULL`` when there is none), read in the same round trip."""


def _lines_of(data: bytes) -> list[bytes]:
    """``data`` cut after every newline byte (only there: a stray carriage return in a
    damaged line stays in its line); a last piece without one (a torn write) is a line
    of its own."""
    parts = data.split(b"\n")
    return [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _missing_lines(seqs: list[int]) -> list[str]:
    """The line numbers absent from ``seqs`` (ascending, from 1), as ``"1"`` or ``"4-7"``."""
    gaps: list[str] = []
    expected = 1
    for seq in seqs:
        if seq > expected:
            gaps.append(str(expected) if seq == expected + 1 else f"{expected}-{seq - 1}")
        expected = seq + 1
    return gaps


def _key(*parts: str) -> int:
    digest = hashlib.blake2b("\x00".join(("session", *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresSessions:
    """The sessions of one card's chats in PostgreSQL (:class:`~liyuan.card.sessions.SessionStore`).

    Args:
        db: The card's connections (:class:`~liyuan.storage.pgdb.PostgresDatabase`).
        scope: The card's id in the database (chats of two scopes never mix).
        stamp_along: The memory document (its path under ``记忆/``) whose stamp every append
            brings back (``None``: none).

    Raises:
        StorageRefused: ``scope`` cannot be held by PostgreSQL text (a lone surrogate).
    """

    def __init__(self, db: PostgresDatabase, *, scope: str, stamp_along: str | None = None) -> None:
        self.scope = checked_name(scope, "卡的 scope")
        self._db = db
        self.stamp_along = stamp_along

    # -- connection ------------------------------------------------------------------

    def run(self, work: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """``work(connection)`` on a pooled connection; a failure is a :class:`~liyuan.errors.StorageError`."""
        return self._db.run(work, "PostgreSQL 里的会话读写")  # type: ignore[no-any-return]

    @contextmanager
    def transaction(self, chat_id: str) -> Iterator[psycopg.Cursor[Any]]:
        """One transaction holding the chat's advisory lock (creating a session, deleting the chat)."""
        try:
            with self._db.connection() as db, db.transaction(), db.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (_key(self.scope, chat_id),))
                yield cur
        except (psycopg.Error, UnicodeError) as exc:
            raise storage_error(exc, "PostgreSQL 里的会话写入（没有写入）") from exc

    def keep_alongside(self, values: dict[str, object]) -> None:
        """Leave what an append read beside its lines for this thread (the stamp it brought back)."""
        self._db.keep_alongside(values)

    def forget_alongside(self) -> None:
        """Drop what this thread's last append left (before the next one, which may fail)."""
        self._db.keep_alongside({})

    # -- the store -------------------------------------------------------------------

    def chat_ids(self) -> list[str]:
        rows = self.run(lambda db: db.execute(
            "SELECT DISTINCT chat FROM liyuan_session_lines WHERE scope = %s ORDER BY chat", (self.scope,)).fetchall())
        return [row[0] for row in rows]

    def names(self, chat_id: str) -> list[str]:
        rows = self.run(lambda db: db.execute(
            "SELECT DISTINCT session FROM liyuan_session_lines WHERE scope = %s AND chat = %s ORDER BY session",
            (self.scope, chat_id)).fetchall())
        return [row[0] for row in rows]

    def log(self, chat_id: str, name: str, *, fsync: bool = True) -> PostgresSessionLog:
        """One session (``fsync`` is moot: every append is a committed transaction).

        Raises:
            StorageRefused: The name cannot be held by PostgreSQL text (a lone surrogate).
        """
        return PostgresSessionLog(self, checked_name(chat_id, "局的 id"), checked_name(name, "会话名"))

    def read(self, chat_id: str, name: str) -> SessionContent | None:
        try:
            return PostgresSessionLog(self, chat_id, name).read()
        except StorageError:
            raise  # the server is down or the tables are damaged: never read as "no session"
        except TreeError:
            return None

    def raw(self, chat_id: str, name: str) -> bytes | None:
        rows = self.run(lambda db: db.execute(
            f"SELECT line FROM liyuan_session_lines WHERE {_SESSION} ORDER BY seq",
            {"scope": self.scope, "chat": chat_id, "session": name}).fetchall())
        return b"".join(bytes(row[0]) for row in rows) if rows else None

    def mark(self, chat_id: str) -> str:
        rows = self.run(lambda db: db.execute(
            "SELECT session, count(*), sum(length(line)), md5(min(CASE WHEN seq = 1 THEN line END))"
            " FROM liyuan_session_lines WHERE scope = %s AND chat = %s GROUP BY session ORDER BY session",
            (self.scope, chat_id)).fetchall())
        return "|".join(f"{name}:{lines}:{size}:{(head or '')[:12]}" for name, lines, size, head in rows)

    def heads(self, chat_id: str) -> dict[str, bytes]:
        """Each session's first line still stored (its header; the next one when the header
        was deleted by hand, so the same damaged session keeps the same head)."""
        rows = self.run(lambda db: db.execute(
            "SELECT DISTINCT ON (session) session, line FROM liyuan_session_lines WHERE scope = %s AND chat = %s"
            " ORDER BY session, seq", (self.scope, chat_id)).fetchall())
        return {name: bytes(line) for name, line in rows}

    def kept(self, chat_id: str, heads: dict[str, bytes]) -> bool:
        if not heads:
            return False
        now = self.heads(chat_id)
        return all(now.get(name) == head for name, head in heads.items())

    def meta(self, chat_id: str) -> bytes | None:
        row = self.run(lambda db: db.execute(
            "SELECT data FROM liyuan_chat_meta WHERE scope = %s AND chat = %s", (self.scope, chat_id)).fetchone())
        return bytes(row[0]) if row else None

    def set_meta(self, chat_id: str, data: bytes) -> None:
        self.run(lambda db: db.execute(
            "INSERT INTO liyuan_chat_meta (scope, chat, data) VALUES (%s, %s, %s)"
            " ON CONFLICT (scope, chat) DO UPDATE SET data = EXCLUDED.data", (self.scope, chat_id, data)))

    def import_into(self, chat_id: str, name: str, write: Callable[[Path], object]) -> None:
        """Written as a file first (all or nothing), then stored as one new session."""
        import_by_copy(self, chat_id, name, write)

    def clean_dead_imports(self) -> int:
        """Nothing to clean: an import is stored in one transaction or not at all."""
        return 0

    def drop(self, chat_id: str) -> None:
        """Delete every session of the chat and its meta, in one transaction."""
        with self.transaction(chat_id) as cur:
            cur.execute("DELETE FROM liyuan_session_lines WHERE scope = %s AND chat = %s", (self.scope, chat_id))
            cur.execute("DELETE FROM liyuan_chat_meta WHERE scope = %s AND chat = %s", (self.scope, chat_id))


class PostgresSessionLog:
    """One session in PostgreSQL (:class:`~liyuan.session.log.SessionLog`); see the module docstring."""

    def __init__(self, store: PostgresSessions, chat_id: str, name: str) -> None:
        self._store = store
        self.chat_id = chat_id
        self._name = name
        self._where = {"scope": store.scope, "chat": chat_id, "session": name}
        self._lines = 0
        """The last ``seq`` this log read or wrote: where the next append must land."""
        self._mid_line = False
        """True when the session ends inside a line (a torn write copied in from a file)."""

    @property
    def name(self) -> str:
        return self._name

    def read(self) -> SessionContent | None:
        rows = self._store.run(lambda db: db.execute(
            f"SELECT seq, line FROM liyuan_session_lines WHERE {_SESSION} ORDER BY seq", self._where).fetchall())
        if not rows:
            return None
        self._lines = int(rows[-1][0])
        content = read_entries(b"".join(bytes(row[1]) for row in rows), self._name)
        self._mid_line = content.torn_tail
        missing = _missing_lines([int(row[0]) for row in rows])
        if missing:  # a file shows no trace of a deleted line; the rows' numbers do
            content.problems.append(SessionProblem(
                f"{self._name}: 数据库里缺了第 {'、'.join(missing)} 行（被手工删掉了？），按剩下的行读",
                "missing-lines"))
        return content

    def create(self, header: bytes) -> None:
        """Store a new session: its header, or a whole session's lines (an import)."""
        lines = _lines_of(header)
        with self._store.transaction(self.chat_id) as cur:  # the chat's lock: a drop waits, and vice versa
            if cur.execute(f"SELECT 1 FROM liyuan_session_lines WHERE {_SESSION} LIMIT 1", self._where).fetchone():
                raise SessionConflictError(f"会话 {self.chat_id}/{self._name} 已经在别处建好了：重新打开这一局再继续")
            cur.executemany("INSERT INTO liyuan_session_lines (scope, chat, session, seq, line)"
                            " VALUES (%(scope)s, %(chat)s, %(session)s, %(seq)s, %(line)s)",
                            [{**self._where, "seq": seq, "line": line} for seq, line in enumerate(lines, start=1)])
        self._lines = len(lines)
        self._mid_line = bool(lines) and not lines[-1].endswith(b"\n")

    def append(self, data: bytes) -> None:
        seq = self._lines + 1
        # After a torn last line the newline goes first, in its own row, as a file gets it:
        # else the first new line would be glued to the fragment and lost with it.
        lines = _lines_of(b"\n" + data if self._mid_line else data)
        along = self._store.stamp_along

        def insert(db: psycopg.Connection[Any]) -> tuple[int, object]:
            try:
                rows = db.execute(_APPEND, {**self._where, "seq": seq, "lines": lines, "along": along}).fetchall()
            except psycopg.errors.UniqueViolation:
                return -1, None  # another writer has this seq
            return len(rows), rows[0][0] if rows else None

        self._store.forget_alongside()  # nothing an earlier append brought back outlives this one
        inserted, stamp = self._store.run(insert)
        if inserted == len(lines) > 0 and along is not None:
            self._store.keep_alongside({stamp_alongside(along): stamp})
        if inserted == -1:
            raise SessionConflictError(
                f"这一局（{self.chat_id}/{self._name}）在别处有了新的内容，这一条没有写入："
                "重新打开这一局（card.reopen）看到那些内容后再继续")
        if inserted != len(lines):
            raise SessionConflictError(f"这一局（{self.chat_id}/{self._name}）在别处被删除了，这一条没有写入")
        self._lines = seq + len(lines) - 1
        self._mid_line = False

    def sync(self) -> None:
        """Nothing to do: every append was committed."""
