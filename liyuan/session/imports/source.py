"""Reading a chat file as a stream: UTF-8 text in chunks, lines, and JSON values.

Invariants:

- The file is read in fixed-size chunks, never whole: memory stays bounded by the chunk
  size plus the longest line (or the largest JSON value), whatever the file's size.
- Every byte goes through a strict UTF-8 decoder; the first byte that is not UTF-8
  raises :class:`~liyuan.session.imports.model.ChatImportError` with its line. A UTF-8
  byte-order mark at the very start is skipped.
- A line, or one JSON value, longer than ``max_value_chars`` raises instead of growing
  the buffer without end.
- :attr:`TextSource.sha256` is the hash of the file's bytes, known once a pass has read
  to the end.
- Only a regular file is read: a named pipe, a device or a folder is refused before a
  byte is read (it is opened without blocking, so a pipe with no writer cannot hang it).
- A JSON value nested deeper than :data:`JSON_MAX_DEPTH`, holding a number longer than
  :data:`NUMBER_MAX_CHARS` characters or a string with a lone surrogate (``"\\ud800"``,
  which no UTF-8 file can hold) is refused, naming its line and the innermost field
  around it. The limits are this module's, not the ``json`` module's, so a file is
  accepted or refused the same way on every Python version (3.12 parses nesting 3.11
  refuses).

JSON values are decoded with the standard library's ``JSONDecoder.raw_decode`` on a
sliding buffer, so a file that is one huge array (``[{...},{...}, ...]`` on one line)
streams element by element, and an error still says on which line it is.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from liyuan.session.imports.model import ChatImportError

__all__ = [
    "CHUNK_BYTES",
    "JSON_MAX_DEPTH",
    "MAX_VALUE_CHARS",
    "NUMBER_MAX_CHARS",
    "JsonItem",
    "TextSource",
    "load_json",
]

CHUNK_BYTES = 1 << 20
MAX_VALUE_CHARS = 32 << 20
"""Longest line or JSON value accepted (characters): one message, not the file."""

JSON_MAX_DEPTH = 100
"""Deepest nesting of arrays and objects accepted in one JSON value (a chat needs a few)."""
NUMBER_MAX_CHARS = 100
"""Longest number accepted, in characters (a count or a timestamp needs 20)."""

_WHITESPACE = " \t\r\n"
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
# A number over the limit has a run of at least a third of it in digits (integer part,
# fraction, exponent): a run of a quarter is a safe, rare trigger for the exact scan.
_LONG_NUMBER = re.compile(f"[0-9]{{{NUMBER_MAX_CHARS // 4}}}")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:]|-?[0-9][0-9.eE+-]*')
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _suspect(text: str, start: int, end: int) -> bool:
    """Cheap test (C speed) that a decoded value may break a limit; :func:`_fault` decides."""
    return (text.count("[", start, end) + text.count("{", start, end) > JSON_MAX_DEPTH
            or _LONG_NUMBER.search(text, start, end) is not None
            or _SURROGATE_ESCAPE.search(text, start, end) is not None)


def _printable(key: str) -> str:
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def _fault(text: str, start: int, end: int) -> tuple[int, str, str] | None:
    """``(offset, field, reason)`` of the first limit the JSON value at ``start`` breaks.

    Scans tokens (strings, brackets, colons, numbers) without recursion, so it works
    on any depth; stops where the value ends. ``field`` is the innermost key around
    the fault (``""`` when there is none).
    """
    keys: list[str | None] = []
    pending: str | None = None
    for match in _TOKEN.finditer(text, start, end):
        token = match.group()
        head = token[0]
        if head in "[{":
            keys.append(None)
            if len(keys) > JSON_MAX_DEPTH:
                return match.start(), _field(keys), f"JSON 嵌套超过 {JSON_MAX_DEPTH} 层，不像一条聊天记录"
        elif head in "]}":
            if keys:
                keys.pop()
            if not keys:
                return None
        elif head == ":":
            if keys and pending is not None:
                keys[-1] = pending
        elif head == '"':
            pending = None
            try:
                value = json.loads(token)
            except ValueError:
                continue
            if isinstance(value, str) and _LONE_SURROGATE.search(value):
                return (match.start(), _field(keys) or _printable(value),
                        "含孤立的代理项（如 \\ud800）：这不是能存成 UTF-8 的文字")
            pending = value
            continue
        elif len(token) > NUMBER_MAX_CHARS:
            reason = f"数字有 {len(token)} 位，超过 {NUMBER_MAX_CHARS} 位，不像聊天记录里的数"
            return match.start(), _field(keys), reason
        pending = None
    return None


def _refuse(text: str, start: int, end: int, line: int, fallback: str, cause: BaseException | None) -> None:
    """Raise the error of the limit the value at ``start`` breaks; ``fallback`` (if any) when none is found.

    ``line`` is the line ``start`` is on.
    """
    found = _fault(text, start, end)
    if found is None:
        if not fallback:
            return
        raise ChatImportError(fallback, line=line) from cause
    offset, field, reason = found
    raise ChatImportError(reason, line=line + text.count("\n", start, offset), field=field) from cause


def load_json(text: str, line: int) -> Any:
    """``json.loads`` of one line under this module's limits (nesting, number length, surrogates).

    Raises:
        json.JSONDecodeError: Not JSON (the caller words that error).
        ChatImportError: A limit is broken; the line and the innermost field are named.
    """
    try:
        value = json.loads(text)
    except RecursionError as exc:
        _refuse(text, 0, len(text), line, "JSON 嵌套太深，不像一条聊天记录", exc)
        raise  # unreachable: _refuse always raises with a fallback
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # a number too long for int()
        _refuse(text, 0, len(text), line, "数字太长，不像聊天记录里的数", exc)
        raise
    if _suspect(text, 0, len(text)):
        _refuse(text, 0, len(text), line, "", None)
    return value


def _field(keys: list[str | None]) -> str:
    return next((_printable(k) for k in reversed(keys) if k is not None), "")


@dataclass(frozen=True, slots=True)
class JsonItem:
    """One JSON value of the stream, with where it starts.

    ``depth`` is 0 for a value at the top level of the file and 1 for an element of a
    top-level array; ``index`` counts the top-level values (1-based), so the elements of
    one array share it.
    """

    line: int
    value: Any
    depth: int
    index: int


class TextSource:
    """A chat file read once per pass, as decoded text.

    Args:
        path: The file.
        max_value_chars: Longest line or JSON value accepted.
        chunk_bytes: Read size.
    """

    def __init__(self, path: str | os.PathLike[str], *, max_value_chars: int = MAX_VALUE_CHARS,
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        self.path = path
        self.max_value_chars = max_value_chars
        self.chunk_bytes = chunk_bytes
        self.sha256 = ""

    def chunks(self) -> Iterator[str]:
        """The file's text in chunks; checks UTF-8 and hashes the bytes on the way."""
        digest = hashlib.sha256()
        decoder = codecs.getincrementaldecoder("utf-8")("strict")
        newlines = 0
        first = True
        handle = _open_regular(self.path)
        with handle:
            while True:
                raw = handle.read(self.chunk_bytes)
                digest.update(raw)
                try:
                    text = decoder.decode(raw, final=not raw)
                except UnicodeDecodeError as exc:
                    before = bytes(exc.object[: max(exc.start, 0)])
                    line = newlines + before.count(b"\n") + 1
                    raise ChatImportError("不是 UTF-8 编码的文本（请先把文件另存为 UTF-8）", line=line) from exc
                if first and text:
                    text = text.removeprefix("\ufeff")
                    first = False
                newlines += text.count("\n")
                if text:
                    yield text
                if not raw:
                    break
        self.sha256 = digest.hexdigest()

    def lines(self) -> Iterator[tuple[int, str]]:
        """``(line number, text)`` of every line, without its line break."""
        buffer = ""
        number = 0
        for chunk in self.chunks():
            buffer += chunk
            parts = buffer.split("\n")
            buffer = parts.pop()
            for part in parts:
                number += 1
                if len(part) > self.max_value_chars:
                    raise ChatImportError(f"这一行超过 {self.max_value_chars} 个字符，不像一条聊天消息", line=number)
                yield number, part.removesuffix("\r")
            if len(buffer) > self.max_value_chars:
                raise ChatImportError(f"这一行超过 {self.max_value_chars} 个字符，不像一条聊天消息", line=number + 1)
        if buffer:
            yield number + 1, buffer.removesuffix("\r")

    def json_items(self) -> Iterator[JsonItem]:
        """Every top-level JSON value, and each element of a top-level array.

        A top-level array yields its elements (depth 1), not itself; any other
        top-level value (an object per JSONL line, say) is yielded whole (depth 0).
        Values may be separated by whitespace and newlines, so JSON and JSONL read alike.
        """
        decoder = json.JSONDecoder()
        chunks = self.chunks()
        buffer = ""
        pos = 0
        line = 1
        index = 0
        in_array = False
        expect_value = True  # inside an array: a value must come next (after '[' or ',')
        first_in_array = False
        exhausted = False

        def more() -> bool:
            nonlocal buffer, pos, exhausted
            if exhausted:
                return False
            chunk = next(chunks, None)
            if chunk is None:
                exhausted = True
                return False
            buffer = buffer[pos:] + chunk
            pos = 0
            return True

        def skip_space() -> bool:
            """Move past whitespace; False at the end of the file."""
            nonlocal pos, line
            while True:
                while pos < len(buffer) and buffer[pos] in _WHITESPACE:
                    if buffer[pos] == "\n":
                        line += 1
                    pos += 1
                if pos < len(buffer):
                    return True
                if not more():
                    return False

        def decode() -> Any:
            nonlocal pos, line
            while True:
                try:
                    value, end = decoder.raw_decode(buffer, pos)
                except RecursionError as exc:  # deeper than this Python's stack: find the field
                    refuse(len(buffer), "JSON 嵌套太深，不像一条聊天记录", exc)
                except json.JSONDecodeError as exc:
                    if len(buffer) - pos > self.max_value_chars:
                        raise ChatImportError(f"一个 JSON 值超过 {self.max_value_chars} 个字符，或者不是合法的 JSON",
                                              line=line + buffer.count("\n", pos, exc.pos)) from exc
                    if more():
                        continue
                    at = line + buffer.count("\n", pos, exc.pos)
                    ended = exc.pos >= len(buffer) - 1 or exc.msg.startswith("Unterminated")
                    reason = "JSON 没有写完（文件被截断了？）" if ended else f"不是合法的 JSON（{exc.msg}）"
                    raise ChatImportError(reason, line=at) from exc
                except ValueError as exc:  # a number too long for int()
                    refuse(len(buffer), "数字太长，不像聊天记录里的数", exc)
                # A number at the end of a buffer may continue in the next chunk.
                if end == len(buffer) and not exhausted and isinstance(value, int | float) and more():
                    continue
                if _suspect(buffer, pos, end):
                    refuse(end, "", None)
                line += buffer.count("\n", pos, end)
                pos = end
                return value

        def refuse(end: int, fallback: str, cause: BaseException | None) -> None:
            _refuse(buffer, pos, end, line, fallback, cause)

        while skip_space():
            char = buffer[pos]
            if in_array:
                if char == "]":
                    if expect_value and not first_in_array:
                        raise ChatImportError("数组末尾多了一个逗号", line=line)
                    pos += 1
                    in_array = False
                    continue
                if char == ",":
                    if expect_value:
                        raise ChatImportError("数组里多了一个逗号", line=line)
                    pos += 1
                    expect_value = True
                    continue
                if not expect_value:
                    raise ChatImportError("数组元素之间缺少逗号", line=line)
                start = line
                yield JsonItem(start, decode(), 1, index)
                expect_value = False
                first_in_array = False
                continue
            index += 1
            if char == "[":
                pos += 1
                in_array = True
                expect_value = True
                first_in_array = True
                continue
            start = line
            yield JsonItem(start, decode(), 0, index)
        if in_array:
            raise ChatImportError("JSON 数组没有结束（缺少 ]，文件被截断了？）", line=line)


def _open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file (never blocking on a pipe)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ChatImportError(f"读不了这个文件：{exc.strerror or exc}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ChatImportError("不是普通文件（是命名管道、设备或文件夹），不能导入：请先把聊天记录存成文件")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
