"""Reading only the live part of a branch gives exactly what the whole branch gives.

:func:`liyuan.story.history.rebuild_history` and :func:`liyuan.story.compact.plan_compaction` start
from :func:`liyuan.story.view.live_start`. The reference here is the same code with that
shortcut switched off (``live_start`` returning 0: the whole branch is read, as before
the change), plus an independent, dictionary-based :func:`active_summary`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liyuan.context.assemble import build_context
from liyuan.session.branch import BranchView
from liyuan.session.entries import Entry, custom, message
from liyuan.session.tree import SessionTree
from liyuan.story.compact import plan_compaction
from liyuan.story.history import ActiveSummary, active_summary, rebuild_history
from liyuan.story.view import live_start, story_view
from tests.liyuan.branches import Recording, chain, story_turns, summary

NAMES = {"user_name": "旅人", "char_name": "阿箬"}
TEXTS = ["", "  ", "甲", "乙乙", "丙" * 30, "丁😀"]


@contextmanager
def whole_branch() -> Iterator[None]:
    """The reference: the same functions, reading the whole branch."""
    with patch("liyuan.story.history.live_start", lambda _branch, _skip=(): 0):
        yield


def reference_active_summary(branch: Sequence[Entry]) -> ActiveSummary | None:
    """The original lookup: one id -> position map of the whole branch."""
    position = {entry.id: i for i, entry in enumerate(branch)}
    for index in range(len(branch) - 1, -1, -1):
        entry = branch[index]
        if entry.type == "custom" and entry.custom_type == "rp-summary":
            text, anchor = entry.data.get("summary"), entry.data.get("coversThroughId")
            if not (isinstance(text, str) and text.strip()) or not isinstance(anchor, str) or not anchor:
                continue
            return ActiveSummary(text, position[anchor] + 1 if anchor in position else index, index)
        if entry.type == "compaction":
            text, first = entry.body.get("summary"), entry.body.get("firstKeptEntryId")
            if not (isinstance(text, str) and text.strip()) or not isinstance(first, str) or not first:
                continue
            return ActiveSummary(text, position.get(first, index), index)
    return None


@st.composite
def branches(draw: st.DrawFn) -> list[Entry]:
    """Random branches: story and authoring turns, ledger and process entries, draft ops
    aimed anywhere (earlier, later, nowhere), valid and broken summaries of both kinds with
    anchors anywhere, and the odd repeated id."""
    size = draw(st.integers(min_value=0, max_value=45))
    entries: list[Entry] = []

    def some_id(i: int) -> str:
        return draw(st.one_of(st.sampled_from([f"e{j}" for j in range(max(i, 1))]),
                              st.sampled_from([f"e{j}" for j in range(i, size + 2)]),
                              st.sampled_from(["nowhere", ""])))

    for i in range(size):
        entry_id = f"e{i}" if draw(st.integers(0, 19)) or i == 0 else f"e{draw(st.integers(0, i - 1))}"
        kind = draw(st.sampled_from(["user"] * 5 + ["assistant"] * 5 + ["tool", "state", "process", "draft",
                                                                         "summary", "summary", "legacy"]))
        text = draw(st.sampled_from(TEXTS))
        if kind == "user":
            mode = draw(st.sampled_from([None, None, None, "roleplay", "authoring", "agent"]))
            entries.append(message(entry_id, None, "user", text, **({"mode": mode} if mode else {})))
        elif kind == "assistant":
            mode = draw(st.sampled_from([None, None, None, "authoring"]))
            entries.append(message(entry_id, None, "assistant", text, **({"mode": mode} if mode else {})))
        elif kind == "tool":
            entries.append(message(entry_id, None, "toolResult", text, toolName="read"))
        elif kind == "state":
            entries.append(custom(entry_id, None, "rp-state", {"time": text}))
        elif kind == "process":
            entries.append(custom(entry_id, None, "liyuan-mode", {"mode": "authoring"}))
        elif kind == "draft":
            op: dict[str, Any] = {"target": some_id(i), "new": draw(st.sampled_from(["戊", "", 3]))}
            old = draw(st.sampled_from([None, "", "甲", "乙", "不在"]))
            if old is not None:
                op["old"] = old
            entries.append(custom(entry_id, None, "rp-draft-op", op))
        elif kind == "summary":
            words = draw(st.sampled_from(["摘要", "摘要", "  ", None]))
            entries.append(custom(entry_id, None, "rp-summary", {"summary": words, "coversThroughId": some_id(i)}))
        else:
            entries.append(Entry(entry_id, None, "compaction", {"summary": draw(st.sampled_from(["旧摘要", ""])),
                                                                 "firstKeptEntryId": some_id(i)}))
    return entries


@pytest.mark.slow
@settings(max_examples=250, deadline=None)
@given(branches())
def test_active_summary_matches_the_position_map(branch: list[Entry]) -> None:
    assert active_summary(branch) == reference_active_summary(branch)
    view = story_view(branch)
    assert active_summary(view) == reference_active_summary(view)


@pytest.mark.slow
@settings(max_examples=250, deadline=None)
@given(branches())
def test_story_view_of_a_slice_from_a_user_message_is_a_suffix(branch: list[Entry]) -> None:
    whole = story_view(branch)
    for i, entry in enumerate(branch):
        if entry.type == "message" and entry.role == "user":
            # Membership never depends on later entries, so the prefix's view has the right length.
            assert story_view(branch[i:]) == whole[len(story_view(branch[:i])):]


@pytest.mark.slow
@settings(max_examples=250, deadline=None)
@given(branches(), st.integers(1, 3), st.integers(0, 3), st.sampled_from([0, 5, 60]))
def test_history_and_plan_read_from_the_live_part_equal_the_whole_branch(
    branch: list[Entry], keep: int, period: int, min_chars: int,
) -> None:
    options = {"keep": keep, "every_n_turns": period, "min_chars": min_chars, **NAMES}
    fast = (rebuild_history(branch), plan_compaction(branch, **options),
            rebuild_history(BranchView(list(branch))), build_context(branch, "新的一句"))
    with whole_branch():
        slow = (rebuild_history(branch), plan_compaction(branch, **options),
                rebuild_history(branch), build_context(branch, "新的一句"))
    assert fast == slow


@st.composite
def played_trees(draw: st.DrawFn) -> SessionTree:
    """A tree grown turn by turn with compactions, ledger entries, draft ops and rerolls."""
    counter = iter(range(10_000))
    tree = SessionTree(None, ids=lambda: f"n{next(counter)}")
    tree.append_message("assistant", "开场", greeting=True)
    for _ in range(draw(st.integers(0, 60))):
        move = draw(st.sampled_from(["turn"] * 6 + ["authoring", "draft", "summary", "reroll", "rewind"]))
        branch = tree.branch()
        if move == "turn":
            tree.append_message("user", draw(st.sampled_from(TEXTS)))
            tree.append_message("assistant", draw(st.sampled_from(TEXTS)))
            tree.append_custom("rp-state", {"time": "夜"})
        elif move == "authoring":
            tree.append_message("user", "改一下设定", mode="authoring")
            tree.append_message("assistant", "好", mode="authoring")
        elif move == "draft":
            replies = [e.id for e in branch if e.role == "assistant"]
            tree.append_custom("rp-draft-op", {"target": draw(st.sampled_from(replies)), "new": "改过的回复"})
        elif move == "summary" and len(branch) > 2:
            anchor = branch[draw(st.integers(0, len(branch) - 2))].id
            tree.append_custom("rp-summary", {"summary": "接力摘要", "coversThroughId": anchor})
        elif move in ("reroll", "rewind"):
            users = [e.id for e in branch if e.role == "user"]
            if users:
                tree.navigate(users[-1] if move == "reroll" else draw(st.sampled_from(users)))
    return tree


@settings(max_examples=200, deadline=None)
@given(played_trees(), st.integers(1, 3), st.integers(1, 3))
def test_on_a_played_tree_the_view_and_the_whole_branch_agree(tree: SessionTree, keep: int, period: int) -> None:
    branch = tree.branch()
    options = {"keep": keep, "every_n_turns": period, "min_chars": 0, **NAMES}
    fast = (rebuild_history(branch), plan_compaction(branch, **options))
    with whole_branch():
        assert fast == (rebuild_history(list(branch)), plan_compaction(list(branch), **options))


def long_branch(compactions: int) -> list[Entry]:
    """Turns of 30 turns, each closed by a summary covering all but the last six turns."""
    branch = story_turns(1, 6, body="。")
    for n in range(compactions):
        first = 7 + 30 * n
        branch = chain(branch, story_turns(first, first + 29, branch[-1].id, body="。"))
        branch.append(summary(f"s{n}", branch[-1].id, f"第{n + 1}份摘要", f"a-{first + 23}"))
    return chain(branch, story_turns(10_000, 10_003, branch[-1].id, body="。"))


def test_only_the_live_part_is_read_however_long_the_branch() -> None:
    for compactions in (1, 10, 60):
        branch = long_branch(compactions)
        # The live part opens with the user turn of the last summary's anchor.
        anchor = [e.id for e in branch].index(branch[-9].data["coversThroughId"])
        assert branch[anchor].role == "assistant" and branch[anchor - 1].role == "user"
        assert len(branch) - anchor == 22  # six kept turns, the summary, four more turns, the anchor
        for read in (rebuild_history, lambda b: plan_compaction(b, min_chars=0, **NAMES),
                     lambda b: build_context(b, "再来")):
            recording = Recording(branch)
            result = read(recording)
            with whole_branch():
                assert result == read(branch)
            assert recording.lowest == anchor - 1, (compactions, recording.lowest)
        assert live_start(branch) == anchor - 1


def test_a_summary_hidden_in_an_authoring_segment_falls_back_to_the_one_before() -> None:
    # The latest summary sits in an authoring segment, so the story view never sees it;
    # the one that counts lies inside the slice the shortcut reads, but its anchor lies
    # before it: only the whole branch can say where its cut is.
    branch = chain(
        story_turns(1, 5),
        [summary("s-story", "a-5", "剧情里的摘要", "a-2"),
         message("w", "s-story", "user", "先聊设定", mode="authoring"),
         summary("s-hidden", "w", "设定段里的摘要", "a-5")],
    )
    assert branch[live_start(branch)].id == "u-5"
    history = rebuild_history(branch)
    with whole_branch():
        assert history == rebuild_history(branch)
    assert history.summary == "剧情里的摘要"
    assert [i.text[:4] for i in history.items if i.role == "user"] == ["第3轮用", "第4轮用", "第5轮用"]


def test_a_draft_op_revises_only_replies_written_before_it() -> None:
    branch = [
        message("u1", None, "user", "看窗外"),
        custom("d-early", "u1", "rp-draft-op", {"target": "a1", "old": "晨露", "new": "早到的修订"}),
        message("a1", "d-early", "assistant", "窗上结着晨露。"),
        custom("d-late", "a1", "rp-draft-op", {"target": "a1", "old": "晨露", "new": "夜霜"}),
    ]
    assert [e.text for e in story_view(branch)] == ["看窗外", "窗上结着夜霜。"]
    assert [e.text for e in story_view(branch[:3])] == ["看窗外", "窗上结着晨露。"]
