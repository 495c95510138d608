"""A generic agent-session compaction, modelled on the coding agent's own (reference 6.3).

A comparison baseline: liyuan does not compact this way, and no app runs it. It is here
so the difference can be shown and measured (the harness runs it as a strategy beside
:mod:`liyuan.story.compact`, and its outcome is liyuan's
:class:`~liyuan.compaction.CompactionOutcome`, so both are read through one type). It behaves
like the coding agent's compaction, including its blind spots:

- Trigger on tokens: ``context_tokens > context_window - reserve_tokens``, counting what
  the agent would send now (:func:`visible_tokens`): the latest summary and the entries
  from its cut on, never what an earlier compaction already covered.
- Cut anywhere: keep about ``keep_recent_tokens`` of recent messages; the cut may fall
  inside a turn (never on a tool result); the turn's prefix is summarised separately.
- It reads the messages as they were sent, not the story: draft revisions are not
  applied and ledger snapshots are invisible; tool calls and results are included.
- A coding template (Goal / Constraints / Progress / Key Decisions / Next Steps /
  Critical Context) in ``prompts/agent_summary_*.j2``.
- It writes a ``compaction`` entry ``{summary, firstKeptEntryId, tokensBefore}``, which
  :func:`liyuan.story.history.active_summary` reads like an old session's entry.

Invariant: before anything is sent, every ``before_compact`` hook sees the plan and may
cancel; :func:`stage_hook` cancels while a stage turn is active, because whoever
assembles the context compacts it. Planning is pure; only the ``run`` function writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from liyuan.bounds import check_reply_size
from liyuan.compaction import CompactionOutcome
from liyuan.errors import ModelError
from liyuan.model import ChatModel, side_call, split_reasoning
from liyuan.prompts import Prompt, neutralize, render
from liyuan.session.entries import Entry, args_json, last_usage, thinking, tool_calls
from liyuan.session.tree import SessionTree
from liyuan.story.history import active_summary
from liyuan.story.view import LEGACY_COMPACTION_TYPE  # the coding agent's own entry type: this module writes it
from liyuan.text import utf16_len, utf16_prefix
from liyuan.tokens import chars4

__all__ = [
    "KEEP_RECENT_TOKENS",
    "RESERVE_TOKENS",
    "TOOL_RESULT_MAX_CHARS",
    "BeforeCompactHook",
    "GenericCompactionOutcome",
    "GenericCompactionPlan",
    "HookDecision",
    "TextEstimator",
    "build_generic_prompt",
    "context_tokens",
    "estimate_entry_tokens",
    "plan_generic_compaction",
    "run_generic_compaction",
    "serialize_agent_messages",
    "should_compact",
    "stage_hook",
    "visible_entries",
    "visible_tokens",
]

RESERVE_TOKENS = 16384
KEEP_RECENT_TOKENS = 20000
TOOL_RESULT_MAX_CHARS = 2000
_READ_TOOLS = frozenset({"read", "grep", "find", "ls"})
_WRITE_TOOLS = frozenset({"write", "edit"})

TextEstimator = Callable[[str], int]
"""Tokens for a text. The coding agent's own is :func:`liyuan.tokens.chars4`."""


def estimate_entry_tokens(entry: Entry, estimate: TextEstimator = chars4) -> int:
    """Tokens one entry adds to the agent's context; 0 for entries it never sees."""
    if entry.type != "message":
        return 0  # custom entries (ledger, draft ops, summaries) are not in its message copy
    parts = [entry.text]
    if entry.role == "assistant":
        parts.append(thinking(entry))
        parts.extend(name + args_json(args) for name, args in tool_calls(entry))
    return estimate("".join(parts))


def context_tokens(entries: Sequence[Entry], estimate: TextEstimator = chars4) -> int:
    """Context size: the last reported assistant usage plus estimates for what follows it.

    An assistant message may carry ``usage`` (read by :func:`liyuan.session.entries.usage_tokens`).
    Without any usage, every entry is estimated.
    """
    found = last_usage(entries)
    if found is None:
        return sum(estimate_entry_tokens(e, estimate) for e in entries)
    index, total = found
    return total + sum(estimate_entry_tokens(e, estimate) for e in entries[index + 1:])


