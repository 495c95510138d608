"""What :meth:`liyuan.Chat.prepare` returns: the messages of one turn and what went into them."""

from __future__ import annotations

from dataclasses import dataclass

from liyuan.context.record import TurnRecord
from liyuan.lore.report import LoreReport
from liyuan.model import ChatMessage
from liyuan.session.entries import Entry

__all__ = ["Turn"]


@dataclass(frozen=True)
class Turn:
    """The messages to send for one turn, and what went into them."""

    messages: list[ChatMessage]
    """Send these (after the app's own system prompt) to the role-play model: at most one
    leading 【前情提要】 user message, the kept history, then the tail (the data blocks and
    the user's words last)."""
    user_text: str
    """The user's words this turn answers."""
    user_entry: Entry | None
    """The user message on the session tree (the reply will be its child); ``None`` for
    :meth:`Chat.preview`, which writes nothing."""
    summary: str | None = None
    """The in-session relay summary that replaced the covered turns, if any."""
    resident: str | None = None
    """The resident summary of earlier chats as sent (fitted to the budget), if any."""
    recall: tuple[str, ...] = ()
    """The 【剧情记忆】 lines recalled for this turn (vector memory on)."""
    injection: str = ""
    """The tail's data blocks as sent, before the user's words (【世界状态】 ... extra blocks)."""
    record: TurnRecord | None = None
    """What was sent, block by block: sizes, sources, what the budget cut and why
    (:class:`liyuan.context.record.TurnRecord`; ``None`` for an agent-mode turn)."""
    lore: LoreReport | None = None
    """What the card's lore book did this turn: the entries activated and why, those in
    【相关设定】, those cut for the budget (never dropped silently), the index's size."""
