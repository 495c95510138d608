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
from itertools import compress
from typing import Literal

import numpy as np
import numpy.typing as npt

from liyuan.session.branch import BranchIds
from liyuan.vector.postings import PostingLog, PostingView

__all__ = ["BRANCH_TAGGED", "Chunk", "Snapshot", "Source", "TermCache", "reusable_rows"]

Source = Literal["narrative", "archive", "import", "manual"]
BRANCH_TAGGED: frozenset[str] = frozenset({"narrative", "archive"})
"""Sources whose ``node_id`` ties a chunk to a branch (a turn, or a compaction anchor)."""


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
    """Narrative: the newest turn whose text it holds; archive: the compaction's anchor."""
    parent: str | None
    """Id of the older version this chunk extends (narrative merges), else ``None``."""
    seq: int
    merge_count: int
    created_at: str
    updated_at: str


class TermCache:
    """The growing BM25 postings per tokenizer, kept by the store across snapshots.

    Chunk texts never change under an id (merges write new versions), so a chunk is
    tokenized once per process and tokenizer, and a new snapshot appends only the chunks
    it adds (:class:`~liyuan.vector.postings.PostingLog`).
    """

    def __init__(self) -> None:
        self.logs: dict[str, PostingLog] = {}
        self.lock = threading.Lock()

    def log(self, tokenizer: str) -> PostingLog:
        """The postings of ``tokenizer``, created empty on first use."""
        with self.lock:
            found = self.logs.get(tokenizer)
            if found is None:
                found = self.logs[tokenizer] = PostingLog(tokenizer)
            return found


