"""The in-memory search index of one store: chunks, vectors by embedder, BM25 terms.

Invariants:

- A :class:`Snapshot` is built for one generation of the store file and never changes
  afterwards (its lazily built lexical indexes are pure functions of its chunks).
- Chunk texts never change under an id (merges write new versions), so encoded terms
  cached by id in :class:`TermCache` stay valid for as long as the chunk exists.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
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
    seqs: npt.NDArray[np.int64]
    seq_of: dict[str, int]
    tag_positions: npt.NDArray[np.int64]
    tag_ids: tuple[str, ...]
    version_pairs: npt.NDArray[np.int64]
    places: tuple[object, npt.NDArray[np.int64]] | None
    lexical_base: _LexicalBase | None


@dataclass(frozen=True, slots=True)
class _LexicalBase:
    """What an extended snapshot's keyword index grows from: the views of the snapshot it
    extends, which of its chunks it kept, how many it added at its end."""

    views: dict[str, PostingView]
    keep: npt.NDArray[np.bool_] | None
    added: int


GROWTH = 4
"""A new vector buffer has ``1/GROWTH`` more rows than it holds: room to append before the
next copy, without doubling the memory of a store at its cap."""


class _RowBuffer:
    """Rows of vectors written once, read by many snapshots: each reads its own range, and
    rows are only ever written past every range handed out, so a range never changes."""

    def __init__(self, width: int, capacity: int) -> None:
        self.array = np.empty((max(64, capacity), width), dtype=np.float32)
        self.used = 0
        self._lock = threading.Lock()

    @classmethod
    def appended(cls, held: tuple[_RowBuffer, int] | None, old: npt.NDArray[np.float32],
                 new: npt.NDArray[np.float32]) -> tuple[npt.NDArray[np.float32], tuple[_RowBuffer, int]]:
        """``old`` (rows ``[start, start + len(old))`` of ``held``'s buffer, when given) followed by
        ``new``, and where that range now lives: written in place when the range ends where the
        buffer's writing does and there is room, else copied once into a buffer with a quarter more room."""
        if held is not None:
            buffer, start = held
            with buffer._lock:
                end = start + old.shape[0]
                if end == buffer.used and end + new.shape[0] <= buffer.array.shape[0]:
                    buffer.array[end:end + new.shape[0]] = new
                    buffer.used = end + new.shape[0]
                    return buffer.array[start:buffer.used], held
        size = old.shape[0] + new.shape[0]
        fresh = cls(old.shape[1], size + size // GROWTH)
        fresh.array[:old.shape[0]] = old
        fresh.array[old.shape[0]:size] = new
        fresh.used = size
        return fresh.array[:size], (fresh, 0)


SEQ_SLACK = 1000
"""Ids of evicted chunks kept in the shared id-to-seq map before it is rebuilt from the live ones."""


@dataclass
class Snapshot:
    """Everything a search needs, frozen at one generation of the store.

    ``matrices[label]`` is ``(rows, vectors)``: the positions in :attr:`chunks` written
    by that embedder and their unit vectors, one row each. The remaining fields are
    derived in ``__post_init__`` so a per-query visibility mask costs numpy plus a loop
    over the branch-tagged (narrative and archive) chunks only. A snapshot made by
    :meth:`extended` derives them from the one it extends, with numpy over what it kept
    and a loop over what it added only (issue 36: no per-chunk Python loop per ingest),
    and its keyword index grows from that snapshot's (:meth:`lexical`).
    """

    generation: int
    chunks: tuple[Chunk, ...]
    matrices: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]
    terms: TermCache = field(default_factory=TermCache, repr=False)
    store_names: tuple[str, ...] = field(init=False)
    store_codes: npt.NDArray[np.int32] = field(init=False, repr=False)
    """Index into :attr:`store_names` per chunk."""
    seqs: npt.NDArray[np.int64] = field(init=False, repr=False)
    """Every chunk's ``seq``, ascending (the chunks are in creation order)."""
    tag_positions: npt.NDArray[np.int64] = field(init=False, repr=False)
    tag_ids: tuple[str, ...] = field(init=False, repr=False)
    """Position and ``node_id`` of every narrative or archive chunk that carries an id."""
    version_pairs: npt.NDArray[np.int64] = field(init=False, repr=False)
    """``(position, position of the version it extends)`` for merged chunks, an ``(n, 2)`` array."""
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
    _seq_of: dict[str, int] = field(default_factory=dict, repr=False)
    """Chunk id to ``seq``; shared with the snapshots extended from this one (it only
    grows: an id whose seq is not in :attr:`seqs` is not in this snapshot)."""
    _positions: dict[str, int] | None = field(default=None, repr=False)
    _lexical_base: _LexicalBase | None = field(default=None, repr=False)
    _buffers: dict[str, tuple[_RowBuffer, int]] = field(default_factory=dict, repr=False)
    """Per label, the growing buffer whose rows ``[start, start + n)`` are its matrix (made by
    :meth:`extended`): a later snapshot appends in place instead of copying every vector."""

    def __post_init__(self) -> None:
        if self._derived is not None:
            d, self._derived = self._derived, None
            self.store_names, self.store_codes, self.seqs, self._seq_of = d.store_names, d.store_codes, d.seqs, d.seq_of
            self.tag_positions, self.tag_ids, self.version_pairs = d.tag_positions, d.tag_ids, d.version_pairs
            self._places, self._lexical_base = d.places, d.lexical_base
            return
        names: dict[str, int] = {}
        codes = [names.setdefault(c.store, len(names)) for c in self.chunks]
        self.store_names = tuple(names)
        self.store_codes = np.array(codes, dtype=np.int32)
        self.seqs = np.fromiter((c.seq for c in self.chunks), dtype=np.int64, count=len(self.chunks))
        self._seq_of = {c.id: c.seq for c in self.chunks}
        tagged = [(i, c.node_id) for i, c in enumerate(self.chunks)
                  if c.source in BRANCH_TAGGED and c.node_id is not None]
        positions = self.positions
        versions = [(i, positions[c.parent]) for i, c in enumerate(self.chunks)
                    if c.parent is not None and c.parent in positions]
        self.tag_positions = np.fromiter((i for i, _ in tagged), dtype=np.int64, count=len(tagged))
        self.tag_ids = tuple(node_id for _, node_id in tagged if node_id is not None)
        self.version_pairs = np.array(versions, dtype=np.int64).reshape(-1, 2)

    @property
    def positions(self) -> dict[str, int]:
        """Chunk id to position (built on first use: a search does not need it)."""
        if self._positions is None:
            self._positions = {c.id: i for i, c in enumerate(self.chunks)}
        return self._positions

    @property
    def tagged(self) -> tuple[tuple[int, str], ...]:
        """``(position, node_id)`` of every narrative or archive chunk that carries an id."""
        return tuple(zip(self.tag_positions.tolist(), self.tag_ids, strict=True))

    @property
    def versions(self) -> tuple[tuple[int, int], ...]:
        """:attr:`version_pairs` as tuples."""
        return tuple((int(a), int(b)) for a, b in self.version_pairs.tolist())

    def position_of(self, chunk_id: str) -> int | None:
        """The position of ``chunk_id`` in :attr:`chunks`, or ``None`` (no dict built: a binary search)."""
        seq = self._seq_of.get(chunk_id)
        if seq is None:
            return None
        at = int(np.searchsorted(self.seqs, seq))
        return at if at < self.seqs.size and int(self.seqs[at]) == seq else None

    def extended(self, generation: int, added: Sequence[Chunk], vectors: Sequence[npt.NDArray[np.float32]],
                 present: npt.NDArray[np.int64] | None, gone: npt.NDArray[np.int64] | None = None) -> Snapshot:
        """The snapshot after chunks were only added and evicted: ``added`` (with their
        ``vectors``) appended, and the chunks whose ``seq`` is in ``gone`` (or, given
        ``present`` instead, not in it) dropped. Vectors already held are not read again."""
        keep: npt.NDArray[np.bool_] | None = None
        kept: tuple[Chunk, ...] = self.chunks
        if gone is not None and gone.size:
            at = np.searchsorted(self.seqs, gone)
            inside = at < self.seqs.size
            at = at[inside][self.seqs[at[inside]] == gone[inside]]
            if at.size:
                keep = np.ones(len(self.chunks), dtype=np.bool_)
                keep[at] = False
        elif present is not None:
            keep = np.isin(self.seqs, present)
        if keep is not None:
            kept = tuple(compress(self.chunks, keep.tolist()))
        matrices: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}
        buffers: dict[str, tuple[_RowBuffer, int]] = {}
        for label, (rows, matrix) in self.matrices.items():
            held = self._buffers.get(label)
            if keep is not None:
                moved = np.cumsum(keep) - 1
                alive = keep[rows]
                dead = int(np.argmax(alive)) if alive.any() else alive.size  # leading evicted rows
                if held is not None and bool(alive[dead:].all()):  # FIFO eviction: a shorter view, no copy
                    matrix, held = matrix[dead:], (held[0], held[1] + dead)
                else:
                    matrix, held = matrix[alive], None
                rows = moved[rows[alive]]
            matrices[label] = (rows, matrix)
            if held is not None:
                buffers[label] = held
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
                matrix, buffers[label] = _RowBuffer.appended(buffers.get(label), old[1], new_matrix)
                matrices[label] = (np.concatenate([old[0], new_rows]), matrix)
            else:
                matrices[label] = (new_rows, new_matrix)
        return Snapshot(generation, kept + tuple(added), matrices, self.terms, rewrites=self.rewrites,
                        _derived=self._derive(kept, added, keep), _buffers=buffers)

    def _derive(self, kept: tuple[Chunk, ...], added: Sequence[Chunk], keep: npt.NDArray[np.bool_] | None) -> _Derived:
        """The derived fields of :meth:`extended`'s result, from this snapshot's (numpy on
        what was kept, a loop over ``added`` only)."""
        names = {name: code for code, name in enumerate(self.store_names)}
        codes, seqs, tag_positions, tag_ids = self.store_codes, self.seqs, self.tag_positions, self.tag_ids
        pairs, places = self.version_pairs, self._places
        if keep is not None:
            moved = np.cumsum(keep) - 1
            codes, seqs = codes[keep], seqs[keep]
            tag_kept = keep[tag_positions]
            tag_positions, tag_ids = moved[tag_positions[tag_kept]], tuple(compress(tag_ids, tag_kept.tolist()))
            if places is not None:
                places = (places[0], places[1][tag_kept[:places[1].size]])
            pairs = pairs[keep[pairs[:, 0]] & keep[pairs[:, 1]]]
            pairs = np.stack([moved[pairs[:, 0]], moved[pairs[:, 1]]], axis=1) if pairs.size else pairs
        seq_of = self._seq_of
        if len(seq_of) > 2 * (len(kept) + len(added)) + SEQ_SLACK:  # mostly evicted ids: start afresh
            seq_of = {c.id: c.seq for c in kept}
        all_seqs = np.concatenate([seqs, np.fromiter((c.seq for c in added), dtype=np.int64, count=len(added))])
        new_codes, new_tags, new_ids, new_pairs = [], [], [], []
        for offset, chunk in enumerate(added, start=len(kept)):
            seq_of[chunk.id] = chunk.seq
            new_codes.append(names.setdefault(chunk.store, len(names)))
            if chunk.source in BRANCH_TAGGED and chunk.node_id is not None:
                new_tags.append(offset)
                new_ids.append(chunk.node_id)
            parent_seq = seq_of.get(chunk.parent) if chunk.parent is not None else None
            if parent_seq is not None:
                at = int(np.searchsorted(all_seqs, parent_seq))
                if at < all_seqs.size and int(all_seqs[at]) == parent_seq:
                    new_pairs.append((offset, at))
        base = _LexicalBase(dict(self._lexical), keep, len(added)) if self._lexical else None
        return _Derived(
            tuple(names), np.concatenate([codes, np.array(new_codes, dtype=np.int32)]), all_seqs, seq_of,
            np.concatenate([tag_positions, np.array(new_tags, dtype=np.int64)]), tag_ids + tuple(new_ids),
            np.concatenate([pairs.reshape(-1, 2), np.array(new_pairs, dtype=np.int64).reshape(-1, 2)]), places,
            base)

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
                base = self._lexical_base
                grown = base.views.get(tokenizer) if base is not None else None
                if grown is not None and base is not None:
                    new = self.chunks[len(self.chunks) - base.added:]
                    grown = log.extend(grown, base.keep, [c.id for c in new], [c.text for c in new])
                if grown is None:
                    grown = log.view([c.id for c in self.chunks], [c.text for c in self.chunks])
                index = self._lexical[tokenizer] = grown
                if base is not None and base.views.keys() <= self._lexical.keys():
                    self._lexical_base = None  # every index it could grow is grown: let the old views go
            return index


def reusable_rows(current: Snapshot | None, chunks: Sequence[Chunk],
                  rewritten: Collection[str] = ()) -> dict[str, int]:
    """Chunk id to its row in ``current``'s matrix, for vectors that did not change.

    A vector counts as unchanged when its chunk's ``updated_at`` and embedder are; a re-embed
    within the same clock tick keeps ``updated_at``, so the ids a store knows it rewrote
    (``rewritten``) are never reused."""
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
        if old is None or chunk.id in rewritten:
            continue
        before = current.chunks[old]
        rows_of_label = row_of.get(chunk.embedder)
        if rows_of_label is not None and before.updated_at == chunk.updated_at \
                and before.embedder == chunk.embedder:
            row = int(rows_of_label[old])
            if row >= 0:
                reuse[chunk.id] = row
    return reuse
