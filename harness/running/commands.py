"""The ``run``, ``check`` and ``diff`` subcommands (the work is in the runner and the review).

Exit codes: 0 success, 1 drift or a failed step or a run in which every model call failed
(each failed call is listed), 2 bad input (no project, unknown scenario, malformed file,
bad option).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .command import Subcommand, add_root_option, find_root
from .models import open_setup
from .progress import Progress
from .review import check, diff_against
from .runner import run_scenarios

__all__ = ["CHECK", "COMMANDS", "DIFF", "RUN"]

_FAILED_CALLS_SHOWN = 20


def _quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-q", "--quiet", action="store_true", help="不打印进度")


def _configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenarios", nargs="*", help="场景名（默认全部）")
    parser.add_argument("--model", default="scripted",
                        help="scripted（默认）、openai:<模型名>、local、replay:<录制目录>")
    parser.add_argument("--out", type=Path, default=None, help="输出目录（默认 sim/ 或 sim/runs/<模型>/）")
    parser.add_argument("--temperature", type=float, default=None, help="openai:<模型名> 的采样温度")
    parser.add_argument("--concurrency", type=int, default=1, metavar="N",
                        help="同时跑几个场景（接口允许并发请求时用；一个场景里的步骤仍按顺序，产物和顺序跑逐字节相同）")
    add_root_option(parser)
    _quiet(parser)


def _run(args: argparse.Namespace) -> int:
    root = find_root(args.root)
    progress = Progress(quiet=args.quiet)
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


def _configure_common(parser: argparse.ArgumentParser) -> None:
    add_root_option(parser)
    _quiet(parser)


def _check(args: argparse.Namespace) -> int:
    result = check(find_root(args.root), Progress(quiet=args.quiet))
    sys.stdout.write(result.report())
    return 0 if result.ok else 1


def _configure_diff(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ref", nargs="?", default="HEAD", help="和哪个 git 引用比（默认 HEAD）")
    _configure_common(parser)


def _diff(args: argparse.Namespace) -> int:
    text, _count = diff_against(find_root(args.root), args.ref, Progress(quiet=args.quiet))
    sys.stdout.write(text)
    return 0


RUN = Subcommand(
    "run", "运行场景，写出 sim/out、sim/turns 和 sim/txt",
    "经 liyuan 的 Card 和 Chat 把场景跑一遍，写出每一步的记录、每一轮的记录和文档引用的文本文件。"
    "默认用脚本回复写进 sim/；--model 换成真实模型时写进 sim/runs/<模型>/。",
    _configure_run, _run)
CHECK = Subcommand(
    "check", "重新生成到内存，和已提交的 sim/ 逐字节比较；并检查模版覆盖",
    "用脚本回复把全部场景重新跑一遍（不写任何文件），和已提交的 sim/out、sim/turns、sim/txt 逐字节比较，"
    "导入的场景再和重新导入的结果比较；另查每个模版、每个分支都在产物里出现过。"
    "有差异时，记录里的 prompt 按步骤和调用给出文本 diff（和 diff 子命令一样），其他文件给出 unified diff。"
    "一致时退出码 0，否则 1。",
    _configure_common, _check)
DIFF = Subcommand(
    "diff", "和某个 git 引用相比，按步骤列出 prompt 和产物的差异",
    "重新生成全部场景，和某个 git 引用（默认 HEAD）下提交的 sim/ 相比：按场景、步骤、调用列出 system、user "
    "和回复各自的文本 diff，再列出不同的 txt 文件和写它的步骤。审阅 prompt 改动用；不写任何文件。",
    _configure_diff, _diff)
COMMANDS = (RUN, CHECK, DIFF)
