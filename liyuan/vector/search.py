"""Ranking chunks for a query: branch filter, semantic, lexical, fusion, dedupe.

Invariants (pure: a snapshot and a query in, ranked positions out):

- A narrative chunk written on a branch the user has left is never returned, nor an
  archive chunk whose compaction anchor is off the branch (:func:`on_current_branch`),
  nor one superseded by a newer version on the branch (:func:`visible_mask`); import
  and manual chunks, and chunks stored without a turn id, always may be.
- Semantic hits need a cosine above ``MIN_COSINE`` and a vector written by the query's
  embedder (a chunk from another embedder is still found lexically until it is
  re-embedded); lexical hits need a positive BM25 score.
- At most ``top_k`` results, no two sharing their first ``DEDUPE_PREFIX`` characters,
  best first.
- In hybrid mode no list is ever locked out: the first ``RESERVED`` hits of the
  embedding list and of the keyword list are among the results whenever ``top_k``
  leaves room for one per list, whatever the weight (issue 25, ``tests/liyuan/vector/
  test_fusion.py``). Before, RRF at weight 5 shut out every chunk only the keyword list
  found (at most 1/61 against at least 5/65 for the embedding list's first five).

Fusion, measured on the bench's labelled queries (``python -m harness.bench``):
reciprocal rank fusion (RRF, k = 60) sums ``1 / (k + rank)`` over the two lists. It
needs no score calibration, which matters because cosines of different embedders and
BM25 scores live on unrelated scales. The embedding list is weighted
(``semantic_weight / (k + rank)``, the lexical list weighs 1): an equal weight let a
weak list win on English queries (issue 15), so the weight depends on the embedder and
on the query's script (:meth:`liyuan.vector.config.VectorConfig.semantic_weight`).
``mix`` (min-max normalised scores, ``alpha * semantic + (1 - alpha) * lexical``, the
semantic side scaled by the same weight) is kept for the comparison.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from liyuan.session.branch import BranchIds
from liyuan.vector.config import RecallMode
from liyuan.vector.index import BRANCH_TAGGED, Chunk, Snapshot

__all__ = [
    "CANDIDATES",
    "DEDUPE_PREFIX",
    "MIN_COSINE",
    "RESERVED",
    "RRF_K",
    "Fusion",
    "RankSettings",
    "Ranked",
    "on_current_branch",
    "rank",
    "visible_mask",
]

MIN_COSINE = 0.05
DEDUPE_PREFIX = 80
RRF_K = 60
CANDIDATES = 50
"""How deep each list is read before fusing (enough for top 20 after dedupe)."""
MIX_ALPHA = 0.5
RESERVED = 1
"""Hits of each list guaranteed a place in the fused top k (issue 25)."""

Fusion = Literal["rrf", "mix"]
Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class RankSettings:
    """How one query is ranked (:func:`rank`): its slice of :class:`~liyuan.vector.config.VectorConfig`,
    with the choices :meth:`liyuan.vector.memory.VectorMemory.search` makes for the query."""

    mode: RecallMode
    """``hybrid``, ``semantic`` or ``lexical``."""
    tokenizer: str
    """Which lexical index to use."""
    top_k: int
    """Maximum number of results."""
    fusion: Fusion = "rrf"
    """``rrf`` or ``mix`` (hybrid mode only)."""
    semantic_weight: float = 1.0
    """Weight of the embedding list against the lexical one (hybrid mode only; 0 leaves the
    lexical order, 1 weighs both alike)."""
    reserve: int = RESERVED
    """Hits of each list that are always among the results (hybrid mode only; see :func:`_with_reserved`)."""


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked chunk, and how it was found (the recall trace, issue 36)."""

    chunk: Chunk
    score: float
    """Fused score (RRF or mix), or the raw cosine / BM25 score in single modes."""
    embedding_rank: int | None = None
    """Its place (1 = first) in the embedding list, read ``max(CANDIDATES, 4 * top_k)``
    deep; ``None``: that list did not find it (or was not searched)."""
    keyword_rank: int | None = None
    """Its place in the keyword (BM25) list, likewise."""
    reserved: bool = False
    """It holds one of the places reserved for each list's first hits (:func:`_with_reserved`)."""


