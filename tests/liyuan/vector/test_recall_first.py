"""Issue 25: a compaction's archive never holds up the next turn's recall, and evictions
are announced once per compaction (or per 100 chunks), not once per chunk."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from liyuan.model import FunctionModel
from liyuan.session.entries import Entry
from liyuan.story.compact import CompactionSettings, run_compaction
from liyuan.vector import HashEmbedder, SqliteChunkStore, StoreConfig, VectorConfig, VectorMemory
from liyuan.vector import memory as memory_module
from liyuan.vector.config import NARRATIVE
from liyuan.vector.recall import bounded_archive, ingest_for_turn, recall_for_turn
from tests.liyuan.branches import SUMMARY_REPLY, story_turn, tree_of

PASSAGE_S = 0.1
"""The slow embedder's time per stored passage: 30 chunks take 3 s."""
RECALL_BOUND_S = 2.0


class SlowEmbedder(HashEmbedder):
    """Hashing vectors, but each stored passage takes ``PASSAGE_S`` (queries are fast)."""

    def __init__(self) -> None:
        self.passages = 0
        self.started = threading.Event()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.started.set()
        time.sleep(PASSAGE_S * len(texts))
        self.passages += len(texts)
        return super().embed(texts)

    def embed_query(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return super().embed(texts)


def _story(count: int) -> list[Entry]:
    out: list[Entry] = []
    for i in range(1, count + 1):
        out.extend(story_turn(i, out[-1].id if out else None, f"第{i}段：青石巷口的灯笼一盏接一盏亮起来。" * 24))
    return out


@pytest.mark.slow
def test_the_next_recall_returns_within_its_bound_while_a_compaction_archives_30_chunks(tmp_path: Path) -> None:
    embedder = SlowEmbedder()
    memory = VectorMemory(VectorConfig(enabled=True, embedder="hash"), SqliteChunkStore(tmp_path / "c.sqlite"),
                          embedder)
    memory.archive_compacted("沈怀瑾在东门外的石阶上捡到一块玉佩，玉上刻着一个「瑾」字。")
    embedder.passages = 0
    embedder.started.clear()
    tree = tree_of(_story(40))
    warnings: list[str] = []
    outcome: list[object] = []

    def compact() -> None:
        archive = bounded_archive(memory, timeout=10.0, warn=warnings.append)
        outcome.append(run_compaction(tree, FunctionModel(lambda _r: SUMMARY_REPLY),
                                      CompactionSettings(user_name="旅人", char_name="阿箬"), archive=archive))

    compaction = threading.Thread(target=compact)
    compaction.start()
    assert embedder.started.wait(10)  # the archive has started embedding
    started = time.monotonic()
    lines = recall_for_turn(memory, "玉佩上刻着什么字", None, timeout=RECALL_BOUND_S, warn=warnings.append)
    elapsed = time.monotonic() - started
    compaction.join(30)
    assert lines and "玉佩" in lines[0]
    assert elapsed < RECALL_BOUND_S and not [w for w in warnings if "检索" in w]
    # The archive was not cut short: 30 chunks or more, all stored.
    archived = [c for c in memory.store.chunks(NARRATIVE) if c.source == "archive"]
    assert embedder.passages >= 30 and len(archived) >= 31
    assert elapsed < PASSAGE_S * embedder.passages / 2  # the recall did not wait for the whole archive


def test_a_compaction_that_evicts_says_so_once(tmp_path: Path) -> None:
    lines: list[str] = []
    stores = {NARRATIVE: StoreConfig("剧情数据库", True, 3, 20)}
    memory = VectorMemory(VectorConfig(enabled=True, embedder="hash", stores=stores),
                          SqliteChunkStore(tmp_path / "c.sqlite"), on_activity=lines.append)
    text = "\n\n".join(f"旅人：第{i}段。" + "雨" * 200 for i in range(60))
    memory.archive_compacted(text, "a-60")
    assert memory.store.count(NARRATIVE) == 20 and memory.store.evicted(NARRATIVE) > 5  # in several batches
    assert len(lines) == 1 and f"移出了 {memory.store.evicted(NARRATIVE)} 段" in lines[0]


def test_per_turn_evictions_are_announced_first_and_then_once_per_hundred(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_module, "EVICTION_NOTICE_EVERY", 10)  # 100 in the library; 10 keeps this short
    lines: list[str] = []
    stores = {NARRATIVE: StoreConfig("剧情数据库", True, 1, 20)}
    memory = VectorMemory(VectorConfig(enabled=True, embedder="hash", stores=stores),
                          SqliteChunkStore(tmp_path / "c.sqlite"), on_activity=lines.append)
    for i in range(45):  # each turn is too long to merge: one new chunk per turn
        ingest_for_turn(memory, f"第{i}拍：" + "风" * 1000, node_id=None, branch_ids=None)
    assert memory.store.evicted(NARRATIVE) == 25  # one per turn (the old notices: 25 lines)
    assert len(lines) == 3
    assert ["累计移出 1 段" in lines[0], "累计移出 10 段" in lines[1], "累计移出 20 段" in lines[2]] == [True] * 3


def test_archive_chunks_repeat_the_turn_before_when_it_fits() -> None:
    from liyuan.vector.chunking import split_text_chunks

    turns = ["Iris: There's a pottery class on Thursdays. Come with me?", "Sam: Why not, I'll give it a go.",
             "Iris: Great, I'll book two places.", "Sam: " + "x" * 70]
    text = "\n\n".join(turns)
    assert split_text_chunks(text, 100) == [f"{turns[0]}\n\n{turns[1]}", turns[2], turns[3]]
    with_overlap = split_text_chunks(text, 100, overlap=1)
    # The third turn keeps the one it answers; a turn too long to share a chunk stands alone.
    assert with_overlap == [f"{turns[0]}\n\n{turns[1]}", f"{turns[1]}\n\n{turns[2]}", turns[3]]
    assert all(len(c) <= 100 for c in with_overlap)
