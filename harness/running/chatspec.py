"""The chat part of a scenario: value checks, the error type, chats and their turns.

Invariant: a :class:`ChatSpec` that loads is complete: its id is a chat id, its turns
have a user line and a reply, and everything an imported chat brings along (swipes as
rerolls, notes outside the story, the source's provenance) has the right shape. Any
problem fails with a Chinese message naming the file and the field.

Split from :mod:`harness.running.scenario`, which re-exports the public names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from liyuan.errors import ConfigError
from liyuan.session.imports import FORMATS

__all__ = [
    "ID_RE",
    "TYPE_NAMES",
    "ChatSpec",
    "Check",
    "Ctx",
    "Note",
    "ScenarioError",
    "ScriptedTurn",
    "is_bool",
    "is_int",
    "is_int_list",
    "is_mapping",
    "is_str",
    "parse_chat",
    "parse_source",
]

ID_RE = re.compile(r"[A-Za-z0-9_-]+")


class ScenarioError(ConfigError):
    """A scenario or reply file is malformed; the message names the file and field."""


Check = Callable[[Any], bool]


def is_str(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


def is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_int_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(is_int(x) for x in v)


def is_mapping(v: Any) -> bool:
    return isinstance(v, dict)


TYPE_NAMES: dict[Check, str] = {
    is_str: "非空字符串",
    is_bool: "true/false",
    is_int: "整数",
    is_int_list: "整数列表",
    is_mapping: "映射",
}

_CHAT_KEYS = {"name", "greeting", "greeting_swipes", "notes", "ledger", "turns", "generate", "note", "mode"}
_TURN_KEYS = {"user", "reply", "ledger", "usage", "tools", "swipes", "user_swipes", "notes"}
_NOTE_KEYS = {"kind", "role", "name", "text"}
_SOURCE_KEYS = {"format", "sha256", "messages", "swipes", "notes", "conversations", "conversation", "note"}


@dataclass(frozen=True)
class Note:
    """A message of an imported chat kept outside the story (system, narrator, hidden ...)."""

    kind: str
    text: str
    role: str = ""
    name: str = ""

    def data(self) -> dict[str, str]:
        """The ``liyuan-import-note`` entry's data."""
        return {"kind": self.kind, "role": self.role, "name": self.name, "text": self.text}


@dataclass(frozen=True)
class ScriptedTurn:
    """One narrative turn: the user's words, the reply, the ledger after it."""

    user: str
    reply: str
    ledger: Mapping[str, Any] | None = None
    usage: Mapping[str, int] | None = None
    """Agent chats: the real token usage the app stored for this reply."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """Agent chats: tool calls made during the turn (``name``, ``args``, ``result``)."""
    swipes: tuple[str, ...] = ()
    """Imported chats: replies that were rerolled away (side branches beside ``reply``)."""
    user_swipes: tuple[str, ...] = ()
    """Imported chats: alternatives of the user's message (side branches beside ``user``)."""
    notes: tuple[Note, ...] = ()
    """Imported chats: messages of this turn kept outside the story, written after the reply."""


@dataclass(frozen=True)
class ChatSpec:
    """One chat (局) of the card."""

    id: str
    name: str
    greeting: str | None = None
    ledger: Mapping[str, Any] | None = None
    """Ledger written right after the greeting."""
    turns: tuple[ScriptedTurn, ...] = ()
    generate: Mapping[str, Any] | None = None
    """Parameters of a deterministic generator (long chats); see :mod:`harness.running.story`."""
    note: str = ""
    mode: str = "roleplay"
    """``roleplay`` or ``agent``."""
    greeting_swipes: tuple[str, ...] = ()
    """Imported chats: alternate greetings (sibling roots beside ``greeting``)."""
    notes: tuple[Note, ...] = ()
    """Imported chats: notes before the first turn, written after the greeting."""


