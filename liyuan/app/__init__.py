"""The objects an app holds: a :class:`Card`, its :class:`Chat` objects, their activity.

Guarantees: the session tree only grows; replies are on disk when :meth:`Chat.record`
returns and memory work (vector ingest, compaction, card sync) follows in the
background without blocking the turn; a failing side model never raises into the
app's turn; every activity line reaches the app's listener, none is printed.
"""

from __future__ import annotations

from liyuan.app.activity import Activity, ActivityKind, Listener
from liyuan.app.aio import AsyncCard, AsyncChat
from liyuan.app.card import Card
from liyuan.app.chat import Chat
from liyuan.app.turn import Turn

__all__ = [
    "Activity",
    "ActivityKind",
    "AsyncCard",
    "AsyncChat",
    "Card",
    "Chat",
    "Listener",
    "Turn",
]
