"""BM25 postings that grow as chunks arrive: documents are appended, never re-indexed.

One :class:`PostingLog` per store and tokenizer lives as long as the store object. Each
chunk is tokenized once and gets a *slot*; its postings go to a small segment, and
segments of similar size are merged (so a store of n chunks holds O(log n) segments and
each posting is re-sorted O(log n) times over its life). A search snapshot reads the
log through a :class:`PostingView`: the segments as they were and the snapshot's own
slots, so documents evicted since (or added later) never count, and scores, document
frequencies and the average length are exactly those of a BM25 index built over the
snapshot's chunks alone (:class:`liyuan.vector.lexical.BM25Index`).

Evicted documents stay in the segments until they outnumber the live ones; the log is
then rebuilt from the live documents' cached encodings (no tokenizing again).

Invariants: segments are immutable once built (a merge makes a new one); a view never
changes after it is made; a slot is never reused by a log.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from liyuan.vector.bulk_terms import encode_bigrams
from liyuan.vector.lexical import Encoded, encode_terms, get_tokenizer

__all__ = ["PostingLog", "PostingView"]

MERGE_RATIO = 4
"""A new segment is merged into the one before it while it is at least 1/4 of its size."""
BULK = 2000
"""More new documents than this at once is a bulk load (see :attr:`PostingLog.loading`)."""
LEXICAL_WAIT_S = 3.0
"""How long a search waits for a bulk load under way before it ranks without the lexical
list: the first recall after opening a chat then ranks as every later one (issue 36),
and still ends within the recall's 5-second bound (the vectors load first, in about a
second at the 50,000-chunk cap)."""
K1 = 1.2
B = 0.75


@dataclass(frozen=True, slots=True)
class _Segment:
    terms: npt.NDArray[np.int32]
    """The distinct term ids of the segment, ascending."""
    starts: npt.NDArray[np.int64]
    """Postings of ``terms[i]`` are ``docs[starts[i]:starts[i+1]]``."""
    docs: npt.NDArray[np.int64]
    freqs: npt.NDArray[np.float32]

    @classmethod
    def build(cls, terms: npt.NDArray[np.int32], docs: npt.NDArray[np.int64],
              freqs: npt.NDArray[np.float32]) -> _Segment:
        order = np.argsort(terms, kind="stable")
        terms, docs, freqs = terms[order], docs[order], freqs[order]
        distinct, first = np.unique(terms, return_index=True)
        starts = np.append(first, terms.size).astype(np.int64)
        return cls(distinct.astype(np.int32), starts, docs, freqs)

    @property
    def size(self) -> int:
        return int(self.docs.size)

    def flat(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        counts = np.diff(self.starts)
        return np.repeat(self.terms, counts), self.docs, self.freqs

    def postings(self, term_id: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        at = int(np.searchsorted(self.terms, term_id))
        if at >= self.terms.size or int(self.terms[at]) != term_id:
            return None
        start, end = int(self.starts[at]), int(self.starts[at + 1])
        return self.docs[start:end], self.freqs[start:end]


class PostingLog:
    """The growing postings of one store for one tokenizer (thread-safe)."""

    def __init__(self, tokenizer: str) -> None:
        self._split = get_tokenizer(tokenizer)
        self._bulk = encode_bigrams if tokenizer == "bigram" else None
        """Encodes many texts at once, equal to ``encode_terms(self._split(text))`` each."""
        self.vocabulary: dict[str, int] = {}
        self._encoded: dict[str, Encoded] = {}
        """Every live chunk's encoding by id (chunk texts never change under an id)."""
        self._slot_of: dict[str, int] = {}
        self._lengths = np.zeros(64, dtype=np.float32)
        """Document length per slot; slots ``[0, _count)`` are used (a view reads a prefix)."""
        self._count = 0
        self._epoch = 0
        """Bumped by every rebuild (slots are renumbered): a view of another epoch cannot be extended."""
        self._segments: tuple[_Segment, ...] = ()
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._waited_out = False
        """A search already waited its whole bound for the load under way: later ones do not wait."""

    @property
    def loading(self) -> bool:
        """Set while a bulk load (a cold store's first index) is under way in another
        thread (:meth:`liyuan.vector.VectorMemory.warm`): a search waits for it, within a
        bound (:meth:`wait_loaded`), and goes on without the lexical list after that."""
        return not self._idle.is_set()

    @loading.setter
    def loading(self, value: bool) -> None:
        if value:
            self._waited_out = False
            self._idle.clear()
        else:
            self._idle.set()

    def wait_loaded(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a bulk load under way; whether none is now.

        Once a wait has run out, later calls during the same load answer at once: the
        first turn after opening pays for a slow load, not every turn until it ends."""
        if self._waited_out:
            return self._idle.is_set()
        done = self._idle.wait(timeout)
        self._waited_out = not done
        return done

    def view(self, chunk_ids: Sequence[str], texts: Sequence[str]) -> PostingView:
        """A frozen BM25 index over exactly these chunks (in this order)."""
        with self._lock:
            fresh = [(cid, text) for cid, text in zip(chunk_ids, texts, strict=True) if cid not in self._slot_of]
            if self._count - len(chunk_ids) > max(len(chunk_ids), 1000):
                self._rebuild(set(chunk_ids))  # evicted documents outnumber the live ones
            if fresh:
                self._append(fresh)
            slots = np.fromiter((self._slot_of[cid] for cid in chunk_ids), dtype=np.int64, count=len(chunk_ids))
            return self._view_of(slots)

    def extend(self, previous: PostingView, keep: npt.NDArray[np.bool_] | None, chunk_ids: Sequence[str],
               texts: Sequence[str]) -> PostingView | None:
        """The view of ``previous``'s chunks where ``keep`` (all when ``None``), then these
        added ones: its cost follows what changed, not the store's size (issue 36). ``None``
        when ``previous`` is of an older epoch or the log is due a rebuild (use :meth:`view`)."""
        with self._lock:
            if previous.epoch != self._epoch:
                return None
            slots = previous.slots if keep is None else previous.slots[keep]
            if self._count - slots.size - len(chunk_ids) > max(slots.size + len(chunk_ids), 1000):
                return None
            fresh = [(cid, text) for cid, text in zip(chunk_ids, texts, strict=True) if cid not in self._slot_of]
            if fresh:
                self._append(fresh)
            new = np.fromiter((self._slot_of[cid] for cid in chunk_ids), dtype=np.int64, count=len(chunk_ids))
            return self._view_of(np.concatenate([slots, new]))

    def _view_of(self, slots: npt.NDArray[np.int64]) -> PostingView:
        return PostingView(self._segments, slots, self._lengths[:self._count], self.vocabulary, self._epoch)

    def _add_length(self, length: float) -> int:
        """A new slot of ``length``; the buffer doubles when full (views keep reading their prefix)."""
        if self._count == self._lengths.size:
            grown = np.zeros(self._lengths.size * 2, dtype=np.float32)
            grown[:self._count] = self._lengths[:self._count]
            self._lengths = grown
        self._lengths[self._count] = length
        self._count += 1
        return self._count - 1

    def _append(self, fresh: Sequence[tuple[str, str]]) -> None:
        unseen = [(cid, text) for cid, text in fresh if cid not in self._encoded]
        if self._bulk is not None and len(unseen) > 1:
            self._encoded.update(zip([cid for cid, _ in unseen], self._bulk([text for _, text in unseen],
                                                                            self.vocabulary), strict=True))
        else:
            for cid, text in unseen:
                self._encoded[cid] = encode_terms(self._split(text), self.vocabulary)
        rows: list[tuple[int, Encoded]] = []
        for cid, _text in fresh:
            encoded = self._encoded[cid]
            slot = self._slot_of[cid] = self._add_length(float(encoded[1].sum()))
            rows.append((slot, encoded))
        segments = [*self._segments, _segment_of(rows)]
        while len(segments) > 1 and segments[-1].size * MERGE_RATIO >= segments[-2].size:
            last, before = segments.pop(), segments.pop()
            segments.append(_merge(before, last))
        self._segments = tuple(segments)

    def _rebuild(self, live: set[str]) -> None:
        kept = [(cid, self._encoded[cid]) for cid in self._slot_of if cid in live and cid in self._encoded]
        self._encoded = dict(kept)
        self._slot_of = {}
        self._lengths = np.zeros(max(64, len(kept)), dtype=np.float32)
        self._count = 0
        self._epoch += 1
        self._segments = ()
        rows: list[tuple[int, Encoded]] = []
        for cid, encoded in kept:
            slot = self._slot_of[cid] = self._add_length(float(encoded[1].sum()))
            rows.append((slot, encoded))
        if rows:
            self._segments = (_segment_of(rows),)


def _segment_of(rows: Sequence[tuple[int, Encoded]]) -> _Segment:
    terms = np.concatenate([ids for _, (ids, _c) in rows]) if rows else np.zeros(0, np.int32)
    freqs = np.concatenate([c for _, (_ids, c) in rows]) if rows else np.zeros(0, np.float32)
    docs = np.repeat(np.array([slot for slot, _ in rows], dtype=np.int64), [ids.size for _, (ids, _c) in rows])
    return _Segment.build(terms.astype(np.int32), docs, freqs.astype(np.float32))


def _merge(first: _Segment, second: _Segment) -> _Segment:
    a, b = first.flat(), second.flat()
    return _Segment.build(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]), np.concatenate([a[2], b[2]]))


class PostingView:
    """BM25 over one snapshot's chunks, read from the log's segments (immutable)."""

    def __init__(self, segments: tuple[_Segment, ...], slots: npt.NDArray[np.int64],
                 lengths: npt.NDArray[np.float32], vocabulary: dict[str, int], epoch: int = 0) -> None:
        self.size = int(slots.size)
        self.slots = slots
        """The log's slot of each chunk, in the snapshot's order."""
        self.epoch = epoch
        self._segments = segments
        self._vocabulary = vocabulary
        self._position = np.full(lengths.size, -1, dtype=np.int64)
        self._position[slots] = np.arange(slots.size)
        mine = lengths[slots]
        average = float(mine.mean()) if self.size and mine.sum() > 0 else 1.0
        self._norm = np.zeros(lengths.size, dtype=np.float32)
        self._norm[slots] = K1 * (1 - B + B * mine / average)

    def scores(self, query_terms: Sequence[str]) -> npt.NDArray[np.float32]:
        """BM25 score of every chunk of the snapshot, in its order, for the (deduplicated) terms."""
        out = np.zeros(self.size, dtype=np.float32)
        for term in dict.fromkeys(query_terms):
            term_id = self._vocabulary.get(term)
            if term_id is None:
                continue
            hits = []
            for segment in self._segments:
                found = segment.postings(term_id)
                if found is None:
                    continue
                docs, freqs = found
                inside = docs < self._position.size
                docs, freqs = docs[inside], freqs[inside]
                at = self._position[docs]
                live = at >= 0
                if live.any():
                    hits.append((at[live], docs[live], freqs[live]))
            count = sum(h[0].size for h in hits)
            if not count:
                continue
            idf = math.log(1 + (self.size - count + 0.5) / (count + 0.5))
            for at, docs, freqs in hits:
                out[at] += idf * freqs * (K1 + 1) / (freqs + self._norm[docs])
        return out
