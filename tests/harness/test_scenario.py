"""Scenario files: the committed ones load; malformed ones fail with a message naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import harness.steps  # noqa: F401  (registers the handlers)
from harness.running.scenario import STEP_KINDS, ScenarioError, load_scenario, scenario_names
from harness.running.state import HANDLERS

MINIMAL = {
    "name": "mini",
    "title": "最小场景",
    "card": "卡",
    "user": "甲",
    "char": "乙",
    "chats": {"jA": {"name": "第一局", "greeting": "你好。",
                     "turns": [{"user": "在吗？", "reply": "在。"}]}},
    "steps": [{"id": "play", "kind": "play", "chat": "jA"},
              {"id": "c", "kind": "compact", "chat": "jA", "files": {"prompt": "p.txt"}}],
}


def write(tmp_path: Path, data: object, name: str = "mini") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def broken(**changes: object) -> dict[str, object]:
    data = yaml.safe_load(yaml.safe_dump(MINIMAL, allow_unicode=True))
    data.update(changes)
    return data


def test_committed_scenarios_load(root: Path) -> None:
    names = scenario_names(root / "sim" / "scenarios")
    assert "walkthrough" in names
    for name in names:
        scenario = load_scenario(root / "sim" / "scenarios" / f"{name}.yaml", root)
        assert scenario.path == f"sim/scenarios/{name}.yaml"
        assert scenario.steps


def test_every_step_kind_has_a_handler() -> None:
    assert set(STEP_KINDS) == set(HANDLERS)


def test_minimal_scenario(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, MINIMAL))
    assert scenario.chats["jA"].turns[0].reply == "在。"
    assert scenario.step("c").files == {"prompt": "p.txt"}
    assert scenario.step("c").out == "mini"
    assert scenario.language == "中文"


@pytest.mark.parametrize(("data", "expected"), [
    (broken(steps=[{"id": "x", "kind": "compat", "chat": "jA"}]), "steps[0]（x）.kind: 未知的步骤类型 'compat'"),
    (broken(steps=[{"id": "x", "kind": "compact"}]), "steps[0]（x）.chat: compact 步骤缺少必填字段"),
    (broken(steps=[{"id": "x", "kind": "compact", "chat": "jZ"}]), "没有这个局：'jZ'"),
    (broken(steps=[{"id": "x", "kind": "compact", "chat": "jA", "mode": "auto"}]), "未知字段 mode"),
    (broken(steps=[{"id": "x", "kind": "play", "chat": "jA", "upto": "1"}]), "steps[0]（x）.upto: 应该是整数"),
    (broken(config={"keep": "1"}), "config: 不是合法的记忆设置（liyuan.MemoryConfig）：keep 应为整数"),
    (broken(steps=[{"id": "x", "kind": "fit", "other": [1], "files": {"fit": "../etc/passwd"}}]), "文件名不合法"),
    (broken(steps=[{"id": "x", "kind": "fit", "other": [1], "files": {"fit": "a.txt"}},
                   {"id": "y", "kind": "fit", "other": [2], "files": {"fit": "a.txt"}}]),
     "a.txt 已经由步骤 x 写了"),
    (broken(steps=[{"id": "x", "kind": "fit", "other": [1]}, {"id": "x", "kind": "fit", "other": [2]}]),
     "步骤 id 重复"),
    (broken(steps=[]), "steps: 应该是非空列表"),
    (broken(chats={"j/A": {"name": "x"}}), "局 id 只能用字母"),
    (broken(chats={"jA\n": {"name": "x"}}), "局 id 只能用字母"),  # a trailing newline is not an id
    (broken(steps=[{"id": "x", "kind": "fit", "other": [1], "files": {"fit": "a.txt\n"}}]), "文件名不合法"),
    (broken(chats={"jA": {"name": "x", "turns": [{"user": "只有用户"}]}}), "chats.jA.turns[0].reply: 应该是非空字符串"),
    (broken(config={"every_n_turn": 3}), "MemoryConfig）：没有这些设置项：every_n_turn"),
    (broken(name="other"), "name: 应该和文件名一致"),
    (broken(colour="red"), "（顶层）: 未知字段 colour"),
])
def test_malformed_scenarios_name_the_field(tmp_path: Path, data: dict[str, object], expected: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, data))
    assert expected in str(info.value)
    assert str(info.value).startswith("mini.yaml: ")


def test_yaml_syntax_error_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "mini.yaml"
    path.write_text("name: mini\nsteps: [\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match="YAML 语法错误"):
        load_scenario(path)


def test_per_chat_files_are_keyed_by_chat(tmp_path: Path) -> None:
    data = broken(steps=[{"id": "s", "kind": "sync", "files": {"recap": {"jA": "r.txt"}, "handbook": "h.txt"}}])
    scenario = load_scenario(write(tmp_path, data))
    assert scenario.step("s").files == {"recap:jA": "r.txt", "handbook": "h.txt"}
    bad = broken(steps=[{"id": "s", "kind": "sync", "files": {"recap": {"jQ": "r.txt"}}}])
    with pytest.raises(ScenarioError, match=r"files.recap.jQ: 没有这个局"):
        load_scenario(write(tmp_path, bad))


def test_the_long_chat_generator_draws_only_raw_bits() -> None:
    """Its picks equal random.choice's today, but come from getrandbits alone (stable across Pythons)."""
    import random

    from harness.fixtures.longstory import _picker

    for seed in (0, 7, 12345):
        ours, theirs = random.Random(seed), random.Random(seed)
        pick = _picker(ours)
        for n in (1, 2, 3, 5, 8, 13, 100):
            items = list(range(n))
            assert [pick(items) for _ in range(20)] == [theirs.choice(items) for _ in range(20)]
