"""A card's memory documents and locks in PostgreSQL: several app servers, one card, nothing lost.

Part of ``CardStorage.postgres(conninfo, scope="卡的 id")``: keeps the recaps, the
handbook, the resident summary, the manifest and the ``.history/`` copies in one table,
``liyuan_memory_files``: one row per document, named by its path under ``记忆/`` and
holding the bytes its file would hold. The sync and the hard path run the same code as on
files (:class:`~liyuan.card.memstore.MemoryStore`); a card moves between the backends
byte for byte (:func:`liyuan.storage.copy.copy_memory`). Needs the ``postgres`` extra.

Invariants:

- **The write lock is a transaction.** Taking the card's write lock begins a transaction
  on a connection borrowed from the card's pool and takes a transaction-scoped advisory lock on the card;
  every read and write the holding thread makes goes through that transaction, and
  leaving the lock commits it. So a read-decide-write (a recap and the manifest that
  records it; a hand edit, its backup and the manifest) lands whole or not at all: an
  exception that leaves the outermost ``with`` rolls it back, and a holder that dies
  loses its transaction and its lock with its connection.
- **The sync lock is a session advisory lock** on the one connection the pool never hands out, held
  across the model calls: one sync of a card at a time across every server. The server
  frees it when the holder's connection ends (a crash, ``kill -9``). It carries no
  fencing counter: a holder whose connection is cut while it waits on a model loses the
  lock without knowing, and a second sync may start. That is safe because every write
  happens under the write lock and checks what it read (a recap is written only over the
  text its call was based on; a merge only if the input stamp did not move), so the
  worst case is a model call paid for and thrown away.
- **Replace only if unchanged** (:meth:`PostgresMemoryFiles.replace_text`) reads the row
  ``FOR UPDATE`` and compares in the same transaction: there is no window for another
  server's write.
- A ``.history/`` copy is a row like any document; the newest
  :data:`~liyuan.card.housekeeping.HISTORY_KEEP` copies of each document are kept (newest
  by insertion).
- Other threads of the process read on pooled autocommit connections: they see committed
  documents only.
- **A stamp may come with the user line.** A document's stamp is its md5 (:data:`STAMP_SQL`);
  the sessions may read the resident summary's in the statement that appends a turn's
  user line (:class:`~liyuan.storage.pgsessions.PostgresSessions`), and
  :meth:`PostgresMemoryFiles.stamp` with ``after_append`` takes that one (once) instead of
  a round trip of its own: as fresh as the append it came with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from liyuan.card.files import content_copy_name, history_copy_name, history_suffix
from liyuan.card.housekeeping import HISTORY_KEEP
from liyuan.card.layout import HISTORY_DIR, RECAPS_DIR, CardLayout, is_valid_chat_id
from liyuan.card.memstore import CardLocks
from liyuan.card.swap import as_read
from liyuan.clock import Clock, IdFactory, random_ids, system_clock
from liyuan.errors import MemoryFileError, StateError, UnsafePathError
from liyuan.storage.pgdb import PostgresDatabase, checked_name, storage_error
from liyuan.storage.pglocks import SyncLock, WriteLock
from liyuan.storage.requires import postgres_missing

try:
    import psycopg
except ModuleNotFoundError as exc:
    raise postgres_missing(exc) from exc

__all__ = ["STAMP_SQL", "PostgresMemory", "PostgresMemoryFiles", "stamp_alongside"]

_T = TypeVar("_T")
_HISTORY = f"{HISTORY_DIR}/"
_WHAT = "PostgreSQL 记忆库"
STAMP_SQL = "SELECT md5(data) FROM liyuan_memory_files WHERE scope = %(scope)s AND path = %(path)s"
"""A document's stamp: the md5 of its bytes, computed by the server (no row: missing)."""


def stamp_alongside(rel: str) -> str:
    """The name a stamp read along another statement is left under
    (:meth:`~liyuan.storage.pgdb.PostgresDatabase.keep_alongside`)."""
    return f"stamp {rel}"


