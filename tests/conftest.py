"""Shared fixtures. Real model requests are blocked for the whole suite; one throwaway
PostgreSQL serves every test that asks for it (the chunk-store contract, both backends)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import liyuan.model
from tests.liyuan.vector.postgres import fresh_schema, refuse, server_dsn


@pytest.fixture(autouse=True)
def _block_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches a real model unless it asks for ``allow_model_requests``."""
    monkeypatch.setattr(liyuan.model, "ALLOW_MODEL_REQUESTS", False)
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LIYUAN_MODEL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def allow_model_requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Opt a test back in to real (or mock-transport) requests."""
    monkeypatch.setattr(liyuan.model, "ALLOW_MODEL_REQUESTS", True)
    yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("LIYUAN_LIVE") == "1":
        return
    skip = pytest.mark.skip(reason="live model test: set LIYUAN_LIVE=1 to run")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


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


@pytest.fixture
def pg_card(postgres_dsn: str) -> Iterator[Callable[..., Any]]:
    """Makes ``CardStorage.postgres(postgres_dsn, scope=..., ...)`` objects, closed after the test."""
    from liyuan.storage import CardStorage

    opened: list[CardStorage] = []

    def make(scope: str, **options: Any) -> CardStorage:
        opened.append(CardStorage.postgres(postgres_dsn, scope=scope, **options))
        return opened[-1]

    yield make
    for storage in opened:
        storage.close()
