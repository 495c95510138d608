"""Two real processes sync one card while a third edits it by hand (issue 14, part 3).

See :mod:`tests.liyuan.card.two_procs` for one trial. Every reply is a scripted stand-in,
no model wrote it. Before the card's OS file locks, 30 trials of this lost the handbook
edit in 13, the resident edit in 10, the pin in 4, and paid for the same recap or merge
twice in 30 of 30.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .two_procs import assert_clean, run_trials

TRIALS = 50


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="the trial forks its processes")
def test_two_processes_lose_nothing_and_pay_once(tmp_path: Path) -> None:
    assert_clean(run_trials(tmp_path, TRIALS), TRIALS)


def _hold_sync_lock(card: Path, held: object, release: object) -> None:
    from liyuan.card.lock import card_locks

    with card_locks(card).run:
        held.set()  # type: ignore[attr-defined]
        release.wait(10)  # type: ignore[attr-defined]


@pytest.mark.skipif(sys.platform == "win32", reason="forks a process")
def test_a_second_sync_in_another_process_waits_and_says_so(tmp_path: Path) -> None:
    import multiprocessing
    import threading

    from liyuan.model import ScriptedModel

    from .test_fixtures import memory

    ctx = multiprocessing.get_context("fork")
    held, release = ctx.Event(), ctx.Event()
    other = ctx.Process(target=_hold_sync_lock, args=(tmp_path, held, release))
    other.start()
    assert held.wait(10)
    notes: list[str] = []
    done = threading.Event()
    thread = threading.Thread(target=lambda: (memory(tmp_path, ScriptedModel(), on_activity=notes.append).sync(),
                                              done.set()))
    thread.start()
    assert not done.wait(0.3)  # blocked by the other process's lock
    assert any("正在别处同步" in n for n in notes)
    release.set()
    other.join(10)
    assert done.wait(10)
    thread.join(10)
