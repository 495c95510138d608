"""Issue 36 item 3: refreshing the search snapshot after an ingest costs what changed, not the store's size.

No timings: the Python work of a refresh is counted in function calls (a per-chunk loop
shows up as one call per chunk), the SQL it runs is traced, and the vectors appended are
checked to be written in place. Every refreshed snapshot still equals one built afresh.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pytest

from liyuan.vector import store as store_module
from liyuan.vector.chunkstore import NewChunk
from liyuan.vector.embed import HashEmbedder
from liyuan.vector.lexical import bigram_terms
from liyuan.vector.store import SqliteChunkStore

EMBEDDER = HashEmbedder()


def fill(store: SqliteChunkStore, start: int, count: int, cap: int) -> None:
    texts = [f"第{i}段：{'沈怀瑾' if i % 3 else '青伞'}在雾港等了{i}夜" for i in range(start, start + count)]
    vectors = EMBEDDER.embed(texts)
    store.add([NewChunk("narrative", t, vectors[k], EMBEDDER.label, "narrative", None, f"n{start + k}")
               for k, t in enumerate(texts)], max_chunks=cap)


def same_as_fresh(store: SqliteChunkStore, path: Path) -> None:
    grown = store.snapshot()
    fresh = SqliteChunkStore(path).snapshot()
    assert [c.id for c in grown.chunks] == [c.id for c in fresh.chunks]
    assert grown.tagged == fresh.tagged and grown.versions == fresh.versions and grown.positions == fresh.positions
    assert np.array_equal(grown.seqs, fresh.seqs)
    for label, (rows, matrix) in fresh.matrices.items():
        assert np.array_equal(grown.matrices[label][0], rows) and np.allclose(grown.matrices[label][1], matrix)
    query = bigram_terms("沈怀瑾 青伞 雾港")
    assert np.allclose(grown.lexical("bigram").scores(query), fresh.lexical("bigram").scores(query), atol=1e-5)


def calls_in_refresh(size: int, tmp_path: Path) -> int:
    """Python function calls of one ingest's refresh (add, snapshot, keyword index) at the cap."""
    store = SqliteChunkStore(tmp_path / f"{size}.sqlite")
    fill(store, 0, size, size)
    store.snapshot().lexical("bigram")
    fill(store, size, 1, size)  # one in, the oldest out
    store.snapshot().lexical("bigram")  # the first extension sets up what later ones grow in place
    fill(store, size + 1, 1, size)
    count = 0

    def counter(_frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(counter)
    try:
        store.snapshot().lexical("bigram")
    finally:
        sys.setprofile(None)
    return count


def test_a_refresh_does_as_much_python_work_at_3000_chunks_as_at_300(tmp_path: Path) -> None:
    small, big = calls_in_refresh(300, tmp_path), calls_in_refresh(3000, tmp_path)
    assert big <= small + 20, (small, big)  # before: a generator step per chunk, several times over


def test_a_refresh_after_an_eviction_reads_the_eviction_log_not_every_seq(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteChunkStore(tmp_path / "s.sqlite")
    fill(store, 0, 200, 200)
    store.snapshot().lexical("bigram")
    fill(store, 200, 3, 200)  # three evicted
    store.close()  # the store keeps one connection: the next call opens the traced one below
    statements: list[str] = []
    real_connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = real_connect(*args, **kwargs)
        db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(sqlite3, "connect", traced)
    assert len(store.snapshot().chunks) == 200
    monkeypatch.setattr(sqlite3, "connect", real_connect)
    assert not [s for s in statements if "INDEXED BY" in s], statements  # before: every row's seq, each time
    assert any("FROM evicted" in s for s in statements)
    same_as_fresh(store, tmp_path / "s.sqlite")


def test_vectors_are_appended_in_place_and_older_snapshots_keep_theirs(tmp_path: Path) -> None:
    store = SqliteChunkStore(tmp_path / "s.sqlite")
    fill(store, 0, 100, 100)
    store.snapshot()
    fill(store, 100, 1, 100)
    before = store.snapshot()  # the first extension copies the matrix once, with room to grow
    held = before.matrices[EMBEDDER.label][1].copy()
    fill(store, 101, 2, 100)  # two in, two of the oldest out: FIFO
    after = store.snapshot()
    matrix = after.matrices[EMBEDDER.label][1]
    assert np.shares_memory(matrix, before.matrices[EMBEDDER.label][1])  # before: vstack copied every vector
    assert np.array_equal(before.matrices[EMBEDDER.label][1], held)  # the older snapshot reads what it read
    assert matrix.shape[0] == 100
    same_as_fresh(store, tmp_path / "s.sqlite")


def test_a_snapshot_older_than_the_eviction_log_is_refreshed_from_every_seq(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "EVICTION_LOG_SPAN", 1)
    store = SqliteChunkStore(tmp_path / "s.sqlite")
    fill(store, 0, 50, 50)
    store.snapshot().lexical("bigram")
    for start in range(50, 60, 2):  # five writes, each evicting two: the log keeps only the last
        fill(store, start, 2, 50)
    same_as_fresh(store, tmp_path / "s.sqlite")


def test_versions_evicted_from_the_middle_are_dropped_by_a_copy(tmp_path: Path) -> None:
    store = SqliteChunkStore(tmp_path / "s.sqlite")
    fill(store, 0, 20, 30)
    store.snapshot().lexical("bigram")
    for i in range(20, 40):  # each a new version of a chunk in the middle: those go first at the cap
        parent = store.chunks()[10 + i % 5].id
        text = f"第{i}段：新的一版"
        store.add([NewChunk("narrative", text, EMBEDDER.embed([text])[0], EMBEDDER.label, "narrative", None,
                            f"v{i}", parent)], max_chunks=30)
        same_as_fresh(store, tmp_path / "s.sqlite")


def test_a_re_embed_in_the_same_clock_tick_is_never_served_stale(tmp_path: Path) -> None:
    """A re-embed keeps ``updated_at`` when the clock has not moved (a coarse or fixed clock, a
    fast machine): the refresh must not reuse the old vector on that evidence alone (it did,
    and the contract test comparing a caught-up snapshot with a cold read failed now and then)."""
    store = SqliteChunkStore(tmp_path / "s.sqlite", clock=lambda: "2026-01-01T00:00:00.000+00:00")
    embedder = EMBEDDER
    texts = ["灯塔下的雾", "铜纽扣", "北礁的船"]
    ids = store.add([NewChunk("external", t, v, embedder.label, "manual")
                     for t, v in zip(texts, embedder.embed(texts), strict=True)], max_chunks=10)
    store.snapshot()
    fresh = np.full(len(embedder.embed(["x"])[0]), 0.5, dtype=np.float32)
    store.set_embeddings([(ids[1], fresh)], embedder.label)
    warm = store.snapshot()
    rows, matrix = warm.matrices[embedder.label]
    assert np.array_equal(matrix[list(rows).index(warm.positions[ids[1]])], fresh)
    cold = SqliteChunkStore(tmp_path / "s.sqlite").snapshot()
    assert np.array_equal(warm.matrices[embedder.label][1], cold.matrices[embedder.label][1])
