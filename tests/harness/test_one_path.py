"""One path from the app to the site: the harness drives scenarios through Card and Chat.

Read from the source with :mod:`ast` (nothing is imported). Only the steps whose point
is one layer, named here, may call a layer below the facade, and none of them may call
the turn's own wiring (assembly or story compaction): a turn's 效果 always goes through
:class:`liyuan.Chat`. Every other name a harness module imports from inside the library
(besides the facade, ``liyuan.__all__``) is listed in ``tests/harness/inner_names.py`` with
its reason, and anything unlisted fails; ``CardMemory`` counts as inner, since the app only
gets it from a card.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import liyuan

from .inner_names import ALLOWED, LAYER_CLASSES

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"

TURN_WIRING = {"run_compaction", "compact_now", "prepare_turn", "build_context"}
"""What wires a turn together; only :class:`liyuan.Chat` may call these."""

ONE_LAYER_STEPS: frozenset[str] = frozenset()
"""Harness modules allowed to import the names above (none: the one-layer steps show other layers)."""


def wiring_imports(path: Path) -> list[str]:
    """``module.name`` of every import of a turn-wiring name from liyuan in ``path``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("liyuan"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name in TURN_WIRING]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.rpartition(".")[2] in TURN_WIRING]
        elif isinstance(node, ast.Attribute) and node.attr in TURN_WIRING and isinstance(node.value, ast.Name) \
                and node.value.id in ("compact", "assemble", "liyuan"):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def inner_imports(path: Path) -> list[str]:
    """``module.name`` of every import from inside liyuan that is not the facade (see ``inner_names``)."""
    facade = set(liyuan.__all__) - LAYER_CLASSES
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "liyuan":
            found += [f"{node.module}.{a.name}" for a in node.names if a.name not in facade]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("liyuan.")]
    return found


def test_the_inner_check_sees_a_planted_import(tmp_path: Path) -> None:
    planted = tmp_path / "bench.py"
    planted.write_text("from liyuan import Card, CardMemory\nfrom liyuan.app import Chat\n"
                       "from liyuan.errors import ConfigError\nfrom liyuan.card.sync import CardMemory as M\n"
                       "from liyuan.story.view import story_view\nimport liyuan.vector.recall\n", encoding="utf-8")
    assert inner_imports(planted) == ["liyuan.CardMemory", "liyuan.card.sync.CardMemory",
                                      "liyuan.story.view.story_view", "liyuan.vector.recall"]


def test_every_inner_name_the_harness_uses_is_allowed_with_its_reason() -> None:
    used: dict[str, set[str]] = {}
    for path in sorted(HARNESS.rglob("*.py")):
        for name in inner_imports(path):
            used.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    unlisted = {name: sorted(paths) for name, paths in used.items() if name not in ALLOWED}
    assert not unlisted, ("这些库内部的名字没有列在 tests/harness/inner_names.py 里"
                          f"（写上理由，或改走 Card/Chat）：{unlisted}")
    stale = sorted(set(ALLOWED) - set(used))
    assert not stale, f"这些名字列着，但 harness 已经不用了，删掉：{stale}"
    assert all(len(reason) >= 20 for reason in ALLOWED.values())


def test_the_long_bench_building_card_memory_is_named_with_its_reason() -> None:
    assert "liyuan.card.sync.CardMemory" in inner_imports(HARNESS / "bench" / "long.py")
    assert "harness/bench/long.py" in ALLOWED["liyuan.card.sync.CardMemory"]


def test_the_check_sees_a_planted_import(tmp_path: Path) -> None:
    planted = tmp_path / "steps.py"
    planted.write_text("from liyuan.story.compact import CompactionOutcome, run_compaction\n"
                       "from liyuan.context import assemble\nassemble.prepare_turn\n", encoding="utf-8")
    assert wiring_imports(planted) == ["liyuan.story.compact.run_compaction", "assemble.prepare_turn"]
    planted.write_text("from liyuan.app import Chat\nchat: Chat\nchat.compact_now()\n", encoding="utf-8")
    assert wiring_imports(planted) == []  # the facade's own method is the app's path


@pytest.mark.parametrize("path", sorted(HARNESS.rglob("*.py")), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_harness_module_wires_a_turn_itself(path: Path) -> None:
    rel = path.relative_to(ROOT).as_posix()
    if rel in ONE_LAYER_STEPS:
        return
    assert wiring_imports(path) == [], f"{rel} 绕过了 Chat：一轮的效果只能经 liyuan.Chat 产生"


def test_the_scenario_runner_opens_the_facade() -> None:
    """Every scenario runs on a Card (``harness.running.state``), and every chat step gets the card's Chat."""
    source = (HARNESS / "running" / "state.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    imports = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert ("liyuan.app", "Card") in imports and ("liyuan.app", "Chat") in imports
    for name in ("story_steps", "vector_steps", "discussion_steps", "agent_steps", "memory_steps"):
        text = (HARNESS / "steps" / f"{name}.py").read_text(encoding="utf-8")
        assert "SessionTree(" not in text.replace("SessionTree(None", "") or name == "agent_steps", name
        assert "run.chat(" in text or "run.card" in text, name