@dataclass(frozen=True, slots=True)
class _Derived:
    store_names: tuple[str, ...]
    store_codes: npt.NDArray[np.int32]
    positions: dict[str, int]
    tag_positions: npt.NDArray[np.int64]
    tag_ids: tuple[str, ...]
    version_pairs: npt.NDArray[np.int64]
    places: tuple[object, npt.NDArray[np.int64]] | None


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
    tag_positions: npt.NDArray[np.int64] = field(init=False, repr=False)
    tag_ids: tuple[str, ...] = field(init=False, repr=False)
    """:attr:`tagged` as two columns (for a visibility mask without a per-chunk loop)."""
    version_pairs: npt.NDArray[np.int64] = field(init=False, repr=False)
    """:attr:`versions` as an ``(n, 2)`` array."""
    positions: dict[str, int] = field(init=False, repr=False)
    """Chunk id to position."""
    rewrites: int = 0
    """The store's count of in-place rewrites (re-embeds, deletions) this was built at."""
    _lexical: dict[str, PostingView] = field(default_factory=dict, repr=False)
    _places: tuple[object, npt.NDArray[np.int64]] | None = field(default=None, repr=False)
    """Where the first tagged chunks' ids sit on one branch list (see :meth:`tag_places`)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _places_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Not :attr:`_lock`: a recall must not wait for a keyword index being built."""
    _derived: _Derived | None = field(default=None, repr=False)
    """The derived fields, when :meth:`extended` worked them out from the previous snapshot."""

    def __post_init__(self) -> None:
        if self._derived is not None:
            d, self._derived = self._derived, None
            self.store_names, self.store_codes, self.positions = d.store_names, d.store_codes, d.positions
            self.tag_positions, self.tag_ids, self.version_pairs = d.tag_positions, d.tag_ids, d.version_pairs
            self.tagged = tuple(zip(d.tag_positions.tolist(), d.tag_ids, strict=True))
            self.versions = tuple(zip(*d.version_pairs.T.tolist(), strict=True)) if d.version_pairs.size else ()
            self._places = d.places
            return
        names: dict[str, int] = {}
        codes = [names.setdefault(c.store, len(names)) for c in self.chunks]
        self.store_names = tuple(names)
        self.store_codes = np.array(codes, dtype=np.int32)
        self.tagged = tuple((i, c.node_id) for i, c in enumerate(self.chunks)
                            if c.source in BRANCH_TAGGED and c.node_id is not None)
        self.positions = {c.id: i for i, c in enumerate(self.chunks)}
        self.versions = tuple((i, self.positions[c.parent]) for i, c in enumerate(self.chunks)
                              if c.parent is not None and c.parent in self.positions)
        self.tag_positions = np.fromiter((i for i, _ in self.tagged), dtype=np.int64, count=len(self.tagged))
        self.tag_ids = tuple(node_id for _, node_id in self.tagged)
        self.version_pairs = np.array(self.versions, dtype=np.int64).reshape(-1, 2)

    def extended(self, generation: int, added: Sequence[Chunk], vectors: Sequence[npt.NDArray[np.float32]],
                 present: npt.NDArray[np.int64] | None) -> Snapshot:
        """The snapshot after chunks were only added and evicted: ``added`` (with their
        ``vectors``) appended, and, when ``present`` is given, the chunks whose ``seq`` is
        not in it dropped. Vectors already held are not read again."""
        keep: npt.NDArray[np.bool_] | None = None
        kept: tuple[Chunk, ...] = self.chunks
        if present is not None:
            seqs = np.fromiter((c.seq for c in self.chunks), dtype=np.int64, count=len(self.chunks))
            keep = np.isin(seqs, present)
            kept = tuple(compress(self.chunks, keep.tolist()))
        matrices: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}
        for label, (rows, matrix) in self.matrices.items():
            if keep is not None:
                moved = np.cumsum(keep) - 1
                alive = keep[rows]
                rows, matrix = moved[rows[alive]], matrix[alive]
            matrices[label] = (rows, matrix)
        groups: dict[str, list[tuple[int, npt.NDArray[np.float32]]]] = {}
        for offset, (chunk, vector) in enumerate(zip(added, vectors, strict=True)):
            groups.setdefault(chunk.embedder, []).append((len(kept) + offset, vector))
        for label, items in groups.items():
            old = matrices.get(label)
            widths = [v.shape[0] for _, v in items]
            # Vectors of one label that disagree in width are corrupt: the width held wins.
            width = old[1].shape[1] if old is not None and old[1].shape[0] else max(set(widths), key=widths.count)
            good = [(position, v) for position, v in items if v.shape[0] == width]
            if not good:
                continue
            new_rows = np.array([position for position, _ in good], dtype=np.int64)
            new_matrix = np.stack([v for _, v in good]).astype(np.float32, copy=False)
            if old is not None and old[1].shape[0]:
                matrices[label] = (np.concatenate([old[0], new_rows]), np.vstack([old[1], new_matrix]))
            else:
                matrices[label] = (new_rows, new_matrix)
        return Snapshot(generation, kept + tuple(added), matrices, self.terms, self.rewrites,
                        _derived=self._derive(kept, added, keep))

    def _derive(self, kept: tuple[Chunk, ...], added: Sequence[Chunk], keep: npt.NDArray[np.bool_] | None) -> _Derived:
        """The derived fields of :meth:`extended`'s result, from this snapshot's (numpy on
        what was kept, a loop over ``added`` only)."""
        names = {name: code for code, name in enumerate(self.store_names)}
        codes, tag_positions, tag_ids, pairs = self.store_codes, self.tag_positions, self.tag_ids, self.version_pairs
        places = self._places
        if keep is None:
            positions = dict(self.positions)
        else:
            moved = np.cumsum(keep) - 1
            codes = codes[keep]
            tag_kept = keep[tag_positions]
            tag_positions, tag_ids = moved[tag_positions[tag_kept]], tuple(compress(tag_ids, tag_kept.tolist()))
            if places is not None:
                places = (places[0], places[1][tag_kept[:places[1].size]])
            pairs = pairs[keep[pairs[:, 0]] & keep[pairs[:, 1]]]
            pairs = np.stack([moved[pairs[:, 0]], moved[pairs[:, 1]]], axis=1) if pairs.size else pairs
            positions = dict(zip((c.id for c in kept), range(len(kept)), strict=True))
        new_codes, new_tags, new_ids, new_pairs = [], [], [], []
        for offset, chunk in enumerate(added, start=len(kept)):
            positions[chunk.id] = offset
            new_codes.append(names.setdefault(chunk.store, len(names)))
            if chunk.source in BRANCH_TAGGED and chunk.node_id is not None:
                new_tags.append(offset)
                new_ids.append(chunk.node_id)
            if chunk.parent is not None and chunk.parent in positions:
                new_pairs.append((offset, positions[chunk.parent]))
        return _Derived(
            tuple(names), np.concatenate([codes, np.array(new_codes, dtype=np.int32)]), positions,
            np.concatenate([tag_positions, np.array(new_tags, dtype=np.int64)]), tag_ids + tuple(new_ids),
            np.concatenate([pairs.reshape(-1, 2), np.array(new_pairs, dtype=np.int64).reshape(-1, 2)]), places)

    def tag_places(self, ids: BranchIds) -> npt.NDArray[np.int64]:
        """Where each tagged chunk's ``node_id`` sits on the branch list ``ids`` reads (``-1``:
        not on it); found once per snapshot and branch list, so a recall on a branch that
        only grew costs numpy, not a look-up per chunk."""
        with self._places_lock:
            cached = self._places
        known = cached[1] if cached is not None and cached[0] is ids.list_key else np.zeros(0, dtype=np.int64)
        if known.size == len(self.tag_ids):
            return known
        # Places of chunks kept from the snapshot before are still right (the list only grew).
        found = np.concatenate([known, np.array(ids.places(self.tag_ids[known.size:]), dtype=np.int64)])
        with self._places_lock:
            self._places = (ids.list_key, found)
        return found

    def lexical_pending(self, tokenizer: str) -> bool:
        """True while this snapshot's BM25 index waits on a bulk load in another thread."""
        return not self.lexical_ready(tokenizer) and self.terms.log(tokenizer).loading

    def lexical_ready(self, tokenizer: str) -> bool:
        """True once this snapshot's BM25 index for ``tokenizer`` is built."""
        return tokenizer in self._lexical

    def lexical(self, tokenizer: str) -> PostingView:
        """The BM25 index of every chunk for ``tokenizer`` (made once per snapshot; only
        chunks new since the last snapshot are tokenized and appended)."""
        with self._lock:
            index = self._lexical.get(tokenizer)
            if index is None:
                log = self.terms.log(tokenizer)
                index = self._lexical[tokenizer] = log.view([c.id for c in self.chunks], [c.text for c in self.chunks])
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
