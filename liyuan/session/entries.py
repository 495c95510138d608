"""Session lines: the entry model and the readers of entry conventions (the loader is
:mod:`liyuan.session.loader`).

Line format: the first line is a header ``{"type": "session", "version": 1, "id": ...}``;
every other line is an entry with ``id``, ``parentId`` (``null`` for the first),
``type`` and ``timestamp``. Messages carry ``role`` and ``text``; custom entries carry
``customType`` and ``data``.

Entry conventions used across liyuan (other fields are kept and ignored):

- ``{"type": "message", "role": "user", "text": ...}``: a user turn. Optional
  ``"mode": "roleplay" | "authoring" | "agent"`` (absent means roleplay).
- ``{"type": "message", "role": "assistant", "text": ...}``: a reply. Optional
  ``"thinking": str``, ``"toolCalls": [{"name": str, "args": {...}}]`` (read them
  through :func:`thinking` and :func:`tool_calls`; args are measured and shown as
  :func:`args_json`), ``"greeting": true`` (the card's opening line), ``"mode"`` as
  above, and optional ``"usage"``: what the endpoint reported for the request that
  produced the reply. Two shapes are read, OpenAI's ``{"prompt_tokens",
  "completion_tokens", "total_tokens"}`` and the coding agent's ``{"input", "output",
  "cacheRead", "cacheWrite", "totalTokens"}``; any field may be missing or ``null``.
  Read it only through :func:`usage_tokens` (the newest one: :func:`last_usage`).
- ``{"type": "message", "role": "toolResult", "toolName": str, "text": ...}``: a tool receipt.
- ``{"type": "custom", "customType": "rp-summary", "data": {"summary", "coversThroughId",
  "turns", "chars"}}``: a relay summary (see :mod:`liyuan.story.compact`).
- ``{"type": "custom", "customType": "rp-state", "data": {...}}``: a ledger snapshot
  (see :mod:`liyuan.session.state`).
- ``{"type": "custom", "customType": "rp-draft-op", "data": {"target": id, "old": str,
  "new": str}}``: a revision of an earlier reply's text.
- ``{"type": "custom", "customType": "liyuan-discussion-summary", "data": {"summary",
  "firstKeptEntryId", "tokensBefore"}}``: an agent-discussion summary.
- ``{"type": "custom", "customType": "rp-compact-failed", "data": {"reason", "error",
  "coversThroughId", "provenance"}}``: a story compaction that failed (see
  :mod:`liyuan.story.backoff`); process only, never part of the story.
- ``{"type": "custom", "customType": "liyuan-import-note", "data": {"kind", "role", "name",
  "text", "source"}}``: a message of an imported chat that lies outside the story (a
  system, narrator, comment, hidden or tool message; see :mod:`liyuan.session.imports`);
  never part of the story. Imported messages also carry ``"imported": {"format",
  "line"}``, the speaker's ``"name"`` and, for a swipe, its index ``"swipe"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from liyuan.session.damage import encodable

__all__ = [
    "DAMAGED_ENTRY_TYPE",
    "IMPORT_NOTE_TYPE",
    "SESSION_VERSION",
    "Entry",
    "args_json",
    "awaits_reply",
    "custom",
    "is_message",
    "last_usage",
    "message",
    "parse_entry",
    "thinking",
    "tool_calls",
    "usage_tokens",
]

SESSION_VERSION = 1
IMPORT_NOTE_TYPE = "liyuan-import-note"
"""Custom entry of an imported message kept outside the story (system, narrator, hidden ...)."""

DAMAGED_ENTRY_TYPE = "liyuan-damaged"
"""Type of the placeholder :func:`~liyuan.session.loader.read_entries` puts where a damaged line's entry was
(see :mod:`liyuan.session.damage`); in memory only, never written. Not a message and not a
custom entry, so the story ignores it; its body is ``{"line": n}``."""


class Entry(NamedTuple):
    """One line of the session tree (immutable).

    A named tuple rather than a frozen dataclass: the loader makes one per line, and a
    tuple is built in C (``tuple.__new__(Entry, fields)``), a fifth of a 100,000-turn open
    saved (issue 24). Change one with ``entry._replace(body=...)``.
    """

    id: str
    """Unique id of the entry within its session."""
    parent_id: str | None
    """Id of the entry this one follows on its branch; ``None`` for a root."""
    type: str
    """``message`` or ``custom`` (other types are kept but ignored by the memory code)."""
    body: Mapping[str, Any] = MappingProxyType({})
    """Every other field, exactly as stored (``role``, ``text``, ``customType``, ``data`` ...)."""

    @property
    def role(self) -> str | None:
        """Message role (``user``, ``assistant``, ``toolResult``), or ``None``."""
        role = self.body.get("role")
        return role if isinstance(role, str) else None

    @property
    def text(self) -> str:
        """Message text; empty for non-messages or non-string text."""
        text = self.body.get("text")
        return text if isinstance(text, str) else ""

    @property
    def custom_type(self) -> str | None:
        """``customType`` of a custom entry, or ``None``."""
        value = self.body.get("customType")
        return value if isinstance(value, str) else None

    @property
    def data(self) -> Mapping[str, Any]:
        """``data`` of a custom entry; empty mapping when absent or not an object."""
        value = self.body.get("data")
        return value if isinstance(value, Mapping) else {}

    def to_json(self) -> dict[str, Any]:
        """The stored JSON object of this entry."""
        return {"id": self.id, "parentId": self.parent_id, "type": self.type, **self.body}


def is_message(entry: Entry, role: str | None = None) -> bool:
    """True when ``entry`` is a message (of ``role``, if given)."""
    return entry.type == "message" and (role is None or entry.role == role)


def awaits_reply(entry: Entry) -> bool:
    """True when ``entry`` (a leaf) is a user message or a tool receipt that no reply
    follows yet: a turn is under way, and only its reply may be appended there."""
    return entry.type == "message" and entry.role in ("user", "toolResult")


def message(
    entry_id: str, parent_id: str | None, role: str, text: str, **extra: Any
) -> Entry:
    """Build a message entry in memory (tests, harness, synthetic branches)."""
    return Entry(entry_id, parent_id, "message", {"role": role, "text": text, **extra})


def custom(entry_id: str, parent_id: str | None, custom_type: str, data: Mapping[str, Any]) -> Entry:
    """Build a custom entry in memory."""
    return Entry(entry_id, parent_id, "custom", {"customType": custom_type, "data": dict(data)})


def parse_entry(obj: Any) -> Entry | None:
    """The entry a decoded JSONL line describes, or ``None`` when it is not one.

    ``None`` for anything but an object with a non-empty string ``id``, a string
    ``type`` and a ``parentId`` that is a string or absent/null, where the ids can be
    written back as UTF-8 (a lone surrogate such as ``"\\ud800"`` cannot: as a parent of
    the next append it would make every append fail). The ``session`` header is left to
    the caller.
    """
    if not isinstance(obj, dict):
        return None
    entry_id = obj.get("id")
    entry_type = obj.get("type")
    parent = obj.get("parentId")
    if not isinstance(entry_id, str) or not entry_id or not isinstance(entry_type, str):
        return None
    if parent is not None and not isinstance(parent, str):
        return None
    if not encodable(entry_id) or (parent is not None and not encodable(parent)):
        return None
    body = {k: v for k, v in obj.items() if k not in ("id", "parentId", "type")}
    return Entry(entry_id, parent, entry_type, body)


def _count(value: object) -> int | None:
    # JSON numbers only: a bool is an int to Python but never a token count.
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def usage_tokens(entry: Entry) -> int | None:
    """Tokens of the request behind a reply plus the reply itself, from its ``usage`` field.

    The one reader of the ``usage`` convention (see the module docstring). In order:
    a positive ``totalTokens`` or ``total_tokens``; else a positive ``prompt_tokens``
    plus ``completion_tokens`` (missing or ``null`` counts 0); else the sum of
    ``input``, ``output``, ``cacheRead`` and ``cacheWrite`` when positive. Fields that
    are missing, ``null``, negative, booleans or not integers are ignored.

    Args:
        entry: Usually an assistant message; any entry is accepted.

    Returns:
        The token count, or ``None`` when the entry carries no usable usage.
    """
    usage = entry.body.get("usage")
    if not isinstance(usage, Mapping):
        return None
    for key in ("totalTokens", "total_tokens"):
        total = _count(usage.get(key))
        if total:
            return total
    prompt = _count(usage.get("prompt_tokens"))
    if prompt:
        return prompt + (_count(usage.get("completion_tokens")) or 0)
    summed = sum(_count(usage.get(k)) or 0 for k in ("input", "output", "cacheRead", "cacheWrite"))
    return summed or None


def last_usage(entries: Sequence[Entry], start: int = 0) -> tuple[int, int] | None:
    """The newest assistant message in ``entries[start:]`` with a usable ``usage``.

    Searched from the end, so the cost is that of what follows it.

    Args:
        entries: Root-to-leaf entries.
        start: Index before which nothing is read (say, just past the latest summary:
            a usage from before it measured a context that no longer exists).

    Returns:
        ``(index, tokens)``, ``tokens`` as :func:`usage_tokens` reads them; ``None``
        when no such message exists.
    """
    for index in range(len(entries) - 1, max(start, 0) - 1, -1):
        entry = entries[index]
        if entry.type == "message" and entry.role == "assistant":
            total = usage_tokens(entry)
            if total is not None:
                return index, total
    return None


def tool_calls(entry: Entry) -> list[tuple[str, Mapping[str, Any]]]:
    """``(name, args)`` of each call in an entry's ``toolCalls``, in order.

    A call without a string ``name`` is skipped; ``args`` that is not an object reads as
    ``{}``. Any entry is accepted (only assistant replies carry calls).
    """
    raw = entry.body.get("toolCalls")
    calls: list[tuple[str, Mapping[str, Any]]] = []
    for call in raw if isinstance(raw, list) else ():
        if isinstance(call, Mapping) and isinstance(call.get("name"), str):
            args = call.get("args")
            calls.append((call["name"], args if isinstance(args, Mapping) else {}))
    return calls


def thinking(entry: Entry) -> str:
    """An entry's ``thinking`` text; empty when absent or not a string."""
    value = entry.body.get("thinking")
    return value if isinstance(value, str) else ""


def args_json(args: Any) -> str:
    """Compact JSON of tool-call args (or one of their values), raw non-ASCII.

    What ``JSON.stringify`` writes, so sizes and transcripts match the original's.
    """
    return json.dumps(dict(args) if isinstance(args, Mapping) else args, ensure_ascii=False,
                      separators=(",", ":"))


