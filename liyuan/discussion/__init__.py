"""Agent-mode discussion compaction (#discussion).

Guarantees: discussion compaction triggers on the real ``usage`` of the last request
(estimates only where none is known), cuts at a user message, keeps about 20000 tokens
verbatim and appends one summary entry; the tree is never rewritten.
The steps after planning are the compaction protocol shared with the story
(:mod:`liyuan.compaction`). The generic agent compaction #why-own compares against is a
harness baseline (``harness/baselines/agent.py``), not part of the library.
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
