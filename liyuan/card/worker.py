"""The background sync worker.

:class:`SyncWorker` runs syncs in background threads, one
:class:`~liyuan.runner.Runner` per card. Invariant: per card at most one sync runs at a
time, and triggers that arrive during a run collapse into exactly one further run after
it (the runner's single flight: every sync job coalesces).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from liyuan.card.sync import CardMemory, SyncOutcome
from liyuan.errors import StateError
from liyuan.runner import Deadline, Runner

__all__ = ["ENTRY_SYNC_WAIT_S", "SyncWorker"]

ENTRY_SYNC_WAIT_S = 2.0
"""How long the sync started on entering a chat waits for that chat's first turn to be
assembled before it starts anyway (:meth:`SyncWorker.trigger`'s ``after``)."""

log = logging.getLogger("liyuan.card")


class SyncWorker:
    """Runs :meth:`CardMemory.sync` in the background, one run at a time per card.

    The app calls :meth:`trigger` when a session of a card is entered and after a chat
    is deleted. A trigger while that card's sync runs marks it queued; however many
    triggers arrive, exactly one more run follows the current one.

    Args:
        factory: Builds the card's :class:`CardMemory` fresh for each run (names,
            language and model are read anew), or returns ``None`` when no model is
            configured (the run is then skipped silently).
        on_outcome: Called after every finished run.
        on_error: Called when a run raised; the worker itself keeps going.
    """

    def __init__(
        self,
        factory: Callable[[Path], CardMemory | None],
        *,
        on_outcome: Callable[[Path, SyncOutcome], None] | None = None,
        on_error: Callable[[Path, BaseException], None] | None = None,
    ) -> None:
        self._factory = factory
        self._on_outcome = on_outcome
        self._on_error = on_error
        self._guard = threading.Lock()
        self._runners: dict[Path, Runner] = {}
        self._waits: list[threading.Event] = []
        """The ``after`` events of runs that may still be waiting (see :meth:`release`)."""
        self.runs = 0
        """Finished runs, over all cards (for tests and stats)."""

    def trigger(self, card_dir: str | Path, *, after: threading.Event | None = None) -> None:
        """Ask for a sync of this card; returns at once.

        ``after``: the run starts once it is set, or :data:`ENTRY_SYNC_WAIT_S` seconds
        later (entering a chat: its first turn goes first; a trigger that arrives while
        this one is queued joins it, waiting the same way).
        """
        key = Path(card_dir).resolve()
        with self._guard:
            runner = self._runners.get(key)
            if runner is None:
                runner = self._runners[key] = Runner(f"card-sync-{key.name}")
            if after is not None:  # those already set (their chat's first turn came) are dropped
                self._waits = [*(event for event in self._waits if not event.is_set()), after]
        runner.submit(partial(self._run, key, after), coalesce=True)

    def release(self) -> None:
        """Let every run waiting for an ``after`` start now (the app asked for a sync, or waits for one)."""
        with self._guard:
            waits, self._waits = self._waits, []
        for event in waits:
            event.set()

    def delete_chat(self, card_dir: str | Path, chat_id: str) -> bool:
        """Delete a chat (see :meth:`CardMemory.delete_chat`), then trigger a sync."""
        key = Path(card_dir).resolve()
        memory = self._factory(key)
        if memory is None:
            return False
        deleted = memory.delete_chat(chat_id)
        self.trigger(key)
        return deleted

    def _run(self, key: Path, after: threading.Event | None = None) -> None:
        # Should the run end by a BaseException (SystemExit from a model), the runner hands
        # it to the job and goes on: the card is no longer running, waiters are released.
        if after is not None:
            after.wait(ENTRY_SYNC_WAIT_S)
        self._run_once(key)
        with self._guard:
            self.runs += 1

    def _run_once(self, key: Path) -> None:
        try:
            memory = self._factory(key)
            if memory is None:
                return
            outcome = memory.sync()
        except Exception as exc:  # a background thread must report, never die silently
            log.exception("card memory sync failed for %s", key)
            self._call(self._on_error, key, exc)
            return
        self._call(self._on_outcome, key, outcome)

    @staticmethod
    def _call(callback: Callable[[Path, Any], None] | None, key: Path, value: object) -> None:
        # A listener that raises is logged, not allowed to end the worker's loop.
        if callback is None:
            return
        try:
            callback(key, value)
        except Exception:
            log.exception("card sync listener failed for %s", key)

    def on_own_thread(self) -> bool:
        """Whether the caller runs inside a sync (on a worker thread of this worker)."""
        with self._guard:
            runners = list(self._runners.values())
        return any(runner.on_own_thread() for runner in runners)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no sync runs or is queued. Returns False on timeout.

        Raises:
            StateError: Called from inside a sync (it would wait for itself).
        """
        if self.on_own_thread():
            raise StateError("不能在跨局同步的后台线程里等同步做完（比如在 on_activity 回调里）：它会等它自己，"
                             "永远等不完；请在回调之外调用")
        deadline = Deadline(timeout)
        while True:
            with self._guard:
                busy = [runner for runner in self._runners.values() if not runner.idle]
            if not busy:
                return True
            for runner in busy:
                if not runner.wait(deadline.left()):
                    return False
