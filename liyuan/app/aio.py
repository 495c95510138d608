"""The async twin of :class:`~liyuan.app.card.Card` and :class:`~liyuan.app.chat.Chat`.

Every method that may touch the disk, wait for recall (up to 5 s) or wait for background
work runs the synchronous one in a worker thread (:func:`asyncio.to_thread`), so an
async app (a bot, a FastAPI server) never blocks its event loop. The semantics are
exactly the synchronous ones; the objects wrap them and expose them as ``.sync_card``
and ``.sync_chat`` for anything not mirrored here.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from liyuan.app.card import Card
from liyuan.app.chat import Chat, Mode, Turn
from liyuan.card.sync import CardMemory, SyncOutcome
from liyuan.model import Usage
from liyuan.session.entries import Entry
from liyuan.session.state import Ledger
from liyuan.story.compact import CompactionOutcome

__all__ = ["AsyncCard", "AsyncChat"]


class AsyncChat:
    """Awaitable :class:`~liyuan.app.chat.Chat`."""

    def __init__(self, chat: Chat) -> None:
        self.sync_chat = chat
        self.id = chat.id

    async def prepare(self, user_text: str, *, ledger: Ledger | None = None, roster: str | None = None,
                      lore_index: str = "", extra: Sequence[str] = (), mode: Mode = "roleplay") -> Turn:
        """See :meth:`Chat.prepare <liyuan.app.chat.Chat.prepare>`."""
        return await asyncio.to_thread(self.sync_chat.prepare, user_text, ledger=ledger, roster=roster,
                                       lore_index=lore_index, extra=extra, mode=mode)

    async def preview(self, user_text: str, *, ledger: Ledger | None = None, roster: str | None = None,
                      lore_index: str = "", extra: Sequence[str] = ()) -> Turn:
        """See :meth:`Chat.preview <liyuan.app.chat.Chat.preview>`."""
        return await asyncio.to_thread(self.sync_chat.preview, user_text, ledger=ledger, roster=roster,
                                       lore_index=lore_index, extra=extra)

    async def record(self, reply: str, *, usage: Usage | Mapping[str, Any] | None = None,
                     ledger: Ledger | None = None, thinking: str = "") -> Entry:
        """See :meth:`Chat.record <liyuan.app.chat.Chat.record>`."""
        return await asyncio.to_thread(self.sync_chat.record, reply, usage=usage, ledger=ledger, thinking=thinking)

    async def reroll(self, *, ledger: Ledger | None = None, roster: str | None = None, lore_index: str = "",
                     extra: Sequence[str] = ()) -> Turn:
        """See :meth:`Chat.reroll <liyuan.app.chat.Chat.reroll>`."""
        return await asyncio.to_thread(self.sync_chat.reroll, ledger=ledger, roster=roster,
                                       lore_index=lore_index, extra=extra)

    async def rewind(self, entry_id: str | None) -> None:
        """See :meth:`Chat.rewind <liyuan.app.chat.Chat.rewind>`."""
        await asyncio.to_thread(self.sync_chat.rewind, entry_id)

    async def compact_now(self) -> CompactionOutcome:
        """See :meth:`Chat.compact_now <liyuan.app.chat.Chat.compact_now>`."""
        return await asyncio.to_thread(self.sync_chat.compact_now)

    async def flush(self, timeout: float | None = None) -> bool:
        """See :meth:`Chat.flush <liyuan.app.chat.Chat.flush>`."""
        return await asyncio.to_thread(self.sync_chat.flush, timeout)


class AsyncCard:
    """Awaitable :class:`~liyuan.app.card.Card`; ``async with`` closes it."""

    def __init__(self, card: Card) -> None:
        self.sync_card = card

    @classmethod
    async def open(cls, path: str | os.PathLike[str], **options: Any) -> AsyncCard:
        """See :meth:`Card.open <liyuan.app.card.Card.open>`."""
        return cls(await asyncio.to_thread(Card.open, path, **options))

    async def chat(self, chat_id: str, **options: Any) -> AsyncChat:
        """See :meth:`Card.chat <liyuan.app.card.Card.chat>`."""
        return AsyncChat(await asyncio.to_thread(self.sync_card.chat, chat_id, **options))

    async def delete_chat(self, chat_id: str) -> bool:
        """See :meth:`Card.delete_chat <liyuan.app.card.Card.delete_chat>`."""
        return await asyncio.to_thread(self.sync_card.delete_chat, chat_id)

    async def sync(self, *, wait: bool = True, timeout: float | None = None) -> SyncOutcome | None:
        """See :meth:`Card.sync <liyuan.app.card.Card.sync>`."""
        return await asyncio.to_thread(self.sync_card.sync, wait=wait, timeout=timeout)

    async def memory(self) -> CardMemory:
        """See :attr:`Card.memory <liyuan.app.card.Card.memory>`."""
        return await asyncio.to_thread(lambda: self.sync_card.memory)

    async def flush(self, timeout: float | None = None) -> bool:
        """See :meth:`Card.flush <liyuan.app.card.Card.flush>`."""
        return await asyncio.to_thread(self.sync_card.flush, timeout)

    async def close(self, timeout: float | None = None) -> bool:
        """See :meth:`Card.close <liyuan.app.card.Card.close>`."""
        return await asyncio.to_thread(self.sync_card.close, timeout)

    async def __aenter__(self) -> AsyncCard:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.to_thread(self.sync_card.__exit__, kind, exc, tb)  # bounded like ``with Card``
