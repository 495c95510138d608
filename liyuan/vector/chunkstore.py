"""What vector memory needs from a chunk store, whatever holds the rows.

:class:`ChunkStore` is the contract :class:`~liyuan.vector.memory.VectorMemory`, the
embedding checks and the search use; :class:`~liyuan.vector.store.SqliteChunkStore` (one
file per chat, the default) and :class:`~liyuan.storage.pgchunks.PostgresChunkStore` (one
PostgreSQL database for many chats) both satisfy it. Ranking (cosine, BM25, fusion,
branch visibility) is not the store's: it runs in the library on the
:class:`~liyuan.vector.index.Snapshot` a store hands out, so both backends rank alike.

Invariants every implementation keeps (tests/liyuan/vector/test_store_contract.py):

- ``seq`` grows in creation order within a chat, and a chunk committed later never has
  a smaller ``seq`` than one committed before (a snapshot reads only ``seq`` beyond its
  last to catch up).
- Every write that may change a chunk (add, re-embed, delete) bumps the generation in
  the same transaction; the turn counter and the pending queue leave it alone; reads
  never bump it.
- Eviction beyond a store's cap takes the chunks another version extends first, then
  the oldest, in the same transaction as the insert, and counts them.
- Two writers to one chat never lose each other's rows.

:func:`rebuilt` assembles a snapshot from the rows a store read, reusing the vectors of
the snapshot before; every store calls it, so a snapshot does not depend on the backend.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from liyuan.vector.index import Chunk, Snapshot, Source, TermCache

__all__ = ["CHUNK_COLUMNS", "ChunkStore", "ChunkStores", "NewChunk", "RewrittenIds", "chunk_from_row", "rebuilt"]

CHUNK_COLUMNS = "seq, id, store, text, embedder, source, title, node_id, parent, merge_count, created_at, updated_at"
"""The columns :func:`chunk_from_row` reads, in its order (both backends name them alike)."""


@dataclass(frozen=True, slots=True)
class NewChunk:
    """A chunk to insert."""

    store: str
    text: str
    embedding: npt.NDArray[np.float32]
    embedder: str
    source: Source
    title: str | None = None
    node_id: str | None = None
    parent: str | None = None
    merge_count: int = 1


def chunk_from_row(row: Sequence[Any]) -> Chunk:
    """The chunk of one row read as :data:`CHUNK_COLUMNS`."""
    seq, cid, store, text, embedder, source, title, node_id, parent, merges, created, updated = row
    return Chunk(id=cid, store=store, text=text, embedder=embedder, source=source, title=title, node_id=node_id,
                 parent=parent, seq=seq, merge_count=merges, created_at=created, updated_at=updated)


class ChunkStore(Protocol):
    """The chunks of one chat, their pending queue, turn counter and search snapshot."""

    def add(
        self, chunks: Sequence[NewChunk], *, max_chunks: int, clear_pending_through: int | None = None,
        on_evict: Callable[[str, int], None] | None = None,
    ) -> list[str]:
        """Insert chunks (skipping a text already stored with the same ``node_id``), evict
        beyond the cap, drop queued turns through ``clear_pending_through``: one transaction.
        Returns the ids inserted and still there, in order."""
        ...

    def set_embeddings(self, updates: Sequence[tuple[str, npt.NDArray[np.float32]]], embedder: str) -> None:
        """New vectors for existing chunks (re-embedding)."""
        ...

    def delete(self, chunk_id: str) -> bool:
        """Delete one chunk and the older versions it extends; ``False`` if there was none."""
        ...

    def next_turn(self, pending: tuple[str | None, str] | None = None) -> int:
        """Increment and return the turn counter, queueing ``(node_id, text)`` with it."""
        ...

    def pending(self) -> list[tuple[int, str | None, str]]:
        """Queued turns as ``(seq, node_id, text)``, oldest first."""
        ...

    def clear_pending(self, through_seq: int) -> None:
        """Drop queued turns up to ``through_seq``."""
        ...

    def get(self, chunk_id: str) -> Chunk | None:
        """The chunk with this id, or ``None``."""
        ...

    def chunks(self, store: str | None = None) -> list[Chunk]:
        """Chunks in creation order, of one store or of all."""
        ...

    def count(self, store: str | None = None) -> int:
        """Number of chunks, of one store or of all."""
        ...

    def evicted(self, store: str) -> int:
        """How many chunks ``store`` has lost to its cap."""
        ...

    def snapshot(self) -> Snapshot:
        """The current search snapshot, rebuilt only when the generation moved."""
        ...


def rebuilt(
    current: Snapshot | None, generation: int, rewrites: int, chunks: tuple[Chunk, ...], reuse: Mapping[str, int],
    fetched: Mapping[str, npt.NDArray[np.float32]], terms: TermCache,
) -> Snapshot:
    """The snapshot of ``chunks``: the vector of a chunk in ``reuse`` (its row in
    ``current``'s matrix, see :func:`~liyuan.vector.index.reusable_rows`) is copied from
    there, every other one comes from ``fetched``."""
    groups: dict[str, list[int]] = {}
    for position, chunk in enumerate(chunks):
        groups.setdefault(chunk.embedder, []).append(position)
    matrices: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}
    for label, positions in groups.items():
        old_matrix = current.matrices[label][1] if current is not None and label in current.matrices else None
        widths = [old_matrix.shape[1] if chunks[p].id in reuse and old_matrix is not None
                  else fetched[chunks[p].id].shape[0] for p in positions]
        # Vectors of one label that disagree in width are corrupt; keep the majority width.
        width = max(set(widths), key=widths.count)
        keep = [p for p, w in zip(positions, widths, strict=True) if w == width]
        matrix = np.empty((len(keep), width), dtype=np.float32)
        old_rows = [(i, reuse[chunks[p].id]) for i, p in enumerate(keep) if chunks[p].id in reuse]
        if old_rows and old_matrix is not None:
            new_index, old_index = map(list, zip(*old_rows, strict=True))
            matrix[new_index] = old_matrix[old_index]
        for i, p in enumerate(keep):
            if chunks[p].id not in reuse:
                matrix[i] = fetched[chunks[p].id]
        matrices[label] = (np.array(keep, dtype=np.int64), matrix)
    return Snapshot(generation, chunks, matrices, terms, rewrites)


class ChunkStores(Protocol):
    """Where each chat of a card keeps its chunks (a part of :class:`liyuan.storage.CardStorage`).

    In the card folder a chat's chunks live in ``向量记忆.sqlite`` in its folder and go with
    the folder when the chat is deleted; a store elsewhere (PostgreSQL:
    :class:`~liyuan.storage.pgchunkstores.PostgresChunkStores`) is told to drop them.
    """

    def has(self, chat_id: str) -> bool:
        """Whether the chat may have stored chunks (asking creates nothing)."""
        ...

    def open(self, chat_id: str) -> ChunkStore:
        """The chat's store (created on first use)."""
        ...

    def drop(self, chat_id: str) -> None:
        """Delete everything the chat stored (the card deleted the chat)."""
        ...


class RewrittenIds:
    """The ids a store re-embedded, for :func:`~liyuan.vector.index.reusable_rows` (added before the write, so no
    refresh after it can reuse their old rows; thread-safe)."""

    def __init__(self) -> None:
        self.ids: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def add(self, ids: Iterable[str]) -> None:
        """Remember ``ids`` as rewritten."""
        with self._lock:
            self.ids = self.ids | frozenset(ids)
