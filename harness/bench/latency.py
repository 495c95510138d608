"""The recall-latency benchmark and the fusion-weight sweep (``python -m harness bench``).

Both print tables and return them as data; :func:`harness.bench.main` writes them.
"""

from __future__ import annotations

import hashlib
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from liyuan.vector import SqliteChunkStore, StoreConfig, VectorConfig, VectorMemory
from liyuan.vector.chunkstore import NewChunk
from liyuan.vector.config import EXTERNAL, NARRATIVE
from liyuan.vector.recall import RECALL_TIMEOUT_S, bounded_archive, recall_for_turn

from .methods import (
    DEFAULT_METHOD,
    E5_LATENCY_MAX,
    LATENCY_METHODS,
    METHODS,
    STORIES,
    TOP_K,
    Method,
    embedder,
    load_story,
    memory_for,
    story_chunks,
)
from .overhead import percentile

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0)
"""The embedding-list weights the sweep tries (the lexical list weighs 1)."""

def weight_table(folder: Path, embedders: Sequence[str] = ("hash", "semantic", "e5")) -> dict[str, Any]:
    """recall@5 of hybrid RRF per embedding weight, per embedder and per query script.

    The same weight is set for both scripts; each query then counts under its own
    script (``cjk`` when it holds a Han, kana or hangul character), so one sweep shows
    the best weight of each script. Chunks are embedded once per embedder and story.
    Only the labelled queries are swept: the held-out ones choose nothing.
    """
    from liyuan.vector.lexical import has_cjk

    rows: dict[str, Any] = {}
    for name in embedders:
        method = Method(f"hybrid-{name}", "hybrid", name)
        built = []
        for language in STORIES:
            story = load_story(language)
            index = story_chunks(story)
            memory = memory_for(folder / f"weights-{language}", method, remember=True)
            for text in index:
                memory.add_manual(text)
            queries = story["queries"]
            built.append((language, memory, index, queries))
        rows[name] = {}
        for weight in WEIGHTS:
            hits: dict[str, list[bool]] = {}
            for language, memory, index, queries in built:
                memory.config = replace(memory.config, fusion_weights={name: {"cjk": weight, "latin": weight}}
                                        if name != "hash" or weight < 1 else memory.config.fusion_weights)
                if name == "hash" and weight >= 1:
                    continue  # hash is never fused at full weight (the configuration refuses it)
                for query in queries:
                    found = [index[h.text] for h in memory.search(query["q"], top_k=TOP_K)]
                    script = "cjk" if has_cjk(query["q"]) else "latin"
                    hits.setdefault(f"{language}/{script}", []).append(any(b in found for b in query["turns"]))
            rows[name][str(weight)] = {k: round(sum(v) / len(v), 3) for k, v in sorted(hits.items())}
            rows[name][str(weight)].update({f"n:{k}": len(v) for k, v in hits.items()})
    return {"weights": list(WEIGHTS), "top_k": TOP_K, "embedders": rows}

def print_weights(table: dict[str, Any]) -> None:
    for name, by_weight in table["embedders"].items():
        columns = sorted({k for row in by_weight.values() for k in row if not k.startswith("n:")})
        if not columns:
            continue
        print(f"\n融合权重扫描：hybrid-{name}，嵌入列表的权重（关键词列表为 1），recall@{table['top_k']}")
        first = next(row for row in by_weight.values() if row)
        print(f"{'权重':<8}" + "".join(f"{c + '(' + str(first['n:' + c]) + ')':>16}" for c in columns))
        for weight, row in by_weight.items():
            if row:
                print(f"{weight:<8}" + "".join(f"{row.get(c, 0):>16.3f}" for c in columns))

def synthetic_texts(count: int, seed: int = 7) -> list[str]:
    """``count`` distinct chunk texts of 2-4 story sentences each (deterministic)."""
    rng = random.Random(seed)
    sentences = [s + "。" for turn in load_story()["turns"] for s in turn.split("。") if s.strip()]
    return [f"（第{i}段）" + "".join(rng.sample(sentences, rng.randint(2, 4))) for i in range(count)]

def cached_vectors(cache: Path, name: str, texts: Sequence[str], progress: Callable[[str], None]) -> np.ndarray:
    """Embed ``texts`` once per embedder and text set; later runs read the cache."""
    digest = hashlib.sha1("\n".join(texts).encode("utf-8")).hexdigest()[:10]
    path = cache / f"{name}-{len(texts)}-{digest}.npy"
    if path.exists():
        vectors: np.ndarray = np.load(path)
        if vectors.shape[0] == len(texts):
            return vectors
    started = time.perf_counter()
    model = embedder(name)
    parts = []
    step = 16 if name == "e5" else 2000  # e5 pads a batch to its longest text: big batches are slower
    for start in range(0, len(texts), step):
        parts.append(model.embed(texts[start : start + step]))
        if (start + step) % 2000 < step or start + step >= len(texts):
            progress(f"  嵌入 {name}: {min(start + step, len(texts))}/{len(texts)}")
    vectors = np.vstack(parts)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    progress(f"  嵌入 {len(texts)} 段用时 {time.perf_counter() - started:.1f} s（已缓存）")
    return vectors

