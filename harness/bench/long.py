"""The long-chat series (``python -m harness bench --only long``, issue 24).

Measured from outside, through :class:`liyuan.Card` and :class:`liyuan.Chat`, with an
instant scripted side model (its replies are made by rule: :func:`harness.eval.scripted.scripted_summariser`,
labelled scripted) and, with vector memory on, the instant hashing embedder, so only the
library's own cost counts:

- per-turn foreground (``prepare()`` + ``record()``, median and p95 over the last beats)
  at 100, 1,000, 10,000 and 100,000 turns; vector memory off and on; with a ledger
  snapshot every turn and without;
- a cold open in a fresh process: ``Card.open`` + ``card.chat`` to the first
  ``prepare()`` returning, its peak memory against the session file's size, and whether
  the first recall after the open returned hits (vector on);
- recall at a store's maximum cap (50,000 chunks; 5,000 in ``--quick``): the first
  recall after a cold open, then p50/p95 warm;
- a sync with nothing to do at 10, 100 and 500 chats.

The chats are written straight to their session files as the app would have left them
(a user line, a reply, a ledger snapshot, and every 30 turns a scripted relay summary
over all but the last 6), with ids from a seeded source that never repeats one (the
8-hex ids of ``random_ids`` collide by about 50,000 turns; widening them is issue 26).
Every figure is printed beside its ratio to the smallest size: the machine is shared,
so the ratios within one run are what matter. The chats sit on a memory disk when there
is one, and the disk's fsync is printed apart (see :func:`long_table`).

Invariant: nothing here asserts a target; it measures, reports and says when a target is missed.

The cold-open figures before and after the lazy session loader (issue 24: 100,000 turns,
6.1-6.5 s -> 1.7-2.2 s, peak growth 7.2x -> 1.19x the file) and where the remaining time
goes are in ``docs/eval.md#long-open``.
"""

from __future__ import annotations

import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from liyuan import Card, MemoryConfig
from liyuan.card.files import CardLayout, MemoryFiles, sha1_text, source_mark_of
from liyuan.card.manifest import Manifest, save_manifest
from liyuan.card.sync import CardMemory
from liyuan.clock import IdFactory, counter_ids
from liyuan.session.entries import SESSION_VERSION
from liyuan.session.state import STATE_ENTRY_TYPE, Ledger
from liyuan.vector.config import NARRATIVE, VectorConfig

from ..eval.scripted import scripted_summariser
from .overhead import percentile

__all__ = ["FULL_SIZES", "QUICK_SIZES", "build_chat", "long_table", "print_long", "seeded_ids"]

FULL_SIZES = (100, 1000, 10000, 100000)
QUICK_SIZES = (100, 1000, 10000)
SYNC_CHATS = (10, 100, 500)
QUICK_SYNC_CHATS = (10, 100)
SUMMARY_EVERY = 30
KEEP = 6
USER, CHAR = "阿简", "林溯"
Progress = Callable[[str], None]

_PLACES = ("雾港码头", "旧城茶馆", "钟楼顶层", "渡口", "书院后院", "灯塔下")
_LINES = ("雨还没停，她把伞往你那边偏了偏。", "远处的汽笛声一阵紧过一阵。", "他低头看着那封没有署名的信。",
          "茶已经凉了，可谁也没有起身。", "灯笼在风里晃，影子也跟着晃。", "有人在巷口停下，又很快走开。")


def seeded_ids(seed: int, taken: set[str] | None = None) -> IdFactory:
    """8-hex ids from a seeded source that never hands out one twice (``taken`` is shared)."""
    rng = random.Random(seed)
    seen = taken if taken is not None else set()

    def fresh() -> str:
        while True:
            candidate = f"{rng.getrandbits(32):08x}"
            if candidate not in seen:
                seen.add(candidate)
                return candidate

    return fresh


def _ledger(turn: int) -> dict[str, Any]:
    return Ledger(time=f"第{turn // 20 + 1}日", location=_PLACES[turn % len(_PLACES)],
                  items=("青伞", "铜钥匙"), threads=("寻找失踪的船主", f"第{turn // 100}卷的约定")).to_dict()


def _reply(turn: int) -> str:
    body = "".join(_LINES[(turn + k) % len(_LINES)] for k in range(6))
    return f"（第{turn}轮）{body}{CHAR}说：“第{turn}个夜里，我们在{_PLACES[turn % len(_PLACES)]}见过。”"


