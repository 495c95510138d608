"""Steps on one chat's session tree: play beats, compact, assemble a turn, reroll, rewind.

Invariant: these steps only ever append to the tree or move its leaf (never rewrite it),
and they call the library exactly as the app would: ``run_compaction`` after a beat,
``compact_now`` for ``/compact``, ``assemble_turn`` (through ``prepare_turn``, which also
returns what went in) for a new user message.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from liyuan.context.assemble import prepare_turn
from liyuan.errors import ConfigError
from liyuan.model import ChatMessage
from liyuan.session.entries import Entry, is_message
from liyuan.session.state import STATE_ENTRY_TYPE, format_roster, format_state, state_from_branch
from liyuan.session.tree import SessionTree
from liyuan.story.compact import (
    DEFAULT_EVERY_N_TURNS,
    KEEP_RECENT_BEATS,
    MANUAL_MIN_COMPACT_CHARS,
    MIN_COMPACT_CHARS,
    CompactionOutcome,
    compact_now,
    run_compaction,
)

from ..run_state import ScenarioRun, StepResult, handler
from ..scenario import StepSpec
from ..story import append_beat, chat_beats, ledger_data
from .common import context_label, prompt_label, prompt_text, resident_text
from .vector_steps import vector_for

__all__ = ["render_messages"]

BEAT_PROGRESS_EVERY = 250
"""Beats between two progress lines of a long play step (stderr only, never an artifact)."""


def render_messages(messages: list[ChatMessage]) -> str:
    """The assembled message list as text: a header line per message, then its content."""
    parts = [f"===== {i} · {m.role} =====\n{m.content}" for i, m in enumerate(messages, start=1)]
    return "\n\n".join(parts)


def _compaction(run: ScenarioRun, tree: SessionTree, chat_id: str, *, manual: bool,
                params: dict[str, Any]) -> CompactionOutcome:
    scenario = run.scenario
    keep = params.get("keep", run.config("keep", KEEP_RECENT_BEATS))
    if manual:
        period: dict[str, Any] = dict(every_n_turns=1, min_chars=MANUAL_MIN_COMPACT_CHARS)
    else:
        period = dict(every_n_turns=params.get("every_n_turns", run.config("every_n_turns", DEFAULT_EVERY_N_TURNS)),
                      min_chars=params.get("min_chars", run.config("min_chars", MIN_COMPACT_CHARS)))
    vector = vector_for(run, chat_id)
    archive = vector.memory.archive_compacted if vector is not None else None
    common: dict[str, Any] = dict(user_name=scenario.user, char_name=scenario.char, language=scenario.language,
                                  keep=keep, archive=archive, on_activity=run.on_activity)
    if "input_max_chars" in params:
        common["max_input_chars"] = params["input_max_chars"]
    if manual:
        return compact_now(tree, run.recorder, **common)
    return run_compaction(tree, run.recorder, **period, **common)


def _outcome(outcome: CompactionOutcome) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": outcome.kind, "reason": outcome.reason, "message": outcome.message}
    if outcome.plan is not None:
        data.update(turns=outcome.plan.turns, covers_through_id=outcome.plan.covers_through_id,
                    covered_ids=[e.id for e in outcome.plan.covered],
                    merged_previous_summary=outcome.plan.previous_summary is not None)
    if outcome.entry is not None:
        data["summary_entry_id"] = outcome.entry.id
        data["summary_provenance"] = outcome.entry.data.get("provenance")
    return data


@handler("compact")
def compact(run: ScenarioRun, step: StepSpec) -> StepResult:
    """One compaction: ``manual`` = /compact, ``auto`` = the end-of-beat check."""
    chat_id = step.params["chat"]
    tree = run.tree(chat_id)
    outcome = _compaction(run, tree, chat_id, manual=step.params["mode"] == "manual", params=dict(step.params))
    calls = run.recorder.step_calls(step.id, "summary")
    call = calls[0] if calls else None
    if call is not None:
        run.write_txt("prompt", prompt_text(call), header=prompt_label(run))
        run.write_txt("prompt_user", call.part("user"), header=prompt_label(run))
    if outcome.summary is not None:
        run.write_txt("summary", outcome.summary, header=run.header_for([call] if call else []))
    run.write_txt("outcome", outcome.message)
    failed = outcome.kind in ("failed", "stale")
    return StepResult(_outcome(outcome), outcome.message, failed=failed)


@handler("play")
def play(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Write the chat's next beats into its tree, as the app records finished beats."""
    chat_id = step.params["chat"]
    tree = run.tree(chat_id)
    spec = run.chat(chat_id)
    beats = chat_beats(spec)
    start = run.played[chat_id]
    stop = step.params.get("upto", len(beats))
    if not start <= stop <= len(beats):
        raise ConfigError(f"{step.id}: upto={stop} 超出了 {chat_id} 的轮数（已演 {start}，共 {len(beats)}）")
    vector = vector_for(run, chat_id) if step.params.get("vector", run.config("vector", False)) else None
    started = time.perf_counter()
    compactions: list[dict[str, Any]] = []
    summaries_written: list[str] = []
    log: list[str] = []
    for number in range(start + 1, stop + 1):
        beat = beats[number - 1]
        reply = append_beat(tree, beat, mode=spec.mode)
        run.played[chat_id] = number
        if vector is not None:
            vector.ingest_turn(tree, reply)
        if step.params.get("auto_compact", False):
            outcome = _compaction(run, tree, chat_id, manual=False, params={})
            if run.recorder.fatal is not None:
                break  # a missing or stale reply ends the scenario; do not play on without it
            if outcome.kind != "skipped":
                compactions.append({"after_beat": number, **_outcome(outcome)})
                if outcome.summary is not None:
                    summaries_written.append(outcome.summary)
                log.append(f"第 {number} 轮后：{outcome.message}")
        if number % BEAT_PROGRESS_EVERY == 0 and number < stop:
            run.progress.note(f"已演 {number}/{stop} 轮 · 压缩 {len(compactions)} 次 · "
                              f"模型调用 {len(run.recorder.calls)} 次 · {time.perf_counter() - started:.1f} s")
    calls = run.recorder.step_calls(step.id, "summary")
    for i, call in enumerate(calls, start=1):
        run.write_txt(f"prompt_{i}", prompt_text(call), header=prompt_label(run))
    for i, text in enumerate(summaries_written, start=1):
        run.write_txt(f"summary_{i}", text, header=run.header_for(calls))
    run.write_txt("log", "\n".join(log) if log else "（这几轮没有触发压缩）")
    failed = any(c["kind"] in ("failed", "stale") for c in compactions)
    summary = f"{chat_id} 演到第 {stop} 轮；压缩 {len(compactions)} 次"
    return StepResult({"chat": chat_id, "beats_played": stop, "compactions": compactions,
                       "leaf_id": tree.leaf_id}, summary, failed=failed)


