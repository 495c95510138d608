"""Agent-mode discussion compaction (#discussion), and the generic agent compaction of #why-own.

Guarantees: discussion compaction triggers on the real ``usage`` of the last request
(estimates only where none is known), cuts at a user message, keeps about 20000 tokens
verbatim and appends one summary entry; the tree is never rewritten.
:mod:`liyuan.discussion.agent` models a coding agent's own compaction (token trigger, cut
anywhere) so that the harness can show why role-play does not use it; it is not re-exported.
"""

from __future__ import annotations

from liyuan.discussion.compact import (
    DiscussionOutcome,
    DiscussionPlan,
    build_discussion_prompt,
    plan_discussion_compaction,
    run_discussion_compaction,
    validate_discussion_summary,
)
from liyuan.discussion.messages import (
    DISCUSSION_MAX_TOKENS,
    DISCUSSION_OPENING,
    DISCUSSION_SUMMARY_TYPE,
    KEEP_RECENT_TOKENS,
    RESERVE_TOKENS,
    TOOL_TEXT_LIMIT,
    AgentMessage,
    LiveDiscussion,
    ToolCall,
    agent_history,
    agent_messages,
    as_chat_messages,
    estimate_message_tokens,
    live_discussion,
    serialize_discussion,
)

__all__ = [
    "DISCUSSION_MAX_TOKENS",
    "DISCUSSION_OPENING",
    "DISCUSSION_SUMMARY_TYPE",
    "KEEP_RECENT_TOKENS",
    "RESERVE_TOKENS",
    "TOOL_TEXT_LIMIT",
    "AgentMessage",
    "DiscussionOutcome",
    "DiscussionPlan",
    "LiveDiscussion",
    "ToolCall",
    "agent_history",
    "agent_messages",
    "as_chat_messages",
    "build_discussion_prompt",
    "estimate_message_tokens",
    "live_discussion",
    "plan_discussion_compaction",
    "run_discussion_compaction",
    "serialize_discussion",
    "validate_discussion_summary",
]
