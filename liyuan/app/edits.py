"""``chat.edit`` and ``chat.delete``: change one earlier message, keep every later one (issue 38).

The change is one entry appended to the tree (``rp-edit`` / ``rp-delete``, see
:mod:`liyuan.session.edits`); the message keeps its old text on record. From then on:

- every reader of the story reads the edited text (or no longer sees a deleted message):
  the history sent to the role-play model, the next compaction's input, the chat's recap
  evidence, the turn counts;
- every summary that covered the message is stale and never replayed again; the relay
  is rewritten from the last summary that did not cover it, a period (``every_n_turns``
  turns) per compaction, right after the change on the chat's background lane
  (:mod:`liyuan.story.stale`); until it lands a turn carries the older summary and the
  verbatim turns after it, within ``history_max_chars``, and ``turn.record.withheld``
  says what was left out;
- vector memory drops every chunk holding the old text and archives the new one
  (:mod:`liyuan.vector.retract`);
- the chat's session moved, so the next card sync recaps it again, from scratch (the old
  recap is not shown to the model), and the merge takes the chat's old lines back by
  their source (:mod:`liyuan.card.revised`).

Refused with a clear error and nothing written: an id that is not on the current branch,
a message that is not part of the story (an agent or authoring exchange, a tool receipt),
one already deleted, an empty or unchanged text, and any change while a turn is waiting
for its reply (the change would sit between the user's words and the reply).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from liyuan.context.record import TurnRecord, WithheldRecord
from liyuan.errors import ConfigError, StateError, TreeError
from liyuan.session.branch import BranchView
from liyuan.session.edits import (
    DELETE_ENTRY_TYPE,
    EDIT_ENTRY_TYPE,
    REVISION_TYPES,
    revised_text,
    revision_target,
    revisions,
)
from liyuan.session.entries import Entry, awaits_reply
from liyuan.session.tree import SessionTree
from liyuan.story.stale import Withheld, stale_summaries
from liyuan.vector.retract import retract_message

if TYPE_CHECKING:
    from liyuan.vector.memory import VectorMemory

__all__ = ["Revision", "has_revisions", "resident_for_turn", "resident_withheld", "retract_in_vectors", "revise"]


@dataclass(frozen=True)
class Revision:
    """One edit or deletion as written."""

    entry: Entry
    """The ``rp-edit`` / ``rp-delete`` entry."""
    target: Entry
    """The message it changes (as stored: its original text)."""
    old: str
    """The message's text just before this change (earlier edits applied)."""
    new: str | None
    """Its new text; ``None`` for a deletion."""
    withheld: tuple[Withheld, ...]
    """The summaries this change made stale."""

    def line(self) -> str:
        """The activity line (Chinese)."""
        what = "已改" if self.new is not None else "已删"
        if not self.withheld:
            return f"{what}一条更早的消息；它还没有被压缩过，前情摘要不受影响"
        return (f"{what}一条更早的消息：盖住它的 {len(self.withheld)} 份前情摘要不再使用，"
                "前情从之前最后一份没盖住它的摘要起重写（每次压缩一个周期的轮数）")


def _story_text(branch: Sequence[Entry], target: Entry) -> str | None:
    """The message's text now: its revisions on the branch applied (``None``: deleted)."""
    text: str | None = target.text
    for _at, entry in revisions(branch):
        if revision_target(entry) == target.id and text is not None:
            text = revised_text(text, entry.data, entry.custom_type)
    return text


def revise(tree: SessionTree, entry_id: str, text: str | None) -> Revision:
    """Check and append one edit (``text``) or deletion (``None``); call under ``tree.lock``.

    Raises:
        ConfigError: ``entry_id`` or ``text`` of the wrong type, an empty or unchanged text.
        TreeError: No such entry on the current branch.
        StateError: A turn waits for its reply, the entry is not a story message, or it is deleted already.
    """
    if not isinstance(entry_id, str) or not entry_id:
        raise ConfigError(f"要改的消息 id 应是非空字符串，实际是 {entry_id!r}")
    if text is not None and (not isinstance(text, str) or not text.strip()):
        raise ConfigError("改后的文字不能为空；要去掉这条消息请用 delete()")
    branch = tree.branch()
    if branch and awaits_reply(branch[-1]):
        raise StateError("这一轮还在等回复：先 record() 这一轮的回复，再改或删更早的消息")
    target = tree.get(entry_id)
    if target is None or entry_id not in branch.ids():
        raise TreeError(f"当前分支上没有这条消息：{entry_id!r}")
    mode = target.body.get("mode")
    if target.type != "message" or target.role not in ("user", "assistant") or mode not in (None, "roleplay"):
        raise StateError("只能改或删剧情里的用户消息和回复（不是工具回执、讨论或编写模式的消息）")
    old = _story_text(branch, target)
    if old is None:
        raise StateError("这条消息已经删掉了")
    if text is not None and text == old:
        raise ConfigError("改后的文字和现在一样，没有可改的")
    if text is None:
        entry = tree.append_custom(DELETE_ENTRY_TYPE, {"target": entry_id})
    else:
        entry = tree.append_custom(EDIT_ENTRY_TYPE, {"target": entry_id, "text": text})
    stale = stale_summaries(tree.branch())  # the change is the last entry: every stale summary is found
    return Revision(entry, target, old, text, tuple(w for w in stale.values() if entry_id in w.targets))


def retract_in_vectors(vector: VectorMemory, change: Revision, say: Callable[[str], None]) -> None:
    """Run on the chat's lane: take the old text out of vector memory (a failure is one line)."""
    try:
        removed = retract_message(vector, entry_id=change.target.id, old=change.old, new=change.new,
                                  anchors={w.anchor for w in change.withheld}, edit_id=change.entry.id)
    except Exception as exc:  # best effort, like the archive: the turn must not fail for it
        say(f"向量记忆没能撤回改动前的文字：{exc}")
        return
    if removed:
        say(f"向量记忆撤回了 {removed} 块含改动前文字的片段")


def resident_for_turn(resident: str | None, branch: Sequence[Entry],
                      held: Callable[[Collection[str]], bool] | None) -> tuple[str | None, bool]:
    """The resident summary to send, and whether it was held back: a chat with an edit or
    deletion the card has not merged yet does not send it (it was merged from the old text;
    :func:`liyuan.card.revised.resident_held_back`). Reads nothing for a chat never edited."""
    if not resident or held is None:
        return resident, False
    found = [entry.id for _at, entry in revisions(branch)]
    if found and held(found):
        return None, True
    return resident, False


def resident_withheld(record: TurnRecord, resident_file: str) -> TurnRecord:
    """``record`` noting that the resident summary was held back (``withheld.resident``)."""
    name = f"file:{resident_file}" if resident_file else "resident"
    base = record.withheld or WithheldRecord((), (), None)
    return replace(record, withheld=replace(base, resident=name))


def has_revisions(tree: SessionTree, branch: Sequence[Entry]) -> bool:
    """Whether ``branch`` may hold an edit, deletion or revision: on the tree's current branch
    answered from its index (nothing read per turn); any other sequence (a test's wrapper)
    is not read at all: the tree's entries are (each entry's ``customType`` was noted at open)."""
    if isinstance(branch, BranchView):
        found = branch.custom_positions(REVISION_TYPES)
        if found is not None:
            return bool(found)
    return any(entry.type == "custom" and entry.custom_type in REVISION_TYPES for entry in tree)