# --8<-- [start:on_current_branch]
def on_current_branch(chunk: Chunk, branch_ids: Collection[str] | None) -> bool:
    """Whether ``chunk`` may be shown on the branch made of ``branch_ids``.

    A narrative chunk carries the id of the newest turn whose text it holds; an archive
    chunk carries its compaction's anchor (the last entry the summary covers). Every
    other entry of that text is an ancestor of the id, so the id is on the current
    branch exactly when all of the text is: otherwise (after a reroll, or a rewind past
    the compaction) the chunk is hidden. Import and manual chunks, and old chunks
    without an id, are always visible. ``None`` means "no branch information": nothing
    is hidden. The ids must be taken before any asynchronous work, since a reroll moves
    the leaf.
    """
    if branch_ids is None or chunk.source not in BRANCH_TAGGED or chunk.node_id is None:
        return True
    return chunk.node_id in branch_ids
# --8<-- [end:on_current_branch]


# --8<-- [start:visible_mask]
def visible_mask(
    snapshot: Snapshot, stores: Collection[str], branch_ids: Collection[str] | None
) -> npt.NDArray[np.bool_]:
    """One flag per chunk of ``snapshot``: may it be shown on this branch?

    A chunk is visible when it belongs to one of ``stores``, is on the current branch
    (:func:`on_current_branch`), and no newer version of it is: a merge writes a new
    version and keeps the old one, so after a reroll abandons the newer version the
    older one (all of whose text is on the branch) is what shows again.
    """
    wanted = [i for i, name in enumerate(snapshot.store_names) if name in stores]
    mask = np.isin(snapshot.store_codes, wanted)
    on_branch = np.ones(len(snapshot.chunks), dtype=np.bool_)
    if branch_ids is not None and snapshot.tag_ids:
        if isinstance(branch_ids, BranchIds):
            places = snapshot.tag_places(branch_ids)
            member = (places >= 0) & (places < len(branch_ids))
        else:
            member = np.array([node_id in branch_ids for node_id in snapshot.tag_ids], dtype=np.bool_)
        on_branch[snapshot.tag_positions[~member]] = False
    pairs = snapshot.version_pairs
    # superseded by a version that is on the branch
    mask[pairs[on_branch[pairs[:, 0]], 1]] = False
    result: npt.NDArray[np.bool_] = mask & on_branch
    return result
# --8<-- [end:visible_mask]


def _top(scores: Vector, limit: int) -> npt.NDArray[np.int64]:
    """Positions of the ``limit`` best finite, positive scores, best first."""
    valid = np.flatnonzero(scores > 0)
    if valid.size > limit:
        valid = valid[np.argpartition(-scores[valid], limit - 1)[:limit]]
    return valid[np.argsort(-scores[valid], kind="stable")]


def _semantic(snapshot: Snapshot, query: Vector | None, label: str, mask: npt.NDArray[np.bool_]) -> Vector:
    scores = np.zeros(len(snapshot.chunks), dtype=np.float32)
    group = snapshot.matrices.get(label)
    if query is None or group is None:
        return scores
    positions, matrix = group
    if matrix.shape[1] != query.shape[0]:
        return scores
    cosine = matrix @ query
    scores[positions] = np.where(cosine > MIN_COSINE, cosine, 0.0)
    scores[~mask] = 0.0
    return scores


def _fuse(first: Vector, second: Vector, fusion: Fusion, first_weight: float = 1.0) -> Vector:
    """Fuse the embedding list ``first`` (weighted) with the lexical list ``second``."""
    tops = [_top(scores, CANDIDATES) for scores in (first, second)]
    if fusion == "rrf":
        fused = np.zeros_like(first)
        for order, weight in ((tops[0], first_weight), (tops[1], 1.0)):
            fused[order] += weight / (RRF_K + np.arange(1, order.size + 1, dtype=np.float32))
        return fused
    fused = np.zeros_like(first)
    for scores, order, weight in ((first, tops[0], MIX_ALPHA * first_weight), (second, tops[1], 1 - MIX_ALPHA)):
        if order.size:
            top, low = float(scores[order[0]]), float(scores[order[-1]])
            span = top - low
            fused[order] += weight * ((scores[order] - low) / span if span > 0 else 1.0)
    # A candidate whose normalised score is 0 (the weakest of its list) must still count.
    fused[(first > 0) | (second > 0)] += 1e-6
    return fused