def build_chat(card_dir: Path, chat_id: str, turns: int, *, ledger: bool, seed: int = 24) -> tuple[Path, IdFactory]:
    """Write a ``turns``-beat chat as the app would have left it; returns its file and an
    id source that continues the one it was written with."""
    sessions = CardLayout(card_dir).sessions_dir(chat_id)
    sessions.mkdir(parents=True, exist_ok=True)
    path = sessions / "001.jsonl"
    taken: set[str] = set()
    ids = seeded_ids(seed, taken)
    stamp = "2026-01-01T00:00:00.000+00:00"
    parent: str | None = None
    replies: list[str] = []
    with open(path, "w", encoding="utf-8") as out:

        def write(kind: str, **body: Any) -> str:
            nonlocal parent
            entry_id = ids()
            line = {"id": entry_id, "parentId": parent, "type": kind, "timestamp": stamp, **body}
            out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
            parent = entry_id
            return entry_id

        out.write(json.dumps({"type": "session", "version": SESSION_VERSION, "id": f"{chat_id}-001",
                              "timestamp": stamp}, ensure_ascii=False) + "\n")
        for turn in range(1, turns + 1):
            write("message", role="user", text=f"第{turn}轮：我把伞递给她，问她今晚去不去{_PLACES[turn % 6]}。")
            replies.append(write("message", role="assistant", text=_reply(turn)))
            if ledger:
                write("custom", customType=STATE_ENTRY_TYPE, data=_ledger(turn))
            if turn % SUMMARY_EVERY == 0 and turn > KEEP:
                covered = turn - KEEP
                summary = (f"## 前情提要\n- （脚本摘要，非模型输出）覆盖第 1–{covered} 轮。\n"
                           + "".join(f"- 第{t}轮前后：{_LINES[t % 6]}\n" for t in range(max(1, covered - 20), covered))
                           + f"\n## 人物\n- {USER}、{CHAR}\n\n## 承诺与伏笔\n- 寻找失踪的船主\n\n"
                           f"## 事实账\n- 青伞、铜钥匙\n\n## 当前场景\n- {_PLACES[covered % 6]}")
                write("custom", customType="rp-summary", data={
                    "summary": summary, "coversThroughId": replies[covered - 1], "turns": covered,
                    "chars": covered * 120, "provenance": "scripted"})
    return path, ids


def _fill_store(card_dir: Path, chat_id: str, config: VectorConfig, chunks: int, branch: Sequence[str]) -> None:
    """Put ``chunks`` narrative chunks in the chat's store, tagged with replies on its branch."""
    from liyuan.app.vectors import VECTOR_STORE_FILE
    from liyuan.vector.embed import HashEmbedder
    from liyuan.vector.store import NewChunk, SqliteChunkStore

    store = SqliteChunkStore(CardLayout(card_dir).chat_dir(chat_id) / VECTOR_STORE_FILE)
    embedder = HashEmbedder()
    cap = config.store(NARRATIVE).max_chunks
    tags = list(branch)[-chunks:] if len(branch) >= chunks else [branch[i % len(branch)] for i in range(chunks)]
    for start in range(0, chunks, 1000):
        texts = [f"（第{start + i}段）" + _reply(start + i) + _reply(start + i + 7)
                 for i in range(min(1000, chunks - start))]
        vectors = embedder.embed(texts)
        store.add([NewChunk(NARRATIVE, text, vectors[i], embedder.label, "narrative", None, tags[start + i])
                   for i, text in enumerate(texts)], max_chunks=cap)


def _vector_config(on: bool, cap: int = 5000) -> MemoryConfig:
    vector = VectorConfig(enabled=on, embedder="hash")
    narrative = replace(vector.store(NARRATIVE), max_chunks=cap)
    return MemoryConfig(vector=replace(vector, stores={**vector.stores, NARRATIVE: narrative}))


