"""Issue 14, item 8: a search stuck inside the store bounds the next ingest too, and leaks no threads.

The store below blocks inside its search while holding its lock, until the test
releases it (at the end of every test, so no thread outlives the suite).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from liyuan.vector import SqliteChunkStore, StoreConfig, VectorConfig, VectorMemory
from liyuan.vector.config import NARRATIVE
from liyuan.vector.index import Snapshot
from liyuan.vector.recall import ingest_for_turn, recall_for_turn

TURN = "沈怀瑾在东门外的石阶上捡到一块玉佩，玉上刻着一个「瑾」字。"


class StuckStore(SqliteChunkStore):
    """A store whose search holds the store's lock and blocks while ``stuck`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.stuck = threading.Event()
        self.release = threading.Event()

    def snapshot(self) -> Snapshot:
        if self.stuck.is_set():
            with self._lock:  # a search stuck in the store keeps its lock
                self.release.wait(30.0)
        return super().snapshot()


@pytest.fixture
def stuck(tmp_path: Path) -> Iterator[VectorMemory]:
    store = StuckStore(tmp_path / "chat.sqlite")
    stores = {NARRATIVE: StoreConfig("剧情数据库", True, 1, 200)}  # every turn is due
    memory = VectorMemory(VectorConfig(enabled=True, embedder="hash", stores=stores), store)
    store.stuck.set()
    yield memory
    store.release.set()


def workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("liyuan-vector")]


def test_an_ingest_after_a_stuck_recall_returns_within_its_bound(stuck: VectorMemory) -> None:
    warnings: list[str] = []
    assert recall_for_turn(stuck, "玉佩在哪里", None, timeout=0.3, warn=warnings.append) == []
    started = time.monotonic()
    result = ingest_for_turn(stuck, TURN, node_id="a1", branch_ids={"a1"}, timeout=0.3, warn=warnings.append)
    assert time.monotonic() - started < 1.5
    assert not result.stored and result.reason == "deferred"
    assert any("写入" in w for w in warnings)


def test_hung_turns_leak_at_most_one_worker_per_store(stuck: VectorMemory) -> None:
    before = len(workers())
    for turn in range(5):
        recall_for_turn(stuck, "玉佩在哪里", None, timeout=0.1, warn=lambda _w: None)
        ingest_for_turn(stuck, f"{TURN}第{turn}拍。", node_id=f"a{turn}", branch_ids=None, timeout=0.1,
                        warn=lambda _w: None)
    assert len(workers()) - before <= 1


def test_deferred_turns_are_ingested_once_the_store_frees_up(stuck: VectorMemory) -> None:
    store = stuck.store
    assert isinstance(store, StuckStore)
    recall_for_turn(stuck, "玉佩在哪里", None, timeout=0.1, warn=lambda _w: None)
    for turn in range(3):
        ingest_for_turn(stuck, f"{TURN}第{turn}拍。", node_id=f"a{turn}", branch_ids=None, timeout=0.1,
                        warn=lambda _w: None)
    store.stuck.clear()
    store.release.set()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "第2拍" not in "".join(c.text for c in store.chunks()):
        time.sleep(0.02)
    texts = "".join(c.text for c in store.chunks())
    assert all(f"第{turn}拍" in texts for turn in range(3))  # no turn lost


def test_a_healthy_ingest_is_stored_at_once(tmp_path: Path) -> None:
    stores = {NARRATIVE: StoreConfig("剧情数据库", True, 1, 200)}
    memory = VectorMemory(VectorConfig(enabled=True, stores=stores), SqliteChunkStore(tmp_path / "ok.sqlite"))
    result = ingest_for_turn(memory, TURN, node_id="a1", branch_ids={"a1"})
    assert result.stored and memory.store.count() == 1


def test_a_compaction_archive_is_bounded_too(stuck: VectorMemory) -> None:
    from liyuan.model import FunctionModel
    from liyuan.story.compact import CompactionSettings, run_compaction
    from liyuan.vector.recall import bounded_archive
    from tests.liyuan.branches import SUMMARY_REPLY, story_turns, tree_of

    recall_for_turn(stuck, "玉佩在哪里", None, timeout=0.1, warn=lambda _w: None)  # the store is now stuck
    warnings: list[str] = []
    tree = tree_of(story_turns(1, 40))
    started = time.monotonic()
    outcome = run_compaction(tree, FunctionModel(lambda _r: SUMMARY_REPLY),
                             CompactionSettings(user_name="旅人", char_name="阿箬"),
                             archive=bounded_archive(stuck, timeout=0.3, warn=warnings.append))
    assert time.monotonic() - started < 2.0
    assert outcome.kind == "compacted"  # the summary lands; the archive is written once the store frees up
    assert any("归档" in w for w in warnings)
    store = stuck.store
    assert isinstance(store, StuckStore)
    store.stuck.clear()
    store.release.set()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not store.count():
        time.sleep(0.02)
    assert store.count() > 0
