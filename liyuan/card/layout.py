"""Where a card's files live: the folder names, chat ids, and :class:`CardLayout`.

See :mod:`liyuan.card.files` for the layout of one card and its invariants; this module
only names paths (and validates chat ids before they become part of one). It reads
nothing but folder listings; :func:`chat_name_from` parses the ``meta.json`` bytes a
session store gives.

Every path it gives for a chat (:meth:`CardLayout.chat_dir`, :meth:`CardLayout.sessions_dir`,
:meth:`CardLayout.chat_file`) and the listing of ``对话/`` are checked by
:func:`~liyuan.card.housekeeping.check_inside` first: a symlink anywhere below the card
folder raises :class:`~liyuan.errors.UnsafePathError`, so no caller can read, write or
delete outside the card through a chat. A symlink inside ``对话/`` is no chat.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from liyuan.card.housekeeping import check_inside
from liyuan.errors import ConfigError

__all__ = [
    "CHATS_DIR",
    "CHAT_ID_MAX_LEN",
    "CHAT_META_FILE",
    "HANDBOOK_FILE",
    "HISTORY_DIR",
    "MANIFEST_FILE",
    "MEMORY_DIR",
    "RECAPS_DIR",
    "RESIDENT_FILE",
    "SESSIONS_DIR",
    "CardLayout",
    "chat_name_from",
    "is_valid_chat_id",
    "validate_chat_id",
]

CHATS_DIR = "对话"
SESSIONS_DIR = "会话"
CHAT_META_FILE = "meta.json"
MEMORY_DIR = "记忆"
RECAPS_DIR = "局"
HANDBOOK_FILE = "记忆.md"
RESIDENT_FILE = "常驻摘要.md"
MANIFEST_FILE = ".清单.json"
HISTORY_DIR = ".history"
CHAT_ID_MAX_LEN = 128

_CHAT_ID_RE = re.compile(r"[A-Za-z0-9_-]+", re.ASCII)
# Names Windows reserves for devices in any folder, whatever the case: a card folder
# may move to Windows, where a chat folder or recap named like this cannot exist.
_WINDOWS_RESERVED = frozenset(
    {"con", "prn", "aux", "nul"} | {f"{kind}{n}" for kind in ("com", "lpt") for n in range(10)}
)


def validate_chat_id(chat_id: str) -> str:
    """Return ``chat_id`` if it is safe to use as one path component.

    Args:
        chat_id: A chat (局) id, e.g. ``20260907`` or ``jA``.

    Returns:
        The same id.

    Raises:
        ConfigError: The id is empty, too long, has any character outside
            ``A-Z a-z 0-9 _ -`` (so ``..``, ``/``, absolute paths and non-ASCII are out),
            or is a name Windows reserves (``con``, ``nul``, ``com1``, ``lpt1`` ... in any case).
    """
    if not isinstance(chat_id, str) or not _CHAT_ID_RE.fullmatch(chat_id):
        raise ConfigError(f"局 id 不合法：{chat_id!r}（只允许英文字母、数字、下划线和连字符）")
    if chat_id.lower() in _WINDOWS_RESERVED:
        raise ConfigError(f"局 id 不合法：{chat_id!r} 是 Windows 保留的设备名，换一个名字")
    if len(chat_id) > CHAT_ID_MAX_LEN:
        raise ConfigError(f"局 id 太长：{len(chat_id)} 个字符（最多 {CHAT_ID_MAX_LEN}）")
    return chat_id


@dataclass(frozen=True)
class CardLayout:
    """Where everything of one card lives. All paths derive from ``card_dir``."""

    card_dir: Path

    @property
    def chats_dir(self) -> Path:
        """``对话/``: one folder per chat."""
        return self.card_dir / CHATS_DIR

    @property
    def memory_dir(self) -> Path:
        """``记忆/``: everything the memory code writes."""
        return self.card_dir / MEMORY_DIR

    @property
    def recaps_dir(self) -> Path:
        """``记忆/局/``: one recap per chat."""
        return self.memory_dir / RECAPS_DIR

    @property
    def handbook(self) -> Path:
        """``记忆/记忆.md``."""
        return self.memory_dir / HANDBOOK_FILE

    @property
    def resident(self) -> Path:
        """``记忆/常驻摘要.md``."""
        return self.memory_dir / RESIDENT_FILE

    @property
    def manifest(self) -> Path:
        """``记忆/.清单.json``."""
        return self.memory_dir / MANIFEST_FILE

    @property
    def history_dir(self) -> Path:
        """``记忆/.history/``: backups, never read back by the code."""
        return self.memory_dir / HISTORY_DIR

    def chat_dir(self, chat_id: str) -> Path:
        """``对话/<chatId>``; the id is validated and the path checked (no symlink) first.

        Raises:
            ConfigError: An invalid chat id.
            UnsafePathError: ``对话/`` or the chat folder is a symlink.
        """
        return check_inside(self.card_dir, self.chats_dir / validate_chat_id(chat_id))

    def sessions_dir(self, chat_id: str) -> Path:
        """``对话/<chatId>/会话`` (checked like :meth:`chat_dir`)."""
        return check_inside(self.card_dir, self.chat_dir(chat_id) / SESSIONS_DIR)

    def chat_file(self, chat_id: str, *names: str) -> Path:
        """A file of the chat, ``对话/<chatId>/<names...>`` (checked like :meth:`chat_dir`)."""
        return check_inside(self.card_dir, self.chat_dir(chat_id).joinpath(*names))

    def recap_path(self, chat_id: str) -> Path:
        """``记忆/局/<chatId>.md``; the id is validated first."""
        return self.recaps_dir / f"{validate_chat_id(chat_id)}.md"

    def chat_ids(self) -> list[str]:
        """Ids of the chat folders under ``对话/`` that are valid ids, sorted.

        A folder whose name is not a valid id is not a chat of this system and is left
        alone, as is a symlink (it would lead outside the card).

        Raises:
            UnsafePathError: ``对话/`` itself is a symlink.
        """
        chats_dir = check_inside(self.card_dir, self.chats_dir)
        try:
            entries = list(os.scandir(chats_dir))
        except OSError:
            return []
        return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and is_valid_chat_id(e.name))

    def relative(self, path: Path) -> str:
        """``path`` relative to the memory folder, with ``/`` separators (for the journal)."""
        return path.relative_to(self.memory_dir).as_posix()


def chat_name_from(meta: bytes | None, chat_id: str) -> str:
    """The display name a chat's ``meta.json`` bytes give (``name``), else its id."""
    if meta is None:
        return chat_id
    try:
        raw = json.loads(meta.decode("utf-8"))
    except (ValueError, RecursionError):
        # ValueError covers bad UTF-8, bad JSON and numbers too long to convert;
        # RecursionError, nesting too deep to parse. A name is never worth a crash.
        return chat_id
    name = raw.get("name") if isinstance(raw, dict) else None
    return name.strip() if isinstance(name, str) and name.strip() else chat_id


def is_valid_chat_id(name: str) -> bool:
    """True when ``name`` passes :func:`validate_chat_id` (no exception)."""
    return (bool(_CHAT_ID_RE.fullmatch(name)) and len(name) <= CHAT_ID_MAX_LEN
            and name.lower() not in _WINDOWS_RESERVED)
