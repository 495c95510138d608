"""Size bounds on what a side call is sent and what it may send back (issue 26, item 8).

Invariants:

- A reply longer than :data:`REPLY_CHARS_PER_TOKEN` characters (UTF-16 units) per token
  of its call's ``max_tokens`` is refused (:func:`check_reply_size`): no finished reply
  of prose is that long, and a 10 MB summary or recap would otherwise be stored and
  sent again with every later call.
- Material that does not fit a call's input budget is cut, never the call's structure:
  :func:`keep_newest` keeps the newest text (a conversation: the oldest goes first, at a
  paragraph break), :func:`keep_oldest` the start (a document: its first sections). Both
  report how much was left out, so the prompt and the activity line can say so.
- Everything here is pure: text in, text and counts out.
"""

from __future__ import annotations

from liyuan.errors import ModelOutputError
from liyuan.text import utf16_len, utf16_prefix

__all__ = [
    "REPLY_CHARS_PER_TOKEN",
    "SIDE_INPUT_MAX_CHARS",
    "check_reply_size",
    "keep_newest",
    "keep_oldest",
    "reply_max_chars",
]

REPLY_CHARS_PER_TOKEN = 6
"""Characters per token a reply may average before it counts as far over its limit.
Chinese prose runs at about 1-1.5 characters a token, English at about 4."""
SIDE_INPUT_MAX_CHARS = 60000
"""Default budget of the conversation sent to one summary (story or discussion) call, in
UTF-16 units: the recap's budget (:data:`liyuan.card.inputs.RECAP_INPUT_MAX_CHARS`)."""


def reply_max_chars(max_tokens: int) -> int:
    """The longest reply (UTF-16 units) a call with ``max_tokens`` may return."""
    return REPLY_CHARS_PER_TOKEN * max_tokens


def check_reply_size(text: str, max_tokens: int, what: str) -> None:
    """Refuse a reply far longer than its call's ``max_tokens`` allows.

    Raises:
        ModelOutputError: Naming ``what`` (``摘要``, ``复盘`` ...), its length and the limit.
    """
    limit = reply_max_chars(max_tokens)
    if len(text) > limit or utf16_len(text) > limit:
        raise ModelOutputError(f"{what}有 {utf16_len(text)} 字，远超这次调用的上限（{max_tokens} token，"
                               f"最多 {limit} 字）：不存")


def keep_newest(text: str, max_chars: int) -> tuple[str, int]:
    """The newest part of ``text`` within ``max_chars`` UTF-16 units, and the units left out.

    The cut falls after the first paragraph break (``\\n\\n``) at or after the excess,
    so no block starts mid-sentence; without one, at the exact excess.
    """
    if len(text) * 2 <= max_chars or utf16_len(text) <= max_chars:
        return text, 0
    cut_at = len(text) - len(utf16_prefix(text[::-1], max_chars))
    brk = text.find("\n\n", cut_at)
    start = brk + 2 if brk >= 0 else cut_at
    return text[start:], utf16_len(text[:start])


def keep_oldest(text: str, max_chars: int) -> tuple[str, int]:
    """The start of ``text`` within ``max_chars`` UTF-16 units, and the units left out.

    The cut falls at the last paragraph break (``\\n\\n``) inside the budget; without one,
    at the budget.
    """
    if len(text) * 2 <= max_chars or utf16_len(text) <= max_chars:
        return text, 0
    head = utf16_prefix(text, max_chars)
    brk = head.rfind("\n\n")
    kept = head[:brk] if brk > 0 else head
    return kept, utf16_len(text) - utf16_len(kept)
