"""Steps on one chat: play turns, compact, assemble a turn, reroll, rewind.

Invariant: everything here goes through the app's :class:`liyuan.Chat`: a turn is
``chat.prepare`` then ``chat.record`` (whose compaction check and vector ingest run
inline), a swiped reply is ``record`` then ``reroll``, ``/compact`` is
``chat.compact_now``, a look at the next turn is ``chat.preview`` (nothing written), a
reroll is ``chat.reroll`` then ``record``, a rewind ``chat.rewind``. The tree only ever
grows or moves its leaf. The record of every turn the chat assembles goes to
``run.turns`` (the ``sim/turns/`` artifact).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from liyuan.app import Chat, Turn
from liyuan.compaction import CompactionOutcome
from liyuan.errors import ConfigError
from liyuan.model import ChatMessage
from liyuan.session.entries import Entry, is_message
from liyuan.session.state import Ledger
from liyuan.story.compact import CompactionPlan

from ..running.chatspec import ChatSpec
from ..running.scenario import ScriptedTurn, StepSpec
from ..running.state import ScenarioRun, StepResult, handler
from ..running.story import chat_turns, write_notes
from .common import context_label, prompt_label, prompt_text

__all__ = [
    "compactions_since",
    "keep_turn",
    "play_turn",
    "record_table",
    "render_messages",
    "trace_table",
    "turns_to_play",
]

TURN_PROGRESS_EVERY = 250
"""Turns between two progress lines of a long play step (stderr only, never an artifact)."""


def render_messages(messages: list[ChatMessage]) -> str:
    """The assembled message list as text: a header line per message, then its content."""
    parts = [f"===== {i} · {m.role} =====\n{m.content}" for i, m in enumerate(messages, start=1)]
    return "\n\n".join(parts)


def _sources(sources: Sequence[str]) -> str:
    if not sources:
        return "—"
    if len(sources) <= 3:
        return "、".join(f"`{s}`" for s in sources)
    return f"`{sources[0]}` … `{sources[-1]}`（{len(sources)} 条）"


def record_table(record: dict[str, Any]) -> str:
    """A turn's record (:meth:`liyuan.context.record.TurnRecord.to_json`) as a Markdown table."""
    lines = ["| 块 | 字数 | 估算 token | 来源 | 预算 |", "|---|---:|---:|---|---|"]
    for b in record["blocks"]:
        budget = "整段送出" if b["budget"] is None else \
            ("截断：" if b["budget"]["action"] == "trimmed" else "不送：") + b["budget"]["reason"]
        lines.append(f"| {b['title']} | {b['chars']} | {b['tokens']} | {_sources(b['sources'])} | {budget} |")
    lines.append(f"| **合计**（{record['messages']} 条消息） | {record['chars']} | {record['tokens']} | | "
                 f"常驻摘要和本局摘要、账本、名录共用 {record['budget_chars']} 字 |")
    if record.get("recall"):
        lines += ["", trace_table(record["recall"])]
    if withheld := record.get("withheld"):
        parts = [f"作废的摘要 {_sources(withheld['summaries'])}" if withheld["summaries"] else "",
                 f"改过的消息 {_sources(withheld['revised'])}" if withheld["revised"] else "",
                 f"重写还要盖到 `{withheld['rewrite_until']}`" if withheld["rewrite_until"] else "",
                 f"常驻摘要 `{withheld['resident']}`（改动还没合并）" if withheld["resident"] else ""]
        lines += ["", "这一轮扣下的记忆（withheld）：" + "；".join(p for p in parts if p)]
    return "\n".join(lines)


LIST_NAMES = {"keyword": "关键词", "embedding": "向量"}


def trace_table(trace: Sequence[dict[str, Any]]) -> str:
    """The recall trace of a turn (``TurnRecord.to_json()["recall"]``) as a Markdown table."""
    lines = ["| 【剧情记忆】第几条 | 块 | 哪一路找到 | 关键词名次 | 向量名次 | 融合分 | 占的是保留位 |",
             "|---:|---|---|---:|---:|---:|---|"]
    for i, hit in enumerate(trace, start=1):
        found = "、".join(LIST_NAMES.get(name, name) for name in hit["lists"]) or "—"
        ranks = [str(hit[key]) if hit[key] is not None else "—" for key in ("keyword_rank", "embedding_rank")]
        lines.append(f"| {i} | `{hit['chunk']}` | {found} | {ranks[0]} | {ranks[1]} | {hit['score']:.6f} | "
                     f"{'是' if hit['reserved'] else '否'} |")
    return "\n".join(lines)


def keep_turn(run: ScenarioRun, chat_id: str, how: str, turn: Turn) -> None:
    """Add an assembled turn's record to the scenario's turn records."""
    if turn.record is None:
        return  # an agent-mode turn: the discussion history, no story blocks
    run.turns.append({"step": run.current.id if run.current else "", "chat": chat_id, "how": how,
                      "user_entry": turn.user_entry.id if turn.user_entry is not None else None,
                      **run.stable_chunks(turn.record.to_json())})


def _ledger(raw: Any) -> Ledger | None:
    return Ledger.from_dict(raw) if raw else None


