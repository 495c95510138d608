"""The per-turn recall and ingest: bounded, so a stuck store never holds up a turn.

Invariants:

- :func:`recall_for_turn` never raises and never takes much longer than ``timeout``:
  the search runs on the store's worker thread; on timeout or error the turn gets no
  lines and a Chinese warning goes to ``warn`` (to the ``logging`` module when no
  ``warn`` is given: a failing embeddings endpoint is never silent). A hung search is
  abandoned, not joined, so it cannot hold up the turn or the process exit.
- :func:`ingest_for_turn` is bounded the same way. A search stuck inside the store keeps
  the store's lock, so an ingest would wait on it forever; instead, the caller gets
  ``deferred`` after ``timeout`` and the turn stays queued on the worker: it is ingested
  once the store frees up (at most :data:`MAX_DEFERRED_INGESTS` wait; beyond that a turn
  is dropped, with a warning). A recall whose caller gave up is never run late.
- :func:`bounded_archive` does the same for the compaction's archive; its chunks are
  embedded in a thread of their own and only the store writes queue on the worker.
- Recall first: a recall is queued ahead of waiting ingests and archive writes, and
  never waits for an archive's embedding (issue 25: 28 chunks held the next recall for
  about 11 s).
- One worker thread per store at most (it ends after :data:`WORKER_IDLE_S` idle
  seconds): hung turns queue behind the stuck call instead of each leaking a thread.
- :func:`warm_in_background` loads a store's search snapshot and lexical index on the
  store's worker when a chat opens, so the first recall queues behind it and finds it
  ready instead of paying for it inside its 5-second bound.
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
from liyuan.runner import REFUSED, TIMED_OUT, NoResult, detached, spawn
from liyuan.session.branch import BranchView
from liyuan.session.branch import branch_ids as frozen_ids
from liyuan.session.entries import Entry
from liyuan.vector.results import Hit, IngestResult
from liyuan.vector.worker import MAX_DEFERRED_INGESTS, worker_for

__all__ = [
    "INGEST_TIMEOUT_S",
    "RECALL_TIMEOUT_S",
    "WARM_LINE",
    "Archiver",
    "Ingester",
    "Recaller",
    "bounded_archive",
    "branch_ids_of",
    "format_recall_lines",
    "ingest_for_turn",
    "recall_for_turn",
    "recall_hits_for_turn",
    "warm_in_background",
]

RECALL_TIMEOUT_S = 5.0
RECALL_SEARCH_S = 1.0
"""What a recall keeps of its bound for the search itself: it waits for a keyword index
that is loading (the first turn after opening a chat) until then, and past it ranks
without the index rather than return nothing."""
INGEST_TIMEOUT_S = 5.0
"""The per-turn ingest waits as long as the recall may: the same 5-second bound."""

_log = logging.getLogger(__name__)


class Recaller(Protocol):
    """What the turn needs from the vector memory (:class:`~liyuan.vector.VectorMemory`)."""

    def recall_for_turn(self, query: str, branch_ids: Collection[str] | None, *,
                        lexical_wait: float = ...) -> Sequence[Hit]:
        """Hits for the user's raw words on the given branch (waiting at most ``lexical_wait``
        seconds for a keyword index that is loading)."""
        ...


class Ingester(Protocol):
    """What the turn's ingest needs (:class:`~liyuan.vector.VectorMemory`)."""

    def ingest_turn(self, text: str, *, node_id: str | None, branch_ids: Collection[str] | None) -> IngestResult:
        """Queue the finished turn's text; ingest the queue when due."""
        ...


class Archiver(Protocol):
    """What a compaction's archive needs (:class:`~liyuan.vector.VectorMemory`)."""

    def archive_compacted(self, text: str, anchor_id: str | None = None) -> int:
        """Store the text a compaction is about to cover."""
        ...

    # Optional: ``archive_batches(text, anchor_id)`` returning the same work as steps
    # that embed and hand back the store write (:meth:`liyuan.vector.VectorMemory.archive_batches`).


def _worker_of(memory: object) -> object:
    # One worker per store: two memory objects on one store share it (and its lock).
    return getattr(memory, "store", None) or memory


def branch_ids_of(branch: Iterable[Entry]) -> Collection[str]:
    """The entry ids of a root-to-leaf branch, frozen.

    For the tree's current branch (a :class:`~liyuan.session.branch.BranchView`) this is
    an O(1) view with O(1) membership, however long the chat; otherwise a ``frozenset``.
    """
    if isinstance(branch, BranchView):
        return branch.ids()
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


