"""Small text helpers shared by every memory layer.

- Lengths are UTF-16 code units, as in the original (JavaScript ``String.length``): a
  Chinese character counts 1, an emoji 2. Every character threshold in liyuan (2000 /
  500 floors, 1200 / 4300 / 200 budget, 60000 recap input) is measured this way.
- :func:`strip_fence` unwraps a reply that is one fenced block as a whole, tolerating the
  small variations models produce (a language tag, trailing spaces, CRLF line ends).
"""

from __future__ import annotations

import re

__all__ = ["has_lone_surrogate", "replace_lone_surrogates", "strip_fence", "utf16_len", "utf16_prefix"]


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (JavaScript ``String.length``): astral chars count 2."""
    # The codec counts in C (a 16-million-character message: 0.05 s instead of 2 s); a
    # lone surrogate passes through as the one unit it is.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a surrogate code point (``'\\ud83c'``) that no UTF-8 file can store."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def replace_lone_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (a proper pair becomes its character)."""
    if not has_lone_surrogate(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def utf16_prefix(text: str, units: int) -> str:
    """The longest prefix of ``text`` that takes at most ``units`` UTF-16 code units.

    Never splits an astral character (an emoji is kept whole or left out).
    """
    if units <= 0:
        return ""
    if len(text) * 2 <= units:
        return text
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > units:
            return text[:index]
    return text


_FENCE_RE = re.compile(r"\A(`{3,}|~{3,})[\w+.-]*[ \t]*\n(?P<body>.*?)\n[ \t]*\1[ \t]*\Z", re.DOTALL)


def strip_fence(text: str) -> str:
    """The body of a reply that is one fenced code block as a whole; else the text, trimmed.

    Only a single block counts: a reply with two blocks, or with text around the fence,
    is returned unchanged (trimmed). CRLF line ends are normalised to LF first.
    """
    trimmed = text.replace("\r\n", "\n").strip()
    match = _FENCE_RE.match(trimmed)
    if match is None:
        return trimmed
    body = match.group("body")
    fence = match.group(1)
    if any(line.lstrip().startswith(fence[:3]) for line in body.split("\n")):
        return trimmed  # more than one block: not ours to unwrap
    return body.strip()
