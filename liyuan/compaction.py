"""The one compaction protocol that story and discussion compaction share.

A compaction is: plan (pure: what to cover, or nothing) → prompt → side call → reply
checks → leaf-guarded append → outcome. The plan and the prompt differ between the story
(:mod:`liyuan.story.compact`) and an agent discussion (:mod:`liyuan.discussion.compact`);
everything after them is here, once:

- :func:`run_compactor` makes the side call, turns every failure into a ``failed``
  outcome (never an exception), refuses a reply that fails the kind's checks or stopped
  at its token limit, and appends the kind's entry only if the leaf the plan was made on
  is still the leaf, checked and appended under the tree's lock as one step.
- :func:`refuse_echo` is the check every summary reply gets first: a reply that carries
  one of our prompt tags, or repeats the system prompt's own sentences, copied its input.
- :class:`CompactionOutcome` is the one outcome type, with ``Literal`` kinds and reasons.

Invariant: the session tree is only appended to, and only on success or to record a
failure (what the kind's :meth:`Compactor.failed` does is up to it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from liyuan.errors import ModelError, ModelOutputError
from liyuan.model import ChatModel, Completion, cut_off_note, require_finished, side_call
from liyuan.prompts import Prompt, echoed_instructions, echoed_tag
from liyuan.session.entries import Entry
from liyuan.session.tree import SessionTree

__all__ = ["CompactionOutcome", "Compactor", "FailReason", "OutcomeKind", "Reason", "refuse_echo", "run_compactor"]

OutcomeKind = Literal["compacted", "skipped", "cancelled", "failed", "stale"]
"""``cancelled`` only where a hook may say no (the harness's generic agent baseline)."""
Reason = Literal["", "not-due", "busy", "backoff", "nothing-to-cut", "hook", "model-error", "empty-summary",
                 "invalid-summary", "leaf-moved"]
"""Why an outcome is what it is; ``""`` for a compaction that landed."""
FailReason = Literal["model-error", "empty-summary", "invalid-summary"]

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

    def failed(self, plan: PlanT_contra, reason: FailReason, error: str, completion: Completion | None) -> str:
        """The line for a failure (the kind may record it, under the same leaf guard)."""
        ...

    def stale(self) -> str:
        """The line for a plan the leaf moved away from."""
        ...

    def compacted(self, plan: PlanT_contra, summary: str) -> str:
        """The line for a summary that landed."""
        ...

    def before_append(self, plan: PlanT_contra) -> None:
        """Work that must precede the append (the story archives its covered text); best effort."""
        ...


def run_compactor(tree: SessionTree, model: ChatModel, compactor: Compactor[PlanT], plan: PlanT, *,
                  leaf_before: str | None, emit: Callable[[str], None]) -> CompactionOutcome[PlanT]:
    """Side call, reply checks, leaf-guarded append: the steps after planning, for any kind.

    Never raises for the model's failures (:func:`liyuan.model.side_call`): a failed call,
    an empty or refused reply and a reply cut off at its token limit are ``failed``
    outcomes; a leaf that moved during the call makes the plan ``stale``. Every outcome's
    line goes to ``emit``.

    Args:
        tree: The session tree the plan was made on.
        model: The side model.
        compactor: The kind's parts.
        plan: What to cover.
        leaf_before: The leaf the plan was made on (the guard).
        emit: Receives the activity lines.
    """

    def done(kind: OutcomeKind, message: str, reason: Reason = "", summary: str | None = None,
             entry: Entry | None = None) -> CompactionOutcome[PlanT]:
        emit(message)
        return CompactionOutcome(kind, message, plan, summary, entry, reason)

    def fail(reason: FailReason, error: str, completion: Completion | None) -> CompactionOutcome[PlanT]:
        return done("failed", compactor.failed(plan, reason, error, completion), reason)

    emit(compactor.started(plan))
    prompt = compactor.prompt(plan)
    try:
        completion = side_call(model, prompt.request())
    except ModelOutputError as exc:  # a reply no file can hold (a lone surrogate): malformed
        return fail("invalid-summary", str(exc), None)
    except ModelError as exc:
        return fail("model-error", str(exc), None)
    # --8<-- [start:leaf_guard]
    # Leaf guard: a reroll, rewind or line switch during the call makes the plan stale.
    if tree.leaf_id != leaf_before:
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
    with tree.lock:  # the guard and the append are one step against another thread's navigation
        if tree.leaf_id != leaf_before:
            return done("stale", compactor.stale(), "leaf-moved")
        entry = tree.append_custom(compactor.entry_type, compactor.entry_data(plan, summary, completion))
    # --8<-- [end:leaf_guard]
    return done("compacted", compactor.compacted(plan, summary), summary=summary, entry=entry)
