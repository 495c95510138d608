"""Per-turn recall: branches, tools, the 5-second bound (reference 12.3, vector parts)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from liyuan.clock import counter_ids, fixed_clock
from liyuan.compaction import CompactionOutcome
from liyuan.context.assemble import Injection, build_context
from liyuan.errors import ConfigError
from liyuan.model import ScriptedModel
from liyuan.session.tree import SessionTree
from liyuan.story.compact import CompactionSettings, run_compaction
from liyuan.vector import SqliteChunkStore, StoreConfig, VectorConfig, VectorMemory
from liyuan.vector.config import EXTERNAL, NARRATIVE
from liyuan.vector.index import Snapshot
from liyuan.vector.recall import branch_ids_of, recall_for_turn
from liyuan.vector.tools import read_tool, search_tool
from tests.liyuan.branches import SUMMARY_REPLY, story_turns, tree_of


def every_turn() -> dict[str, StoreConfig]:
    return {NARRATIVE: StoreConfig("剧情数据库", True, 1, 200), EXTERNAL: StoreConfig("额外数据库", True, 0, 5000)}


@pytest.fixture
def memory(tmp_path: Path) -> VectorMemory:
    # The hashing embedder: these tests are about branches and stores, not meaning.
    config = VectorConfig(enabled=True, embedder="hash", stores=every_turn())
    return VectorMemory(config, SqliteChunkStore(tmp_path / "chat.sqlite"))


# -- 12.3.1 session memory -----------------------------------------------------------


def test_session_memory_read_and_search_by_branch(memory: VectorMemory, tmp_path: Path) -> None:
    result = memory.ingest_turn("阿明在东门外的茶摊边捡到一块温润的玉佩。", node_id="old", branch_ids={"u", "old"})
    assert result.stored and result.chunk_id
    (chunk,) = memory.list_chunks()
    ref = f"session:narrative:{chunk.id}"

    assert memory.read_chunk(ref, {"u"}) is None
    assert memory.read_chunk(ref, set()) is None
    other = VectorMemory(memory.config, SqliteChunkStore(tmp_path / "other.sqlite"))
    assert other.read_chunk(ref, {"u", "old"}) is None
    assert memory.read_chunk(ref, {"u", "old"}) == chunk.text

    on_branch = memory.search_report("东门 玉佩", branch_ids={"u", "old"})
    assert [h.ref for h in on_branch.hits] == [ref]
    assert on_branch.status == {NARRATIVE: "ok", EXTERNAL: "ok"}
    assert memory.search_report("东门 玉佩", branch_ids={"u"}).hits == []

    memory.config = memory.config.with_enabled(False)
    report = memory.search_report("东门 玉佩", branch_ids={"u", "old"})
    assert report.hits == [] and set(report.status.values()) == {"disabled"}
    with pytest.raises(ConfigError, match="停用"):
        memory.read_chunk(ref, {"u", "old"})


# -- 12.3.2 tool results are distinguishable -------------------------------------------


class BrokenStore(SqliteChunkStore):
    def snapshot(self) -> Snapshot:
        raise OSError("磁盘读不出来")


def test_tools_tell_disabled_empty_and_broken_apart(memory: VectorMemory, tmp_path: Path) -> None:
    empty = search_tool(memory, "不存在的东西", branch_ids=None)
    assert not empty.is_error and "没有找到" in empty.text and "正常" in empty.text

    off = VectorMemory(VectorConfig(), memory.store)
    disabled = search_tool(off, "玉佩", branch_ids=None)
    assert not disabled.is_error and "已停用" in disabled.text and "没有找到" not in disabled.text

    broken = VectorMemory(memory.config, BrokenStore(tmp_path / "broken.sqlite"))
    thrown = search_tool(broken, "玉佩", branch_ids=None)
    assert thrown.is_error and "出错" in thrown.text and "磁盘读不出来" in thrown.text
    assert thrown.report is not None and set(thrown.report.status.values()) == {"error"}

    unknown = read_tool(memory, "session:narrative:0000000000000000", branch_ids=None)
    assert unknown.is_error and "找不到" in unknown.text
    malformed = read_tool(memory, "not-a-ref", branch_ids=None)
    assert malformed.is_error and "格式" in malformed.text
    assert read_tool(off, "session:narrative:x", branch_ids=None).is_error


def test_search_tool_lists_references_that_read_back(memory: VectorMemory) -> None:
    memory.import_text("青梧是镇北那棵老树的名字。\n\n树下埋着一坛二十年的女儿红。")
    found = search_tool(memory, "青梧", branch_ids=None)
    assert not found.is_error and found.report is not None
    ref = found.report.hits[0].ref
    assert ref in found.text
    assert "青梧" in read_tool(memory, ref, branch_ids=None).text


# -- branches: a reroll hides the abandoned reply ---------------------------------------


def play(tree: SessionTree, memory: VectorMemory, user: str, reply: str) -> str:
    """One turn: the user's words, the reply, then the per-turn ingest."""
    tree.append_message("user", user)
    entry = tree.append_message("assistant", reply)
    memory.ingest_turn(reply, node_id=entry.id, branch_ids=branch_ids_of(tree.branch()))
    return entry.id


