"""Agent-mode discussion compaction (#discussion), and the generic agent compaction of #why-own.

Guarantees: discussion compaction triggers on the real ``usage`` of the last request
(estimates only where none is known), cuts at a user message, keeps about 20000 tokens
verbatim and appends one summary entry; the tree is never rewritten.
:mod:`liyuan.discussion.agent` models a coding agent's own compaction (token trigger, cut
anywhere) so that the harness can show why role-play does not use it; it is not re-exported.
"""

from __future__ import annotations

from liyuan.discussion.compact import DiscussionPlan, run_discussion_compaction
from liyuan.discussion.messages import AgentMessage, LiveDiscussion, ToolCall, live_discussion

__all__ = [
    "AgentMessage",
    "DiscussionPlan",
    "LiveDiscussion",
    "ToolCall",
    "live_discussion",
    "run_discussion_compaction",
]