def _timed_recall(memory: VectorMemory, query: str, branch: frozenset[str]) -> tuple[float, bool]:
    started = time.perf_counter()
    lines = recall_for_turn(memory, query, branch)
    return (time.perf_counter() - started) * 1000, bool(lines)

@contextmanager
def busy_machine(busy: bool) -> Iterator[None]:
    """Inside the block, one CPU-bound process runs beside this one (when ``busy``)."""
    if not busy:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # let it take its core
        yield
    finally:
        spinner.kill()
        spinner.wait()


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def latency_table(folder: Path, sizes: Sequence[int], cache: Path, progress: Callable[[str], None],
                  rounds: int = 100, busy_at: int = 5000) -> dict[str, Any]:
    """Per-turn recall latency at each store size, for each configuration.

    ``cold_ms``: the first recall of a freshly opened store with no warm-up (it loads
    every vector and tokenizes every chunk; the 5 s bound may cut it off).
    ``warm_ms``: :meth:`VectorMemory.warm` on a freshly opened store.
    ``p50_ms`` / ``p95_ms``: steady state. ``after_write_ms``: the median recall right
    after one new chunk was added (an incremental snapshot refresh), over 5 writes.
    At ``busy_at`` chunks the steady state is measured twice: ``load`` ``idle`` (nothing
    of ours beside it; other users of the machine are not stopped, so the one-minute
    load average is recorded) and ``busy`` (one CPU-bound process beside it).
    """
    # Chinese and English queries in turn (the chunks are Chinese; the query's embedding
    # and script-dependent fusion cost the same either way).
    pairs = zip(load_story("zh")["queries"], load_story("en")["queries"], strict=False)
    queries = [q["q"] for pair in pairs for q in pair]
    branch = frozenset(f"e{i}" for i in range(200))
    rows: list[dict[str, Any]] = []
    by_name = {m.name: m for m in METHODS}
    for name in LATENCY_METHODS:
        method = by_name[name]
        for size in sizes:
            if method.embedder == "e5" and size > E5_LATENCY_MAX:
                progress(f"延迟：{name} @ {size} 段跳过（e5 嵌入 {size} 段要一个小时以上）")
                continue
            progress(f"延迟：{name} @ {size} 段")
            texts = synthetic_texts(size)
            vectors = cached_vectors(cache, method.embedder, texts, progress)
            place = folder / f"{name}-{size}"
            memory = memory_for(place, method, max_chunks=size + 10)
            label = memory.embedder.label
            for start in range(0, size, 5000):
                memory.store.add([NewChunk(EXTERNAL, t, vectors[start + i], label, "import")
                                  for i, t in enumerate(texts[start : start + 5000])], max_chunks=size + 10)
            embedder(method.embedder).embed(["预热"])  # the model load is not the store's cold start
            cold, cold_ok = _timed_recall(memory_for(place, method, max_chunks=size + 10), queries[0], branch)
            memory = memory_for(place, method, max_chunks=size + 10)
            started = time.perf_counter()
            memory.warm()
            warm = (time.perf_counter() - started) * 1000
            for load in ("idle", "busy") if size == busy_at else ("idle",):
                with busy_machine(load == "busy"):
                    before = _load()
                    timings, empty = [], 0
                    for i in range(rounds):
                        elapsed, ok = _timed_recall(memory, queries[i % len(queries)], branch)
                        timings.append(elapsed)
                        empty += not ok
                    after_write = []
                    for i in range(5):
                        memory.add_manual(f"（{load}新写入第{i}段）{texts[i]}")
                        after_write.append(_timed_recall(memory, queries[i], branch)[0])
                rows.append({"method": name, "chunks": size, "load": load, "loadavg": before,
                             "cold_ms": round(cold, 1), "cold_timed_out": not cold_ok,
                             "warm_ms": round(warm, 1), "p50_ms": round(statistics.median(timings), 2),
                             "p95_ms": round(percentile(timings, 95), 2), "empty": empty,
                             "after_write_ms": round(statistics.median(after_write), 1)})
    return {"rounds": rounds, "top_k": TOP_K, "rows": rows,
            "compaction": [compaction_case(folder, busy) for busy in (False, True)]}