def visible_entries(branch: Sequence[Entry]) -> tuple[str | None, list[Entry]]:
    """What the agent would send now: the latest summary and the entries it keeps.

    The summary is :func:`liyuan.story.history.active_summary` of the raw branch (the latest
    ``compaction`` or ``rp-summary`` entry); the entries run from its cut (for a
    ``compaction``, ``firstKeptEntryId``) to the leaf, summary entries left out.
    Without a summary it is the whole branch.
    """
    active = active_summary(branch)
    start = active.cut if active else 0
    return (active.summary if active else None,
            [e for e in branch[start:] if e.type != LEGACY_COMPACTION_TYPE])


def visible_tokens(branch: Sequence[Entry], estimate: TextEstimator = chars4) -> int:
    """Context size as the agent would send it now; what the trigger compares.

    Like pi: a reported usage counts only on an assistant message after the latest
    summary (one from before it measured the context before the compaction); then the
    estimates of what follows it are added. Without such a usage, the summary text and
    every visible entry are estimated.
    """
    return _visible(branch, estimate)[2]


def _visible(branch: Sequence[Entry], estimate: TextEstimator) -> tuple[str | None, list[Entry], int]:
    # visible_entries and visible_tokens from one active_summary lookup, each entry
    # estimated at most once: the trigger and the plan share it on a due turn.
    active = active_summary(branch)
    entries = [e for e in branch[active.cut if active else 0:] if e.type != LEGACY_COMPACTION_TYPE]
    if active is None:
        return None, entries, context_tokens(branch, estimate)
    after = branch[active.index + 1:]
    if last_usage(after) is not None:
        return active.summary, entries, context_tokens(after, estimate)
    return active.summary, entries, estimate(active.summary) + sum(estimate_entry_tokens(e, estimate) for e in entries)


def should_compact(tokens: int, context_window: int, reserve_tokens: int = RESERVE_TOKENS) -> bool:
    """The coding agent's trigger: the context no longer leaves ``reserve_tokens`` free."""
    return tokens > context_window - reserve_tokens


def _call_text(name: str, args: Mapping[str, Any]) -> str:
    return f"{name}(" + ", ".join(f"{key}={args_json(value)}" for key, value in args.items()) + ")"


def serialize_agent_messages(entries: Sequence[Entry]) -> str:
    """The agent's transcript format: ``[User]:``, ``[Assistant]:``, tool calls and results."""
    blocks: list[str] = []
    for entry in entries:
        if entry.type != "message":
            continue
        if entry.role == "user" and entry.text.strip():
            blocks.append(f"[User]: {entry.text}")
        elif entry.role == "assistant":
            if thinking(entry).strip():
                blocks.append(f"[Assistant thinking]: {thinking(entry)}")
            if entry.text.strip():
                blocks.append(f"[Assistant]: {entry.text}")
            calls = tool_calls(entry)
            if calls:
                blocks.append("[Assistant tool calls]: " + "; ".join(_call_text(n, a) for n, a in calls))
        elif entry.role == "toolResult" and entry.text:
            text = entry.text
            if utf16_len(text) > TOOL_RESULT_MAX_CHARS:
                kept = utf16_prefix(text, TOOL_RESULT_MAX_CHARS)  # never half an emoji
                more = utf16_len(text) - utf16_len(kept)
                text = f"{kept}\n\n[... {more} more characters truncated]"
            blocks.append(f"[Tool result]: {text}")
    return "\n\n".join(blocks)


@dataclass(frozen=True)
class GenericCompactionPlan:
    """Where the generic compaction cuts and what it would summarise."""

    first_kept_id: str
    to_summarize: tuple[Entry, ...]
    """Whole turns before the cut (or before the split turn's start)."""
    turn_prefix: tuple[Entry, ...]
    """The split turn's part before the cut; empty when the cut is at a user message."""
    tokens_before: int
    """The context as the agent would send it before this compaction (:func:`visible_tokens`)."""
    previous_summary: str | None

    @property
    def is_split_turn(self) -> bool:
        """True when the cut falls inside a turn."""
        return bool(self.turn_prefix)


def _valid_cut(entry: Entry) -> bool:
    return entry.type == "message" and entry.role in ("user", "assistant")


