"""Two app servers (two processes, two connections) play one chat whose sessions are in PostgreSQL.

Each process opens its own :class:`~liyuan.Card` (its own folder, as on another machine)
with the same ``CardStorage.postgres`` scope, and both play
the same chat for :data:`ROUNDS` rounds in lockstep (a barrier before every round, so
their appends collide). A refused append (:class:`~liyuan.errors.SessionConflictError`)
makes the process reopen the chat and try the turn again. Every reply is a scripted
stand-in (no model wrote it).

What must hold: every entry a process was told it wrote is in the session exactly once,
the session holds nothing else, and it is one unforked line; the refusals really
happened (the test is no test if the two never collided).
"""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path
from typing import Any

import pytest

ROUNDS = 100


def _play(dsn: str, folder: str, who: str, barrier: Any, out: Any) -> None:
    from liyuan import Card
    from liyuan.clock import counter_ids
    from liyuan.errors import SessionConflictError
    from liyuan.storage import CardStorage

    card = Card.open(folder, storage=CardStorage.postgres(dsn, scope="两台服务器"), background=False,
                     auto_sync=False, ids=counter_ids(f"{who}-"))
    written: list[str] = []
    refused = 0
    chat = None
    for turn in range(ROUNDS):
        barrier.wait(60)
        for _ in range(200):
            try:
                if chat is None:
                    chat = card.chat("same-chat")
                user = chat.prepare(f"{who} 第{turn}轮").user_entry
                assert user is not None
                written.append(user.id)
                written.append(chat.record(f"（脚本回复）{who} 第{turn}轮").id)
                break
            except SessionConflictError:
                refused += 1
                chat = card.reopen("same-chat")
        else:
            raise AssertionError(f"{who} 第{turn}轮 200 次都没写进去")
    card.close()  # and its storage
    out.put((who, written, refused))


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="forks its processes")
def test_two_servers_on_one_chat_lose_nothing(postgres_dsn: str, tmp_path: Path) -> None:
    from liyuan.storage import CardStorage

    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    players = [ctx.Process(target=_play, args=(postgres_dsn, str(tmp_path / who), who, barrier, out))
               for who in ("甲服务器", "乙服务器")]
    for player in players:
        player.start()
    for player in players:
        player.join(300)  # small results: the queue's pipe never fills, so joining first is safe
        assert player.exitcode == 0, "一个进程出错退出了（见上面的输出）"
    results = [out.get(timeout=5) for _ in players]
    written = [entry for _, entries, _ in results for entry in entries]
    refused = sum(count for _, _, count in results)
    with CardStorage.postgres(postgres_dsn, scope="两台服务器") as storage:
        content = storage.sessions.read("same-chat", "001.jsonl")
    assert content is not None and not content.problems
    stored = list(content.entries)
    # Each round's turn was written whole at least once (a user line whose reply was refused
    # stays written, and the retry writes the turn again).
    assert len(written) >= 4 * ROUNDS and len(set(written)) == len(written)
    assert sorted(stored) == sorted(written)  # every entry told written is there once; nothing else is
    # No fork behind anyone's back: each entry follows the one stored before it, so both
    # servers' turns are one story (without the compare, a stale writer hangs its entry
    # under its own last one and the story splits).
    assert content.line_marks is not None
    assert refused > 0  # they did collide


TRIALS = 100


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="forks its processes")
def test_two_servers_syncing_one_card_in_postgres_lose_no_edit_and_pay_once(postgres_dsn: str, tmp_path: Path) -> None:
    """The card-memory trial of :mod:`tests.liyuan.card.two_procs` on PostgreSQL: two
    servers sync the card while a third edits the handbook and the resident summary by hand
    and forgets a chat; each has an empty folder, its own connections, and the card's
    sessions, memory and locks in the database."""
    from tests.liyuan.card.two_procs import assert_clean, run_trials

    assert_clean(run_trials(tmp_path, TRIALS, dsn=postgres_dsn), TRIALS)
