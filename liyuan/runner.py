"""One way to run background work: named threads, ordered jobs, bounded waits.

Every background mechanism of the library is made of these pieces: a chat's lane
(:class:`liyuan.app.activity.Lane`), the card's sync worker
(:class:`liyuan.card.worker.SyncWorker`), a chunk store's worker
(:func:`liyuan.vector.worker.worker_for`) and the endpoint deadline
(:func:`liyuan.endpoint.within`). This module imports nothing of the library.

Invariants:

- A bounded wait that runs out returns :data:`TIMED_OUT`, the one value that means so
  everywhere; it never raises. ``None`` waits without a bound; a negative timeout is 0.
- A job's outcome is what its call returned or the exception it raised (any
  :class:`BaseException`): the exception is handed to whoever waits for the job, never
  raised in the worker thread, so a worker outlives every job it runs. An exception of
  a job whose waiter gave up (:meth:`Runner.run` timed out) is logged instead.
- A :class:`Runner` has at most one thread at a time. It starts with the first job and
  ends once the queue is empty (after ``idle_s`` seconds without work, or at once when
  the program is ending and the thread is not a daemon); the next job starts a new one.
- A runner's jobs run one at a time, in submission order, except that an ``urgent`` job
  goes ahead of every queued job that is not urgent. A job that is not ``keep`` and has
  not started when its waiter gave up is skipped (its outcome is :data:`TIMED_OUT`).
- Bounded queue: with ``max_kept``, at most that many kept jobs wait; a further one is
  not queued (:data:`REFUSED`). Single flight: a ``coalesce`` job submitted while another
  coalescing job waits unstarted is that job, so at most one runs and one waits.
- :meth:`Runner.close` takes no more jobs (:data:`REFUSED`), lets the queued ones
  finish and returns within its timeout (False when they had not), however long a
  stuck job takes; the thread then ends by itself once the queue is empty.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Generic, Literal, TypeAlias, TypeVar

__all__ = ["REFUSED", "TIMED_OUT", "Deadline", "Job", "NoResult", "Runner", "TimedOut", "detached", "spawn"]

T = TypeVar("T")

_log = logging.getLogger(__name__)


class NoResult(enum.Enum):
    """What a wait gives instead of a job's outcome."""

    TIMED_OUT = "TIMED_OUT"
    """The wait ran out first (a kept job still runs later)."""
    REFUSED = "REFUSED"
    """The job was not queued: the runner is closed, or too many kept jobs already wait."""

    def __repr__(self) -> str:
        return self.value


TIMED_OUT: Final = NoResult.TIMED_OUT
"""The one "the wait ran out" value of the library."""
REFUSED: Final = NoResult.REFUSED
"""A job a runner did not take (closed, or its bounded queue is full)."""
TimedOut: TypeAlias = Literal[NoResult.TIMED_OUT]
"""The type of :data:`TIMED_OUT`."""


def spawn(name: str, target: Callable[[], object], *, daemon: bool = True) -> threading.Thread:
    """Start ``target`` on a new thread called ``name`` (a daemon unless said otherwise)."""
    thread = threading.Thread(target=target, name=name, daemon=daemon)
    thread.start()
    return thread


class Deadline:
    """One bound shared by a series of waits: each wait gets what is left of it."""

    def __init__(self, timeout: float | None) -> None:
        self._ends = None if timeout is None else time.monotonic() + timeout

    def left(self) -> float | None:
        """Seconds left (never negative), or ``None`` when there is no bound."""
        return None if self._ends is None else max(0.0, self._ends - time.monotonic())


