"""Agent-mode discussion compaction: trigger on real usage, cut by whole turns.

Invariants:

- The tree is never rewritten: compaction appends one ``liyuan-discussion-summary``
  entry ``{summary, firstKeptEntryId, tokensBefore}``. Only the last valid one on the
  branch counts; entries before its ``firstKeptEntryId`` do not exist for the history.
- The trigger uses the REAL prompt size of the last request when it is known: the
  ``usage`` the app stores on the assistant entry (read by
  :func:`liyuan.session.entries.usage_tokens`: the request plus the reply, since the reply joins
  the history), plus an estimate of what
  came after it. Usage recorded before the latest summary is stale (that request still
  carried the covered turns) and is ignored; without usable usage the estimate of the
  whole live history is used.
- The cut falls on a user message: the newest turn is always kept, at least one turn
  is summarised, and about ``keep_recent`` tokens stay verbatim.
- Everything here except :func:`run_discussion_compaction` is pure.

Estimates use :func:`liyuan.tokens.estimate_tokens` (CJK-aware), not ``chars / 4``,
which undercounts Chinese 3-5x and would let the estimate fall behind the overflow.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from liyuan.bounds import SIDE_INPUT_MAX_CHARS, check_reply_size, keep_newest, keep_oldest, reply_max_chars
from liyuan.compaction import CompactionOutcome, FailReason, refuse_echo, run_compactor
from liyuan.discussion.messages import (
    DISCUSSION_MAX_TOKENS,
    DISCUSSION_OPENING,
    DISCUSSION_SUMMARY_TYPE,
    KEEP_RECENT_TOKENS,
    RESERVE_TOKENS,
    LiveDiscussion,
    agent_messages,
    estimate_message_tokens,
    live_discussion,
    serialize_discussion,
)
from liyuan.errors import ModelOutputError
from liyuan.model import ChatModel, Completion, split_reasoning
from liyuan.prompts import Prompt, neutralize, render
from liyuan.session.entries import Entry, last_usage
from liyuan.session.tree import SessionTree
from liyuan.text import utf16_len
from liyuan.tokens import estimate_tokens

__all__ = [
    "DiscussionPlan",
    "build_discussion_prompt",
    "plan_discussion_compaction",
    "run_discussion_compaction",
    "validate_discussion_summary",
]


_log = logging.getLogger(__name__)


# -- planning --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiscussionPlan:
    """What a discussion compaction would cover."""

    first_kept_entry_id: str
    conversation_text: str
    previous_summary: str | None
    tokens_before: int
    turns: int
    """Number of turns summarised."""
    usage_based: bool
    """Whether ``tokens_before`` started from a real ``usage`` record."""


def _context_tokens(branch: Sequence[Entry], live: LiveDiscussion) -> tuple[int, bool]:
    # The newest assistant reply with usage, made after the latest summary took effect.
    found = last_usage(branch, live.summary_index + 1)
    if found is not None:
        index, used = found
        return used + sum(map(estimate_message_tokens, agent_messages(branch[index + 1 :]))), True
    history = agent_messages(live.entries)
    total = sum(map(estimate_message_tokens, history))
    if live.summary is not None:
        total += estimate_tokens(f"{DISCUSSION_OPENING}\n\n{live.summary}")
    return total, False


# --8<-- [start:plan_discussion_compaction]
def plan_discussion_compaction(
    branch: Sequence[Entry],
    *,
    context_window: int,
    reserve: int = RESERVE_TOKENS,
    keep_recent: int = KEEP_RECENT_TOKENS,
) -> DiscussionPlan | None:
    """Decide whether the agent discussion must be compacted, and where to cut.

    Compacts only when the context (real usage of the last request plus an estimate
    of what followed, else the estimate alone) exceeds ``context_window - reserve``.
    Walking back from the newest turn, whole turns are kept until about
    ``keep_recent`` tokens are kept; the newest turn is always kept and at least one
    turn is summarised.

    Args:
        branch: The agent session's branch, root to leaf.
        context_window: The model's context window in tokens (0 or less: never).
        reserve: Room left for the next reply and the per-turn blocks.
        keep_recent: Tokens of recent turns to keep verbatim.

    Returns:
        The plan, or ``None`` when nothing needs to or can be compacted.
    """
    # --8<-- [start:discussion_rule]
    if context_window <= 0:
        return None
    live = live_discussion(branch)
    tokens_before, usage_based = _context_tokens(branch, live)
    if tokens_before <= context_window - reserve:
        return None
    entries = live.entries
    starts = [i for i, e in enumerate(entries) if e.type == "message" and e.role == "user" and e.id]
    if len(starts) < 2:
        return None
    cut, kept = len(starts) - 1, 0
    while cut > 0:
        end = starts[cut + 1] if cut + 1 < len(starts) else len(entries)
        kept += sum(map(estimate_message_tokens, agent_messages(entries[starts[cut] : end])))
        if kept >= keep_recent:
            break
        cut -= 1
    cut = max(cut, 1)
    # --8<-- [end:discussion_rule]
    covered = entries[: starts[cut]]
    if not agent_messages(covered):
        return None
    return DiscussionPlan(
        first_kept_entry_id=entries[starts[cut]].id,
        conversation_text=serialize_discussion(covered),
        previous_summary=live.summary,
        tokens_before=tokens_before,
        turns=cut,
        usage_based=usage_based,
    )
# --8<-- [end:plan_discussion_compaction]


def build_discussion_prompt(plan: DiscussionPlan, *, max_input_chars: int = SIDE_INPUT_MAX_CHARS) -> Prompt:
    """The summariser's prompt for ``plan`` (templates ``discussion_system/user.j2``).

    The newest ``max_input_chars`` UTF-16 units of the covered discussion are sent (the
    prompt says how much older text was left out); the previous summary is cut to what
    one summary may be (:func:`liyuan.bounds.reply_max_chars`).
    """
    sent, omitted = keep_newest(plan.conversation_text, max_input_chars)
    previous = keep_oldest(plan.previous_summary or "", reply_max_chars(DISCUSSION_MAX_TOKENS))[0]
    return Prompt(
        purpose="discussion",
        system=render("discussion_system.j2"),
        # The discussion and the old summary are material: neutralised, they cannot
        # close <conversation> or forge a <previous-summary> of their own.
        user=render("discussion_user.j2", omitted_chars=omitted,
                    conversation_text=neutralize(sent, source_tags=False),
                    previous_summary=neutralize(previous, source_tags=False)),
        system_template="discussion_system.j2",
        user_template="discussion_user.j2",
        max_tokens=DISCUSSION_MAX_TOKENS,
    )


# -- running ---------------------------------------------------------------------------


_ITEM_RE = re.compile(r"\s*(?:[-*]\s|\d+(?:[.．)）]\s|、))")
"""A list item: ``- ``, ``* ``, ``1. ``, ``1) `` or ``1、`` (models number items as often as they bullet them)."""

def validate_discussion_summary(text: str, plan: DiscussionPlan, *, instructions: str = "") -> str:
    """Check a discussion-summary reply and return it trimmed.

    The original only refused a blank reply. A real small model showed that is not
    enough: its echo of the prompt became the summary. A reply is refused when it is
    empty (after reasoning is split off), carries the prompt's own ``<conversation>`` or
    ``<previous-summary>`` tags (an echo), has no list item (``- ``, ``* ``, ``1. ``,
    ``1、``) although the prompt asks for one item per line, or is not shorter than what
    it summarises (no compression). Given the system prompt as ``instructions``, it also
    refuses a reply that repeats it (:func:`liyuan.compaction.refuse_echo`): the
    prompt's own numbered list and ``-`` lines pass the list-item check, so an echo of
    the prompt landed as the summary before this check. A reply far longer than
    :data:`DISCUSSION_MAX_TOKENS` allows is refused first (:func:`liyuan.bounds.check_reply_size`).

    Raises:
        ModelOutputError: With a Chinese reason.
    """
    answer, _reasoning = split_reasoning(text)
    if not answer:
        raise ModelOutputError("摘要为空")
    check_reply_size(answer, DISCUSSION_MAX_TOKENS, "摘要")
    refuse_echo(answer, instructions, "摘要")
    if not any(_ITEM_RE.match(line) for line in answer.splitlines()):
        raise ModelOutputError("摘要里没有一条要点（「- 」「* 」「1. 」或「1、」开头）")
    source = utf16_len(plan.conversation_text) + utf16_len(plan.previous_summary or "")
    if utf16_len(answer) >= source:
        raise ModelOutputError(f"摘要 {utf16_len(answer)} 字，不比被压缩的 {source} 字短")
    return answer


@dataclass(frozen=True)
class _Discussion:
    """The discussion's parts of the compaction protocol (:class:`liyuan.compaction.Compactor`)."""

    max_input_chars: int
    leaf_before: str | None
    entry_type: str = DISCUSSION_SUMMARY_TYPE

    def prompt(self, plan: DiscussionPlan) -> Prompt:
        return build_discussion_prompt(plan, max_input_chars=self.max_input_chars)

    def started(self, plan: DiscussionPlan) -> str:
        omitted = keep_newest(plan.conversation_text, self.max_input_chars)[1]
        left_out = f"；最早的 {omitted} 字放不进一次请求，没有发给旁路模型" if omitted else ""
        return f"正在压缩讨论（{plan.turns} 轮 · 约 {plan.tokens_before} token{left_out}）…"

    def check(self, reply: str, plan: DiscussionPlan, instructions: str) -> str:
        return validate_discussion_summary(reply, plan, instructions=instructions)

    def entry_data(self, plan: DiscussionPlan, summary: str, completion: Completion) -> Mapping[str, object]:
        return {"summary": summary, "firstKeptEntryId": plan.first_kept_entry_id,
                "tokensBefore": plan.tokens_before, "provenance": completion.provenance}

    def holds(self, plan: DiscussionPlan, branch: Sequence[Entry]) -> bool:
        # The leaf guard: a discussion summary lands only where it was planned.
        return (branch[-1].id if branch else None) == self.leaf_before

    def failed(self, plan: DiscussionPlan, reason: FailReason, error: str,
               completion: Completion | None) -> tuple[str, tuple[str, Mapping[str, object]] | None]:
        _log.warning("讨论压缩失败：%s", error)
        return f"讨论压缩失败：{error}", None

    def stale(self) -> str:
        return "讨论压缩已丢弃（期间切换了分支）"

    def compacted(self, plan: DiscussionPlan, summary: str) -> str:
        return f"讨论已压缩：{plan.turns} 轮 → 摘要 {utf16_len(summary)} 字"

    def before_append(self, plan: DiscussionPlan) -> None:
        return None


