"""Context assembly: the 【前情提要】 message, kept history, and the tail."""

from __future__ import annotations

from typing import Any

import pytest

from liyuan.context.assemble import SUMMARY_OPENING, Injection, build_context
from liyuan.context.inputs import AppBlocks
from liyuan.model import ChatMessage
from liyuan.session.entries import custom, message
from tests.liyuan.branches import chain, story_turns, summary

U, A = "user", "assistant"


def roles(messages: list[ChatMessage]) -> list[str]:
    return [m.role for m in messages]


def test_no_summary_plain_history_then_tail() -> None:
    msgs = build_context(story_turns(1, 2, body="。"), "第3轮用户", injection="【世界状态】\n（尚无记录）")
    assert roles(msgs) == [U, A, U, A, U]
    assert msgs[0].content == "第1轮用户"
    assert msgs[-1].content == "【世界状态】\n（尚无记录）\n\n第3轮用户"
    assert not any(m.content.startswith("【前情提要】") for m in msgs)


def test_summary_message_replaces_covered_history() -> None:
    branch = chain(story_turns(1, 3, body="。"), [summary("s1", "a-3", "五节摘要", "a-2")])
    msgs = build_context(branch, "新的一句", injection="【世界状态】\n时间：黄昏")
    assert roles(msgs) == [U, U, A, U]
    assert msgs[0].content == f"{SUMMARY_OPENING}\n\n五节摘要"
    assert msgs[1].content == "第3轮用户"
    assert msgs[2].content == "第3轮回复。"
    assert msgs[3].content == "【世界状态】\n时间：黄昏\n\n新的一句"
    joined = "\n".join(m.content for m in msgs)
    assert "第1轮" not in joined and "第2轮" not in joined
    assert sum(m.content.count(SUMMARY_OPENING) for m in msgs) == 1


def test_in_session_summary_then_resident_summary() -> None:
    branch = chain(story_turns(1, 2, body="。"), [summary("s1", "a-2", "本局摘要", "a-2")])
    msgs = build_context(branch, "你好", resident_summary="# 往局记忆（同一世界更早的几局）\n旧事")
    assert msgs == [
        ChatMessage(U, f"{SUMMARY_OPENING}\n\n本局摘要\n\n# 往局记忆（同一世界更早的几局）\n旧事"),
        ChatMessage(U, "你好"),
    ]


def test_resident_summary_alone_opens_new_chat() -> None:
    greeting = message("g", None, A, "欢迎光临。", greeting=True)
    msgs = build_context([greeting], "我进门了", resident_summary="往局的事")
    assert msgs == [
        ChatMessage(U, f"{SUMMARY_OPENING}\n\n往局的事"),
        ChatMessage(A, "欢迎光临。"),
        ChatMessage(U, "我进门了"),
    ]


def test_regenerate_uses_persisted_user_message() -> None:
    branch = chain(story_turns(1, 1, body="。"), [message("u-2", "a-1", U, "再来一次")])
    msgs = build_context(branch, "", injection=Injection(state_text="时间：夜"))
    assert msgs[-1] == ChatMessage(U, "【世界状态】\n时间：夜\n\n再来一次")
    assert roles(msgs) == [U, A, U]


def test_no_trailing_assistant_and_same_roles_merged() -> None:
    branch = [message("u1", None, U, "甲"), message("u2", "u1", U, "乙"), message("a1", "u2", A, "丙")]
    assert build_context(branch, "") == [ChatMessage(U, "甲\n\n乙")]
    assert build_context([message("g", None, A, "开场")], "") == []


def test_injection_order_and_empty_blocks() -> None:
    injection = Injection(
        state_text="时间：黄昏",
        roster="人物：阿箬",
        lore_index="茶馆；渡口",
        recall_lines=["- 【剧情数据库】旧伞", "  ", "- 【早期剧情归档】渡口"],
        extra=["【语言】中文", ""],
    )
    assert injection.render() == (
        "【世界状态】\n时间：黄昏\n\n【登场名录】\n人物：阿箬\n\n【设定集索引】\n茶馆；渡口\n\n"
        "【剧情记忆】\n- 【剧情数据库】旧伞\n- 【早期剧情归档】渡口\n\n【语言】中文"
    )
    assert Injection(state_text="（尚无记录）").render() == "【世界状态】\n（尚无记录）"
    assert "【剧情记忆】" not in Injection(state_text="x", recall_lines=()).render()
    assert Injection(state_text="").render() == ""


def test_user_words_come_last_after_injection() -> None:
    injection = Injection(state_text="时间：黄昏", recall_lines=["- 旧伞"])
    msgs = build_context(story_turns(1, 1, body="。"), "那把伞呢？", injection=injection)
    assert msgs[-1].content.endswith("\n\n那把伞呢？")
    assert msgs[-1].content.index("【剧情记忆】") < msgs[-1].content.index("那把伞呢？")


