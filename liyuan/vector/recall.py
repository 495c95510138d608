"""The per-beat recall and ingest: bounded, so a stuck store never holds up a beat.

Invariants:

- :func:`recall_for_beat` never raises and never takes much longer than ``timeout``:
  the search runs on the store's worker thread; on timeout or error the beat gets no
  lines and a Chinese warning goes to ``warn`` (to the ``logging`` module when no
  ``warn`` is given: a failing embeddings endpoint is never silent). A hung search is
  abandoned, not joined, so it cannot hold up the beat or the process exit.
- :func:`ingest_for_beat` is bounded the same way. A search stuck inside the store keeps
  the store's lock, so an ingest would wait on it forever; instead, the caller gets
  ``deferred`` after ``timeout`` and the beat stays queued on the worker: it is ingested
  once the store frees up (at most :data:`MAX_DEFERRED_INGESTS` wait; beyond that a beat
  is dropped, with a warning). A recall whose caller gave up is never run late.
- :func:`bounded_archive` does the same for the compaction's archive, in small batches
  (:meth:`~liyuan.vector.VectorMemory.archive_batches`), each its own job on the worker.
- Recall first: a recall is queued ahead of waiting ingests and archive batches, so it
  waits at most for the one batch being embedded, never for a whole compaction's
  archive (issue 25: 28 chunks held the next recall for about 11 s).
- One worker thread per store at most (it ends after :data:`WORKER_IDLE_S` idle
  seconds): hung beats queue behind the stuck call instead of each leaking a thread.
- The branch ids are frozen before the worker starts (a reroll would move the leaf).
- One line per hit: ``- 【title】text`` with the text trimmed and its line breaks written
  `` / `` (:func:`one_line`), so recalled text cannot add a line that looks like another
  hit; zero hits, no lines.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol

from liyuan.errors import ModelOutputError
from liyuan.session.entries import Entry
from liyuan.vector.results import Hit, IngestResult
from liyuan.vector.worker import MAX_DEFERRED_INGESTS, REFUSED, TIMED_OUT, WORKER_IDLE_S, worker_for

__all__ = [
    "INGEST_TIMEOUT_S",
    "MAX_DEFERRED_INGESTS",
    "RECALL_TIMEOUT_S",
    "WORKER_IDLE_S",
    "Archiver",
    "Ingester",
    "Recaller",
    "bounded_archive",
    "branch_ids_of",
    "format_recall_lines",
    "ingest_for_beat",
    "recall_for_beat",
]

RECALL_TIMEOUT_S = 5.0
INGEST_TIMEOUT_S = 5.0
"""The per-beat ingest waits as long as the recall may: the same 5-second bound."""

_log = logging.getLogger(__name__)


class Recaller(Protocol):
    """What the beat needs from the vector memory (:class:`~liyuan.vector.VectorMemory`)."""

    def recall_for_turn(self, query: str, branch_ids: Collection[str] | None) -> Sequence[Hit]:
        """Hits for the user's raw words on the given branch."""
        ...


class Ingester(Protocol):
    """What the beat's ingest needs (:class:`~liyuan.vector.VectorMemory`)."""

    def ingest_beat(self, text: str, *, node_id: str | None, branch_ids: Collection[str] | None) -> IngestResult:
        """Queue the finished beat's text; ingest the queue when due."""
        ...


class Archiver(Protocol):
    """What a compaction's archive needs (:class:`~liyuan.vector.VectorMemory`)."""

    def archive_compacted(self, text: str, anchor_id: str | None = None) -> int:
        """Store the text a compaction is about to cover."""
        ...

    # Optional: ``archive_batches(text, anchor_id)`` returning the same work as a list
    # of small jobs (:meth:`liyuan.vector.VectorMemory.archive_batches`).


def _worker_of(memory: object) -> object:
    # One worker per store: two memory objects on one store share it (and its lock).
    return getattr(memory, "store", None) or memory


def branch_ids_of(branch: Iterable[Entry]) -> frozenset[str]:
    """The entry ids of a root-to-leaf branch, frozen."""
    return frozenset(entry.id for entry in branch)


# --8<-- [start:recall_lines]
LINE_JOIN = " / "
"""Stands for a line break inside a recalled chunk: each hit stays one line."""


def one_line(text: str) -> str:
    """``text`` on one line: its non-blank lines trimmed and joined by :data:`LINE_JOIN`.

    Every line break ``str.splitlines`` knows counts (``\r``, ``\u2028``, ``\x85`` ...):
    a chunk holding ``\n- 【剧情数据库】...`` must not add a line that reads as another hit.
    """
    return LINE_JOIN.join(part for line in text.splitlines() if (part := line.strip()))


def format_recall_lines(hits: Sequence[Hit]) -> list[str]:
    """``- 【title】text`` per hit, one line each (a hit without a title gets no brackets)."""
    lines = []
    for hit in hits:
        text = one_line(hit.text)
        title = " ".join(hit.title.split())
        if text:
            lines.append(f"- 【{title}】{text}" if title else f"- {text}")
    return lines
# --8<-- [end:recall_lines]


