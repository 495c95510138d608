"""What docs/eval.md says in prose holds in the committed results it describes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "eval.md"


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "sim" / "eval" / "strategies.json").read_text(encoding="utf-8"))
    return data


def runs(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in report["strategies"]}


def test_page_includes_the_generated_files() -> None:
    # The raw scorecard is linked as a file of its own, not inlined (the page's weight, issue 27).
    text = PAGE.read_text(encoding="utf-8")
    for include in ('--8<-- "sim/eval/scorecards.md"', '--8<-- "sim/eval/strategies.md"',
                    '--8<-- "sim/eval/bench.md"', "[`sim/out/eval.json`](sim/out/eval.json)",
                    '--8<-- "sim/scenarios/walkthrough.yaml:gold"', "assets/strategy-chart.svg"):
        assert include in text


def test_settings_the_page_names(report: dict[str, Any]) -> None:
    settings = report["settings"]
    assert (settings["turns"], settings["window_tokens"], settings["truncate_turns"]) == (600, 32768, 20)
    assert (settings["agent_reserve_tokens"], settings["agent_keep_recent_tokens"]) == (16384, 8000)
    assert settings["agent_keep_recent_tokens"] < settings["window_tokens"] - settings["agent_reserve_tokens"] < 20000
    chat = report["chat"]
    assert 190_000 <= chat["chars"] <= 215_000  # 约 20 万字
    assert chat["facts"] == 20 and chat["reroll_turn"] == 246
    gaps = [b - a for a, b in zip(chat["scenes"], chat["scenes"][1:], strict=False)]
    assert all(40 <= g <= 60 for g in gaps)


def test_sizes_the_page_and_the_chart_describe(report: dict[str, Any]) -> None:
    r, window = runs(report), report["settings"]["window_tokens"]
    assert 5.5 <= r["full"]["max_tokens"] / window < 6.5  # 窗口的六倍
    assert 6_500 <= r["truncate"]["max_tokens"] <= 7_500  # 七千 token 左右
    assert 12_000 <= r["ours"]["max_tokens"] < 13_000  # 一万两千
    assert r["ours"]["turns_over_window"] == 0


def test_the_agent_compacts_only_after_the_window_is_exceeded(report: dict[str, Any]) -> None:
    agent, window = runs(report)["agent"], report["settings"]["window_tokens"]
    tokens = agent["series"]["tokens"]
    assert agent["compactions"] == 5 and agent["side_calls"] == 10
    assert agent["cuts_inside_turn"] == 5 and agent["cuts_between_turns"] == 0
    for cut in agent["cut_turns"]:
        assert tokens[cut["turn"] - 1] > window
    assert 1.7 <= agent["max_tokens"] / window < 2.0  # 快一倍


def test_ours_compacts_every_30_turns_and_waits_two_turns_after_the_rerolled_turn(report: dict[str, Any]) -> None:
    # Turn 246 compacts, then is swiped: the new branch's compaction waits until the swipe has
    # settled (two turns, MemoryConfig.settle_turns; issue 38), then every 30 turns from there.
    ours = runs(report)["ours"]
    turns = [c["turn"] for c in ours["cut_turns"]]
    assert ours["compactions"] == 20 and ours["cuts_inside_turn"] == 0
    assert turns == [*range(36, 247, 30), *range(248, 601, 30)]


def test_fact_fates_the_page_reports(report: dict[str, Any]) -> None:
    r = runs(report)
    assert r["truncate"]["facts"]["lost"] == 20
    assert r["full"]["facts"]["verbatim"] == 20
    assert all(not run["swiped_fact_in_final_context"] for run in r.values())
    assert r["ours"]["budget_failures"] == 0  # 600 轮里没有一次违规


def test_bench_snapshot_matches_what_the_page_says() -> None:
    # Whether the target is met is said by the snapshot's own rendering, not by the page
    # (tests/harness/test_snapshots.py); the page only says what is measured.
    bench = json.loads((ROOT / "sim" / "eval" / "bench.json").read_text(encoding="utf-8"))
    assert list(bench["overhead"]["verdicts"]) == ["library"]  # 表里量的就是应用每轮实际走的那条路
    assert [r["turns"] for r in bench["overhead"]["rows"]] == [100, 1000, 10000]  # 100、1,000、10,000 轮
    assert bench["overhead"]["sample_turns"] == 100  # 各量最后 100 轮
    text = PAGE.read_text(encoding="utf-8")
    for include in ('--8<-- "sim/eval/long.md"', '--8<-- "sim/eval/latency.md"'):
        assert include in text
