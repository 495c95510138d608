"""Agent discussion compaction in a scenario: triggered by the real usage the app stored.

Invariant: the step shows one layer on its own: it calls
:func:`liyuan.discussion.compact.run_discussion_compaction` on the chat's tree with the
step's window (what :meth:`liyuan.Chat.record` runs after an agent turn when
``MemoryConfig.discussion_window`` is set), and its scenario note says so. It records
beside its outcome the three ways to size the
context (the last request's real usage, the CJK-aware estimate, ``chars / 4``), so the
artifact shows why usage decides and ``chars / 4`` would come too late.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from liyuan.discussion.compact import run_discussion_compaction
from liyuan.discussion.messages import (
    KEEP_RECENT_TOKENS,
    RESERVE_TOKENS,
    AgentMessage,
    agent_history,
    estimate_message_tokens,
)
from liyuan.session.entries import Entry, args_json, last_usage
from liyuan.tokens import chars4

from ..running.scenario import StepSpec
from ..running.state import ScenarioRun, StepResult, handler
from .common import context_label, prompt_label, prompt_text

__all__ = ["render_agent_history"]

DEFAULT_CONTEXT_WINDOW = 12000


def render_agent_history(history: list[AgentMessage]) -> str:
    """The replayed agent history as text; tool calls and receipts stay visible."""
    parts = []
    for i, message in enumerate(history, start=1):
        lines = [f"===== {i} · {message.role}{' · ' + message.tool_name if message.tool_name else ''} ====="]
        if message.text.strip():
            lines.append(message.text.strip())
        for call in message.tool_calls:
            lines.append(f"[调用 {call.name} {json.dumps(dict(call.args), ensure_ascii=False)}]")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _sizes(branch: Sequence[Entry]) -> dict[str, Any]:
    history = agent_history(branch)
    # What chars / 4 would measure: every replayed text, thinking, call name and args.
    replayed = "".join(
        message.text + message.thinking + "".join(call.name + args_json(call.args) for call in message.tool_calls)
        for message in history
    )
    found = last_usage(branch)
    return {
        "last_request_usage_tokens": found[1] if found is not None else None,
        "estimate_tokens_cjk": sum(estimate_message_tokens(m) for m in history),
        "estimate_tokens_chars4": chars4(replayed),
    }


@handler("discussion")
def discussion(run: ScenarioRun, step: StepSpec) -> StepResult:
    """One end-of-turn check of the agent discussion; compacts when the usage says so."""
    chat_id = step.params["chat"]
    tree = run.chat(chat_id).tree
    window = step.params.get("context_window", DEFAULT_CONTEXT_WINDOW)
    reserve = step.params.get("reserve", RESERVE_TOKENS)
    keep_recent = step.params.get("keep_recent", KEEP_RECENT_TOKENS)
    sizes = _sizes(tree.branch())
    bound = {"max_input_chars": step.params["input_max_chars"]} if "input_max_chars" in step.params else {}
    outcome = run_discussion_compaction(tree, run.recorder, context_window=window, reserve=reserve,
                                        keep_recent=keep_recent, on_activity=run.note, **bound)
    calls = run.recorder.step_calls(step.id, "discussion")
    if calls:
        run.write_txt("prompt", prompt_text(calls[0]), header=prompt_label(run))
    if outcome.entry is not None:
        run.write_txt("summary", str(outcome.entry.data.get("summary", "")), header=run.header_for(calls))
    run.write_txt("history", render_agent_history(agent_history(tree.branch())), header=context_label(run))
    run.write_txt("outcome", outcome.message)
    record: dict[str, Any] = {"kind": outcome.kind, "reason": outcome.reason, "message": outcome.message,
                              "context_window": window, "reserve": reserve, "keep_recent": keep_recent,
                              "threshold": window - reserve, **sizes}
    if outcome.plan is not None:
        record.update(tokens_before=outcome.plan.tokens_before, usage_based=outcome.plan.usage_based,
                      turns=outcome.plan.turns, first_kept_entry_id=outcome.plan.first_kept_entry_id,
                      merged_previous_summary=outcome.plan.previous_summary is not None)
    return StepResult(record, outcome.message, failed=outcome.kind in ("failed", "stale"))