def recall_for_turn(
    memory: Recaller | None,
    query: str,
    branch_ids: Collection[str] | None,
    *,
    timeout: float = RECALL_TIMEOUT_S,
    warn: Callable[[str], None] | None = None,
) -> list[str]:
    """The 【剧情记忆】 lines for this turn, or ``[]``: :func:`format_recall_lines` of
    :func:`recall_hits_for_turn` (same arguments)."""
    return format_recall_lines(recall_hits_for_turn(memory, query, branch_ids, timeout=timeout, warn=warn))


def recall_hits_for_turn(
    memory: Recaller | None,
    query: str,
    branch_ids: Collection[str] | None,
    *,
    timeout: float = RECALL_TIMEOUT_S,
    warn: Callable[[str], None] | None = None,
) -> list[Hit]:
    """This turn's recalled hits (each with its :class:`~liyuan.vector.results.HitTrace`), or ``[]``.

    Args:
        memory: The chat's vector memory, or ``None`` when there is none.
        query: The user's raw words for this turn (on a regenerate, the last user text).
        branch_ids: Ids on the current branch; frozen (copied unless already frozen) before the worker starts.
        timeout: Seconds to wait for the search (default 5).
        warn: Receives a Chinese warning when the search times out or fails (with the
            error, e.g. the embeddings endpoint's HTTP status); default: logged.

    Returns:
        The hits, best first; empty on zero hits, timeout or error.
    """
    if memory is None or not query.strip():
        return []
    report = warn if warn is not None else _log.warning
    frozen = frozen_ids(branch_ids)
    deadline = time.monotonic() + timeout - RECALL_SEARCH_S

    def recall() -> Sequence[Hit]:  # a keyword load under way is waited for while the bound allows
        return memory.recall_for_turn(query, frozen, lexical_wait=max(0.0, deadline - time.monotonic()))

    result = worker_for(_worker_of(memory)).run(recall, timeout, urgent=True)
    if isinstance(result, NoResult):  # TIMED_OUT: a recall is not kept, so it is never refused
        report(f"向量记忆检索超过 {timeout:g} 秒，本轮不注入【剧情记忆】")
        return []
    if isinstance(result, BaseException):
        report(f"向量记忆检索出错（{type(result).__name__}: {result}），本轮不注入【剧情记忆】")
        return []
    return list(result)


def ingest_for_turn(
    memory: Ingester | None,
    text: str,
    *,
    node_id: str | None,
    branch_ids: Collection[str] | None,
    timeout: float = INGEST_TIMEOUT_S,
    warn: Callable[[str], None] | None = None,
) -> IngestResult:
    """The per-turn ingest (:meth:`~liyuan.vector.VectorMemory.ingest_turn`), bounded like the recall.

    Never raises and never takes much longer than ``timeout``. When the store is stuck
    (a search holding its lock), the turn is left queued on the store's worker and
    ingested once the store frees up; the result says ``deferred``. When
    :data:`MAX_DEFERRED_INGESTS` turns already wait, this one is ``dropped``.

    Args:
        memory: The chat's vector memory, or ``None``.
        text: The finished turn's reply text.
        node_id: Id of the turn's assistant entry.
        branch_ids: Ids on the current branch; frozen (copied unless already frozen) before the worker starts.
        timeout: Seconds to wait (default 5).
        warn: Receives a Chinese warning on delay, drop or error (default: logged).

    Returns:
        The ingest's result; ``reason`` is ``deferred``, ``dropped`` or ``error`` when it
        did not finish in time or failed.
    """
    if memory is None:
        return IngestResult(False, reason="disabled")
    report = warn if warn is not None else _log.warning
    frozen = frozen_ids(branch_ids)
    result = worker_for(_worker_of(memory)).run(
        lambda: memory.ingest_turn(text, node_id=node_id, branch_ids=frozen), timeout, keep=True)
    if result is TIMED_OUT:
        report(f"向量记忆写入超过 {timeout:g} 秒（库被占用），这一轮排队，等库空出来再写")
        return IngestResult(False, reason="deferred")
    if result is REFUSED:
        report(f"向量记忆已有 {MAX_DEFERRED_INGESTS} 轮排队等写入，这一轮不再写入")
        return IngestResult(False, reason="dropped")
    if isinstance(result, IngestResult):
        return result
    detail = f"{type(result).__name__}: {result}" if isinstance(result, BaseException) else "返回值不对"
    if isinstance(result, ModelOutputError):  # refused vectors: the turn stays queued
        report(f"向量记忆写入出错（{detail}），这一轮留在队列里，下次写入时重试")
    else:
        report(f"向量记忆写入出错（{detail}），这一轮没有写入")
    return IngestResult(False, reason="error")


