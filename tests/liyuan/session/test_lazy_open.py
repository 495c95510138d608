"""Opening a session file keeps a small record per entry and parses a body when it is read
(issue 24): what it keeps, skips and reports must be what an eager parse of every line
gives, on damaged files too, and the recorded offsets must stay right after appends."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from liyuan.errors import TreeError
from liyuan.session import damage
from liyuan.session.branch import BranchIndex, branch_to
from liyuan.session.entries import SESSION_VERSION, Entry, parse_entry
from liyuan.session.loader import LazyBody, SessionContent, _place_bridges, _relink, read_entries, read_session_file
from liyuan.session.tree import SessionTree
from liyuan.story.history import story_tail


def eager_entries(raw: bytes, name: str = "") -> SessionContent:
    """The loader as it was before issue 24: the whole file split, every line parsed by json."""
    entries: dict[str, Entry] = {}
    problems: list[str] = []
    session_id: str | None = None
    line_of: dict[str, int] = {}
    skipped: list[damage.Skipped] = []
    unlinked: list[tuple[str, int, tuple[str, str | None] | None]] = []
    lines = raw.split(b"\n")
    torn_tail = bool(lines) and lines[-1] != b""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        try:
            obj = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError):
            kind = "torn-tail" if number == len(lines) and torn_tail else "bad-line"
            text = "末行不完整（写入中断），已跳过" if kind == "torn-tail" else "不是合法 JSON，已跳过"
            problems.append(damage.SessionProblem(f"{where}: {text}", kind, number))
            skipped.append(damage.salvage_link(line, number))
            continue
        if isinstance(obj, dict) and obj.get("type") == "session":
            version = obj.get("version", SESSION_VERSION)
            if version != SESSION_VERSION:
                problems.append(damage.SessionProblem(
                    f"{where}: 会话文件的版本 {version!r} 不是这个 liyuan 认识的版本 {SESSION_VERSION}："
                    "只读取能读懂的条目，不会再往里追加", "newer-version", number))
            sid = obj.get("id")
            session_id = (sid if isinstance(sid, str) and damage.encodable(sid) else None) or session_id
            continue
        entry = parse_entry(obj)
        if entry is not None and "parentId" not in obj:
            unlinked.append((entry.id, number, damage.near_miss_link(obj, "parentId")))
        if entry is None:
            problems.append(damage.SessionProblem(f"{where}: 缺少 id/type 或字段类型不对，已跳过", "not-entry", number))
            skipped.append(damage.salvage_link(line, number))
        elif entry.id in entries:
            problems.append(damage.SessionProblem(f"{where}: id {entry.id!r} 重复，已跳过", "duplicate-id", number))
        else:
            entries[entry.id] = entry
            line_of[entry.id] = number
    if unlinked:
        _relink(entries, line_of, unlinked, name, problems)
    _place_bridges(entries, line_of, skipped, name, problems)
    return SessionContent(entries, problems, torn_tail, session_id)


def chat_lines(rng: random.Random, turns: int, *, rerolls: bool = True) -> list[str]:
    """A chat as written: turns, ledgers, summaries, and (unless ``rerolls=False``) rerolls
    that fork branches."""
    lines = [json.dumps({"type": "session", "version": 1, "id": "s"})]
    made: list[str] = []
    parent: str | None = None

    def put(**fields: Any) -> str:
        nonlocal parent
        entry_id = f"e{len(made)}"
        lines.append(json.dumps({"id": entry_id, "parentId": parent, "timestamp": "t", **fields}, ensure_ascii=False))
        made.append(entry_id)
        parent = entry_id
        return entry_id

    for turn in range(turns):
        user = put(type="message", role="user", text=f"第{turn}轮", **({"mode": "authoring"} if turn % 7 == 3 else {}))
        put(type="message", role="assistant", text=f"回复{turn}「引号」\\n", usage={"total_tokens": turn})
        if rerolls and rng.random() < 0.3:
            parent = user  # a reroll: the next reply forks from the user turn
            put(type="message", role="assistant", text=f"重写{turn}")
        put(type="custom", customType="rp-state", data={"time": f"第{turn}日", "items": ["伞"]})
        if turn % 5 == 4:
            put(type="custom", customType="rp-summary", data={"summary": f"摘要{turn}", "coversThroughId": made[-3]})
    return lines


HOSTILE = [
    "", "   ", "坏行", "[1, 2]", '"字符串"', '{"type": "message"}', '{"id": 5, "type": "message"}',
    '{"id": "\\ud800", "parentId": null, "type": "message"}', '{"id": "x1", "parentId": "\\udc80", "type": "m"}',
    '{"id": "x2", "parentId": null, "type": "message", "n": NaN}',
    '{"id": "x3", "parentId": null, "type": "t", "n": 1e400}',
    '{"id": "x4", "parentId": null, "type": "t", "n": ' + "9" * 5000 + "}",
    '{"id": "x5", "parentId": null, "type": "t", "d": ' + "[" * 2000 + "]" * 2000 + "}",
    '{"id": "x6", "parentId": null, "type": "t", "d": ' + "[" * 700 + "]" * 700 + "}",
    '{"id": "x11", "parentId": null, "type": "t", "d": ' + "[" * 1010 + "]" * 1010 + "}",  # orjson's limit is 1024
    '\ufeff{"id": "x7", "parentId": null, "type": "t"}', '{"id": "x8", "parentId": null, "type": "t", "role": ["u"]}',
    '{"id": "x9", "parentId": null, "type": "t", "role": 7, "mode": null, "customType": {"a": 1}}',
    '{"type": "session", "version": 2, "id": "s2"}', '{"type": "session", "version": 12345678901234567890123, "id": 3}',
    '{"id": "x10", "parentId": null, "type": "t", "big": 123456789012345678901234567890}',
]


def damaged(rng: random.Random, lines: list[str]) -> bytes:
    """``lines`` with flipped bytes, cut lines, lost keys, duplicates and hostile lines."""
    out: list[bytes] = []
    for line in lines:
        data = line.encode("utf-8")
        roll = rng.random()
        if roll < 0.04:
            at = rng.randrange(len(data))
            data = data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:]
        elif roll < 0.06:
            data = data[:rng.randrange(len(data))]
        elif roll < 0.08:
            data = data.replace(b'"parentId"', b'"parentID"' if rng.random() < 0.5 else b'"pa"', 1)
        elif roll < 0.09:
            out.append(data)  # a duplicate id
        elif roll < 0.12:
            out.append(rng.choice(HOSTILE).encode("utf-8"))
        out.append(data)
    raw = b"\n".join(out) + b"\n"
    return raw if rng.random() < 0.5 else raw + rng.choice([b'{"id": "tail", "par', b"  ", b"\r"])


def assert_same(lazy: SessionContent, eager: SessionContent) -> None:
    assert list(lazy.entries) == list(eager.entries)
    for entry_id, entry in lazy.entries.items():
        want = eager.entries[entry_id]
        # The fields a scan reads without parsing, first, while the body is still unparsed.
        assert (entry.type, entry.role, entry.custom_type, entry.body.get("mode"), entry.body.get("mode", 0)) == (
            want.type, want.role, want.custom_type, want.body.get("mode"), want.body.get("mode", 0))
        assert entry.parent_id == want.parent_id and entry == want and dict(entry.body) == dict(want.body)
    assert lazy.problems == eager.problems
    assert [(p.kind, p.line, p.entry_id) for p in lazy.problems] == [  # type: ignore[attr-defined]
        (p.kind, p.line, p.entry_id) for p in eager.problems]  # type: ignore[attr-defined]
    assert (lazy.torn_tail, lazy.session_id) == (eager.torn_tail, eager.session_id)
    if lazy.line_marks is not None:  # the shortcut the tree takes: the file is one branch, as walked
        last = next(reversed(lazy.entries), None)
        assert branch_to(lazy.entries, last) == list(lazy.entries.values())
        assert lazy.line_marks == BranchIndex(list(lazy.entries.values()), {}).marks


@pytest.mark.parametrize("seed", range(40))
def test_lazy_open_equals_an_eager_parse_of_every_line(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    raw = damaged(rng, chat_lines(rng, 30))
    eager = eager_entries(raw, "s.jsonl")
    assert_same(read_entries(raw, "s.jsonl"), eager)
    path = tmp_path / "s.jsonl"
    path.write_bytes(raw)
    assert_same(read_session_file(path), eager)


@pytest.mark.parametrize("seed", range(10))
def test_a_chat_never_rerolled_takes_the_one_branch_shortcut_and_reads_the_same(seed: int) -> None:
    rng = random.Random(seed)
    lines = chat_lines(rng, 20, rerolls=False)
    for _ in range(3):  # damage that keeps the entries one line: blank lines, a torn last write
        lines.insert(rng.randrange(1, len(lines)), " ")
    raw = ("\n".join(lines) + "\n" + '{"id": "cut", "par').encode("utf-8")
    eager = eager_entries(raw, "s.jsonl")
    lazy = read_entries(raw, "s.jsonl")
    assert lazy.line_marks is not None and set(lazy.line_marks) == {"rp-state", "rp-summary"}
    assert_same(lazy, eager)


def test_every_hostile_line_is_judged_as_before(tmp_path: Path) -> None:
    raw = "\n".join([json.dumps({"id": "a", "parentId": None, "type": "message", "role": "user", "text": "好"}),
                     *HOSTILE, '{"id": "cut", "par']).encode("utf-8")
    eager = eager_entries(raw, "h.jsonl")
    assert {p.kind for p in eager.problems} >= {"bad-line", "not-entry", "newer-version", "torn-tail"}  # type: ignore[attr-defined]
    assert "x6" in eager.entries and "x10" in eager.entries  # depth 700 and a big number kept
    # How deep json itself parses is the interpreter's (3.11 refuses 1010 levels, 3.12 parses
    # 1010 and refuses 2000, 3.13 parses both); whatever it decides for x5 and x11, the lazy
    # loader decides the same (below), and on 3.11 both are refused.
    if sys.version_info < (3, 12):
        assert "x5" not in eager.entries and "x11" not in eager.entries
    assert_same(read_entries(raw, "h.jsonl"), eager)


def parsed(tree: SessionTree) -> set[str]:
    return {e.id for e in tree if isinstance(e.body, LazyBody) and e.body._parsed is not None}


def test_offsets_stay_right_after_appends_and_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = chat_lines(random.Random(7), 12)
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8") + b'{"id": "cut", "pa')
    tree = SessionTree(path)
    assert parsed(tree) == set()  # opening parses no body
    old = list(tree)
    for turn in range(5):
        tree.append_message("user", f"新的第{turn}轮")
        tree.append_custom("rp-state", {"time": "夜"})
    eager = eager_entries(path.read_bytes())
    assert [e.to_json() for e in tree] == [e.to_json() for e in eager.entries.values()]  # old bodies read after appends
    assert old == list(eager.entries.values())[:len(old)]
    assert list(SessionTree(path)) == list(tree)


def test_a_last_entry_without_its_newline_reads_its_own_line_after_appends(tmp_path: Path) -> None:
    # A body is read from its offset to the next newline: the entry written last before a
    # crash has none until the next append puts it there (issue 36 dropped kept lengths).
    path = tmp_path / "s.jsonl"
    raw = "\n".join(chat_lines(random.Random(11), 4)).encode("utf-8")
    path.write_bytes(raw)
    from_bytes = read_entries(raw).entries.values()
    assert [e.to_json() for e in from_bytes] == [e.to_json() for e in eager_entries(raw).entries.values()]
    tree = SessionTree(path)
    assert parsed(tree) == set()
    tree.append_message("user", "接着写")
    eager = eager_entries(path.read_bytes())
    assert [e.to_json() for e in tree] == [e.to_json() for e in eager.entries.values()]


def test_a_rewritten_file_is_refused_not_misread(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(chat_lines(random.Random(3), 3)) + "\n", encoding="utf-8")
    tree = SessionTree(path)
    first = next(iter(tree))
    path.write_text(path.read_text(encoding="utf-8").replace('"e0"', '"z0"'), encoding="utf-8")
    with pytest.raises(TreeError, match="被改写"):
        _ = first.text


def test_the_turn_path_parses_only_the_live_tail(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(chat_lines(random.Random(5), 200)) + "\n", encoding="utf-8")
    tree = SessionTree(path)
    branch = tree.branch()
    view, active = story_tail(branch)
    assert active is not None and len(branch) > 600
    assert {e.text for e in view[active.cut:]}  # the live part is read
    assert 0 < len(parsed(tree)) <= 30  # and nothing before it, but the summary


def test_the_recap_of_an_open_chat_reuses_its_tree_and_parses_only_the_tail(tmp_path: Path) -> None:
    from liyuan.card.inputs import collect_chat_evidence
    from liyuan.card.layout import CardLayout
    from liyuan.card.sessions import FileSessions

    sessions = FileSessions(CardLayout(tmp_path))
    path = sessions.path("chat", "001.jsonl")
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(chat_lines(random.Random(9), 200)) + "\n", encoding="utf-8")
    tree = SessionTree(path)
    asked: list[tuple[str, str]] = []

    def loaded(chat_id: str, name: str) -> Any:
        asked.append((chat_id, name))
        return tree.written_branch() if (chat_id, name) == ("chat", "001.jsonl") else None

    evidence = collect_chat_evidence(sessions, "chat", user_name="我", char_name="她", loaded=loaded)
    assert asked == [("chat", "001.jsonl")]  # the open tree's branch, not a second read of the file
    assert 0 < len(parsed(tree)) <= 30  # the whole branch was scanned, only the live tail parsed
    assert evidence is not None and evidence.turns == 171  # the 29 authoring turns are no story
    assert evidence.transcript.startswith("【前情提要】")
    assert evidence == collect_chat_evidence(sessions, "chat", user_name="我", char_name="她")  # as read from the file


def test_a_line_orjson_keeps_is_one_json_keeps_under_every_flipped_bit() -> None:
    rng = random.Random(24)
    fields = {"role": "assistant", "text": "雨还没停\\n「好」", "usage": {"total_tokens": 12, "x": [1.5, -2e3, True]}}
    line = json.dumps({"id": "a1", "parentId": None, "type": "message", **fields}, ensure_ascii=False).encode("utf-8")
    for _ in range(1500):
        at = rng.randrange(len(line))
        raw = line[:at] + bytes([line[at] ^ (1 << rng.randrange(8))]) + line[at + 1:] + b"\n"
        assert_same(read_entries(raw, "f.jsonl"), eager_entries(raw, "f.jsonl"))


def _line(entry_id: str, parent: str | None, **body: Any) -> str:
    return json.dumps({"id": entry_id, "parentId": parent, **body}, ensure_ascii=False)


@pytest.mark.parametrize(("rows", "one_branch"), [
    ([_line("a", None, type="message", role="user", text="一"),
      _line("b", "a", type="custom", customType="rp-state"),
      _line("c", "b", type="message", role="assistant", text="二"),
      _line("d", "c", type="custom", customType="rp-state")], True),
    ([_line("a", None, type="message"), _line("b", "a", type="message"),
      _line("c", "a", type="message")], False),  # a reroll
    ([_line("a", None, type="message"), _line("b", None, type="message")], False),  # a second root
    ([_line("a", None, type="message"), '{"id": "b", "type": "message"}'], False),  # parentId lost: relinked
    ([_line("a", None, type="message"), _line("b", "x", type="message")], False),  # a dangling parent
])
def test_a_file_that_is_one_branch_is_indexed_from_the_read(tmp_path: Path, rows: list[str], one_branch: bool) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    content = read_session_file(path)
    assert (content.line_marks is not None) == one_branch
    tree = SessionTree(path)
    walked = branch_to(tree._entries, tree.leaf_id)
    assert list(tree.branch()) == walked
    assert tree.branch().latest_custom("rp-state") == next(
        (e for e in reversed(walked) if e.custom_type == "rp-state"), None)
    tree.navigate(walked[0].id)
    tree.append_message("user", "再来")
    assert [e.id for e in tree.branch()][:1] == [walked[0].id] and len(tree.branch()) == 2


def test_a_one_branch_open_keeps_no_table_of_its_ids_yet_places_every_entry(tmp_path: Path) -> None:
    # Issue 36: the id-to-index table of a 100,000-turn chat was 19 MB of its open. An entry
    # read from a one-branch file is placed by its line's offset instead.
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(chat_lines(random.Random(5), 40, rerolls=False)) + "\n", encoding="utf-8")
    tree = SessionTree(path)
    assert tree._positions._added == {}
    read = [entry.id for entry in tree]
    ids = tree.branch().ids()
    assert ids.places([*read, "nope"]) == [*range(len(read)), -1]  # type: ignore[attr-defined]
    assert all(entry_id in ids for entry_id in read) and "nope" not in ids
    added = tree.append_message("user", "再说一句")
    assert tree.branch().ids().places([added.id, read[-1]]) == [len(read), len(read) - 1]  # type: ignore[attr-defined]
    tree.navigate(read[10])  # off the end: a new branch list, placed as a walk places it
    forked = tree.append_message("user", "换个说法")
    walked = branch_to(tree._entries, tree.leaf_id)
    assert [entry.id for entry in tree.branch()] == [entry.id for entry in walked]
    assert tree.branch().ids().places([e.id for e in walked]) == list(range(len(walked)))  # type: ignore[attr-defined]
    assert forked.id in tree.branch().ids() and added.id not in tree.branch().ids()
