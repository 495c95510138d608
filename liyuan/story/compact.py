"""Story compaction: when to compact and what (plan), and doing it (run).

Invariants:

- The session tree is never rewritten. A compaction only appends one ``rp-summary``
  entry; everything it covers stays in the file and is merely left out of the context.
  A failed one appends an ``rp-compact-failed`` process entry instead, so the backoff
  (:mod:`liyuan.story.backoff`) survives a restart; the story view never shows it.
- Every function here except :func:`run_compaction` is pure: data in, data out.
- All character counts are UTF-16 code units, as in the original (see :func:`~liyuan.text.utf16_len`).

Which summary counts and what history remains is :mod:`liyuan.story.history`; the
planner reads only the live part of the branch, as the history does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from liyuan.bounds import SIDE_INPUT_MAX_CHARS, keep_newest
from liyuan.compaction import HELD_MESSAGE, CompactionOutcome, FailReason, HeldLandings, run_compactor
from liyuan.errors import ConfigError
from liyuan.model import ChatModel, Completion
from liyuan.prompts import Prompt
from liyuan.session.entries import Entry, awaits_reply
from liyuan.session.state import format_state, state_from_branch
from liyuan.session.tree import SessionTree
from liyuan.story.backoff import backoff_message, compaction_backoff, failure_data
from liyuan.story.history import serialize_for_summary, story_tail
from liyuan.story.scribe import build_summary_prompt, validate_summary
from liyuan.story.settle import Settle
from liyuan.story.stale import REWRITE_UNTIL_KEY, rewrite_goal
from liyuan.story.view import (
    COMPACT_FAILED_TYPE,
    SUMMARY_ENTRY_TYPE,
)
from liyuan.text import utf16_len

__all__ = [
    "DEFAULT_EVERY_N_TURNS", "KEEP_RECENT_TURNS", "MANUAL_MIN_COMPACT_CHARS", "MIN_COMPACT_CHARS",
    "Archive", "CompactionPlan", "CompactionSettings", "compact_now", "covered_range_holds",
    "plan_compaction", "run_compaction",
]

_log = logging.getLogger(__name__)

KEEP_RECENT_TURNS = 6
MIN_COMPACT_CHARS = 2000
BUSY_MESSAGE = "正在演出中，稍后再压缩"
"""Why a compaction did nothing mid-turn (outcome reason ``busy``)."""
MANUAL_MIN_COMPACT_CHARS = 500
DEFAULT_EVERY_N_TURNS = 30


@dataclass(frozen=True)
class CompactionSettings:
    """What one story compaction reads: the card's names and its slice of the memory's settings
    (:meth:`liyuan.config.MemoryConfig.compaction` builds it), so a setting added there reaches
    :func:`run_compaction` without touching a signature."""

    user_name: str
    """The user's character name."""
    char_name: str
    """The card character's name."""
    language: str = "中文"
    """Output language of the summary."""
    every_n_turns: int = DEFAULT_EVERY_N_TURNS
    """The period (see :func:`plan_compaction`)."""
    min_chars: int = MIN_COMPACT_CHARS
    """Floor on the covered text."""
    keep: int = KEEP_RECENT_TURNS
    """Turns kept verbatim."""
    max_input_chars: int = SIDE_INPUT_MAX_CHARS
    """Budget of the covered text sent to the model (UTF-16 units); beyond it the oldest text
    is left out (the prompt and the activity line say how much). The archive still gets all of it."""
    backoff: bool = True
    """Honour the failure backoff (automatic runs); a manual ``/compact`` does not (:meth:`manual`)."""

    def manual(self) -> CompactionSettings:
        """Manual ``/compact``: no waiting for the period (``every_n_turns=1``), a 500-char
        floor, no failure backoff (the user asked; a failure is still recorded)."""
        return replace(self, every_n_turns=1, min_chars=MANUAL_MIN_COMPACT_CHARS, backoff=False)


@dataclass(frozen=True)
class CompactionPlan:
    """What one compaction would cover."""

    covers_through_id: str
    """Id of the last covered entry (inclusive): the new summary's anchor."""
    covered: tuple[Entry, ...]
    turns: int
    """User turns covered this time."""
    conversation_text: str
    """The covered region serialized for the summariser (and the archive)."""
    previous_summary: str | None
    """The active summary being replaced; merged into the new one."""
    rewrite_until: str | None = None
    """After an edit: the withheld summary's anchor this rewrite has not reached yet (the
    summary carries it on, :data:`~liyuan.story.stale.REWRITE_UNTIL_KEY`)."""


