"""Per-beat overhead of the memory code, and wall times of ``harness run`` and ``mkdocs build``.

Invariant: this module measures and reports; it never asserts a speed. The model is
never timed: compaction calls go to the scripted summariser outside the timed region.

Per-beat overhead is what the memory code costs on every beat besides the model, done
the way the app does it: take the branch (:meth:`liyuan.session.tree.SessionTree.branch`, a
cached view), assemble the context (history, 【前情提要】, injection) with the resident
summary fitted to the budget (:func:`liyuan.context.assemble.assemble_turn`, one history read),
and, after the reply, the compaction trigger check
(:func:`liyuan.story.compact.plan_compaction`). It is measured over the last ``sample`` beats
of one chat of 100, 1,000 and 10,000 beats that compacts as the app would. The library
reads only the live part of the branch (see :mod:`liyuan.story.compact`), so the figure should
not grow with the chat.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from liyuan.clock import counter_ids
from liyuan.context.assemble import assemble_turn
from liyuan.session.entries import Entry
from liyuan.session.state import STATE_ENTRY_TYPE, format_roster, format_state, state_from_branch
from liyuan.session.tree import SessionTree
from liyuan.story.compact import plan_compaction, run_compaction

from .strategies import scripted_summariser
from .synth import SynthBeat, generate_chat

__all__ = ["RESIDENT", "VARIANT", "beat_work", "machine_info", "overhead_table", "percentile", "play", "wall_times"]

RESIDENT = "# 往局记忆（同一世界更早的几局）\n\n" + "\n\n".join(
    f"## 第{i}节\n" + "往局里发生过的一件事，写得短而具体。" * 6 for i in range(1, 9))
"""A resident summary over the 1200 cap, so the budget fit has real work to do."""

Progress = Callable[[str], None]

VARIANT = "library"
"""The one variant measured: the library as the app calls it (the key in rows and verdicts)."""


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def beat_work(branch: Sequence[Entry], user_text: str, names: tuple[str, str]) -> tuple[Any, ...]:
    """The per-beat memory work, on whatever sequence it is given; returns what it computed."""
    ledger = state_from_branch(branch)
    state_text, roster = format_state(ledger), format_roster(ledger)
    messages = assemble_turn(branch, user_text, resident_summary=RESIDENT, state_text=state_text, roster=roster)
    return messages, plan_compaction(branch, user_name=names[0], char_name=names[1])


def play(beats: int, progress: Progress | None = None) -> Iterator[tuple[SessionTree, SynthBeat, tuple[str, str]]]:
    """Play a synthetic chat of ``beats`` beats; yield the tree before each beat is written.

    Compaction runs when due, as in the app, with the scripted summariser.
    """
    chat = generate_chat(beats=max(beats, 60), reroll_beat=0)
    names = (chat.user_name, chat.char_name)
    model = scripted_summariser(*names)
    tree = SessionTree(None, session_id="bench", ids=counter_ids("b"))
    tree.append_message("assistant", chat.greeting, greeting=True)
    for beat in chat.beats[:beats]:
        yield tree, beat, names
        tree.append_message("user", beat.user)
        tree.append_message("assistant", beat.reply)
        tree.append_custom(STATE_ENTRY_TYPE, dict(beat.ledger))
        # Every beat, as the app does; the library decides whether it is due. Not timed.
        run_compaction(tree, model, user_name=names[0], char_name=names[1])
        if progress is not None and beat.number % 2000 == 0:
            progress(f"  第 {beat.number}/{beats} 轮")


def _timings(beats: int, sample: int, progress: Progress) -> list[float]:
    timings: list[float] = []
    for tree, beat, names in play(beats, progress):
        if beat.number <= beats - sample:
            continue
        started = time.perf_counter()
        beat_work(tree.branch(), beat.user, names)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def overhead_table(sizes: Sequence[int] = (100, 1000, 10000), sample: int = 100,
                   progress: Progress | None = None) -> dict[str, Any]:
    """Median and p95 of the per-beat overhead per chat length (ms), and the verdict."""
    say = progress or (lambda _line: None)
    rows: list[dict[str, Any]] = []
    medians: dict[int, float] = {}
    for size in sizes:
        say(f"每轮开销：{size} 轮")
        timings = _timings(size, min(sample, size), say)
        medians[size] = round(statistics.median(timings), 3)
        rows.append({"variant": VARIANT, "beats": size, "samples": len(timings),
                     "median_ms": medians[size], "p95_ms": round(percentile(timings, 95), 3)})
    verdicts = {}
    if 10000 in medians and 100 in medians:
        big, small = medians[10000], medians[100]
        verdicts[VARIANT] = {"median_10000_ms": big, "ratio_to_100": round(big / small, 2),
                             "meets_target": big <= 2.0 and big <= 1.5 * small}
    return {"sample_beats": sample, "rows": rows, "target": "10,000 轮时中位数 ≤ 2 ms，且不超过 100 轮时的 1.5 倍",
            "verdicts": verdicts}


def _timed(command: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    result = subprocess.run(list(command), cwd=cwd, env={**os.environ, **(env or {})},
                            capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
    return {"command": " ".join(command), "seconds": round(seconds, 2), "exit_code": result.returncode,
            "tail": tail if result.returncode else []}


def wall_times(root: Path, *, repeat: int = 3,
               commands: Sequence[str] = ("harness run", "mkdocs build")) -> dict[str, Any]:
    """Wall time of ``python -m harness run`` (all scenarios) and ``mkdocs build --strict``.

    Both write into a temporary folder, never into the repository; the best of
    ``repeat`` runs is reported beside every run, and a failing run with its last lines.
    """
    rows = []
    with tempfile.TemporaryDirectory(prefix="liyuan-walltime-") as tmp:
        known: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "harness run": ([sys.executable, "-m", "harness", "run", "-q", "--out", f"{tmp}/sim"], None),
            "mkdocs build": ([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", f"{tmp}/site"],
                             {"NO_MKDOCS_2_WARNING": "1"}),
        }
        for name in commands:
            command, env = known[name]
            runs = [_timed(command, root, env) for _ in range(repeat)]
            ok = [r["seconds"] for r in runs if r["exit_code"] == 0]
            shown = runs[0]["command"].replace(tmp, "<临时目录>").replace(sys.executable, "python")
            rows.append({"name": name, "command": shown,
                         "seconds": [r["seconds"] for r in runs], "best": min(ok) if ok else None,
                         "failures": [r["tail"] for r in runs if r["exit_code"]]})
    return {"repeat": repeat, "rows": rows}


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on, and when."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"measured_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "cpu": cpu,
            "cores": os.cpu_count(), "python": platform.python_version(),
            "system": f"{platform.system()} {platform.release()}"}
