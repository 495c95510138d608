"""Writing a scenario's chats into session trees, the way the app would.

Invariant: the entries a chat produces depend only on its definition: the greeting is an
assistant message marked ``greeting``, each beat is a user message, then the reply, then
(if given) an ``rp-state`` ledger snapshot, in that order. An imported chat adds what
:func:`liyuan.session.imports.write_messages` writes for the same chat: alternate
greetings and swiped-away messages as siblings appended before the chosen one (rerolls),
and messages outside the story as ``liyuan-import-note`` entries after the reply. Generated chats
(``generate:`` in the scenario) come from :mod:`harness.longstory`, which is seeded and
deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from liyuan.session.entries import IMPORT_NOTE_TYPE, Entry
from liyuan.session.state import STATE_ENTRY_TYPE, Ledger
from liyuan.session.tree import SessionTree

from .chatspec import Note
from .scenario import Beat, ChatSpec

__all__ = ["append_beat", "chat_beats", "ledger_data", "write_opening"]


def ledger_data(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A scenario's ledger as the tree stores it (``rp-state`` data)."""
    # Round-trip through Ledger so a typo in the scenario surfaces as a missing field
    # in the artifacts instead of an unknown key silently stored in the tree.
    return Ledger.from_dict(raw).to_dict()


def _siblings(tree: SessionTree, role: str, alternatives: tuple[str, ...], **extra: Any) -> None:
    """Append swiped-away texts as siblings of what comes next (each forks from the leaf)."""
    parent = tree.leaf_id
    for text in alternatives:
        tree.append_message(role, text, **extra)
        tree.navigate(parent)


def _notes(tree: SessionTree, notes: tuple[Note, ...]) -> None:
    for note in notes:
        tree.append_custom(IMPORT_NOTE_TYPE, note.data())


def write_opening(tree: SessionTree, spec: ChatSpec) -> None:
    """Write the greeting and the first ledger of a fresh chat."""
    if spec.greeting:
        mode = {"mode": "agent"} if spec.mode == "agent" else {}
        _siblings(tree, "assistant", spec.greeting_swipes, greeting=True, **mode)
        tree.append_message("assistant", spec.greeting, greeting=True, **mode)
    _notes(tree, spec.notes)
    if spec.ledger:
        tree.append_custom(STATE_ENTRY_TYPE, ledger_data(spec.ledger))


def append_beat(tree: SessionTree, beat: Beat, *, mode: str = "roleplay") -> Entry:
    """Append one beat; returns the reply entry (the beat's node in the tree)."""
    extra: dict[str, Any] = {"mode": mode} if mode != "roleplay" else {}
    _siblings(tree, "user", beat.user_swipes, **extra)
    tree.append_message("user", beat.user, **extra)
    for tool in beat.tools:
        # Agent turns: the call, then its receipt, before the final answer.
        tree.append_message("assistant", "", toolCalls=[{"name": tool.get("name", ""),
                                                         "args": tool.get("args", {})}], **extra)
        tree.append_message("toolResult", str(tool.get("result", "")), toolName=tool.get("name", ""), **extra)
    reply_extra = dict(extra)
    if beat.usage:
        reply_extra["usage"] = dict(beat.usage)
    _siblings(tree, "assistant", beat.swipes, **extra)
    reply = tree.append_message("assistant", beat.reply, **reply_extra)
    _notes(tree, beat.notes)
    if beat.ledger:
        tree.append_custom(STATE_ENTRY_TYPE, ledger_data(beat.ledger))
    return reply


def chat_beats(spec: ChatSpec) -> tuple[Beat, ...]:
    """The chat's beats: as written, or generated from ``generate:``."""
    if spec.generate is None:
        return spec.beats
    from .longstory import generate_beats

    return generate_beats(spec.generate, where=f"chats.{spec.id}.generate")
