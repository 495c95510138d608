"""The harness's proof that the storage seam is clean (issues 22, 34): every scenario, played
with its card's sessions, memory documents, locks and chunks in PostgreSQL, writes
artifacts byte-identical to the committed ones, which were written with the card folder."""

from __future__ import annotations

from pathlib import Path

from harness.running.models import open_setup
from harness.running.progress import Progress
from harness.running.runner import run_scenarios
from harness.running.scenario import load_scenario
from liyuan.card.layout import CardLayout
from liyuan.storage import CardStorage

ROOT = Path(__file__).resolve().parents[2]


def test_every_scenario_writes_the_same_artifacts_with_its_whole_card_in_postgres(postgres_dsn: str) -> None:
    """The whole harness on the PostgreSQL backend: every chat's sessions, the card's memory
    documents and locks, the vector scenarios' chunks in the database, each card given one
    ``CardStorage.postgres`` object (which the card closes); every artifact byte for byte
    the committed one."""
    names = [p.stem for p in sorted((ROOT / "sim" / "scenarios").glob("*.yaml"))]
    assert any(load_scenario(ROOT / "sim" / "scenarios" / f"{n}.yaml", ROOT).memory_config.vector.enabled
               for n in names)  # a scenario with vector memory exists: its chunks are in the database too
    opened: dict[str, CardStorage] = {}

    def storage(scenario: str) -> CardStorage:
        opened[scenario] = CardStorage.postgres(postgres_dsn, scope=scenario)
        return opened[scenario]

    try:
        with open_setup("scripted", ROOT) as setup:
            report = run_scenarios(names, root=ROOT, setup=setup, progress=Progress(quiet=True), write=False,
                                   storage=storage)
        held = {scope: each.sessions.chat_ids() for scope, each in opened.items()}
        documents = {scope: each.memory_store(CardLayout(Path("卡"))).snapshot() for scope, each in opened.items()}
    finally:
        for each in opened.values():
            each.close()
    assert not report.failures and len(opened) == len(names)
    assert sum(len(chats) for chats in held.values()) >= len(names)  # the chats really are in the database
    assert sum("记忆.md" in docs for docs in documents.values()) >= 3  # and the merged handbooks
    files = dict(report.artifacts.files)
    differ = [rel for rel, data in files.items() if (ROOT / "sim" / rel).read_bytes() != data]
    assert len(files) > 80 and differ == []