def plan_generic_compaction(
    branch: Sequence[Entry],
    *,
    keep_recent_tokens: int = KEEP_RECENT_TOKENS,
    estimate: TextEstimator = chars4,
    tokens_before: int | None = None,
) -> GenericCompactionPlan | None:
    """Find the cut: keep about ``keep_recent_tokens`` of the newest messages.

    Walks back from the end summing message estimates; the cut is the first user or
    assistant message at or after the point where the sum reaches the budget, moved back
    over non-message entries. Returns ``None`` when nothing would be summarised.

    Args:
        branch: Root-to-leaf entries.
        keep_recent_tokens: Recent messages kept verbatim, in tokens.
        estimate: Token estimate per text.
        tokens_before: :func:`visible_tokens` of ``branch`` with ``estimate``, when the
            caller has it already (the trigger computed it); ``None`` computes it.
    """
    if tokens_before is None:
        previous_summary, live, tokens_before = _visible(branch, estimate)
    else:
        previous_summary, live = visible_entries(branch)
    cut_points = [i for i, e in enumerate(live) if _valid_cut(e)]
    if not cut_points:
        return None
    cut = cut_points[0]
    accumulated = 0
    for index in range(len(live) - 1, -1, -1):
        accumulated += estimate_entry_tokens(live[index], estimate)
        if accumulated >= keep_recent_tokens:
            cut = next((c for c in cut_points if c >= index), cut)
            break
    while cut > 0 and live[cut - 1].type != "message":
        cut -= 1  # settings and custom entries just before the cut stay with the kept part
    if cut <= 0:
        return None
    turn_start = cut
    if not (live[cut].type == "message" and live[cut].role == "user"):
        turn_start = next((i for i in range(cut - 1, -1, -1) if live[i].role == "user"), cut)
    return GenericCompactionPlan(
        first_kept_id=live[cut].id,
        to_summarize=tuple(live[:turn_start]),
        turn_prefix=tuple(live[turn_start:cut]) if turn_start < cut else (),
        tokens_before=tokens_before,
        previous_summary=previous_summary,
    )


def build_generic_prompt(
    conversation_text: str,
    *,
    previous_summary: str | None = None,
    kind: Literal["history", "turn-prefix"] = "history",
    reserve_tokens: int = RESERVE_TOKENS,
) -> Prompt:
    """The coding-style summary prompt (``history``) or the split-turn prefix prompt."""
    share = 0.8 if kind == "history" else 0.5
    return Prompt(
        purpose="agent-summary" if kind == "history" else "agent-turn-prefix",
        system=render("agent_summary_system.j2"),
        # Material is neutralised: a transcript line cannot close <conversation>.
        user=render("agent_summary_user.j2", conversation_text=neutralize(conversation_text, source_tags=False),
                    previous_summary=neutralize(previous_summary, source_tags=False) if previous_summary else None,
                    kind=kind),
        system_template="agent_summary_system.j2",
        user_template="agent_summary_user.j2",
        max_tokens=int(share * reserve_tokens),
    )


@dataclass(frozen=True)
class HookDecision:
    """What a ``before_compact`` hook answers; ``cancel=True`` stops the compaction."""

    cancel: bool = False
    reason: str = ""


BeforeCompactHook = Callable[[GenericCompactionPlan], HookDecision | None]


# --8<-- [start:before_compact_hook]
def stage_hook(is_stage_turn_active: Callable[[], bool]) -> BeforeCompactHook:
    """Cancel the generic compaction while a stage turn is active.

    The stage assembles the story context itself (summary message, kept turns, ledger
    block), so it alone may compact it: 压缩权跟着上下文权走——谁装配，谁压缩.
    """

    def before_compact(_plan: GenericCompactionPlan) -> HookDecision | None:
        if is_stage_turn_active():
            return HookDecision(cancel=True, reason="演出进行中，上下文由舞台装配，也由舞台压缩")
        return None  # outside a stage turn the generic behaviour proceeds

    return before_compact
# --8<-- [end:before_compact_hook]


GenericCompactionOutcome = CompactionOutcome[GenericCompactionPlan]
"""What a generic compaction attempt did: liyuan's one outcome type, over this baseline's plan."""


def _file_lists(entries: Sequence[Entry]) -> tuple[list[str], list[str]]:
    read: list[str] = []
    modified: list[str] = []
    for entry in entries:
        for name, args in tool_calls(entry):
            path = args.get("path")
            if not isinstance(path, str):
                continue
            target = modified if name in _WRITE_TOOLS else read if name in _READ_TOOLS else None
            if target is not None and path not in target:
                target.append(path)
    return [p for p in read if p not in modified], modified


