"""The per-beat recall: the 【剧情记忆】 lines, or nothing within 5 seconds.

Invariants:

- :func:`recall_for_beat` never raises and never takes much longer than ``timeout``:
  the search runs in a daemon worker thread; on timeout or error the beat gets no
  lines and a Chinese warning goes to ``warn`` (to the ``logging`` module when no
  ``warn`` is given: a failing embeddings endpoint is never silent). A hung search is abandoned, not joined,
  so it cannot hold up the beat or the process exit.
- The branch ids are frozen before the worker starts (a reroll would move the leaf).
- One line per hit: ``- 【title】text`` with the text trimmed; zero hits, no lines.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol

from liyuan.session.entries import Entry
from liyuan.vector.memory import Hit

__all__ = [
    "RECALL_TIMEOUT_S",
    "Recaller",
    "branch_ids_of",
    "format_recall_lines",
    "recall_for_beat",
]

RECALL_TIMEOUT_S = 5.0

_log = logging.getLogger(__name__)


class Recaller(Protocol):
    """What the beat needs from the vector memory (:class:`~liyuan.vector.VectorMemory`)."""

    def recall_for_turn(self, query: str, branch_ids: Collection[str] | None) -> Sequence[Hit]:
        """Hits for the user's raw words on the given branch."""
        ...


def branch_ids_of(branch: Iterable[Entry]) -> frozenset[str]:
    """The entry ids of a root-to-leaf branch, frozen."""
    return frozenset(entry.id for entry in branch)


# --8<-- [start:recall_lines]
def format_recall_lines(hits: Sequence[Hit]) -> list[str]:
    """``- 【title】text`` per hit (a hit without a title gets no brackets)."""
    lines = []
    for hit in hits:
        text = hit.text.strip()
        if text:
            lines.append(f"- 【{hit.title}】{text}" if hit.title else f"- {text}")
    return lines
# --8<-- [end:recall_lines]


def recall_for_beat(
    memory: Recaller | None,
    query: str,
    branch_ids: Collection[str] | None,
    *,
    timeout: float = RECALL_TIMEOUT_S,
    warn: Callable[[str], None] | None = None,
) -> list[str]:
    """The 【剧情记忆】 lines for this beat, or ``[]``.

    Args:
        memory: The chat's vector memory, or ``None`` when there is none.
        query: The user's raw words for this beat (on a regenerate, the last user text).
        branch_ids: Ids on the current branch; copied before the worker starts.
        timeout: Seconds to wait for the search (default 5).
        warn: Receives a Chinese warning when the search times out or fails (with the
            error, e.g. the embeddings endpoint's HTTP status); default: logged.

    Returns:
        One line per hit; empty on zero hits, timeout or error.
    """
    if memory is None or not query.strip():
        return []
    report = warn if warn is not None else _log.warning
    frozen = frozenset(branch_ids) if branch_ids is not None else None
    outcome: list[Sequence[Hit] | BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            outcome.append(memory.recall_for_turn(query, frozen))
        except BaseException as exc:  # handed to the caller's thread, which decides
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=work, name="liyuan-recall", daemon=True).start()
    if not done.wait(timeout):
        report(f"向量记忆检索超过 {timeout:g} 秒，本轮不注入【剧情记忆】")
        return []
    result = outcome[0]
    if isinstance(result, BaseException):
        report(f"向量记忆检索出错（{type(result).__name__}: {result}），本轮不注入【剧情记忆】")
        return []
    return format_recall_lines(result)
