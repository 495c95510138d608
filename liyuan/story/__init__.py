"""Story compaction (#compact) and its bookkeeping: which summary counts, what history remains.

Guarantees: the last 6 turns stay verbatim; older turns become one five-section relay
summary appended as an ``rp-summary`` entry (the tree is never rewritten); a failed or
malformed reply appends nothing but a process entry counted by the backoff; planning and
history are pure functions that read only the live part of the branch.
"""

from __future__ import annotations

from liyuan.story.compact import CompactionPlan, compact_now, plan_compaction, run_compaction
from liyuan.story.history import ActiveSummary, active_summary
from liyuan.story.scribe import SUMMARY_HEADINGS

__all__ = [
    "SUMMARY_HEADINGS",
    "ActiveSummary",
    "CompactionPlan",
    "active_summary",
    "compact_now",
    "plan_compaction",
    "run_compaction",
]
