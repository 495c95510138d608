"""Entry ids wide enough for a long chat, drawn again on a collision (issue 26, item 3).

Before: ids were 8 hex digits (32 bits); importing 100,000 messages hit a duplicate 4
times in 5, and any duplicate from the id factory raised ``TreeError`` mid-import.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from liyuan.clock import random_ids
from liyuan.errors import TreeError
from liyuan.session.tree import ID_DRAWS, SessionTree


def test_random_ids_carry_at_least_64_bits() -> None:
    drawn = {random_ids() for _ in range(2000)}
    assert len(drawn) == 2000
    assert all(re.fullmatch(r"[0-9a-f]{16,}", i) for i in drawn)


def test_a_colliding_draw_is_drawn_again() -> None:
    script = iter(["aaaa0001", "aaaa0001", "aaaa0001", "bbbb0002"])
    tree = SessionTree(None, ids=lambda: next(script))
    first = tree.append_message("user", "一")
    second = tree.append_message("assistant", "二")  # two collisions, then a fresh id
    assert (first.id, second.id, second.parent_id) == ("aaaa0001", "bbbb0002", "aaaa0001")


def test_a_factory_that_only_repeats_itself_is_still_refused() -> None:
    calls = 0

    def same() -> str:
        nonlocal calls
        calls += 1
        return "same"

    tree = SessionTree(None, ids=same)
    tree.append_message("user", "x")
    with pytest.raises(TreeError, match="重复"):
        tree.append_message("user", "y")
    assert calls == 1 + (1 + ID_DRAWS)  # the first append, then one draw and its redraws: bounded
    assert len(tree) == 1


def test_existing_8_hex_sessions_stay_readable_and_grow_with_wide_ids(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    old = [{"type": "session", "version": 1, "id": "s", "timestamp": "t"},
           {"type": "message", "id": "1a2b3c4d", "parentId": None, "timestamp": "t", "role": "user", "text": "旧"},
           {"type": "message", "id": "5e6f7a8b", "parentId": "1a2b3c4d", "timestamp": "t", "role": "assistant",
            "text": "旧回复"}]
    path.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in old), encoding="utf-8")
    tree = SessionTree(path)
    assert [e.id for e in tree.branch()] == ["1a2b3c4d", "5e6f7a8b"] and tree.problems == []
    new = tree.append_message("user", "新")
    assert len(new.id) >= 16 and new.parent_id == "5e6f7a8b"
    assert [e.id for e in SessionTree(path).branch()] == ["1a2b3c4d", "5e6f7a8b", new.id]
