"""The append-only session tree: durability, bad input, navigation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liyuan.clock import counter_ids, fixed_clock
from liyuan.errors import TreeError
from liyuan.session.branch import BranchView, branch_to
from liyuan.session.entries import (
    Entry,
    args_json,
    is_message,
    message,
    thinking,
    tool_calls,
)
from liyuan.session.loader import read_entries
from liyuan.session.tree import SessionTree


def new_tree(path: Path | None) -> SessionTree:
    return SessionTree(path, session_id="s1", clock=fixed_clock(), ids=counter_ids())


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def test_file_format_one_line_per_entry(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    tree = new_tree(path)
    tree.append_message("user", "你好")
    tree.append_custom("rp-state", {"time": "黄昏"})
    header, first, second = lines(path)
    assert header["type"] == "session" and header["version"] == 1 and header["id"] == "s1"
    assert first == {"id": "e0001", "parentId": None, "type": "message",
                     "timestamp": "2026-01-01T00:01:00+00:00", "role": "user", "text": "你好"}
    assert second["parentId"] == "e0001" and second["customType"] == "rp-state"
    assert path.read_bytes().endswith(b"\n")
    assert "你好" in path.read_text("utf-8")  # raw UTF-8, not \\u escapes


def test_reload_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    tree = new_tree(path)
    for i in range(5):
        tree.append_message("user" if i % 2 == 0 else "assistant", f"第{i}句")
    again = SessionTree(path)
    assert again.entries() == tree.entries()
    assert again.leaf_id == tree.leaf_id == "e0005"
    assert again.session_id == "s1" and again.problems == []


def test_torn_last_line_is_skipped_and_file_only_grows(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    tree = new_tree(path)
    tree.append_message("user", "一")
    tree.append_message("assistant", "二")
    with path.open("ab") as f:
        f.write(b'{"id":"e0003","parentId":"e0002","type":"mess')
    before = path.read_bytes()
    reloaded = SessionTree(path, ids=counter_ids("r"))
    assert [e.id for e in reloaded] == ["e0001", "e0002"]
    assert len(reloaded.problems) == 1 and "末行不完整" in reloaded.problems[0]
    reloaded.append_message("user", "三")
    after = path.read_bytes()
    assert after.startswith(before)  # nothing rewritten, only appended
    third = SessionTree(path)
    assert [e.id for e in third] == ["e0001", "e0002", "r0001"]
    assert third.get("r0001") is not None and third.get("r0001").parent_id == "e0002"  # type: ignore[union-attr]
    assert any("不是合法 JSON" in p for p in third.problems)  # the old fragment, now a whole bad line


def test_bad_lines_are_skipped_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    good = {"id": "a", "parentId": None, "type": "message", "role": "user", "text": "好"}
    rows = [
        json.dumps({"type": "session", "version": 1, "id": "old"}),
        json.dumps(good, ensure_ascii=False),
        "",
        "这不是 JSON",
        json.dumps([1, 2, 3]),
        json.dumps({"parentId": "a", "type": "message", "text": "没有 id"}),
        json.dumps({"id": "", "parentId": "a", "type": "message"}),
        json.dumps({"id": "b", "parentId": 7, "type": "message"}),
        json.dumps({"id": "a", "parentId": None, "type": "message", "text": "重复"}),
        json.dumps({"id": "c", "parentId": "a", "type": "model_change", "provider": "x"}),
        json.dumps({"id": "d", "parentId": "c", "type": "message", "role": "assistant", "text": "回"}),
    ]
    path.write_bytes("\n".join(rows).encode() + b"\n\xff\xfe\n")
    tree = SessionTree(path)
    assert [e.id for e in tree] == ["a", "c", "d"]
    assert tree.get("a") == Entry("a", None, "message", {"role": "user", "text": "好"})
    assert tree.session_id == "old"
    assert len(tree.problems) == 7
    assert sum("重复" in p for p in tree.problems) == 1
    # The unknown type is kept on the tree but is not a message: the memory code ignores it.
    assert [e.id for e in tree.branch()] == ["a", "c", "d"]
    assert not is_message(tree.get("c"))  # type: ignore[arg-type]


def write_cycle(tmp_path: Path) -> Path:
    """A session file whose three entries' parentIds form a cycle x -> y -> z -> x."""
    path = tmp_path / "chat.jsonl"
    rows = [
        {"id": "x", "parentId": "z", "type": "message", "role": "user", "text": "1"},
        {"id": "y", "parentId": "x", "type": "message", "role": "assistant", "text": "2"},
        {"id": "z", "parentId": "y", "type": "message", "role": "user", "text": "3"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    return path


def test_parent_cycle_does_not_hang(tmp_path: Path) -> None:
    path = write_cycle(tmp_path)
    tree = SessionTree(path)
    assert [e.id for e in tree.branch()] == ["x", "y", "z"]
    assert [e.id for e in tree.branch("y")] == ["z", "x", "y"]


def test_dangling_parent_ends_branch() -> None:
    entries = {"b": message("b", "missing", "user", "x"), "c": message("c", "b", "assistant", "y")}
    assert [e.id for e in branch_to(entries, "c")] == ["b", "c"]
    assert branch_to(entries, None) == [] and branch_to(entries, "nope") == []


def test_fork_by_navigation(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    tree = new_tree(path)
    u1 = tree.append_message("user", "问")
    a1 = tree.append_message("assistant", "答一")
    tree.navigate(u1.id)  # reroll the reply
    a2 = tree.append_message("assistant", "答二")
    assert a2.parent_id == u1.id
    assert [e.text for e in tree.branch()] == ["问", "答二"]
    assert [e.text for e in tree.branch(a1.id)] == ["问", "答一"]
    assert [e.text for e in tree] == ["问", "答一", "答二"] and len(tree) == 3  # file order, every branch
    reloaded = SessionTree(path)
    assert reloaded.leaf_id == a2.id  # the last appended entry
    assert reloaded.entries() == tree.entries()
    reloaded.navigate(None)  # a new root
    root = reloaded.append_message("user", "另起")
    assert root.parent_id is None and reloaded.branch() == [root]
    with pytest.raises(TreeError, match="没有这个条目"):
        tree.navigate("nope")


def test_in_memory_tree_writes_nothing(tmp_path: Path) -> None:
    tree = new_tree(None)
    tree.append_message("user", "x")
    assert len(tree) == 1 and "e0001" in tree and list(tmp_path.iterdir()) == []
    assert [e.id for e in tree.entries()] == ["e0001"]


def test_duplicate_id_from_factory_is_refused() -> None:
    tree = SessionTree(None, ids=lambda: "same")
    tree.append_message("user", "x")
    with pytest.raises(TreeError, match="重复"):
        tree.append_message("user", "y")
    assert len(tree) == 1


def test_unreadable_or_unwritable_file_is_a_tree_error(tmp_path: Path) -> None:
    folder = tmp_path / "dir.jsonl"
    folder.mkdir()
    with pytest.raises(TreeError, match="无法读取"):
        SessionTree(folder)
    path = tmp_path / "chat.jsonl"
    tree = new_tree(path)
    path.unlink()
    path.mkdir()
    with pytest.raises(TreeError, match="无法追加"):
        tree.append_message("user", "x")
    assert len(tree) == 0  # a failed write leaves no phantom entry


def test_entry_accessors_tolerate_odd_shapes() -> None:
    odd = Entry("o", None, "custom", {"customType": 3, "data": [1], "text": None, "role": 5})
    assert (odd.custom_type, dict(odd.data), odd.text, odd.role) == (None, {}, "", None)
    assert odd.to_json()["id"] == "o"


# -- the cached branch and its views --------------------------------------------------


def test_branch_view_behaves_like_an_immutable_list() -> None:
    tree = new_tree(None)
    texts = ["一", "二", "三", "四"]
    for i, text in enumerate(texts):
        tree.append_message("user" if i % 2 == 0 else "assistant", text)
    view = tree.branch()
    assert isinstance(view, BranchView) and len(view) == 4
    assert [e.text for e in view] == texts and [e.text for e in reversed(view)] == texts[::-1]
    assert view[0].text == "一" and view[-1].text == "四" and view[-4].text == "一"
    for bad in (4, -5):
        with pytest.raises(IndexError):
            view[bad]
    assert [e.text for e in view[1:3]] == ["二", "三"] and isinstance(view[1:3], list)
    assert [e.text for e in view[::-2]] == ["四", "二"] and view[3:1] == [] and view[-2:] == list(view)[-2:]
    assert view == list(view) and view == tuple(view) and list(view) == view and view == tree.branch()
    assert view != list(view)[:3] and view != "一二三四"
    assert view.index(view[2]) == 2 and view.count(view[0]) == 1
    with pytest.raises(TypeError):
        hash(view)
    assert repr(view).startswith("BranchView([Entry(")


def test_a_view_is_a_snapshot_whatever_the_tree_does_next() -> None:
    tree = new_tree(None)
    u1 = tree.append_message("user", "问")
    tree.append_message("assistant", "答一")
    before = tree.branch()
    frozen = list(before)
    tree.append_message("user", "再问")  # extends the cached list the view reads
    tree.navigate(u1.id)  # reroll: a new list, the old one is left alone
    tree.append_message("assistant", "答二")
    assert before == frozen and [e.text for e in reversed(before)] == ["答一", "问"]
    assert [e.text for e in tree.branch()] == ["问", "答二"]


def test_cached_branch_survives_reload_and_cycles(tmp_path: Path) -> None:
    path = write_cycle(tmp_path)
    tree = SessionTree(path, ids=counter_ids("n"))
    tree.append_message("assistant", "4")  # appended before the cache was ever built
    assert [e.id for e in tree.branch()] == ["x", "y", "z", "n0001"]
    tree.append_message("user", "5")  # now extending the cache
    assert tree.branch() == branch_to({e.id: e for e in tree}, tree.leaf_id)


ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.sampled_from(["user", "assistant", "state"])),
        st.tuples(st.just("navigate"), st.integers(min_value=-1, max_value=40)),
        st.tuples(st.just("look"), st.none()),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ACTIONS)
def test_cached_branch_always_equals_a_fresh_walk(actions: list[tuple[str, object]]) -> None:
    tree = new_tree(None)
    snapshots: list[tuple[BranchView, list[Entry]]] = []
    for kind, arg in actions:
        if kind == "append":
            if arg == "state":
                tree.append_custom("rp-state", {"time": "夜"})
            else:
                tree.append_message(str(arg), "话")
        elif kind == "navigate" and isinstance(arg, int):
            ids = [e.id for e in tree]
            tree.navigate(None if arg < 0 or not ids else ids[arg % len(ids)])
        else:
            view = tree.branch()
            snapshots.append((view, list(view)))
        assert tree.branch() == branch_to({e.id: e for e in tree}, tree.leaf_id)
    for view, frozen in snapshots:
        assert view == frozen and list(reversed(view)) == frozen[::-1]


# -- short and failed writes ---------------------------------------------------------


def test_short_writes_are_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write

    def dribble(fd: int, data: bytes) -> int:
        return real_write(fd, data[:7])  # legal for os.write: fewer bytes than offered

    path = tmp_path / "chat.jsonl"
    tree = new_tree(path)
    monkeypatch.setattr(os, "write", dribble)
    tree.append_message("user", "一句相当长的开场白，好让它分好几次才写完。")
    tree.append_message("assistant", "二")
    monkeypatch.undo()
    again = SessionTree(path)
    assert again.entries() == tree.entries() and again.problems == []


def test_a_write_failing_midway_costs_no_later_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = {"n": 0}

    def half_then_full_disk(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    path = tmp_path / "chat.jsonl"
    tree = new_tree(path)
    tree.append_message("user", "一")
    monkeypatch.setattr(os, "write", half_then_full_disk)
    with pytest.raises(TreeError, match="无法追加"):
        tree.append_message("assistant", "写到一半磁盘满了")
    monkeypatch.undo()
    assert not path.read_bytes().endswith(b"\n")  # the fragment is really there
    after = tree.append_message("assistant", "磁盘腾出来以后重写的回复")
    again = SessionTree(path)
    assert [e.id for e in again] == ["e0001", after.id]
    assert again.get(after.id) == after
    assert len(again.problems) == 1 and "不是合法 JSON" in again.problems[0]


def test_loading_a_torn_file_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    tree = new_tree(path)
    tree.append_message("user", "一")
    with path.open("ab") as f:
        f.write(b'{"id":"e0002","par')
    before = path.read_bytes()
    path.chmod(0o444)
    try:
        reloaded = SessionTree(path)  # a read-only copy can still be read
    finally:
        path.chmod(0o644)
    assert path.read_bytes() == before and [e.id for e in reloaded] == ["e0001"]


def test_tool_calls_thinking_and_args_json_read_the_conventions() -> None:
    reply = message("a", None, "assistant", "好", thinking="先想", toolCalls=[
        {"name": "read", "args": {"path": "角色.md", "n": 2}},
        {"name": "ls", "args": "not an object"},
        {"args": {"path": "x"}},  # no name: skipped
        "not a call",
        {"name": 7},
    ])
    assert tool_calls(reply) == [("read", {"path": "角色.md", "n": 2}), ("ls", {})]
    assert thinking(reply) == "先想"
    assert tool_calls(message("u", None, "user", "x", toolCalls="bad")) == []
    assert thinking(message("a", None, "assistant", "x", thinking=["no"])) == ""
    assert args_json({"path": "角色.md", "n": 2}) == '{"path":"角色.md","n":2}'  # compact, raw non-ASCII
    assert args_json("角色.md") == '"角色.md"' and args_json([1, 2]) == "[1,2]"


def test_read_entries_is_the_pure_loader_both_readers_share(tmp_path: Path) -> None:
    rows = [json.dumps({"type": "session", "version": 1, "id": "s9"}),
            json.dumps({"id": "a", "parentId": None, "type": "message", "role": "user", "text": "好"}),
            "坏行",
            json.dumps({"id": "a", "parentId": None, "type": "message", "text": "重复"}),
            json.dumps({"type": "message"}),
            '{"id": "b", "parentId": "a", "ty']  # a write cut off mid-line
    raw = "\n".join(rows).encode()
    content = read_entries(raw, "chat.jsonl")
    assert list(content.entries) == ["a"] and content.entries["a"].text == "好"  # the first of a duplicate id
    assert content.session_id == "s9" and content.torn_tail
    assert content.problems == ["chat.jsonl:3: 不是合法 JSON，已跳过", "chat.jsonl:4: id 'a' 重复，已跳过",
                                "chat.jsonl:5: 缺少 id/type 或字段类型不对，已跳过",
                                "chat.jsonl:6: 末行不完整（写入中断），已跳过"]
    assert read_entries(raw + b"\n").torn_tail is False and read_entries(b"")[:5] == ({}, [], False, None, {})
    path = tmp_path / "chat.jsonl"
    path.write_bytes(raw)
    tree = SessionTree(path)
    assert tree.entries() == list(content.entries.values()) and tree.problems == content.problems
    assert tree.session_id == "s9" and path.read_bytes() == raw  # loading alone never writes
