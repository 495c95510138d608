"""Evidence and recap diff (acceptance 12.2 cases 1-5 and 14)."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from pathlib import Path

import pytest

from liyuan.card import inputs as card_inputs
from liyuan.card.files import MemoryFiles, sha1_text, write_memory_file
from liyuan.card.inputs import SESSION_SEPARATOR, branch_of, collect_chat_evidence, diff_recaps
from liyuan.card.layout import CardLayout
from liyuan.card.manifest import Manifest, ManualState, RecapRecord
from liyuan.card.sessions import FileSessions
from liyuan.clock import counter_ids, fixed_clock
from liyuan.session.entries import Entry
from liyuan.session.log import FileSessionLog
from liyuan.session.state import EMPTY_STATE_TEXT, Character, Ledger
from liyuan.session.tree import SessionTree
from liyuan.story.view import story_view
from liyuan.text import utf16_len

from .test_fixtures import CHAR, USER, write_chat


def _lines(path: Path, objs: list[object | str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "\n".join(o if isinstance(o, str) else json.dumps(o, ensure_ascii=False) for o in objs) + "\n",
        encoding="utf-8",
    )


def _branch(path: Path) -> list[Entry]:
    content = FileSessionLog(path).read()
    assert content is not None
    return branch_of(content)


def test_branch_skips_header_and_broken_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _lines(path, [
        {"type": "session", "version": 1, "id": "s"},
        {"id": "u1", "parentId": None, "type": "message", "role": "user", "text": "你好"},
        '{"id": "broken", "parentId": ',
        {"parentId": "u1", "type": "message", "role": "assistant", "text": "没有 id"},
        {"id": "a1", "parentId": "u1", "type": "message", "role": "assistant", "text": "嗯"},
    ])
    branch = _branch(path)
    assert [(e.id, e.role) for e in branch] == [("u1", "user"), ("a1", "assistant")]


def test_branch_follows_the_last_entry_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _lines(path, [
        {"id": "e1", "parentId": None, "type": "message", "role": "user", "text": "来一段"},
        {"id": "e2", "parentId": "e1", "type": "message", "role": "assistant", "text": "初版"},
        {"id": "e3", "parentId": "e1", "type": "message", "role": "assistant", "text": "重roll版"},
    ])
    branch = _branch(path)
    assert [e.id for e in branch] == ["e1", "e3"]
    assert branch[-1].text == "重roll版"


def test_reading_a_torn_session_does_not_touch_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"id":"u1","parentId":null,"type":"message","role":"user","text":"x"}\n{"id":"u2"')
    before = path.read_bytes()
    assert [e.id for e in _branch(path)] == ["u1"]
    assert path.read_bytes() == before  # the fingerprint must not move by reading
    gone = tmp_path / "gone.jsonl"
    assert FileSessionLog(gone).read() is None and not gone.exists()  # a vanished file is not created again


def test_evidence_uses_the_summary_and_the_uncovered_text(tmp_path: Path) -> None:
    chat = tmp_path / "对话" / "A"
    tree = SessionTree(chat / "会话" / "s1.jsonl", clock=fixed_clock(), ids=counter_ids())
    tree.append_message("user", "第一章的旧事")
    covered = tree.append_message("assistant", "城门口有人偷袭。")
    tree.append_custom("rp-summary", {"summary": "第一章：城门遇袭。", "coversThroughId": covered.id})
    tree.append_message("user", "后来的话")
    tree.append_message("assistant", "小满点头。")
    tree.append_custom("rp-state", Ledger(time="第二天清晨", characters=(Character("小满", 60),)).to_dict())
    evidence = collect_chat_evidence(FileSessions(CardLayout(tmp_path)), "A", user_name=USER, char_name=CHAR)
    assert evidence is not None
    assert evidence.turns == 2
    assert "【前情提要】\n第一章：城门遇袭。" in evidence.transcript
    assert "第一章的旧事" not in evidence.transcript
    assert "阿明：后来的话" in evidence.transcript
    assert "小满：小满点头。" in evidence.transcript
    assert evidence.omitted_chars == 0
    assert evidence.state_snapshot != EMPTY_STATE_TEXT and "第二天清晨" in evidence.state_snapshot


def test_evidence_cuts_the_earliest_text_first(tmp_path: Path) -> None:
    long = "段落内容。" * 700
    write_chat(tmp_path, "A", [("user", long), ("assistant", long)], session="s1.jsonl")
    write_chat(tmp_path, "A", [("user", "第二个窗口的话"), ("assistant", "好。")], session="s2.jsonl")
    evidence = collect_chat_evidence(FileSessions(CardLayout(tmp_path)), "A", user_name=USER, char_name=CHAR,
                                     max_chars=3000)
    assert evidence is not None
    assert evidence.omitted_chars > 0
    assert "阿明：第二个窗口的话" in evidence.transcript
    assert "另一个会话窗口" in evidence.transcript
    assert evidence.turns == 2
    assert len(evidence.transcript) <= 3000
    full_len = 2 * (len(long) + 3) + 2 + len(SESSION_SEPARATOR) + len("阿明：第二个窗口的话") + 2 + len("小满：好。")
    assert evidence.omitted_chars + len(evidence.transcript) == full_len


def test_evidence_cut_starts_after_a_paragraph_break(tmp_path: Path) -> None:
    turns = [("user" if i % 2 == 0 else "assistant", f"第{i}段" + "字" * 95) for i in range(40)]
    write_chat(tmp_path, "A", turns)
    evidence = collect_chat_evidence(FileSessions(CardLayout(tmp_path)), "A", user_name=USER, char_name=CHAR,
                                     max_chars=1000)
    assert evidence is not None and evidence.omitted_chars > 0
    assert evidence.transcript.startswith(("阿明：第", "小满：第"))  # a whole block, not a fragment
    assert evidence.transcript.endswith("第39段" + "字" * 95)


def test_evidence_cut_never_splits_an_emoji_and_keeps_the_budget(tmp_path: Path) -> None:
    write_chat(tmp_path, "A", [("user", "😀" * 2000)])  # one block: no paragraph break to cut at
    evidence = collect_chat_evidence(FileSessions(CardLayout(tmp_path)), "A", user_name=USER, char_name=CHAR,
                                     max_chars=1001)
    assert evidence is not None
    assert evidence.transcript == "😀" * 500  # 1000 units: a 501st emoji would need 1002
    assert evidence.omitted_chars == utf16_len("阿明：" + "😀" * 1500) == 3003
    assert evidence.omitted_chars + utf16_len(evidence.transcript) == utf16_len("阿明：" + "😀" * 2000)


def test_evidence_builds_each_session_view_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_chat(tmp_path, "A", [("user", "进城。"), ("assistant", "好。")], session="s1.jsonl")
    write_chat(tmp_path, "A", [("user", "又来了。"), ("assistant", "嗯。")], session="s2.jsonl")
    built: list[int] = []

    def counting_view(branch: Sequence[Entry], drop: Collection[str] = ()) -> list[Entry]:
        built.append(len(branch))
        return story_view(branch, drop)

    monkeypatch.setattr(card_inputs, "story_view", counting_view)
    evidence = collect_chat_evidence(FileSessions(CardLayout(tmp_path)), "A", user_name=USER, char_name=CHAR)
    assert evidence is not None and evidence.turns == 2
    assert built == [2, 2]  # one view per session file, shared by the section and the turn count


def test_greeting_only_chat_has_no_evidence(tmp_path: Path) -> None:
    write_chat(tmp_path, "A", [("assistant", "（开场白）欢迎来到梨园。")])
    assert collect_chat_evidence(FileSessions(CardLayout(tmp_path)), "A", user_name=USER, char_name=CHAR) is None
    assert collect_chat_evidence(FileSessions(CardLayout(tmp_path)), "missing", user_name=USER, char_name=CHAR) is None


def test_diff_recaps_changed_and_deleted(tmp_path: Path) -> None:
    memory_dir = tmp_path / "记忆"
    files = MemoryFiles(CardLayout(tmp_path))
    recap1 = memory_dir / "局" / "1111.md"
    recap2 = memory_dir / "局" / "2222.md"
    write_memory_file(recap1, "复盘一\n")
    write_memory_file(recap2, "复盘二\n")
    diff = diff_recaps(files, Manifest(), FileSessions(CardLayout(tmp_path)))
    assert [c.chat_id for c in diff.changed] == ["1111", "2222"]
    assert diff.deleted == []
    assert diff.changed[0].text == "复盘一" and diff.changed[0].name == "1111"

    manifest = Manifest(recaps={"1111": RecapRecord("m", "", sha1_text("复盘一\n"))})
    assert [c.chat_id for c in diff_recaps(files, manifest, FileSessions(CardLayout(tmp_path))).changed] == ["2222"]
    write_memory_file(recap1, "复盘一（改）\n")
    recap2.unlink()  # never merged: nothing to forget
    diff = diff_recaps(files, manifest, FileSessions(CardLayout(tmp_path)))
    assert [c.chat_id for c in diff.changed] == ["1111"] and diff.deleted == []
    recap1.unlink()
    diff = diff_recaps(files, manifest, FileSessions(CardLayout(tmp_path)))
    assert diff.changed == [] and diff.deleted == ["1111"]


def test_diff_ignores_foreign_files_forgotten_chats_and_counts_blank_as_gone(tmp_path: Path) -> None:
    memory_dir = tmp_path / "记忆"
    files = MemoryFiles(CardLayout(tmp_path))
    write_memory_file(memory_dir / "局" / "笔记.md", "不是复盘")
    write_memory_file(memory_dir / "局" / "F.md", "被遗忘的")
    write_memory_file(memory_dir / "局" / "E.md", "  \n")
    write_memory_file(memory_dir / "局" / "A.txt", "x")
    manifest = Manifest(recaps={"E": RecapRecord("m", "", "oldhash")},
                        manual=ManualState(forgotten_chats=["F"]))
    diff = diff_recaps(files, manifest, FileSessions(CardLayout(tmp_path)))
    assert diff.changed == [] and diff.deleted == ["E"] and diff.hashes == {}
