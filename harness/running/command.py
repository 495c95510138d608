"""What every subcommand shares: its :class:`Subcommand` entry and the project root.

:class:`Subcommand` is how a module adds itself to ``python -m harness``: its name, help
line, description, the function that adds its options to a parser, and the function that
runs it. :mod:`harness.cli` imports only the module of the subcommand asked for.

The project root is the folder holding ``sim/scenarios/``. Invariant: no command writes
anywhere until the root is known: a ``--root`` without
``sim/scenarios/`` inside is refused, and with no ``--root`` the current folder and its
parents are searched, then the checkout this harness came from. When none holds a
project, :func:`find_root` raises :class:`~liyuan.errors.ConfigError` saying what to do;
nothing falls back to a folder beside an installed package.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from liyuan.errors import ConfigError

__all__ = ["NO_ROOT", "Subcommand", "add_root_option", "find_root", "is_root"]

NO_ROOT = ("找不到梨园的项目目录（含 sim/scenarios/ 的文件夹）：请在仓库的检出目录里运行，或用 --root 指定。"
           "模拟框架只随仓库提供，不在安装包里。")


def is_root(folder: Path) -> bool:
    """Whether ``folder`` holds a project (its ``sim/scenarios/``)."""
    return (folder / "sim" / "scenarios").is_dir()


def find_root(given: Path | None = None, *, start: Path | None = None) -> Path:
    """The project root: ``given`` when it is one, else the nearest one from ``start`` (cwd) up.

    Raises:
        ConfigError: ``given`` is not a project, or none was found.
    """
    if given is not None:
        root = given.expanduser().resolve()
        if not is_root(root):
            raise ConfigError(f"--root {given} 不是梨园的项目目录：里面没有 sim/scenarios/")
        return root
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_root(folder):
            return folder
    checkout = Path(__file__).resolve().parents[2]
    if is_root(checkout):
        return checkout
    raise ConfigError(NO_ROOT)


def add_root_option(parser: argparse.ArgumentParser) -> None:
    """``--root``: the project folder (default: found from the current folder)."""
    parser.add_argument("--root", type=Path, default=None,
                        help="项目目录（含 sim/scenarios/；默认从当前目录往上找）")


@dataclass(frozen=True)
class Subcommand:
    """One ``python -m harness <name>`` subcommand, defined by the module that runs it."""

    name: str
    help: str
    """One line for the list of subcommands."""
    description: str
    """What ``python -m harness <name> --help`` says first."""
    configure: Callable[[argparse.ArgumentParser], None]
    """Adds the subcommand's arguments and options."""
    run: Callable[[argparse.Namespace], int]
    """Runs it; returns the exit code."""

    def parser(self) -> argparse.ArgumentParser:
        """A parser of its own (``python -m harness <name>``)."""
        parser = argparse.ArgumentParser(prog=f"python -m harness {self.name}", description=self.description)
        self.configure(parser)
        return parser

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Parse ``argv`` (default: the process's) and run."""
        return self.run(self.parser().parse_args(list(sys.argv[1:] if argv is None else argv)))
