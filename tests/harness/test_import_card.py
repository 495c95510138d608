"""``python -m harness import CARD``: a card becomes a scenario that runs; a bad card writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.running.models import open_setup
from harness.running.progress import Progress
from harness.running.runner import run_scenarios
from tests.liyuan.lore.cardfiles import b64, charx, png, v3_card, world_info, write


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "repo" / "sim" / "scenarios").mkdir(parents=True)
    return tmp_path / "repo"


@pytest.mark.parametrize(("name", "data"), [
    ("c.png", png({"ccv3": b64(v3_card())})),
    ("c.charx", charx(v3_card())),
    ("w.json", world_info()),
])
def test_card_import_writes_a_scenario_that_runs(repo: Path, tmp_path: Path, name: str,
                                                 data: bytes | dict[str, object]) -> None:
    source = write(tmp_path, name, data)
    assert main(["import", str(source), "--root", str(repo), "-q"]) == 0
    scenarios = sorted((repo / "sim" / "scenarios").glob("card-*.yaml"))
    cards = sorted((repo / "sim" / "cards").iterdir())
    assert len(scenarios) == 1 and len(cards) == 1 and cards[0].read_bytes() == source.read_bytes()
    with open_setup("scripted", repo) as setup:
        report = run_scenarios([scenarios[0].stem], root=repo, setup=setup, progress=Progress(quiet=True))
    assert report.failures == []
    record = (repo / "sim" / "txt" / f"{scenarios[0].stem}-report.txt").read_text(encoding="utf-8")
    assert record.startswith("份额：1720 字")


@pytest.mark.parametrize(("name", "data"), [
    ("plain.png", png()),
    ("escape.charx", charx(v3_card(), {"../x": b"x"})),
])
def test_bad_card_writes_nothing(repo: Path, tmp_path: Path, name: str, data: bytes,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(write(tmp_path, name, data)), "--root", str(repo), "-q"]) == 2
    assert "什么都没有写" in capsys.readouterr().err
    assert list((repo / "sim" / "scenarios").iterdir()) == [] and not (repo / "sim" / "cards").exists()