def recall_for_beat(
    memory: Recaller | None,
    query: str,
    branch_ids: Collection[str] | None,
    *,
    timeout: float = RECALL_TIMEOUT_S,
    warn: Callable[[str], None] | None = None,
) -> list[str]:
    """The 【剧情记忆】 lines for this beat, or ``[]``.

    Args:
        memory: The chat's vector memory, or ``None`` when there is none.
        query: The user's raw words for this beat (on a regenerate, the last user text).
        branch_ids: Ids on the current branch; copied before the worker starts.
        timeout: Seconds to wait for the search (default 5).
        warn: Receives a Chinese warning when the search times out or fails (with the
            error, e.g. the embeddings endpoint's HTTP status); default: logged.

    Returns:
        One line per hit; empty on zero hits, timeout or error.
    """
    if memory is None or not query.strip():
        return []
    report = warn if warn is not None else _log.warning
    frozen = frozenset(branch_ids) if branch_ids is not None else None
    result = worker_for(_worker_of(memory)).run(lambda: memory.recall_for_turn(query, frozen), timeout,
                                                urgent=True)
    if result is TIMED_OUT:
        report(f"向量记忆检索超过 {timeout:g} 秒，本轮不注入【剧情记忆】")
        return []
    if isinstance(result, BaseException):
        report(f"向量记忆检索出错（{type(result).__name__}: {result}），本轮不注入【剧情记忆】")
        return []
    return format_recall_lines(result)


def ingest_for_beat(
    memory: Ingester | None,
    text: str,
    *,
    node_id: str | None,
    branch_ids: Collection[str] | None,
    timeout: float = INGEST_TIMEOUT_S,
    warn: Callable[[str], None] | None = None,
) -> IngestResult:
    """The per-beat ingest (:meth:`~liyuan.vector.VectorMemory.ingest_beat`), bounded like the recall.

    Never raises and never takes much longer than ``timeout``. When the store is stuck
    (a search holding its lock), the beat is left queued on the store's worker and
    ingested once the store frees up; the result says ``deferred``. When
    :data:`MAX_DEFERRED_INGESTS` beats already wait, this one is ``dropped``.

    Args:
        memory: The chat's vector memory, or ``None``.
        text: The finished beat's reply text.
        node_id: Id of the beat's assistant entry.
        branch_ids: Ids on the current branch; copied before the worker starts.
        timeout: Seconds to wait (default 5).
        warn: Receives a Chinese warning on delay, drop or error (default: logged).

    Returns:
        The ingest's result; ``reason`` is ``deferred``, ``dropped`` or ``error`` when it
        did not finish in time or failed.
    """
    if memory is None:
        return IngestResult(False, reason="disabled")
    report = warn if warn is not None else _log.warning
    frozen = frozenset(branch_ids) if branch_ids is not None else None
    result = worker_for(_worker_of(memory)).run(
        lambda: memory.ingest_beat(text, node_id=node_id, branch_ids=frozen), timeout, keep=True)
    if result is TIMED_OUT:
        report(f"向量记忆写入超过 {timeout:g} 秒（库被占用），这一轮排队，等库空出来再写")
        return IngestResult(False, reason="deferred")
    if result is REFUSED:
        report(f"向量记忆已有 {MAX_DEFERRED_INGESTS} 轮排队等写入，这一轮不再写入")
        return IngestResult(False, reason="dropped")
    if isinstance(result, IngestResult):
        return result
    detail = f"{type(result).__name__}: {result}" if isinstance(result, BaseException) else "返回值不对"
    if isinstance(result, ModelOutputError):  # refused vectors: the beat stays queued
        report(f"向量记忆写入出错（{detail}），这一轮留在队列里，下次写入时重试")
    else:
        report(f"向量记忆写入出错（{detail}），这一轮没有写入")
    return IngestResult(False, reason="error")


def bounded_archive(memory: Archiver, *, timeout: float = INGEST_TIMEOUT_S,
                    warn: Callable[[str], None] | None = None) -> Callable[[str, str], None]:
    """The ``archive`` argument of :func:`liyuan.story.compact.run_compaction`, bounded like the ingest.

    ``memory.archive_compacted`` runs on the store's worker, as small batches when the
    memory offers them (a recall may run between two batches); when the store is stuck, the
    compaction goes on after ``timeout`` (the covered text stays in the session file
    anyway) and the archive is written once the store frees up. Never raises.
    """
    report = warn if warn is not None else _log.warning

    def archive(text: str, anchor_id: str) -> None:
        worker = worker_for(_worker_of(memory))
        batches = getattr(memory, "archive_batches", None)
        jobs: Sequence[Callable[[], object]] = (
            batches(text, anchor_id) if callable(batches) else [lambda: memory.archive_compacted(text, anchor_id)])
        deadline = time.monotonic() + timeout
        late = False
        for job in jobs:
            result = worker.run(job, max(0.0, deadline - time.monotonic()), keep=True)
            if result is TIMED_OUT:
                late = True  # the rest are queued without waiting
            elif result is REFUSED:
                report(f"向量记忆已有 {MAX_DEFERRED_INGESTS} 项排队等写入，这次归档不再写入")
                return
            elif isinstance(result, BaseException):
                report(f"压缩前归档出错（{type(result).__name__}: {result}）")
                return
        if late:
            report(f"压缩前归档超过 {timeout:g} 秒（库被占用），等库空出来再写")

    return archive