def test_reroll_never_recalls_the_abandoned_reply(memory: VectorMemory) -> None:
    tree = SessionTree(ids=counter_ids(), clock=fixed_clock())
    play(tree, memory, "我们去码头吧。", "沈怀瑾背着胡琴走到码头，雾气很浓，河面上只看得见船影。")
    abandoned = play(tree, memory, "打开那只木匣。", "木匣里是一封血书，落款是失踪多年的大师兄。")
    assert any("血书" in h.text for h in memory.search("血书", branch_ids=branch_ids_of(tree.branch())))

    # Reroll the last reply: back to its user message, then a different reply.
    reroll_from = tree.get(abandoned)
    assert reroll_from is not None and reroll_from.parent_id is not None
    tree.navigate(reroll_from.parent_id)
    kept = tree.append_message("assistant", "木匣里只有一把生了锈的铜钥匙，钥匙柄上缠着红绳。")
    memory.ingest_turn(kept.text, node_id=kept.id, branch_ids=branch_ids_of(tree.branch()))
    play(tree, memory, "收好钥匙。", "他把铜钥匙揣进怀里，转身去找班主老韩商量。")

    branch = branch_ids_of(tree.branch())
    for query in ("血书", "大师兄", "木匣", "码头", "钥匙"):
        hits = memory.search(query, branch_ids=branch)
        assert all("血书" not in h.text for h in hits), query
        lines = recall_for_turn(memory, query, branch)
        assert all("血书" not in line for line in lines), query
    assert any("铜钥匙" in h.text for h in memory.search("钥匙", branch_ids=branch))
    assert any("码头" in h.text for h in memory.search("码头", branch_ids=branch))
    # The abandoned text is still in the store (the tree is append-only); only hidden.
    assert any("血书" in c.text for c in memory.list_chunks())


def test_a_reroll_to_the_same_words_keeps_them_recallable(memory: VectorMemory) -> None:
    tree = SessionTree(ids=counter_ids(), clock=fixed_clock())
    play(tree, memory, "我们去码头吧。", "沈怀瑾背着胡琴走到码头，雾气很浓，河面上只看得见船影。")
    same = "木匣里只有一把生了锈的铜钥匙，钥匙柄上缠着红绳。"
    first = play(tree, memory, "打开那只木匣。", same)
    entry = tree.get(first)
    assert entry is not None and entry.parent_id is not None
    tree.navigate(entry.parent_id)
    again = tree.append_message("assistant", same)  # a reroll that happens to say the same
    result = memory.ingest_turn(same, node_id=again.id, branch_ids=branch_ids_of(tree.branch()))
    assert result.stored, result.reason
    hits = memory.search("铜钥匙", branch_ids=branch_ids_of(tree.branch()))
    assert hits and hits[0].node_id == again.id


ARCHIVED = "很早以前，梨园镇的城隍庙前搭过一座三丈高的戏台，后来被大水冲垮了。"


def test_archive_chunks_follow_their_compaction_anchor(memory: VectorMemory) -> None:
    assert memory.archive_compacted(ARCHIVED, "anchor") == 1  # the seam's two-argument form
    (chunk,) = memory.list_chunks(NARRATIVE)
    assert chunk.source == "archive" and chunk.node_id == "anchor"
    hits = memory.search("戏台", branch_ids={"u1", "anchor", "a2"})
    assert hits and hits[0].source == "archive"
    # Rewound past the compaction: the anchor is gone, and so is the archived text.
    assert memory.search("戏台", branch_ids={"u1"}) == []
    assert recall_for_turn(memory, "那座戏台", {"u1"}) == []
    assert memory.read_chunk(f"session:narrative:{chunk.id}", {"u1"}) is None
    assert memory.read_chunk(f"session:narrative:{chunk.id}", {"anchor"}) == ARCHIVED


