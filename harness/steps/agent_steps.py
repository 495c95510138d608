"""The coding agent's generic compaction, run on the same branch where ours compacted (#why-own).

A comparison baseline, not the app's path. Invariant: the step never touches the chat's
tree. It copies the chat's current branch,
without our ``rp-summary`` entries, into a private in-memory tree (the agent's own view of
the chat: messages and custom entries it ignores), and at every point where our compaction
wrote a summary it runs :func:`harness.baselines.agent.run_generic_compaction` on that copy
(forced: the same moment, so the two cuts compare like for like). Everything reported is
what the code computed: the cut, the turn it splits, tokens before and after by the agent's
own ruler (``chars / 4``), what stays verbatim; and, with the same ruler on the same branch,
what ours did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.baselines.agent import (
    KEEP_RECENT_TOKENS,
    RESERVE_TOKENS,
    GenericCompactionOutcome,
    run_generic_compaction,
    visible_tokens,
)
from liyuan.clock import counter_ids
from liyuan.session.entries import Entry, is_message
from liyuan.session.tree import SessionTree
from liyuan.story.view import SUMMARY_ENTRY_TYPE
from liyuan.text import utf16_len

from ..running.recorder import CallRecord
from ..running.scenario import StepSpec
from ..running.state import ScenarioRun, StepResult, handler
from .common import prompt_label, prompt_text

__all__ = ["turn_numbers"]

_EXCERPT = 40


def turn_numbers(branch: Sequence[Entry]) -> dict[str, int]:
    """Entry id to the turn it belongs to: turn N starts at the N-th user message; 0 is the greeting."""
    numbers: dict[str, int] = {}
    turn = 0
    for entry in branch:
        if is_message(entry, "user"):
            turn += 1
        numbers[entry.id] = turn
    return numbers


def _is_ours(entry: Entry) -> bool:
    return entry.type == "custom" and entry.custom_type == SUMMARY_ENTRY_TYPE


def _turn_name(turn: int) -> str:
    return "开场白" if turn == 0 else f"第 {turn} 轮"


def _span(turns: Sequence[int]) -> str:
    if not turns:
        return "无"
    low, high = min(turns), max(turns)
    return _turn_name(low) if low == high else f"{_turn_name(low)}到{_turn_name(high)}"


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT else flat[:_EXCERPT] + "……"


def _role(entry: Entry) -> str:
    return {"user": "用户", "assistant": "回复", "toolResult": "工具回执"}.get(entry.role or "", entry.type)


def _generic_record(outcome: GenericCompactionOutcome, origin: dict[str, Entry], turns: dict[str, int],
                    after: int) -> dict[str, Any]:
    plan = outcome.plan
    record: dict[str, Any] = {"kind": outcome.kind, "message": outcome.message}
    if plan is None:
        return record
    first = origin[plan.first_kept_id]
    summarized = [origin[e.id] for e in plan.to_summarize if is_message(e)]
    prefix = [origin[e.id] for e in plan.turn_prefix if is_message(e)]
    record.update(
        tokens_before=plan.tokens_before, tokens_after=after,
        first_kept_entry=first.id, first_kept_role=first.role, first_kept_turn=turns[first.id],
        split_turn=turns[first.id] if plan.is_split_turn else None,
        summarized_messages=len(summarized), summarized_turns=sorted({turns[e.id] for e in summarized}),
        turn_prefix_messages=[{"turn": turns[e.id], "role": e.role, "entry": e.id} for e in prefix],
        merged_previous_summary=plan.previous_summary is not None,
    )
    return record


def _generic_text(index: int, record: dict[str, Any], kept: list[Entry], prefix: list[Entry],
                  turns: dict[str, int]) -> str:
    lines = [f"通用 agent 压缩 · 第 {index} 次（和我们的第 {index} 次同一时刻、同一分支）",
             f"压缩前：约 {record['tokens_before']} token（字数÷4）"]
    if record["split_turn"] is not None:
        lines.append(f"切点：第 {record['split_turn']} 轮中间。这一轮的"
                     f"{'、'.join(_role(e) for e in prefix)}交给「前半轮」摘要，"
                     f"{_role(kept[0])}原样保留")
    else:
        lines.append(f"切点：第 {record['first_kept_turn']} 轮的用户消息之前（整轮）")
    lines.append(f"交给摘要：{_span(record['summarized_turns'])}（{record['summarized_messages']} 条消息）"
                 + ("，并入上一份摘要" if record["merged_previous_summary"] else ""))
    kept_turns = sorted({turns[e.id] for e in kept if is_message(e)})
    chars = sum(utf16_len(e.text) for e in kept if is_message(e))
    lines.append(f"原样保留：{_span(kept_turns)}，{sum(1 for e in kept if is_message(e))} 条消息，{chars} 字")
    lines.append(f"压缩后：约 {record['tokens_after']} token（摘要 + 保留的消息）")
    lines.append("")
    lines.append("切点两边：")
    for entry in prefix[-2:]:
        lines.append(f"  第 {turns[entry.id]} 轮 · {_role(entry)}（交给前半轮摘要）：{_excerpt(entry.text)}")
    for entry in [e for e in kept if is_message(e)][:2]:
        lines.append(f"  第 {turns[entry.id]} 轮 · {_role(entry)}（原样保留）：{_excerpt(entry.text)}")
    return "\n".join(lines)


def _ours(branch: Sequence[Entry], index: int, turns: dict[str, int]) -> dict[str, Any]:
    """Our compaction at ``branch[index]``, measured with the agent's ruler."""
    entry = branch[index]
    through = str(entry.data.get("coversThroughId", ""))
    start = max((i for i in range(index) if _is_ours(branch[i])), default=-1)
    previous_through = str(branch[start].data.get("coversThroughId", "")) if start >= 0 else None
    messages = [e for e in branch[:index] if is_message(e)]
    ids = [e.id for e in branch]
    low = ids.index(previous_through) + 1 if previous_through else 0
    high = ids.index(through) if through in ids else -1
    covered = [e for e in branch[low:high + 1] if is_message(e)]
    kept = [e for e in branch[high + 1:index] if is_message(e)]
    return {
        "summary_entry": entry.id, "covers_through_id": through, "covers_through_turn": turns.get(through),
        "summarized_turns": sorted({turns[e.id] for e in covered}), "summarized_messages": len(covered),
        "kept_turns": sorted({turns[e.id] for e in kept}), "kept_messages": len(kept),
        "kept_chars": sum(utf16_len(e.text) for e in kept),
        "merged_previous_summary": start >= 0, "messages_on_branch": len(messages),
        "tokens_before": visible_tokens(branch[:index]), "tokens_after": visible_tokens(branch[:index + 1]),
    }