ARCHIVE_WRITE_WAIT_S = 600.0
"""How long the archive's thread waits for one store write before queuing the next."""


def bounded_archive(memory: Archiver, *, timeout: float = INGEST_TIMEOUT_S,
                    warn: Callable[[str], None] | None = None) -> Callable[[str, str], None]:
    """The ``archive`` argument of :func:`liyuan.story.compact.run_compaction`, bounded like the ingest.

    When the memory offers :meth:`~liyuan.vector.VectorMemory.archive_batches`, a thread
    of the archive's own embeds the chunks one at a time and hands only the store
    writes to the store's worker, so a recall never waits for the embedding (issue 25:
    28 chunks used to hold the next recall for about 11 s). Otherwise
    ``memory.archive_compacted`` runs on the worker as one job. Either way the compaction
    goes on after ``timeout`` (the covered text stays in the session file anyway) and
    the archive is finished in the background. Never raises.
    """
    report = warn if warn is not None else _log.warning

    def archive(text: str, anchor_id: str) -> None:
        worker = worker_for(_worker_of(memory))
        steps_of = getattr(memory, "archive_batches", None)
        if not callable(steps_of):
            result = worker.run(lambda: memory.archive_compacted(text, anchor_id), timeout, keep=True)
            if result is TIMED_OUT:
                report(f"压缩前归档超过 {timeout:g} 秒（库被占用），等库空出来再写")
            elif result is REFUSED:
                report(f"向量记忆已有 {MAX_DEFERRED_INGESTS} 项排队等写入，这次归档不再写入")
            elif isinstance(result, BaseException):
                report(f"压缩前归档出错（{type(result).__name__}: {result}）")
            return

        def run() -> None:
            try:
                for step in steps_of(text, anchor_id):
                    write = step()  # the embedding, here: outside the store's worker
                    result = worker.run(write, ARCHIVE_WRITE_WAIT_S, keep=True)
                    if result is REFUSED:
                        report(f"向量记忆已有 {MAX_DEFERRED_INGESTS} 项排队等写入，这次归档没有写完")
                        return
                    if isinstance(result, BaseException):
                        report(f"压缩前归档出错（{type(result).__name__}: {result}）")
                        return
            except Exception as exc:  # the embedder's errors: reported, never raised
                report(f"压缩前归档出错（{type(exc).__name__}: {exc}）")

        if detached("liyuan-archive", run).wait(timeout) is TIMED_OUT:
            report(f"压缩前归档超过 {timeout:g} 秒，压缩照常进行，归档在后台接着写")

    return archive


class Warmable(Protocol):
    """What :func:`warm_in_background` needs (:class:`~liyuan.vector.VectorMemory`)."""

    def warm(self, *, lexical: bool = True) -> None:
        """Load the search snapshot (and the lexical index) now."""
        ...


WARM_LINE = "向量记忆已载入，可以召回"
"""The activity line once a chat's vector memory is warm (:func:`warm_in_background`)."""


def warm_in_background(memory: Warmable, on_ready: Callable[[str], None] | None = None, *,
                       background: bool = True) -> None:
    """Warm ``memory``; returns at once.

    The search snapshot (chunks and vectors) loads on the store's worker, so the first
    recall queues behind it; the keyword index then loads on a thread of its own, and a
    hybrid recall meanwhile waits for it while its bound allows, then ranks by the vectors
    alone (:data:`RECALL_SEARCH_S`; issue 36: the first recall ranks as a warm one). ``on_ready`` gets one
    Chinese line when both are loaded, or when loading failed (the next recall then
    tries again, within its bound); how long it took goes to the log. With
    ``background=False`` (a card whose memory work runs inline) it warms here and the
    line comes before this returns, so a replay's activity lines keep their order.
    """
    report = on_ready if on_ready is not None else _log.info
    started = time.monotonic()

    def failed(exc: Exception) -> None:  # the recall retries; the app hears why it may be slow
        report(f"向量记忆载入出错（{type(exc).__name__}: {exc}），第一次召回时再试")

    def keywords() -> None:
        try:
            memory.warm()
        except Exception as exc:
            failed(exc)
            return
        _log.info("vector memory warm in %.1f s", time.monotonic() - started)
        report(WARM_LINE)

    if not background:
        keywords()
        return

    def vectors() -> None:
        try:
            memory.warm(lexical=False)
        except Exception as exc:
            failed(exc)
            return
        spawn("liyuan-warm", keywords)

    worker_for(_worker_of(memory)).submit(vectors)
