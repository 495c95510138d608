"""Step handlers, one per step kind, registered in :data:`harness.running.state.HANDLERS`.

Invariant: every kind in :data:`harness.running.scenario.STEP_KINDS` has exactly one handler
once this package is imported; a handler reads its parameters from the validated
:class:`~harness.running.scenario.StepSpec` and reports a JSON-able outcome.
"""

from __future__ import annotations

from . import (  # noqa: F401  (registration side effects)
    agent_steps,
    discussion_steps,
    edit_steps,
    lore_steps,
    memory_steps,
    pin_steps,
    story_steps,
    vector_steps,
)
