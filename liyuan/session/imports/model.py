"""What an imported chat is made of, the error it raises, and how names become ids.

Invariants:

- An :class:`ImportedMessage` is one message of the source file, in file order, with
  the line it started on. Alternatives (SillyTavern swipes) stay on the message that
  holds them, the chosen one marked; nothing is dropped or merged here.
- :class:`ChatImportError` always names the line (0 when the problem is the file as a
  whole) and, where there is one, the field; its message is Chinese.
- :func:`safe_chat_id` maps any name to a valid chat id and never refuses one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Literal

from liyuan.errors import ConfigError

__all__ = [
    "FORMATS",
    "ChatImportError",
    "ChatSource",
    "ImportedChat",
    "ImportedMessage",
    "MessageRole",
    "safe_chat_id",
    "safe_folder_name",
]

FORMATS = ("sillytavern", "openai", "transcript")
"""Source formats the importer reads."""

MessageRole = Literal["user", "assistant", "note"]
"""``note``: a message kept outside the story (system, narrator, hidden, tool)."""

_CHAT_ID_RE = re.compile(r"[A-Za-z0-9_-]+")
_CHAT_ID_KEEP = 40


class ChatImportError(ConfigError):
    """A chat file cannot be imported; the message names the line and the field.

    Attributes:
        line: 1-based line of the problem; 0 when it concerns the whole file.
        field: The JSON field at fault (``mes``, ``role`` ...), or empty.
    """

    def __init__(self, reason: str, *, line: int = 0, field: str = "") -> None:
        where = f"第 {line} 行" if line else "文件"
        at = f"，字段 {field}" if field else ""
        super().__init__(f"{where}{at}：{reason}")
        self.line = line
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ImportedMessage:
    """One message of the source file."""

    line: int
    """1-based line where the message starts."""
    role: MessageRole
    text: str
    """The chosen text (for a note: its whole text)."""
    name: str = ""
    """Speaker as the file names it (may be empty)."""
    swipes: tuple[str, ...] = ()
    """Every alternative, the chosen one included, in file order; empty without swipes."""
    chosen: int = 0
    """Index of the chosen text in :attr:`swipes`."""
    note_kind: str = ""
    """For notes: ``system``, ``narrator``, ``comment``, ``hidden`` or ``tool``."""
    note_role: str = ""
    """For notes: the role the message had in the file (``user``, ``assistant``, ``system`` ...)."""
    thinking: str = ""
    """Reasoning the file kept beside the reply, if any."""
    greeting: bool = False
    """The opening assistant message (the card's greeting; swipes = alternate greetings)."""

    @property
    def alternatives(self) -> list[tuple[int, str]]:
        """``(swipe index, text)`` of every swipe that was not chosen."""
        return [(i, s) for i, s in enumerate(self.swipes) if i != self.chosen]


@dataclass(frozen=True)
class ChatSource:
    """Where an imported chat came from: what a scenario or a report may record.

    Never the file's path: only its format, its sha256 and counts, and the two names
    the chat itself holds.
    """

    format: str
    sha256: str
    messages: int
    """Messages in the chosen conversation, notes included, swipes not counted."""
    swipes: int
    """Alternatives beyond the chosen ones (rerolls, alternate greetings)."""
    notes: int
    """Messages kept outside the story (system, narrator, hidden, tool)."""
    user_name: str
    char_name: str
    conversations: int = 1
    """Conversations in the file (an OpenAI JSONL may hold several)."""
    conversation: int = 1
    """Which of them was imported (1-based)."""

    def to_json(self) -> dict[str, object]:
        """Plain data (what a scenario's ``source`` holds)."""
        data: dict[str, object] = {"format": self.format, "sha256": self.sha256, "messages": self.messages,
                                   "swipes": self.swipes, "notes": self.notes}
        if self.conversations > 1:
            data.update(conversations=self.conversations, conversation=self.conversation)
        return data


@dataclass(frozen=True)
class ImportedChat:
    """A whole parsed chat: its messages in file order and where it came from."""

    source: ChatSource
    messages: tuple[ImportedMessage, ...] = field(default_factory=tuple)


def safe_chat_id(name: str, fallback: str = "imported") -> str:
    """A chat id (``^[A-Za-z0-9_-]+$``) for any name; never refuses one.

    A valid id is kept as it is (up to 40 characters). Otherwise the ASCII letters,
    digits, ``-`` and ``_`` of the name are kept (runs of anything else become one
    ``-``) and a short hash of the whole name is added, so two names that differ only
    in their other characters (``林溯`` and ``阿简``) still get different ids.
    """
    name = name.strip()
    if _CHAT_ID_RE.fullmatch(name) and len(name) <= _CHAT_ID_KEEP:
        return name
    kept = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-_")[:_CHAT_ID_KEEP - 9] or fallback
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    return f"{kept}-{digest}"


def safe_folder_name(name: str, fallback: str) -> str:
    """A name usable as one folder component (card names): no separators, no dot-only names.

    Chinese and other letters stay; ``/``, ``\\``, control characters and leading dots
    go; an empty result gives ``fallback``.
    """
    cleaned = re.sub(r"[\x00-\x1f\x7f/\\:*?\"<>|]+", "-", name).strip().lstrip(".").strip()
    return cleaned[:60] or fallback