def run_generic_compaction(
    tree: SessionTree,
    model: ChatModel,
    *,
    context_window: int,
    reserve_tokens: int = RESERVE_TOKENS,
    keep_recent_tokens: int = KEEP_RECENT_TOKENS,
    hooks: Sequence[BeforeCompactHook] = (),
    force: bool = False,
    estimate: TextEstimator = chars4,
) -> GenericCompactionOutcome:
    """Run the generic compaction on the tree's current branch.

    Args:
        tree: The session tree.
        model: The side model.
        context_window: The model's window, in tokens.
        reserve_tokens: Room kept free for the reply; also sizes the summary budget.
        keep_recent_tokens: Recent messages kept verbatim, in tokens.
        hooks: ``before_compact`` hooks, asked in order; the first cancel wins.
        force: Compact even if the token trigger has not fired (a manual request).
        estimate: Token estimate per text (default: the agent's ``chars / 4``).

    Returns:
        The outcome; a ``compaction`` entry is appended only when ``compacted``.
    """
    branch = tree.branch()
    tokens = visible_tokens(branch, estimate)
    if not force and not should_compact(tokens, context_window, reserve_tokens):
        return GenericCompactionOutcome("skipped", f"上下文约 {tokens} token，未到压缩线", reason="not-due")
    plan = plan_generic_compaction(branch, keep_recent_tokens=keep_recent_tokens, estimate=estimate,
                                   tokens_before=tokens)
    if plan is None:
        return GenericCompactionOutcome("skipped", "没有可以压缩的消息", reason="nothing-to-cut")
    for hook in hooks:
        decision = hook(plan)
        if decision is not None and decision.cancel:
            return GenericCompactionOutcome("cancelled", f"通用压缩已取消：{decision.reason}", plan,
                                            reason="hook")
    leaf_before = tree.leaf_id
    provenance: list[str] = []

    def ask(prompt: Prompt) -> str:
        completion = side_call(model, prompt.request())
        provenance.append(completion.provenance)
        answer = split_reasoning(completion.text)[0]
        check_reply_size(answer, prompt.max_tokens, "摘要")  # a ModelOutputError: the compaction fails
        return answer

    try:
        summary = ""
        if plan.to_summarize:
            summary = ask(build_generic_prompt(serialize_agent_messages(plan.to_summarize),
                                               previous_summary=plan.previous_summary,
                                               reserve_tokens=reserve_tokens))
        elif plan.previous_summary:
            summary = plan.previous_summary
        if plan.turn_prefix:
            prefix = ask(build_generic_prompt(serialize_agent_messages(plan.turn_prefix), kind="turn-prefix",
                                              reserve_tokens=reserve_tokens))
            summary = f"{summary}\n\n---\n\n**Turn Context (split turn):**\n\n{prefix}".strip()
    except ModelError as exc:
        return GenericCompactionOutcome("failed", f"通用压缩失败：{exc}", plan, reason="model-error")
    if tree.leaf_id != leaf_before:
        return GenericCompactionOutcome("stale", "压缩已丢弃（期间切换了分支）", plan, reason="leaf-moved")
    if not summary.strip():
        return GenericCompactionOutcome("failed", "通用压缩失败：摘要为空", plan, reason="empty-summary")
    read, modified = _file_lists([*plan.to_summarize, *plan.turn_prefix])
    if read:
        summary += "\n\n<read-files>\n" + "\n".join(read) + "\n</read-files>"
    if modified:
        summary += "\n\n<modified-files>\n" + "\n".join(modified) + "\n</modified-files>"
    entry = tree.append(LEGACY_COMPACTION_TYPE, summary=summary, firstKeptEntryId=plan.first_kept_id,
                        tokensBefore=plan.tokens_before,
                        details={"readFiles": read, "modifiedFiles": modified},
                        provenance=",".join(sorted(set(provenance))) or "carried-over")
    return GenericCompactionOutcome(
        "compacted", f"会话已压缩（通用策略）：约 {plan.tokens_before} token → 摘要 {utf16_len(summary)} 字",
        plan, summary, entry)