def run_discussion_compaction(
    tree: SessionTree,
    model: ChatModel,
    *,
    context_window: int,
    reserve: int = RESERVE_TOKENS,
    keep_recent: int = KEEP_RECENT_TOKENS,
    on_activity: Callable[[str], None] | None = None,
    max_input_chars: int = SIDE_INPUT_MAX_CHARS,
) -> CompactionOutcome[DiscussionPlan]:
    """Compact the agent discussion on the current branch if it is due.

    Appends ``liyuan-discussion-summary`` only when the side call succeeded with a
    summary that passes :func:`validate_discussion_summary` and the leaf did not move
    meanwhile (the steps after planning are :func:`liyuan.compaction.run_compactor`,
    shared with story compaction). Never raises for model failures: whatever the model
    object's ``complete()`` raises (an ``Exception``), and a reply with a lone
    surrogate, is a ``failed`` outcome (:func:`liyuan.model.side_call`). Arguments are
    those of :func:`plan_discussion_compaction`, and ``max_input_chars`` those of
    :func:`build_discussion_prompt`.
    """
    plan = plan_discussion_compaction(tree.branch(), context_window=context_window, reserve=reserve,
                                      keep_recent=keep_recent)
    if plan is None:  # not due: the outcome says so, the activity stays quiet
        return CompactionOutcome("skipped", "讨论还不长，暂不需要压缩", reason="not-due")
    return run_compactor(tree, model, _Discussion(max_input_chars, tree.leaf_id), plan,
                         emit=on_activity or (lambda _line: None))