class Job(Generic[T]):
    """One piece of work and, once it has run, its outcome."""

    def __init__(self, call: Callable[[], T], *, keep: bool = True, urgent: bool = False,
                 coalesce: bool = False) -> None:
        self._call: Callable[[], T] | None = call
        self.keep = keep
        self.urgent = urgent
        self.coalesce = coalesce
        self.abandoned = False
        """Its waiter gave up (set by :meth:`Runner.run`)."""
        self._done = threading.Event()
        self._outcome: T | BaseException | TimedOut = TIMED_OUT

    def done(self) -> bool:
        """Whether it has run (or was skipped)."""
        return self._done.is_set()

    def ended(self, timeout: float | None = None) -> bool:
        """Wait until it has run or was skipped; False when ``timeout`` ran out first.

        Unlike :meth:`wait`, a skipped job (whose outcome is :data:`TIMED_OUT`) counts as ended.
        """
        return self._done.wait(None if timeout is None else max(timeout, 0.0))

    def wait(self, timeout: float | None = None) -> T | BaseException | TimedOut:
        """Its outcome (the result or the exception), or :data:`TIMED_OUT` when ``timeout`` ran out."""
        if not self._done.wait(None if timeout is None else max(timeout, 0.0)):
            return TIMED_OUT
        return self._outcome

    def _execute(self) -> T | BaseException:
        call, self._call = self._call, None  # what the call holds is not kept alive by the outcome
        assert call is not None, "a job runs once"
        try:
            return call()
        except BaseException as exc:  # handed to the waiter, which decides
            return exc

    def _finish(self, outcome: T | BaseException | TimedOut) -> None:
        self._call = None
        self._outcome = outcome
        self._done.set()


def detached(name: str, call: Callable[[], T]) -> Job[T]:
    """Run ``call`` on a daemon thread of its own, now; wait for it with :meth:`Job.wait`.

    For a call that may never return (a server trickling bytes): nothing queues behind
    it, and the thread is never joined.
    """
    job = Job(call)
    spawn(name, lambda: job._finish(job._execute()))
    return job


SHUTDOWN_POLL_S = 0.2
"""How often an idle non-daemon worker looks whether the program is ending."""


