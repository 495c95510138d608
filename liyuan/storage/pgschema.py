"""The PostgreSQL schema of liyuan's tables (chunks, sessions, memory documents), its version and its migrations.

Invariants:

- ``liyuan_schema`` holds one row, the version of the tables beside it;
  :data:`SCHEMA_VERSION` is the one this library writes.
- :func:`migrate` runs every step from the version found up to :data:`SCHEMA_VERSION`
  in one transaction, under an advisory lock, so two processes opening stores at once
  do not both create the tables; a failed step leaves the database as it was.
- The tables are the ones in ``current_schema()`` (the first schema of the search path
  that exists), where :func:`migrate` creates them: a ``liyuan_schema`` further down
  the search path is never taken for this one's.
- A database at a newer version than this library knows is refused (an older library
  must not write rows whose meaning it does not know).
"""

from __future__ import annotations

from typing import Any

from liyuan.errors import ConfigError
from liyuan.storage.requires import postgres_missing

try:
    import psycopg
except ModuleNotFoundError as exc:
    raise postgres_missing(exc) from exc

__all__ = ["SCHEMA_VERSION", "migrate"]

SCHEMA_VERSION = 3

_MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the chats, their chunks, eviction counts and pending turns.
    """
    CREATE TABLE liyuan_chats (
        scope text NOT NULL,
        chat text NOT NULL,
        generation bigint NOT NULL DEFAULT 0,
        rewrites bigint NOT NULL DEFAULT 0,
        turn_counter bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (scope, chat)
    );
    CREATE TABLE liyuan_chunks (
        scope text NOT NULL,
        chat text NOT NULL,
        store text NOT NULL,
        seq bigint GENERATED ALWAYS AS IDENTITY,
        id text NOT NULL,
        text text NOT NULL,
        text_hash text NOT NULL,
        embedding vector,
        dim integer NOT NULL,
        embedder text NOT NULL,
        source text NOT NULL CHECK (source IN ('narrative', 'archive', 'import', 'manual')),
        title text,
        node_id text,
        parent text,
        merge_count integer NOT NULL DEFAULT 1,
        created_at text NOT NULL,
        updated_at text NOT NULL,
        PRIMARY KEY (scope, chat, store, seq),
        UNIQUE (scope, chat, id)
    );
    CREATE INDEX liyuan_chunks_by_chat ON liyuan_chunks (scope, chat, seq);
    CREATE INDEX liyuan_chunks_by_text ON liyuan_chunks (scope, chat, store, text_hash);
    CREATE INDEX liyuan_chunks_by_parent ON liyuan_chunks (scope, chat, parent) WHERE parent IS NOT NULL;
    CREATE TABLE liyuan_evicted (
        scope text NOT NULL,
        chat text NOT NULL,
        store text NOT NULL,
        count bigint NOT NULL,
        PRIMARY KEY (scope, chat, store)
    );
    CREATE TABLE liyuan_pending (
        scope text NOT NULL,
        chat text NOT NULL,
        seq bigint GENERATED ALWAYS AS IDENTITY,
        node_id text,
        text text NOT NULL,
        PRIMARY KEY (scope, chat, seq)
    );
    """,
    # 1 -> 2: the chats' sessions, line by line, exactly as a session file holds them.
    """
    CREATE TABLE liyuan_session_lines (
        scope text NOT NULL,
        chat text NOT NULL,
        session text NOT NULL,
        seq bigint NOT NULL,
        line bytea NOT NULL,
        PRIMARY KEY (scope, chat, session, seq)
    );
    """,
    # 2 -> 3: a card's memory documents (and their .history/ copies) and its chats' meta.json,
    # the bytes a file would hold.
    """
    CREATE TABLE liyuan_memory_files (
        scope text NOT NULL,
        path text NOT NULL,
        seq bigint GENERATED ALWAYS AS IDENTITY,
        data bytea NOT NULL,
        PRIMARY KEY (scope, path)
    );
    CREATE TABLE liyuan_chat_meta (
        scope text NOT NULL,
        chat text NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (scope, chat)
    );
    """,
)
"""``_MIGRATIONS[n]`` takes the schema from version ``n`` to ``n + 1``."""

_SCHEMA_LOCK = 0x6C6979756170
"""The advisory lock key held while the schema is created or migrated."""


def migrate(db: psycopg.Connection[Any]) -> int:
    """Create or migrate the schema in ``db`` (autocommit) to :data:`SCHEMA_VERSION`; returns
    the version found before.

    Raises:
        ConfigError: The schema is newer than this library, or pgvector is missing.
    """
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        # In the schema new tables go to, not wherever the search path finds one.
        table = db.execute("SELECT to_regclass(format('%I.liyuan_schema', current_schema()))").fetchone()
        if table is None or table[0] is None:
            db.execute("CREATE TABLE liyuan_schema (version integer NOT NULL)")
        row = db.execute("SELECT max(version) FROM liyuan_schema").fetchone()
        found = int(row[0]) if row and row[0] is not None else 0
        if found > SCHEMA_VERSION:
            raise ConfigError(f"PostgreSQL 里梨园记忆的表结构是第 {found} 版，比这个版本的梨园记忆认识的第"
                              f" {SCHEMA_VERSION} 版新：请升级梨园记忆，不要用旧版本写这个数据库")
        if found == SCHEMA_VERSION:
            return found
        if db.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
            try:
                with db.transaction():
                    db.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as exc:
                raise ConfigError(f"这个数据库里没有 vector 扩展（pgvector），也无法创建：{exc}；"
                                  "请在服务器上装好 pgvector，并由有权限的用户运行 CREATE EXTENSION vector") from exc
        for step in _MIGRATIONS[found:]:
            db.execute(step)
        db.execute("DELETE FROM liyuan_schema")
        db.execute("INSERT INTO liyuan_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
    return found
