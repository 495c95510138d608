"""The 设定集 section's sentences, pinned to the lore scenario's artifacts (issue 23)."""

from __future__ import annotations

import json
from typing import Any

from .hook import ROOT

MEMORY = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")


def step(step_id: str) -> dict[str, Any]:
    record = json.loads((ROOT / "sim" / "out" / "lore.json").read_text(encoding="utf-8"))
    return next(s for s in record["steps"] if s["id"] == step_id)


def test_lore_section_sentences() -> None:
    imported = step("import-card")["outcome"]
    assert imported["entries"] == 13 and "13 条设定" in MEMORY
    play = step("lore-play")["outcome"]
    assert [c["after_turn"] for c in play["compactions"]] == [12] and "第 12 轮后压缩一次" in MEMORY
    assert play["activations"][8]["turn"] == 9 and "无名信" not in play["activations"][8]["activated"]
    over = step("lore-over")["outcome"]
    lore = over["lore"]
    assert over["share_chars"] == 1720 and "1720 字" in MEMORY
    assert len(lore["activated"]) == 11 and "激活 11 条" in MEMORY
    assert [c["title"] for c in lore["cut"]] == ["裁缝铺"] and "「裁缝铺」整条截掉" in MEMORY
    assert "无名信" not in [hit["title"] for hit in lore["activated"]] and "第 9 轮的家信" in MEMORY
    turn = step("lore-turn")["outcome"]
    assert turn["summary_message"] and "铜纽扣" in turn["lore"]["included"]
    report = (ROOT / "sim" / "txt" / "lore-report.txt").read_text(encoding="utf-8")
    assert "一字不差" in report and "一字不差" in MEMORY


def test_the_demo_says_which_rules_it_bends() -> None:
    """Issue 39: the lore scenario compacts sooner than the defaults allow; the page says so
    where the 效果 is shown, with the scenario's numbers and the defaults'."""
    from liyuan import MemoryConfig

    record = json.loads((ROOT / "sim" / "out" / "lore.json").read_text(encoding="utf-8"))
    config, default = record["config"], MemoryConfig()
    assert (config["keep"], config["every_n_turns"], config["min_chars"]) == (6, 6, 500)
    assert (default.keep, default.every_n_turns, default.min_chars) == (6, 30, 2000)
    [compaction] = step("lore-play")["outcome"]["compactions"]
    assert compaction["after_turn"] == config["keep"] + config["every_n_turns"] == 12
    assert "6 轮 952 字" in compaction["message"]
    note = MEMORY.split('!!! note "这个演示放宽了压缩的两条规矩"', 1)[1].split("```", 1)
    assert "效果 · 激活日志" in note[1].splitlines()[0]  # the note stands right before the 效果
    for phrase in ("周期从 30 轮改成 6 轮", "最少字数从 2000 字改成 500 字", "`sim/scenarios/lore.yaml`",
                   "第 12 轮（保留 6 轮 + 周期 6 轮）", "只有 952 字", "要到第 36 轮"):
        assert phrase in note[0], phrase
