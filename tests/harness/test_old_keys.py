"""Scenario files that still say "beat" load, and the harness says which keys to rename."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import yaml

from harness.eval.gold import GoldError
from harness.eval.gold import load_scenario as load_gold_file
from harness.running.oldkeys import OldScenarioKeyWarning
from harness.running.scenario import ScenarioError, load_scenario

OLD = {
    "name": "old",
    "title": "旧写法的场景",
    "card": "卡",
    "user": "甲",
    "char": "乙",
    "chats": {"jA": {"name": "第一局", "greeting": "你好。",
                     "beats": [{"user": "在吗？", "reply": "在。"}, {"user": "走吧。", "reply": "好。"}]}},
    "steps": [{"id": "play", "kind": "play", "chat": "jA"},
              {"id": "back", "kind": "rewind", "chat": "jA", "beat": 1}],
    "gold": {"facts": [{"id": "f1", "chat": "jA", "beat": 1, "kind": "fact", "text": "甲在", "match": ["在"]}]},
}


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def test_an_old_scenario_loads_with_a_warning_naming_the_file_and_the_new_keys(tmp_path: Path) -> None:
    path = write(tmp_path, OLD)
    with pytest.warns(OldScenarioKeyWarning) as caught:
        scenario = load_scenario(path, tmp_path)
    assert [t.user for t in scenario.chats["jA"].turns] == ["在吗？", "走吧。"]
    assert scenario.step("back").params["turn"] == 1
    message = str(caught[0].message)
    assert message.startswith("old.yaml: ")
    assert "chats.jA.beats → turns" in message and "steps[1].beat → turn" in message
    assert "gold.facts[0].beat → turn" in message


def test_the_gold_reader_takes_the_old_key_too(tmp_path: Path) -> None:
    path = write(tmp_path, OLD)
    with pytest.warns(OldScenarioKeyWarning, match=re.escape("gold.facts[0].beat → turn")):
        gold = load_gold_file(path, "sim/scenarios/old.yaml").gold
    assert [fact.turn for fact in gold.facts] == [1]


def test_a_new_scenario_loads_without_a_warning(tmp_path: Path) -> None:
    data = yaml.safe_load(yaml.safe_dump(OLD, allow_unicode=True))
    data["chats"]["jA"]["turns"] = data["chats"]["jA"].pop("beats")
    data["steps"][1]["turn"] = data["steps"][1].pop("beat")
    data["gold"]["facts"][0]["turn"] = data["gold"]["facts"][0].pop("beat")
    path = write(tmp_path, data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", OldScenarioKeyWarning)
        assert len(load_scenario(path, tmp_path).chats["jA"].turns) == 2
        assert len(load_gold_file(path).gold.facts) == 1


def test_both_the_old_and_the_new_key_fail_naming_the_place(tmp_path: Path) -> None:
    data = yaml.safe_load(yaml.safe_dump(OLD, allow_unicode=True))
    data["chats"]["jA"]["turns"] = [{"user": "另一句", "reply": "另一个回复"}]
    path = write(tmp_path, data)
    with pytest.raises(ScenarioError, match=r"old\.yaml: chats\.jA: 同时写了旧键 beats 和新键 turns"):
        load_scenario(path, tmp_path)
    with pytest.raises(GoldError, match=r"同时写了旧键 beats 和新键 turns"):
        load_gold_file(path)