def rank(
    snapshot: Snapshot,
    settings: RankSettings,
    *,
    query_vector: Vector | None,
    embedder_label: str,
    query_terms: Sequence[str],
    mask: npt.NDArray[np.bool_],
) -> list[Ranked]:
    """Rank the visible chunks of ``snapshot`` for one query.

    Args:
        snapshot: The store's search snapshot.
        settings: The mode, tokenizer, ``top_k`` and fusion (:class:`RankSettings`).
        query_vector: The query embedded by ``embedder_label`` (``None`` in lexical mode).
        embedder_label: Only vectors written by this embedder are compared.
        query_terms: The query split by the settings' tokenizer.
        mask: :func:`visible_mask` for this query.

    Returns:
        Up to ``top_k`` chunks, best first, deduplicated by their first 80 characters.
    """
    if not snapshot.chunks:
        return []
    mode, tokenizer, top_k = settings.mode, settings.tokenizer, settings.top_k
    semantic = _semantic(snapshot, query_vector, embedder_label, mask) if mode != "lexical" else None
    lexical = None
    if mode != "semantic":
        lexical = snapshot.lexical(tokenizer).scores(query_terms)
        lexical[~mask] = 0.0
    depth = max(CANDIDATES, top_k * 4)
    orders = {name: _top(scores, depth) for name, scores in (("embedding", semantic), ("keyword", lexical))
              if scores is not None}
    if semantic is not None and lexical is not None:
        fused = _fuse(semantic, lexical, settings.fusion, settings.semantic_weight)
        picked, reserved = _with_reserved(snapshot, fused, (orders["embedding"], orders["keyword"]), top_k,
                                          settings.reserve)
        return _traced(snapshot, fused, picked, orders, reserved)
    [(_name, order)] = orders.items()
    single = semantic if semantic is not None else lexical
    assert single is not None
    return _traced(snapshot, single, _deduped(snapshot, order, top_k), orders, set())


def _traced(snapshot: Snapshot, scores: Vector, picked: Sequence[int], orders: dict[str, npt.NDArray[np.int64]],
            reserved: Collection[int]) -> list[Ranked]:
    """The picked positions as :class:`Ranked`, each with its place in every list searched."""
    places = {name: {int(p): i for i, p in enumerate(order, start=1)} for name, order in orders.items()}
    empty: dict[int, int] = {}
    return [Ranked(snapshot.chunks[p], float(scores[p]), places.get("embedding", empty).get(p),
                   places.get("keyword", empty).get(p), p in reserved) for p in picked]


def _prefix(chunk: Chunk) -> str:
    return chunk.text.strip()[:DEDUPE_PREFIX]


def _deduped(snapshot: Snapshot, order: npt.NDArray[np.int64], top_k: int) -> list[int]:
    results: list[int] = []
    seen: set[str] = set()
    for position in order:
        prefix = _prefix(snapshot.chunks[int(position)])
        if prefix in seen:
            continue
        seen.add(prefix)
        results.append(int(position))
        if len(results) >= top_k:
            break
    return results


# --8<-- [start:reserved]
def _with_reserved(snapshot: Snapshot, fused: Vector, lists: Sequence[npt.NDArray[np.int64]], top_k: int,
                   reserve: int) -> tuple[list[int], set[int]]:
    """The fused top ``top_k``, except that each list's first ``reserve`` hits are in it.

    ``lists`` are the lists' orders, best first. The reserved hits are taken in turns
    (the first of each list, then the second of each, ...) while there is room; the
    other places go by fused score. The result is ordered by fused score, with the
    positions that hold a reserved place. So no weight can shut a list out: with room
    for two, the top hit of the embedding list and the top hit of the keyword list are
    both shown (with room for one, the fused best is).
    """
    chosen: dict[str, int] = {}  # prefix -> position
    depth = max(CANDIDATES, top_k * 4)
    orders = [iter(order) for order in lists]
    # With room for fewer than one hit per list, the fused order alone decides.
    for _round in range(reserve if top_k >= len(lists) else 0):
        for order in orders:
            if len(chosen) >= top_k:
                break
            for position in order:
                prefix = _prefix(snapshot.chunks[int(position)])
                if prefix not in chosen:
                    chosen[prefix] = int(position)
                    break
    reserved = set(chosen.values())
    for position in _top(fused, depth):
        if len(chosen) >= top_k:
            break
        chosen.setdefault(_prefix(snapshot.chunks[int(position)]), int(position))
    return sorted(chosen.values(), key=lambda p: -float(fused[p])), reserved
# --8<-- [end:reserved]
