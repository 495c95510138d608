"""When a story compaction that keeps failing is tried again.

A model with its own habits (a heading style the check does not know, a reasoning model
that spends its budget thinking) can fail every compaction. Retrying on every turn would
then cost a 4096-token call per turn for nothing, so after a few failures in a row the
automatic trigger waits.

Invariants:

- The streak lives on the session tree, as ``rp-compact-failed`` process entries (see
  :func:`failure_data`), so it survives a restart and belongs to one branch: a reroll
  or rewind past the failures leaves them on the abandoned branch.
- A successful compaction ends the streak (the failures are counted only after the
  latest summary), and ``/compact`` ignores the wait.
- Everything here is pure: branch in, numbers and data out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from liyuan.model import Completion
from liyuan.session.entries import Entry
from liyuan.story.view import FailureStreak, failure_streak

__all__ = [
    "BACKOFF_AFTER_FAILURES",
    "BACKOFF_MAX_PERIODS",
    "backoff_message",
    "backoff_wait",
    "compaction_backoff",
    "failure_data",
]

BACKOFF_AFTER_FAILURES = 3
"""Consecutive failed compactions after which automatic tries back off."""
BACKOFF_MAX_PERIODS = 4
"""The longest wait between automatic tries, in periods (``every_n_turns``)."""


def backoff_wait(failures: int, every_n_turns: int) -> int:
    """Turns to wait after the latest failure before the next automatic try.

    Nothing while fewer than :data:`BACKOFF_AFTER_FAILURES` tries failed in a row (a
    passing hiccup is retried next turn, as the original does); then one period, doubled
    with each further failure, capped at :data:`BACKOFF_MAX_PERIODS` periods.

    Args:
        failures: Consecutive failures so far.
        every_n_turns: The compaction period in turns.

    Returns:
        The wait in turns (0: no wait).
    """
    if failures < BACKOFF_AFTER_FAILURES:
        return 0
    return max(every_n_turns, 1) * min(1 << (failures - BACKOFF_AFTER_FAILURES), BACKOFF_MAX_PERIODS)


def compaction_backoff(branch: Sequence[Entry], every_n_turns: int) -> tuple[FailureStreak, int]:
    """The branch's failure streak and the turns it must still wait (0: try now).

    Args:
        branch: Root-to-leaf entries.
        every_n_turns: The compaction period in turns.
    """
    streak = failure_streak(branch)
    return streak, max(0, backoff_wait(streak.failures, every_n_turns) - streak.turns_since)


def backoff_message(streak: FailureStreak, remaining: int) -> str:
    """The Chinese activity line shown while automatic compaction waits."""
    return (f"前情压缩已连续失败 {streak.failures} 次，自动压缩暂停：再过 {remaining} 轮重试"
            "（可随时用 /compact 手动压缩）")


def failure_data(reason: str, error: str, covers_through_id: str, completion: Completion | None) -> dict[str, Any]:
    """The ``data`` of an ``rp-compact-failed`` entry.

    Args:
        reason: ``model-error`` or ``invalid-summary``.
        error: The Chinese error text.
        covers_through_id: The anchor the failed compaction would have had.
        completion: The rejected reply, or ``None`` when the call itself failed.

    Returns:
        ``{reason, error, coversThroughId, provenance, finishReason}``; provenance keeps a
        scripted failure from passing for a model's.
    """
    return {
        "reason": reason,
        "error": error,
        "coversThroughId": covers_through_id,
        "provenance": completion.provenance if completion is not None else "",
        "finishReason": completion.finish_reason if completion is not None else "",
    }