# --8<-- [start:plan_compaction]
def plan_compaction(
    branch: Sequence[Entry],
    *,
    user_name: str,
    char_name: str,
    keep: int = KEEP_RECENT_TURNS,
    every_n_turns: int = DEFAULT_EVERY_N_TURNS,
    min_chars: int = MIN_COMPACT_CHARS,
) -> CompactionPlan | None:
    """Decide whether the branch is due for compaction, and what to cover.

    A turn is a user message after the active summary. Compaction is due when there are
    at least ``keep + every_n_turns`` such turns and the covered text, serialized, is at
    least ``min_chars`` long (UTF-16 units, prefixes and separators included). The cut
    lands just before the ``keep``-th user message from the end, so whole turns are kept.
    While the relay is being rewritten after an edit or deletion (:func:`~liyuan.story.stale.rewrite_goal`),
    a compaction covers at most ``every_n_turns`` turns, the oldest, so no request
    outgrows a regular one and none of the text is left out.

    Args:
        branch: Root-to-leaf entries.
        user_name: Name written before user text.
        char_name: Name written before assistant text.
        keep: Turns kept verbatim (at least 1).
        every_n_turns: The period; ``<= 0`` disables compaction.
        min_chars: Floor on the serialized covered text.

    Returns:
        The plan, or ``None`` when nothing is due.

    Raises:
        ConfigError: When ``keep`` is below 1.
    """
    if keep < 1:
        raise ConfigError(f"保留轮数至少为 1，收到 {keep}")
    # --8<-- [start:plan_rule]
    if every_n_turns <= 0:
        return None
    view, active = story_tail(branch)
    live = view[active.cut:] if active else view
    # Only type and role mark a turn: backstage user messages on the story branch count too.
    turn_starts = [i for i, e in enumerate(live) if e.type == "message" and e.role == "user"]
    if len(turn_starts) < keep + every_n_turns:
        return None
    most = covering = len(turn_starts) - keep
    goal = rewrite_goal(branch, live, view[active.index].data.get(REWRITE_UNTIL_KEY) if active else None)
    if goal is not None:
        covering = min(every_n_turns, most)  # a rewrite after an edit goes a period at a time, oldest first
    while True:
        cut_at = turn_starts[covering]
        if cut_at <= 0:
            return None
        covered = tuple(live[:cut_at])
        text = serialize_for_summary(covered, user_name, char_name)
        if utf16_len(text) < min_chars:
            if covering >= most:
                return None
            covering += 1  # a rewrite's period too short for the floor: a turn more
            continue
        break
    # --8<-- [end:plan_rule]
    return CompactionPlan(
        covers_through_id=covered[-1].id,
        covered=covered,
        turns=covering,
        conversation_text=text,
        previous_summary=active.summary if active else None,
        rewrite_until=live[goal].id if goal is not None and goal >= cut_at else None,
    )
# --8<-- [end:plan_compaction]


# -- running ----------------------------------------------------------------------

Archive = Callable[[str, str], object]
"""Called as ``archive(conversation_text, covers_through_id)`` before the summary lands:
the covered text and the id of its last entry (so archive chunks can know their branch).
Errors are swallowed."""

# --8<-- [start:covered_range_holds]
def covered_range_holds(plan: CompactionPlan, branch: Sequence[Entry]) -> bool:
    """True while ``plan``'s covered range is still the live start of ``branch``, unchanged.

    That is: the same summary is active (the one the plan merges), and the first entries
    after it are the covered ones, as the story view reads them now. Turns appended after
    the covered range change nothing; a reroll or rewind that leaves the range, an edit
    (``rp-draft-op``) of a covered reply, or a newer summary makes the plan stale.
    Reads only the live part of the branch (:func:`story_tail`).
    """
    view, active = story_tail(branch)
    if (active.summary if active else None) != plan.previous_summary:
        return False
    start = active.cut if active else 0
    count = len(plan.covered)
    return len(view) - start >= count and view[start:start + count] == list(plan.covered)
# --8<-- [end:covered_range_holds]


