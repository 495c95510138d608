"""Long chats (issue 24): fsync per entry or per turn, and an open chat's recap read from memory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from liyuan import Card, MemoryConfig
from liyuan.errors import ConfigError
from liyuan.session.state import Ledger
from liyuan.session.tree import SessionTree


# entry: one fsync for the user line, one for the reply and its ledger (written together)
@pytest.mark.parametrize(("durability", "per_turn"), [("entry", 2), ("turn", 1)])
def test_fsyncs_per_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str, per_turn: int) -> None:
    card = Card.open(tmp_path / "卡", config=MemoryConfig(durability=durability))  # type: ignore[arg-type]
    chat = card.chat("a")
    chat.prepare("第一句")
    chat.record("（手写回复）第一句的回答", ledger=Ledger(location="码头"))
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    chat.prepare("第二句")
    chat.record("（手写回复）第二句的回答", ledger=Ledger(location="茶馆"))
    assert len(calls) == per_turn
    card.close()
    reread = SessionTree(chat.tree.path)
    assert [e.text for e in reread.branch() if e.type == "message"][-2:] == ["第二句", "（手写回复）第二句的回答"]


def test_unknown_durability_is_refused() -> None:
    with pytest.raises(ConfigError, match="durability"):
        MemoryConfig(durability="never")  # type: ignore[arg-type]


def test_a_recap_of_an_open_chat_reads_the_tree_not_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24: opening a long chat must not parse its session file a second time for the recap."""
    from liyuan import FunctionModel, ModelRequest
    from liyuan.card.sessions import FileSessions

    from ..card.test_fixtures import RECAP_A, merge_for

    sent: list[str] = []

    def answer(request: ModelRequest) -> str:
        if request.purpose == "recap":
            sent.append(request.messages[-1].content)
            return RECAP_A
        return merge_for("a")

    def no_second_read(self: FileSessions, chat_id: str, name: str) -> None:
        raise AssertionError(f"会话文件又读了一遍：{chat_id}/{name}")

    card = Card.open(tmp_path / "卡", side_model=FunctionModel(answer), background=False)
    chat = card.chat("a")
    chat.prepare("我把伞递给她。")
    chat.record("（手写回复）她接过伞，说了声谢谢。")
    monkeypatch.setattr(FileSessions, "read", no_second_read)
    outcome = card.sync()
    assert outcome is not None and outcome.recapped == ["a"]
    assert "她接过伞" in sent[-1]
    card.close()


def _written_chat(card_dir: Path, turns: int) -> None:
    """A chat of ``turns`` turns without ledgers, a relay summary every 20 turns, as written."""
    import json

    folder = card_dir / "对话" / "long" / "会话"
    folder.mkdir(parents=True)
    lines = [{"type": "session", "version": 1, "id": "long-001", "timestamp": "t"}]
    parent: str | None = None
    replies: list[str] = []

    def put(**fields: object) -> str:
        nonlocal parent
        entry_id = f"e{len(lines)}"
        lines.append({"id": entry_id, "parentId": parent, "timestamp": "t", **fields})
        parent = entry_id
        return entry_id

    for turn in range(1, turns + 1):
        put(type="message", role="user", text=f"第{turn}轮：伞呢？")
        replies.append(put(type="message", role="assistant", text=f"（手写回复）第{turn}轮，伞在门后。"))
        if turn % 20 == 0:
            put(type="custom", customType="rp-summary", data={
                "summary": f"## 前情提要\n- （手写摘要）到第{turn - 6}轮", "coversThroughId": replies[turn - 7],
                "turns": turn - 6, "chars": 100})
    (folder / "001.jsonl").write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines),
                                      encoding="utf-8")


@pytest.mark.parametrize("with_ledger", [False, True])
def test_a_turn_reads_as_many_entries_at_2000_turns_as_at_200(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_ledger: bool) -> None:
    """Issue 24: the foreground of a turn looks only at the live tail, with or without a ledger
    (a chat without one was once walked back to its root every turn, looking for a snapshot)."""
    from liyuan.session.loader import LazyBody

    reads: list[int] = []

    def count(turns: int) -> int:
        card_dir = tmp_path / str(turns)
        _written_chat(card_dir, turns)
        card = Card.open(card_dir, auto_sync=False, background=False)
        chat = card.chat("long")
        chat.prepare("热身")
        chat.record("（手写回复）热身", ledger=Ledger(location="码头") if with_ledger else None)
        real = LazyBody.get
        seen = [0]

        def counted(self: LazyBody, key: str, default: object = None) -> object:
            seen[0] += 1
            return real(self, key, default)

        monkeypatch.setattr(LazyBody, "get", counted)
        chat.prepare("伞到底在哪？")
        chat.record("（手写回复）在门后。", ledger=Ledger(location="茶馆") if with_ledger else None)
        monkeypatch.setattr(LazyBody, "get", real)
        card.close()
        reads.append(seen[0])
        return seen[0]

    assert count(2000) <= count(200) + 5, reads
