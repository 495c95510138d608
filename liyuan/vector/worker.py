"""One worker thread per chunk store: the bounded calls of a turn run there, in order.

A search stuck inside a store (a hung disk, a hung embeddings endpoint inside the
lock) used to cost one new thread per turn, and the next ingest waited on the store's
lock forever. Here every bounded call of a store goes through that store's single
worker: the caller waits at most its timeout; the job either runs later (when it
carries data that must not be lost, ``keep=True``) or is skipped if it has not started
by the time its caller gave up.

Invariants:

- At most one worker thread per store at any time; it ends after :data:`WORKER_IDLE_S`
  seconds without work, and a new one starts with the next job.
- Jobs run one at a time, in submission order, except that an urgent job (a turn's
  recall) goes ahead of every queued job that is not urgent (ingests, archive batches):
  a recall waits at most for the job already running, never for a queue of writes
  (issue 25). A job's exception is handed to its caller (or logged, when the caller is
  gone), never raised in the worker.
- At most :data:`MAX_DEFERRED_INGESTS` kept jobs wait behind a stuck one; a further
  kept job is refused at once (:meth:`StoreWorker.run` returns :data:`REFUSED`).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["MAX_DEFERRED_INGESTS", "REFUSED", "TIMED_OUT", "WORKER_IDLE_S", "StoreWorker", "worker_for"]

WORKER_IDLE_S = 30.0
"""A worker with nothing to do for this long ends; the next job starts a new one."""
MAX_DEFERRED_INGESTS = 32
"""Kept jobs (ingests) that may wait behind a stuck call; beyond this they are refused."""

_log = logging.getLogger(__name__)


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


TIMED_OUT: Final = _Marker("TIMED_OUT")
"""The caller's wait ended first (a kept job still runs later)."""
REFUSED: Final = _Marker("REFUSED")
"""Too many kept jobs already wait: this one was not queued."""


@dataclass
class _Job:
    call: Callable[[], Any]
    keep: bool
    urgent: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    abandoned: bool = False
    outcome: list[Any] = field(default_factory=list)


class StoreWorker:
    """The worker of one store (get it with :func:`worker_for`)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: deque[_Job] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        """Whether a worker thread is running now."""
        with self._lock:
            return self._thread is not None

    def run(self, call: Callable[[], Any], timeout: float, *, keep: bool = False, urgent: bool = False) -> Any:
        """Run ``call()`` on the worker; wait at most ``timeout`` seconds.

        Args:
            call: The work (it may block on the store for as long as it likes).
            timeout: Seconds the caller waits.
            keep: Run it even after the caller stopped waiting (an ingest: the turn's
                text must not be lost); otherwise a job not started by then is skipped.
            urgent: Queue it ahead of every waiting job that is not urgent (a recall).

        Returns:
            The call's result, the exception it raised (returned, not raised),
            :data:`TIMED_OUT` or :data:`REFUSED`.
        """
        job = _Job(call, keep, urgent)
        with self._lock:
            if keep and sum(j.keep for j in self._jobs) >= MAX_DEFERRED_INGESTS:
                return REFUSED
            if urgent:
                ahead = next((i for i, queued in enumerate(self._jobs) if not queued.urgent), len(self._jobs))
                self._jobs.insert(ahead, job)
            else:
                self._jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._wake.notify()
        if job.done.wait(max(timeout, 0.0)):
            return job.outcome[0]
        with self._lock:
            job.abandoned = True
        return TIMED_OUT

    def _loop(self) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    self._wake.wait(WORKER_IDLE_S)
                if not self._jobs:
                    self._thread = None
                    return
                job = self._jobs.popleft()
                if job.abandoned and not job.keep:
                    continue  # nobody waits for this recall any more
            try:
                job.outcome.append(job.call())
            except BaseException as exc:  # handed to the caller's thread, which decides
                job.outcome.append(exc)
                if job.abandoned:
                    _log.warning("向量记忆的延后任务出错（%s: %s）", type(exc).__name__, exc)
            job.done.set()


_WORKERS: weakref.WeakKeyDictionary[object, StoreWorker] = weakref.WeakKeyDictionary()
_WORKERS_GUARD = threading.Lock()


def worker_for(owner: object) -> StoreWorker:
    """The worker of ``owner`` (a chunk store, or the memory object when it has none)."""
    with _WORKERS_GUARD:
        worker = _WORKERS.get(owner)
        if worker is None:
            worker = _WORKERS[owner] = StoreWorker("liyuan-vector")
        return worker
