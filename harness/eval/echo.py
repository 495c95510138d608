"""Replies that copy their own prompt: how much is echo, and the reply without it.

A model that cannot summarise often continues the prompt instead: it writes out the
conversation it was given, and a fact recall check then finds every fact in it. Copying
the input is not remembering, so the scorecard scores a reply that is mostly echo on what
is left once the copied lines are taken out.

Invariant: pure functions of two strings. A line counts as echo when, stripped, it has at
least :data:`MIN_ECHO_CHARS` characters and occurs verbatim in the prompt; short lines
(headings, list markers, one-word lines) never do, so a well-formed reply that merely
reuses the prompt's section headings is not an echo.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ECHO_THRESHOLD", "MIN_ECHO_CHARS", "EchoResult", "measure_echo"]

MIN_ECHO_CHARS = 12
"""Shortest stripped line that can count as copied from the prompt."""

ECHO_THRESHOLD = 0.5
"""Share of a reply's characters in copied lines from which the reply is mostly echo."""


@dataclass(frozen=True)
class EchoResult:
    """How much of a reply is copied from its prompt."""

    share: float
    """Characters in copied lines / characters in all non-blank lines (0 for an empty reply)."""
    echoed_lines: int
    mostly_echo: bool
    """``share`` reaches :data:`ECHO_THRESHOLD`."""
    scored_text: str
    """The text to score: the reply without its copied lines when mostly echo, else the reply."""

    def to_json(self) -> dict[str, Any]:
        """JSON form for the scorecard (without the text)."""
        return {"share": round(self.share, 4), "echoed_lines": self.echoed_lines, "mostly_echo": self.mostly_echo}


def measure_echo(reply: str, prompt: str) -> EchoResult:
    """Measure how much of ``reply`` repeats ``prompt`` line by line.

    Args:
        reply: What the model returned.
        prompt: Everything it was sent (system and user text).

    Returns:
        The echo share, and the text a recall check should score.
    """
    total = echoed = count = 0
    kept: list[str] = []
    for line in reply.splitlines():
        stripped = line.strip()
        total += len(stripped)
        if len(stripped) >= MIN_ECHO_CHARS and stripped in prompt:
            echoed += len(stripped)
            count += 1
        else:
            kept.append(line)
    share = echoed / total if total else 0.0
    mostly = share >= ECHO_THRESHOLD
    return EchoResult(share, count, mostly, "\n".join(kept) if mostly else reply)
