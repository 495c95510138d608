"""The relay-summary prompt and the validation of its reply."""

from __future__ import annotations

import pytest

from liyuan.errors import ModelOutputError
from liyuan.scribe import SUMMARY_HEADINGS, build_summary_prompt, validate_summary

from .beats import SUMMARY_REPLY


def prompt(previous: str | None = None, state: str = "（尚无记录）"):
    return build_summary_prompt("旅人：你好\n\n阿箬：嗯。", state_text=state, previous_summary=previous,
                                language="中文", user_name="旅人")


def test_system_prompt_lists_five_headings_in_order() -> None:
    system = prompt().system
    positions = [system.index(h + "\n") for h in SUMMARY_HEADINGS]
    assert positions == sorted(positions)
    assert "请用中文写" in system
    assert "宁多勿漏" in system
    assert "**最新**" in system
    assert "称呼旅人" in system
    assert "{{" not in system and "{%" not in system


def test_user_text_first_summary() -> None:
    p = prompt(state="时间：黄昏")
    assert p.purpose == "summary" and p.max_tokens == 4096
    assert (p.system_template, p.user_template) == ("summary_system.j2", "summary_user.j2")
    parts = p.user.split("\n\n")
    assert p.user.startswith("<conversation>\n旅人：你好\n\n阿箬：嗯。\n</conversation>\n\n【工具账本快照】")
    assert "<previous-summary>" not in p.user
    assert "以对话记录为准" in p.user
    assert parts[-2].endswith("\n时间：黄昏")
    assert parts[-1] == "请照系统提示里的五节格式，写出这份接力摘要。"


def test_user_text_incremental_summary() -> None:
    p = prompt(previous="## 前情提要\n旧事")
    assert "</conversation>\n\n<previous-summary>\n## 前情提要\n旧事\n</previous-summary>\n\n（" in p.user
    note = p.user.split("</previous-summary>\n\n")[1].split("\n\n")[0]
    assert note.startswith("（") and note.endswith("）") and "一条都不能丢" in note
    assert p.user.index("<previous-summary>") < p.user.index("【工具账本快照】")
    assert "<previous-summary>" not in prompt(previous="   ").user


def test_request_has_system_then_user() -> None:
    request = prompt().request()
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.purpose == "summary"


def test_validate_accepts_and_cleans() -> None:
    assert validate_summary(SUMMARY_REPLY) == SUMMARY_REPLY
    chatty = "好的，以下是摘要：\n\n" + SUMMARY_REPLY + "\n\n"
    assert validate_summary(chatty) == SUMMARY_REPLY
    assert validate_summary("<think>梳理一下人物</think>\n" + SUMMARY_REPLY) == SUMMARY_REPLY
    assert validate_summary("```markdown\n" + SUMMARY_REPLY + "\n```") == SUMMARY_REPLY
    with_sub = SUMMARY_REPLY.replace("## 人物\n", "## 人物\n### 阿箬\n")
    assert validate_summary(with_sub) == with_sub


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "摘要为空"),
        ("  \n ", "摘要为空"),
        ("<think>还没想完", "摘要为空"),
        (SUMMARY_REPLY.replace("## 人物", "## 角色"), "缺少小节「## 人物」"),
        (SUMMARY_REPLY.split("## 事实账")[0], "缺少小节「## 事实账」"),
        (SUMMARY_REPLY + "\n\n## 人物\n又一段", "出现了 2 次"),
        (SUMMARY_REPLY.replace("## 前情提要", "## X").replace("## 当前场景", "## 前情提要")
         .replace("## X", "## 当前场景"), "顺序不对"),
        (SUMMARY_REPLY.replace("阿箬答应明早带路。", "").replace("- ", ""), "「## 承诺与伏笔」没有内容"),
        ("前情提要\n人物\n承诺与伏笔\n事实账\n当前场景", "缺少小节"),
    ],
)
def test_validate_rejects(reply: str, reason: str) -> None:
    with pytest.raises(ModelOutputError) as info:
        validate_summary(reply)
    assert reason in str(info.value)


def test_heading_must_be_its_own_line() -> None:
    inline = SUMMARY_REPLY.replace("## 当前场景\n", "见 ## 当前场景 如下\n")
    with pytest.raises(ModelOutputError, match="当前场景"):
        validate_summary(inline)
