"""A turn's recall with its trace: the 【剧情记忆】 lines and, per line, how recall found it.

The trace (issue 36) goes into the turn's record (:class:`liyuan.context.record.RecallRecord`):
which list found each hit (keyword, embedding), its rank in each and the fused score, so
a list that never wins a place shows on the first turn, not in a held-out benchmark.
Invariant: one trace entry per line, in the lines' order (a hit with no text gives neither).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from liyuan.context.record import RecallRecord
from liyuan.vector.recall import RECALL_TIMEOUT_S, Recaller, format_recall_lines, recall_hits_for_turn
from liyuan.vector.results import Hit

__all__ = ["recall_trace", "recall_with_trace"]


def recall_trace(hits: Sequence[Hit]) -> list[RecallRecord]:
    """The record's trace of ``hits``; a hit without a trace keeps its score and no ranks."""
    return [RecallRecord(f"chunk:{hit.chunk_id}", hit.store,
                         hit.trace.keyword_rank if hit.trace else None,
                         hit.trace.embedding_rank if hit.trace else None,
                         hit.trace.score if hit.trace else hit.score,
                         hit.trace.reserved if hit.trace else False) for hit in hits]


def recall_with_trace(memory: Recaller | None, query: str, branch_ids: Collection[str] | None, *,
                      timeout: float = RECALL_TIMEOUT_S,
                      warn: Callable[[str], None] | None = None) -> tuple[list[str], list[RecallRecord]]:
    """The turn's 【剧情记忆】 lines and their trace (:func:`liyuan.vector.recall.recall_hits_for_turn`:
    bounded, never raises)."""
    hits = [hit for hit in recall_hits_for_turn(memory, query, branch_ids, timeout=timeout, warn=warn)
            if format_recall_lines([hit])]
    return format_recall_lines(hits), recall_trace(hits)
