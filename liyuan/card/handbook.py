"""The handbook ``记忆.md`` as parts: chat blocks, the cross-chat sections, text around them.

A merge reply need not rewrite the whole handbook: its output would grow with every
chat (at 500 chats a whole handbook passes the 32,768-character reply limit). It writes
the blocks of the chats whose recaps it was sent and the cross-chat sections; the code
assembles the handbook (:func:`assemble_handbook`):

- A chat block is a level-1 section (``# ...``) holding a ``来源：局/<id>.md`` line.
- The cross-chat sections are the level-1 sections headed :data:`SHARED_HEADINGS`.
- Anything else (text before the first heading, a section a person added) is kept where
  it is: it is the handbook's own text.

Assembly: every block of the previous handbook stays in its place unless the reply
wrote that chat's block (the reply's replaces it) or the chat is forgotten (dropped);
blocks for chats the handbook did not have follow the last block; the reply's
cross-chat sections replace the previous ones (when the reply has none, the previous
ones stay). A reply that holds every block the result needs is a whole handbook and is
taken as it is, as the merge prompt still asks (its text outside the blocks replaces the
previous one's). Pure: text in, text out.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection
from dataclasses import dataclass

__all__ = ["SHARED_HEADINGS", "Part", "assemble_handbook", "split_handbook"]

SHARED_HEADINGS = ("# 人物（跨局）", "# 世界既定事实（跨局）", "# 用户的玩法偏好（跨局）")
"""The cross-chat sections of the handbook, in order (the merge prompt names them)."""

_SOURCE_RE = re.compile(r"^[ \t]*来源[ \t]*[:：][ \t]*局[ \t]*/[ \t]*(\S+?)\.md[ \t]*$", re.MULTILINE)
_HEADING_RE = re.compile(r"^# ", re.MULTILINE)


@dataclass(frozen=True)
class Part:
    """One level-1 section of the handbook (or the text before the first one)."""

    kind: str
    """``block`` (a chat's), ``shared`` (a cross-chat section) or ``text``."""
    text: str
    chat_id: str = ""


def split_handbook(text: str) -> list[Part]:
    """The handbook's parts in order (blank edges of each part trimmed, empty parts dropped)."""
    starts = [m.start() for m in _HEADING_RE.finditer(text)]
    bounds = ([0] if not starts or starts[0] else []) + starts + [len(text)]
    parts: list[Part] = []
    for begin, end in itertools.pairwise(bounds):
        chunk = text[begin:end].strip()
        if not chunk:
            continue
        sources = _SOURCE_RE.findall(chunk)
        heading = chunk.split("\n", 1)[0].strip()
        if sources:
            parts.append(Part("block", chunk, sources[-1]))
        elif heading in SHARED_HEADINGS:
            parts.append(Part("shared", chunk))
        else:
            parts.append(Part("text", chunk))
    return parts


def assemble_handbook(previous: str | None, reply: str, *, gone: Collection[str]) -> str:
    """The handbook after a merge whose reply's handbook part is ``reply`` (see the module docstring).

    Args:
        previous: The handbook the merge was sent (``None``: none yet).
        reply: The handbook part of the merge reply.
        gone: Chats being forgotten (their blocks are dropped) or forgotten for good.
    """
    old = split_handbook(previous or "")
    new = split_handbook(reply)
    written = {p.chat_id: p for p in new if p.kind == "block"}
    needed = {p.chat_id for p in old if p.kind == "block"} - set(gone)
    if needed <= set(written):
        return reply.strip()  # a whole handbook, as the older protocol asked
    shared = [p for p in new if p.kind == "shared"] or [p for p in old if p.kind == "shared"]
    out: list[Part] = []
    placed: set[str] = set()
    for part in old:
        if part.kind == "shared":
            continue
        if part.kind == "block":
            if part.chat_id in gone or part.chat_id in placed:
                continue
            part = written.get(part.chat_id, part)
            placed.add(part.chat_id)
        out.append(part)
    last_block = max((i for i, p in enumerate(out) if p.kind == "block"), default=len(out) - 1)
    fresh = [p for p in new if p.kind == "block" and p.chat_id not in placed and p.chat_id not in gone]
    out[last_block + 1:last_block + 1] = fresh
    return "\n\n".join(p.text for p in [*out, *shared])
