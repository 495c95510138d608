"""The chunk-store contract, held by both backends: the SQLite file and PostgreSQL.

Every test but the last runs once per backend (``store_kind``); the last one feeds the
same chat to a :class:`VectorMemory` on each and asks for identical hits (ranking is the
library's, not the store's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from liyuan.vector import ChunkStore, HashEmbedder, StoreConfig, VectorConfig, VectorMemory
from liyuan.vector.chunkstore import NewChunk
from liyuan.vector.config import EXTERNAL, NARRATIVE
from liyuan.vector.store import SqliteChunkStore

Opener = Callable[..., ChunkStore]


def vec(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def row(text: str, store: str = EXTERNAL, *, node_id: str | None = None, parent: str | None = None,
        width: int = 4) -> NewChunk:
    vector = np.full(width, float(len(text) % 7 + 1), dtype=np.float32)
    return NewChunk(store, text, vector, "test", "narrative" if node_id else "manual", None, node_id, parent)


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Opener]:
    """Opens a store on one chat (``chat``) of the backend; each call is a new object (for
    PostgreSQL from a storage object of its own: another server) on the same data."""
    opened: list[object] = []
    if store_kind == "sqlite":
        from liyuan.storage import CardStorage

        def sqlite(chat: str = "chat") -> ChunkStore:  # the folder's: a SQLite file in the chat's folder
            return CardStorage.folder(tmp_path / "卡").chunk_stores().open(chat)
        yield sqlite
        return
    from liyuan.storage import CardStorage

    dsn = request.getfixturevalue("postgres_dsn")

    def postgres(chat: str = "chat") -> ChunkStore:
        storage = CardStorage.postgres(dsn, scope="card")  # as a card (a server) opens it
        opened.append(storage)
        return storage.chunk_stores().open(chat)
    yield postgres
    for storage in opened:
        storage.close()  # type: ignore[attr-defined]


def test_add_reads_back_in_creation_order(open_store: Opener) -> None:
    store = open_store()
    ids = store.add([row("甲"), row("乙", NARRATIVE, node_id="n1"), row("丙")], max_chunks=100)
    assert len(ids) == 3
    assert [c.text for c in store.chunks()] == ["甲", "乙", "丙"]
    assert [c.text for c in store.chunks(EXTERNAL)] == ["甲", "丙"]
    seqs = [c.seq for c in store.chunks()]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    got = store.get(ids[1])
    assert got is not None and (got.store, got.node_id, got.source, got.embedder) == (NARRATIVE, "n1", "narrative",
                                                                                     "test")
    assert store.get("0123456789abcdef") is None
    assert (store.count(), store.count(EXTERNAL), store.count("nowhere")) == (3, 2, 0)
    # The same text with the same node_id is skipped; on another branch (node_id) it is a new chunk.
    again = store.add([row("乙", NARRATIVE, node_id="n1"), row("乙", NARRATIVE, node_id="n2"), row("甲")],
                      max_chunks=100)
    assert len(again) == 1 and store.count() == 4
    assert [c.node_id for c in store.chunks(NARRATIVE)] == ["n1", "n2"]


def test_vectors_come_back_as_written(open_store: Opener) -> None:
    store = open_store()
    ids = store.add([NewChunk(EXTERNAL, "一", vec(0.25, -1.5, 3.0), "a", "import"),
                     NewChunk(EXTERNAL, "二", vec(1, 2), "b", "import"),
                     NewChunk(EXTERNAL, "三", np.zeros(0, dtype=np.float32), "unembedded", "import")], max_chunks=10)
    snapshot = open_store().snapshot()
    assert [c.id for c in snapshot.chunks] == ids
    rows, matrix = snapshot.matrices["a"]
    assert rows.tolist() == [0] and matrix.tolist() == [[0.25, -1.5, 3.0]]
    assert snapshot.matrices["b"][1].tolist() == [[1.0, 2.0]]
    assert snapshot.matrices["unembedded"][1].shape == (1, 0)
    store.set_embeddings([(ids[2], vec(4, 5))], "b")
    rows, matrix = store.snapshot().matrices["b"]
    assert rows.tolist() == [1, 2] and matrix.tolist() == [[1.0, 2.0], [4.0, 5.0]]
    assert "unembedded" not in store.snapshot().matrices


def test_a_nul_in_a_text_does_not_fail_the_write(open_store: Opener, store_kind: str) -> None:
    store = open_store()
    assert len(store.add([row("前\x00后")], max_chunks=10)) == 1
    assert store.add([row("前\x00后")], max_chunks=10) == []  # the same text again: skipped on both
    store.next_turn((None, "这一轮\x00"))
    # PostgreSQL text has no NUL: it keeps U+FFFD in its place rather than refusing the chat's writes.
    nul = "\x00" if store_kind == "sqlite" else "\ufffd"
    assert [c.text for c in store.chunks()] == [f"前{nul}后"]
    assert [text for _s, _n, text in store.pending()] == [f"这一轮{nul}"]


def test_generation_moves_on_every_write_and_never_on_a_read(open_store: Opener) -> None:
    store = open_store()
    first = store.snapshot()
    ids = store.add([row("一"), row("二")], max_chunks=10)
    second = store.snapshot()
    assert second.generation == first.generation + 1 and [c.text for c in second.chunks] == ["一", "二"]
    # Reads, the turn counter and the pending queue leave the snapshot as it is (the same object).
    store.chunks(), store.count(), store.get(ids[0]), store.evicted(EXTERNAL), store.pending()
    store.next_turn((None, "回合"))
    store.clear_pending(10)
    assert store.snapshot() is second
    store.set_embeddings([(ids[0], vec(9, 9, 9, 9))], "test")
    third = store.snapshot()
    assert third.generation == second.generation + 1 and third.matrices["test"][1][0].tolist() == [9, 9, 9, 9]
    assert store.delete(ids[1]) is True and store.delete(ids[1]) is False
    fourth = store.snapshot()
    assert fourth.generation == third.generation + 2 and [c.text for c in fourth.chunks] == ["一"]


def test_eviction_is_fifo_at_the_cap_and_counted(open_store: Opener) -> None:
    store = open_store()
    heard: list[tuple[str, int]] = []
    for i in range(10):
        store.add([row(f"第{i}段")], max_chunks=4, on_evict=lambda s, n: heard.append((s, n)))
    assert [c.text for c in store.chunks()] == ["第6段", "第7段", "第8段", "第9段"]
    assert store.evicted(EXTERNAL) == 6 and heard == [(EXTERNAL, 1)] * 6
    # One batch over the cap: the oldest go, and ids evicted at once are not reported as added.
    ids = store.add([row(f"新{i}") for i in range(6)], max_chunks=4)
    assert [c.text for c in store.chunks()] == ["新2", "新3", "新4", "新5"]
    assert [store.get(i).text for i in ids] == ["新2", "新3", "新4", "新5"]  # type: ignore[union-attr]
    assert store.evicted(EXTERNAL) == 12 and store.evicted(NARRATIVE) == 0


def test_a_version_another_extends_is_evicted_before_older_rows(open_store: Opener) -> None:
    store = open_store()
    old = store.add([row("最旧", NARRATIVE, node_id="n0"), row("旧版", NARRATIVE, node_id="n1")], max_chunks=10)
    store.add([row("新版", NARRATIVE, node_id="n2", parent=old[1])], max_chunks=10)
    store.add([row("别处")], max_chunks=1)  # another store's cap leaves this one alone
    store.add([row("第四", NARRATIVE, node_id="n3")], max_chunks=3)
    assert [c.text for c in store.chunks(NARRATIVE)] == ["最旧", "新版", "第四"]
    assert store.evicted(NARRATIVE) == 1 and store.evicted(EXTERNAL) == 0


def test_pending_queue(open_store: Opener) -> None:
    store = open_store()
    assert [store.next_turn((f"n{i}", f"第{i}轮")) for i in range(3)] == [1, 2, 3]
    assert store.next_turn() == 4
    queued = store.pending()
    assert [(node, text) for _seq, node, text in queued] == [("n0", "第0轮"), ("n1", "第1轮"), ("n2", "第2轮")]
    assert [seq for seq, _n, _t in queued] == sorted(seq for seq, _n, _t in queued)
    store.clear_pending(queued[1][0])
    assert [text for _s, _n, text in store.pending()] == ["第2轮"]
    store.add([row("归档")], max_chunks=10, clear_pending_through=store.pending()[0][0])
    assert store.pending() == [] and store.count() == 1


def test_reopening_sees_everything(open_store: Opener) -> None:
    store = open_store()
    ids = store.add([row(f"段{i}") for i in range(5)], max_chunks=3)
    store.next_turn(("n9", "等着的一轮"))
    before = store.snapshot()
    again = open_store()
    assert [c.id for c in again.chunks()] == ids[-3:] == [c.id for c in before.chunks]
    assert again.evicted(EXTERNAL) == 2 and [t for _s, _n, t in again.pending()] == ["等着的一轮"]
    assert again.next_turn() == 2
    snapshot = again.snapshot()
    assert snapshot.generation == before.generation
    assert np.array_equal(snapshot.matrices["test"][1], before.matrices["test"][1])
    # Another chat of the same backend sees none of it.
    other = open_store("other")
    assert other.count() == 0 and other.pending() == [] and other.next_turn() == 1


def test_a_snapshot_caught_up_equals_one_read_cold(open_store: Opener) -> None:
    store = open_store()
    store.snapshot()
    ids: list[str] = []
    for i in range(6):  # grown and evicted: the catch-up reads only the new rows
        ids += store.add([row(f"块{i}", width=3)], max_chunks=4)
        store.snapshot()
    store.set_embeddings([(ids[-1], vec(7, 7, 7))], "test")  # a rewrite: rebuilt, reusing held vectors
    warm = store.snapshot()
    cold = open_store().snapshot()
    assert [c.id for c in warm.chunks] == [c.id for c in cold.chunks] and len(warm.chunks) == 4
    assert warm.generation == cold.generation
    for label, (rows, matrix) in cold.matrices.items():
        assert np.array_equal(warm.matrices[label][0], rows) and np.array_equal(warm.matrices[label][1], matrix)


@pytest.mark.slow
@pytest.mark.parametrize("cap", [10_000, 300])
def test_two_writers_on_one_chat_lose_nothing(open_store: Opener, cap: int) -> None:
    stores = [open_store(), open_store()]
    written: dict[str, list[str]] = {"A": [], "B": []}
    failures: list[BaseException] = []
    start = threading.Barrier(2)

    def write(name: str, store: ChunkStore) -> None:
        try:
            start.wait()
            for i in range(500):
                text = f"{name}-{i:03d}"
                store.add([row(text)], max_chunks=cap)
                written[name].append(text)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(n, s)) for n, s in zip("AB", stores, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert failures == [] and len(written["A"]) == len(written["B"]) == 500
    left = open_store().chunks()
    kept = min(cap, 1000)
    assert len(left) == kept and open_store().evicted(EXTERNAL) == 1000 - kept
    assert [c.seq for c in left] == sorted(c.seq for c in left)
    for name in "AB":
        # Each writer's rows come back in its own order, and FIFO keeps a tail of them.
        mine = [c.text for c in left if c.text.startswith(name)]
        assert mine == written[name][len(written[name]) - len(mine):]


@pytest.mark.slow
def test_vector_memory_recalls_the_same_hits_on_both_backends(tmp_path: Path, postgres_dsn: str) -> None:
    from liyuan.storage import CardStorage

    storage = CardStorage.postgres(postgres_dsn, scope="card")
    stores = {NARRATIVE: StoreConfig("剧情数据库", True, 1, 20), EXTERNAL: StoreConfig("额外数据库", True, 0, 5000)}
    config = VectorConfig(enabled=True, embedder="hash", stores=stores)
    postgres = storage.chunk_stores().open("same")
    memories = [VectorMemory(config, SqliteChunkStore(tmp_path / "same.sqlite"), HashEmbedder()),
                VectorMemory(config, postgres, HashEmbedder())]
    lines = ["小满在戏台后面找到了师父留下的铜钥匙，钥匙上刻着一个“沈”字。",
             "老韩说灯塔的钥匙早就丢了，可沈怀瑾记得它挂在祠堂的梁上。",
             "雨夜里，瞎眼的奶奶在油灯下给小满缝补旧衣裳的扣子。",
             "周掌柜的秤杆总是压得很低，可小满从来不和他争。",
             "The lighthouse keeper kept the brass key under the third stair."]
    # Two branches forking after turn 14: each ingests only its own turns.
    main = [f"a{i}" for i in range(40)]
    side = main[:15] + [f"b{i}" for i in range(15, 40)]
    for memory in memories:
        memory.import_text("\n\n".join(lines) * 3, title="旧稿")
        for ids in (main, side):
            for i in range(15 if ids is side else 0, 40):
                text = f"第{i}轮（{ids[i][0]}）：" + lines[i % len(lines)] * 12
                memory.ingest_turn(text, node_id=ids[i], branch_ids=ids[: i + 1])
    try:
        assert memories[0].store.count() == memories[1].store.count() > 20
        assert memories[0].store.evicted(NARRATIVE) == memories[1].store.evicted(NARRATIVE) > 0
        narrowed = 0
        for query in ["钥匙", "灯塔的钥匙在哪里", "奶奶 油灯", "brass key", "周掌柜"]:
            per_branch = []
            for seen in (None, main, side):
                found = [[(h.store, h.text, round(h.score, 6), h.source, h.node_id) for h in
                          m.search(query, branch_ids=seen, top_k=8)] for m in memories]
                assert found[0] == found[1] and found[0], (query, seen)
                per_branch.append(found[0])
            narrowed += len({repr(found) for found in per_branch}) > 1
        assert narrowed > 0  # the branch filter (the library's) changed some answer, alike on both
    finally:
        storage.close()
