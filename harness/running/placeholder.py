"""Placeholder replies for imported chats run with the scripted model.

An imported chat has no hand-written side-model replies, yet ``harness run NAME
--model scripted`` must go through it to show where the memory compacts and what it
sends. This backend answers each call with a document of the required shape whose
every section says it is a placeholder, not model output, so the step can go on; the
artifacts carry :data:`PLACEHOLDER_LINE` as their first line.

Invariant: a placeholder passes only the structure checks a step needs to go on (the
five summary sections, the recap's title and sections, the merge's two marks), says in
each section that no model wrote it, and is the same for the same call every time
(artifacts stay byte-stable). A purpose it does not know is a missing reply, as with
scripted reply files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from liyuan.card.prompts import HANDBOOK_MARK, RECAP_HEADINGS, RESIDENT_HEADING, RESIDENT_MARK
from liyuan.model import Completion, ModelRequest
from liyuan.story.scribe import SUMMARY_HEADINGS

from .recorder import MissingReply

__all__ = ["PLACEHOLDER", "PLACEHOLDER_LINE", "PlaceholderBackend", "placeholder_text"]

PLACEHOLDER = "placeholder"
"""Provenance of a placeholder reply."""
PLACEHOLDER_LINE = "（占位回复：导入的聊天没有手写回复，这是框架按格式填的占位，不是模型输出）"

_SECTION = "（占位：这一节不是模型输出。导入的聊天用 --model scripted 运行时没有模型来写；" \
           "用 --model openai:<模型名> 运行，由真实模型写进 sim/runs/<模型>/。）"


def _sections(headings: tuple[str, ...]) -> str:
    return "\n\n".join(f"{heading}\n{_SECTION}" for heading in headings)


def _merge_blocks(prompt: str) -> str:
    """One placeholder block per chat the merge must keep: the changed recaps' and the
    handbook's chats, less the deleted ones (the merge check refuses a lost chat block)."""
    deleted = set(re.findall(r"^- 局/([A-Za-z0-9_-]+)\.md(?:（.*）)?$", prompt, re.M))
    chats = dict(re.findall(r'<recap chat-id="([^"]+)" chat-name="([^"]*)">', prompt))
    for chat_id in re.findall(r"^来源：局/([A-Za-z0-9_-]+)\.md$", prompt, re.M):
        chats.setdefault(chat_id, chat_id)
    return "\n\n".join(f"# 局：{name}（{chat_id}）\n{_SECTION}\n来源：局/{chat_id}.md"
                         for chat_id, name in sorted(chats.items()) if chat_id not in deleted)


def placeholder_text(purpose: str, prompt: str = "") -> str | None:
    """The placeholder for one call purpose (``prompt``: the request's user text), or ``None``."""
    if purpose == "summary":
        return _sections(SUMMARY_HEADINGS)
    if purpose == "recap":
        return f"# 占位复盘：不是模型输出，这一局还没有模型写过复盘\n\n{_sections(RECAP_HEADINGS)}"
    if purpose == "merge":
        return (f"{HANDBOOK_MARK}\n# 记忆（占位）\n\n{_SECTION}\n\n{_merge_blocks(prompt)}\n\n"
                f"{RESIDENT_MARK}\n{RESIDENT_HEADING}\n\n{_SECTION}")
    return None


@dataclass
class PlaceholderBackend:
    """Answers summary, recap and merge calls with labelled placeholders."""

    scenario: str
    kind: str = "scripted"

    def answer(self, key: str, request: ModelRequest) -> Completion:
        text = placeholder_text(request.purpose, request.messages[-1].content if request.messages else "")
        if text is None:
            raise MissingReply(f"{self.scenario}: 导入的聊天没有 {request.purpose} 用途的占位回复（{key}）")
        return Completion(text=text, provenance=PLACEHOLDER)

    def parameters_for(self, key: str) -> dict[str, Any]:
        return {}
