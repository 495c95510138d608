"""Helpers shared by step handlers: prompt text and provenance lines.

Invariant: nothing here touches the repository or the card; it only formats.
"""

from __future__ import annotations

from ..running.recorder import CallRecord
from ..running.state import ScenarioRun

__all__ = [
    "context_label",
    "prompt_label",
    "prompt_text",
    "resident_text",
]

PROMPT_LINE_SCRIPTED = "（完整 prompt，由 liyuan 代码拼出；里面的对话和前文回复都是人工撰写的示范，不是模型输出）"
PROMPT_LINE_LIVE = "（完整 prompt，由 liyuan 代码拼出；里面的对话是人工撰写的剧本）"
CONTEXT_LINE_SCRIPTED = "（组装出的上下文，由 liyuan 代码拼出；里面的对话和摘要都是人工撰写的示范，不是模型输出）"
CONTEXT_LINE_LIVE = "（组装出的上下文，由 liyuan 代码拼出；对话是人工撰写的剧本）"
PROMPT_LINE_IMPORTED = "（完整 prompt，由 liyuan 代码拼出；里面的对话来自导入的聊天记录）"
CONTEXT_LINE_IMPORTED = "（组装出的上下文，由 liyuan 代码拼出；对话来自导入的聊天记录）"
_PLACEHOLDER_TAIL = "；其中的摘要、复盘和记忆是占位回复，不是模型输出）"


def prompt_text(call: CallRecord) -> str:
    """A recorded request as text: the system part, then the user part."""
    parts = []
    for message in call.request["messages"]:
        parts.append(f"===== {message['role']} =====\n{message['content']}")
    return "\n\n".join(parts)


def prompt_label(run: ScenarioRun) -> str:
    """First line of a prompt txt: who wrote what is inside."""
    if run.scenario.source is not None:
        scripted = run.setup.kind == "scripted"
        return PROMPT_LINE_IMPORTED.removesuffix("）") + _PLACEHOLDER_TAIL if scripted else PROMPT_LINE_IMPORTED
    return PROMPT_LINE_SCRIPTED if run.setup.kind == "scripted" else PROMPT_LINE_LIVE


def context_label(run: ScenarioRun) -> str:
    """First line of an assembled-context txt."""
    if run.scenario.source is not None:
        scripted = run.setup.kind == "scripted"
        return CONTEXT_LINE_IMPORTED.removesuffix("）") + _PLACEHOLDER_TAIL if scripted else CONTEXT_LINE_IMPORTED
    return CONTEXT_LINE_SCRIPTED if run.setup.kind == "scripted" else CONTEXT_LINE_LIVE


def resident_text(run: ScenarioRun) -> str | None:
    """The card's resident summary as stored (:meth:`liyuan.Card.resident_summary`; unfitted)."""
    return run.card.resident_summary()