TurnListener = Callable[[str, Turn], None]
"""Told ``(how, turn)`` for every turn a turn assembles (``prepare`` or ``reroll``)."""


def play_turn(chat: Chat, turn: ScriptedTurn, *, mode: str, on_turn: TurnListener | None = None) -> Entry:
    """One turn as the app plays it; returns the reply entry.

    The user's withdrawn alternatives are prepared and taken back (a rewind to where
    they forked); swiped-away replies are recorded and rerolled; tool calls are recorded
    before the reply; an import's notes follow the turn.
    """
    agent = mode == "agent"
    told: TurnListener = on_turn or (lambda _how, _turn: None)
    for text in turn.user_swipes:
        fork = chat.tree.leaf_id
        told("prepare", chat.prepare(text, mode="agent" if agent else "roleplay"))
        chat.rewind(fork)
    told("prepare", chat.prepare(turn.user, mode="agent" if agent else "roleplay"))
    for tool in turn.tools:
        chat.record_tool(str(tool.get("name", "")), dict(tool.get("args", {})), str(tool.get("result", "")))
    for text in turn.swipes:
        chat.record(text)
        told("reroll", chat.reroll())
    reply = chat.record(turn.reply, usage=dict(turn.usage) if turn.usage else None, ledger=_ledger(turn.ledger))
    write_notes(chat.tree, turn.notes)
    return reply


def _outcome(outcome: CompactionOutcome[CompactionPlan]) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": outcome.kind, "reason": outcome.reason, "message": outcome.message}
    if outcome.plan is not None:
        data.update(turns=outcome.plan.turns, covers_through_id=outcome.plan.covers_through_id,
                    covered_ids=[e.id for e in outcome.plan.covered],
                    merged_previous_summary=outcome.plan.previous_summary is not None)
    if outcome.entry is not None:
        data["summary_entry_id"] = outcome.entry.id
        data["summary_provenance"] = outcome.entry.data.get("provenance")
    return data


def compactions_since(run: ScenarioRun, seen: int) -> list[tuple[dict[str, Any], str | None]]:
    """The compactions that did something since event ``seen``: each outcome's JSON and its summary."""
    done: list[CompactionOutcome[CompactionPlan]] = []
    for event in run.events[seen:]:
        outcome = event.outcome
        # Story and discussion compaction share the outcome type; the story's covers a story plan.
        if (isinstance(outcome, CompactionOutcome) and isinstance(outcome.plan, CompactionPlan)
                and all(outcome is not d for d in done)):
            done.append(outcome)
    return [(_outcome(outcome), outcome.summary) for outcome in done if outcome.kind != "skipped"]


@handler("compact")
def compact(run: ScenarioRun, step: StepSpec) -> StepResult:
    """``/compact``: :meth:`liyuan.Chat.compact_now` (period 1, a 500-character floor)."""
    chat = run.chat(step.params["chat"])
    outcome = chat.compact_now()
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


def turns_to_play(run: ScenarioRun, step: StepSpec) -> tuple[str, Chat, ChatSpec, tuple[ScriptedTurn, ...], int, int]:
    """A play step's chat, its turns, and the range to play (after the last played, up to ``upto``)."""
    chat_id = step.params["chat"]
    chat = run.chat(chat_id)
    spec = run.chat_spec(chat_id)
    turns = chat_turns(spec)
    start = run.played[chat_id]
    stop = step.params.get("upto", len(turns))
    if not start <= stop <= len(turns):
        raise ConfigError(f"{step.id}: upto={stop} 超出了 {chat_id} 的轮数（已演 {start}，共 {len(turns)}）")
    return chat_id, chat, spec, turns, start, stop


