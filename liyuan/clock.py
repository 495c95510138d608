"""Injectable clock and id factories.

Core code never calls ``datetime.now()`` or ``uuid4()`` directly: it takes a
:class:`Clock` and an :class:`IdFactory`, so the harness can make every artifact
byte-stable by injecting fixed ones.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "IdFactory", "counter_ids", "fixed_clock", "random_ids", "system_clock"]

Clock = Callable[[], str]
"""Returns the current time as an ISO-8601 string."""

IdFactory = Callable[[], str]
"""Returns a fresh entry id."""


def system_clock() -> str:
    """The real time, UTC, ISO-8601 with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def random_ids() -> str:
    """A random 16-hex-digit id (64 random bits).

    The original's entries use 8 hex digits; at 32 bits a 100,000-message chat
    collides more often than not. At 64 bits, a million entries collide with a chance
    of about 3 in 100 million; :class:`~liyuan.session.tree.SessionTree` draws again on
    a collision anyway. Files with 8-hex ids read as before (ids are opaque strings).
    """
    return uuid.uuid4().hex[:16]


def counter_ids(prefix: str = "e") -> IdFactory:
    """Deterministic ids ``e0001``, ``e0002``, ... for tests and the harness."""
    numbers = itertools.count(1)
    return lambda: f"{prefix}{next(numbers):04d}"


def fixed_clock(start: str = "2026-01-01T00:00:00+00:00", step_seconds: int = 60) -> Clock:
    """A clock that starts at ``start`` and advances ``step_seconds`` per reading."""
    base = datetime.fromisoformat(start)
    ticks = itertools.count()

    def now() -> str:
        return (base + timedelta(seconds=step_seconds * next(ticks))).isoformat()

    return now