def test_an_archive_without_anchor_is_visible_everywhere(memory: VectorMemory) -> None:
    memory.archive_compacted(ARCHIVED)  # an old caller, or a file from before anchors
    hits = memory.search("戏台", branch_ids=set())
    assert hits and hits[0].source == "archive" and hits[0].node_id is None


# -- the 5-second bound ---------------------------------------------------------------


class HangingStore(SqliteChunkStore):
    """A store whose search blocks (up to 10 s, or until released)."""

    def __init__(self, path: Path, release: threading.Event) -> None:
        super().__init__(path)
        self.release = release

    def snapshot(self) -> Snapshot:
        self.release.wait(10.0)
        return super().snapshot()


@pytest.fixture
def hanging(tmp_path: Path) -> Iterator[VectorMemory]:
    release = threading.Event()
    store = HangingStore(tmp_path / "slow.sqlite", release)
    memory = VectorMemory(VectorConfig(enabled=True, embedder="hash"), store)
    memory.import_text("沈怀瑾在东门外的石阶上捡到一块玉佩。")
    yield memory
    release.set()  # let the abandoned worker finish instead of lingering


def turn_context(memory: VectorMemory, user_text: str, timeout: float, warnings: list[str]) -> str:
    """Assemble one turn's tail the way the engine does, with the recall bounded."""
    lines = recall_for_turn(memory, user_text, None, timeout=timeout, warn=warnings.append)
    messages = build_context([], user_text, injection=Injection("（尚无记录）", recall_lines=lines))
    return messages[-1].content


def test_hung_store_costs_the_turn_only_the_timeout(hanging: VectorMemory) -> None:
    warnings: list[str] = []
    started = time.monotonic()
    tail = turn_context(hanging, "玉佩在哪里", 0.5, warnings)
    elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 2.0
    assert "【剧情记忆】" not in tail and tail.endswith("玉佩在哪里")
    assert warnings and "本轮不注入【剧情记忆】" in warnings[0]


@pytest.mark.slow
def test_default_timeout_is_five_seconds(hanging: VectorMemory) -> None:
    warnings: list[str] = []
    started = time.monotonic()
    tail = turn_context(hanging, "玉佩在哪里", 5.0, warnings)
    elapsed = time.monotonic() - started
    assert 4.9 <= elapsed < 7.0
    assert "【剧情记忆】" not in tail and "5 秒" in warnings[0]


def test_default_timeout_parameter_is_five_seconds() -> None:
    import inspect

    assert inspect.signature(recall_for_turn).parameters["timeout"].default == 5.0


def test_a_healthy_turn_gets_the_block(memory: VectorMemory) -> None:
    memory.import_text("沈怀瑾在东门外的石阶上捡到一块玉佩。")
    warnings: list[str] = []
    tail = turn_context(memory, "玉佩在哪里", 5.0, warnings)
    assert "【剧情记忆】\n- 【额外数据库】沈怀瑾在东门外的石阶上捡到一块玉佩。" in tail
    assert warnings == []


def test_errors_and_blank_queries_give_no_lines(tmp_path: Path) -> None:
    broken = VectorMemory(VectorConfig(enabled=True, embedder="hash"), BrokenStore(tmp_path / "b.sqlite"))
    warnings: list[str] = []
    assert recall_for_turn(broken, "玉佩在哪里", None, warn=warnings.append) == []
    assert "出错" in warnings[0]
    assert recall_for_turn(broken, "   ", None) == []
    assert recall_for_turn(None, "玉佩在哪里", None) == []


def test_branch_ids_are_frozen_before_the_search(memory: VectorMemory) -> None:
    memory.ingest_turn("阿明在东门外的茶摊边捡到一块温润的玉佩。", node_id="a1", branch_ids={"u1", "a1"})
    branch = {"u1", "a1"}
    seen: list[object] = []
    original = memory.recall_for_turn

    def spy(query: str, branch_ids: object, **options: float) -> object:
        seen.append(branch_ids)
        return original(query, branch_ids, **options)  # type: ignore[arg-type]

    memory.recall_for_turn = spy  # type: ignore[method-assign]
    lines = recall_for_turn(memory, "玉佩", branch)
    branch.clear()  # the caller's set changes afterwards (a reroll moved the leaf)
    assert lines and isinstance(seen[0], frozenset) and seen[0] == {"u1", "a1"}