@handler("assemble")
def assemble(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Assemble the context for a new user message (the message itself is not persisted)."""
    chat_id = step.params["chat"]
    tree = run.tree(chat_id)
    branch = tree.branch()
    ledger = state_from_branch(branch)
    state_text = format_state(ledger)
    roster = format_roster(ledger)
    resident = resident_text(run) if step.params.get("resident", True) else None
    recall_lines: list[str] = []
    warnings: list[str] = []
    if step.params.get("recall", False):
        vector = vector_for(run, chat_id)
        if vector is None:
            raise ConfigError(f"{step.id}: recall 需要在场景 config 里打开 vector")
        recall_lines = vector.recall(step.params["user"], tree, on_warning=warnings.append)
    turn = prepare_turn(branch, step.params["user"], resident_summary=resident, state_text=state_text,
                        roster=roster, recall_lines=recall_lines)
    messages = turn.messages
    run.write_txt("history", render_messages(messages), header=context_label(run))
    run.write_txt("injection", turn.injection.render(), header=context_label(run))
    kept = [m for m in messages[1 if turn.summary or turn.resident else 0:-1]]
    outcome = {
        "messages": [{"role": m.role, "chars": len(m.content), "opening": m.content.split("\n", 1)[0][:40]}
                     for m in messages],
        "summary_message": bool(turn.summary or turn.resident),
        "in_session_summary": turn.summary is not None,
        "resident_chars": len(turn.resident) if turn.resident else 0,
        "kept_history_messages": len(kept),
        "recall_lines": recall_lines,
        "recall_warnings": warnings,
    }
    return StepResult(outcome, f"{len(messages)} 条消息（保留历史 {len(kept)} 条，召回 {len(recall_lines)} 行）")


def _user_positions(branch: Sequence[Entry]) -> list[int]:
    """Positions of the user messages on a branch, in order."""
    return [i for i, e in enumerate(branch) if is_message(e, "user")]


def _reroll_text(tree: SessionTree, fork: str, old_leaf: str | None, new_reply: str) -> str:
    """The two branches after a reroll, and the old and new reply side by side."""
    current = [e.id for e in tree.branch()]
    abandoned: list[str] = []
    node = tree.get(old_leaf) if old_leaf else None
    while node is not None and node.id != fork:
        abandoned.insert(0, node.id)
        node = tree.get(node.parent_id) if node.parent_id else None
    entries = [e for e in map(tree.get, abandoned) if e is not None]
    old_reply = next((e for e in entries if is_message(e, "assistant")), None)
    lines = [f"当前分支：{len(current)} 条，{current[0]} → … → {fork}（重来的那条用户消息）→ "
             + " → ".join(current[current.index(fork) + 1:]) + "（叶子）",
             f"旁支：{fork} → " + " → ".join(abandoned) + "（重来放弃的，还在树上）"]
    if old_reply is not None:
        lines += ["", f"===== {old_reply.id} · 旧回复（旁支）=====", old_reply.text.strip()]
    new = tree.get(new_reply)
    if new is not None:
        lines += ["", f"===== {new.id} · 新回复（当前分支）=====", new.text.strip()]
    return "\n".join(lines)


@handler("reroll")
def reroll(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Swipe the last reply: the new reply forks from the same user message."""
    chat_id = step.params["chat"]
    tree = run.tree(chat_id)
    branch = tree.branch()
    users = [branch[i].id for i in _user_positions(branch)]
    if not users:
        raise ConfigError(f"{step.id}: {chat_id} 还没有用户消息，不能重来")
    old_leaf = tree.leaf_id
    tree.navigate(users[-1])
    reply = tree.append_message("assistant", step.params["reply"])
    if "ledger" in step.params:
        tree.append_custom(STATE_ENTRY_TYPE, ledger_data(step.params["ledger"]))
    vector = vector_for(run, chat_id)
    if vector is not None:
        vector.ingest_turn(tree, reply)
    branch_ids = [e.id for e in tree.branch()]
    run.write_txt("branch", _reroll_text(tree, users[-1], old_leaf, reply.id))
    return StepResult({"chat": chat_id, "forked_from": users[-1], "abandoned_leaf": old_leaf,
                       "new_reply_id": reply.id, "branch": branch_ids},
                      f"从 {users[-1]} 分出新回复 {reply.id}；旧叶子 {old_leaf} 成了旁支")


@handler("rewind")
def rewind(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Move the leaf back to the end of beat N (its reply and ledger)."""
    chat_id = step.params["chat"]
    tree = run.tree(chat_id)
    number = step.params["beat"]
    branch = tree.branch()
    users = _user_positions(branch)
    if not 1 <= number <= len(users):
        raise ConfigError(f"{step.id}: 没有第 {number} 轮（当前分支共 {len(users)} 轮）")
    end = users[number] - 1 if number < len(users) else len(branch) - 1
    target = branch[end].id
    old_leaf = tree.leaf_id
    tree.navigate(target)
    branch_ids = [e.id for e in tree.branch()]
    run.write_txt("branch", "\n".join(branch_ids))
    return StepResult({"chat": chat_id, "leaf_id": target, "previous_leaf": old_leaf, "branch": branch_ids},
                      f"回档到第 {number} 轮末尾（{target}）")
