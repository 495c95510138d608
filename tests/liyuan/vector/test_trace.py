"""Issue 36 item 2: every recalled hit says which list found it, its rank in each and the fused score.

The trace is checked against the lists themselves (ranked here from the raw scores), in
``rank()``, on the hits of :class:`~liyuan.vector.VectorMemory`, and in ``turn.record``
through the app's path, where it would have shown the keyword list's lock-out on the
first turn.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from liyuan import Card, MemoryConfig
from liyuan.vector.config import VectorConfig
from liyuan.vector.search import RRF_K, RankSettings, rank, visible_mask
from tests.liyuan.vector.test_fusion import DIM, LABEL, QUERY_WORD, _snapshot, _unit


def _list_ranks(scores: np.ndarray) -> dict[int, int]:
    positive = [int(i) for i in np.argsort(-scores, kind="stable") if scores[i] > 0]
    return {p: r for r, p in enumerate(positive, start=1)}


def test_each_hit_carries_its_rank_in_each_list_and_the_fused_score(tmp_path: Path) -> None:
    axis = np.eye(DIM, dtype=np.float32)
    vectors = [_unit(axis[0] * (1.0 - 0.05 * i) + axis[1] * 0.2 * (i + 1)) for i in range(6)]  # both lists
    vectors.append(_unit(-axis[0]))  # 6: keyword only, the most mentions
    vectors.append(_unit(axis[0] + axis[2] * 0.01))  # 7: embedding only, the closest vector
    snapshot = _snapshot(tmp_path, "trace", vectors, [1, 2, 1, 3, 1, 1, 6, 0])
    query = axis[0]
    weight = 3.0
    ranked = rank(snapshot,
                  RankSettings(mode="hybrid", tokenizer="bigram", top_k=5, fusion="rrf", semantic_weight=weight),
                  query_vector=query, embedder_label=LABEL, query_terms=[QUERY_WORD],
                  mask=visible_mask(snapshot, {"external"}, None))
    positions, matrix = snapshot.matrices[LABEL]
    cosine = np.zeros(len(snapshot.chunks), dtype=np.float32)
    cosine[positions] = matrix @ query
    cosine[cosine <= 0.05] = 0
    embedding = _list_ranks(cosine)
    keyword = _list_ranks(snapshot.lexical("bigram").scores([QUERY_WORD]))
    at = {c.id: i for i, c in enumerate(snapshot.chunks)}
    assert len(ranked) == 5
    for hit in ranked:
        p = at[hit.chunk.id]
        assert (hit.embedding_rank, hit.keyword_rank) == (embedding.get(p), keyword.get(p))
        expected = sum(w / (RRF_K + r) for w, r in ((weight, hit.embedding_rank), (1.0, hit.keyword_rank)) if r)
        assert abs(hit.score - expected) < 1e-6
    by_text = {h.chunk.text.split()[0]: h for h in ranked}
    assert by_text["chunk006"].embedding_rank is None and by_text["chunk006"].keyword_rank == 1
    assert by_text["chunk006"].reserved  # its place is the keyword list's reserved one, not won by its score
    assert by_text["chunk007"].keyword_rank is None and by_text["chunk007"].embedding_rank == 1
    assert sum(h.reserved for h in ranked) == 2


def test_a_single_list_mode_ranks_by_that_list_alone(tmp_path: Path) -> None:
    axis = np.eye(DIM, dtype=np.float32)
    snapshot = _snapshot(tmp_path, "single", [_unit(axis[0] + axis[1] * 0.1 * i) for i in range(4)], [1, 3, 0, 2])
    ranked = rank(snapshot, RankSettings(mode="lexical", tokenizer="bigram", top_k=5), query_vector=None,
                  embedder_label=LABEL, query_terms=[QUERY_WORD], mask=visible_mask(snapshot, {"external"}, None))
    assert [h.keyword_rank for h in ranked] == [1, 2, 3] and all(h.embedding_rank is None for h in ranked)
    assert not any(h.reserved for h in ranked)


def test_the_turn_record_carries_the_recall_trace(tmp_path: Path) -> None:
    config = MemoryConfig(vector=VectorConfig(enabled=True, embedder="hash"))
    with Card.open(tmp_path / "雾港", user_name="阿简", char_name="林溯", config=config, background=False) as card:
        chat = card.chat("jA")
        assert chat.vector is not None
        ids = chat.vector.import_text("灯塔的守灯人把铜纽扣收进抽屉。\n\n北礁的水深只有四米二。", title="设定")
        turn = chat.prepare("那枚铜纽扣还在抽屉里吗？")
        assert turn.record is not None and turn.recall
        trace = turn.record.to_json()["recall"]
        assert len(trace) == len(turn.recall)  # one entry per 【剧情记忆】 line, in its order
        assert {t["chunk"] for t in trace} <= {f"chunk:{i}" for i in ids}
        first = trace[0]
        assert first["lists"] and set(first["lists"]) <= {"keyword", "embedding"}
        assert first["keyword_rank"] == 1  # the chunk that says 铜纽扣 is the keyword list's first
        assert [t["score"] for t in trace] == sorted((t["score"] for t in trace), reverse=True)
        [block] = turn.record.of("recall")
        assert list(block.sources) == [t["chunk"] for t in trace]
        # vector memory off: the record says no recall happened
        plain = card.chat("jB").prepare("你好")
        assert plain.record is not None and plain.record.to_json()["recall"] == []
