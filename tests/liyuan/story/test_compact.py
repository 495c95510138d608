"""Story compaction: active summary, history, serialization (reference 12.1 cases 1-13)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liyuan.clock import counter_ids
from liyuan.compaction import CompactionOutcome, HeldLandings
from liyuan.errors import ConfigError, ModelError
from liyuan.model import Completion, FunctionModel, ModelRequest, ScriptedModel
from liyuan.session.entries import Entry, custom, message
from liyuan.session.tree import SessionTree
from liyuan.story import compact
from liyuan.story.backoff import backoff_wait, compaction_backoff
from liyuan.story.compact import (
    MANUAL_MIN_COMPACT_CHARS,
    Archive,
    CompactionPlan,
    CompactionSettings,
    compact_now,
    plan_compaction,
    run_compaction,
)
from liyuan.story.history import ActiveSummary, HistoryItem, active_summary, rebuild_history, serialize_for_summary
from liyuan.story.view import FailureStreak, failure_streak, story_view
from liyuan.text import utf16_len
from tests.liyuan.branches import BODY, SUMMARY_REPLY, chain, story_turns, summary, tree_of

NAMES = {"user_name": "旅人", "char_name": "阿箬"}
EVERY_3 = CompactionSettings(every_n_turns=3, **NAMES)


def user_texts(items: tuple[HistoryItem, ...]) -> list[str]:
    return [i.text for i in items if i.role == "user"]


# -- case 1-6: active summary and history -----------------------------------------


def test_active_summary_cut_after_anchor() -> None:
    branch = chain(story_turns(1, 3), [summary("s1", "a-3", "摘要一", "a-2")])
    assert active_summary(branch) == ActiveSummary("摘要一", 4, 6)


def test_rebuild_history_slices_covered_prefix() -> None:
    branch = chain(story_turns(1, 3), [summary("s1", "a-3", "摘要一", "a-2")])
    history = rebuild_history(branch)
    assert history.summary == "摘要一"
    assert user_texts(history.items) == ["第3轮用户"]
    assert len(history.items) == 2
    assert not any("第1轮" in i.text or "第2轮" in i.text for i in history.items)


def test_last_summary_wins() -> None:
    branch = chain(
        story_turns(1, 4),
        [summary("s-old", "a-4", "旧摘要", "a-2")],
        story_turns(5, 5, "s-old"),
        [summary("s-new", "a-5", "新摘要", "a-4")],
        story_turns(6, 6, "s-new"),
    )
    history = rebuild_history(branch)
    assert history.summary == "新摘要"
    assert user_texts(history.items) == ["第5轮用户", "第6轮用户"]


def test_legacy_compaction_entry_keeps_from_first_kept() -> None:
    legacy = Entry("c1", "a-3", "compaction", {"summary": "pi 的摘要", "firstKeptEntryId": "u-3"})
    history = rebuild_history(chain(story_turns(1, 3), [legacy]))
    assert history.summary == "pi 的摘要"
    assert user_texts(history.items) == ["第3轮用户"]


def test_later_of_legacy_and_rp_summary_wins() -> None:
    legacy = Entry("c1", "a-3", "compaction", {"summary": "pi 的摘要", "firstKeptEntryId": "u-3"})
    branch = chain(story_turns(1, 3), [summary("s1", "a-3", "我们的摘要", "a-1"), legacy])
    assert active_summary(branch) == ActiveSummary("pi 的摘要", 4, 7)


def test_missing_anchor_drops_everything_before_summary() -> None:
    branch = chain(story_turns(1, 3), [summary("s1", "a-3", "摘要", "no-such-id")])
    history = rebuild_history(branch)
    assert history.summary == "摘要"
    assert history.items == ()


def test_no_summary_keeps_everything() -> None:
    history = rebuild_history(story_turns(1, 2))
    assert history.summary is None
    assert [i.role for i in history.items] == ["user", "assistant", "user", "assistant"]


def test_invalid_summaries_are_skipped_not_fatal() -> None:
    blank = custom("s2", "s1", "rp-summary", {"summary": "   ", "coversThroughId": "a-3"})
    no_anchor = custom("s3", "s2", "rp-summary", {"summary": "x", "coversThroughId": ""})
    not_text = custom("s4", "s3", "rp-summary", {"summary": 42, "coversThroughId": "a-3"})
    branch = chain(story_turns(1, 3), [summary("s1", "a-3", "有效", "a-1"), blank, no_anchor, not_text])
    assert active_summary(branch) == ActiveSummary("有效", 2, 6)


# -- history details -------------------------------------------------------------


def test_history_merges_same_role_and_drops_non_text() -> None:
    branch = [
        message("g", None, "assistant", "开场白", greeting=True),
        message("a0", "g", "assistant", "  ", thinking="想"),
        message("u1", "a0", "user", "你好"),
        message("u1b", "u1", "user", "还在吗"),
        message("a1", "u1b", "assistant", "在。", thinking="内心", toolCalls=[{"name": "x", "args": {}}]),
        message("t1", "a1", "toolResult", "工具回执", toolName="x"),
        custom("st", "t1", "rp-state", {"time": "黄昏"}),
        message("a2", "st", "assistant", "又一句"),
    ]
    history = rebuild_history(branch)
    assert history.items == (
        HistoryItem("assistant", "开场白"),
        HistoryItem("user", "你好\n\n还在吗"),
        HistoryItem("assistant", "在。\n\n又一句"),
    )


def test_story_view_drops_authoring_segments_and_process_entries() -> None:
    branch = [
        message("u1", None, "user", "戏内"),
        message("a1", "u1", "assistant", "回复"),
        custom("m1", "a1", "liyuan-mode", {"mode": "authoring"}),
        message("u2", "m1", "user", "改卡", mode="authoring"),
        message("a2", "u2", "assistant", "卡已改"),
        custom("x2", "a2", "rp-state", {}),
        message("u3", "x2", "user", "回到戏里"),
        message("a3", "u3", "assistant", "继续", mode="agent"),
        message("a4", "a3", "assistant", "戏内回复"),
        custom("p", "a4", "liyuan-process", {}),
    ]
    assert [e.id for e in story_view(branch)] == ["u1", "a1", "u3", "a4"]


def test_story_view_applies_draft_ops() -> None:
    branch = [
        message("u1", None, "user", "早"),
        message("a1", "u1", "assistant", "窗外晨露未干，晨露。"),
        custom("d1", "a1", "rp-draft-op", {"target": "a1", "old": "晨露", "new": "夜霜"}),
        custom("d2", "d1", "rp-draft-op", {"target": "a1", "old": "不存在", "new": "?"}),
    ]
    view = story_view(branch)
    assert [e.id for e in view] == ["u1", "a1"]
    assert view[1].text == "窗外夜霜未干，晨露。"
    whole = [*branch, custom("d3", "d2", "rp-draft-op", {"target": "a1", "new": "重写"})]
    assert story_view(whole)[1].text == "重写"
    assert branch[1].text == "窗外晨露未干，晨露。"  # the input is never mutated


# -- case 12-13: serialization ------------------------------------------------------


def test_serialize_format() -> None:
    branch = [
        message("g", None, "assistant", "欢迎。", greeting=True),
        message("u1", "g", "user", "你好"),
        message("a1", "u1", "assistant", "嗯。"),
    ]
    assert serialize_for_summary(branch, "旅人", "阿箬") == "阿箬：欢迎。\n\n旅人：你好\n\n阿箬：嗯。"


def test_serialize_ignores_old_summary_with_missing_anchor() -> None:
    region = chain([summary("s0", None, "旧摘要正文", "gone")], story_turns(1, 2, "s0", body="身"))
    text = serialize_for_summary(region, "我", "她")
    assert "旧摘要正文" not in text
    assert text == "我：第1轮用户\n\n她：第1轮回复身\n\n我：第2轮用户\n\n她：第2轮回复身"


def test_serialize_applies_draft_patch() -> None:
    region = [
        message("u1", None, "user", "看窗外"),
        message("a1", "u1", "assistant", "窗上结着晨露。"),
        custom("d1", "a1", "rp-draft-op", {"target": "a1", "old": "晨露", "new": "夜霜"}),
    ]
    text = serialize_for_summary(region, "我", "她")
    assert "夜霜" in text
    assert "晨露" not in text


def test_utf16_len_counts_astral_twice() -> None:
    assert utf16_len("云" * 3) == 3
    assert utf16_len("a😀") == 3
    assert utf16_len(BODY) == 800


# -- case 7-11: planning --------------------------------------------------------------


def test_plan_needs_keep_plus_period_turns() -> None:
    assert plan_compaction(story_turns(1, 7), every_n_turns=3, **NAMES) is None
    assert plan_compaction(story_turns(1, 8), every_n_turns=3, **NAMES) is None
    assert plan_compaction(story_turns(1, 9), every_n_turns=3, **NAMES) is not None


def test_plan_covers_all_but_last_six_turns() -> None:
    plan = plan_compaction(story_turns(1, 10), every_n_turns=3, **NAMES)
    assert plan is not None
    assert plan.turns == 4
    assert plan.covers_through_id == "a-4"
    assert [e.id for e in plan.covered][-2:] == ["u-4", "a-4"]
    assert "第4轮用户" in plan.conversation_text
    assert "第5轮" not in plan.conversation_text
    assert plan.previous_summary is None
    assert plan.conversation_text.startswith("旅人：第1轮用户\n\n阿箬：第1轮回复")


def test_plan_char_floor_is_measured_on_serialized_text() -> None:
    assert plan_compaction(story_turns(1, 10, body="x"), every_n_turns=3, min_chars=5000, **NAMES) is None
    plan = plan_compaction(story_turns(1, 10, body="x"), every_n_turns=3, min_chars=1, **NAMES)
    assert plan is not None
    exact = utf16_len(plan.conversation_text)
    assert plan_compaction(story_turns(1, 10, body="x"), every_n_turns=3, min_chars=exact, **NAMES) is not None
    assert plan_compaction(story_turns(1, 10, body="x"), every_n_turns=3, min_chars=exact + 1, **NAMES) is None


def test_plan_zero_or_negative_period_disables() -> None:
    assert plan_compaction(story_turns(1, 30), every_n_turns=0, **NAMES) is None
    assert plan_compaction(story_turns(1, 30), every_n_turns=-5, **NAMES) is None


def test_plan_rejects_keep_below_one() -> None:
    with pytest.raises(ConfigError):
        plan_compaction(story_turns(1, 10), keep=0, **NAMES)


def test_plan_counts_only_turns_after_active_summary() -> None:
    branch = chain(story_turns(1, 12), [summary("s1", "a-12", "旧摘要：1-6 轮。", "a-6")])
    assert plan_compaction(branch, every_n_turns=3, **NAMES) is None
    branch = chain(branch, story_turns(13, 15, "s1"))
    plan = plan_compaction(branch, every_n_turns=3, **NAMES)
    assert plan is not None
    assert plan.previous_summary == "旧摘要：1-6 轮。"
    assert plan.turns == 3
    assert plan.covers_through_id == "a-9"
    assert "第7轮用户" in plan.conversation_text
    assert "第6轮" not in plan.conversation_text
    assert "旧摘要" not in plan.conversation_text


def test_plan_default_first_compaction_covers_thirty_turns() -> None:
    assert plan_compaction(story_turns(1, 35), **NAMES) is None
    plan = plan_compaction(story_turns(1, 36), **NAMES)
    assert plan is not None and plan.turns == 30 and plan.covers_through_id == "a-30"


def test_plan_ignores_authoring_turns() -> None:
    authoring = [message(f"w-{i}", None, "user", "改一下卡", mode="authoring") for i in range(5)]
    assert plan_compaction(chain(story_turns(1, 8), authoring), every_n_turns=3, **NAMES) is None


# -- case 14-18 and beyond: running ---------------------------------------------------


def keep(texts: list[str], anchors: list[str] | None = None) -> Archive:
    """An archive hook that records what it is given."""

    def archive(text: str, covers_through_id: str) -> None:
        texts.append(text)
        if anchors is not None:
            anchors.append(covers_through_id)

    return archive


def summaries(tree: SessionTree) -> list[Entry]:
    return [e for e in tree if e.custom_type == "rp-summary"]


def test_run_compacts_archives_and_appends_once() -> None:
    tree = tree_of(story_turns(1, 10))
    model = ScriptedModel([SUMMARY_REPLY])
    archived: list[str] = []
    anchors: list[str] = []
    lines: list[str] = []
    outcome = run_compaction(tree, model, EVERY_3,
                             archive=keep(archived, anchors), on_activity=lines.append)
    assert outcome.kind == "compacted"
    assert len(tree) == 21
    [entry] = summaries(tree)
    assert entry is outcome.entry and tree.leaf_id == entry.id and entry.parent_id == "a-10"
    assert entry.data["coversThroughId"] == "a-4"
    assert entry.data["turns"] == 4
    assert entry.data["summary"] == SUMMARY_REPLY
    assert entry.data["chars"] == utf16_len(outcome.plan.conversation_text) if outcome.plan else False
    assert entry.data["provenance"] == "scripted"
    assert len(archived) == 1 and "第1轮用户" in archived[0] and "第5轮" not in archived[0]
    assert anchors == ["a-4"]  # the archive learns where the covered text ends (its branch)
    chars = entry.data["chars"]
    assert lines == [f"正在压缩前情（4 轮 · {chars} 字）…",
                     f"前情已压缩：4 轮 {chars} 字 → 摘要 {utf16_len(SUMMARY_REPLY)} 字"]
    assert outcome.message == lines[-1]
    # The prompt carries the covered text and the ledger fallback.
    [call] = model.calls
    assert call.purpose == "summary" and call.max_tokens == 4096
    user = call.messages[1].content
    assert "第4轮用户" in user and "第5轮" not in user and "（尚无记录）" in user
    assert "<previous-summary>" not in user
    # Afterwards the history starts at turn 5 and the summary travels separately.
    history = rebuild_history(tree.branch())
    assert history.summary == SUMMARY_REPLY
    assert history.items[0] == HistoryItem("user", "第5轮用户")


def test_run_skips_when_not_due() -> None:
    tree = tree_of(story_turns(1, 4))
    model = ScriptedModel([SUMMARY_REPLY])
    archived: list[str] = []
    lines: list[str] = []
    outcome = run_compaction(tree, model, EVERY_3, archive=keep(archived),
                             on_activity=lines.append)
    assert (outcome.kind, outcome.reason) == ("skipped", "not-due")
    assert outcome.message == "早期剧情还不够长，暂不需要压缩"
    assert lines == []  # every turn that is not due would otherwise print this line
    assert len(tree) == 8 and archived == [] and model.calls == []


@pytest.mark.parametrize(("move", "why"), [("u-3", "reroll"), ("a-2", "rewind")])
def test_run_stale_when_the_covered_range_leaves_the_branch_during_call(move: str, why: str) -> None:
    # The plan covers turns 1-4 (through a-4). A reroll of turn 3 (the leaf back at its user
    # message, a sibling reply next) or a rewind to turn 2 takes that range off the branch.
    tree = tree_of(story_turns(1, 10))
    archived: list[str] = []

    def move_away(_request: ModelRequest) -> str:
        tree.navigate(move)
        if why == "reroll":
            tree.append_message("assistant", "第3轮的另一条回复")
        return SUMMARY_REPLY

    outcome = run_compaction(tree, FunctionModel(move_away), EVERY_3,
                             archive=keep(archived))
    assert (outcome.kind, outcome.reason) == ("stale", "leaf-moved")
    assert outcome.message == "压缩已丢弃（它盖住的那段已不在当前分支上：重来、回档或改动）"
    assert summaries(tree) == [] and archived == []


def test_run_lands_anchored_at_its_range_when_turns_were_appended_during_call() -> None:
    # The old leaf guard dropped this summary (the leaf moved); its covered range is still
    # the start of the branch, so it lands after the new turns, anchored at a-4.
    tree = tree_of(story_turns(1, 10))

    def meanwhile(_request: ModelRequest) -> str:
        tree.append_message("user", "第11轮用户")
        tree.append_message("assistant", "第11轮回复")
        return SUMMARY_REPLY

    outcome = run_compaction(tree, FunctionModel(meanwhile), EVERY_3)
    assert outcome.kind == "compacted"
    [entry] = summaries(tree)
    assert entry.data["coversThroughId"] == "a-4" and tree.get(entry.parent_id).text == "第11轮回复"
    history = rebuild_history(tree.branch())
    assert history.summary == SUMMARY_REPLY
    assert user_texts(history.items) == [f"第{i}轮用户" for i in range(5, 12)]


def test_run_stale_when_a_covered_reply_is_edited_during_call() -> None:
    tree = tree_of(story_turns(1, 10))

    def edit(_request: ModelRequest) -> str:
        tree.append_custom("rp-draft-op", {"target": "a-2", "new": "第2轮改过的回复"})
        return SUMMARY_REPLY

    outcome = run_compaction(tree, FunctionModel(edit), EVERY_3)
    assert (outcome.kind, outcome.reason) == ("stale", "leaf-moved") and summaries(tree) == []


def test_run_without_hold_drops_a_summary_ready_mid_turn_and_with_hold_lands_it_after_the_reply() -> None:
    for hold in (False, True):
        tree = tree_of(story_turns(1, 10))
        held = HeldLandings()

        def new_turn(_request: ModelRequest, tree: SessionTree = tree) -> str:
            tree.append_message("user", "第11轮用户")  # the next turn starts; no reply yet
            return SUMMARY_REPLY

        outcome = run_compaction(tree, FunctionModel(new_turn), EVERY_3,
                                 hold=held if hold else None)
        assert summaries(tree) == [] and tree.get(tree.leaf_id).text == "第11轮用户"
        if not hold:
            assert (outcome.kind, outcome.reason) == ("stale", "mid-turn") and not held.pending
            continue
        assert outcome.kind == "held" and held.pending
        reply = tree.append_message("assistant", "第11轮回复")
        [landed] = held.land()
        assert landed.kind == "compacted" and landed.entry is not None and landed.entry.parent_id == reply.id
        assert landed.entry.data["coversThroughId"] == "a-4"


def test_run_with_hold_plans_on_the_recorded_turns_while_one_waits_for_its_reply() -> None:
    tree = tree_of(story_turns(1, 10))
    tree.append_message("user", "第11轮用户")
    model = ScriptedModel([SUMMARY_REPLY])
    outcome = run_compaction(tree, model, EVERY_3, hold=HeldLandings())
    assert outcome.kind == "held" and outcome.plan is not None
    assert outcome.plan.covers_through_id == "a-4" and "第11轮" not in outcome.plan.conversation_text


def test_run_stale_when_leaf_moves_while_the_plan_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    # The guard compares against the branch the plan was read from, not the one after planning.
    tree = tree_of(story_turns(1, 10))
    plan = compact.plan_compaction

    def plan_then_rewind(*args: Any, **kwargs: Any) -> Any:
        made = plan(*args, **kwargs)
        tree.navigate("u-3")
        return made

    monkeypatch.setattr(compact, "plan_compaction", plan_then_rewind)
    outcome = run_compaction(tree, ScriptedModel([SUMMARY_REPLY]), EVERY_3)
    assert (outcome.kind, outcome.reason) == ("stale", "leaf-moved")
    assert summaries(tree) == [] and len(tree) == 20


@pytest.mark.parametrize("manual", [False, True])
def test_nothing_is_compacted_while_a_user_message_waits_for_its_reply(manual: bool) -> None:
    # A summary appended mid-turn would sit between the user's words and their reply.
    tree = tree_of(story_turns(1, 10))
    tree.append_message("user", "第11轮用户")
    model = ScriptedModel([SUMMARY_REPLY])
    outcome = compact_now(tree, model, CompactionSettings(**NAMES)) if manual else run_compaction(tree, model,
                                                                                                  EVERY_3)
    assert (outcome.kind, outcome.reason) == ("skipped", "busy")
    assert model.calls == [] and summaries(tree) == [] and len(tree) == 21


def test_run_stale_when_archive_moves_leaf() -> None:
    tree = tree_of(story_turns(1, 10))
    outcome = run_compaction(tree, ScriptedModel([SUMMARY_REPLY]), EVERY_3,
                             archive=lambda _text, _anchor: tree.navigate("a-3"))
    assert outcome.kind == "stale" and summaries(tree) == []


@pytest.mark.parametrize("reply", [ModelError("HTTP 429"), "   \n  "])
def test_run_fails_on_model_error_or_blank_reply(reply: str | ModelError) -> None:
    tree = tree_of(story_turns(1, 10))
    archived: list[str] = []
    outcome = run_compaction(tree, ScriptedModel([reply]), EVERY_3,
                             archive=keep(archived))
    assert outcome.kind == "failed"
    assert "429" in outcome.message or "摘要为空" in outcome.message
    assert summaries(tree) == [] and archived == []


def test_run_swallows_archive_errors() -> None:
    tree = tree_of(story_turns(1, 10))

    def broken(_text: str, _anchor: str) -> None:
        raise RuntimeError("向量库坏了")

    outcome = run_compaction(tree, ScriptedModel([SUMMARY_REPLY]), EVERY_3,
                             archive=broken)
    assert outcome.kind == "compacted" and len(summaries(tree)) == 1


@pytest.mark.parametrize(
    ("reply", "reason", "code"),
    [
        (SUMMARY_REPLY.replace("## 事实账", "## 账目"), "缺少小节「## 事实账」", "invalid-summary"),
        (SUMMARY_REPLY.split("## 当前场景")[0] + "## 当前场景\n", "没有内容", "invalid-summary"),
        # nothing but reasoning: empty, as a discussion summary's empty reply has always been called
        ("<think>先想想</think>", "摘要为空", "empty-summary"),
    ],
)
def test_run_rejects_invalid_summary_and_retries_next_time(reply: str, reason: str, code: str) -> None:
    tree = tree_of(story_turns(1, 10))
    model = ScriptedModel([reply, SUMMARY_REPLY])
    archived: list[str] = []
    outcome = run_compaction(tree, model, EVERY_3, archive=keep(archived))
    assert (outcome.kind, outcome.reason) == ("failed", code)
    assert failures(tree)[-1].data["reason"] == code
    assert outcome.message.startswith("前情摘要拒绝提交：") and reason in outcome.message
    assert summaries(tree) == [] and archived == []
    again = run_compaction(tree, model, EVERY_3, archive=keep(archived))
    assert again.kind == "compacted" and len(archived) == 1


def test_run_strips_reasoning_before_storing() -> None:
    reply = Completion(text="<think>按时间排一下</think>\n" + SUMMARY_REPLY, provenance="model:test")
    tree = tree_of(story_turns(1, 10))
    outcome = run_compaction(tree, FunctionModel(lambda _r: reply), EVERY_3)
    assert outcome.summary == SUMMARY_REPLY
    assert summaries(tree)[0].data["provenance"] == "model:test"


def test_second_compaction_merges_previous_summary() -> None:
    tree = tree_of(story_turns(1, 10))
    model = ScriptedModel([SUMMARY_REPLY, SUMMARY_REPLY.replace("旧伞", "新伞")])
    assert run_compaction(tree, model, EVERY_3).kind == "compacted"
    for i in range(11, 13):
        tree.append_message("user", f"第{i}轮用户")
        tree.append_message("assistant", f"第{i}轮回复{BODY}")
    assert run_compaction(tree, model, EVERY_3).kind == "skipped"
    tree.append_message("user", "第13轮用户")
    tree.append_message("assistant", f"第13轮回复{BODY}")
    outcome = run_compaction(tree, model, EVERY_3)
    assert outcome.kind == "compacted" and outcome.plan is not None
    assert outcome.plan.previous_summary == SUMMARY_REPLY
    user = model.calls[-1].messages[1].content
    assert f"<previous-summary>\n{SUMMARY_REPLY}\n</previous-summary>" in user
    assert "第5轮用户" in user and "第4轮" not in user and "第8轮" not in user
    history = rebuild_history(tree.branch())
    assert history.summary is not None and "新伞" in history.summary
    assert history.items[0] == HistoryItem("user", "第8轮用户")


def test_state_text_reaches_prompt() -> None:
    tree = tree_of(story_turns(1, 10))
    tree.append_custom("rp-state", {"time": "第一天黄昏", "location": "茶馆"})
    model = ScriptedModel([SUMMARY_REPLY])
    run_compaction(tree, model, EVERY_3)
    assert "【工具账本快照】" in model.calls[0].messages[1].content
    assert "时间：第一天黄昏\n地点：茶馆" in model.calls[0].messages[1].content
    model = ScriptedModel([SUMMARY_REPLY])
    run_compaction(tree_of(story_turns(1, 10)), model, EVERY_3, state_text="手写账本")
    assert "手写账本" in model.calls[0].messages[1].content


def test_compact_now_uses_manual_thresholds() -> None:
    short = story_turns(1, 7, body="云" * 500)
    model = ScriptedModel([SUMMARY_REPLY])
    assert run_compaction(tree_of(short), model, CompactionSettings(**NAMES)).kind == "skipped"
    outcome = compact_now(tree_of(short), model, CompactionSettings(**NAMES))
    assert outcome.kind == "compacted" and outcome.plan is not None
    assert outcome.plan.turns == 1 and outcome.plan.covers_through_id == "a-1"
    too_short = story_turns(1, 7, body="云")
    assert utf16_len(serialize_for_summary(too_short[:2], "旅人", "阿箬")) < MANUAL_MIN_COMPACT_CHARS
    assert compact_now(tree_of(too_short), model, CompactionSettings(**NAMES)).kind == "skipped"
    assert compact_now(tree_of(story_turns(1, 6)), model, CompactionSettings(**NAMES)).kind == "skipped"


def test_compact_now_refuses_while_busy() -> None:
    tree = tree_of(story_turns(1, 10))
    model = ScriptedModel([SUMMARY_REPLY])
    lines: list[str] = []
    outcome = compact_now(tree, model, CompactionSettings(**NAMES), busy=True, on_activity=lines.append)
    assert outcome == CompactionOutcome("skipped", "正在演出中，稍后再压缩", None, None, None, "busy")
    assert lines == [outcome.message] and model.calls == [] and len(tree) == 20


def test_reroll_of_triggering_turn_drops_summary_from_branch() -> None:
    tree = tree_of(story_turns(1, 10))
    assert run_compaction(tree, ScriptedModel([SUMMARY_REPLY]), EVERY_3).kind == "compacted"
    tree.navigate("u-10")
    tree.append_message("assistant", "重来的回复")
    assert active_summary(tree.branch()) is None
    assert len(rebuild_history(tree.branch()).items) == 20


# -- properties ---------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=40),
    period=st.integers(min_value=1, max_value=12),
    keep=st.integers(min_value=1, max_value=8),
    body=st.integers(min_value=1, max_value=60),
)
def test_compaction_keeps_exactly_the_last_turns(n: int, period: int, keep: int, body: int) -> None:
    tree = tree_of(story_turns(1, n, body="云" * body))
    outcome = run_compaction(tree, ScriptedModel([SUMMARY_REPLY]),
                             CompactionSettings(every_n_turns=period, keep=keep, min_chars=0, **NAMES))
    if n < keep + period:
        assert outcome.kind == "skipped" and summaries(tree) == []
        return
    assert outcome.kind == "compacted" and outcome.plan is not None
    assert outcome.plan.turns == n - keep
    history = rebuild_history(tree.branch())
    assert user_texts(history.items) == [f"第{i}轮用户" for i in range(n - keep + 1, n + 1)]
    assert history.summary == SUMMARY_REPLY
    # The next compaction is due exactly `period` turns later.
    for i in range(n + 1, n + period + 1):
        assert plan_compaction(tree.branch(), every_n_turns=period, keep=keep, min_chars=0, **NAMES) is None
        tree.append_message("user", f"第{i}轮用户")
        tree.append_message("assistant", f"第{i}轮回复")
    plan = plan_compaction(tree.branch(), every_n_turns=period, keep=keep, min_chars=0, **NAMES)
    assert plan is not None and plan.turns == period and plan.previous_summary == SUMMARY_REPLY
    assert SUMMARY_REPLY not in plan.conversation_text


# -- failure backoff -------------------------------------------------------------------

BAD = SUMMARY_REPLY.replace("## 事实账", "## 账目")
"""A reply that never passes the check (a model with its own heading habit)."""


def play(tree: SessionTree, first: int, last: int) -> None:
    for i in range(first, last + 1):
        tree.append_message("user", f"第{i}轮用户")
        tree.append_message("assistant", f"第{i}轮回复{BODY}")


def failures(tree: SessionTree) -> list[Entry]:
    return [e for e in tree.branch() if e.custom_type == "rp-compact-failed"]


@pytest.mark.parametrize(("count", "wait"), [(0, 0), (1, 0), (2, 0), (3, 30), (4, 60), (5, 120), (9, 120)])
def test_backoff_wait_doubles_and_is_capped(count: int, wait: int) -> None:
    assert backoff_wait(count, 30) == wait


def test_three_failures_back_off_then_retry_after_the_wait(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    tree = tree_of(story_turns(1, 10), path)
    model = ScriptedModel([BAD] * 5)
    lines: list[str] = []
    for turn in range(11, 14):  # three turns, three failed tries
        outcome = run_compaction(tree, model, EVERY_3, on_activity=lines.append)
        assert (outcome.kind, outcome.reason) == ("failed", "invalid-summary")
        play(tree, turn, turn)
    assert len(model.calls) == 3 and len(failures(tree)) == 3
    assert failures(tree)[0].data["reason"] == "invalid-summary" and "事实账" in failures(tree)[0].data["error"]
    # A restart loses nothing: the streak is on the tree.
    tree = SessionTree(path, ids=counter_ids("r"))
    assert compaction_backoff(tree.branch(), every_n_turns=3)[1] == 2  # one turn played since the third failure
    lines.clear()
    outcome = run_compaction(tree, model, EVERY_3, on_activity=lines.append)
    assert (outcome.kind, outcome.reason) == ("skipped", "backoff") and len(model.calls) == 3
    assert outcome.plan is None  # a waiting turn plans nothing
    assert lines == ["前情压缩已连续失败 3 次，自动压缩暂停：再过 2 轮重试（可随时用 /compact 手动压缩）"]
    play(tree, 14, 14)
    assert run_compaction(tree, model, EVERY_3).reason == "backoff"
    play(tree, 15, 15)
    assert run_compaction(tree, model, EVERY_3).reason == "invalid-summary"  # tried again
    assert len(model.calls) == 4 and compaction_backoff(tree.branch(), every_n_turns=3)[1] == 6  # doubled


def test_a_waiting_turn_checks_the_backoff_before_planning(monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tree_of(story_turns(1, 10))
    model = ScriptedModel([BAD] * 3)
    for turn in range(11, 14):
        run_compaction(tree, model, EVERY_3)
        play(tree, turn, turn)
    planned: list[int] = []
    real_plan = compact.plan_compaction

    def counting(*args: Any, **kwargs: Any) -> CompactionPlan | None:
        planned.append(1)
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(compact, "plan_compaction", counting)
    assert run_compaction(tree, model, EVERY_3).reason == "backoff"
    assert planned == []  # the cheap wait check came first
    assert compact_now(tree, ScriptedModel([SUMMARY_REPLY]), CompactionSettings(**NAMES)).kind == "compacted"
    assert planned == [1]  # /compact ignores the wait and plans


def test_a_success_ends_the_streak() -> None:
    tree = tree_of(story_turns(1, 10))
    model = ScriptedModel([BAD, ModelError("HTTP 500"), BAD, SUMMARY_REPLY])
    for turn in range(11, 14):
        run_compaction(tree, model, EVERY_3)
        play(tree, turn, turn)
    assert [e.data["reason"] for e in failures(tree)] == ["invalid-summary", "model-error", "invalid-summary"]
    assert run_compaction(tree, model, EVERY_3).reason == "backoff"
    assert compact_now(tree, model, CompactionSettings(**NAMES)).kind == "compacted"  # /compact ignores the backoff
    assert failure_streak(tree.branch()) == FailureStreak(0, 0)
    assert compaction_backoff(tree.branch(), every_n_turns=3) == (FailureStreak(0, 0), 0)


def test_failure_entries_are_not_story() -> None:
    tree = tree_of(story_turns(1, 10))
    before_view = story_view(tree.branch())
    before_plan = plan_compaction(tree.branch(), every_n_turns=3, **NAMES)
    run_compaction(tree, ScriptedModel([BAD]), EVERY_3)
    [failed] = failures(tree)
    assert tree.leaf_id == failed.id
    assert story_view(tree.branch()) == before_view
    assert plan_compaction(tree.branch(), every_n_turns=3, **NAMES) == before_plan
    assert rebuild_history(tree.branch()) == rebuild_history(tree.branch()[:-1])


def test_a_failure_on_an_abandoned_branch_does_not_count() -> None:
    tree = tree_of(story_turns(1, 10))
    model = ScriptedModel([BAD] * 3)
    for turn in range(11, 14):
        run_compaction(tree, model, EVERY_3)
        play(tree, turn, turn)
    assert failure_streak(tree.branch()).failures == 3
    tree.navigate("a-10")  # rewind to before the failures
    assert failure_streak(tree.branch()) == FailureStreak(0, 0)


def test_a_model_error_while_the_leaf_moved_is_not_recorded() -> None:
    tree = tree_of(story_turns(1, 10))

    def reroll_then_fail(_request: ModelRequest) -> str:
        tree.navigate("u-10")
        raise ModelError("HTTP 502")

    outcome = run_compaction(tree, FunctionModel(reroll_then_fail), EVERY_3)
    assert outcome.reason == "model-error" and [e for e in tree if e.custom_type == "rp-compact-failed"] == []


def test_a_reply_cut_at_the_token_limit_says_so() -> None:
    tree = tree_of(story_turns(1, 10))
    spent = Completion("", reasoning="想了很久", provenance="model:thinker", finish_reason="length")
    outcome = run_compaction(tree, FunctionModel(lambda _r: spent), EVERY_3)
    assert outcome.reason == "empty-summary"
    assert "摘要为空" in outcome.message and "finish_reason=length" in outcome.message
    [failed] = failures(tree)
    assert failed.data["finishReason"] == "length" and failed.data["provenance"] == "model:thinker"


def test_a_tree_that_cannot_note_the_failure_still_does_not_raise(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    tree = tree_of(story_turns(1, 10), path)
    path.unlink()
    path.mkdir()  # every later append fails
    outcome = run_compaction(tree, ScriptedModel([BAD]), EVERY_3)
    assert (outcome.kind, outcome.reason) == ("failed", "invalid-summary") and failures(tree) == []


def test_run_plans_nothing_while_a_summary_it_holds_waits_for_the_reply() -> None:
    # Found by the back-to-back bench: the lane's next run planned on the branch without the
    # held summary and paid a second side call for a summary that was then dropped as stale.
    tree = tree_of(story_turns(1, 10))
    tree.append_message("user", "第11轮用户")
    held = HeldLandings()
    model = ScriptedModel([SUMMARY_REPLY, SUMMARY_REPLY])
    assert run_compaction(tree, model, EVERY_3, hold=held).kind == "held" and held.pending
    again = run_compaction(tree, model, EVERY_3, hold=held)
    assert (again.kind, again.reason) == ("skipped", "busy") and len(model.calls) == 1
    tree.append_message("assistant", "第11轮回复")
    [landed] = held.land()
    assert landed.kind == "compacted" and not held.pending and len(summaries(tree)) == 1
