"""The long-chat series (``python -m harness bench --only long``, issue 24).

Measured from outside, through :class:`liyuan.Card` and :class:`liyuan.Chat`, with an
instant scripted side model (its replies are made by rule: :func:`harness.eval.scripted.scripted_summariser`,
labelled scripted) and, with vector memory on, the instant hashing embedder, so only the
library's own cost counts:

- per-turn foreground (``prepare()`` + ``record()``, median and p95 over the last turns)
  at 100, 1,000, 10,000 and 100,000 turns; vector memory off and on; with a ledger
  snapshot every turn and without;
- a cold open in a fresh process: ``Card.open`` + ``card.chat`` to the first
  ``prepare()`` returning, its peak memory against the session file's size, and whether
  the first recall after the open returned hits (vector on);
- recall at a store's maximum cap (50,000 chunks; 5,000 in ``--quick``): the first
  recall after a cold open, then p50/p95 warm;
- a sync with nothing to do at 10, 100 and 500 chats;
- back-to-back turns with a side model that takes 200 ms (:mod:`harness.bench.backtoback`):
  a 10,000-turn chat (1,000 in ``--quick``) grown by 1,000 turns (300), with no time
  between a turn's ``prepare`` and ``record`` and with 10 ms.

The chats are written straight to their session files as the app would have left them
(:mod:`harness.bench.longchat`).
Every figure is printed beside its ratio to the smallest size: the machine is shared,
so the ratios within one run are what matter. The chats sit on a memory disk when there
is one, and the disk's fsync is printed apart (see :func:`long_table`).

Invariant: nothing here asserts a target; it measures, reports and says when a target is missed.

The cold-open figures before and after the lazy session loader and the one-branch
shortcut (issue 24: 100,000 turns, 6.1-6.5 s -> 1.4 s idle, peak growth 7.2x -> 1.2x the
file) and where the remaining time goes are in ``docs/eval.md#long-open``.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from liyuan import Card, CardStorage, MemoryConfig
from liyuan.card.files import MemoryFiles, sha1_text
from liyuan.card.layout import CardLayout
from liyuan.card.manifest import Manifest, save_manifest
from liyuan.card.sessions import source_mark_of
from liyuan.card.sync import CardMemory
from liyuan.clock import IdFactory, counter_ids
from liyuan.session.state import Ledger
from liyuan.vector.config import VectorConfig

from ..eval.scripted import scripted_summariser
from .backtoback import back_to_back, print_back_to_back
from .longchat import (
    CHAR,
    PLACES,
    USER,
    build_chat,
    fill_store,
    ledger_of,
    memory_config,
    replies_on_branch,
    reply,
)
from .overhead import percentile

__all__ = ["FULL_SIZES", "QUICK_SIZES", "cold_open", "long_table", "per_turn", "print_long", "sync_no_change"]

FULL_SIZES = (100, 1000, 10000, 100000)
QUICK_SIZES = (100, 1000, 10000)
SYNC_CHATS = (10, 100, 500)
QUICK_SYNC_CHATS = (10, 100)
TURNS = 100
"""Timed turns per size and variant (after three untimed): at about a millisecond a turn,
40 let one busy moment of the machine move a median by half."""
OPEN_REPEAT = 3
"""Cold opens per size (the median is shown, every run kept in ``open_s_runs``)."""
TURN_REPEAT = 3
"""Runs of :data:`TURNS` timed turns per size and variant, each in a freshly opened card: the
median of their medians (and of their p95s) is shown, every run kept in ``runs``. One run
is one draw of a shared machine's noise: on an idle machine the first run at 100,000
turns once gave a median of 1.21 ms and the next two 0.65 and 0.68."""
Progress = Callable[[str], None]

def per_turn(card_dir: Path, chat_id: str, *, vector: bool, ledger: bool, ids: IdFactory,
             turns: int, storage: CardStorage | None = None) -> dict[str, float]:
    """Median and p95 (ms) of ``prepare()`` + ``record()`` over ``turns`` turns after a warm-up
    (``storage``: where the card's state is, closed with the card; default its folder)."""
    config = memory_config(vector)
    with Card.open(card_dir, side_model=scripted_summariser(USER, CHAR), config=config, user_name=USER,
                   char_name=CHAR, ids=ids, storage=storage) as card:
        chat = card.chat(chat_id)
        card.flush()
        if chat.vector is not None:
            chat.vector.warm()
        times = []
        for turn in range(turns + 3):
            started = time.perf_counter()
            chat.prepare(f"第{turn}次追问：那把青伞是谁留下的？")
            chat.record(reply(turn), ledger=Ledger.from_dict(ledger_of(turn)) if ledger else None)
            if turn >= 3:
                times.append((time.perf_counter() - started) * 1000)
        card.flush()
    return {"p50_ms": statistics.median(times), "p95_ms": percentile(times, 95)}


def _rss_kb() -> int:
    """This process's resident memory now, in KiB (Linux ``/proc``; else the peak so far)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _peak_kb() -> int:
    """This process's peak resident memory, in KiB: ``VmHWM`` of its own image (Linux).

    Not ``ru_maxrss``: Linux carries that across ``exec`` from the process that forked,
    so a child of a bench that has just run a 100,000-turn chat in-process reports the
    parent's peak as its own (the cold open then read 265 MB where it used 118).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _open_child(card_dir: Path, chat_id: str, vector: bool, cap: int) -> dict[str, Any]:
    """Runs in a fresh process: open, first prepare, peak memory; then recalls (vector on)."""
    from liyuan.vector.recall import branch_ids_of, recall_for_turn

    base = _rss_kb()
    started = time.perf_counter()
    card = Card.open(card_dir, side_model=scripted_summariser(USER, CHAR), config=memory_config(vector, cap),
                     user_name=USER, char_name=CHAR, ids=counter_ids(f"open{os.getpid()}-"))
    chat = card.chat(chat_id)
    turn = chat.prepare("那把青伞是谁留下的？")
    first = time.perf_counter() - started
    result: dict[str, Any] = {"open_s": first, "first_recall_hits": len(turn.recall)}
    chat.record("（脚本回复）她没有回答。")
    card.flush()
    result["peak_mb"] = _peak_kb() / 1024
    result["base_mb"] = base / 1024
    if chat.vector is not None:
        # Warm means the keyword index the open started loading in the background is done.
        # Not lexical_ready(): that is per snapshot, and the reply's ingest makes a new one,
        # whose index the next recall appends to the loaded postings (the old wait never
        # ended when the ingest landed after the load).
        tokenizer = chat.vector.config.lexical_tokenizer
        while chat.vector.store.snapshot().lexical_pending(tokenizer) and time.perf_counter() - started < 600:
            time.sleep(0.2)
        result["ready_s"] = time.perf_counter() - started
        times = []
        ids = branch_ids_of(chat.branch())
        for i in range(40):
            query = f"第{i * 37}个夜里在{PLACES[i % 6]}见过谁"
            t0 = time.perf_counter()
            recall_for_turn(chat.vector, query, ids)
            times.append((time.perf_counter() - t0) * 1000)
        result["recall_p50_ms"] = statistics.median(times)
        result["recall_p95_ms"] = percentile(times, 95)
    card.close()
    return result


def cold_open(card_dir: Path, chat_id: str, *, vector: bool, cap: int = 5000, repeat: int = 1) -> dict[str, Any]:
    """:func:`_open_child` in ``repeat`` fresh processes, one after another: the JSON result
    of the run with the median open time, with every run's time in ``open_s_runs`` (one
    sample on a shared machine is one draw of its noise)."""
    root = Path(__file__).resolve().parents[2]  # the checkout: harness/bench/long.py -> ../..
    env = {**os.environ, "PYTHONPATH": str(root)}
    runs: list[dict[str, Any]] = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-m", "harness.bench.long", "open", str(card_dir), chat_id, str(int(vector)), str(cap)],
            capture_output=True, text=True, check=False, env=env, cwd=root)
        if out.returncode != 0:
            raise RuntimeError(f"冷启动子进程失败：{out.stderr[-2000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    result = sorted(runs, key=lambda run: run["open_s"])[len(runs) // 2]
    result["open_s_runs"] = [run["open_s"] for run in runs]
    return result


def sync_no_change(folder: Path, chats: int, repeat: int = 5) -> dict[str, float]:
    """A card of ``chats`` small chats, all recapped and merged: time a sync with nothing to do."""
    card_dir = folder / f"sync-{chats}"
    layout = CardLayout(card_dir)
    files = MemoryFiles(layout)
    manifest = Manifest()
    layout.recaps_dir.mkdir(parents=True, exist_ok=True)
    for index in range(chats):
        chat_id = f"c{index:04d}"
        build_chat(card_dir, chat_id, 12, ledger=True, seed=index)
        text = f"# 第{index}局\n\n- （脚本复盘，非模型输出）{reply(index)}\n"
        layout.recap_path(chat_id).write_text(text, encoding="utf-8")
        record = manifest.record(chat_id)
        record.source_mark = source_mark_of(layout.sessions_dir(chat_id))
        record.recap_at = "2026-01-01T00:00:00+00:00"
        record.merged_hash = sha1_text(text)
    layout.handbook.write_text("# 记忆\n\n（脚本手册）\n", encoding="utf-8")
    layout.resident.write_text("（脚本常驻摘要）\n", encoding="utf-8")
    save_manifest(files, manifest)
    memory = CardMemory(card_dir, scripted_summariser(USER, CHAR), MemoryConfig().sync_settings(USER, CHAR))
    first = memory.sync()
    if first.recapped or first.merged != "no-change":
        raise RuntimeError(f"同步基准的卡不是“无事可做”的状态：{first}")
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        memory.sync()
        times.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": statistics.median(times)}


def fsync_ms(folder: Path, count: int = 30) -> float:
    """Median time of one appended line plus its fsync in ``folder`` (the disk's share of a turn)."""
    path = folder / "fsync-probe.jsonl"
    times = []
    with open(path, "ab") as out:
        for i in range(count):
            t0 = time.perf_counter()
            out.write(f'{{"n":{i}}}\n'.encode())
            out.flush()
            os.fsync(out.fileno())
            times.append((time.perf_counter() - t0) * 1000)
    path.unlink()
    return statistics.median(times)


def long_table(folder: Path, *, quick: bool, progress: Progress, sizes: Sequence[int] | None = None,
               turns: int | None = None) -> dict[str, Any]:
    """Every measurement of the series, as data (see the module docstring).

    The chats live on a memory disk (``/dev/shm``) when there is one: an fsync on this
    shared machine's disk takes 1 to 40 ms at random and would drown the library's own
    cost, which is what the ratios are about. The disk's fsync is measured apart
    (``fsync_ms``, in ``folder``): a turn costs two or three of them with the default
    ``durability="entry"``, one with ``"turn"``, at every length.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        import shutil
        import tempfile

        disk = tempfile.mkdtemp(prefix="liyuan-long-", dir=shm)
        try:
            table = _long_table(Path(disk), quick=quick, progress=progress, sizes=sizes, timed=turns)
        finally:
            shutil.rmtree(disk, ignore_errors=True)
        table["where"] = "内存盘 /dev/shm"
    else:
        table = _long_table(folder, quick=quick, progress=progress, sizes=sizes, timed=turns)
        table["where"] = "临时目录"
    table["fsync_ms"] = fsync_ms(folder)
    return table


def _long_table(folder: Path, *, quick: bool, progress: Progress, sizes: Sequence[int] | None,
                timed: int | None) -> dict[str, Any]:
    sizes = tuple(sizes or (QUICK_SIZES if quick else FULL_SIZES))
    timed = timed or (15 if quick else TURNS)
    turns: dict[str, dict[str, Any]] = {}
    opens: dict[str, dict[str, Any]] = {}
    for size in sizes:
        for ledger in (False, True):
            card_dir = folder / f"long-{size}-{int(ledger)}"
            progress(f"长对话：写 {size} 轮的会话（账本{'有' if ledger else '无'}）…")
            path, ids = build_chat(card_dir, "long", size, ledger=ledger)
            fill_store(card_dir, "long", VectorConfig(enabled=True), min(5000, max(1, size // 3)),
                        replies_on_branch(path))
            for vector in (False, True):
                key = f"向量{'开' if vector else '关'}·账本{'有' if ledger else '无'}"
                progress(f"长对话：{size} 轮，{key}，每轮用时 …")
                runs = [per_turn(card_dir, "long", vector=vector, ledger=ledger, ids=ids, turns=timed)
                        for _ in range(TURN_REPEAT)]
                turns.setdefault(key, {})[str(size)] = {
                    "p50_ms": statistics.median(run["p50_ms"] for run in runs),
                    "p95_ms": statistics.median(run["p95_ms"] for run in runs),
                    "runs": [[run["p50_ms"], run["p95_ms"]] for run in runs]}
            if ledger:
                for vector in (False, True):
                    progress(f"长对话：{size} 轮，冷启动（向量{'开' if vector else '关'}）…")
                    row = cold_open(card_dir, "long", vector=vector, repeat=OPEN_REPEAT)
                    row["file_mb"] = path.stat().st_size / 2**20
                    opens.setdefault(f"向量{'开' if vector else '关'}", {})[str(size)] = row
    cap = 5000 if quick else 50000
    progress(f"召回：{cap} 段的库，冷启动后的第一次召回和热召回 …")
    cap_dir = folder / "cap"
    path, _ids = build_chat(cap_dir, "cap", 3000, ledger=True)
    fill_store(cap_dir, "cap", memory_config(True, cap).vector, cap, replies_on_branch(path))
    at_cap = cold_open(cap_dir, "cap", vector=True, cap=cap)
    syncs: dict[str, Any] = {}
    for chats in (QUICK_SYNC_CHATS if quick else SYNC_CHATS):
        progress(f"同步：{chats} 局、无事可做的一次同步 …")
        syncs[str(chats)] = sync_no_change(folder, chats)
    loops = []
    for gap in (0.0, 10.0):
        progress(f"连着走：旁路模型每次 200 ms，两轮之间 {gap:g} ms …")
        loops.append(back_to_back(folder, turns=1000 if quick else 10000, played=300 if quick else 1000, gap_ms=gap))
    return {"sizes": list(sizes), "timed_turns": timed, "turns": turns, "open": opens,
            "recall_at_cap": {"chunks": cap, **at_cap}, "sync": syncs, "back_to_back": loops}


def _ratio_row(label: str, values: list[float], unit: str) -> str:
    base = values[0] if values and values[0] > 0 else 0.0
    cells = "".join(f"{v:>10.2f}{unit}" for v in values)
    ratios = "".join(f"{(v / base if base else float('nan')):>8.2f}×" for v in values)
    return f"{label:<16}{cells}   {ratios}"


def print_long(table: dict[str, Any]) -> None:
    """The series side by side, each row with its ratios to the smallest size; the targets' verdicts."""
    sizes = [str(s) for s in table["sizes"]]
    head = "".join(f"{s:>12}" for s in sizes)
    print(f"\n长对话：每轮前台用时（prepare + record，中位数 / p95，{table['timed_turns']} 轮；"
          "右侧为相对最小规模的倍数；"
          f"会话在{table['where']}上，磁盘的 fsync 另计：每次 {table['fsync_ms']:.1f} ms，默认每轮 2–3 次）")
    print(f"{'':<16}{head}")
    worst = 0.0
    for key, row in table["turns"].items():
        p50 = [row[s]["p50_ms"] for s in sizes]
        print(_ratio_row(key + " p50", p50, "ms"))
        print(_ratio_row(key + " p95", [row[s]["p95_ms"] for s in sizes], "ms"))
        worst = max(worst, p50[-1] / p50[0] if p50[0] else 0.0)
    print(f"目标：最大规模每轮 ≤ 最小规模的 1.5 倍 → {'达标' if worst <= 1.5 else '未达标'}（最差 {worst:.2f}×）")
    print(f"\n冷启动：打开到第一次 prepare() 返回（新进程，每个规模 {OPEN_REPEAT} 次取中位数）")
    for key, row in table["open"].items():
        print(_ratio_row(f"{key} 秒", [row[s]["open_s"] for s in sizes], "s "))
        print(_ratio_row(f"{key} 峰值", [row[s]["peak_mb"] - row[s]["base_mb"] for s in sizes], "MB"))
        print(f"{'  会话文件':<16}" + "".join(f"{row[s]['file_mb']:>10.2f}MB" for s in sizes))
        print("  每次（秒）  " + "；".join(
            f"{s} 轮 " + "/".join(f"{t:.2f}" for t in row[s].get("open_s_runs", [row[s]["open_s"]])) for s in sizes))
        if key == "向量开":
            print(f"{'  首次召回条数':<16}" + "".join(f"{row[s]['first_recall_hits']:>12}" for s in sizes))
    big = table["open"].get("向量关", {}).get(sizes[-1])
    if big:
        grown = big["peak_mb"] - big["base_mb"]
        verdict = "达标" if big["open_s"] < 1.5 else "未达标"
        print(f"目标：{sizes[-1]} 轮打开 < 1.5 s → {verdict}（{big['open_s']:.2f} s）；"
              f"峰值内存增量 < 1.5 × 文件 → {'达标' if grown < 1.5 * big['file_mb'] else '未达标'}"
              f"（{grown:.0f} MB 对 {big['file_mb']:.0f} MB）")
    cap = table["recall_at_cap"]
    print(f"\n召回（{cap['chunks']} 段的库，新进程）：打开到首次 prepare {cap['open_s']:.2f} s，首次召回 "
          f"{cap['first_recall_hits']} 条；关键词索引 {cap['ready_s']:.1f} s 载完；"
          f"之后热召回 p50 {cap['recall_p50_ms']:.1f} ms，p95 {cap['recall_p95_ms']:.1f} ms")
    print(f"目标：p95 < 100 ms 且首次召回有结果 → "
          f"{'达标' if cap['recall_p95_ms'] < 100 and cap['first_recall_hits'] else '未达标'}")
    chats = list(table["sync"])
    values = [table["sync"][c]["p50_ms"] for c in chats]
    print("\n无事可做的同步（中位数）")
    print(f"{'':<16}" + "".join(f"{c + '局':>12}" for c in chats))
    print(_ratio_row("同步", values, "ms"))
    if "500" in table["sync"]:
        ok = table["sync"]["500"]["p50_ms"] < 300
        print(f"目标：500 局 < 300 ms → {'达标' if ok else '未达标'}（{table['sync']['500']['p50_ms']:.0f} ms）")
    if table.get("back_to_back"):
        print_back_to_back(table["back_to_back"])


def main(argv: list[str]) -> int:
    """The child entry point: ``open <card> <chat> <vector 0|1> <cap>``."""
    if len(argv) == 5 and argv[0] == "open":
        print(json.dumps(_open_child(Path(argv[1]), argv[2], argv[3] == "1", int(argv[4]))))
        return 0
    print("用法：python -m harness.bench.long open <卡目录> <局> <0|1> <上限>", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
