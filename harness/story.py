"""Writing a scenario's chats into session trees, the way the app would.

Invariant: the entries a chat produces depend only on its definition: the greeting is an
assistant message marked ``greeting``, each beat is a user message, then the reply, then
(if given) an ``rp-state`` ledger snapshot, in that order. Generated chats
(``generate:`` in the scenario) come from :mod:`harness.longstory`, which is seeded and
deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from liyuan.session.entries import Entry
from liyuan.session.state import STATE_ENTRY_TYPE, Ledger
from liyuan.session.tree import SessionTree

from .scenario import Beat, ChatSpec

__all__ = ["append_beat", "chat_beats", "ledger_data", "write_opening"]


def ledger_data(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A scenario's ledger as the tree stores it (``rp-state`` data)."""
    # Round-trip through Ledger so a typo in the scenario surfaces as a missing field
    # in the artifacts instead of an unknown key silently stored in the tree.
    return Ledger.from_dict(raw).to_dict()


def write_opening(tree: SessionTree, spec: ChatSpec) -> None:
    """Write the greeting and the first ledger of a fresh chat."""
    if spec.greeting:
        mode = {"mode": "agent"} if spec.mode == "agent" else {}
        tree.append_message("assistant", spec.greeting, greeting=True, **mode)
    if spec.ledger:
        tree.append_custom(STATE_ENTRY_TYPE, ledger_data(spec.ledger))


def append_beat(tree: SessionTree, beat: Beat, *, mode: str = "roleplay") -> Entry:
    """Append one beat; returns the reply entry (the beat's node in the tree)."""
    extra: dict[str, Any] = {"mode": mode} if mode != "roleplay" else {}
    tree.append_message("user", beat.user, **extra)
    for tool in beat.tools:
        # Agent turns: the call, then its receipt, before the final answer.
        tree.append_message("assistant", "", toolCalls=[{"name": tool.get("name", ""),
                                                         "args": tool.get("args", {})}], **extra)
        tree.append_message("toolResult", str(tool.get("result", "")), toolName=tool.get("name", ""), **extra)
    reply_extra = dict(extra)
    if beat.usage:
        reply_extra["usage"] = dict(beat.usage)
    reply = tree.append_message("assistant", beat.reply, **reply_extra)
    if beat.ledger:
        tree.append_custom(STATE_ENTRY_TYPE, ledger_data(beat.ledger))
    return reply


def chat_beats(spec: ChatSpec) -> tuple[Beat, ...]:
    """The chat's beats: as written, or generated from ``generate:``."""
    if spec.generate is None:
        return spec.beats
    from .longstory import generate_beats

    return generate_beats(spec.generate, where=f"chats.{spec.id}.generate")
