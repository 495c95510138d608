"""Long chats (issue 24): fsync per entry or per beat, and an open chat's recap read from memory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from liyuan import Card, MemoryConfig
from liyuan.errors import ConfigError
from liyuan.session.state import Ledger
from liyuan.session.tree import SessionTree


@pytest.mark.parametrize(("durability", "per_beat"), [("entry", 3), ("turn", 1)])
def test_fsyncs_per_beat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str, per_beat: int) -> None:
    card = Card.open(tmp_path / "卡", config=MemoryConfig(durability=durability))  # type: ignore[arg-type]
    chat = card.chat("a")
    chat.prepare("第一句")
    chat.record("（手写回复）第一句的回答", ledger=Ledger(location="码头"))
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    chat.prepare("第二句")
    chat.record("（手写回复）第二句的回答", ledger=Ledger(location="茶馆"))
    assert len(calls) == per_beat
    card.close()
    reread = SessionTree(chat.tree.path)
    assert [e.text for e in reread.branch() if e.type == "message"][-2:] == ["第二句", "（手写回复）第二句的回答"]


def test_unknown_durability_is_refused() -> None:
    with pytest.raises(ConfigError, match="durability"):
        MemoryConfig(durability="never")  # type: ignore[arg-type]


def test_a_recap_of_an_open_chat_reads_the_tree_not_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24: opening a long chat must not parse its session file a second time for the recap."""
    from liyuan import FunctionModel, ModelRequest
    from liyuan.card import inputs

    from ..card.test_fixtures import RECAP_A, merge_for

    sent: list[str] = []

    def answer(request: ModelRequest) -> str:
        if request.purpose == "recap":
            sent.append(request.messages[-1].content)
            return RECAP_A
        return merge_for("a")

    def no_second_read(path: Path, damage: list[str] | None = None) -> list[object]:
        raise AssertionError(f"会话文件又读了一遍：{path}")

    card = Card.open(tmp_path / "卡", side_model=FunctionModel(answer), background=False)
    chat = card.chat("a")
    chat.prepare("我把伞递给她。")
    chat.record("（手写回复）她接过伞，说了声谢谢。")
    monkeypatch.setattr(inputs, "branch_of_session_file", no_second_read)
    outcome = card.sync()
    assert outcome is not None and outcome.recapped == ["a"]
    assert "她接过伞" in sent[-1]
    card.close()
