"""What one turn sends (#replay, #budget): the 【前情提要】 message, the kept history, the tail.

Guarantees: at most one leading 【前情提要】 user message (the in-session summary, then the
resident summary of earlier chats); covered history never enters the context; the
resident summary, relay summary, ledger and roster share one 4300-character envelope
and only the resident summary yields. Everything here is pure.
"""

from __future__ import annotations

from liyuan.context.assemble import Injection, PreparedTurn, prepare_turn

__all__ = [
    "Injection",
    "PreparedTurn",
    "prepare_turn",
]
