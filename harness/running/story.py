"""What of a scenario's chat is not a turn: its opening and an import's notes; its turns.

Invariant: the entries written here depend only on the chat's definition. The opening
is the greeting (an assistant message marked ``greeting``) after its alternatives
(siblings, as an import writes alternate greetings), an import's notes, then the first
``rp-state`` ledger; an imported turn's notes (messages kept outside the story) are
``liyuan-import-note`` entries written after the turn. The turns themselves are played
through :class:`liyuan.Chat` (:func:`harness.steps.story_steps.play_turn`). Generated
chats (``generate:`` in the scenario) come from :mod:`harness.fixtures.longstory`, which is seeded
and deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from liyuan.session.entries import IMPORT_NOTE_TYPE
from liyuan.session.state import STATE_ENTRY_TYPE, Ledger
from liyuan.session.tree import SessionTree

from .chatspec import Note
from .scenario import ChatSpec, ScriptedTurn

__all__ = ["chat_turns", "ledger_data", "write_notes", "write_opening"]


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


def write_notes(tree: SessionTree, notes: tuple[Note, ...]) -> None:
    """An imported turn's notes (messages outside the story), where the importer writes them.

    The app never writes these (only :meth:`liyuan.Card.import_chat` brings them), so no
    :class:`liyuan.Chat` method does; they are appended under the tree's lock.
    """
    with tree.lock:
        for note in notes:
            tree.append_custom(IMPORT_NOTE_TYPE, note.data())


def write_opening(tree: SessionTree, spec: ChatSpec) -> None:
    """Write the greeting and the first ledger of a fresh chat."""
    if spec.greeting:
        mode = {"mode": "agent"} if spec.mode == "agent" else {}
        _siblings(tree, "assistant", spec.greeting_swipes, greeting=True, **mode)
        tree.append_message("assistant", spec.greeting, greeting=True, **mode)
    write_notes(tree, spec.notes)
    if spec.ledger:
        tree.append_custom(STATE_ENTRY_TYPE, ledger_data(spec.ledger))


def chat_turns(spec: ChatSpec) -> tuple[ScriptedTurn, ...]:
    """The chat's turns: as written, or generated from ``generate:``."""
    if spec.generate is None:
        return spec.turns
    from ..fixtures.longstory import generate_turns

    return generate_turns(spec.generate, where=f"chats.{spec.id}.generate")
