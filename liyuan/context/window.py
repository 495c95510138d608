"""The verbatim history's bound: the oldest turns go first once it is over its limit.

Compaction keeps a chat's history short when a side model is configured; without one
(or while compactions fail) nothing else would. :func:`history_window` is the safety
net every turn passes through: when the messages after the active summary hold more than
``limit`` characters, whole turns are left out from the oldest on (a turn starts at a
user message), until what is left fits. The newest turn, the user's words included, is
always kept, even when it alone is over the limit. What was left out is reported
(:class:`~liyuan.context.record.HistoryCut`); the session tree keeps every entry.

Invariant: pure (entries in, an index and a report out).
"""

from __future__ import annotations

from collections.abc import Sequence

from liyuan.context.record import HistoryCut
from liyuan.session.entries import Entry, is_message

__all__ = ["HISTORY_MAX_CHARS", "history_window"]

HISTORY_MAX_CHARS = 60_000
"""Default bound of the verbatim history sent each turn (characters of the kept messages,
the user's new words included): about 36 turns of 1,600 characters, the most a chat
compacted on the default period (6 kept + 30 new turns) holds."""


def history_window(live: Sequence[Entry], limit: int) -> tuple[int, HistoryCut | None]:
    """Where the sent history starts in ``live`` (the entries after the active summary),
    and what was left out before it (``None``: nothing)."""
    sizes = [(i, e.role == "user", len(e.text.strip())) for i, e in enumerate(live)
             if is_message(e) and e.role in ("user", "assistant") and e.text.strip()]
    total = sum(size for _, _, size in sizes)
    if total <= limit:
        return 0, None
    starts = [n for n, (_, user, _) in enumerate(sizes) if user]
    if not starts:
        return 0, None  # no turn to cut at
    left, chosen = total, starts[-1]  # the newest turn stays, whatever its size
    for n, (_, user, size) in enumerate(sizes):
        if user and left <= limit:
            chosen = n  # the oldest turn from which on the rest fits
            break
        left -= size
    dropped_chars = sum(size for _, _, size in sizes[:chosen])
    dropped_turns = sum(1 for n in starts if n < chosen)
    cut = HistoryCut(dropped_turns=dropped_turns, dropped_chars=dropped_chars,
                     kept_turns=len(starts) - dropped_turns, limit_chars=limit)
    return sizes[chosen][0], cut
