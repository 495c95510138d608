"""The two card backends side by side (part of ``python -m harness bench --only stores``; issue 22).

One chat of 10,000 turns (user line, reply, ledger snapshot, a scripted relay summary
every 30 turns: :mod:`harness.bench.longchat`), written once as a file and copied byte
for byte into PostgreSQL (:func:`liyuan.storage.copy.copy_card`: the sessions and the
card's memory, whose resident summary every turn reads and whose locks are advisory
locks there), then measured
alike through :class:`liyuan.Card` with vector memory off and an instant scripted side
model (labelled scripted), so the figures are the library's and its storage's own:

- open: a new ``Card`` and ``card.chat`` to the first ``prepare()`` returning (in this
  process, so imports are warm; the file is in the page cache, the rows in the server's),
  median of three;
- per turn: ``prepare()`` + ``record()`` with a ledger, p50 / p95 over
  :data:`TURNS` turns after three untimed (each turn makes two appends, the user line,
  then the reply with its ledger: a file append with its fsync, or one committed
  statement; on PostgreSQL it also reads the resident summary's stamp).

The file sits where the long-chat series puts its chats (a memory disk when there is
one); PostgreSQL is the bench's server (fsync off there too), over loopback: a real
network adds a round trip per append.

Invariant: nothing here asserts; it prints and returns the numbers.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from liyuan import Card, CardStorage
from liyuan.clock import IdFactory
from liyuan.storage import copy_card

from ..eval.scripted import scripted_summariser
from .long import per_turn
from .longchat import CHAR, USER, build_chat, memory_config

__all__ = ["TURNS", "session_table"]

SIZE = 10_000
TURNS = 100
OPENS = 3


Storage = Callable[[], CardStorage | None]
"""Opens the storage of one backend (``None``: the card folder); the card closes it."""


def _open(card_dir: Path, storage: Storage, ids: IdFactory) -> float:
    times = []
    for _ in range(OPENS):
        opened = storage()
        started = time.perf_counter()
        card = Card.open(card_dir, side_model=scripted_summariser(USER, CHAR), config=memory_config(False),
                         user_name=USER, char_name=CHAR, ids=ids, auto_sync=False, storage=opened)
        card.chat("long").prepare("那把青伞是谁留下的？")
        times.append(time.perf_counter() - started)
        card.close()
    return statistics.median(times)


def session_table(dsn: str | None, *, size: int = SIZE,
                  progress: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    """Both backends on the same chat (PostgreSQL only when ``dsn`` is given)."""
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="liyuan-sessions-",
                                 dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None))
    table: dict[str, Any] = {"turns_in_chat": size, "timed_turns": TURNS, "backends": {}}
    try:
        progress(f"会话后端：写一局 {size} 轮 …")
        files_dir = base / "files"
        _path, ids = build_chat(files_dir, "long", size, ledger=True)
        backends: dict[str, Storage] = {"files": lambda: None}
        if dsn is not None:
            backends["postgres"] = _into_postgres(dsn, files_dir)
        for name, make in backends.items():
            card_dir = files_dir if name == "files" else base / "postgres"
            progress(f"会话后端：{name}，打开和每轮 …")
            row = {"open_s": _open(card_dir, make, ids)}
            turns = per_turn(card_dir, "long", vector=False, ledger=True, ids=ids, turns=TURNS, storage=make())
            row.update(turn_p50_ms=turns["p50_ms"], turn_p95_ms=turns["p95_ms"])
            table["backends"][name] = row
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return table


def _into_postgres(dsn: str, files_dir: Path) -> Storage:
    """Copy the card into a fresh scope; how to open it there."""
    scope = f"bench-card-{os.getpid()}-{time.time_ns()}"
    with CardStorage.postgres(dsn, scope=scope) as target:
        copy_card(CardStorage.folder(files_dir), target)
    return lambda: CardStorage.postgres(dsn, scope=scope)


def print_sessions(table: dict[str, Any]) -> None:
    backends = table["backends"]
    print(f"\n卡片后端对比（会话与记忆）：一局 {table['turns_in_chat']:,} 轮，"
          f"每轮 prepare + record（带账本，计 {table['timed_turns']} 轮）")
    print(f"{'指标':<28}" + "".join(f"{name:>14}" for name in backends))
    for key, label in (("open_s", "打开到首次 prepare（秒）"), ("turn_p50_ms", "每轮 p50（毫秒）"),
                       ("turn_p95_ms", "每轮 p95（毫秒）")):
        print(f"{label:<28}" + "".join(f"{data[key]:>14.3f}" for data in backends.values()))
    if "postgres" in backends:
        ratio = backends["postgres"]["turn_p50_ms"] / backends["files"]["turn_p50_ms"]
        print(f"目标：PostgreSQL 每轮不超过文件的 2 倍 → {'达标' if ratio <= 2 else '未达标'}（{ratio:.2f}×）")
