"""Embedder output is checked before it is stored (issue 26, item 9).

Before: NaN and inf vectors were stored as they came, and a batch of the wrong width
under the same label could outvote the good vectors (the snapshot keeps the majority
width), pushing them out of semantic search. The embedders here are hand-written
stand-ins around the hashing embedder.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from liyuan.errors import ModelOutputError
from liyuan.vector import HashEmbedder, SqliteChunkStore, VectorConfig, VectorMemory
from liyuan.vector.checked import UNEMBEDDED
from liyuan.vector.config import EXTERNAL, NARRATIVE, StoreConfig
from liyuan.vector.recall import ingest_for_turn, recall_for_turn

STORY = [
    "沈怀瑾在东门外的石阶上捡到一块玉佩，玉佩背面刻着一个小小的满字。",
    "小满背着竹篓去镇南的茶田采茶，露水打湿了她的蓝布衫。",
    "周掌柜的秤杆总是压得很低，可小满从来不和他争。",
    "老韩在饭桌上敲了敲碗边，让沈怀瑾把《皂罗袍》练熟。",
]


class Flaky:
    """Hash vectors, spoilt on demand: ``nan``, ``inf``, ``huge`` (overflows float32),
    ``wide`` (300 columns), ``rows`` (one row short). Optionally without a declared width."""

    def __init__(self, label: str = HashEmbedder.label) -> None:
        self.label = label
        self.mode = ""
        self.inner = HashEmbedder()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        good = self.inner.embed(texts)
        if self.mode == "nan":
            good[-1, 3] = np.nan
        elif self.mode == "inf":
            good[0, 0] = np.inf
        elif self.mode == "huge":
            return good.astype(np.float64) * 1e300  # type: ignore[return-value]
        elif self.mode == "wide":
            return np.hstack([good, np.zeros((len(texts), 44), dtype=np.float32)])
        elif self.mode == "rows":
            return good[:-1]
        return good


def memory(tmp_path: Path, embedder: Flaky, every: int = 0) -> VectorMemory:
    stores = {NARRATIVE: StoreConfig("剧情数据库", True, every, 200),
              EXTERNAL: StoreConfig("额外数据库", True, 0, 5000)}
    config = VectorConfig(enabled=True, embedder="hash", stores=stores)
    return VectorMemory(config, SqliteChunkStore(tmp_path / "v.sqlite"), embedder)


def stored_vectors(vector: VectorMemory) -> list[npt.NDArray[np.float32]]:
    snapshot = vector.store.snapshot()
    return [row for _rows, matrix in snapshot.matrices.values() for row in matrix]


@pytest.mark.parametrize("mode", ["nan", "inf", "huge", "rows"])
def test_a_bad_batch_is_refused_and_embedded_again_later(tmp_path: Path, mode: str) -> None:
    embedder = Flaky()
    vector = memory(tmp_path, embedder)
    embedder.mode = mode
    with pytest.raises(ModelOutputError, match="嵌入"):
        vector.import_text("\n\n".join(STORY))
    assert all(np.isfinite(v).all() for v in stored_vectors(vector))
    waiting = vector.store.chunks()
    assert waiting and {c.embedder for c in waiting} == {UNEMBEDDED}  # the text is kept, without a vector
    embedder.mode = ""
    vector.add_manual("一条新的笔记：雾港的灯塔每十二秒转一圈。")
    assert {c.embedder for c in vector.store.chunks()} == {HashEmbedder.label}  # embedded on the next write
    assert vector.search("玉佩背面刻着满字", top_k=1)[0].text.startswith("沈怀瑾在东门外")


def test_chunks_left_without_a_vector_are_embedded_by_the_next_process_too(tmp_path: Path) -> None:
    embedder = Flaky()
    embedder.mode = "inf"
    with pytest.raises(ModelOutputError):
        memory(tmp_path, embedder).import_text("\n\n".join(STORY))
    fresh = memory(tmp_path, Flaky())  # a restart: the next write looks for them once
    fresh.add_manual("一条新的笔记：雾港的灯塔每十二秒转一圈。")
    assert {c.embedder for c in fresh.store.chunks()} == {HashEmbedder.label}


def test_a_wrong_width_batch_cannot_push_good_vectors_out(tmp_path: Path) -> None:
    embedder = Flaky(label="openai:test-model")  # an endpoint: no width declared up front
    vector = memory(tmp_path, embedder)
    vector.add_manual(STORY[0])
    embedder.mode = "wide"
    with pytest.raises(ModelOutputError, match="300"):
        vector.import_text("\n\n".join(f"第{i}段：{STORY[1]}{i}" for i in range(5)))
    fresh = memory(tmp_path, embedder)  # another process: the width comes from the stored vectors
    with pytest.raises(ModelOutputError, match="256"):
        fresh.import_text("\n\n".join(f"第{i}段：{STORY[2]}{i}" for i in range(5)))
    embedder.mode = ""
    hits = fresh.search("玉佩背面刻着满字", top_k=1)
    assert hits and hits[0].text == STORY[0] and hits[0].score > 0


def test_a_bad_turn_vector_leaves_the_turn_queued_for_the_next_ingest(tmp_path: Path) -> None:
    embedder = Flaky()
    vector = memory(tmp_path, embedder, every=1)
    warnings: list[str] = []
    embedder.mode = "nan"
    result = ingest_for_turn(vector, STORY[0], node_id="a1", branch_ids=None, warn=warnings.append)
    assert result.reason == "error" and "NaN" in warnings[0] and "下次写入时重试" in warnings[0]
    assert vector.store.count() == 0 and len(vector.store.pending()) == 1
    embedder.mode = ""
    ingest_for_turn(vector, STORY[1], node_id="a2", branch_ids=None, warn=warnings.append)
    (chunk,) = vector.list_chunks(NARRATIVE)
    assert STORY[0] in chunk.text and STORY[1] in chunk.text and chunk.embedder == HashEmbedder.label


def test_a_bad_reembed_keeps_the_old_vectors(tmp_path: Path) -> None:
    embedder = Flaky()
    vector = memory(tmp_path, embedder)
    vector.import_text("\n\n".join(STORY))
    before = stored_vectors(vector)
    spoilt = Flaky(label="other-embedder")
    spoilt.mode = "inf"
    with pytest.raises(ModelOutputError):
        vector.reembed(spoilt)
    assert {c.embedder for c in vector.store.chunks()} == {HashEmbedder.label}
    assert all(np.array_equal(a, b) for a, b in zip(before, stored_vectors(vector), strict=True))


def test_a_bad_query_vector_gives_no_recall_and_a_warning(tmp_path: Path) -> None:
    embedder = Flaky()
    vector = memory(tmp_path, embedder)
    vector.import_text("\n\n".join(STORY))
    embedder.mode = "nan"
    warnings: list[str] = []
    assert recall_for_turn(vector, "玉佩在哪里", None, warn=warnings.append) == []
    assert "ModelOutputError" in warnings[0]
