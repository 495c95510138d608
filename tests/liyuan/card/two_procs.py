"""Two real processes syncing one card while a third edits it by hand (helper, no tests here).

One trial: a card with two chats (甲, 乙), synced once, then each chat gets a new turn.
Three forked processes start together: two run :meth:`CardMemory.sync`, the third edits
the handbook and the resident summary through the hard path and forgets chat 乙, in a
random order at random moments. Every write sleeps a little first (a slow disk) and
every model call sleeps too. The model is a scripted stand-in (no model wrote these
replies); it appends one line per call to a shared file, so paid calls are counted
across processes.

With a PostgreSQL connection string (``dsn``) the same trial runs on the PostgreSQL
backends (issue 22): the card is set up in a folder and moved into the database
(:func:`liyuan.storage.copy.copy_card`), and each process is another "server" with an
empty folder of its own, its own connections, the card's sessions and memory in the
database and its locks advisory locks.

Run ``python -m tests.liyuan.card.two_procs 100 [dsn]`` to print the figures of 100 trials.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from liyuan.card import manual as card_manual
from liyuan.card.files import MemoryFiles
from liyuan.card.inputs import SyncSettings
from liyuan.card.layout import CardLayout
from liyuan.card.manifest import load_manifest
from liyuan.card.sync import CardMemory
from liyuan.clock import fixed_clock
from liyuan.errors import VersionConflict
from liyuan.model import FunctionModel, ModelRequest

from .test_fixtures import CHAR, USER, merge_for, recap, user_text, write_chat

HAND_HANDBOOK = "# 手写的手册\n- 小满怕黑（手工记下）"
HAND_RESIDENT = "# 往局记忆（同一世界更早的几局）\n\n- 手工写的常驻摘要。"


class SlowFiles(MemoryFiles):
    """Every write waits a few milliseconds first, like a slow disk."""

    def __init__(self, layout: CardLayout, rng: random.Random) -> None:
        super().__init__(layout)
        self._rng = rng

    def write_text(self, path: Path, text: str) -> None:
        time.sleep(self._rng.uniform(0, 0.006))
        super().write_text(path, text)


def _model(calls: Path, rng: random.Random) -> FunctionModel:
    def reply(request: ModelRequest) -> str:
        text = user_text(request)
        chat = "乙" if "乙的第" in text else "甲" if "甲的第" in text else "-"
        digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]
        fd = os.open(calls, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{request.purpose} {chat if request.purpose == 'recap' else digest}\n".encode())
        finally:
            os.close(fd)
        time.sleep(rng.uniform(0, 0.02))
        if request.purpose == "recap":
            return recap(f"{chat}局", f"- {chat}局里的事。")
        return merge_for("jA", "jB")
    return FunctionModel(reply)


def _memory(card: Path, calls: Path, seed: int, dsn: str | None = None) -> CardMemory:
    rng = random.Random(seed)
    if dsn is None:
        return CardMemory(card, _model(calls, rng), SyncSettings(user_name=USER, char_name=CHAR), clock=fixed_clock(),
                          files=SlowFiles(CardLayout(card), rng))
    from liyuan.storage import CardStorage

    server = card.parent / f"{card.name}-server-{seed}"  # another machine: nothing of the card on it
    storage = CardStorage.postgres(dsn, scope=card.name)
    slow = _slow_postgres(storage.memory_store(CardLayout(server), clock=fixed_clock()), rng)
    return CardMemory(server, _model(calls, rng), SyncSettings(user_name=USER, char_name=CHAR), clock=fixed_clock(),
                      sessions=storage.sessions, files=slow)


def _slow_postgres(files: Any, rng: random.Random) -> Any:
    """The PostgreSQL store with every write waiting a few milliseconds first (a slow network)."""
    for name in ("write_text", "replace_text"):
        real = getattr(files, name)

        def slow(*args: Any, _real: Any = real) -> Any:
            time.sleep(rng.uniform(0, 0.006))
            return _real(*args)
        setattr(files, name, slow)
    return files


def _sync_role(card: Path, calls: Path, seed: int, start: object, dsn: str | None = None) -> None:
    start.wait()  # type: ignore[attr-defined]
    _memory(card, calls, seed, dsn).sync()


def _edit(mem: CardMemory, ref: str, text: str) -> None:
    while True:
        doc = mem.read_memory(ref)
        assert doc is not None
        try:
            mem.change_memory(ref, doc[1], text)
            return
        except VersionConflict:
            continue  # a sync changed it meanwhile: read again, like an editor would


def _hand_role(card: Path, calls: Path, seed: int, start: object, dsn: str | None = None) -> None:
    rng = random.Random(seed)
    mem = _memory(card, calls, seed + 1, dsn)
    steps = ["handbook", "resident"]
    rng.shuffle(steps)  # both edits in either order, then the forget (a forget first would
    steps.append("forget")  # retire the resident, and a missing document cannot be edited)
    start.wait()  # type: ignore[attr-defined]
    for step in steps:
        time.sleep(rng.uniform(0, 0.04))
        if step == "handbook":
            _edit(mem, card_manual.HANDBOOK_REF, HAND_HANDBOOK)
        elif step == "resident":
            _edit(mem, card_manual.RESIDENT_REF, HAND_RESIDENT)
        else:
            mem.forget_chat_recap("jB")


@dataclass
class Counts:
    """Figures over all trials."""

    trials: int = 0
    lost_handbook_edits: int = 0
    lost_resident_edits: int = 0
    lost_pins: int = 0
    resurrected_chats: int = 0
    duplicate_paid_calls: int = 0
    """Trials where one chat was recapped twice, or one merge prompt was paid twice."""
    failed_processes: int = 0


def _setup(card: Path) -> None:
    write_chat(card, "jA", [("user", "甲的第1拍。"), ("assistant", "好。")], name="甲")
    write_chat(card, "jB", [("user", "乙的第1拍。"), ("assistant", "好。")], name="乙")
    calls = card.parent / "setup-calls.txt"
    _memory(card, calls, 0).sync()
    write_chat(card, "jA", [("user", "甲的第2拍。"), ("assistant", "好。")])
    write_chat(card, "jB", [("user", "乙的第2拍。"), ("assistant", "好。")])


def one_trial(root: Path, seed: int, counts: Counts, dsn: str | None = None) -> None:
    """Run one trial under ``root`` and add its figures to ``counts`` (on PostgreSQL with ``dsn``)."""
    card = root / f"card{seed}"
    _setup(card)
    calls = root / f"calls{seed}.txt"
    calls.touch()
    if dsn is not None:
        from liyuan.storage import CardStorage, copy_card

        with CardStorage.postgres(dsn, scope=card.name) as storage:  # closed: no connection of this
            copy_card(CardStorage.folder(card), storage)             # process may be shared with the forked ones
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_sync_role, args=(card, calls, seed * 3 + 1, start, dsn)),
             ctx.Process(target=_sync_role, args=(card, calls, seed * 3 + 2, start, dsn)),
             ctx.Process(target=_hand_role, args=(card, calls, seed * 3 + 3, start, dsn))]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(30)
        counts.failed_processes += proc.exitcode != 0
    checked: Any = None
    if dsn is None:
        files: Any = MemoryFiles(CardLayout(card))
    else:
        from liyuan.storage import CardStorage

        checked = CardStorage.postgres(dsn, scope=card.name)
        files = checked.memory_store(CardLayout(card))
    try:
        layout = files.layout
        manifest = load_manifest(files)
        counts.trials += 1
        counts.lost_handbook_edits += (files.read_text(layout.handbook) or "").strip() != HAND_HANDBOOK
        counts.lost_resident_edits += (files.read_text(layout.resident) or "").strip() != HAND_RESIDENT
        counts.lost_pins += not (manifest.manual and manifest.manual.aggregate_pinned)
        counts.resurrected_chats += files.exists(layout.recap_path("jB")) or "jB" not in manifest.forgotten()
    finally:
        if checked is not None:
            checked.close()
    lines = calls.read_text(encoding="utf-8").split()
    paid = [" ".join(lines[i:i + 2]) for i in range(0, len(lines), 2)]
    counts.duplicate_paid_calls += len(paid) != len(set(paid))


def assert_clean(counts: Counts, trials: int) -> None:
    """Every trial ran, and none lost an edit, a pin or a forget, or paid for a call twice."""
    assert counts.trials == trials and counts.failed_processes == 0
    assert counts.lost_handbook_edits == 0
    assert counts.lost_resident_edits == 0
    assert counts.lost_pins == 0
    assert counts.resurrected_chats == 0
    assert counts.duplicate_paid_calls == 0  # at most one paid call per recap and per merge


def run_trials(root: Path, trials: int, first_seed: int = 1, dsn: str | None = None) -> Counts:
    """``trials`` trials under ``root``; their figures (on PostgreSQL with ``dsn``)."""
    counts = Counts()
    for seed in range(first_seed, first_seed + trials):
        one_trial(root, seed, counts, dsn)
    return counts


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        result = run_trials(Path(folder), n, dsn=sys.argv[2] if len(sys.argv) > 2 else None)
    print(result, f"{time.monotonic() - began:.1f}s")
