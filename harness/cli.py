"""``python -m harness``: run, check, diff, and the bench/eval entry points.

Invariant: the CLI only parses arguments and reports; the work happens in
:mod:`harness.running.runner` and :mod:`harness.running.review`. Exit codes: 0 success, 1 drift or a
failed step or a run in which every model call failed (each failed call is
listed), 2 bad input (unknown scenario, malformed file, bad option).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from liyuan.errors import LiyuanError

from .running.models import open_setup
from .running.progress import Progress
from .running.review import check, diff_against
from .running.runner import run_scenarios

__all__ = ["default_root", "main"]

_FAILED_CALLS_SHOWN = 20


def default_root() -> Path:
    """The repository root: the folder holding ``sim/scenarios`` (cwd first, then the package's)."""
    cwd = Path.cwd()
    if (cwd / "sim" / "scenarios").is_dir():
        return cwd
    return Path(__file__).resolve().parent.parent


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description="梨园记忆的模拟框架")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", type=Path, default=None, help="仓库根目录（默认自动找）")
    common.add_argument("-q", "--quiet", action="store_true", help="不打印进度")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", parents=[common], help="运行场景，写出 sim/out 和 sim/txt")
    run.add_argument("scenarios", nargs="*", help="场景名（默认全部）")
    run.add_argument("--model", default="scripted",
                     help="scripted（默认）、openai:<模型名>、local、replay:<录制目录>")
    run.add_argument("--out", type=Path, default=None, help="输出目录（默认 sim/ 或 sim/runs/<模型>/）")
    run.add_argument("--temperature", type=float, default=None, help="openai:<模型名> 的采样温度")
    run.add_argument("--concurrency", type=int, default=1, metavar="N",
                     help="同时跑几个场景（接口允许并发请求时用；一个场景里的步骤仍按顺序，产物和顺序跑逐字节相同）")
    sub.add_parser("check", parents=[common], help="重新生成到临时目录，和已提交的 sim/ 逐字节比较")
    diff = sub.add_parser("diff", parents=[common], help="和某个 git 引用相比，按步骤列出 prompt 和产物的差异")
    diff.add_argument("ref", nargs="?", default="HEAD")
    sub.add_parser("import", help="把已有的聊天记录导入成场景（harness.importer）", add_help=False)
    sub.add_parser("bench", help="基准测试（harness.bench）", add_help=False)
    sub.add_parser("eval", help="评分卡（harness.eval）", add_help=False)
    sub.add_parser("compare", help="几次运行的回复和评分并排（harness.compare）", add_help=False)
    return parser


def _dispatch(module: str, argv: Sequence[str]) -> int:
    """Hand the rest of the command line to ``harness.<module>.main`` if it exists."""
    name = f"harness.{module}"
    if importlib.util.find_spec(name) is None:
        print(f"{name} 还不存在：这个子命令由另一个模块提供，目前没有安装。", file=sys.stderr)
        return 2
    entry = getattr(importlib.import_module(name), "main", None)
    if entry is None:
        print(f"{name} 没有 main(argv) 入口。", file=sys.stderr)
        return 2
    return int(entry(list(argv)) or 0)


def _run(args: argparse.Namespace, root: Path, progress: Progress) -> int:
    started = time.perf_counter()
    with open_setup(args.model, root, temperature=args.temperature) as setup:
        report = run_scenarios(args.scenarios, root=root, setup=setup,
                               out_base=args.out.resolve() if args.out else None, progress=progress,
                               concurrency=args.concurrency)
    seconds = time.perf_counter() - started
    base = report.out_base
    shown = base.relative_to(root).as_posix() if base.is_relative_to(root) else str(base)
    if report.written:
        print(f"写出 {len(report.artifacts)} 个文件到 {shown}/（{report.calls} 次模型调用，{seconds:.2f} s）")
    else:
        print(f"有步骤失败，没有写入 {shown}/（用 --out 指定别的目录可以看失败时的产物）", file=sys.stderr)
    if report.artifacts.scrubbed:
        print(f"警告：这些文件里出现了密钥，已隐去：{'、'.join(sorted(set(report.artifacts.scrubbed)))}",
              file=sys.stderr)
    shown_calls = report.failed_calls[:_FAILED_CALLS_SHOWN]
    for call in shown_calls:
        print(f"模型调用失败：{call}", file=sys.stderr)
    if len(report.failed_calls) > len(shown_calls):
        print(f"……另有 {len(report.failed_calls) - len(shown_calls)} 次模型调用失败", file=sys.stderr)
    for failure in report.failures:
        print(f"失败：{failure}", file=sys.stderr)
    return 1 if report.failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m harness``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # bench/eval/compare/import take their own options: pass everything after the subcommand through.
    for position, word in enumerate(argv):
        if word in ("bench", "eval", "compare", "import"):
            return _dispatch("importer" if word == "import" else word, argv[position + 1:])
        if not word.startswith("-"):
            break
    args = _parser().parse_args(argv)
    root = (args.root or default_root()).resolve()
    progress = Progress(quiet=args.quiet)
    try:
        if args.command == "run":
            return _run(args, root, progress)
        if args.command == "check":
            result = check(root, progress)
            sys.stdout.write(result.report())
            return 0 if result.ok else 1
        if args.command == "diff":
            text, _count = diff_against(root, args.ref, progress)
            sys.stdout.write(text)
            return 0
    except LiyuanError as exc:
        print(f"错误：{exc}", file=sys.stderr)
        return 2
    return 2
