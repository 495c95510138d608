"""The handbook ``记忆.md`` as parts: chat blocks, the cross-chat sections, text around them.

A merge never rewrites the whole handbook: its reply would grow with every chat (at 500
chats a whole handbook passes the 32,768-character reply limit), and so would its prompt.
The merge prompt is sent :func:`merge_excerpt` (the blocks of the chats whose recaps it
carries, the cross-chat sections, the text outside blocks) and its reply writes the blocks
of those chats and the cross-chat sections; the code assembles the handbook
(:func:`assemble_handbook`):

- A chat block is a level-1 section (``# ...``) holding a ``来源：局/<id>.md`` line.
- The cross-chat sections are the level-1 sections headed :data:`SHARED_HEADINGS`.
- Anything else (text before the first heading, a section a person added) is the
  handbook's own text: it stays where it is.

Assembly: every block of the previous handbook stays in its place unless the reply wrote
that chat's block (the reply's replaces it) or the chat is forgotten (dropped); blocks
for chats the handbook did not have follow the last block; the reply's cross-chat
sections replace the previous ones (when the reply has none, the previous ones stay).
Text the reply writes outside blocks and cross-chat sections is not taken. What the code
keeps of the previous handbook forgets by itself: a line whose ``[局:id]`` tags all name
forgotten chats is dropped, a forgotten chat's tag is taken off a line other chats still
support. A previous handbook without any block (the first merge, or one a person rewrote
without source lines) is replaced by the reply as a whole. Pure: text in, text out.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection
from dataclasses import dataclass

__all__ = [
    "BLOCK_MAX_CHARS",
    "SHARED_HEADINGS",
    "SHARED_MAX_CHARS",
    "Excerpt",
    "Part",
    "assemble_handbook",
    "block_titles",
    "chat_refs",
    "merge_excerpt",
    "source_ids",
    "split_handbook",
    "without_chats",
]

SHARED_HEADINGS = ("# 人物（跨局）", "# 世界既定事实（跨局）", "# 用户的玩法偏好（跨局）")
"""The cross-chat sections of the handbook, in order (the merge prompt names them)."""
BLOCK_MAX_CHARS = 1500
"""How long the merge prompt asks one chat block to be at most."""
SHARED_MAX_CHARS = 8000
"""How long the merge prompt asks the three cross-chat sections together to be at most.
With a batch of blocks and the resident summary a reply stays well within the reply
limit whatever the number of chats (a test checks the sum)."""

_SOURCE_RE = re.compile(r"^[ \t]*来源[ \t]*[:：][ \t]*局[ \t]*/[ \t]*(\S+?)\.md[ \t]*$", re.MULTILINE)
_HEADING_RE = re.compile(r"^# ", re.MULTILINE)
_TAG_RE = re.compile(r"\[\s*局\s*[:：]\s*([^\]\s]+)\s*\]")


@dataclass(frozen=True)
class Part:
    """One level-1 section of the handbook (or the text before the first one)."""

    kind: str
    """``block`` (a chat's), ``shared`` (a cross-chat section) or ``text``."""
    text: str
    chat_id: str = ""


@dataclass(frozen=True)
class Excerpt:
    """What a merge prompt is sent of the handbook."""

    text: str
    omitted_blocks: int
    """Blocks left out (chats the merge does not touch; the code keeps them)."""


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


def merge_excerpt(handbook: str, chat_ids: Collection[str]) -> Excerpt:
    """The parts of ``handbook`` a merge of ``chat_ids`` needs: those chats' blocks, the
    cross-chat sections and the text outside blocks, in the handbook's order. Its size does
    not grow with the number of chats the handbook holds."""
    parts = split_handbook(handbook)
    kept = [p for p in parts if p.kind != "block" or p.chat_id in chat_ids]
    blocks = sum(p.kind == "block" for p in parts)
    return Excerpt("\n\n".join(p.text for p in kept), blocks - sum(p.kind == "block" for p in kept))


def block_titles(handbook: str, chat_ids: Collection[str]) -> dict[str, str]:
    """The heading (without ``# ``) of each of ``chat_ids``' blocks the handbook has."""
    return {p.chat_id: p.text.split("\n", 1)[0].removeprefix("#").strip()
            for p in split_handbook(handbook) if p.kind == "block" and p.chat_id in chat_ids}


def source_ids(handbook: str) -> set[str]:
    """Chat ids of the handbook's ``来源：局/<id>.md`` lines (one per chat block)."""
    return set(_SOURCE_RE.findall(handbook))


def chat_refs(text: str) -> set[str]:
    """Every chat id a text names: ``[局:id]`` tags and ``来源：局/<id>.md`` lines."""
    return set(_TAG_RE.findall(text)) | source_ids(text)


def without_chats(text: str, chats: Collection[str]) -> str:
    """``text`` without the lines only ``chats`` support (every ``[局:id]`` tag of the line names
    one of them) and without their tags on the lines other chats support too."""
    if not chats or not _TAG_RE.search(text):
        return text
    lines = []
    for line in text.split("\n"):
        tags = _TAG_RE.findall(line)
        if tags and all(tag in chats for tag in tags):
            continue
        lines.append(_TAG_RE.sub(lambda m: "" if m.group(1) in chats else m.group(0), line).rstrip() if tags else line)
    return "\n".join(lines)


def _forget(part: Part, gone: Collection[str]) -> Part:
    """``part`` without lines only forgotten chats support, and without their tags."""
    return Part(part.kind, without_chats(part.text, gone), part.chat_id)


def assemble_handbook(previous: str | None, reply: str, *, gone: Collection[str]) -> str:
    """The handbook after a merge whose reply's handbook part is ``reply`` (see the module docstring).

    Args:
        previous: The handbook as it was when the merge was built (``None``: none yet).
        reply: The handbook part of the merge reply.
        gone: Chats being forgotten (their blocks are dropped) or forgotten for good.
    """
    old = split_handbook(previous or "")
    if not any(p.kind == "block" for p in old):
        return reply.strip()  # the first merge, or a rebuild: the reply is the handbook
    new = split_handbook(reply)
    written = {p.chat_id: p for p in new if p.kind == "block"}
    shared = [p for p in new if p.kind == "shared"] or [_forget(p, gone) for p in old if p.kind == "shared"]
    out: list[Part] = []
    placed: set[str] = set()
    for part in old:
        if part.kind == "shared":
            continue
        if part.kind == "block":
            if part.chat_id in gone or part.chat_id in placed:
                continue
            placed.add(part.chat_id)
            part = written.get(part.chat_id) or _forget(part, gone)
        else:
            part = _forget(part, gone)
        out.append(part)
    last_block = max((i for i, p in enumerate(out) if p.kind == "block"), default=len(out) - 1)
    fresh = [p for chat_id, p in written.items() if chat_id not in placed and chat_id not in gone]
    out[last_block + 1:last_block + 1] = fresh
    return "\n\n".join(p.text for p in [*out, *shared] if p.text.strip())
