"""Moving a card's sessions between backends, byte for byte.

:func:`copy_sessions` copies every session of every chat from one
:class:`~liyuan.card.sessions.SessionStore` to another: from the card folder into
PostgreSQL when an app outgrows one machine, and back out to files to read, edit or
archive them by hand. A session's bytes arrive exactly as they left (a damaged line, a
torn last write and all), so copying there and back gives the same files.

Invariant: a session the target already has is never overwritten; the copy stops with
:class:`~liyuan.errors.SessionConflictError` before writing anything of that session.
"""

from __future__ import annotations

from collections.abc import Iterable

from liyuan.card.sessions import SessionStore
from liyuan.errors import SessionConflictError

__all__ = ["copy_sessions"]


def copy_sessions(source: SessionStore, target: SessionStore, *, chats: Iterable[str] | None = None) -> int:
    """Copy the sessions of ``chats`` (default: every chat of ``source``) to ``target``.

    Returns:
        How many sessions were copied.

    Raises:
        SessionConflictError: ``target`` has one of the sessions already (the sessions
            before it were copied; nothing of it or after it was).
        TreeError: A session cannot be read or written.
    """
    copied = 0
    for chat_id in (list(chats) if chats is not None else source.chat_ids()):
        taken = set(target.names(chat_id))
        for name in source.names(chat_id):
            if name in taken:
                raise SessionConflictError(f"目标里已经有会话 {chat_id}/{name}：不覆盖，复制停在这里")
            data = source.raw(chat_id, name)
            if data is None:
                continue  # gone since the listing
            target.log(chat_id, name).create(data)
            copied += 1
    return copied
