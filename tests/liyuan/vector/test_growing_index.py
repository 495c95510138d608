"""The search snapshot grows with the store instead of being rebuilt (issue 24).

An extended snapshot (new rows read, evicted rows dropped, postings appended) must rank
exactly as one rebuilt from scratch, and a refresh must read only the new rows.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from liyuan.vector.chunkstore import NewChunk
from liyuan.vector.embed import HashEmbedder
from liyuan.vector.lexical import BM25Index, bigram_terms, encode_terms
from liyuan.vector.store import SqliteChunkStore

TEXTS = [f"第{i}段：{'沈怀瑾' if i % 3 else '青伞'}在{'雾港' if i % 2 else '茶馆'}等了{i}夜，雨没有停。"
         for i in range(60)]
QUERIES = ["沈怀瑾 青伞", "雾港的雨", "茶馆", "第7段", "没有出现过的词"]


def _add(store: SqliteChunkStore, texts: list[str], cap: int) -> None:
    """One chunk per text; every other one a new version of the chunk stored before it."""
    embedder = HashEmbedder()
    vectors = embedder.embed(texts)
    for i, text in enumerate(texts):
        last = store.chunks()[-1].id if i % 2 and store.count() else None
        store.add([NewChunk("narrative", text, vectors[i], embedder.label, "narrative", None, f"n{i}", last)],
                  max_chunks=cap)


def _reference(store: SqliteChunkStore, query: str) -> np.ndarray:
    chunks = store.chunks()
    vocabulary: dict[str, int] = {}
    index = BM25Index([encode_terms(bigram_terms(c.text), vocabulary) for c in chunks], vocabulary)
    return index.scores(bigram_terms(query))


@pytest.mark.parametrize("cap", [1000, 25])
def test_extended_snapshot_ranks_like_a_rebuild(tmp_path: Path, cap: int) -> None:
    store = SqliteChunkStore(tmp_path / "s.sqlite")
    for start in range(0, len(TEXTS), 7):
        _add(store, TEXTS[start:start + 7], cap)
        snapshot = store.snapshot()
        assert [c.id for c in snapshot.chunks] == [c.id for c in store.chunks()]
        fresh = SqliteChunkStore(tmp_path / "s.sqlite").snapshot()  # built from scratch
        assert snapshot.tagged == fresh.tagged and snapshot.versions == fresh.versions
        assert snapshot.positions == fresh.positions and np.array_equal(snapshot.store_codes, fresh.store_codes)
        for label, (rows, matrix) in fresh.matrices.items():
            grown_rows, grown_matrix = snapshot.matrices[label]
            assert np.array_equal(rows, grown_rows) and np.allclose(matrix, grown_matrix)
        for query in QUERIES:
            expected = _reference(store, query)
            assert np.allclose(snapshot.lexical("bigram").scores(bigram_terms(query)), expected, atol=1e-5)
    assert cap < 100 or snapshot.versions  # the uncapped store kept versions to check


def test_a_refresh_reads_only_the_new_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteChunkStore(tmp_path / "s.sqlite")
    _add(store, TEXTS[:40], 1000)
    store.snapshot().lexical("bigram")
    _add(store, TEXTS[40:42], 1000)
    statements: list[str] = []
    real_connect = sqlite3.connect

    def traced(*args: object, **kwargs: object) -> sqlite3.Connection:
        db = real_connect(*args, **kwargs)  # type: ignore[arg-type]
        db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(sqlite3, "connect", traced)
    store.close()  # the store keeps its connection: the next call opens a traced one
    snapshot = store.snapshot()
    assert len(snapshot.chunks) == 42
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT") and "FROM CHUNKS" in s.upper()]
    assert reads and all("seq >" in s or "COUNT(*)" in s for s in reads), reads


def test_the_mask_from_a_branch_view_matches_the_mask_from_a_set(tmp_path: Path) -> None:
    from liyuan.clock import counter_ids
    from liyuan.session.tree import SessionTree
    from liyuan.vector.recall import branch_ids_of
    from liyuan.vector.search import visible_mask

    tree = SessionTree(tmp_path / "s.jsonl", ids=counter_ids("n"))
    made = [tree.append_message("assistant", f"第{i}条") for i in range(20)]
    tree.navigate(made[9].id)
    forked = [tree.append_message("assistant", f"分叉{i}") for i in range(5)]
    store = SqliteChunkStore(tmp_path / "v.sqlite")
    embedder = HashEmbedder()
    previous: str | None = None
    for entry in [*made, *forked]:
        text = f"{entry.text}：雾港的雨一直下"
        ids = store.add([NewChunk("narrative", text, embedder.embed([text])[0], embedder.label, "narrative",
                                  None, entry.id, previous)], max_chunks=1000)
        previous = ids[0]
    snapshot = store.snapshot()
    # The places found for one view are reused while the branch grows, and found again
    # when the leaf moves back (a new branch list): the mask must match a set's each time.
    for move in (None, made[5].id, forked[2].id, made[15].id):
        if move is not None:
            tree.navigate(move)
        tree.append_message("user", "又一句")
        view = tree.branch()
        as_view = visible_mask(snapshot, {"narrative"}, branch_ids_of(view))
        as_set = visible_mask(snapshot, {"narrative"}, frozenset(e.id for e in view))
        assert np.array_equal(as_view, as_set) and 0 < as_view.sum() < len(snapshot.chunks)
    # A snapshot extended from this one keeps the places found so far and finds the new ones.
    entry = tree.append_message("assistant", "新的一条：雾港的雨停了")
    store.add([NewChunk("narrative", entry.text, embedder.embed([entry.text])[0], embedder.label, "narrative",
                        None, entry.id)], max_chunks=1000)
    grown = store.snapshot()
    view = tree.branch()
    as_view = visible_mask(grown, {"narrative"}, branch_ids_of(view))
    assert np.array_equal(as_view, visible_mask(grown, {"narrative"}, frozenset(e.id for e in view)))
    assert as_view[-1]


def test_a_recall_waits_for_a_keyword_load_under_way_and_ranks_by_vectors_past_the_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from liyuan.vector import memory as memory_module
    from liyuan.vector.config import VectorConfig
    from liyuan.vector.index import Snapshot
    from liyuan.vector.memory import VectorMemory

    store = SqliteChunkStore(tmp_path / "s.sqlite")
    _add(store, TEXTS[:12], 1000)
    memory = VectorMemory(VectorConfig(enabled=True, embedder="hash"), store)
    warm = memory.search("沈怀瑾在雾港")
    store = SqliteChunkStore(tmp_path / "s.sqlite")  # cold again: a new process's store
    memory = VectorMemory(VectorConfig(enabled=True, embedder="hash"), store)
    log = store.snapshot().terms.log(memory.config.lexical_tokenizer)
    log.loading = True  # as warm() marks a cold bulk load
    # The load ends while the recall waits: it ranks as a warm recall does.
    threading.Timer(0.2, lambda: setattr(log, "loading", False)).start()
    assert memory.search("沈怀瑾在雾港") == warm
    # A load that outlasts the bound: the recall ranks by the vectors without building the index.
    store = SqliteChunkStore(tmp_path / "s.sqlite")
    memory = VectorMemory(VectorConfig(enabled=True, embedder="hash"), store)
    store.snapshot().terms.log(memory.config.lexical_tokenizer).loading = True
    monkeypatch.setattr(memory_module, "LEXICAL_WAIT_S", 0.05)

    def waits(self: Snapshot, tokenizer: str) -> object:
        raise AssertionError("the recall built the keyword index itself")

    monkeypatch.setattr(Snapshot, "lexical", waits)
    alone = memory.search("沈怀瑾在雾港")
    assert alone and all(hit.trace is not None and hit.trace.keyword_rank is None for hit in alone)


def test_a_recall_whose_keyword_load_outlasts_its_bound_still_returns_the_vector_hits(tmp_path: Path) -> None:
    from liyuan.vector.config import VectorConfig
    from liyuan.vector.memory import VectorMemory
    from liyuan.vector.recall import recall_hits_for_turn

    store = SqliteChunkStore(tmp_path / "s.sqlite")
    _add(store, TEXTS[:12], 1000)
    memory = VectorMemory(VectorConfig(enabled=True, embedder="hash"), store)
    store.snapshot().terms.log(memory.config.lexical_tokenizer).loading = True  # a load that never ends
    warnings: list[str] = []
    hits = recall_hits_for_turn(memory, "沈怀瑾在雾港", None, timeout=1.5, warn=warnings.append)
    assert hits and warnings == []
    assert all(hit.trace is not None and hit.trace.keyword_rank is None for hit in hits)


def test_once_a_recall_waited_out_a_keyword_load_the_next_ones_do_not_wait_again(tmp_path: Path) -> None:
    import time

    from liyuan.vector.config import VectorConfig
    from liyuan.vector.memory import VectorMemory

    store = SqliteChunkStore(tmp_path / "s.sqlite")
    _add(store, TEXTS[:12], 1000)
    memory = VectorMemory(VectorConfig(enabled=True, embedder="hash"), store)
    log = store.snapshot().terms.log(memory.config.lexical_tokenizer)
    log.loading = True  # a load slower than the bound
    assert memory.search("沈怀瑾在雾港", lexical_wait=0.3)
    started = time.monotonic()
    for _ in range(3):  # the turns after it rank by the vectors at once, not after 30 s each
        assert memory.search("沈怀瑾在雾港", lexical_wait=30.0)
    assert time.monotonic() - started < 10.0
    log.loading = False
    log.loading = True  # a new load: the first search waits for it again
    threading.Timer(0.2, lambda: setattr(log, "loading", False)).start()
    assert log.wait_loaded(30.0)
