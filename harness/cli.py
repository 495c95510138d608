"""``python -m harness``: one dispatch over the subcommands their modules define.

Invariant: each subcommand is a :class:`~harness.running.command.Subcommand` defined in
the module that runs it (its parser included); this module only knows where each lives
and imports just the one asked for, so ``run`` never loads the bench's dependencies.
Exit codes: 0 success, 1 drift or a failed step, 2 bad input (no project found,
unknown scenario, malformed file, bad option).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["SUBCOMMANDS", "main"]

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("harness.running.commands", "运行场景，写出 sim/out、sim/turns 和 sim/txt"),
    "check": ("harness.running.commands", "重新生成，和已提交的 sim/ 逐字节比较；并检查模版覆盖"),
    "diff": ("harness.running.commands", "和某个 git 引用相比，按步骤列出 prompt 和产物的差异"),
    "import": ("harness.importer", "把已有的聊天记录导入成场景"),
    "eval": ("harness.eval", "评分卡和策略对比（sim/eval/）"),
    "bench": ("harness.bench", "基准：召回、延迟、token 估算、每轮开销、导入"),
    "compare": ("harness.compare", "把几次运行的回复和评分并排写进一个文件"),
}
"""Subcommand name to (module defining it, help line); the module's ``COMMANDS`` hold the rest."""


def _parser(chosen: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description="梨园记忆的模拟框架")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(SUBCOMMANDS) + "}")
    for name, (module, help_line) in SUBCOMMANDS.items():
        if name != chosen:
            sub.add_parser(name, help=help_line)
            continue
        command = next(c for c in importlib.import_module(module).COMMANDS if c.name == name)
        real = sub.add_parser(name, help=command.help, description=command.description)
        command.configure(real)
        real.set_defaults(handler=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m harness``; returns the exit code."""
    from liyuan.errors import LiyuanError

    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = next((word for word in argv if word in SUBCOMMANDS), None)
    args = _parser(chosen).parse_args(argv)
    try:
        return int(args.handler(args))
    except LiyuanError as exc:
        print(f"错误：{exc}", file=sys.stderr)
        return 2
