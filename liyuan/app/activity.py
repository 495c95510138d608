"""Activity events and the background lane a chat's memory work runs on.

Invariants:

- Work handed to a :class:`Lane` runs in submission order, one item at a time, on one
  worker thread (a :class:`~liyuan.runner.Runner`); :meth:`Lane.wait` returns once
  everything submitted before it is done.
- The thread lives on between turns (up to :data:`LANE_IDLE_S` without work), so turns
  do not start a thread each (issue 36).
- The thread is not a daemon: a process that ends without :meth:`Lane.close` still
  finishes the queued work first (and waits for a stuck job: Python cannot kill it); an
  idle lane does not hold the exit up.
- An exception inside background work never reaches the app's thread: it becomes an
  ``error`` :class:`Activity` (and is kept on :attr:`Lane.errors`), and the lane goes on.
- With ``background=False`` the same work runs inline, in the caller's thread, so a
  script or a test sees every effect as soon as the call returns.
- Waiting for a lane (or closing it) from its own worker thread, say in an
  ``on_activity`` listener called from there, is refused with
  :class:`~liyuan.errors.StateError` (:func:`refuse_own_wait`): it would wait for itself forever.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from liyuan.errors import StateError
from liyuan.runner import REFUSED, TIMED_OUT, Job, Runner

if TYPE_CHECKING:
    from liyuan.card.sync import SyncOutcome
    from liyuan.compaction import CompactionOutcome
    from liyuan.vector.results import IngestResult

__all__ = ["LANE_IDLE_S", "Activity", "ActivityKind", "Lane", "Listener", "Outcome", "refuse_own_wait"]

LANE_IDLE_S = 300.0
"""How long a chat's lane thread waits for the next turn's work before it ends."""

_log = logging.getLogger("liyuan.app")

ActivityKind = Literal["compact", "sync", "vector", "discussion", "lore", "error"]

Outcome: TypeAlias = "CompactionOutcome[Any] | SyncOutcome | IngestResult"
"""What a piece of memory work did, as the library returns it (a compaction's plan is a story's
:class:`~liyuan.story.compact.CompactionPlan` or a discussion's :class:`~liyuan.discussion.compact.DiscussionPlan`)."""


@dataclass(frozen=True, slots=True)
class Activity:
    """One activity line of the memory, as the original shows it in its status bar."""

    kind: ActivityKind
    """What produced it: ``compact`` (story compaction), ``sync`` (card memory),
    ``vector`` (recall and ingest), ``discussion`` (agent discussion), ``lore`` (what the
    lore book activated and what did not fit), ``error``."""
    text: str
    """The Chinese line, e.g. ``前情已压缩：30 轮 2466 字 → 摘要 412 字``."""
    chat_id: str | None = None
    """The chat it concerns; ``None`` for card-wide work (sync)."""
    outcome: Outcome | None = None
    """The outcome object of the work the line reports: a story compaction's
    :class:`~liyuan.compaction.CompactionOutcome` (story and discussion compaction
    share the type; its ``plan`` tells them apart), a sync's
    :class:`~liyuan.card.sync.SyncOutcome`, an ingest's
    :class:`~liyuan.vector.results.IngestResult`; ``None`` for lines of no single
    piece of work (recall warnings, errors, waits). The lines of one piece of work
    reach the listener together, when it ends, each carrying its outcome."""


Listener = Callable[[Activity], None]
"""Receives every :class:`Activity`; called from background threads, so keep it quick
(and do not close the card or wait for its work there: that is refused)."""


def refuse_own_wait(on_own_thread: bool, what: str) -> None:
    """Raise :class:`~liyuan.errors.StateError` when ``what`` (a close or a wait) is called on
    the worker thread it would wait for: the thread would wait for its own job, forever."""
    if on_own_thread:
        raise StateError(f"不能在后台线程里{what}（比如在 on_activity 回调里）：后台线程会等它自己，永远等不完；"
                         "请在回调之外调用，回调里只记下要做的事")


class Lane:
    """One ordered background lane (or inline execution when ``background`` is False)."""

    def __init__(self, name: str, emit: Callable[[Activity], None], *, background: bool = True,
                 chat_id: str | None = None) -> None:
        self._emit = emit
        self._chat_id = chat_id
        self._runner = Runner(name, daemon=False, idle_s=LANE_IDLE_S) if background else None
        self._last: Job[None] | None = None
        self._guard = threading.Lock()
        self.errors: deque[BaseException] = deque(maxlen=20)
        """The newest errors raised by background work (oldest dropped first)."""

    def submit(self, work: Callable[[], None]) -> None:
        """Run ``work`` after everything submitted before it.

        On a closed lane (a turn that raced :meth:`close`) the work runs here, in the
        caller's thread, after the lane's last job: a reply already written still gets
        its compaction and ingest, and the caller gets no error from a shut-down lane.
        """
        with self._guard:
            job = self._runner.submit(partial(self._run, work)) if self._runner is not None else REFUSED
            if isinstance(job, Job):
                self._last = job
                return
        self.unfinished()  # keep the order: what was queued before runs first
        self._run(work)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for all work submitted so far; False when ``timeout`` ran out first."""
        return self.unfinished(timeout) is None

    def unfinished(self, timeout: float | None = None) -> Job[None] | None:
        """Wait for all work submitted so far; ``None`` once it is done, else (``timeout``
        ran out) the job of the newest work then, to check on later with ``done()``."""
        refuse_own_wait(self.on_own_thread(), "等这一局的后台任务")
        with self._guard:
            last = self._last
        if last is None:
            return None
        outcome = last.wait(timeout)
        if outcome is TIMED_OUT:
            return last
        if isinstance(outcome, BaseException):
            raise outcome  # SystemExit and the like (:meth:`_run` catches every Exception), as before
        return None

    def close(self, timeout: float | None = None) -> bool:
        """Finish the submitted work and stop the thread; later work runs in its caller."""
        refuse_own_wait(self.on_own_thread(), "关闭这一局")
        return self._runner is None or self._runner.close(timeout)

    def on_own_thread(self) -> bool:
        """Whether the caller runs on this lane's worker thread (inside its work)."""
        return self._runner is not None and self._runner.on_own_thread()

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as exc:  # background work must never take the app's turn down
            self.errors.append(exc)
            _log.exception("后台记忆任务出错")
            self._emit(Activity("error", f"后台记忆任务出错：{type(exc).__name__}: {exc}", self._chat_id))