def _ours_text(index: int, record: dict[str, Any]) -> str:
    return "\n".join([
        f"梨园的剧情压缩 · 第 {index} 次（第 {max(record['kept_turns'], default=0)} 轮后）",
        f"压缩前：约 {record['tokens_before']} token（同一把尺子：字数÷4）",
        f"切点：第 {record['covers_through_turn'] + 1} 轮的用户消息之前（整轮）",
        f"交给摘要：{_span(record['summarized_turns'])}（{record['summarized_messages']} 条消息）"
        + ("，并入上一份摘要" if record["merged_previous_summary"] else ""),
        f"原样保留：{_span(record['kept_turns'])}，{record['kept_messages']} 条消息，{record['kept_chars']} 字",
        f"压缩后：约 {record['tokens_after']} token（摘要 + 保留的消息）",
    ])


def _write_prompts(run: ScenarioRun, index: int, calls: list[CallRecord]) -> None:
    for call in calls:
        kind = "prefix_prompt" if call.purpose == "agent-turn-prefix" else "prompt"
        run.write_txt(f"{kind}_{index}", prompt_text(call), header=prompt_label(run))


@handler("generic_compact")
def generic_compact(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Run the agent's compaction at each point where ours compacted this chat's branch."""
    chat_id = step.params["chat"]
    keep = step.params.get("keep_recent_tokens", KEEP_RECENT_TOKENS)
    reserve = step.params.get("reserve", RESERVE_TOKENS)
    branch = list(run.chat(chat_id).branch())
    turns = turn_numbers(branch)
    points = [i for i, e in enumerate(branch) if _is_ours(e)]
    agent = SessionTree(None, session_id=f"{chat_id}-agent", clock=run.clock, ids=counter_ids(f"{chat_id}-agent-"))
    origin: dict[str, Entry] = {}
    copied = 0
    results: list[dict[str, Any]] = []
    failed = False
    for n, point in enumerate(points, start=1):
        for entry in branch[copied:point]:
            if not _is_ours(entry):
                origin[agent.append(entry.type, **entry.body).id] = entry
        copied = point + 1
        seen = len(run.recorder.step_calls(step.id))
        # Forced: the same moment as ours; the window only feeds the trigger, which force skips.
        outcome = run_generic_compaction(agent, run.recorder, context_window=0, reserve_tokens=reserve,
                                         keep_recent_tokens=keep, force=True)
        calls = run.recorder.step_calls(step.id)[seen:]
        _write_prompts(run, n, calls)
        record = _generic_record(outcome, origin, turns, visible_tokens(agent.branch()))
        ours = _ours(branch, point, turns)
        if outcome.plan is not None:
            after = list(agent.branch())
            start = next(i for i, e in enumerate(after) if e.id == outcome.plan.first_kept_id)
            kept = [origin[e.id] for e in after[start:] if e.id in origin]
            prefix = [origin[e.id] for e in outcome.plan.turn_prefix if is_message(e)]
            run.write_txt(f"cut_{n}", _generic_text(n, record, kept, prefix, turns))
        run.write_txt(f"ours_{n}", _ours_text(n, ours))
        if outcome.summary is not None:
            run.write_txt(f"summary_{n}", outcome.summary, header=run.header_for(calls))
        failed = failed or outcome.kind != "compacted"
        results.append({"generic": record, "ours": ours})
    splits = [r["generic"].get("split_turn") for r in results if r["generic"].get("split_turn") is not None]
    summary = (f"通用压缩在 {len(points)} 个时刻各压一次；切在一轮中间 {len(splits)} 次"
               + (f"（第 {'、'.join(str(s) for s in splits)} 轮）" if splits else ""))
    return StepResult({"chat": chat_id, "keep_recent_tokens": keep, "reserve": reserve, "points": results},
                      summary, failed=failed or not points)
