"""The pins scenario (issue 38 item 5, the pin half): run into a copy of the repository's sim/.

The late turn of ``pA`` carries both pins verbatim after two compactions and a merge, the
summaries and the resident summary never held the chat's pin, the other chat carries only the
card's pin, and after ``unpin`` the next turn no longer has the chat's pin.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.running.models import open_setup
from harness.running.progress import Progress
from harness.running.runner import run_scenarios

ROOT = Path(__file__).resolve().parents[2]
CHAT_PIN = "林溯左手的小指缺了一截，是十年前在北礁救落水的孩子时冻坏后截掉的；她拉缆绳、接东西都用右手。"
CARD_PIN = "雾港灯塔的雾笛每到整点响三声，一声不能多、一声不能少；灯室里谁都不许抽烟。"


def test_the_pinned_fact_reaches_the_late_turn_after_two_compactions_and_a_merge(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    for part in ("scenarios", "replies"):
        (repo / "sim" / part).mkdir(parents=True)
        shutil.copy(ROOT / "sim" / part / "pins.yaml", repo / "sim" / part / "pins.yaml")
    with open_setup("scripted", repo) as setup:
        report = run_scenarios(["pins"], root=repo, setup=setup, progress=Progress(quiet=True))
    assert report.failures == []
    txt = repo / "sim" / "txt"
    late = (txt / "pins-late-history.txt").read_text(encoding="utf-8")
    assert CHAT_PIN in late and CARD_PIN in late
    for name in ("pins-summary-1.txt", "pins-summary-2.txt", "pins-recap-A.txt", "pins-resident.txt"):
        assert "小指" not in (txt / name).read_text(encoding="utf-8"), name  # only the pin carries it
    other = (txt / "pins-other-chat-injection.txt").read_text(encoding="utf-8")
    assert CARD_PIN in other and CHAT_PIN not in other
    after = (txt / "pins-after-unpin-injection.txt").read_text(encoding="utf-8")
    assert CARD_PIN in after and CHAT_PIN not in after
    steps = {s["id"]: s for s in json.loads((repo / "sim" / "out" / "pins.json").read_text(encoding="utf-8"))["steps"]}
    assert len(steps["play-pA-2"]["outcome"]["compactions"]) == 2
    assert steps["sync-1"]["outcome"]["merged"] == "ok"
    assert [p["id"] for p in steps["assemble-pA-late"]["outcome"]["record"]["pins"]] == ["p2", "p1"]
