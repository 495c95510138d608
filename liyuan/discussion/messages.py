"""Agent discussions as messages: which discussion summary counts, what remains, and its text.

Everything here is pure. The compaction that uses it is :mod:`liyuan.discussion.compact`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from liyuan.model import ChatMessage
from liyuan.session.entries import Entry, args_json, thinking, tool_calls
from liyuan.text import utf16_len, utf16_prefix
from liyuan.tokens import estimate_tokens

__all__ = [
    "DISCUSSION_MAX_TOKENS",
    "DISCUSSION_OPENING",
    "DISCUSSION_SUMMARY_TYPE",
    "KEEP_RECENT_TOKENS",
    "RESERVE_TOKENS",
    "TOOL_TEXT_LIMIT",
    "AgentMessage",
    "LiveDiscussion",
    "ToolCall",
    "agent_history",
    "agent_messages",
    "as_chat_messages",
    "estimate_message_tokens",
    "live_discussion",
    "serialize_discussion",
]

DISCUSSION_SUMMARY_TYPE = "liyuan-discussion-summary"
DISCUSSION_OPENING = "【讨论摘要】以下是此前讨论的压缩摘要，其中已定的事照此执行："
RESERVE_TOKENS = 16384
KEEP_RECENT_TOKENS = 20000
DISCUSSION_MAX_TOKENS = 4096
TOOL_TEXT_LIMIT = 400


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call made by the assistant."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentMessage:
    """One replayed message of the agent discussion (native tool records kept)."""

    role: Literal["user", "assistant", "toolResult"]
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_name: str = ""
    """For ``toolResult``: which tool answered."""
    thinking: str = ""
    entry_id: str | None = None
    """The tree entry it came from; ``None`` for the synthetic summary message."""


def _as_message(entry: Entry) -> AgentMessage | None:
    if entry.type != "message":
        return None
    if entry.role == "user":
        return AgentMessage("user", entry.text, entry_id=entry.id)
    if entry.role == "assistant":
        calls = tuple(ToolCall(name, args) for name, args in tool_calls(entry))
        return AgentMessage("assistant", entry.text, calls, thinking=thinking(entry), entry_id=entry.id)
    if entry.role == "toolResult":
        name = entry.body.get("toolName")
        return AgentMessage("toolResult", entry.text, tool_name=name if isinstance(name, str) else "",
                            entry_id=entry.id)
    return None


def agent_messages(entries: Sequence[Entry]) -> list[AgentMessage]:
    return [m for m in map(_as_message, entries) if m is not None]


# -- which summary counts ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LiveDiscussion:
    """The part of a branch the model still sees verbatim, and the summary before it."""

    entries: list[Entry]
    summary: str | None
    summary_index: int
    """Index of the summary entry in the branch; -1 without a summary."""


def live_discussion(branch: Sequence[Entry]) -> LiveDiscussion:
    """Apply the latest valid discussion summary to ``branch``.

    Live entries start at the summary's ``firstKeptEntryId``, or right after the summary
    entry when that anchor is not on the branch before it. The summary entry itself is
    not part of the live entries.
    """
    for index in range(len(branch) - 1, -1, -1):
        entry = branch[index]
        if entry.custom_type != DISCUSSION_SUMMARY_TYPE:
            continue
        summary = entry.data.get("summary")
        anchor = entry.data.get("firstKeptEntryId")
        if not isinstance(summary, str) or not summary.strip() or not isinstance(anchor, str) or not anchor:
            continue  # a broken summary must not hide the one before it
        start = next((i for i in range(index) if branch[i].id == anchor), index + 1)
        live = [e for i, e in enumerate(branch[start:], start) if i != index]
        return LiveDiscussion(live, summary.strip(), index)
    return LiveDiscussion(list(branch), None, -1)


def agent_history(branch: Sequence[Entry]) -> list[AgentMessage]:
    """What the agent is replayed: one 【讨论摘要】 user message, then the live records.

    Tool calls and tool results stay native records (not flattened into text).
    """
    live = live_discussion(branch)
    history = agent_messages(live.entries)
    if live.summary is not None:
        history.insert(0, AgentMessage("user", f"{DISCUSSION_OPENING}\n\n{live.summary}"))
    return history


def as_chat_messages(history: Sequence[AgentMessage]) -> list[ChatMessage]:
    """Flatten a history for a plain chat endpoint: calls and receipts become text."""
    out: list[ChatMessage] = []
    for message in history:
        if message.role == "toolResult":
            out.append(ChatMessage("user", _receipt(message)))
            continue
        parts = [message.text.strip()] if message.text.strip() else []
        parts += [_call(call) for call in message.tool_calls]
        out.append(ChatMessage(message.role, "\n\n".join(parts)))
    return out


# -- estimating and serializing ---------------------------------------------------------


def estimate_message_tokens(message: AgentMessage) -> int:
    """Estimated tokens of one message: text, thinking, and each call's name and args."""
    total = estimate_tokens(message.text) + estimate_tokens(message.thinking)
    for call in message.tool_calls:
        total += estimate_tokens(call.name) + estimate_tokens(args_json(call.args))
    return total


def _call(call: ToolCall) -> str:
    return f"[调用 {call.name} {utf16_prefix(args_json(call.args), TOOL_TEXT_LIMIT)}]"


def _receipt(message: AgentMessage) -> str:
    text = message.text
    if utf16_len(text) > TOOL_TEXT_LIMIT:
        text = utf16_prefix(text, TOOL_TEXT_LIMIT) + "…"
    return f"[回执 {message.tool_name}：{text}]"


def serialize_discussion(entries: Sequence[Entry]) -> str:
    """The discussion as text for the summariser, parts joined by blank lines.

    ``用户：…`` for the user, ``助手：…`` for non-blank assistant text, ``[调用 name args]``
    per tool call and ``[回执 tool：text]`` per tool result (args and receipts cut at
    400 characters, UTF-16 units as everywhere in liyuan). Custom entries are skipped.
    """
    parts: list[str] = []
    for message in agent_messages(entries):
        if message.role == "user":
            parts.append(f"用户：{message.text}")
        elif message.role == "assistant":
            if message.text.strip():
                parts.append(f"助手：{message.text}")
            parts += [_call(call) for call in message.tool_calls]
        else:
            parts.append(_receipt(message))
    return "\n\n".join(parts)
