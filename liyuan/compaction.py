"""The one compaction protocol that story and discussion compaction share.

A compaction is: plan (pure: what to cover, or nothing) → prompt → side call → reply
checks → leaf-guarded append → outcome. The plan and the prompt differ between the story
(:mod:`liyuan.story.compact`) and an agent discussion (:mod:`liyuan.discussion.compact`);
everything after them is here, once:

- :func:`run_compactor` makes the side call, turns every failure into a ``failed``
  outcome (never an exception), refuses a reply that fails the kind's checks or stopped
  at its token limit, and appends the kind's entry only while the plan still holds on
  the current branch (:meth:`Compactor.holds`: for the story, the covered range is still
  the live start of the branch, unchanged, however many turns were appended since; for a
  discussion, the leaf did not move), checked and appended under the tree's lock as one
  step.
- Nothing is ever appended between a user's words and their reply: a result that is
  ready while a turn is under way is handed to ``hold`` (the chat lands it right after
  the reply is recorded, checking again) or, with no ``hold``, dropped.
- :func:`refuse_echo` is the check every summary reply gets first: a reply that carries
  one of our prompt tags, or repeats the system prompt's own sentences, copied its input.
- :class:`CompactionOutcome` is the one outcome type, with ``Literal`` kinds and reasons.

Invariant: the session tree is only appended to, and only on success or to record a
failure (what the kind's :meth:`Compactor.failed` does is up to it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from liyuan.errors import ModelError, ModelOutputError, TreeError
from liyuan.model import ChatModel, Completion, cut_off_note, require_finished, side_call
from liyuan.prompts import Prompt, echoed_instructions, echoed_tag
from liyuan.session.entries import Entry, awaits_reply
from liyuan.session.tree import SessionTree

__all__ = ["HELD_MESSAGE", "MID_TURN_MESSAGE", "CompactionOutcome", "Compactor", "FailReason", "HeldLandings", "Hold",
           "Landing",
           "OutcomeKind", "Reason", "refuse_echo", "run_compactor"]

OutcomeKind = Literal["compacted", "skipped", "cancelled", "failed", "stale", "held"]
"""``cancelled`` only where a hook may say no (the harness's generic agent baseline);
``held``: the summary is ready but a turn is under way, it lands after the reply."""
Reason = Literal["", "not-due", "busy", "backoff", "nothing-to-cut", "hook", "model-error", "empty-summary",
                 "invalid-summary", "leaf-moved", "mid-turn", "unsettled"]
"""Why an outcome is what it is; ``""`` for a compaction that landed (or was held)."""

HELD_MESSAGE = "前情摘要已写好，这一轮的回复记下后再落定"
"""The line of a summary that was ready while a turn was under way (outcome ``held``)."""
MID_TURN_MESSAGE = "压缩已丢弃（写好时正有一条用户消息在等回复，摘要不能插在它和回复之间）"
"""The line of a summary ready mid-turn when no one can land it later (no ``hold``)."""
FailReason = Literal["model-error", "empty-summary", "invalid-summary"]

_log = logging.getLogger(__name__)

PlanT = TypeVar("PlanT")
PlanT_contra = TypeVar("PlanT_contra", contravariant=True)


@dataclass(frozen=True)
class CompactionOutcome(Generic[PlanT]):
    """What a compaction attempt did (story, discussion, or the harness's baselines)."""

    kind: OutcomeKind
    message: str
    """The Chinese activity/result line shown to the user."""
    plan: PlanT | None = None
    """What the attempt covered; ``None`` when it planned nothing (not due, busy, waiting)."""
    summary: str | None = None
    """The summary that landed (only when compacted)."""
    entry: Entry | None = None
    """The appended summary entry (only when compacted)."""
    reason: Reason = ""
    """Machine-readable cause (see :data:`Reason`)."""


def refuse_echo(answer: str, instructions: str, what: str) -> None:
    """Refuse a reply that copied its input: one of our tags, or the system prompt's sentences.

    Material goes into prompts neutralised (:func:`liyuan.prompts.neutralize`), so a
    genuine reply never holds ``<conversation>`` and the like; a small model's echo does.

    Raises:
        ModelOutputError: Naming the tag or the repeated sentence.
    """
    tag = echoed_tag(answer)
    if tag is not None:
        raise ModelOutputError(f"{what}里出现了 prompt 自己的标签 {tag}：像是照抄了输入")
    echo = echoed_instructions(answer, instructions) if instructions else None
    if echo is not None:
        raise ModelOutputError(f"{what}照抄了 prompt 里的要求（如「{echo}」）：不是{what}")


class Compactor(Protocol[PlanT_contra]):
    """What one kind of compaction supplies to :func:`run_compactor`, for one plan."""

    @property
    def entry_type(self) -> str:
        """The custom entry a landed summary is appended as."""
        ...

    def prompt(self, plan: PlanT_contra) -> Prompt:
        """The side model's prompt for ``plan``."""
        ...

    def started(self, plan: PlanT_contra) -> str:
        """The activity line said before the call."""
        ...

    def check(self, reply: str, plan: PlanT_contra, instructions: str) -> str:
        """The reply cleaned, or :class:`~liyuan.errors.ModelOutputError` with a Chinese reason."""
        ...

    def entry_data(self, plan: PlanT_contra, summary: str, completion: Completion) -> Mapping[str, object]:
        """The data of the appended entry (it carries the reply's provenance)."""
        ...

    def holds(self, plan: PlanT_contra, branch: Sequence[Entry]) -> bool:
        """True while ``plan`` still applies to ``branch`` (the current one): its entry may land."""
        ...

    def failed(self, plan: PlanT_contra, reason: FailReason, error: str,
               completion: Completion | None) -> tuple[str, tuple[str, Mapping[str, object]] | None]:
        """The line for a failure, and the custom entry ``(type, data)`` recording it, if the
        kind records failures (it is appended like a summary: while the plan holds, never mid-turn)."""
        ...

    def stale(self) -> str:
        """The line for a plan that no longer holds on the current branch."""
        ...

    def compacted(self, plan: PlanT_contra, summary: str) -> str:
        """The line for a summary that landed."""
        ...

    def before_append(self, plan: PlanT_contra) -> None:
        """Work that must precede the append (the story archives its covered text); best effort."""
        ...


Landing = Callable[[], "CompactionOutcome[Any] | None"]
"""A held append, tried again by whoever holds it: returns the outcome to report, or ``None``."""
Hold = Callable[[Landing], None]
"""Takes a landing that could not happen mid-turn (called under the tree's lock)."""


class HeldLandings:
    """A :data:`Hold` that keeps landings until :meth:`land` (a chat's, guarded by its tree's lock)."""

    def __init__(self) -> None:
        self._held: list[Landing] = []

    def __call__(self, landing: Landing) -> None:
        self._held.append(landing)

    @property
    def pending(self) -> bool:
        """True while a landing waits (a new plan now would redo its summary)."""
        return bool(self._held)

    def land(self) -> list[CompactionOutcome[Any]]:
        """Try each held landing again (the leaf should not await a reply): the outcomes to
        report, landed or dropped; one that has to wait again is held again, unreported."""
        held, self._held = self._held, []
        outcomes = [landing() for landing in held]
        return [o for o in outcomes if o is not None and o.kind != "held"]


def run_compactor(tree: SessionTree, model: ChatModel, compactor: Compactor[PlanT], plan: PlanT, *,
                  emit: Callable[[str], None], hold: Hold | None = None) -> CompactionOutcome[PlanT]:
    """Side call, reply checks, guarded append: the steps after planning, for any kind.

    Never raises for the model's failures (:func:`liyuan.model.side_call`): a failed call,
    an empty or refused reply and a reply cut off at its token limit are ``failed``
    outcomes; a plan that no longer holds on the current branch (:meth:`Compactor.holds`)
    is ``stale``. A result ready while the current branch ends in a user message waiting
    for its reply is given to ``hold`` (outcome ``held``; the landing checks again when it
    is run) or, without ``hold``, dropped (``stale``/``mid-turn``). Every outcome's line
    goes to ``emit``; a held landing returns its outcome instead, for its runner to report.

    Args:
        tree: The session tree the plan was made on.
        model: The side model.
        compactor: The kind's parts.
        plan: What to cover.
        emit: Receives the activity lines.
        hold: Keeps a landing that has to wait for the turn under way (the chat's).
    """

    def done(kind: OutcomeKind, message: str, reason: Reason = "", summary: str | None = None,
             entry: Entry | None = None) -> CompactionOutcome[PlanT]:
        emit(message)
        return CompactionOutcome(kind, message, plan, summary, entry, reason)

    # --8<-- [start:leaf_guard]
    def place(entry_type: str, data: Mapping[str, object], retry: Landing) -> Entry | Reason | None:
        """Append under the lock if the plan holds and no turn is under way; else why not
        (``None``: handed to ``hold``)."""
        with tree.lock:  # the check and the append are one step against another thread's turn
            branch = tree.branch()
            if not compactor.holds(plan, branch):
                return "leaf-moved"
            if branch and awaits_reply(branch[-1]):
                if hold is None:
                    return "mid-turn"
                hold(retry)
                return None
            return tree.append_custom(entry_type, data)
    # --8<-- [end:leaf_guard]

    def fail(reason: FailReason, error: str, completion: Completion | None) -> CompactionOutcome[PlanT]:
        line, note = compactor.failed(plan, reason, error, completion)
        if note is not None:
            def note_later() -> None:  # best effort: a failure that cannot be noted only costs its count
                try:
                    place(*note, note_later)
                except TreeError as exc:
                    _log.warning("无法记下压缩失败（已忽略）：%s", exc)

            note_later()
        return done("failed", line, reason)

    emit(compactor.started(plan))
    prompt = compactor.prompt(plan)
    try:
        completion = side_call(model, prompt.request())
    except ModelOutputError as exc:  # a reply no file can hold (a lone surrogate): malformed
        return fail("invalid-summary", str(exc), None)
    except ModelError as exc:
        return fail("model-error", str(exc), None)
    # Branch guard: a reroll, rewind or edit that takes the covered range off the branch
    # makes the plan stale; turns appended after it do not.
    if not compactor.holds(plan, tree.branch()):
        return done("stale", compactor.stale(), "leaf-moved")
    try:
        summary = compactor.check(completion.text, plan, prompt.system)
    except ModelError as exc:
        reason: FailReason = "empty-summary" if not completion.text.strip() else "invalid-summary"
        return fail(reason, f"{exc}{cut_off_note(completion)}", completion)
    try:
        require_finished(completion, "摘要")  # every check passed, but the reply was cut off
    except ModelError as exc:
        return fail("invalid-summary", str(exc), completion)
    compactor.before_append(plan)
    data = compactor.entry_data(plan, summary, completion)

    def land() -> CompactionOutcome[PlanT]:
        placed = place(compactor.entry_type, data, land)
        if placed is None:
            return done("held", HELD_MESSAGE)
        if placed == "leaf-moved":
            return done("stale", compactor.stale(), "leaf-moved")
        if placed == "mid-turn":
            return done("stale", MID_TURN_MESSAGE, "mid-turn")
        assert isinstance(placed, Entry)
        return done("compacted", compactor.compacted(plan, summary), summary=summary, entry=placed)

    return land()
