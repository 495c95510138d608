"""Story compaction: active summary, history, serialization (reference 12.1 cases 1-13)."""

from __future__ import annotations

from liyuan.compact import (
    ActiveSummary,
    HistoryItem,
    active_summary,
    rebuild_history,
    serialize_for_summary,
    story_view,
    utf16_len,
)
from liyuan.tree import Entry, custom, message

from .beats import BODY, beats, chain, summary


def user_texts(items: tuple[HistoryItem, ...]) -> list[str]:
    return [i.text for i in items if i.role == "user"]


# -- case 1-6: active summary and history -----------------------------------------


def test_active_summary_cut_after_anchor() -> None:
    branch = chain(beats(1, 3), [summary("s1", "a-3", "摘要一", "a-2")])
    assert active_summary(branch) == ActiveSummary("摘要一", 4, 6)


def test_rebuild_history_slices_covered_prefix() -> None:
    branch = chain(beats(1, 3), [summary("s1", "a-3", "摘要一", "a-2")])
    history = rebuild_history(branch)
    assert history.summary == "摘要一"
    assert user_texts(history.items) == ["第3拍用户"]
    assert len(history.items) == 2
    assert not any("第1拍" in i.text or "第2拍" in i.text for i in history.items)


def test_last_summary_wins() -> None:
    branch = chain(
        beats(1, 4),
        [summary("s-old", "a-4", "旧摘要", "a-2")],
        beats(5, 5, "s-old"),
        [summary("s-new", "a-5", "新摘要", "a-4")],
        beats(6, 6, "s-new"),
    )
    history = rebuild_history(branch)
    assert history.summary == "新摘要"
    assert user_texts(history.items) == ["第5拍用户", "第6拍用户"]


def test_legacy_compaction_entry_keeps_from_first_kept() -> None:
    legacy = Entry("c1", "a-3", "compaction", {"summary": "pi 的摘要", "firstKeptEntryId": "u-3"})
    history = rebuild_history(chain(beats(1, 3), [legacy]))
    assert history.summary == "pi 的摘要"
    assert user_texts(history.items) == ["第3拍用户"]


def test_later_of_legacy_and_rp_summary_wins() -> None:
    legacy = Entry("c1", "a-3", "compaction", {"summary": "pi 的摘要", "firstKeptEntryId": "u-3"})
    branch = chain(beats(1, 3), [summary("s1", "a-3", "我们的摘要", "a-1"), legacy])
    assert active_summary(branch) == ActiveSummary("pi 的摘要", 4, 7)


def test_missing_anchor_drops_everything_before_summary() -> None:
    branch = chain(beats(1, 3), [summary("s1", "a-3", "摘要", "no-such-id")])
    history = rebuild_history(branch)
    assert history.summary == "摘要"
    assert history.items == ()


def test_no_summary_keeps_everything() -> None:
    history = rebuild_history(beats(1, 2))
    assert history.summary is None
    assert [i.role for i in history.items] == ["user", "assistant", "user", "assistant"]


def test_invalid_summaries_are_skipped_not_fatal() -> None:
    blank = custom("s2", "s1", "rp-summary", {"summary": "   ", "coversThroughId": "a-3"})
    no_anchor = custom("s3", "s2", "rp-summary", {"summary": "x", "coversThroughId": ""})
    not_text = custom("s4", "s3", "rp-summary", {"summary": 42, "coversThroughId": "a-3"})
    branch = chain(beats(1, 3), [summary("s1", "a-3", "有效", "a-1"), blank, no_anchor, not_text])
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
    region = chain([summary("s0", None, "旧摘要正文", "gone")], beats(1, 2, "s0", body="身"))
    text = serialize_for_summary(region, "我", "她")
    assert "旧摘要正文" not in text
    assert text == "我：第1拍用户\n\n她：第1拍回复身\n\n我：第2拍用户\n\n她：第2拍回复身"


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
