"""The side-model contract: what a custom side model must return, the shipped test double
that meets it, and refusals that say what was missing."""

from __future__ import annotations

import pytest

from liyuan import ChatMessage, Completion, ModelError, ModelOutputError, ModelRequest
from liyuan.card.inputs import ChangedRecap, ChatEvidence, SyncSettings
from liyuan.card.merge_check import check_merge
from liyuan.card.prompts import (
    HANDBOOK_MARK,
    RECAP_HEADINGS,
    RESIDENT_HEADING,
    RESIDENT_MARK,
    build_merge_prompt,
    build_recap_prompt,
    validate_recap,
)
from liyuan.story.scribe import SUMMARY_HEADINGS, build_summary_prompt, validate_summary
from liyuan.testing import PLACEHOLDER, placeholder_side_model


def _ask(purpose: str, system: str, user: str) -> Completion:
    request = ModelRequest((ChatMessage("system", system), ChatMessage("user", user)), purpose)
    return placeholder_side_model().complete(request)


def test_the_test_double_meets_the_contract_of_each_validator() -> None:
    summary = build_summary_prompt("阿简：我把伞递给她。\n\n林溯：她没接。", state_text="", previous_summary=None,
                                   language="中文", user_name="阿简")
    reply = _ask("summary", summary.system, summary.user)
    assert validate_summary(reply.text, instructions=summary.system).startswith(SUMMARY_HEADINGS[0])

    recap = build_recap_prompt(ChatEvidence("阿简：我把伞递给她。", 1, 20, ""), chat_name="大雾夜",
                               previous_recap=None, language="中文", user_name="阿简", char_name="林溯")
    checked = validate_recap(_ask("recap", recap.system, recap.user).text, instructions=recap.system)
    assert checked.startswith("# 大雾夜") and all(h in checked for h in RECAP_HEADINGS)

    handbook = "# 记忆\n\n# 局：茶田（jB）\n- 旧块\n来源：局/jB.md\n\n# 局：旧港（jC）\n- 要删\n来源：局/jC.md"
    merge = build_merge_prompt(SyncSettings("阿简", "林溯", "中文"), handbook=handbook,
                               resident=f"{RESIDENT_HEADING}\n- 旧", deleted=["jC"],
                               changed=[ChangedRecap("jA", "大雾夜", checked)])
    merged = check_merge(_ask("merge", merge.system, merge.user), previous_handbook=handbook,
                         previous_resident=f"{RESIDENT_HEADING}\n- 旧", chats={"jA", "jB"}, deleted={"jC"},
                         instructions=merge.system)
    assert "来源：局/jA.md" in merged.handbook and "来源：局/jB.md" in merged.handbook
    assert "jC" not in merged.handbook and merged.resident.startswith(RESIDENT_HEADING)


def test_every_reply_of_the_test_double_says_it_is_not_a_model() -> None:
    for purpose in ("summary", "recap", "merge", "discussion"):
        reply = _ask(purpose, "s", "u")
        assert reply.provenance == "scripted" and PLACEHOLDER in reply.text, purpose
    with pytest.raises(ModelError, match="agent-summary"):
        _ask("agent-summary", "s", "u")


def test_a_plain_text_summary_is_refused_as_having_no_headings_not_as_cut_off() -> None:
    with pytest.raises(ModelOutputError) as info:
        validate_summary("林溯把伞收好，两人在灯塔里等雾散。后来电台修好了。")
    message = str(info.value)
    assert "截断" not in message
    assert "没有一个小节标题" in message and all(h in message for h in SUMMARY_HEADINGS)


def test_a_reply_ending_after_some_sections_names_every_missing_one_as_cut_off() -> None:
    cut = "\n".join(f"{h}\n- 有内容" for h in SUMMARY_HEADINGS[:3])
    with pytest.raises(ModelOutputError) as info:
        validate_summary(cut)
    assert "「## 事实账」「## 当前场景」" in str(info.value) and "截断" in str(info.value)


def test_a_section_missing_in_the_middle_is_named_without_guessing_a_cut() -> None:
    middle = "\n".join(f"{h}\n- 有内容" for h in SUMMARY_HEADINGS if h != "## 人物")
    with pytest.raises(ModelOutputError) as info:
        validate_summary(middle)
    assert "缺少小节「## 人物」" in str(info.value) and "截断" not in str(info.value)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (f"# 手册\n{RESIDENT_MARK}\n{RESIDENT_HEADING}", f"缺少标记行「{HANDBOOK_MARK}」"),
        (f"{HANDBOOK_MARK}\n# 手册", f"缺少标记行「{RESIDENT_MARK}」"),
        (f"{RESIDENT_MARK}\n{RESIDENT_HEADING}\n{HANDBOOK_MARK}\n# 手册", "顺序颠倒"),
        (f"{HANDBOOK_MARK}\n# 手册\n{HANDBOOK_MARK}\n{RESIDENT_MARK}\n{RESIDENT_HEADING}", "出现了 2 次"),
        (f"{HANDBOOK_MARK}\n\n{RESIDENT_MARK}\n{RESIDENT_HEADING}", "记忆.md 一份是空的"),
        ("好的，这是合并后的手册。", "两行标记"),
    ],
)
def test_a_malformed_merge_says_what_is_wrong(reply: str, reason: str) -> None:
    with pytest.raises(ModelOutputError) as info:
        check_merge(Completion(text=reply), previous_handbook=None, previous_resident=None, chats={"jA"},
                    deleted=())
    assert reason in str(info.value)
