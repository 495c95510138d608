"""What vector memory hands back: recalled hits, ingest results, tool reports, chunk refs.

Plain data, no numpy: the per-turn recall and ingest (:mod:`liyuan.vector.recall`) use
these without loading the search code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from liyuan.errors import ConfigError

if TYPE_CHECKING:
    from liyuan.vector.index import Chunk, Source

__all__ = ["Hit", "HitTrace", "IngestResult", "SearchReport", "StoreStatus", "make_ref", "parse_ref"]

StoreStatus = Literal["ok", "disabled", "error"]


@dataclass(frozen=True, slots=True)
class HitTrace:
    """How a hit was found (the recall trace, issue 36): its place in each list, the fused score."""

    embedding_rank: int | None
    """1 = the embedding list's first hit; ``None``: that list did not find it (or was not searched)."""
    keyword_rank: int | None
    """Its place in the keyword (BM25) list, likewise."""
    score: float
    """The fused score it was ordered by (a single list's own score when only one was searched)."""
    reserved: bool = False
    """It holds a place reserved for a list's first hits, not one won by its fused score."""

    @property
    def lists(self) -> tuple[str, ...]:
        """The lists that found it: ``keyword``, ``embedding``."""
        return tuple(name for name, rank in (("keyword", self.keyword_rank), ("embedding", self.embedding_rank))
                     if rank is not None)


@dataclass(frozen=True, slots=True)
class Hit:
    """One recalled chunk."""

    ref: str
    """``session:<store>:<chunk id>``; pass it back to :meth:`VectorMemory.read_chunk`."""
    store: str
    title: str
    """The chunk's own title, else its store's display name."""
    text: str
    score: float
    source: Source
    node_id: str | None
    trace: HitTrace | None = None
    """Which list found it, its rank in each and the fused score (``None`` from a caller
    that ranked no lists, e.g. a hand-made hit)."""

    @property
    def chunk_id(self) -> str:
        """The chunk's id (the last part of :attr:`ref`)."""
        return self.ref.rsplit(":", 1)[-1]


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What one per-turn ingest did."""

    stored: bool
    merged: bool = False
    chunk_id: str | None = None
    reason: str = ""
    """``disabled``, ``too-short``, ``not-due``, ``duplicate``, ``off-branch`` or empty; from
    :func:`liyuan.vector.recall.ingest_for_turn` also ``deferred``, ``dropped`` or ``error``."""


@dataclass(frozen=True, slots=True)
class SearchReport:
    """The tool-side search: hits plus the status of every store."""

    hits: list[Hit]
    status: dict[str, StoreStatus]
    errors: dict[str, str] = field(default_factory=dict)


def make_ref(chunk: Chunk) -> str:
    """The reference a tool hands out for ``chunk``."""
    return f"session:{chunk.store}:{chunk.id}"


def parse_ref(ref: str) -> tuple[str, str]:
    """``(store, chunk_id)`` of a reference; :class:`ConfigError` if malformed."""
    parts = ref.split(":")
    if len(parts) != 3 or parts[0] != "session" or not parts[1] or not parts[2]:
        raise ConfigError(f"记忆引用格式不对：{ref!r}（应为 session:<库>:<id>）")
    return parts[1], parts[2]