ARCHIVED_TURNS = 110
"""Turns of the compaction case: 30 archive chunks of about 530 characters."""


def compaction_case(folder: Path, busy: bool, method_name: str = DEFAULT_METHOD) -> dict[str, Any]:
    """A compaction archives 30 chunks with the real embedder; the next turn's recall
    starts once the archive is embedding. How long does the recall take, and does it
    still get its lines within the 5 s bound?"""
    method = next(m for m in METHODS if m.name == method_name)
    place = folder / f"compaction-{'busy' if busy else 'idle'}"
    place.mkdir(parents=True, exist_ok=True)
    config = VectorConfig(enabled=True, embedder=method.embedder,  # type: ignore[arg-type]
                          stores={NARRATIVE: StoreConfig("剧情数据库", True, 3, 5000)})
    memory = VectorMemory(config, SqliteChunkStore(place / "chat.sqlite"), embedder(method.embedder))
    memory.archive_compacted("沈怀瑾在东门外的石阶上捡到一块玉佩，玉上刻着一个「瑾」字。")
    sentences = synthetic_texts(ARCHIVED_TURNS, seed=25)
    text = "\n\n".join(f"{'旅人' if i % 2 else '阿箬'}：{s}" for i, s in enumerate(sentences))
    archived: list[float] = []
    warnings: list[str] = []

    def compact() -> None:
        started = time.perf_counter()
        bounded_archive(memory, timeout=60.0, warn=warnings.append)(text, "anchor")
        archived.append(time.perf_counter() - started)

    with busy_machine(busy):
        before = _load()
        compaction = threading.Thread(target=compact)
        compaction.start()
        time.sleep(0.3)  # the archive's first batch is being embedded
        started = time.perf_counter()
        lines = recall_for_turn(memory, "玉佩上刻着什么字", None, warn=warnings.append)
        recall_ms = (time.perf_counter() - started) * 1000
        compaction.join(120)
    stored = sum(1 for c in memory.store.chunks(NARRATIVE) if c.source == "archive") - 1
    return {"load": "busy" if busy else "idle", "loadavg": before, "archived_chunks": stored,
            "archive_s": round(archived[0], 2) if archived else None, "recall_ms": round(recall_ms, 1),
            "recall_lines": len(lines), "within_bound": bool(lines) and recall_ms <= RECALL_TIMEOUT_S * 1000}

def print_latency(table: dict[str, Any]) -> None:
    print(f"\n召回延迟（recall_for_turn 全路径，{table['rounds']} 次查询，单位 ms；"
          "空闲 = 旁边没有我们的负载，机器上别的进程照常；忙 = 旁边跑一个占满一核的进程）")
    print(f"{'方法':<14}{'段数':>7}{'负载':>6}{'load':>7}{'冷启动':>10}{'预热':>9}{'p50':>8}{'p95':>8}{'写入后':>9}")
    for row in table["rows"]:
        cold = f"{row['cold_ms']:.0f}" + ("(超时)" if row["cold_timed_out"] else "")
        load = "忙" if row["load"] == "busy" else "空闲"
        print(f"{row['method']:<14}{row['chunks']:>7}{load:>6}{row['loadavg']:>7.2f}{cold:>10}{row['warm_ms']:>9.0f}"
              f"{row['p50_ms']:>8.2f}{row['p95_ms']:>8.2f}{row['after_write_ms']:>9.1f}")
    for load, limit in (("idle", 50), ("busy", 500)):
        at5k = [r["p95_ms"] for r in table["rows"]
                if r["chunks"] == 5000 and r["method"] == DEFAULT_METHOD and r["load"] == load]
        if at5k:
            shown = "空闲" if load == "idle" else "忙"
            print(f"目标：默认配置（{DEFAULT_METHOD}）5,000 段{shown}时 p95 ≤ {limit} ms → "
                  f"{'达标' if at5k[0] <= limit else '未达标'}（{at5k[0]:.2f} ms）")
    if any(r["cold_timed_out"] for r in table["rows"]):
        print("注意：冷启动超过 5 秒的那一轮不注入【剧情记忆】；打开会话时先调用 VectorMemory.warm() 可避免。")
    for case in table.get("compaction", []):
        verdict = "达标" if case["within_bound"] else "未达标"
        shown = "忙" if case["load"] == "busy" else "空闲"
        print(f"压缩归档 {case['archived_chunks']} 段（{shown}，load {case['loadavg']:.2f}）："
              f"归档用时 {case['archive_s']} s，期间下一轮召回 {case['recall_ms']:.0f} ms、"
              f"{case['recall_lines']} 行 → 5 秒内拿到召回：{verdict}")
