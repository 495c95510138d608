"""What one turn's assembly reads besides the branch (:func:`liyuan.context.assemble.prepare_turn`).

Two frozen objects: the settings of the card (:class:`TurnSettings`, which
:meth:`liyuan.config.MemoryConfig.turn_settings` builds), and the blocks the app gives the
turn (:class:`AppBlocks`: the ledger, the roster, its own lore index, further blocks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from liyuan.context.budget import RESIDENT_ENVELOPE_CHARS
from liyuan.context.window import HISTORY_MAX_CHARS
from liyuan.lore.activate import DEFAULT_LORE_SHARE

__all__ = ["AppBlocks", "TurnSettings"]


@dataclass(frozen=True)
class TurnSettings:
    """The settings a turn's assembly reads."""

    names: tuple[str, str] = ("", "")
    """The user's and the character's name: the lore scan reads each message as
    ``name: message``, as SillyTavern does."""
    budget_chars: int = RESIDENT_ENVELOPE_CHARS
    """The envelope (default 4300)."""
    lore_share: float = DEFAULT_LORE_SHARE
    """The lore blocks' share of the envelope (default 0.4)."""
    history_max_chars: int = HISTORY_MAX_CHARS
    """Bound of the verbatim history (the oldest whole turns go first,
    :func:`liyuan.context.window.history_window`; the record's ``history_cut`` says what)."""


@dataclass(frozen=True)
class AppBlocks:
    """The blocks the app gives a turn (:meth:`liyuan.Chat.prepare` builds them from its arguments)."""

    state_text: str
    """The ledger as :func:`liyuan.session.state.format_state` writes it."""
    roster: str = ""
    """The 【登场名录】 (:func:`liyuan.session.state.format_roster`)."""
    lore_index: str = ""
    """The lore book's titles, already cut to their budget; given, it replaces the book's index."""
    extra: Sequence[str] = ()
    """Further complete blocks for the tail (author's note ...)."""
