"""Per-turn cost of the lore layer (``python -m harness bench --only lore``; issue 23).

A synthetic lore book (deterministic: a fixed seed) of 1,000, 10,000 and 100,000
entries, each with two Chinese keys or one English name (a tenth case-sensitive, a
twentieth with secondary keys, ten constant, five regex keys), and a chat of 6 kept turns
(the user's words ~60 characters, the reply ~400) that names a few entries per turn.
Measured per turn: :func:`liyuan.lore.lore_for_turn` (scan the new words and the 6
turns, activate, fit into the 1720-character share), p50 / p95 over 200 turns after one
warm-up; and once per book: building the keyword index, writing the YAML file, reading
it (up to 10,000 entries) and reading its JSON cache (:data:`liyuan.lore.store.CACHE_FILE`).

Invariant: nothing here asserts; it prints and returns the numbers (the target, under
5 ms per turn at 10,000 entries, is printed beside them).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from liyuan.context.budget import RESIDENT_ENVELOPE_CHARS
from liyuan.lore import LoreBook, LoreEntry, load_book, save_book
from liyuan.lore.activate import lore_for_turn, lore_share_chars
from liyuan.lore.match import LoreIndex
from liyuan.lore.model import regex_key
from liyuan.lore.store import CACHE_FILE

__all__ = ["TARGET_MS", "lore_table", "print_lore", "synthetic_book", "synthetic_turns"]

TARGET_MS = 5.0
SIZES = (1_000, 10_000, 100_000)
TURNS_MEASURED = 200
YAML_READ_MAX = 10_000
"""The uncached YAML read is timed up to this size (100,000 entries take about a minute)."""
_SYLLABLES = "雾港灯塔渡口钟楼旧巷茶馆书店码头石桥柳岸江城北门南街西市东坊山寺云台竹林梅园松亭"
_FILLER = "他们沿着湿漉漉的石阶往下走，雨声盖住了脚步，远处传来几声汽笛，灯光在水面上碎成一片。"


def _name(rng: random.Random, number: int) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(3)) + str(number)


def synthetic_book(size: int, seed: int = 23) -> LoreBook:
    """``size`` entries as the module docstring describes."""
    rng = random.Random(seed)
    entries = []
    for number in range(size):
        name = _name(rng, number)
        fields: dict[str, Any] = {}
        if number % 3 == 0:
            keys: tuple[str, ...] = (f"Name{number}",)
            fields["case_sensitive"] = number % 10 == 0
        else:
            keys = (name, name[:2] + str(number))
        if number % 20 == 1:
            fields.update(secondary_keys=("夜", "雨"), logic="and_any")
        if number < 10:
            fields["constant"] = True
        if 10 <= number < 15:
            keys = (rf"/第{number}号[船车]/",)
        entries.append(LoreEntry(f"设定{number}", content=f"{name}：" + _FILLER[: 40 + number % 60],
                                 keys=keys, priority=number % 7, **fields))
    return LoreBook(tuple(entries))


def synthetic_turns(book: LoreBook, turns: int = 6, seed: int = 7) -> list[tuple[list[tuple[str, str]], str]]:
    """``TURNS_MEASURED`` chats: 6 kept turns and the new words, each naming a few entries."""
    rng = random.Random(seed)
    keys = [entry.keys[0] for entry in book.entries if entry.keys and regex_key(entry.keys[0]) is None]
    chats = []
    for _ in range(TURNS_MEASURED):
        items: list[tuple[str, str]] = []
        for _turn in range(turns):
            items.append(("user", f"我们去{rng.choice(keys)}看看。" + _FILLER[:40]))
            items.append(("assistant", (_FILLER * 6)[:300] + f"说起{rng.choice(keys)}，还有{rng.choice(keys)}。"))
        chats.append((items, f"{rng.choice(keys)}在哪儿？今晚下雨吗？"))
    return chats


def _row(size: int, folder: Path) -> dict[str, Any]:
    book = synthetic_book(size)
    started = time.perf_counter()
    save_book(folder, book)
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    loaded = load_book(folder)
    cached_s = time.perf_counter() - started
    assert loaded is not None
    read_s: float | None = None
    if size <= YAML_READ_MAX:
        (folder / CACHE_FILE).unlink(missing_ok=True)
        started = time.perf_counter()
        load_book(folder)
        read_s = time.perf_counter() - started
    started = time.perf_counter()
    index = LoreIndex(loaded)
    build_s = time.perf_counter() - started
    share = lore_share_chars(RESIDENT_ENVELOPE_CHARS)
    chats = synthetic_turns(book)
    lore_for_turn(index, *chats[0], share)  # warm-up
    times: list[float] = []
    activated: list[int] = []
    cut: list[int] = []
    for items, new_words in chats:
        started = time.perf_counter()
        blocks = lore_for_turn(index, items, new_words, share)
        times.append((time.perf_counter() - started) * 1000)
        activated.append(len(blocks.report.activated))
        cut.append(len(blocks.report.cut))
    times.sort()
    return {"entries": size, "kept_turns": 6, "share_chars": share,
            "p50_ms": round(statistics.median(times), 3), "p95_ms": round(times[int(len(times) * 0.95) - 1], 3),
            "activated_mean": round(statistics.mean(activated), 1), "cut_mean": round(statistics.mean(cut), 1),
            "index_build_s": round(build_s, 3), "yaml_write_s": round(write_s, 3),
            "yaml_read_s": None if read_s is None else round(read_s, 3), "cached_read_s": round(cached_s, 3),
            "file_mb": round((folder / "设定集.yaml").stat().st_size / 1024 / 1024, 2)}


def lore_table(sizes: tuple[int, ...] = SIZES, progress: Any = None) -> dict[str, Any]:
    """Measure every size (see the module docstring)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="liyuan-lore-bench-") as tmp:
        for size in sizes:
            if progress is not None:
                progress(f"设定集：{size} 条 …")
            rows.append(_row(size, Path(tmp)))
    return {"target_ms": TARGET_MS, "turns_measured": TURNS_MEASURED, "rows": rows}


def print_lore(table: dict[str, Any]) -> None:
    """The table, one row per book size."""
    print(f"\n设定集每轮激活开销（6 轮原文 + 新消息；目标 10,000 条时 < {table['target_ms']:g} ms）")
    print(f"{'条目':>8}{'p50 ms':>9}{'p95 ms':>9}{'激活':>7}{'截掉':>7}{'建索引 s':>10}{'写 s':>8}{'读 YAML s':>11}"
          f"{'读缓存 s':>10}{'文件 MB':>9}")
    for r in table["rows"]:
        read = "—" if r["yaml_read_s"] is None else f"{r['yaml_read_s']:.2f}"
        print(f"{r['entries']:>8}{r['p50_ms']:>9.3f}{r['p95_ms']:>9.3f}{r['activated_mean']:>7}{r['cut_mean']:>7}"
              f"{r['index_build_s']:>10.3f}{r['yaml_write_s']:>8.2f}{read:>11}{r['cached_read_s']:>10.2f}"
              f"{r['file_mb']:>9}")
    ten = next((r for r in table["rows"] if r["entries"] == 10_000), None)
    if ten is not None:
        verdict = "达标" if ten["p50_ms"] < table["target_ms"] else "没有达标"
        print(f"10,000 条：p50 {ten['p50_ms']:.3f} ms，{verdict}")


def main(argv: list[str] | None = None) -> int:
    """Standalone: ``python -m harness.bench.lore``."""
    print_lore(lore_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
