"""Evaluation: scorecards of runs, the strategy comparison, the per-turn overhead bench.

``python -m harness eval [scorecards|strategies|bench|public|all] [--check]`` (``nox -s eval``):

- ``scorecards`` scores every run folder (``sim/`` and each ``sim/runs/<model>/``) and
  writes ``sim/out/eval.json``, ``sim/runs/<model>/eval.json`` and the page's table
  ``sim/eval/scorecards.md``.
- ``strategies`` runs the four-strategy comparison on the synthetic long chat and writes
  ``sim/eval/strategies.json``, ``sim/eval/strategies.md`` and
  ``docs/assets/strategy-chart.svg``.
- ``bench`` measures the per-turn overhead and the wall times of ``harness run`` and
  ``mkdocs build``, prints them and writes the snapshot ``sim/eval/bench.json`` and
  ``sim/eval/bench.md`` (machine-dependent; the snapshot says where and when).
- ``public --locomo PATH --madial PATH`` measures recall@5 on two public conversational-memory
  sets that chose nothing (:mod:`harness.eval.public`) and writes the snapshot ``sim/eval/public``;
  the data is not in the repository, so CI cannot rerun it: the committed snapshot is the evidence.
- ``snapshots`` re-renders the Markdown of every committed measurement snapshot
  (``sim/eval/<name>.md`` from ``<name>.json``; :mod:`harness.eval.snapshots`): the pages
  include the Markdown, so ``--check`` fails when a page's figures and their measurement differ.
- No command: ``scorecards``, ``strategies`` and ``snapshots`` (all deterministic).

Invariant: everything except ``bench`` is a pure function of committed files, written
byte-stably (:func:`harness.running.artifacts.canonical_json`); ``--check`` recomputes instead
of writing and exits 1 with a diff when a committed result is out of date.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..running.command import Subcommand, add_root_option, find_root

__all__ = ["COMMANDS", "EVAL", "EVAL_DIR", "main", "results", "scorecard_files", "strategy_files"]

EVAL_DIR = "sim/eval"
CHART = "docs/assets/strategy-chart.svg"


def _text(data: Any) -> str:
    from ..running.artifacts import canonical_json

    return canonical_json(data)


def scorecard_files(root: Path) -> dict[str, str]:
    """Every scorecard file and the page table, as repository path -> content."""
    from .gold import load_scenarios
    from .report import scorecard_markdown
    from .scorecard import score_run

    files: dict[str, str] = {}
    runs: list[tuple[str, dict[str, Any]]] = []
    bases = [("sim", "sim/out/eval.json")]
    runs_dir = root / "sim" / "runs"
    if runs_dir.is_dir():
        bases += [(f"sim/runs/{p.name}", f"sim/runs/{p.name}/eval.json")
                  for p in sorted(runs_dir.iterdir()) if (p / "out").is_dir()]
    scenarios = load_scenarios(root)
    for base, target in bases:
        card = score_run(root / base, root, scenarios)
        files[target] = _text(card)
        runs.append((target, card))
    gold_facts = {name: [{"id": f.id, "text": f.text} for f in scenario.gold.facts]
                  for name, scenario in scenarios.items()}
    files[f"{EVAL_DIR}/scorecards.md"] = scorecard_markdown(runs, gold_facts)
    return files


def strategy_files() -> dict[str, str]:
    """The strategy comparison's JSON, table and chart."""
    from .chart import render_chart
    from .report import strategies_markdown
    from .strategies import compare

    report = compare()
    return {f"{EVAL_DIR}/strategies.json": _text(report), f"{EVAL_DIR}/strategies.md": strategies_markdown(report),
            CHART: render_chart(report)}


