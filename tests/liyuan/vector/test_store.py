"""The SQLite chunk store: crash safety, versions, eviction, snapshots."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from liyuan.errors import StorageDamaged
from liyuan.vector import SqliteChunkStore, StoreConfig, VectorConfig, VectorMemory
from liyuan.vector.chunkstore import NewChunk
from liyuan.vector.config import NARRATIVE

CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from liyuan.vector.store import NewChunk, SqliteChunkStore

    store = SqliteChunkStore(sys.argv[1])
    vector = np.ones(256, dtype=np.float32) / 16
    i = 0
    while True:
        batch = [NewChunk("external", f"第{i}批第{j}条：" + "字" * 400, vector, "test", "import")
                 for j in range(20)]
        ids = store.add(batch, max_chunks=1_000_000)
        # Reported only after add() returned, i.e. after COMMIT.
        print(i, len(ids), flush=True)
        i += 1
    """
)


def test_killed_writer_loses_no_committed_chunk(tmp_path: Path) -> None:
    path = tmp_path / "chat.sqlite"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    committed = 0
    deadline = time.monotonic() + 60
    while committed < 15 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        committed = int(line.split()[0]) + 1
    # Kill it while it is writing the next batches (no chance to clean up).
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert committed >= 15, "the child never got going"

    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = SqliteChunkStore(path)
    texts = {c.text for c in store.chunks()}
    for i in range(committed):
        for j in range(20):
            assert f"第{i}批第{j}条：" + "字" * 400 in texts
    # Whatever batch was in flight is all-or-nothing.
    assert store.count() % 20 == 0
    # And the file is still writable afterwards.
    store.add([NewChunk("external", "崩溃之后又写了一条。", np.ones(256, dtype=np.float32), "test", "import")],
              max_chunks=1_000_000)


def test_a_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "chat.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StorageDamaged, match="向量记忆库无法打开"):
        SqliteChunkStore(path)
    assert path.read_bytes().startswith(b"this is not a database")


def test_snapshot_is_cached_until_a_write(tmp_path: Path) -> None:
    store = SqliteChunkStore(tmp_path / "c.sqlite")
    first = store.snapshot()
    assert store.snapshot() is first
    store.add([NewChunk("external", "一条新的记忆文本。", np.ones(4, dtype=np.float32), "t", "manual")],
              max_chunks=10)
    second = store.snapshot()
    assert second is not first and len(second.chunks) == 1
    # A write from another connection (another process) is noticed too.
    other = SqliteChunkStore(tmp_path / "c.sqlite")
    other.add([NewChunk("external", "另一个进程写的记忆。", np.ones(4, dtype=np.float32), "t", "manual")],
              max_chunks=10)
    assert len(store.snapshot().chunks) == 2


def test_turn_counter_and_queue_keep_the_snapshot(tmp_path: Path) -> None:
    # next_turn() runs on every turn: if it invalidated the snapshot, the next recall
    # would rebuild every vector row and the BM25 index of a big store.
    config = VectorConfig(enabled=True, embedder="hash", stores={NARRATIVE: StoreConfig("剧情数据库", True, 3, 200)})
    memory = VectorMemory(config, SqliteChunkStore(tmp_path / "c.sqlite"))
    store = memory.store
    store.add([NewChunk("external", "早先导入的一段记忆。", np.ones(4, dtype=np.float32), "t", "import")],
              max_chunks=10)
    first = store.snapshot()
    lexical = first.lexical("bigram")
    assert store.next_turn(("a1", "第一轮排进队列的文字。")) == 1
    turn = "第二轮：小满撑着那把补过两回的青伞，从浓雾里慢慢走了过来。"
    assert memory.ingest_turn(turn, node_id="a2", branch_ids={"a1", "a2"}).reason == "not-due"
    (seq, _, _), _ = store.pending()
    store.clear_pending(seq)
    assert [turn[1] for turn in store.pending()] == ["a2"]
    assert store.snapshot() is first and first.lexical("bigram") is lexical
    # A chunk write still refreshes it.
    store.add([NewChunk("external", "之后手动加的一条记忆。", np.ones(4, dtype=np.float32), "t", "manual")],
              max_chunks=10)
    assert store.snapshot() is not first and len(store.snapshot().chunks) == 2


def test_vectors_round_trip_as_float32(tmp_path: Path) -> None:
    store = SqliteChunkStore(tmp_path / "c.sqlite")
    vector = np.array([0.6, 0.8, 0.0], dtype=np.float32)
    (cid,) = store.add([NewChunk("external", "三维向量的记忆。", vector, "t", "manual")], max_chunks=10)
    positions, matrix = store.snapshot().matrices["t"]
    assert positions.tolist() == [0]
    assert matrix.dtype == np.float32 and np.array_equal(matrix[0], vector)
    chunk = store.get(cid)
    assert chunk is not None and chunk.embedder == "t" and chunk.source == "manual" and chunk.seq == 1


def test_eviction_drops_superseded_versions_first(tmp_path: Path) -> None:
    config = VectorConfig(enabled=True, embedder="hash", stores={NARRATIVE: StoreConfig("剧情数据库", True, 1, 20)})
    memory = VectorMemory(config, SqliteChunkStore(tmp_path / "c.sqlite"))
    branch = {f"a{i}" for i in range(40)}
    for i in range(30):
        memory.ingest_turn(f"第{i:02d}轮：" + "雨" * 100 + f"（{i}）", node_id=f"a{i}", branch_ids=branch)
    rows = memory.store.chunks(NARRATIVE)
    assert len(rows) == 20
    current = memory.list_chunks(NARRATIVE, branch_ids=branch)
    # Every turn's text is still reachable through the current versions.
    joined = "\n".join(c.text for c in current)
    assert all(f"第{i:02d}轮" in joined for i in range(30))


def test_delete_removes_a_version_and_what_it_extends(tmp_path: Path) -> None:
    config = VectorConfig(enabled=True, embedder="hash", stores={NARRATIVE: StoreConfig("剧情数据库", True, 1, 200)})
    memory = VectorMemory(config, SqliteChunkStore(tmp_path / "c.sqlite"))
    memory.ingest_turn("沈怀瑾在码头的石阶上拉了整整一个时辰的琴。", node_id="a1", branch_ids={"a1"})
    memory.ingest_turn("小满撑着那把补过两回的青伞，从浓雾里慢慢走了过来。", node_id="a2", branch_ids={"a1", "a2"})
    (merged,) = memory.list_chunks(NARRATIVE)
    assert merged.parent is not None and memory.store.count(NARRATIVE) == 2
    assert memory.delete_chunk(merged.id)
    assert memory.store.count(NARRATIVE) == 0 and memory.list_chunks() == []


def test_a_store_keeps_one_connection_instead_of_one_per_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    opened: list[object] = []
    real = sqlite3.connect

    def counted(*args: object, **kwargs: object) -> sqlite3.Connection:
        opened.append(args[0])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite3, "connect", counted)
    store = SqliteChunkStore(tmp_path / "one.sqlite")
    for i in range(20):
        store.add([NewChunk("external", f"第{i}条。", np.ones(4, dtype=np.float32), "test", "import")],
                  max_chunks=100)
        store.count()
        store.snapshot()
    assert len(opened) == 1  # was one per call: 61 here
    store.close()
    assert store.count() == 20 and len(opened) == 2  # closed: the next call opens it again