# -- the compaction seam: archive before the summary lands -----------------------------


def compact(tree: SessionTree, memory: VectorMemory) -> CompactionOutcome:
    names = {"user_name": "旅人", "char_name": "阿箬"}
    outcome = run_compaction(tree, ScriptedModel([SUMMARY_REPLY]), CompactionSettings(every_n_turns=3, **names),
                             archive=memory.archive_compacted)
    assert outcome.kind == "compacted" and outcome.plan is not None
    return outcome


STORY_BODY = "沈怀瑾在东门外的石阶上拉琴，小满撑着青伞听。" * 40


def test_compaction_archives_the_covered_text_into_memory(memory: VectorMemory) -> None:
    tree = tree_of(story_turns(1, 10, body=STORY_BODY))
    outcome = compact(tree, memory)
    assert outcome.plan is not None and outcome.plan.covers_through_id == "a-4"
    chunks = memory.list_chunks(NARRATIVE)
    assert chunks and all(c.source == "archive" and c.title == "早期剧情归档" for c in chunks)
    assert {c.node_id for c in chunks} == {"a-4"}
    archived = "\n".join(c.text for c in chunks)
    assert "第1轮用户" in archived and "第5轮用户" not in archived
    lines = recall_for_turn(memory, "第1轮用户说了什么", branch_ids_of(tree.branch()))
    assert lines and lines[0].startswith("- 【早期剧情归档】")
    # On a branch without the anchor the archive stays hidden.
    assert not any("早期剧情归档" in line for line in recall_for_turn(memory, "第1轮用户说了什么", {"elsewhere"}))


def test_a_rewind_past_a_compaction_hides_its_archive_until_it_is_replayed(memory: VectorMemory) -> None:
    tree = tree_of(story_turns(1, 10, body=STORY_BODY))
    compact(tree, memory)
    old_leaf = tree.leaf_id
    query = "第3轮用户说了什么"
    assert any("早期剧情归档" in line for line in recall_for_turn(memory, query, branch_ids_of(tree.branch())))

    # Rewind to turn 2 and play on differently: turns 3 and 4 as archived never happened here.
    tree.navigate("a-2")
    for i in range(3, 11):
        tree.append_message("user", f"第{i}轮用户（另一条线）")
        tree.append_message("assistant", f"第{i}轮回复（另一条线）{STORY_BODY}")
    branch = branch_ids_of(tree.branch())
    assert "a-4" not in branch
    assert all(c.node_id not in branch for c in memory.list_chunks(NARRATIVE, branch_ids=None))
    assert memory.list_chunks(NARRATIVE, branch_ids=branch) == []
    assert not any("早期剧情归档" in line for line in recall_for_turn(memory, query, branch))

    # Compacting the new line archives it again. The chunks holding only turns 1-2 have
    # the same words as before; they are stored again under the new anchor, so the
    # shared early story is recalled on this branch too.
    outcome = compact(tree, memory)
    assert outcome.plan is not None
    branch = branch_ids_of(tree.branch())
    visible = memory.list_chunks(NARRATIVE, branch_ids=branch)
    assert visible and {c.node_id for c in visible} == {outcome.plan.covers_through_id}
    assert any("第1轮用户" in c.text for c in visible)
    assert not any(f"旅人：第{i}轮用户\n" in c.text for c in visible for i in (3, 4))  # the old line's
    # Back on the old line, its own archive shows again and the new one does not.
    old_branch = branch_ids_of(tree.branch(old_leaf))
    assert {c.node_id for c in memory.list_chunks(NARRATIVE, branch_ids=old_branch)} == {"a-4"}


def test_a_failing_archive_does_not_block_compaction(tmp_path: Path) -> None:
    broken = VectorMemory(VectorConfig(enabled=True, embedder="hash"), BrokenStore(tmp_path / "b.sqlite"))

    def archive(text: str) -> int:
        broken.store.snapshot()  # raises, as a broken disk would
        return broken.archive_compacted(text)

    tree = tree_of(story_turns(1, 10))
    outcome = run_compaction(tree, ScriptedModel([SUMMARY_REPLY]),
                             CompactionSettings(every_n_turns=3, user_name="旅人", char_name="阿箬"), archive=archive)
    assert outcome.kind == "compacted"