@handler("play")
def play(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Play the chat's next turns through the chat, as the app records finished turns."""
    chat_id, chat, spec, turns, start, stop = turns_to_play(run, step)
    started = time.perf_counter()
    compactions: list[dict[str, Any]] = []
    summaries_written: list[str] = []
    log: list[str] = []
    for number in range(start + 1, stop + 1):
        seen = len(run.events)
        play_turn(chat, turns[number - 1], mode=spec.mode,
                  on_turn=lambda how, turn: keep_turn(run, chat_id, how, turn))
        run.played[chat_id] = number
        if run.recorder.fatal is not None:
            break  # a missing or stale reply ends the scenario; do not play on without it
        for data, summary in compactions_since(run, seen):
            compactions.append({"after_turn": number, **data})
            if summary is not None:
                summaries_written.append(summary)
            log.append(f"第 {number} 轮后：{data['message']}")
        if number % TURN_PROGRESS_EVERY == 0 and number < stop:
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
    return StepResult({"chat": chat_id, "turns_played": stop, "compactions": compactions,
                       "leaf_id": chat.tree.leaf_id}, summary, failed=failed)


@handler("assemble")
def assemble(run: ScenarioRun, step: StepSpec) -> StepResult:
    """The next turn for a new user message, as :meth:`liyuan.Chat.preview` assembles it (nothing written)."""
    chat_id = step.params["chat"]
    chat = run.chat(chat_id)
    seen = len(run.activity)
    turn = chat.preview(step.params["user"])
    keep_turn(run, chat_id, "preview", turn)
    messages = turn.messages
    run.write_txt("history", render_messages(messages), header=context_label(run))
    run.write_txt("injection", turn.injection, header=context_label(run))
    if turn.record is not None:
        run.write_txt("record", record_table(run.stable_chunks(turn.record.to_json())))
    kept = [m for m in messages[1 if turn.summary or turn.resident else 0:-1]]
    outcome = {
        "messages": [{"role": m.role, "chars": len(m.content), "opening": m.content.split("\n", 1)[0][:40]}
                     for m in messages],
        "summary_message": bool(turn.summary or turn.resident),
        "in_session_summary": turn.summary is not None,
        "resident_chars": len(turn.resident) if turn.resident else 0,
        "kept_history_messages": len(kept),
        "recall_lines": list(turn.recall),
        "recall_warnings": run.activity[seen:],
        "record": run.stable_chunks(turn.record.to_json()) if turn.record is not None else None,
    }
    return StepResult(outcome, f"{len(messages)} 条消息（保留历史 {len(kept)} 条，召回 {len(turn.recall)} 行）")


def _user_positions(branch: Sequence[Entry]) -> list[int]:
    """Positions of the user messages on a branch, in order."""
    return [i for i, e in enumerate(branch) if is_message(e, "user")]


def _reroll_text(chat: Chat, fork: str, old_leaf: str | None, new_reply: str) -> str:
    """The two branches after a reroll, and the old and new reply side by side."""
    tree = chat.tree
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


@handler("import_chat")
def import_chat(run: ScenarioRun, step: StepSpec) -> StepResult:
    """A whole chat brought in at once, as the app does it: :meth:`liyuan.Card.import_chat`."""
    chat_id = step.params["chat"]
    name = step.params["file"]
    if run.root is None or "/" in name or name.startswith("."):
        raise ConfigError(f"{step.id}: file 只写 sim/imports/ 下的文件名：{name!r}")
    path = run.root / "sim" / "imports" / name
    if not path.is_file():
        raise ConfigError(f"{step.id}: sim/imports/ 里没有 {name}")
    chat = run.card.import_chat(path, chat_id, format=step.params.get("format"), title=run.chat_spec(chat_id).name)
    run.adopt(chat_id, chat)
    branch = chat.branch()
    users = sum(1 for e in branch if is_message(e, "user"))
    aside = len(chat.tree) - len(branch)
    run.write_txt("branch", f"导入 sim/imports/{name}：当前分支 {len(branch)} 条（{users} 轮），"
                            f"旁支 {aside} 条（换掉的回复、备选开场白）；叶子 {chat.tree.leaf_id}")
    return StepResult({"chat": chat_id, "file": f"sim/imports/{name}", "entries": len(chat.tree),
                       "branch_entries": len(branch), "turns": users, "aside": aside, "leaf_id": chat.tree.leaf_id},
                      f"导入 {name}：{users} 轮，旁支 {aside} 条")


@handler("reroll")
def reroll(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Swipe the last reply: :meth:`liyuan.Chat.reroll`, then the new reply recorded."""
    chat_id = step.params["chat"]
    chat = run.chat(chat_id)
    branch = chat.branch()
    users = [branch[i].id for i in _user_positions(branch)]
    if not users:
        raise ConfigError(f"{step.id}: {chat_id} 还没有用户消息，不能重来")
    old_leaf = chat.tree.leaf_id
    keep_turn(run, chat_id, "reroll", chat.reroll())
    reply = chat.record(step.params["reply"], ledger=_ledger(step.params.get("ledger")))
    branch_ids = [e.id for e in chat.branch()]
    run.write_txt("branch", _reroll_text(chat, users[-1], old_leaf, reply.id))
    return StepResult({"chat": chat_id, "forked_from": users[-1], "abandoned_leaf": old_leaf,
                       "new_reply_id": reply.id, "branch": branch_ids},
                      f"从 {users[-1]} 分出新回复 {reply.id}；旧叶子 {old_leaf} 成了旁支")


@handler("rewind")
def rewind(run: ScenarioRun, step: StepSpec) -> StepResult:
    """Move the leaf back to the end of turn N (its reply and ledger): :meth:`liyuan.Chat.rewind`."""
    chat_id = step.params["chat"]
    chat = run.chat(chat_id)
    number = step.params["turn"]
    branch = chat.branch()
    users = _user_positions(branch)
    if not 1 <= number <= len(users):
        raise ConfigError(f"{step.id}: 没有第 {number} 轮（当前分支共 {len(users)} 轮）")
    end = users[number] - 1 if number < len(users) else len(branch) - 1
    target = branch[end].id
    old_leaf = chat.tree.leaf_id
    chat.rewind(target)
    branch_ids = [e.id for e in chat.branch()]
    run.write_txt("branch", "\n".join(branch_ids))
    return StepResult({"chat": chat_id, "leaf_id": target, "previous_leaf": old_leaf, "branch": branch_ids},
                      f"回档到第 {number} 轮末尾（{target}）")