class PostgresMemory:
    """The memory of one card in PostgreSQL (:class:`~liyuan.card.memstore.MemoryBackend`).

    Args:
        db: The card's connections (:class:`~liyuan.storage.pgdb.PostgresDatabase`).
        scope: The card's id in the database (two scopes never mix).

    Raises:
        StorageRefused: ``scope`` cannot be held by PostgreSQL text (a lone surrogate).
    """

    def __init__(self, db: PostgresDatabase, *, scope: str) -> None:
        self.scope = checked_name(scope, "卡的 scope")
        self.db = db
        """The card's connections (what a stamp read along a session append is left with)."""
        self._write = WriteLock(db, scope)
        self._sync = SyncLock(db, scope)
        self.locks = CardLocks(run=self._sync, write=self._write)

    def bind(self, layout: CardLayout, *, clock: Clock = system_clock,
             ids: IdFactory = random_ids) -> PostgresMemoryFiles:
        """The documents of this card, named by paths under ``layout.memory_dir``."""
        return PostgresMemoryFiles(self, layout, clock=clock, ids=ids)

    def check_closable(self) -> None:
        """Refuse to close the card's connections while one of its locks is held.

        Raises:
            StateError: One is (closing would drop it, and a write lock's uncommitted
                writes, behind its holder's back).
        """
        if self._write.in_use or self._sync.in_use:
            raise StateError("卡的锁还被持有，不能关闭连接：先离开锁，再关闭")

    def run(self, work: Callable[[psycopg.Connection[Any]], _T], *, apart: bool = False) -> _T:
        """``work(connection)``: in the write lock's transaction when this thread holds it (unless
        ``apart``), else on a pooled autocommit connection; a database failure is a
        :class:`~liyuan.errors.StorageError` (also a :class:`MemoryFileError` when the server
        is unreachable or the tables are damaged)."""
        held = None if apart else self._write.held()
        if held is None:
            return self.db.run(work, _WHAT)  # type: ignore[no-any-return]
        try:
            return work(held)
        except (psycopg.Error, UnicodeError) as exc:
            raise storage_error(exc, _WHAT) from exc

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction (a savepoint inside the write lock's), rolled back by an exception."""
        try:
            held = self._write.held()
            if held is not None:
                with held.transaction():
                    yield held
                return
            with self.db.connection() as db, db.transaction():
                yield db
        except (psycopg.Error, UnicodeError) as exc:
            raise storage_error(exc, f"{_WHAT}（没有写入）") from exc


class PostgresMemoryFiles:
    """The memory documents of one card in PostgreSQL (:class:`~liyuan.card.memstore.MemoryStore`)."""

    def __init__(self, memory: PostgresMemory, layout: CardLayout, *, clock: Clock = system_clock,
                 ids: IdFactory = random_ids) -> None:
        self.memory = memory
        self.layout = layout
        self._clock = clock
        self._ids = ids
        self._scope = memory.scope

    @property
    def locks(self) -> CardLocks:
        return self.memory.locks

    def _rel(self, path: Path) -> str:
        try:
            rel = path.relative_to(self.layout.memory_dir).as_posix()
        except ValueError:
            raise UnsafePathError(f"记忆文档的路径不在这张卡的记忆里：{path}") from None
        if rel in ("", ".") or ".." in PurePosixPath(rel).parts:
            raise UnsafePathError(f"记忆文档的路径不在这张卡的记忆里：{path}")
        return rel

    def _path(self, rel: str) -> Path:
        return self.layout.memory_dir / rel

    def _get(self, rel: str) -> bytes | None:
        row = self.memory.run(lambda db: db.execute(
            "SELECT data FROM liyuan_memory_files WHERE scope = %s AND path = %s", (self._scope, rel)).fetchone())
        return bytes(row[0]) if row else None

    def _put(self, db: psycopg.Connection[Any], rel: str, data: bytes) -> None:
        db.execute("INSERT INTO liyuan_memory_files (scope, path, data) VALUES (%s, %s, %s)"
                   " ON CONFLICT (scope, path) DO UPDATE SET data = EXCLUDED.data", (self._scope, rel, data))

    def _decode(self, rel: str, data: bytes) -> str:
        text = as_read(data)
        if text is None:
            raise MemoryFileError(f"无法读取记忆文档 {rel}：不是 UTF-8 文本")
        return text

    # -- reading --------------------------------------------------------------------

    def read_bytes(self, path: Path) -> bytes | None:
        return self._get(self._rel(path))

    def read_text(self, path: Path) -> str | None:
        rel = self._rel(path)
        data = self._get(rel)
        return None if data is None else self._decode(rel, data)

    def exists(self, path: Path) -> bool:
        return self._get(self._rel(path)) is not None

    def stamp(self, path: Path, *, after_append: bool = False) -> Hashable | None:
        """The document's md5 (computed by the server): the same text, the same stamp.

        ``after_append``: the one this thread's last session append brought back with it,
        when it did (the resident summary's, with a turn's user line), else read now."""
        rel = self._rel(path)
        if after_append:
            found, stamp = self.memory.db.take_alongside(stamp_alongside(rel))
            if found:
                return None if stamp is None else str(stamp)
        row = self.memory.run(lambda db: db.execute(STAMP_SQL, {"scope": self._scope, "path": rel}).fetchone())
        return str(row[0]) if row and row[0] is not None else None

    def recap_texts(self, forgotten: Collection[str] = ()) -> dict[str, str]:
        found: dict[str, str] = {}
        for rel, data in self._recap_rows():
            chat_id = rel[len(RECAPS_DIR) + 1:-3]
            if is_valid_chat_id(chat_id) and chat_id not in forgotten:
                found[chat_id] = self._decode(rel, data)
        return dict(sorted(found.items()))

    def _recap_rows(self) -> list[tuple[str, bytes]]:
        rows = self.memory.run(lambda db: db.execute(
            "SELECT path, data FROM liyuan_memory_files WHERE scope = %s AND left(path, %s) = %s",
            (self._scope, len(RECAPS_DIR) + 1, f"{RECAPS_DIR}/")).fetchall())
        return sorted((rel, bytes(data)) for rel, data in rows if rel.endswith(".md") and rel.count("/") == 1)

    def input_stamp(self) -> str:
        """As :meth:`liyuan.card.files.MemoryFiles.input_stamp` computes it, over the rows."""
        layout = self.layout
        fixed = [self._rel(p) for p in (layout.manifest, layout.handbook, layout.resident)]
        rows = self.memory.run(lambda db: db.execute(
            "SELECT path, data FROM liyuan_memory_files WHERE scope = %s AND path = ANY(%s)",
            (self._scope, fixed)).fetchall())
        data_of = {rel: bytes(data) for rel, data in rows}
        digest = hashlib.sha1()
        inputs: list[tuple[str, bytes | None]] = [(rel, data_of.get(rel)) for rel in fixed]
        for index, (rel, data) in enumerate(inputs + list(self._recap_rows())):
            if index:
                digest.update(b"\0")
            digest.update(rel.encode("utf-8") + b"\0")
            digest.update(b"<missing>" if data is None else data)
        return digest.hexdigest()

    def snapshot(self) -> dict[str, bytes]:
        rows = self.memory.run(lambda db: db.execute(
            "SELECT path, data FROM liyuan_memory_files WHERE scope = %s", (self._scope,)).fetchall())
        return dict(sorted((rel, bytes(data)) for rel, data in rows))

    # -- writing --------------------------------------------------------------------

    def write_text(self, path: Path, text: str) -> None:
        rel = self._rel(path)
        self.memory.run(lambda db: self._put(db, rel, text.encode("utf-8")))

    def replace_text(self, path: Path, text: str, expected: str | None) -> bool:
        rel = self._rel(path)
        data = text.encode("utf-8")
        with self.memory.transaction() as db:
            if expected is None:  # only if missing: an insert that never overwrites a row put meanwhile
                return db.execute("INSERT INTO liyuan_memory_files (scope, path, data) VALUES (%s, %s, %s)"
                                  " ON CONFLICT (scope, path) DO NOTHING", (self._scope, rel, data)).rowcount == 1
            row = db.execute("SELECT data FROM liyuan_memory_files WHERE scope = %s AND path = %s FOR UPDATE",
                             (self._scope, rel)).fetchone()
            if row is None or as_read(bytes(row[0])) != expected:
                return False
            self._put(db, rel, data)
        return True

    def delete(self, path: Path, *, at_once: bool = False) -> None:
        """``at_once``: on the shared autocommit connection, committed before this returns even
        while this thread holds the write lock (whose advisory lock still keeps other writers out)."""
        rel = self._rel(path)
        self.memory.run(lambda db: db.execute(
            "DELETE FROM liyuan_memory_files WHERE scope = %s AND path = %s", (self._scope, rel)), apart=at_once)

    def restore(self, documents: Mapping[str, bytes]) -> None:
        """Store every document in one transaction; ``.history/`` copies in name order (their
        names start with their time), so pruning keeps the newest."""
        checked = sorted((self._rel(self._path(name)), data) for name, data in documents.items())
        with self.memory.transaction() as db:
            for rel, data in checked:
                self._put(db, rel, data)

    def _keep_copy(self, db: psycopg.Connection[Any], name: str, rel: str, data: bytes) -> Path:
        copy = f"{_HISTORY}{name}"
        db.execute("INSERT INTO liyuan_memory_files (scope, path, data) VALUES (%s, %s, %s)"
                   " ON CONFLICT (scope, path) DO NOTHING", (self._scope, copy, data))
        suffix = history_suffix(rel)
        db.execute(
            "DELETE FROM liyuan_memory_files WHERE scope = %(scope)s AND path IN ("
            " SELECT path FROM liyuan_memory_files WHERE scope = %(scope)s AND left(path, %(n)s) = %(history)s"
            " AND strpos(substr(path, %(n)s + 1), '/') = 0 AND right(path, %(m)s) = %(suffix)s"
            " ORDER BY seq DESC, path DESC OFFSET %(keep)s)",
            {"scope": self._scope, "n": len(_HISTORY), "history": _HISTORY, "m": len(suffix), "suffix": suffix,
             "keep": HISTORY_KEEP})
        return self._path(copy)

    def backup_copy(self, path: Path) -> Path | None:
        return self._to_history(path, remove=False)

    def backup_once(self, path: Path) -> Path | None:
        rel = self._rel(path)
        data = self._get(rel)
        if data is None:
            return None
        copy = f"{_HISTORY}{content_copy_name(rel, data)}"
        self.memory.run(lambda db: db.execute(
            "INSERT INTO liyuan_memory_files (scope, path, data) VALUES (%s, %s, %s)"
            " ON CONFLICT (scope, path) DO NOTHING", (self._scope, copy, data)))
        return self._path(copy)

    def move_to_history(self, path: Path) -> Path | None:
        return self._to_history(path, remove=True)

    def _to_history(self, path: Path, *, remove: bool) -> Path | None:
        """Copy (``remove``: move) the document into ``.history/``, in one transaction."""
        rel = self._rel(path)
        take = "DELETE FROM liyuan_memory_files WHERE scope = %s AND path = %s RETURNING data" if remove \
            else "SELECT data FROM liyuan_memory_files WHERE scope = %s AND path = %s"
        with self.memory.transaction() as db:
            row = db.execute(take, (self._scope, rel)).fetchone()
            if row is None:
                return None
            return self._keep_copy(db, history_copy_name(rel, self._clock, self._ids), rel, bytes(row[0]))

    # -- housekeeping: nothing on disk -------------------------------------------------

    def check_paths(self) -> None:
        """Nothing to check: documents are rows, no path can be a symlink."""

    def remove_orphan_temps(self) -> int:
        """Nothing to remove: a write that died rolled back with its transaction."""
        return 0
