"""Embedder output on its way into a store: checked, or kept waiting without a vector.

Invariants:

- :meth:`CheckedEmbedder.vectors` hands back only what passes
  :func:`~liyuan.vector.embed.check_vectors`: finite rows, one per text, of the width
  the embedder declares (``dim``) or, for an endpoint, of the vectors it stored before
  (else of its first accepted batch). Anything else is a :class:`~liyuan.errors.ModelOutputError`.
- Chunks stored without a vector carry the label :data:`UNEMBEDDED`; they never take
  part in a vector comparison, and :meth:`CheckedEmbedder.embed_waiting` gives them a
  vector at a later write (best effort: still refused, they keep waiting). The store is
  searched for them once per process and then only after :meth:`CheckedEmbedder.mark_waiting`,
  so a write does not read every chunk.
"""

from __future__ import annotations

from collections.abc import Sequence

from liyuan.errors import ModelOutputError
from liyuan.vector.chunkstore import ChunkStore
from liyuan.vector.embed import Embedder, Matrix, check_vectors, embed_query

__all__ = ["RETRY_BATCH", "UNEMBEDDED", "CheckedEmbedder"]

UNEMBEDDED = "unembedded"
"""The label of chunks stored without a vector (their embedder's output was refused)."""
RETRY_BATCH = 64
"""Chunks without a vector embedded again per write, at most."""


class CheckedEmbedder:
    """Checks every batch an embedder returns for one chunk store."""

    def __init__(self, store: ChunkStore) -> None:
        self._store = store
        self._widths: dict[str, int] = {}
        self._waiting: bool | None = None
        """Whether chunks wait for a vector; ``None`` until the store was looked at."""

    def mark_waiting(self) -> None:
        """Chunks were just stored without a vector."""
        self._waiting = True

    def width(self, embedder: Embedder) -> int | None:
        """The width of ``embedder``'s vectors, once known."""
        label = embedder.label
        if label not in self._widths:
            declared = getattr(embedder, "dim", None)
            if isinstance(declared, int) and not isinstance(declared, bool):
                self._widths[label] = declared
            else:  # an endpoint: the width of what it stored before, if anything
                group = self._store.snapshot().matrices.get(label)
                if group is not None and group[1].shape[0]:
                    self._widths[label] = int(group[1].shape[1])
        return self._widths.get(label)

    def vectors(self, embedder: Embedder, texts: Sequence[str], *, query: bool = False) -> Matrix:
        """``texts`` embedded (as queries when ``query``) and checked."""
        raw = embed_query(embedder, texts) if query else embedder.embed(texts)
        vectors = check_vectors(raw, len(texts), self.width(embedder), embedder.label)
        self._widths.setdefault(embedder.label, int(vectors.shape[1]))
        return vectors

    def embed_waiting(self, embedder: Embedder) -> int:
        """Embed up to :data:`RETRY_BATCH` chunks stored without a vector; how many were."""
        if self._waiting is False:
            return 0
        found = [c for c in self._store.chunks() if c.embedder == UNEMBEDDED]
        waiting = found[:RETRY_BATCH]
        self._waiting = bool(waiting)
        if not waiting:
            return 0
        try:
            vectors = self.vectors(embedder, [c.text for c in waiting])
        except ModelOutputError:
            return 0  # still refused: they wait for the next write
        self._store.set_embeddings([(c.id, vectors[i]) for i, c in enumerate(waiting)], embedder.label)
        self._waiting = len(found) > len(waiting)
        return len(waiting)
