"""The three source formats, parsed into :class:`ImportedMessage` streams.

Invariants:

- Each parser is a generator over a :class:`~liyuan.session.imports.source.TextSource`:
  it holds one message at a time, never the whole chat.
- A parser yields every message of the file (or of the chosen conversation) in file
  order and records counts and names in the :class:`Tally` it was given; it raises
  :class:`ChatImportError` on the first thing it cannot read, naming line and field.
- Roles: a user turn is ``user``, a reply ``assistant``; anything outside the story
  (SillyTavern system, narrator, comment and hidden messages; OpenAI system, developer
  and tool messages) is a ``note``. The first story message, when it is an assistant
  message, is the greeting.

SillyTavern (``.jsonl``, as its ``chats`` endpoint stores a chat): an optional first
line with ``user_name``, ``character_name``, ``create_date`` and ``chat_metadata``, then
one message object a line: ``name``, ``is_user``, ``is_system``, ``mes``, ``send_date``,
``extra`` (``type``: ``narrator``, ``comment`` or another system type; ``reasoning``),
``swipes`` and ``swipe_id`` (the shown alternative). ``is_system`` without an
``extra.type`` is a message the user hid from the prompt. ``mes`` is the shown text.

OpenAI: message objects ``{"role", "content"}`` where content is a string, ``null`` or
a list of parts (``{"type": "text", "text": ...}``; other parts are named, not kept).
A file holds one conversation as a JSON array, several as an array of arrays, or one
per line as JSONL (each line an array or ``{"messages": [...]}``); a JSONL of bare
message objects is one conversation.

Transcript: ``名字：正文`` blocks separated by blank lines (what
``liyuan.story.history.serialize_for_summary`` writes); a block that does not start
with a speaker continues the previous message. Unless ``user_name`` is given, the first
speaker is the character (the greeting opens the story) and the next new speaker is
the user; any further speaker is another character.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from liyuan.session.imports.model import ChatImportError, ImportedMessage, MessageRole
from liyuan.session.imports.source import TextSource, load_json

__all__ = ["OPENAI_ROLES", "Options", "Tally", "detect_format", "parse_messages"]

OPENAI_ROLES = {"user": "user", "assistant": "assistant", "system": "note", "developer": "note",
                "tool": "note", "function": "note"}
"""OpenAI roles and what they become; any other role is refused."""

_ST_HEADER_KEYS = {"user_name", "character_name", "create_date", "chat_metadata"}
_ST_NOTE_KINDS = {"narrator": "narrator", "comment": "comment"}
_SPEAKER_RE = re.compile(r"([^\s：:，,。「」“”\"'()（）\[\]【】]{1,24})[：:](.*)", re.DOTALL)


@dataclass(frozen=True)
class Options:
    """How to read a file (the caller's choices)."""

    user_name: str | None = None
    """Transcript: which speaker is the user."""
    conversation: int = 1
    """OpenAI: which conversation of a multi-conversation file (1-based)."""


class Tally:
    """What a pass over a file found: counts and the names the chat holds."""

    def __init__(self) -> None:
        self.messages = 0
        self.swipes = 0
        self.notes = 0
        self.user_name = ""
        self.char_name = ""
        self.conversations = 0
        self._story_started = False

    def count(self, message: ImportedMessage) -> ImportedMessage:
        """Count a message and mark it as the greeting when it opens the story."""
        self.messages += 1
        self.swipes += len(message.alternatives)
        if message.role == "note":
            self.notes += 1
            return message
        if not self._story_started:
            self._story_started = True
            if message.role == "assistant":
                message = replace(message, greeting=True)
        if message.role == "user" and not self.user_name and message.name:
            self.user_name = message.name
        if message.role == "assistant" and not self.char_name and message.name:
            self.char_name = message.name
        return message


def detect_format(source: TextSource) -> str:
    """Guess the format from the file's start: SillyTavern, OpenAI or a transcript."""
    head = ""
    for chunk in source.chunks():
        head += chunk
        if len(head) >= 65536:
            break
    stripped = head.lstrip()
    if not stripped:
        raise ChatImportError("文件是空的")
    if stripped.startswith("["):
        return "openai"
    if stripped.startswith("{"):
        first = stripped.split("\n", 1)[0]
        if any(f'"{key}"' in first for key in ("is_user", "mes", *_ST_HEADER_KEYS)):
            return "sillytavern"
        return "openai"
    return "transcript"


def _field(data: Mapping[str, Any], key: str, kind: type, line: int, what: str, default: Any = None) -> Any:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ChatImportError(f"应该是{what}，实际是 {type(value).__name__}", line=line, field=key)
    return value


def _sillytavern(source: TextSource, tally: Tally) -> Iterator[ImportedMessage]:
    tally.conversations = 1
    for number, text in source.lines():
        if not text.strip():
            continue
        try:
            data = load_json(text, number)
        except json.JSONDecodeError as exc:
            raise ChatImportError(f"不是合法的 JSON（{exc.msg}，第 {exc.colno} 列）", line=number) from exc
        if not isinstance(data, dict):
            raise ChatImportError("每一行应该是一个 JSON 对象", line=number)
        if "mes" not in data and _ST_HEADER_KEYS & set(data):
            if tally.messages:
                raise ChatImportError("聊天元数据只能在第一行", line=number)
            tally.user_name = str(data.get("user_name") or "")
            tally.char_name = str(data.get("character_name") or "")
            continue
        if "mes" not in data:
            raise ChatImportError("缺少消息正文", line=number, field="mes")
        mes = _field(data, "mes", str, number, "字符串")
        is_user = _field(data, "is_user", bool, number, "true/false", False)
        is_system = _field(data, "is_system", bool, number, "true/false", False)
        name = _field(data, "name", str, number, "字符串", "")
        extra = _field(data, "extra", dict, number, "对象", {}) or {}
        swipes_raw = _field(data, "swipes", list, number, "字符串列表", None)
        swipes: tuple[str, ...] = ()
        chosen = 0
        if swipes_raw is not None and len(swipes_raw) > 1:
            if not all(isinstance(s, str) for s in swipes_raw):
                raise ChatImportError("应该是字符串列表", line=number, field="swipes")
            chosen = _field(data, "swipe_id", int, number, "整数", 0)
            if not 0 <= chosen < len(swipes_raw):
                raise ChatImportError(f"是 {chosen}，超出了 swipes 的范围（共 {len(swipes_raw)} 个）",
                                      line=number, field="swipe_id")
            listed = list(swipes_raw)
            listed[chosen] = mes  # mes is what the chat shows, edits included
            swipes = tuple(listed)
        reasoning = extra.get("reasoning")
        reasoning = reasoning if isinstance(reasoning, str) else ""
        role: MessageRole = "user" if is_user else "assistant"
        if is_system:
            kind = extra.get("type")
            note_kind = _ST_NOTE_KINDS.get(kind, "system") if isinstance(kind, str) and kind else "hidden"
            yield tally.count(ImportedMessage(number, "note", mes, name, swipes, chosen, note_kind, role))
            continue
        yield tally.count(ImportedMessage(number, role, mes, name, swipes, chosen, thinking=reasoning))
    _require_messages(tally)


def _content(value: Any, line: int) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if not isinstance(value, list):
        raise ChatImportError(f"应该是字符串或内容片段列表，实际是 {type(value).__name__}", line=line, field="content")
    parts: list[str] = []
    for part in value:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif isinstance(part, dict) and isinstance(part.get("type"), str):
            parts.append(f"（非文本内容：{part['type']}）")
        else:
            raise ChatImportError("内容片段应该是 {\"type\": \"text\", \"text\": ...}", line=line, field="content")
    return "\n".join(parts)


def _openai_message(data: Any, line: int) -> ImportedMessage:
    if not isinstance(data, dict):
        raise ChatImportError(f"消息应该是 JSON 对象，实际是 {type(data).__name__}", line=line)
    role = data.get("role")
    if not isinstance(role, str):
        raise ChatImportError("缺少 role，或者不是字符串", line=line, field="role")
    kind = OPENAI_ROLES.get(role)
    if kind is None:
        raise ChatImportError(f"不认识的角色 {role!r}（可用：{'、'.join(OPENAI_ROLES)}）", line=line, field="role")
    if "content" not in data and "tool_calls" not in data:
        raise ChatImportError("缺少 content", line=line, field="content")
    text = _content(data.get("content"), line)
    name = data.get("name")
    name = name if isinstance(name, str) else ""
    if kind == "note":
        return ImportedMessage(line, "note", text, name, note_kind="tool" if role in ("tool", "function")
                               else "system", note_role=role)
    if role == "assistant" and data.get("tool_calls"):
        calls = json.dumps(data["tool_calls"], ensure_ascii=False)
        return ImportedMessage(line, "note", f"{text}\n{calls}".strip(), name, note_kind="tool", note_role=role)
    reasoning = data.get("reasoning_content") or data.get("reasoning")
    role_kind: MessageRole = "user" if kind == "user" else "assistant"
    return ImportedMessage(line, role_kind, text, name,
                           thinking=reasoning if isinstance(reasoning, str) else "")


def _openai(source: TextSource, tally: Tally, options: Options) -> Iterator[ImportedMessage]:
    # A conversation is: a top-level array of messages, an element of a top-level array
    # that is itself an array or {"messages": [...]}, a top-level {"messages": [...]},
    # or the run of top-level bare message objects (JSONL of messages).
    want = options.conversation
    current = 0
    bare: int | None = None  # the conversation of the run of bare message objects
    arrays: dict[int, int] = {}  # top-level array (by index) holding bare messages -> its conversation
    for item in source.json_items():
        value = item.value
        if isinstance(value, dict) and "messages" in value:
            current += 1
            conversation, listed = current, value["messages"]
            if not isinstance(listed, list):
                raise ChatImportError("应该是消息列表", line=item.line, field="messages")
        elif isinstance(value, list):  # an element of an array of conversations
            current += 1
            conversation, listed = current, value
        elif item.depth == 1:  # a message of a top-level array of messages
            if item.index not in arrays:
                current += 1
                arrays[item.index] = current
            conversation, listed = arrays[item.index], [value]
        else:  # JSONL of bare message objects: one conversation
            if bare is None:
                current += 1
                bare = current
            conversation, listed = bare, [value]
        for data in listed:
            message = _openai_message(data, item.line)
            if conversation == want:
                yield tally.count(message)
    tally.conversations = current
    if current == 0:
        raise ChatImportError("文件里没有任何消息")
    if not 1 <= want <= current:
        raise ChatImportError(f"只有 {current} 段对话，没有第 {want} 段")
    _require_messages(tally)


def _transcript(source: TextSource, tally: Tally, options: Options) -> Iterator[ImportedMessage]:
    tally.conversations = 1
    speakers: dict[str, MessageRole] = {}
    if options.user_name:
        speakers[options.user_name] = "user"
        tally.user_name = options.user_name
    pending: tuple[int, str, list[str]] | None = None  # (line, speaker, lines)
    blank = True

    def flush() -> ImportedMessage | None:
        if pending is None:
            return None
        line, speaker, body = pending
        return tally.count(ImportedMessage(line, speakers[speaker], "\n".join(body).strip(), speaker))

    for number, text in source.lines():
        if not text.strip():
            blank = True
            if pending is not None:
                pending[2].append("")
            continue
        match = _SPEAKER_RE.fullmatch(text.strip()) if blank else None
        speaker = match.group(1) if match else None
        if speaker is not None and speaker not in speakers:
            if len(speakers) >= 8 and not options.user_name:
                speaker = None  # a ninth "speaker" is more likely a line like 注意：
            else:
                has_user = "user" in speakers.values()
                has_char = "assistant" in speakers.values()
                speakers[speaker] = "user" if has_char and not has_user else "assistant"
                if speakers[speaker] == "assistant" and not tally.char_name:
                    tally.char_name = speaker
                if speakers[speaker] == "user":
                    tally.user_name = speaker
        if speaker is not None and match is not None:
            done = flush()
            if done is not None:
                yield done
            pending = (number, speaker, [match.group(2).strip()])
        elif pending is None:
            raise ChatImportError("找不到说话人：每一段应该以「名字：」开头", line=number)
        else:
            pending[2].append(text)
        blank = False
    done = flush()
    if done is not None:
        yield done
    _require_messages(tally)


def _require_messages(tally: Tally) -> None:
    if tally.messages == 0:
        raise ChatImportError("文件里没有任何消息")


def parse_messages(source: TextSource, fmt: str, options: Options, tally: Tally) -> Iterator[ImportedMessage]:
    """Stream the messages of ``source`` in format ``fmt``; fills ``tally`` on the way."""
    if fmt == "sillytavern":
        return _sillytavern(source, tally)
    if fmt == "openai":
        return _openai(source, tally, options)
    if fmt == "transcript":
        return _transcript(source, tally, options)
    raise ChatImportError(f"不认识的格式 {fmt!r}（可用：sillytavern、openai、transcript）")
