"""Per-turn overhead of the memory code, and wall times of ``harness run`` and ``mkdocs build``.

Invariant: this module measures and reports; it never asserts a speed. The model is
never timed: compaction calls go to the scripted summariser outside the timed region.

Per-turn overhead is what the memory code costs on every turn besides the model, timed
on the app's own path: :meth:`liyuan.Chat.prepare` (append the user's words, assemble the
context with the resident summary fitted to the budget, the turn's record) and
:meth:`liyuan.Chat.record` (append the reply and the ledger; the card runs its memory
work on the chat's background lane, as in the app, so the compaction check and a due
compaction are not on the turn's path and are waited for outside the timed region). It
is measured over the last ``sample`` turns of one chat of 100, 1,000 and 10,000 turns
that compacts as the app would, in a card folder on a RAM disk where there is one (the
session file's fsync is the disk's cost, not the library's). The library reads only the
live part of the branch (see :mod:`liyuan.story.compact`), so the figure should not grow
with the chat.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from liyuan.app import Card, Chat, Turn
from liyuan.card.files import write_memory_file
from liyuan.clock import counter_ids, fixed_clock
from liyuan.session.state import Ledger

from ..eval.scripted import scripted_summariser
from ..fixtures.synth import SynthTurn, generate_chat
from ..running.runfolder import work_base

__all__ = [
    "RESIDENT",
    "VARIANT",
    "overhead_table",
    "percentile",
    "play",
    "run_bench",
    "turn_work",
    "wall_times",
]

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


def turn_work(chat: Chat, turn: SynthTurn) -> Turn:
    """One turn's memory work as the app does it: prepare the turn, record the reply; returns the turn."""
    prepared = chat.prepare(turn.user)
    chat.record(turn.reply, ledger=Ledger.from_dict(turn.ledger))
    return prepared


@contextmanager
def _card(background: bool) -> Iterator[Card]:
    folder = Path(tempfile.mkdtemp(prefix="liyuan-bench-", dir=work_base()))
    try:
        chat = generate_chat(turns=60, reroll_turn=0)
        with Card.open(folder / "card", side_model=scripted_summariser(chat.user_name, chat.char_name),
                       user_name=chat.user_name, char_name=chat.char_name, background=background,
                       clock=fixed_clock(), ids=counter_ids("b"), auto_sync=False) as card:
            # The resident summary a sync would have merged: written where the card keeps it.
            write_memory_file(card.memory.layout.resident, RESIDENT)
            yield card
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def play(turns: int, progress: Progress | None = None, *,
         background: bool = True) -> Iterator[tuple[Chat, SynthTurn]]:
    """Play a synthetic chat of ``turns`` turns through a card; yield the chat before each turn.

    The caller plays the turn (:func:`turn_work`); compaction runs when due, as in the
    app, with the scripted summariser. With ``background`` (the app's default) the chat's
    memory work is awaited before the next turn is yielded, outside anything the caller times.
    """
    chat_def = generate_chat(turns=max(turns, 60), reroll_turn=0)
    with _card(background) as card:
        chat = card.chat("bench", greeting=chat_def.greeting)
        for turn in chat_def.turns[:turns]:
            chat.flush()
            yield chat, turn
            if progress is not None and turn.number % 2000 == 0:
                progress(f"  第 {turn.number}/{turns} 轮")
        chat.flush()


def _timings(turns: int, sample: int, progress: Progress) -> list[float]:
    timings: list[float] = []
    for chat, turn in play(turns, progress):
        if turn.number <= turns - sample:
            turn_work(chat, turn)
            continue
        started = time.perf_counter()
        turn_work(chat, turn)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def overhead_table(sizes: Sequence[int] = (100, 1000, 10000), sample: int = 100,
                   progress: Progress | None = None) -> dict[str, Any]:
    """Median and p95 of the per-turn overhead per chat length (ms), and the verdict."""
    say = progress or (lambda _line: None)
    rows: list[dict[str, Any]] = []
    medians: dict[int, float] = {}
    for size in sizes:
        say(f"每轮开销：{size} 轮")
        timings = _timings(size, min(sample, size), say)
        medians[size] = round(statistics.median(timings), 3)
        rows.append({"variant": VARIANT, "turns": size, "samples": len(timings),
                     "median_ms": medians[size], "p95_ms": round(percentile(timings, 95), 3)})
    verdicts = {}
    if 10000 in medians and 100 in medians:
        big, small = medians[10000], medians[100]
        verdicts[VARIANT] = {"median_10000_ms": big, "ratio_to_100": round(big / small, 2),
                             "meets_target": big <= 2.0 and big <= 1.5 * small}
    return {"sample_turns": sample, "rows": rows, "target": "10,000 轮时中位数 ≤ 2 ms，且不超过 100 轮时的 1.5 倍",
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


def run_bench(root: Path, out: Path, *, sizes: Sequence[int] = (100, 1000, 10000), sample: int = 100,
              repeat: int = 3, wall: bool = True) -> dict[str, Any]:
    """Measure, print the tables, write ``bench.json`` and ``bench.md`` into ``out``.

    ``python -m harness bench --only overhead`` (``nox -s bench``) calls it; ``python -m
    harness eval bench`` calls it with ``out = sim/eval`` to refresh the committed snapshot.

    Args:
        root: The repository root (``harness run`` and ``mkdocs build`` run there).
        out: Folder for the two files.
        sizes: Chat lengths (turns) for the per-turn overhead.
        sample: Timed turns at the end of each chat.
        repeat: Runs of each wall-time command.
        wall: Also time ``harness run`` and ``mkdocs build``.

    Returns:
        The measurements (machine, overhead, wall times).
    """
    from ..eval.report import bench_markdown
    from ..eval.snapshots import write_snapshot
    from .stamp import close_stamp, stamp

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    machine = stamp(root)
    bench: dict[str, Any] = {"overhead": overhead_table(sizes, sample, progress)}
    if wall:
        progress("整体用时：harness run、mkdocs build …")
        bench["wall_times"] = wall_times(root, repeat=repeat)
    bench = {"machine": close_stamp(machine), **bench}
    print(bench_markdown(bench))
    write_snapshot(root, "bench", bench, out)
    return bench
