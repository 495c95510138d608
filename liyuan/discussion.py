"""Agent-mode discussion compaction: trigger on real usage, cut by whole turns.

Invariants:

- The tree is never rewritten: compaction appends one ``liyuan-discussion-summary``
  entry ``{summary, firstKeptEntryId, tokensBefore}``. Only the last valid one on the
  branch counts; entries before its ``firstKeptEntryId`` do not exist for the history.
- The trigger uses the REAL prompt size of the last request when it is known: the
  ``usage`` the app stores on the assistant entry (read by
  :func:`liyuan.tree.usage_tokens`: the request plus the reply, since the reply joins
  the history), plus an estimate of what
  came after it. Usage recorded before the latest summary is stale (that request still
  carried the covered turns) and is ignored; without usable usage the estimate of the
  whole live history is used.
- The cut falls on a user message: the newest turn is always kept, at least one turn
  is summarised, and about ``keep_recent`` tokens stay verbatim.
- Everything here except :func:`run_discussion_compaction` is pure.

Estimates use :func:`liyuan.tokens.estimate_tokens` (CJK-aware), not ``chars / 4``,
which undercounts Chinese 3-5x and would let the estimate fall behind the overflow.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ModelError, ModelOutputError
from .model import ChatMessage, ChatModel, cut_off_note, split_reasoning
from .prompts import Prompt, echoed_tag, neutralize, render
from .text import utf16_len, utf16_prefix
from .tokens import estimate_tokens
from .tree import Entry, SessionTree, args_json, last_usage, thinking, tool_calls

__all__ = [
    "DISCUSSION_MAX_TOKENS",
    "DISCUSSION_OPENING",
    "DISCUSSION_SUMMARY_TYPE",
    "KEEP_RECENT_TOKENS",
    "RESERVE_TOKENS",
    "AgentMessage",
    "DiscussionOutcome",
    "DiscussionPlan",
    "LiveDiscussion",
    "ToolCall",
    "agent_history",
    "as_chat_messages",
    "build_discussion_prompt",
    "estimate_message_tokens",
    "live_discussion",
    "plan_discussion_compaction",
    "run_discussion_compaction",
    "serialize_discussion",
    "validate_discussion_summary",
]

DISCUSSION_SUMMARY_TYPE = "liyuan-discussion-summary"
DISCUSSION_OPENING = "【讨论摘要】以下是此前讨论的压缩摘要，其中已定的事照此执行："
RESERVE_TOKENS = 16384
KEEP_RECENT_TOKENS = 20000
DISCUSSION_MAX_TOKENS = 4096
TOOL_TEXT_LIMIT = 400

_log = logging.getLogger(__name__)


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


def _messages(entries: Sequence[Entry]) -> list[AgentMessage]:
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
    history = _messages(live.entries)
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
    for message in _messages(entries):
        if message.role == "user":
            parts.append(f"用户：{message.text}")
        elif message.role == "assistant":
            if message.text.strip():
                parts.append(f"助手：{message.text}")
            parts += [_call(call) for call in message.tool_calls]
        else:
            parts.append(_receipt(message))
    return "\n\n".join(parts)


# -- planning --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiscussionPlan:
    """What a discussion compaction would cover."""

    first_kept_entry_id: str
    conversation_text: str
    previous_summary: str | None
    tokens_before: int
    turns: int
    """Number of turns summarised."""
    usage_based: bool
    """Whether ``tokens_before`` started from a real ``usage`` record."""


def _context_tokens(branch: Sequence[Entry], live: LiveDiscussion) -> tuple[int, bool]:
    # The newest assistant reply with usage, made after the latest summary took effect.
    found = last_usage(branch, live.summary_index + 1)
    if found is not None:
        index, used = found
        return used + sum(map(estimate_message_tokens, _messages(branch[index + 1 :]))), True
    history = _messages(live.entries)
    total = sum(map(estimate_message_tokens, history))
    if live.summary is not None:
        total += estimate_tokens(f"{DISCUSSION_OPENING}\n\n{live.summary}")
    return total, False


# --8<-- [start:plan_discussion_compaction]
def plan_discussion_compaction(
    branch: Sequence[Entry],
    *,
    context_window: int,
    reserve: int = RESERVE_TOKENS,
    keep_recent: int = KEEP_RECENT_TOKENS,
) -> DiscussionPlan | None:
    """Decide whether the agent discussion must be compacted, and where to cut.

    Compacts only when the context (real usage of the last request plus an estimate
    of what followed, else the estimate alone) exceeds ``context_window - reserve``.
    Walking back from the newest turn, whole turns are kept until about
    ``keep_recent`` tokens are kept; the newest turn is always kept and at least one
    turn is summarised.

    Args:
        branch: The agent session's branch, root to leaf.
        context_window: The model's context window in tokens (0 or less: never).
        reserve: Room left for the next reply and the per-turn blocks.
        keep_recent: Tokens of recent turns to keep verbatim.

    Returns:
        The plan, or ``None`` when nothing needs to or can be compacted.
    """
    if context_window <= 0:
        return None
    live = live_discussion(branch)
    tokens_before, usage_based = _context_tokens(branch, live)
    if tokens_before <= context_window - reserve:
        return None
    entries = live.entries
    starts = [i for i, e in enumerate(entries) if e.type == "message" and e.role == "user" and e.id]
    if len(starts) < 2:
        return None
    cut, kept = len(starts) - 1, 0
    while cut > 0:
        end = starts[cut + 1] if cut + 1 < len(starts) else len(entries)
        kept += sum(map(estimate_message_tokens, _messages(entries[starts[cut] : end])))
        if kept >= keep_recent:
            break
        cut -= 1
    cut = max(cut, 1)
    covered = entries[: starts[cut]]
    if not _messages(covered):
        return None
    return DiscussionPlan(
        first_kept_entry_id=entries[starts[cut]].id,
        conversation_text=serialize_discussion(covered),
        previous_summary=live.summary,
        tokens_before=tokens_before,
        turns=cut,
        usage_based=usage_based,
    )
# --8<-- [end:plan_discussion_compaction]


def build_discussion_prompt(plan: DiscussionPlan) -> Prompt:
    """The summariser's prompt for ``plan`` (templates ``discussion_system/user.j2``)."""
    return Prompt(
        purpose="discussion",
        system=render("discussion_system.j2"),
        # The discussion and the old summary are material: neutralised, they cannot
        # close <conversation> or forge a <previous-summary> of their own.
        user=render("discussion_user.j2",
                    conversation_text=neutralize(plan.conversation_text, source_tags=False),
                    previous_summary=neutralize(plan.previous_summary or "", source_tags=False)),
        system_template="discussion_system.j2",
        user_template="discussion_user.j2",
        max_tokens=DISCUSSION_MAX_TOKENS,
    )


