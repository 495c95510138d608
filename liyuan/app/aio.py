"""The async twin of :class:`~liyuan.app.card.Card` and :class:`~liyuan.app.chat.Chat`.

Every method that may touch the disk, wait for recall (up to 5 s) or wait for background
work runs the synchronous one in a worker thread (:func:`asyncio.to_thread`), so an
async app (a bot, a FastAPI server) never blocks its event loop. The semantics are
exactly the synchronous ones; the objects wrap them and expose them as ``.sync_card``
and ``.sync_chat``.

Invariant: one-to-one. Every public method of ``Card`` / ``Chat`` has an awaitable
twin here taking the same arguments; a property that reads the disk (``memory``,
``summary``) is an awaitable method without arguments; the public attributes (``path``,
``config``, ``activity``, ``id``, ``tree`` ...) are the wrapped object's own
(``tests/liyuan/app/test_async_parity.py`` checks this against the classes).
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from liyuan.app.activity import Activity
from liyuan.app.card import Card
from liyuan.app.chat import Chat, Mode
from liyuan.app.turn import Turn
from liyuan.card.repair import ManifestRepair
from liyuan.card.sync import CardMemory, SyncOutcome
from liyuan.compaction import CompactionOutcome
from liyuan.config import MemoryConfig
from liyuan.context.pins import Pin
from liyuan.lore.cards import ImportedCard
from liyuan.lore.model import LoreBook, LoreEntry
from liyuan.model import ChatModel, Usage
from liyuan.session.branch import BranchView
from liyuan.session.entries import Entry
from liyuan.session.state import Ledger
from liyuan.story.compact import CompactionPlan

if TYPE_CHECKING:
    from liyuan.vector.memory import VectorMemory

__all__ = ["AsyncCard", "AsyncChat"]


class AsyncChat:
    """Awaitable :class:`~liyuan.app.chat.Chat`."""

    def __init__(self, chat: Chat) -> None:
        self.sync_chat = chat
        self.id = chat.id
        self.tree = chat.tree
        self.user_name = chat.user_name
        self.char_name = chat.char_name

    @property
    def vector(self) -> VectorMemory | None:
        """See ``Chat.vector``: the chat's vector memory, or ``None`` when it is off."""
        return self.sync_chat.vector

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

    async def record_tool(self, name: str, args: Mapping[str, Any], result: str) -> Entry:
        """See :meth:`Chat.record_tool <liyuan.app.chat.Chat.record_tool>`."""
        return await asyncio.to_thread(self.sync_chat.record_tool, name, args, result)

    async def rewind(self, entry_id: str | None) -> None:
        """See :meth:`Chat.rewind <liyuan.app.chat.Chat.rewind>`."""
        await asyncio.to_thread(self.sync_chat.rewind, entry_id)

    async def edit(self, entry_id: str, text: str) -> Entry:
        """See :meth:`Chat.edit <liyuan.app.chat.Chat.edit>`."""
        return await asyncio.to_thread(self.sync_chat.edit, entry_id, text)

    async def delete(self, entry_id: str) -> Entry:
        """See :meth:`Chat.delete <liyuan.app.chat.Chat.delete>`."""
        return await asyncio.to_thread(self.sync_chat.delete, entry_id)

    async def branch(self) -> BranchView:
        """See :meth:`Chat.branch <liyuan.app.chat.Chat.branch>`."""
        return await asyncio.to_thread(self.sync_chat.branch)

    async def summary(self) -> str | None:
        """See :attr:`Chat.summary <liyuan.app.chat.Chat.summary>` (awaited: it reads the branch)."""
        return await asyncio.to_thread(lambda: self.sync_chat.summary)

    async def compact_now(self) -> CompactionOutcome[CompactionPlan]:
        """See :meth:`Chat.compact_now <liyuan.app.chat.Chat.compact_now>`."""
        return await asyncio.to_thread(self.sync_chat.compact_now)

    async def pin(self, text: str) -> Pin:
        """See :meth:`Chat.pin <liyuan.app.chat.Chat.pin>`."""
        return await asyncio.to_thread(self.sync_chat.pin, text)

    async def unpin(self, pin_id: str) -> bool:
        """See :meth:`Chat.unpin <liyuan.app.chat.Chat.unpin>`."""
        return await asyncio.to_thread(self.sync_chat.unpin, pin_id)

    async def pins(self) -> tuple[Pin, ...]:
        """See :meth:`Chat.pins <liyuan.app.chat.Chat.pins>`."""
        return await asyncio.to_thread(self.sync_chat.pins)

    async def flush(self, timeout: float | None = None) -> bool:
        """See :meth:`Chat.flush <liyuan.app.chat.Chat.flush>`."""
        return await asyncio.to_thread(self.sync_chat.flush, timeout)

    async def close(self, timeout: float | None = None) -> bool:
        """See :meth:`Chat.close <liyuan.app.chat.Chat.close>`."""
        return await asyncio.to_thread(self.sync_chat.close, timeout)


