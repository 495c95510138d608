"""The developers' fast set: ``pytest -m "not slow" tests/liyuan`` leaves out the slow tests,
and nothing in the default run (nox, ``.ci/run``) leaves anything out.

Read with :mod:`ast` (nothing is imported or run). The tests named in :data:`SLOWEST` were the
slowest of ``tests/liyuan`` when measured (``--durations=30``, 2026-12-05: 271 s for the whole
directory, these about 185 s of it); each must carry ``@pytest.mark.slow``.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SLOWEST = {
    "storage/test_two_servers.py": ("test_two_servers_syncing_one_card_in_postgres_lose_no_edit_and_pay_once",
                                    "test_two_servers_on_one_chat_lose_nothing"),
    "card/test_merge_growth.py": ("test_every_recap_of_a_card_with_hundreds_of_chats_is_merged_and_a_quiet_sync_"
                                  "costs_nothing",),
    "app/test_turn_record.py": ("test_closed_chats_with_a_big_turn_each_leave_no_text_held_by_the_record",),
    "card/test_two_processes.py": ("test_two_processes_lose_nothing_and_pay_once",),
    "lore/test_activate.py": ("test_hundred_thousand_entries_stay_fast",),
    "lore/test_cards.py": ("test_hundred_thousand_entry_book_imports",),
    "story/test_live_region.py": ("test_story_view_of_a_slice_from_a_user_message_is_a_suffix",
                                  "test_active_summary_matches_the_position_map"),
    "vector/test_recall.py": ("test_default_timeout_is_five_seconds",),
    "vector/test_memory.py": ("test_semantic_embedder_ranks_a_paraphrase_first",),
    "vector/test_store_contract.py": ("test_two_writers_on_one_chat_lose_nothing",),
    "session/test_crash.py": ("test_sigkill_loses_nothing_completed_and_adds_nothing",),
}


def _is_slow_mark(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "slow" and isinstance(node.value, ast.Attribute) \
        and node.value.attr == "mark"


def slow_tests(path: Path) -> set[str]:
    """Names of the test functions in ``path`` marked ``slow`` (directly or by ``pytestmark``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    whole = any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
                and any(_is_slow_mark(e) for e in ast.walk(n.value)) for n in tree.body)
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and (whole or any(_is_slow_mark(d) for d in n.decorator_list))}


def test_the_slowest_library_tests_are_marked_slow() -> None:
    unmarked = [f"{file}::{name}" for file, names in SLOWEST.items() for name in names
                if name not in slow_tests(ROOT / "tests" / "liyuan" / file)]
    assert unmarked == [], f"没标 slow 的慢测试：{unmarked}"


def test_the_slow_marker_is_registered_and_the_default_run_deselects_nothing() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pytest_options = project["tool"]["pytest"]["ini_options"]
    assert any(m.startswith("slow:") for m in pytest_options["markers"])
    assert "-m" not in pytest_options["addopts"].split()
    for name in ("noxfile.py", ".ci/run"):
        path = ROOT / name
        if path.is_file():
            assert "not slow" not in path.read_text(encoding="utf-8"), name