@dataclass
class _Story:
    """The story's parts of the compaction protocol (:class:`liyuan.compaction.Compactor`)."""

    user_name: str
    language: str
    state_text: str
    archive: Archive | None
    max_input_chars: int
    entry_type: str = SUMMARY_ENTRY_TYPE

    def prompt(self, plan: CompactionPlan) -> Prompt:
        sent, omitted = keep_newest(plan.conversation_text, self.max_input_chars)
        return build_summary_prompt(sent, omitted_chars=omitted, state_text=self.state_text,
                                    previous_summary=plan.previous_summary, language=self.language,
                                    user_name=self.user_name)

    def started(self, plan: CompactionPlan) -> str:
        omitted = keep_newest(plan.conversation_text, self.max_input_chars)[1]
        left_out = f"；最早的 {omitted} 字放不进一次请求，没有发给旁路模型" if omitted else ""
        return f"正在压缩前情（{plan.turns} 轮 · {utf16_len(plan.conversation_text)} 字{left_out}）…"

    def check(self, reply: str, plan: CompactionPlan, instructions: str) -> str:
        return validate_summary(reply, instructions=instructions)

    def entry_data(self, plan: CompactionPlan, summary: str, completion: Completion) -> Mapping[str, object]:
        return {
            "summary": summary,
            "coversThroughId": plan.covers_through_id,
            "turns": plan.turns,
            "chars": utf16_len(plan.conversation_text),
            # Scripted summaries must never pass for model output downstream.
            "provenance": completion.provenance,
            **({REWRITE_UNTIL_KEY: plan.rewrite_until} if plan.rewrite_until else {}),
        }

    def holds(self, plan: CompactionPlan, branch: Sequence[Entry]) -> bool:
        return covered_range_holds(plan, branch)

    def failed(self, plan: CompactionPlan, reason: FailReason, error: str,
               completion: Completion | None) -> tuple[str, tuple[str, Mapping[str, object]] | None]:
        # A failure is recorded on the branch it happened on, like a summary, so the backoff counts it.
        line = f"前情压缩失败：{error}" if reason == "model-error" else f"前情摘要拒绝提交：{error}"
        return line, (COMPACT_FAILED_TYPE, failure_data(reason, error, plan.covers_through_id, completion))

    def stale(self) -> str:
        return "压缩已丢弃（它盖住的那段已不在当前分支上：重来、回档或改动）"

    def compacted(self, plan: CompactionPlan, summary: str) -> str:
        return f"前情已压缩：{plan.turns} 轮 {utf16_len(plan.conversation_text)} 字 → 摘要 {utf16_len(summary)} 字"

    def before_append(self, plan: CompactionPlan) -> None:
        if self.archive is not None:
            try:
                self.archive(plan.conversation_text, plan.covers_through_id)
            except Exception as exc:  # best effort by design: the summary keeps continuity
                _log.warning("压缩前归档失败（已忽略）：%s", exc)


