"""The harness's proof that the chunk-store seam is clean (issue 22): the scenario that
turns vector memory on, played with its chats' chunks in PostgreSQL, writes artifacts
byte-identical to the committed ones, which were written with SQLite files."""

from __future__ import annotations

from pathlib import Path

from harness.running.models import open_setup
from harness.running.progress import Progress
from harness.running.runner import run_scenarios
from harness.running.scenario import load_scenario
from liyuan.vector.pgstores import PostgresChunkStores

ROOT = Path(__file__).resolve().parents[2]


def test_the_vector_scenarios_write_the_same_artifacts_on_postgres(postgres_dsn: str) -> None:
    folder = ROOT / "sim" / "scenarios"
    names = [p.stem for p in sorted(folder.glob("*.yaml"))
             if load_scenario(p, ROOT).memory_config.vector.enabled]
    assert names  # a scenario with vector memory exists, or this test proves nothing
    opened: list[PostgresChunkStores] = []

    def stores(scenario: str) -> PostgresChunkStores:
        opened.append(PostgresChunkStores(postgres_dsn, scope=scenario))
        return opened[-1]

    try:
        with open_setup("scripted", ROOT) as setup:
            report = run_scenarios(names, root=ROOT, setup=setup, progress=Progress(quiet=True), write=False,
                                   chunk_stores=stores)
    finally:
        for each in opened:
            each.close()
    assert len(opened) == len(names) and not report.failures
    files = dict(report.artifacts.files)
    assert files
    differ = [rel for rel, data in files.items() if (ROOT / "sim" / rel).read_bytes() != data]
    assert differ == []


def test_every_scenario_writes_the_same_artifacts_with_its_sessions_and_chunks_in_postgres(
        postgres_dsn: str) -> None:
    """The whole harness on the PostgreSQL backends: every chat's sessions (and the vector
    scenarios' chunks) in the database, every artifact byte for byte the committed one."""
    from liyuan.storage.pgsessions import PostgresSessions

    names = [p.stem for p in sorted((ROOT / "sim" / "scenarios").glob("*.yaml"))]
    opened: list[PostgresSessions | PostgresChunkStores] = []

    def sessions(scenario: str) -> PostgresSessions:
        opened.append(PostgresSessions(postgres_dsn, scope=scenario))
        return opened[-1]  # type: ignore[return-value]

    def stores(scenario: str) -> PostgresChunkStores:
        opened.append(PostgresChunkStores(postgres_dsn, scope=scenario))
        return opened[-1]  # type: ignore[return-value]

    try:
        with open_setup("scripted", ROOT) as setup:
            report = run_scenarios(names, root=ROOT, setup=setup, progress=Progress(quiet=True), write=False,
                                   chunk_stores=stores, sessions=sessions)
        held = {each.scope: each.chat_ids() for each in opened if isinstance(each, PostgresSessions)}
    finally:
        for each in opened:
            each.close()
    assert not report.failures
    assert sum(len(chats) for chats in held.values()) >= len(names)  # the chats really are in the database
    files = dict(report.artifacts.files)
    differ = [rel for rel, data in files.items() if (ROOT / "sim" / rel).read_bytes() != data]
    assert len(files) > 80 and differ == []
