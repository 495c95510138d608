"""One worker per chunk store: the bounded calls of a turn run there, in order.

A search stuck inside a store (a hung disk, a hung embeddings endpoint inside the
lock) used to cost one new thread per turn, and the next ingest waited on the store's
lock forever. Here every bounded call of a store goes through that store's single
:class:`~liyuan.runner.Runner`: the caller waits at most its timeout; the job either
runs later (when it carries data that must not be lost, ``keep=True``) or is skipped if
it has not started by the time its caller gave up.

Invariants:

- At most one worker thread per store at any time; it ends after :data:`WORKER_IDLE_S`
  seconds without work, and a new one starts with the next job.
- Jobs run one at a time, in submission order, except that an urgent job (a turn's
  recall) goes ahead of every queued job that is not urgent (ingests, archive batches):
  a recall waits at most for the job already running, never for a queue of writes
  (issue 25). A job's exception is handed to its caller (or logged, when the caller is
  gone), never raised in the worker.
- At most :data:`MAX_DEFERRED_INGESTS` kept jobs wait behind a stuck one; a further
  kept job is refused at once (``run`` returns :data:`~liyuan.runner.REFUSED`).
"""

from __future__ import annotations

import threading
import weakref

from liyuan.runner import Runner

__all__ = ["MAX_DEFERRED_INGESTS", "WORKER_IDLE_S", "worker_for"]

WORKER_IDLE_S = 30.0
"""A worker with nothing to do for this long ends; the next job starts a new one."""
MAX_DEFERRED_INGESTS = 32
"""Kept jobs (ingests) that may wait behind a stuck call; beyond this they are refused."""

_WORKERS: weakref.WeakKeyDictionary[object, Runner] = weakref.WeakKeyDictionary()
"""The worker of each store, process-wide and weakly keyed by the store object.

Process-wide because the bounded calls are module functions
(:func:`~liyuan.vector.recall.recall_for_turn` and its siblings) that get a memory
object, and every memory object on one store must share the store's one worker (two
workers on one store would race for its lock again). Weak, so an entry lives exactly as
long as its store object: a closed chat's store is collected and its entry goes with it.
A worker's thread holds no reference to the store once its queue is empty.
"""
_WORKERS_GUARD = threading.Lock()


def worker_for(owner: object) -> Runner:
    """The worker of ``owner`` (a chunk store, or the memory object when it has none)."""
    with _WORKERS_GUARD:
        worker = _WORKERS.get(owner)
        if worker is None:
            worker = _WORKERS[owner] = Runner("liyuan-vector", idle_s=WORKER_IDLE_S, max_kept=MAX_DEFERRED_INGESTS)
        return worker
