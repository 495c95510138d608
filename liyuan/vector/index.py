"""The in-memory search index of one store: chunks, vectors by embedder, BM25 terms.

Invariants:

- A :class:`Snapshot` is built for one generation of the store file and never changes
  afterwards (its lazily built lexical indexes are pure functions of its chunks).
- Chunk texts never change under an id (merges write new versions), so encoded terms
  cached by id in :class:`TermCache` stay valid for as long as the chunk exists.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from liyuan.vector.lexical import BM25Index, Encoded, encode_terms, get_tokenizer

__all__ = ["BRANCH_TAGGED", "Chunk", "Snapshot", "Source", "TermCache", "reusable_rows"]

Source = Literal["narrative", "archive", "import", "manual"]
BRANCH_TAGGED: frozenset[str] = frozenset({"narrative", "archive"})
"""Sources whose ``node_id`` ties a chunk to a branch (a beat, or a compaction anchor)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One stored chunk (without its vector)."""

    id: str
    store: str
    text: str
    embedder: str
    source: Source
    title: str | None
    node_id: str | None
    """Narrative: the newest beat whose text it holds; archive: the compaction's anchor."""
    parent: str | None
    """Id of the older version this chunk extends (narrative merges), else ``None``."""
    seq: int
    merge_count: int
    created_at: str
    updated_at: str


class TermCache:
    """Encoded documents per tokenizer, kept by the store across snapshots.

    Chunk texts never change under an id (merges write new versions), so a chunk is
    tokenized once per process and tokenizer; later indexes reuse the arrays.
    """

    def __init__(self) -> None:
        self.vocabulary: dict[str, dict[str, int]] = {}
        self.documents: dict[str, dict[str, Encoded]] = {}
        self.lock = threading.Lock()

    def encoded(self, tokenizer: str, chunks: Sequence[Chunk]) -> tuple[list[Encoded], dict[str, int]]:
        """Encoded documents for ``chunks`` in order; drops entries of chunks gone."""
        with self.lock:
            vocabulary = self.vocabulary.setdefault(tokenizer, {})
            known = self.documents.setdefault(tokenizer, {})
            split = get_tokenizer(tokenizer)
            out = []
            for chunk in chunks:
                doc = known.get(chunk.id)
                if doc is None:
                    doc = known[chunk.id] = encode_terms(split(chunk.text), vocabulary)
                out.append(doc)
            if len(known) > len(chunks):
                live = {c.id for c in chunks}
                self.documents[tokenizer] = {k: v for k, v in known.items() if k in live}
            return out, vocabulary


@dataclass
class Snapshot:
    """Everything a search needs, frozen at one generation of the store.

    ``matrices[label]`` is ``(rows, vectors)``: the positions in :attr:`chunks` written
    by that embedder and their unit vectors, one row each. The remaining fields are
    derived in ``__post_init__`` so a per-query visibility mask costs numpy plus a loop
    over the branch-tagged (narrative and archive) chunks only.
    """

    generation: int
    chunks: tuple[Chunk, ...]
    matrices: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]
    terms: TermCache = field(default_factory=TermCache, repr=False)
    store_names: tuple[str, ...] = field(init=False)
    store_codes: npt.NDArray[np.int32] = field(init=False, repr=False)
    """Index into :attr:`store_names` per chunk."""
    tagged: tuple[tuple[int, str], ...] = field(init=False, repr=False)
    """``(position, node_id)`` of every narrative or archive chunk that carries an id."""
    versions: tuple[tuple[int, int], ...] = field(init=False, repr=False)
    """``(position, position of the version it extends)`` for merged chunks."""
    positions: dict[str, int] = field(init=False, repr=False)
    """Chunk id to position."""
    _lexical: dict[str, BM25Index] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        names: dict[str, int] = {}
        codes = [names.setdefault(c.store, len(names)) for c in self.chunks]
        self.store_names = tuple(names)
        self.store_codes = np.array(codes, dtype=np.int32)
        self.tagged = tuple((i, c.node_id) for i, c in enumerate(self.chunks)
                            if c.source in BRANCH_TAGGED and c.node_id is not None)
        self.positions = {c.id: i for i, c in enumerate(self.chunks)}
        self.versions = tuple((i, self.positions[c.parent]) for i, c in enumerate(self.chunks)
                              if c.parent is not None and c.parent in self.positions)

    def lexical(self, tokenizer: str) -> BM25Index:
        """The BM25 index of every chunk for ``tokenizer`` (built once per snapshot)."""
        with self._lock:
            index = self._lexical.get(tokenizer)
            if index is None:
                documents, vocabulary = self.terms.encoded(tokenizer, self.chunks)
                index = self._lexical[tokenizer] = BM25Index(documents, vocabulary)
            return index


def reusable_rows(current: Snapshot | None, chunks: Sequence[Chunk]) -> dict[str, int]:
    """Chunk id to its row in ``current``'s matrix, for vectors that did not change."""
    if current is None:
        return {}
    row_of: dict[str, npt.NDArray[np.int64]] = {}
    for label, (rows, _matrix) in current.matrices.items():
        table = np.full(len(current.chunks), -1, dtype=np.int64)
        table[rows] = np.arange(len(rows))
        row_of[label] = table
    reuse: dict[str, int] = {}
    for chunk in chunks:
        old = current.positions.get(chunk.id)
        if old is None:
            continue
        before = current.chunks[old]
        rows_of_label = row_of.get(chunk.embedder)
        if rows_of_label is not None and before.updated_at == chunk.updated_at \
                and before.embedder == chunk.embedder:
            row = int(rows_of_label[old])
            if row >= 0:
                reuse[chunk.id] = row
    return reuse
