"""Fixtures of the vector tests: a PostgreSQL server for the chunk-store contract."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.liyuan.vector.postgres import fresh_schema, refuse, server_dsn


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """Connection string of the session's PostgreSQL (started once, stopped at the end)."""
    try:
        import pgvector  # noqa: F401
        import psycopg  # noqa: F401
    except ModuleNotFoundError as exc:
        refuse(f"没有安装 {exc.name}（postgres 附加依赖）", os.environ)
    yield from server_dsn(os.environ)


@pytest.fixture
def postgres_dsn(postgres_server: str) -> Iterator[str]:
    """A connection string into an empty schema of its own, for one test."""
    yield from fresh_schema(postgres_server)