class Runner:
    """A named worker thread and its queue of jobs.

    Args:
        name: The thread's name.
        idle_s: Seconds the thread waits for a next job before it ends (0: it ends as
            soon as the queue is empty).
        daemon: Whether the thread is a daemon. A non-daemon runner keeps the process
            alive until its queued jobs are done; its idle wait ends when the program's
            main thread has finished (it looks every :data:`SHUTDOWN_POLL_S`).
        max_kept: At most this many kept jobs wait; ``None``: no bound.
    """

    def __init__(self, name: str, *, idle_s: float = 0.0, daemon: bool = True, max_kept: int | None = None) -> None:
        self.name = name
        self._idle_s = idle_s
        self._daemon = daemon
        self._max_kept = max_kept
        self._jobs: deque[Job[Any]] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._running: Job[Any] | None = None
        self._tail: Job[Any] | None = None
        self._closed = False

    @property
    def alive(self) -> bool:
        """Whether a worker thread is running now."""
        with self._lock:
            return self._thread is not None

    def on_own_thread(self) -> bool:
        """Whether the caller runs on this runner's worker thread (inside one of its jobs):
        waiting for the runner there would wait for itself."""
        with self._lock:
            return self._thread is not None and self._thread is threading.current_thread()

    @property
    def idle(self) -> bool:
        """No job runs or waits."""
        with self._lock:
            return self._running is None and not self._jobs

    def submit(self, call: Callable[[], T], *, keep: bool = True, urgent: bool = False,
               coalesce: bool = False) -> Job[T] | NoResult:
        """Queue ``call()``; returns its job at once, or :data:`REFUSED`.

        Args:
            call: The work.
            keep: Run it even after its waiter gave up; otherwise a job not started by
                then is skipped.
            urgent: Queue it ahead of every waiting job that is not urgent.
            coalesce: While another coalescing job waits unstarted, do not queue this
                one: return that job (they stand for the same work).
        """
        with self._lock:
            if self._closed or (keep and self._max_kept is not None
                                and sum(j.keep for j in self._jobs) >= self._max_kept):
                return REFUSED
            if coalesce:
                waiting = next((j for j in self._jobs if j.coalesce), None)
                if waiting is not None:
                    return waiting
            job = Job(call, keep=keep, urgent=urgent, coalesce=coalesce)
            if urgent:
                ahead = next((i for i, queued in enumerate(self._jobs) if not queued.urgent), len(self._jobs))
                self._jobs.insert(ahead, job)
            else:
                self._jobs.append(job)
            self._tail = self._jobs[-1]
            if self._thread is None:
                self._thread = spawn(self.name, self._loop, daemon=self._daemon)
            self._wake.notify()
        return job

    def run(self, call: Callable[[], T], timeout: float | None, *, keep: bool = False,
            urgent: bool = False) -> T | BaseException | NoResult:
        """:meth:`submit` ``call`` and wait at most ``timeout`` seconds for it.

        Returns:
            The call's result, the exception it raised (returned, not raised),
            :data:`TIMED_OUT` (a kept job still runs later; another is skipped if it has
            not started) or :data:`REFUSED`.
        """
        job = self.submit(call, keep=keep, urgent=urgent)
        if isinstance(job, NoResult):
            return job
        if job.wait(timeout) is TIMED_OUT:
            with self._lock:  # the worker ends a job under this lock: it either ended or is abandoned
                job.abandoned = not job.done()
        return job.wait(0.0)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for every job submitted so far; False when ``timeout`` ran out first."""
        with self._lock:
            tail = self._tail  # the job that ends last of those not ended yet
        return tail is None or tail.ended(timeout)  # a skipped job ended too

    def close(self, timeout: float | None = None) -> bool:
        """Take no more jobs, let the queued ones finish; False when ``timeout`` ran out first.

        The thread ends by itself once the queue is empty; when everything finished in
        time it is joined within what is left of ``timeout``.
        """
        deadline = Deadline(timeout)
        with self._lock:
            self._closed = True
            self._wake.notify()  # an idle thread ends now
            thread = self._thread
        finished = self.wait(deadline.left())
        if finished and thread is not None and thread is not threading.current_thread():
            thread.join(deadline.left())
        return finished

    def _loop(self) -> None:
        while self._step():
            pass

    def _step(self) -> bool:
        """Run the next job (waiting ``idle_s`` for one); False when the thread should end.

        One job per call: while the thread waits for work, no local of it holds the last
        job or its outcome.
        """
        with self._lock:
            if not self._jobs and not self._closed and self._idle_s > 0:
                self._idle()
            if not self._jobs:
                self._thread = None
                return False
            job = self._jobs.popleft()
            if job.abandoned and not job.keep:
                self._finish(job, TIMED_OUT)  # nobody waits for it any more
                return True
            self._running = job
        outcome = job._execute()
        with self._lock:
            self._running = None
            self._finish(job, outcome)
            lost = isinstance(outcome, BaseException) and job.abandoned
        if lost:
            _log.warning("%s 的延后任务出错（%s: %s）", self.name, type(outcome).__name__, outcome)
        return True

    def _idle(self) -> None:
        """Wait up to ``idle_s`` for a job (under the lock). A non-daemon thread looks every
        :data:`SHUTDOWN_POLL_S` whether the program is ending (its main thread done) and then
        stops waiting: its queue is empty, and an idle wait must not hold up the exit."""
        if self._daemon:
            self._wake.wait(self._idle_s)
            return
        deadline = time.monotonic() + self._idle_s
        while not self._jobs and not self._closed and threading.main_thread().is_alive():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._wake.wait(min(left, SHUTDOWN_POLL_S))

    def _finish(self, job: Job[Any], outcome: Any) -> None:
        # Under the lock. A runner keeps nothing of a job that ended (its outcome may hold
        # a traceback, and through it whatever the job's frames held).
        job._finish(outcome)
        if self._tail is job:
            self._tail = None
