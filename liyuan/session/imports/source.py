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

JSON values are decoded with the standard library's ``JSONDecoder.raw_decode`` on a
sliding buffer, so a file that is one huge array (``[{...},{...}, ...]`` on one line)
streams element by element, and an error still says on which line it is.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from liyuan.session.imports.model import ChatImportError

__all__ = ["CHUNK_BYTES", "MAX_VALUE_CHARS", "JsonItem", "TextSource"]

CHUNK_BYTES = 1 << 20
MAX_VALUE_CHARS = 32 << 20
"""Longest line or JSON value accepted (characters): one message, not the file."""

_WHITESPACE = " \t\r\n"


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
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 (closed below, generator-safe)
        except OSError as exc:
            raise ChatImportError(f"读不了这个文件：{exc.strerror or exc}") from exc
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
                # A number at the end of a buffer may continue in the next chunk.
                if end == len(buffer) and not exhausted and isinstance(value, int | float) and more():
                    continue
                line += buffer.count("\n", pos, end)
                pos = end
                return value

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