def test_custom_and_tool_entries_never_reach_context() -> None:
    branch = [
        message("u1", None, U, "看看"),
        message("a1", "u1", A, "好", thinking="秘密思考", toolCalls=[{"name": "roll", "args": {}}]),
        message("t1", "a1", "toolResult", "掷出 6", toolName="roll"),
        custom("st", "t1", "rp-state", {"time": "夜"}),
    ]
    joined = "\n".join(m.content for m in build_context(branch, "继续"))
    assert "秘密思考" not in joined and "掷出" not in joined and "roll" not in joined


def test_doc_snippet_sections_exist_and_are_not_empty() -> None:
    """The docs include these named sections; a rename or a lost marker must fail here too."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "liyuan"
    wanted = {
        "story/history.py": ["active_summary"],
        "story/compact.py": ["plan_compaction", "plan_rule", "run_compaction"],
        "compaction.py": ["leaf_guard"],
        "context/assemble.py": ["build_context", "recall_block"],
        "context/budget.py": ["fit_resident_summary", "fit_rule"],
        "discussion/compact.py": ["plan_discussion_compaction", "discussion_rule"],
    }
    for name, sections in wanted.items():
        text = (root / name).read_text("utf-8")
        for section in sections:
            found = re.findall(rf"# --8<-- \[start:{section}\]\n(.*?)# --8<-- \[end:{section}\]", text, re.DOTALL)
            assert len(found) == 1 and found[0].strip(), (name, section)


# -- prepare_turn: the resident summary fitted to the shared budget, one history read ---

RESIDENT = "# 往局记忆\n\n" + "\n\n".join(f"## 第{i}节\n" + "往局里的一件事。" * 20 for i in range(1, 9))
"""A hand-written resident summary over the 1200 cap."""


def test_prepare_turn_fits_the_resident_summary_like_a_careful_caller() -> None:
    from liyuan.context.assemble import prepare_turn
    from liyuan.context.budget import fit_resident_summary, other_chars_for
    from liyuan.story.history import rebuild_history

    short = chain(story_turns(1, 3, body="。"), [summary("s1", "a-3", "五节摘要", "a-2")])
    long = chain(story_turns(1, 3, body="。"), [summary("s1", "a-3", "很长的摘要。" * 600, "a-2")])
    for branch in (story_turns(1, 2, body="。"), short, long):
        for resident in (None, "短的常驻摘要", RESIDENT):
            state, roster = "时间：黄昏\n地点：茶馆", "- 阿箬：茶馆伙计"
            fitted = fit_resident_summary(resident, other_chars_for(rebuild_history(branch).summary, state, roster))
            expected = build_context(branch, "新的一句", resident_summary=fitted,
                                     injection=Injection(state_text=state, roster=roster, recall_lines=["- 旧事"]))
            got = prepare_turn(branch, "新的一句", resident_summary=resident, blocks=AppBlocks(state, roster=roster),
                               recall_lines=["- 旧事"]).messages
            assert got == expected


def test_prepare_turn_cuts_or_drops_the_resident_summary() -> None:
    from liyuan.context.assemble import prepare_turn
    from liyuan.context.budget import OMITTED_MARKER, RESIDENT_MAX_CHARS

    plain = prepare_turn(story_turns(1, 2, body="。"), "新的一句", resident_summary=RESIDENT,
                         blocks=AppBlocks("（尚无记录）"))
    assert plain.resident is not None and plain.resident.endswith(OMITTED_MARKER)
    assert len(plain.resident) <= RESIDENT_MAX_CHARS and plain.resident in plain.messages[0].content
    crowded = chain(story_turns(1, 3, body="。"), [summary("s1", "a-3", "很长的摘要。" * 700, "a-2")])
    turn = prepare_turn(crowded, "新的一句", resident_summary=RESIDENT, blocks=AppBlocks("（尚无记录）"))
    assert turn.resident is None and "往局记忆" not in turn.messages[0].content
    assert turn.summary is not None and turn.summary in turn.messages[0].content


def test_prepare_turn_reads_the_history_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import liyuan.context.assemble as assemble
    from liyuan.story.history import story_tail

    reads: list[int] = []

    def counting(branch: Any) -> Any:
        reads.append(len(branch))
        return story_tail(branch)

    # One story read gives the history, the summary and the turn record's sources.
    monkeypatch.setattr(assemble, "story_tail", counting)
    branch = chain(story_turns(1, 3, body="。"), [summary("s1", "a-3", "五节摘要", "a-2")])
    assemble.prepare_turn(branch, "新的一句", resident_summary=RESIDENT, blocks=AppBlocks("（尚无记录）"))
    assert reads == [len(branch)]
