"""``MemoryConfig.durability``: fsync per entry (the default) or once per beat (issue 24)."""

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
