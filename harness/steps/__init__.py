"""Step handlers, one per step kind, registered in :data:`harness.runner.HANDLERS`.

Invariant: every kind in :data:`harness.scenario.STEP_KINDS` has exactly one handler
once this package is imported; a handler reads its parameters from the validated
:class:`~harness.scenario.StepSpec` and reports a JSON-able outcome.
"""

from __future__ import annotations

from collections.abc import Callable

from ..runner import HANDLERS, Handler

__all__ = ["handler"]


def handler(kind: str) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of one step kind."""

    def register(fn: Handler) -> Handler:
        if kind in HANDLERS and HANDLERS[kind] is not fn:
            raise RuntimeError(f"step kind {kind!r} registered twice")
        HANDLERS[kind] = fn
        return fn

    return register


from . import discussion_steps, memory_steps, story_steps, vector_steps  # noqa: E402,F401  (registration side effects)
