"""Story compaction (#compact) and its bookkeeping: which summary counts, what history remains.

Guarantees: the last 6 turns stay verbatim; older turns become one five-section relay
summary appended as an ``rp-summary`` entry (the tree is never rewritten); a failed or
malformed reply appends nothing but a process entry counted by the backoff; planning and
history are pure functions that read only the live part of the branch.
"""

from __future__ import annotations

from liyuan.story.backoff import (
    BACKOFF_AFTER_FAILURES,
    BACKOFF_MAX_PERIODS,
    backoff_message,
    backoff_wait,
    compaction_backoff,
    failure_data,
)
from liyuan.story.compact import (
    DEFAULT_EVERY_N_TURNS,
    KEEP_RECENT_BEATS,
    MANUAL_MIN_COMPACT_CHARS,
    MIN_COMPACT_CHARS,
    Archive,
    CompactionOutcome,
    CompactionPlan,
    compact_now,
    plan_compaction,
    run_compaction,
)
from liyuan.story.history import (
    ActiveSummary,
    History,
    HistoryItem,
    active_summary,
    rebuild_history,
    serialize_for_summary,
)
from liyuan.story.scribe import (
    SUMMARY_HEADINGS,
    SUMMARY_MAX_TOKENS,
    Sections,
    build_summary_prompt,
    canonical_heading,
    parse_sections,
    validate_summary,
)
from liyuan.story.view import (
    COMPACT_FAILED_TYPE,
    DRAFT_OP_ENTRY_TYPE,
    LEGACY_COMPACTION_TYPE,
    PROCESS_ENTRY_TYPES,
    SUMMARY_ENTRY_TYPE,
    FailureStreak,
    failure_streak,
    last_index,
    live_start,
    story_view,
    summary_fields,
)

__all__ = [
    "BACKOFF_AFTER_FAILURES",
    "BACKOFF_MAX_PERIODS",
    "COMPACT_FAILED_TYPE",
    "DEFAULT_EVERY_N_TURNS",
    "DRAFT_OP_ENTRY_TYPE",
    "KEEP_RECENT_BEATS",
    "LEGACY_COMPACTION_TYPE",
    "MANUAL_MIN_COMPACT_CHARS",
    "MIN_COMPACT_CHARS",
    "PROCESS_ENTRY_TYPES",
    "SUMMARY_ENTRY_TYPE",
    "SUMMARY_HEADINGS",
    "SUMMARY_MAX_TOKENS",
    "ActiveSummary",
    "Archive",
    "CompactionOutcome",
    "CompactionPlan",
    "FailureStreak",
    "History",
    "HistoryItem",
    "Sections",
    "active_summary",
    "backoff_message",
    "backoff_wait",
    "build_summary_prompt",
    "canonical_heading",
    "compact_now",
    "compaction_backoff",
    "failure_data",
    "failure_streak",
    "last_index",
    "live_start",
    "parse_sections",
    "plan_compaction",
    "rebuild_history",
    "run_compaction",
    "serialize_for_summary",
    "story_view",
    "summary_fields",
    "validate_summary",
]
