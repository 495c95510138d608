"""The current branch's index: id membership and the latest custom entry without a scan (issue 24)."""

from __future__ import annotations

from pathlib import Path

from liyuan.clock import counter_ids
from liyuan.session.branch import BranchIds
from liyuan.session.state import STATE_ENTRY_TYPE, Ledger, state_from_branch
from liyuan.session.tree import SessionTree


def _tree(tmp_path: Path) -> SessionTree:
    return SessionTree(tmp_path / "s.jsonl", ids=counter_ids())


def test_ids_view_is_a_frozen_snapshot(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    first = tree.append_message("user", "一")
    reply = tree.append_message("assistant", "二")
    ids = tree.branch().ids()
    assert isinstance(ids, BranchIds)
    assert set(ids) == {first.id, reply.id} and len(ids) == 2
    later = tree.append_message("user", "三")
    assert later.id not in ids  # appended after the snapshot
    tree.navigate(first.id)
    fork = tree.append_message("assistant", "另一个回复")
    now = tree.branch().ids()
    assert fork.id in now and reply.id not in now and later.id not in now
    assert reply.id in ids and fork.id not in ids  # the old view is unchanged


def test_ids_match_a_full_walk_after_every_move(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    made = [tree.append_message("user" if i % 2 == 0 else "assistant", f"第{i}条") for i in range(12)]
    for target in (made[7].id, made[3].id, None, made[10].id, made[0].id):
        tree.navigate(target)
        tree.append_message("assistant", "分叉")
        view = tree.branch()
        expected = {entry.id for entry in view}
        ids = view.ids()
        assert set(ids) == expected
        assert all(entry.id in ids for entry in view)
        assert not any(entry.id in ids for entry in tree if entry.id not in expected)
    reloaded = SessionTree(tree.path)
    reloaded.navigate(made[5].id)
    assert set(reloaded.branch().ids()) == {e.id for e in made[:6]}


def test_latest_ledger_follows_the_leaf(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    tree.append_message("user", "一")
    tree.append_custom(STATE_ENTRY_TYPE, Ledger(location="码头").to_dict())
    middle = tree.append_message("assistant", "二")
    tree.append_custom(STATE_ENTRY_TYPE, Ledger(location="茶馆").to_dict())
    old = tree.branch()
    assert state_from_branch(old) == Ledger(location="茶馆")
    tree.navigate(middle.id)  # back along the branch: the later snapshot is off it
    assert state_from_branch(tree.branch()) == Ledger(location="码头")
    tree.append_custom(STATE_ENTRY_TYPE, Ledger(location="渡口").to_dict())
    assert state_from_branch(tree.branch()) == Ledger(location="渡口")
    assert state_from_branch(old) == Ledger(location="茶馆")  # a snapshot keeps its answer
    assert state_from_branch(list(tree.branch())) == Ledger(location="渡口")  # a plain list scans
    tree.navigate(None)
    assert state_from_branch(tree.branch()) is None
