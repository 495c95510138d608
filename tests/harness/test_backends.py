"""The harness's proof that the storage seams are clean (issue 22): every scenario, played
with its card's sessions, memory documents, locks and chunks in PostgreSQL, writes
artifacts byte-identical to the committed ones, which were written with the card folder."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.running.models import open_setup
from harness.running.progress import Progress
from harness.running.runner import run_scenarios
from harness.running.scenario import load_scenario
from liyuan.card.layout import CardLayout
from liyuan.vector.pgstores import PostgresChunkStores

ROOT = Path(__file__).resolve().parents[2]


def test_the_vector_scenarios_write_the_same_artifacts_with_their_chunks_in_postgres(postgres_dsn: str) -> None:
    folder = ROOT / "sim" / "scenarios"
    names = [p.stem for p in sorted(folder.glob("*.yaml"))
             if load_scenario(p, ROOT).memory_config.vector.enabled]
    assert names  # a scenario with vector memory exists, or this test proves nothing
    opened: list[PostgresChunkStores] = []

    def storage(scenario: str) -> Mapping[str, Any]:
        opened.append(PostgresChunkStores(postgres_dsn, scope=scenario))
        return {"chunk_stores": opened[-1]}

    try:
        with open_setup("scripted", ROOT) as setup:
            report = run_scenarios(names, root=ROOT, setup=setup, progress=Progress(quiet=True), write=False,
                                   storage=storage)
    finally:
        for each in opened:
            each.close()
    assert len(opened) == len(names) and not report.failures
    files = dict(report.artifacts.files)
    assert files
    differ = [rel for rel, data in files.items() if (ROOT / "sim" / rel).read_bytes() != data]
    assert differ == []


def test_every_scenario_writes_the_same_artifacts_with_its_whole_card_in_postgres(postgres_dsn: str) -> None:
    """The whole harness on the PostgreSQL backends: every chat's sessions, the card's memory
    documents and locks, the vector scenarios' chunks in the database; every artifact byte
    for byte the committed one."""
    from liyuan.storage.pgmemory import PostgresMemory
    from liyuan.storage.pgsessions import PostgresSessions

    names = [p.stem for p in sorted((ROOT / "sim" / "scenarios").glob("*.yaml"))]
    opened: list[PostgresSessions | PostgresMemory | PostgresChunkStores] = []

    def storage(scenario: str) -> Mapping[str, Any]:
        parts = {"sessions": PostgresSessions(postgres_dsn, scope=scenario),
                 "memory": PostgresMemory(postgres_dsn, scope=scenario),
                 "chunk_stores": PostgresChunkStores(postgres_dsn, scope=scenario)}
        opened.extend(parts.values())
        return parts

    try:
        with open_setup("scripted", ROOT) as setup:
            report = run_scenarios(names, root=ROOT, setup=setup, progress=Progress(quiet=True), write=False,
                                   storage=storage)
        held = {each.scope: each.chat_ids() for each in opened if isinstance(each, PostgresSessions)}
        documents = {each.scope: each.bind(CardLayout(Path("卡"))).snapshot()
                     for each in opened if isinstance(each, PostgresMemory)}
    finally:
        for each in opened:
            each.close()
    assert not report.failures
    assert sum(len(chats) for chats in held.values()) >= len(names)  # the chats really are in the database
    assert sum("记忆.md" in docs for docs in documents.values()) >= 3  # and the merged handbooks
    files = dict(report.artifacts.files)
    differ = [rel for rel, data in files.items() if (ROOT / "sim" / rel).read_bytes() != data]
    assert len(files) > 80 and differ == []