class AsyncCard:
    """Awaitable :class:`~liyuan.app.card.Card`; ``async with`` closes it."""

    def __init__(self, card: Card) -> None:
        self.sync_card = card

    @property
    def path(self) -> Path:
        """See ``Card.path``."""
        return self.sync_card.path

    @property
    def config(self) -> MemoryConfig:
        """See ``Card.config``."""
        return self.sync_card.config

    @property
    def side_model(self) -> ChatModel | None:
        """See ``Card.side_model``."""
        return self.sync_card.side_model

    @property
    def user_name(self) -> str:
        """See ``Card.user_name``."""
        return self.sync_card.user_name

    @property
    def char_name(self) -> str:
        """See ``Card.char_name``."""
        return self.sync_card.char_name

    @property
    def activity(self) -> deque[Activity]:
        """See ``Card.activity``: the newest activity lines (at most 200), oldest first."""
        return self.sync_card.activity

    @classmethod
    async def open(cls, path: str | os.PathLike[str] | None = None, **options: Any) -> AsyncCard:
        """See :meth:`Card.open <liyuan.app.card.Card.open>`."""
        return cls(await asyncio.to_thread(Card.open, path, **options))

    async def chat(self, chat_id: str, *, user_name: str | None = None, char_name: str | None = None,
                   title: str | None = None, greeting: str | None = None) -> AsyncChat:
        """See :meth:`Card.chat <liyuan.app.card.Card.chat>`."""
        return AsyncChat(await asyncio.to_thread(self.sync_card.chat, chat_id, user_name=user_name,
                                                 char_name=char_name, title=title, greeting=greeting))

    async def import_chat(self, path: str | os.PathLike[str], chat_id: str, *, format: str | None = None,
                          title: str | None = None, speaker: str | None = None,
                          conversation: int = 1) -> AsyncChat:
        """See :meth:`Card.import_chat <liyuan.app.card.Card.import_chat>`."""
        return AsyncChat(await asyncio.to_thread(self.sync_card.import_chat, path, chat_id, format=format,
                                                 title=title, speaker=speaker, conversation=conversation))

    async def chat_ids(self) -> list[str]:
        """See :meth:`Card.chat_ids <liyuan.app.card.Card.chat_ids>`."""
        return await asyncio.to_thread(self.sync_card.chat_ids)

    async def import_card(self, path: str | os.PathLike[str], *, replace: bool = False) -> ImportedCard:
        """See :meth:`Card.import_card <liyuan.app.card.Card.import_card>`."""
        return await asyncio.to_thread(self.sync_card.import_card, path, replace=replace)

    async def lore(self) -> LoreBook | None:
        """See :attr:`Card.lore <liyuan.app.card.Card.lore>`."""
        return await asyncio.to_thread(lambda: self.sync_card.lore)

    async def save_lore(self, book: LoreBook) -> None:
        """See :meth:`Card.save_lore <liyuan.app.card.Card.save_lore>`."""
        await asyncio.to_thread(self.sync_card.save_lore, book)

    async def propose_lore(self, *, min_sources: int = 2) -> list[LoreEntry]:
        """See :meth:`Card.propose_lore <liyuan.app.card.Card.propose_lore>`."""
        return await asyncio.to_thread(self.sync_card.propose_lore, min_sources=min_sources)

    async def adopt_lore(self, entries: list[LoreEntry]) -> None:
        """See :meth:`Card.adopt_lore <liyuan.app.card.Card.adopt_lore>`."""
        await asyncio.to_thread(self.sync_card.adopt_lore, entries)

    async def export_card(self, path: str | os.PathLike[str], *, spec: str = "chara_card_v2") -> Path:
        """See :meth:`Card.export_card <liyuan.app.card.Card.export_card>`."""
        return await asyncio.to_thread(self.sync_card.export_card, path, spec=spec)

    async def export_lore(self, path: str | os.PathLike[str]) -> Path:
        """See :meth:`Card.export_lore <liyuan.app.card.Card.export_lore>`."""
        return await asyncio.to_thread(self.sync_card.export_lore, path)

    async def greetings(self) -> tuple[str, ...]:
        """See :meth:`Card.greetings <liyuan.app.card.Card.greetings>`."""
        return await asyncio.to_thread(self.sync_card.greetings)

    async def reopen(self, chat_id: str) -> AsyncChat:
        """See :meth:`Card.reopen <liyuan.app.card.Card.reopen>`."""
        return AsyncChat(await asyncio.to_thread(self.sync_card.reopen, chat_id))

    async def delete_chat(self, chat_id: str) -> bool:
        """See :meth:`Card.delete_chat <liyuan.app.card.Card.delete_chat>`."""
        return await asyncio.to_thread(self.sync_card.delete_chat, chat_id)

    async def sync(self, *, wait: bool = True, timeout: float | None = None) -> SyncOutcome | None:
        """See :meth:`Card.sync <liyuan.app.card.Card.sync>`."""
        return await asyncio.to_thread(self.sync_card.sync, wait=wait, timeout=timeout)

    async def memory(self) -> CardMemory:
        """See :attr:`Card.memory <liyuan.app.card.Card.memory>`."""
        return await asyncio.to_thread(lambda: self.sync_card.memory)

    async def repair_manifest(self) -> ManifestRepair:
        """Awaitable :meth:`liyuan.Card.repair_manifest`."""
        return await asyncio.to_thread(self.sync_card.repair_manifest)

    async def pin(self, text: str) -> Pin:
        """See :meth:`Card.pin <liyuan.app.card.Card.pin>`."""
        return await asyncio.to_thread(self.sync_card.pin, text)

    async def unpin(self, pin_id: str) -> bool:
        """See :meth:`Card.unpin <liyuan.app.card.Card.unpin>`."""
        return await asyncio.to_thread(self.sync_card.unpin, pin_id)

    async def pins(self) -> tuple[Pin, ...]:
        """See :meth:`Card.pins <liyuan.app.card.Card.pins>`."""
        return await asyncio.to_thread(self.sync_card.pins)

    async def resident_summary(self) -> str | None:
        """See :meth:`Card.resident_summary <liyuan.app.card.Card.resident_summary>`."""
        return await asyncio.to_thread(self.sync_card.resident_summary)

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