# --8<-- [start:run_compaction]
def run_compaction(
    tree: SessionTree,
    model: ChatModel,
    settings: CompactionSettings,
    *,
    archive: Archive | None = None,
    on_activity: Callable[[str], None] | None = None,
    state_text: str | None = None,
    hold: HeldLandings | None = None,
    settle: Settle | None = None,
) -> CompactionOutcome[CompactionPlan]:
    """Compact the current branch if due: summarise, guard, archive, append.

    The summary is appended at the leaf as ``rp-summary``
    ``{summary, coversThroughId, turns, chars, provenance}`` only if the model call
    succeeded, the covered range is still the live start of the current branch
    (:func:`covered_range_holds`: turns appended meanwhile are fine, the summary is
    anchored at what it covers; a reroll, rewind or edit inside the range drops it), and the reply passes
    :func:`~liyuan.story.scribe.validate_summary` (the steps after planning are
    :func:`liyuan.compaction.run_compactor`, shared with discussion compaction). A model
    error or a rejected reply appends an ``rp-compact-failed`` entry ``{reason, error,
    coversThroughId, provenance, finishReason}`` instead (on the same condition); the next
    trigger tries again, and after a few failures in a row only once the wait of
    :func:`liyuan.story.backoff.backoff_wait` has passed (a waiting turn plans nothing: its
    outcome has ``plan=None``; the backoff line goes to ``on_activity`` once per failure,
    on the first turn that waits, and is on every waiting turn's outcome). Never raises
    for model failures: whatever the model object's ``complete()`` raises (an
    ``Exception``), and a reply with a lone surrogate, is a ``failed`` outcome (see
    :func:`liyuan.model.side_call`); errors in this package's own code are not caught.

    Args:
        tree: The session tree; only its current branch is read.
        model: The side model that writes the summary.
        settings: The names and the settings read (:class:`CompactionSettings`).
        archive: Called as ``archive(text, covers_through_id)`` before the summary lands (vector memory).
        on_activity: Receives every activity/result line as it happens.
        state_text: The ledger text; default: :func:`format_state` of the branch's latest snapshot.
        hold: Given (a chat's background lane), a run that finds a turn under way plans on
            the branch up to that turn's user message, and a summary ready mid-turn is
            handed to ``hold`` to land after the reply (see :func:`liyuan.compaction.run_compactor`);
            without it such a run does nothing (``busy``); nor does a run while a summary
            it holds waits to land (planning then would write that summary again).
        settle: Given, a compaction that is due first asks it whether the last turns are
            stable (:mod:`liyuan.story.settle`); while they are not, it waits (``unsettled``,
            one activity line) and the next recorded turn asks again.

    Returns:
        The outcome; ``message`` is the line shown to the user.
    """
    emit = on_activity or (lambda _line: None)
    if hold is not None and hold.pending:
        return CompactionOutcome("skipped", HELD_MESSAGE, reason="busy")
    branch = tree.branch()
    if branch and awaits_reply(branch[-1]):
        # Mid-turn (the app prepared a turn and has not recorded its reply): a summary
        # appended now would sit between the user's words and their reply.
        if hold is None:
            emit(BUSY_MESSAGE)
            return CompactionOutcome("skipped", BUSY_MESSAGE, reason="busy")
        branch = branch.head(len(branch) - 1)  # plan on the turns recorded; the summary waits for the reply
    if settings.backoff and settings.every_n_turns > 0:
        # The wait is read from the live part alone; planning serializes the whole covered
        # region, so a turn that waits must not pay for a plan it will not use.
        streak, wait = compaction_backoff(branch, settings.every_n_turns)
        if wait > 0:
            message = backoff_message(streak, wait)
            if streak.turns_since <= 1:
                # Said once per failure (on the first turn that waits), not on every turn of
                # the wait: the outcome still carries the line with the turns left.
                emit(message)
            return CompactionOutcome("skipped", message, reason="backoff")
    plan = plan_compaction(branch, user_name=settings.user_name, char_name=settings.char_name, keep=settings.keep,
                           every_n_turns=settings.every_n_turns, min_chars=settings.min_chars)
    if plan is None:
        # Not due is the normal state of almost every turn: the message is on the outcome
        # (a manual /compact shows it), but it is not an activity line.
        return CompactionOutcome("skipped", "早期剧情还不够长，暂不需要压缩", reason="not-due")
    if settle is not None and (why := settle(branch)) is not None:
        emit(why)
        return CompactionOutcome("skipped", why, reason="unsettled")
    state = state_text if state_text is not None else format_state(state_from_branch(branch))
    story = _Story(settings.user_name, settings.language, state, archive, settings.max_input_chars)
    return run_compactor(tree, model, story, plan, emit=emit, hold=hold)
# --8<-- [end:run_compaction]


def compact_now(
    tree: SessionTree,
    model: ChatModel,
    settings: CompactionSettings,
    *,
    archive: Archive | None = None,
    on_activity: Callable[[str], None] | None = None,
    state_text: str | None = None,
    busy: bool = False,
) -> CompactionOutcome[CompactionPlan]:
    """Manual ``/compact``: :func:`run_compaction` with :meth:`CompactionSettings.manual`
    (no waiting for the period, a 500-char floor, no failure backoff).

    ``busy`` is true while a turn is being performed: then nothing happens
    (``skipped``/``busy``). The other arguments are those of :func:`run_compaction`.
    """
    if busy:
        if on_activity is not None:
            on_activity(BUSY_MESSAGE)
        return CompactionOutcome("skipped", BUSY_MESSAGE, reason="busy")
    return run_compaction(tree, model, settings.manual(), archive=archive, on_activity=on_activity,
                          state_text=state_text)