def per_turn(card_dir: Path, chat_id: str, *, vector: bool, ledger: bool, ids: IdFactory,
             beats: int) -> dict[str, float]:
    """Median and p95 (ms) of ``prepare()`` + ``record()`` over ``beats`` beats after a warm-up."""
    config = _vector_config(vector)
    with Card.open(card_dir, side_model=scripted_summariser(USER, CHAR), config=config, user_name=USER,
                   char_name=CHAR, ids=ids) as card:
        chat = card.chat(chat_id)
        card.flush()
        if chat.vector is not None:
            chat.vector.warm()
        times = []
        for beat in range(beats + 3):
            started = time.perf_counter()
            chat.prepare(f"第{beat}次追问：那把青伞是谁留下的？")
            chat.record(_reply(beat), ledger=Ledger.from_dict(_ledger(beat)) if ledger else None)
            if beat >= 3:
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
    card = Card.open(card_dir, side_model=scripted_summariser(USER, CHAR), config=_vector_config(vector, cap),
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
        # Warm means both indexes loaded: wait for the keyword index the open started loading.
        tokenizer = chat.vector.config.lexical_tokenizer
        while not chat.vector.store.snapshot().lexical_ready(tokenizer) and time.perf_counter() - started < 600:
            time.sleep(0.2)
        result["ready_s"] = time.perf_counter() - started
        times = []
        ids = branch_ids_of(chat.branch())
        for i in range(40):
            query = f"第{i * 37}个夜里在{_PLACES[i % 6]}见过谁"
            t0 = time.perf_counter()
            recall_for_turn(chat.vector, query, ids)
            times.append((time.perf_counter() - t0) * 1000)
        result["recall_p50_ms"] = statistics.median(times)
        result["recall_p95_ms"] = percentile(times, 95)
    card.close()
    return result


def cold_open(card_dir: Path, chat_id: str, *, vector: bool, cap: int = 5000) -> dict[str, Any]:
    """:func:`_open_child` in a fresh ``nice`` process; its JSON result."""
    root = Path(__file__).resolve().parents[2]  # the checkout: harness/bench/long.py -> ../..
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-m", "harness.bench.long", "open", str(card_dir), chat_id, str(int(vector)), str(cap)],
        capture_output=True, text=True, check=False, env=env, cwd=root)
    if out.returncode != 0:
        raise RuntimeError(f"冷启动子进程失败：{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
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
        text = f"# 第{index}局\n\n- （脚本复盘，非模型输出）{_reply(index)}\n"
        layout.recap_path(chat_id).write_text(text, encoding="utf-8")
        record = manifest.record(chat_id)
        record.source_mark = source_mark_of(layout.sessions_dir(chat_id))
        record.recap_at = "2026-01-01T00:00:00+00:00"
        record.merged_hash = sha1_text(text)
    layout.handbook.write_text("# 记忆\n\n（脚本手册）\n", encoding="utf-8")
    layout.resident.write_text("（脚本常驻摘要）\n", encoding="utf-8")
    save_manifest(files, manifest)
    memory = CardMemory(card_dir, scripted_summariser(USER, CHAR), user_name=USER, char_name=CHAR)
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
    """Median time of one appended line plus its fsync in ``folder`` (the disk's share of a beat)."""
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
               beats: int | None = None) -> dict[str, Any]:
    """Every measurement of the series, as data (see the module docstring).

    The chats live on a memory disk (``/dev/shm``) when there is one: an fsync on this
    shared machine's disk takes 1 to 40 ms at random and would drown the library's own
    cost, which is what the ratios are about. The disk's fsync is measured apart
    (``fsync_ms``, in ``folder``): a beat costs two or three of them with the default
    ``durability="entry"``, one with ``"turn"``, at every length.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        import shutil
        import tempfile

        disk = tempfile.mkdtemp(prefix="liyuan-long-", dir=shm)
        try:
            table = _long_table(Path(disk), quick=quick, progress=progress, sizes=sizes, beats=beats)
        finally:
            shutil.rmtree(disk, ignore_errors=True)
        table["where"] = "内存盘 /dev/shm"
    else:
        table = _long_table(folder, quick=quick, progress=progress, sizes=sizes, beats=beats)
        table["where"] = "临时目录"
    table["fsync_ms"] = fsync_ms(folder)
    return table


def _long_table(folder: Path, *, quick: bool, progress: Progress, sizes: Sequence[int] | None,
                beats: int | None) -> dict[str, Any]:
    sizes = tuple(sizes or (QUICK_SIZES if quick else FULL_SIZES))
    beats = beats or (15 if quick else 40)
    turns: dict[str, dict[str, Any]] = {}
    opens: dict[str, dict[str, Any]] = {}
    for size in sizes:
        for ledger in (False, True):
            card_dir = folder / f"long-{size}-{int(ledger)}"
            progress(f"长对话：写 {size} 轮的会话（账本{'有' if ledger else '无'}）…")
            path, ids = build_chat(card_dir, "long", size, ledger=ledger)
            _fill_store(card_dir, "long", VectorConfig(enabled=True), min(5000, max(1, size // 3)),
                        _replies_on_branch_file(path))
            for vector in (False, True):
                key = f"向量{'开' if vector else '关'}·账本{'有' if ledger else '无'}"
                progress(f"长对话：{size} 轮，{key}，每轮用时 …")
                turns.setdefault(key, {})[str(size)] = per_turn(card_dir, "long", vector=vector, ledger=ledger,
                                                                ids=ids, beats=beats)
            if ledger:
                for vector in (False, True):
                    progress(f"长对话：{size} 轮，冷启动（向量{'开' if vector else '关'}）…")
                    row = cold_open(card_dir, "long", vector=vector)
                    row["file_mb"] = path.stat().st_size / 2**20
                    opens.setdefault(f"向量{'开' if vector else '关'}", {})[str(size)] = row
    cap = 5000 if quick else 50000
    progress(f"召回：{cap} 段的库，冷启动后的第一次召回和热召回 …")
    cap_dir = folder / "cap"
    path, _ids = build_chat(cap_dir, "cap", 3000, ledger=True)
    _fill_store(cap_dir, "cap", _vector_config(True, cap).vector, cap, _replies_on_branch_file(path))
    at_cap = cold_open(cap_dir, "cap", vector=True, cap=cap)
    syncs: dict[str, Any] = {}
    for chats in (QUICK_SYNC_CHATS if quick else SYNC_CHATS):
        progress(f"同步：{chats} 局、无事可做的一次同步 …")
        syncs[str(chats)] = sync_no_change(folder, chats)
    return {"sizes": list(sizes), "beats": beats, "turns": turns, "open": opens,
            "recall_at_cap": {"chunks": cap, **at_cap}, "sync": syncs}


def _replies_on_branch_file(path: Path) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if '"role":"assistant"' in line:
                out.append(json.loads(line)["id"])
    return out


def _ratio_row(label: str, values: list[float], unit: str) -> str:
    base = values[0] if values and values[0] > 0 else 0.0
    cells = "".join(f"{v:>10.2f}{unit}" for v in values)
    ratios = "".join(f"{(v / base if base else float('nan')):>8.2f}×" for v in values)
    return f"{label:<16}{cells}   {ratios}"


def print_long(table: dict[str, Any]) -> None:
    """The series side by side, each row with its ratios to the smallest size; the targets' verdicts."""
    sizes = [str(s) for s in table["sizes"]]
    head = "".join(f"{s:>12}" for s in sizes)
    print(f"\n长对话：每轮前台用时（prepare + record，中位数 / p95，{table['beats']} 轮；右侧为相对最小规模的倍数；"
          f"会话在{table['where']}上，磁盘的 fsync 另计：每次 {table['fsync_ms']:.1f} ms，默认每轮 2–3 次）")
    print(f"{'':<16}{head}")
    worst = 0.0
    for key, row in table["turns"].items():
        p50 = [row[s]["p50_ms"] for s in sizes]
        print(_ratio_row(key + " p50", p50, "ms"))
        print(_ratio_row(key + " p95", [row[s]["p95_ms"] for s in sizes], "ms"))
        worst = max(worst, p50[-1] / p50[0] if p50[0] else 0.0)
    print(f"目标：最大规模每轮 ≤ 最小规模的 1.5 倍 → {'达标' if worst <= 1.5 else '未达标'}（最差 {worst:.2f}×）")
    print("\n冷启动：打开到第一次 prepare() 返回（新进程）")
    for key, row in table["open"].items():
        print(_ratio_row(f"{key} 秒", [row[s]["open_s"] for s in sizes], "s "))
        print(_ratio_row(f"{key} 峰值", [row[s]["peak_mb"] - row[s]["base_mb"] for s in sizes], "MB"))
        print(f"{'  会话文件':<16}" + "".join(f"{row[s]['file_mb']:>10.2f}MB" for s in sizes))
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


def main(argv: list[str]) -> int:
    """The child entry point: ``open <card> <chat> <vector 0|1> <cap>``."""
    if len(argv) == 5 and argv[0] == "open":
        print(json.dumps(_open_child(Path(argv[1]), argv[2], argv[3] == "1", int(argv[4]))))
        return 0
    print("用法：python -m harness.bench.long open <卡目录> <局> <0|1> <上限>", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
