"""A damaged line in the middle of a session file (issue 14, parts 0 and 6).

Before: one damaged line detached every earlier entry from the branch (the summary fell
out of context) with only a skipped-line note; a 1,000-deep or 5,000-digit line crashed
the loader; a lone-surrogate id crashed the next append; a version-99 file got v1 lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from liyuan.clock import counter_ids, fixed_clock
from liyuan.errors import TreeError
from liyuan.session.entries import DAMAGED_ENTRY_TYPE
from liyuan.session.loader import read_entries
from liyuan.session.tree import SessionTree
from liyuan.story.history import active_summary
from liyuan.story.view import story_view


def _session(path: Path) -> list[str]:
    """12 messages, a summary covering them, 18 more messages: 32 lines with the header."""
    tree = SessionTree(path, session_id="s", clock=fixed_clock(), ids=counter_ids("e"))
    for i in range(6):
        tree.append_message("user", f"第{i}拍，我推门进去。")
        tree.append_message("assistant", f"第{i}拍，小满抬头看你。")
    tree.append_custom("rp-summary", {"summary": "前情：阿明进城。", "coversThroughId": tree.leaf_id,
                                      "turns": 6, "chars": 100})
    for i in range(6, 15):
        tree.append_message("user", f"第{i}拍，继续。")
        tree.append_message("assistant", f"第{i}拍，好。")
    return [e.id for e in tree.branch()]


def _damage(path: Path, number: int, old: bytes, new: bytes) -> None:
    lines = path.read_bytes().split(b"\n")
    assert old in lines[number - 1]
    lines[number - 1] = lines[number - 1].replace(old, new, 1)
    path.write_bytes(b"\n".join(lines))


def test_a_damaged_line_whose_link_is_still_readable_is_relinked(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    full = _session(path)
    _damage(path, 20, "好".encode(), b"\xff\xfe")  # bad UTF-8 in the text; id and parentId intact
    raw = path.read_bytes()
    tree = SessionTree(path)
    branch = tree.branch()
    assert [e.id for e in branch] == full  # nothing detached
    lost = branch[19 - 1]
    assert lost.type == DAMAGED_ENTRY_TYPE  # the line's content is gone; its place is kept
    assert [p.kind for p in tree.problems] == ["bad-line", "link-recovered"]
    assert tree.branch_breaks() == []  # a recovered link is not a cut
    assert active_summary(story_view(branch)) is not None
    assert path.read_bytes() == raw  # loading never rewrites the file


def test_a_damaged_link_is_bridged_loudly_and_the_summary_stays(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    full = _session(path)
    _damage(path, 20, b'"parentId":"', b'"parentId"!"')  # neither JSON nor a readable link
    lines = path.read_bytes().split(b"\n")
    lines[19] = lines[19].replace(b'"id":"', b'"xd":"', 1)  # and the id is unreadable too
    path.write_bytes(b"\n".join(lines))
    tree = SessionTree(path)
    branch = tree.branch()
    assert next(e.id for e in branch) == full[0] and len(branch) == len(full)
    breaks = tree.branch_breaks()
    assert len(breaks) == 1 and breaks[0].kind == "branch-cut" and breaks[0].line == 20
    assert "按文件顺序" in breaks[0]
    assert active_summary(story_view(branch)) is not None  # the summary never drops out of context


def test_read_entries_reports_the_kinds(tmp_path: Path) -> None:
    rows = [json.dumps({"type": "session", "version": 1, "id": "s"}),
            json.dumps({"id": "a", "parentId": None, "type": "message", "role": "user", "text": "1"}),
            '{"id": "b", "parentId": "a", "type": "message", "role": "assistant", "text": "2',  # cut short
            json.dumps({"id": "c", "parentId": "b", "type": "message", "role": "user", "text": "3"})]
    content = read_entries("\n".join(rows).encode() + b"\n", "x.jsonl")
    assert [(p.kind, p.line, p.entry_id) for p in content.problems] == [
        ("bad-line", 3, None), ("link-recovered", 3, "b")]
    assert content.entries["b"].parent_id == "a" and content.entries["b"].type == DAMAGED_ENTRY_TYPE


# Deeper than any supported Python's parser goes (3.11 refuses 1,000 levels, 3.12 about
# 3,000, 3.13 about 10,000): the line is unreadable on every version.
DEEP = '{"id":"d","parentId":"a","type":"message","x":' + "[" * 100_000 + "]" * 100_000 + "}"
HUGE = '{"id":"d","parentId":"a","type":"message","x":' + "9" * 5000 + "}"


@pytest.mark.parametrize("line", [DEEP, HUGE], ids=["100000-deep", "5000-digits"])
def test_hostile_lines_are_skipped_not_crashes(tmp_path: Path, line: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"type":"session","version":1,"id":"s"}\n'
                    '{"id":"a","parentId":null,"type":"message","role":"user","text":"1"}\n'
                    + line + "\n"
                    '{"id":"e","parentId":"d","type":"message","role":"user","text":"2"}\n', encoding="utf-8")
    tree = SessionTree(path)
    assert [e.id for e in tree.branch()] == ["a", "d", "e"]  # the link survives in the line's head
    assert tree.problems[0].kind == "bad-line"


def test_a_lone_surrogate_id_is_refused_and_the_next_append_works(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"type":"session","version":1,"id":"s"}\n'
                    '{"id":"a","parentId":null,"type":"message","role":"user","text":"1"}\n'
                    '{"id":"\\ud800","parentId":"a","type":"message","role":"user","text":"2"}\n', encoding="utf-8")
    tree = SessionTree(path, ids=counter_ids("n"))
    assert "\ud800" not in tree and tree.leaf_id == "a"
    assert [p.kind for p in tree.problems] == ["not-entry"]
    tree.append_message("user", "3")  # used to raise UnicodeEncodeError
    assert [e.id for e in SessionTree(path).branch()] == ["a", "n0001"]
    with pytest.raises(TreeError, match="无法编码"):
        tree.append_message("user", "孤立代理 \ud83c")
    assert [e.id for e in SessionTree(path).branch()] == ["a", "n0001"]  # nothing half-written


def test_a_newer_version_is_read_but_never_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    raw = (b'{"type":"session","version":99,"id":"s"}\n'
           b'{"id":"a","parentId":null,"type":"message","role":"user","text":"1"}\n')
    path.write_bytes(raw)
    tree = SessionTree(path)
    assert [e.id for e in tree.branch()] == ["a"]
    assert [p.kind for p in tree.problems] == ["newer-version"]
    with pytest.raises(TreeError, match="版本 99"):
        tree.append_message("user", "2")
    assert path.read_bytes() == raw


# -- issue 26, item 5: a flipped "parentId" key ----------------------------------------
# Before: a byte flip inside the key (e.g. "parentID") left valid JSON; the entry was read
# as a new root and every earlier entry, the summary with it, left the branch unnoticed.


def test_a_flipped_parent_key_is_read_back_from_the_damaged_key(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    full = _session(path)
    _damage(path, 20, b'"parentId"', b'"parentID"')
    tree = SessionTree(path)
    branch = tree.branch()
    assert [e.id for e in branch] == full  # nothing detached
    assert [p.kind for p in tree.problems] == ["link-recovered"]
    assert "parentID" in tree.problems[0] and tree.problems[0].line == 20
    assert "parentID" not in branch[18].body  # the damaged key is read as the link, not kept as data
    assert active_summary(story_view(branch)) is not None


def test_a_missing_parent_key_is_a_loud_cut_that_keeps_the_summary(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    full = _session(path)
    lines = path.read_bytes().split(b"\n")
    record = json.loads(lines[19])
    del record["parentId"]
    lines[19] = json.dumps(record, ensure_ascii=False).encode("utf-8")
    path.write_bytes(b"\n".join(lines))
    tree = SessionTree(path)
    branch = tree.branch()
    assert [e.id for e in branch] == full  # hung under the entry before it in the file
    assert [p.kind for p in tree.problems] == ["branch-cut"]
    assert [p.entry_id for p in tree.branch_breaks()] == [full[18]]
    assert active_summary(story_view(branch)) is not None
    assert branch[18].text == record["text"]  # the entry's own content is intact


def test_every_bit_flip_in_the_parent_key_keeps_the_branch_and_is_noted(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    full = _session(path)
    good = path.read_bytes()
    lines = good.split(b"\n")
    start = lines[19].index(b'"parentId"')
    silent: list[str] = []
    for offset in range(start, start + len(b'"parentId"')):
        for bit in range(8):
            line = bytearray(lines[19])
            line[offset] ^= 1 << bit
            path.write_bytes(b"\n".join([*lines[:19], bytes(line), *lines[20:]]))
            tree = SessionTree(path)
            branch = tree.branch()
            assert [e.id for e in branch] == full, bytes(line[:60])
            assert active_summary(story_view(branch)) is not None
            if not tree.problems:
                silent.append(bytes(line[:40]).decode("utf-8", "replace"))
    assert silent == []  # every damage is noted


def test_the_first_entry_without_a_parent_key_is_still_the_root(tmp_path: Path) -> None:
    raw = (b'{"type":"session","version":1,"id":"s"}\n'
           b'{"id":"a","type":"message","role":"user","text":"x"}\n'
           b'{"id":"b","parentId":"a","type":"message","role":"assistant","text":"y"}\n')
    content = read_entries(raw, "s.jsonl")
    assert [(e.id, e.parent_id) for e in content.entries.values()] == [("a", None), ("b", "a")]
    assert [p.kind for p in content.problems] == []  # nothing before it: nothing is cut