def results(root: Path, which: Sequence[str]) -> dict[str, str]:
    """The deterministic result files for ``which`` (``scorecards``, ``strategies``, ``snapshots``)."""
    files: dict[str, str] = {}
    if "scorecards" in which:
        files.update(scorecard_files(root))
    if "strategies" in which:
        files.update(strategy_files())
    if "snapshots" in which:
        from .snapshots import snapshot_files

        files.update(snapshot_files(root))
    return files


def _write(root: Path, files: dict[str, str]) -> None:
    """Write the files whose content changed; say which were written and how many were already current."""
    from ..running.artifacts import atomic_write

    same = 0
    for rel, text in sorted(files.items()):
        data = text.encode("utf-8")
        target = root / rel
        if target.is_file() and target.read_bytes() == data:
            same += 1
            continue
        atomic_write(target, data)
        print(f"写出 {rel}")
    if same:
        print(f"{same} 个文件没有变化，没有重写")


def _check(root: Path, files: dict[str, str]) -> int:
    from ..running.artifacts import compare_trees

    diffs = compare_trees(root, {rel: text.encode("utf-8") for rel, text in files.items()})
    for diff in diffs:
        sys.stdout.write(f"\n✗ {diff.path} 过期了\n" + diff.diff)
    if diffs:
        print(f"\n{len(diffs)} 个评测结果和代码、产物对不上：运行 `python -m harness eval` 重新生成后一并提交。")
        return 1
    print(f"评测结果是最新的：{len(files)} 个文件逐字节相同。")
    return 0


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="?", default="default", choices=["default", "scorecards", "strategies",
                                                                         "snapshots", "bench", "public", "all"],
                        help="default：评分卡和策略对比（确定的，可以 --check）；bench：每轮开销快照；all：全部")
    add_root_option(parser)
    parser.add_argument("--check", action="store_true", help="只重新计算并比较，不写文件；过期则退出码 1")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000], help="bench：对话轮数")
    parser.add_argument("--sample", type=int, default=100, help="bench：每种长度计时的轮数")
    parser.add_argument("--repeat", type=int, default=3, help="bench：整体用时重复次数")
    parser.add_argument("--no-wall", action="store_true", help="bench：不测 harness run 和 mkdocs build")
    parser.add_argument("--locomo", type=Path, help="public：LoCoMo 仓库的克隆（或 locomo10.zip）")
    parser.add_argument("--madial", type=Path, help="public：MADial-Bench 仓库的克隆")
    parser.add_argument("--cache", type=Path, help="public：向量缓存目录（默认 .cache/public-eval，不入库）")
    parser.add_argument("--archive-only", help="public：归档段只量这几局 LoCoMo 对话（逗号分隔的文件名，如 26,30）")


def _eval(args: argparse.Namespace) -> int:
    from liyuan.errors import LiyuanError

    deterministic = ["scorecards", "strategies", "snapshots"]
    which = {"default": deterministic, "all": deterministic}.get(args.what, [args.what])
    try:
        root = find_root(args.root)
        if args.what == "public":
            from .public import run_public

            run_public(root, args.locomo, args.madial, args.cache,
                       archive_only=args.archive_only.split(",") if args.archive_only else None)
            return 0
        files = results(root, [w for w in which if w != "bench"])
        if args.check:
            return _check(root, files)
        _write(root, files)
        if args.what in ("bench", "all"):
            from ..bench.overhead import run_bench

            run_bench(root, root / EVAL_DIR, sizes=args.sizes, sample=args.sample, repeat=args.repeat,
                      wall=not args.no_wall)
    except LiyuanError as exc:
        print(f"错误：{exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m harness eval``; returns the exit code."""
    return EVAL.main(argv)


EVAL = Subcommand("eval", "评分卡和策略对比（sim/eval/）",
                  "重新计算评分卡（每个运行目录一份）和四种策略的对比，写进 sim/eval/ 和文档的图；"
                  "只写内容变了的文件。--check 只比较不写；bench 另外测每轮开销（机器相关，单独提交）。",
                  _configure, _eval)
COMMANDS = (EVAL,)