# -- running ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiscussionOutcome:
    """What a discussion-compaction attempt did."""

    kind: Literal["compacted", "skipped", "failed", "stale"]
    message: str
    """The Chinese activity/result line."""
    plan: DiscussionPlan | None = None
    entry: Entry | None = None
    reason: str = ""
    """``not-due``, ``model-error``, ``empty-summary`` or ``leaf-moved``."""


_ITEM_RE = re.compile(r"\s*(?:[-*]\s|\d+(?:[.．)）]\s|、))")
"""A list item: ``- ``, ``* ``, ``1. ``, ``1) `` or ``1、`` (models number items as often as they bullet them)."""

def validate_discussion_summary(text: str, plan: DiscussionPlan) -> str:
    """Check a discussion-summary reply and return it trimmed.

    The original only refused a blank reply. A real small model showed that is not
    enough: its echo of the prompt became the summary. A reply is refused when it is
    empty (after reasoning is split off), carries the prompt's own ``<conversation>`` or
    ``<previous-summary>`` tags (an echo), has no list item (``- ``, ``* ``, ``1. ``,
    ``1、``) although the prompt asks for one item per line, or is not shorter than what
    it summarises (no compression).

    Raises:
        ModelOutputError: With a Chinese reason.
    """
    answer, _reasoning = split_reasoning(text)
    if not answer:
        raise ModelOutputError("摘要为空")
    tag = echoed_tag(answer)
    if tag is not None:
        raise ModelOutputError(f"摘要里出现了 prompt 自己的标签 {tag}：像是照抄了输入")
    if not any(_ITEM_RE.match(line) for line in answer.splitlines()):
        raise ModelOutputError("摘要里没有一条要点（「- 」「* 」「1. 」或「1、」开头）")
    source = utf16_len(plan.conversation_text) + utf16_len(plan.previous_summary or "")
    if utf16_len(answer) >= source:
        raise ModelOutputError(f"摘要 {utf16_len(answer)} 字，不比被压缩的 {source} 字短")
    return answer


def run_discussion_compaction(
    tree: SessionTree,
    model: ChatModel,
    *,
    context_window: int,
    reserve: int = RESERVE_TOKENS,
    keep_recent: int = KEEP_RECENT_TOKENS,
    on_activity: Callable[[str], None] | None = None,
) -> DiscussionOutcome:
    """Compact the agent discussion on the current branch if it is due.

    Appends ``liyuan-discussion-summary`` only when the side call succeeded with a
    non-blank summary and the leaf did not move meanwhile. Never raises for model
    failures. Arguments are those of :func:`plan_discussion_compaction`.
    """

    def done(outcome: DiscussionOutcome) -> DiscussionOutcome:
        if on_activity is not None and outcome.reason != "not-due":
            on_activity(outcome.message)
        return outcome

    plan = plan_discussion_compaction(tree.branch(), context_window=context_window, reserve=reserve,
                                      keep_recent=keep_recent)
    if plan is None:
        return done(DiscussionOutcome("skipped", "讨论还不长，暂不需要压缩", reason="not-due"))
    leaf_before = tree.leaf_id
    if on_activity is not None:
        on_activity(f"正在压缩讨论（{plan.turns} 轮 · 约 {plan.tokens_before} token）…")
    try:
        completion = model.complete(build_discussion_prompt(plan).request())
    except ModelError as exc:
        _log.warning("讨论压缩失败：%s", exc)
        return done(DiscussionOutcome("failed", f"讨论压缩失败：{exc}", plan, reason="model-error"))
    try:
        summary = validate_discussion_summary(completion.text, plan)
    except ModelOutputError as exc:
        reason = "empty-summary" if not completion.text.strip() else "invalid-summary"
        return done(DiscussionOutcome("failed", f"讨论压缩失败：{exc}{cut_off_note(completion)}", plan,
                                      reason=reason))
    if tree.leaf_id != leaf_before:
        return done(DiscussionOutcome("stale", "讨论压缩已丢弃（期间切换了分支）", plan, reason="leaf-moved"))
    entry = tree.append_custom(DISCUSSION_SUMMARY_TYPE, {
        "summary": summary,
        "firstKeptEntryId": plan.first_kept_entry_id,
        "tokensBefore": plan.tokens_before,
        "provenance": completion.provenance,
    })
    return done(DiscussionOutcome("compacted", f"讨论已压缩：{plan.turns} 轮 → 摘要 {utf16_len(summary)} 字",
                                  plan, entry))
