"""What one beat sends (#replay, #budget): the 【前情提要】 message, the kept history, the tail.

Guarantees: at most one leading 【前情提要】 user message (the in-session summary, then the
resident summary of earlier chats); covered history never enters the context; the
resident summary, relay summary, ledger and roster share one 4300-character envelope
and only the resident summary yields. Everything here is pure.
"""

from __future__ import annotations

from liyuan.context.assemble import (
    SUMMARY_OPENING,
    Injection,
    PreparedTurn,
    assemble_turn,
    build_context,
    prepare_turn,
)
from liyuan.context.budget import (
    OMITTED_MARKER,
    RESIDENT_ENVELOPE_CHARS,
    RESIDENT_MAX_CHARS,
    RESIDENT_MIN_USEFUL_CHARS,
    fit_resident_summary,
    other_chars_for,
    resident_allowance,
)

__all__ = [
    "OMITTED_MARKER",
    "RESIDENT_ENVELOPE_CHARS",
    "RESIDENT_MAX_CHARS",
    "RESIDENT_MIN_USEFUL_CHARS",
    "SUMMARY_OPENING",
    "Injection",
    "PreparedTurn",
    "assemble_turn",
    "build_context",
    "fit_resident_summary",
    "other_chars_for",
    "prepare_turn",
    "resident_allowance",
]
