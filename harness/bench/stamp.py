"""The stamp every committed measurement carries: which code, when, on what, how busy.

A figure the site quotes is read from a committed snapshot (``sim/eval/<name>.json``)
whose ``machine`` block is a stamp: the commit measured (and whether the work tree had
uncommitted changes), the time in UTC, the processor, cores, Python and system, and the
one-minute load average when the measurement began and when it ended. The page shows
:func:`stamp_line` above the figures, so a reader sees how much a number is worth.

Invariant: a stamp is taken when the measurement starts (:func:`stamp`) and closed when it
ends (:func:`close_stamp`); nothing in it is typed by hand.
"""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["close_stamp", "git_commit", "load_average", "stamp", "stamp_line"]


def load_average() -> float | None:
    """The one-minute load average, or ``None`` where the system has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def git_commit(root: Path) -> tuple[str, bool]:
    """``(short hash of HEAD, work tree dirty)``; ``("unknown", True)`` outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        # The snapshots a run writes (sim/eval/) are its output, not the code it measures.
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!sim/eval"],
                               cwd=root, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown", True
    return head, bool(dirty)


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def stamp(root: Path) -> dict[str, Any]:
    """What is about to be measured, on what, and when (the load is the one at the start)."""
    commit, dirty = git_commit(root)
    return {"measured_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit, "dirty": dirty,
            "cpu": _cpu(), "cores": os.cpu_count(), "python": platform.python_version(),
            "system": f"{platform.system()} {platform.release()}", "load_start": load_average(),
            "load_end": None}


def close_stamp(machine: dict[str, Any]) -> dict[str, Any]:
    """The stamp with the load at the end of the measurement."""
    return {**machine, "load_end": load_average()}


def _load(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def stamp_line(machine: dict[str, Any]) -> str:
    """One Chinese sentence: when, which commit, on what, how busy; shown above the figures."""
    commit = machine.get("commit", "unknown")
    dirty = "（工作区另有未提交的改动）" if machine.get("dirty") else ""
    return (f"测量于 {machine['measured_at']}，提交 `{commit}`{dirty}，{machine['cpu']}（{machine['cores']} 核），"
            f"Python {machine['python']}，{machine['system']}；一分钟 load 开始时 {_load(machine.get('load_start'))}、"
            f"结束时 {_load(machine.get('load_end'))}。数字随机器和负载而变，这是一份快照。")