class Ctx:
    """Where in a file a check is, and how to say what is wrong there."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, field_path: str, message: str) -> ScenarioError:
        return ScenarioError(f"{self.where}: {field_path}: {message}")

    def mapping(self, value: Any, field_path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(field_path, f"应该是映射（键: 值），实际是 {type(value).__name__}")
        return value

    def keys(self, value: Mapping[str, Any], allowed: set[str], field_path: str) -> None:
        unknown = sorted(set(value) - allowed)
        if unknown:
            listed = ", ".join(map(str, unknown))
            raise self.fail(field_path, f"未知字段 {listed}（可用：{'、'.join(sorted(allowed))}）")

    def text(self, value: Any, field_path: str, *, optional: bool = False) -> str:
        if value is None and optional:
            return ""
        if not is_str(value):
            raise self.fail(field_path, "应该是非空字符串")
        return str(value)

    def texts(self, value: Any, field_path: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail(field_path, "应该是字符串列表")
        return tuple(self.text(v, f"{field_path}[{i}]") for i, v in enumerate(value))

    def notes(self, value: Any, field_path: str) -> tuple[Note, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail(field_path, "应该是列表")
        notes = []
        for i, raw in enumerate(value):
            where = f"{field_path}[{i}]"
            data = self.mapping(raw, where)
            self.keys(data, _NOTE_KEYS, where)
            notes.append(Note(kind=self.text(data.get("kind"), f"{where}.kind"),
                              text=str(data.get("text") or ""),
                              role=str(data.get("role") or ""), name=str(data.get("name") or "")))
        return tuple(notes)


def _turn(ctx: Ctx, raw: Any, where: str) -> ScriptedTurn:
    data = ctx.mapping(raw, where)
    ctx.keys(data, _TURN_KEYS, where)
    ledger = data.get("ledger")
    if ledger is not None:
        ctx.mapping(ledger, f"{where}.ledger")
    usage = data.get("usage")
    if usage is not None:
        usage = ctx.mapping(usage, f"{where}.usage")
        if not all(is_int(v) for v in usage.values()):
            raise ctx.fail(f"{where}.usage", "用量应该是整数（prompt_tokens、completion_tokens）")
    tools = data.get("tools") or []
    if not isinstance(tools, list):
        raise ctx.fail(f"{where}.tools", "应该是列表")
    for i, tool in enumerate(tools):
        ctx.mapping(tool, f"{where}.tools[{i}]")
    return ScriptedTurn(
        user=ctx.text(data.get("user"), f"{where}.user"),
        reply=ctx.text(data.get("reply"), f"{where}.reply"),
        ledger=ledger, usage=usage, tools=tuple(tools),
        swipes=ctx.texts(data.get("swipes"), f"{where}.swipes"),
        user_swipes=ctx.texts(data.get("user_swipes"), f"{where}.user_swipes"),
        notes=ctx.notes(data.get("notes"), f"{where}.notes"),
    )


def parse_chat(ctx: Ctx, chat_id: Any, raw: Any) -> ChatSpec:
    """Validate one entry of a scenario's ``chats``."""
    where = f"chats.{chat_id}"
    if not isinstance(chat_id, str) or not ID_RE.fullmatch(chat_id):
        raise ctx.fail(where, "局 id 只能用字母、数字、- 和 _")
    data = ctx.mapping(raw, where)
    ctx.keys(data, _CHAT_KEYS, where)
    turns_raw = data.get("turns") or []
    if not isinstance(turns_raw, list):
        raise ctx.fail(f"{where}.turns", "应该是列表")
    generate = data.get("generate")
    if generate is not None:
        generate = ctx.mapping(generate, f"{where}.generate")
        if turns_raw:
            raise ctx.fail(where, "turns 和 generate 只能二选一")
    ledger = data.get("ledger")
    if ledger is not None:
        ctx.mapping(ledger, f"{where}.ledger")
    mode = data.get("mode", "roleplay")
    if mode not in ("roleplay", "agent"):
        raise ctx.fail(f"{where}.mode", "只能是 roleplay 或 agent")
    greeting = data.get("greeting")
    greeting_swipes = ctx.texts(data.get("greeting_swipes"), f"{where}.greeting_swipes")
    if greeting_swipes and greeting is None:
        raise ctx.fail(f"{where}.greeting_swipes", "没有 greeting 就没有备选开场白")
    return ChatSpec(
        id=chat_id,
        name=ctx.text(data.get("name"), f"{where}.name"),
        greeting=ctx.text(greeting, f"{where}.greeting") if greeting is not None else None,
        ledger=ledger,
        turns=tuple(_turn(ctx, b, f"{where}.turns[{i}]") for i, b in enumerate(turns_raw)),
        generate=generate,
        note=ctx.text(data.get("note"), f"{where}.note", optional=True),
        mode=mode,
        greeting_swipes=greeting_swipes,
        notes=ctx.notes(data.get("notes"), f"{where}.notes"),
    )


def parse_source(ctx: Ctx, raw: Any) -> dict[str, Any] | None:
    """Validate an imported scenario's ``source`` (provenance); ``None`` when absent."""
    if raw is None:
        return None
    data = ctx.mapping(raw, "source")
    ctx.keys(data, _SOURCE_KEYS, "source")
    if data.get("format") not in FORMATS:
        raise ctx.fail("source.format", f"只能是 {'、'.join(FORMATS)}")
    sha = data.get("sha256")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise ctx.fail("source.sha256", "应该是 64 位十六进制的 sha256")
    for key in ("messages", "swipes", "notes"):
        if not is_int(data.get(key)) or data[key] < 0:
            raise ctx.fail(f"source.{key}", "应该是非负整数")
    return dict(data)
