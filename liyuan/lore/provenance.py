"""Lore learnt from play, tied to the chats it came from (issue 23, beyond the peers).

The handbook (``记忆/记忆.md``) ends with cross-chat sections whose every line carries the
chats that support it (``[局:jA][局:jB]``). :func:`propose_from_handbook` turns the stable
lines of ``# 人物（跨局）`` and ``# 世界既定事实（跨局）`` into lore entries: a line
supported by at least ``min_sources`` chats, with a name to key it on (the words before
``：``, or a name in 「」). Each entry keeps its chats in :attr:`LoreEntry.sources`.

:func:`forget_chat` is the lore side of forgetting by source: a deleted chat is taken
out of every entry's sources, and an entry left with none (only that chat supported it)
is removed. Entries a person wrote (no sources) are never touched.

Invariant: nothing here reads or writes files; the card does (:meth:`liyuan.Card.propose_lore`,
:meth:`liyuan.Card.adopt_lore`, :meth:`liyuan.Card.delete_chat`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from liyuan.lore.model import LoreBook, LoreEntry

__all__ = ["LEARNT_SECTIONS", "adopt", "forget_chat", "propose_from_handbook"]

LEARNT_SECTIONS = ("# 人物（跨局）", "# 世界既定事实（跨局）")
"""The handbook sections whose lines may become lore."""
_SOURCE_RE = re.compile(r"\[局:([A-Za-z0-9_-]+)\]")
_NAME_RE = re.compile(r"「([^」]{1,20})」")
_TITLE_CHARS = 20


def _lines(handbook: str) -> Iterable[str]:
    section = None
    for raw in handbook.splitlines():
        line = raw.strip()
        if line.startswith("# "):
            section = line if line in LEARNT_SECTIONS else None
        elif section is not None and line.startswith("- "):
            yield line[2:].strip()


def propose_from_handbook(handbook: str, *, min_sources: int = 2) -> list[LoreEntry]:
    """Lore entries for the handbook's stable cross-chat lines (see the module docstring).

    Lines sharing a name become one entry (their texts joined, their sources united).
    """
    found: dict[str, tuple[list[str], list[str]]] = {}
    for line in _lines(handbook):
        sources = list(dict.fromkeys(_SOURCE_RE.findall(line)))
        text = _SOURCE_RE.sub("", line).strip()
        if len(sources) < min_sources or not text:
            continue
        head, sep, _ = text.partition("：")
        names = [head.strip()] if sep and 0 < len(head.strip()) <= _TITLE_CHARS else _NAME_RE.findall(text)
        if not names:
            continue
        texts, chats = found.setdefault(names[0], ([], []))
        texts.append(text)
        chats.extend(c for c in sources if c not in chats)
    return [LoreEntry(name, content="\n".join(texts), keys=(name,), sources=tuple(chats),
                      extra={"learnt_from": "记忆/记忆.md"})
            for name, (texts, chats) in found.items()]


def adopt(book: LoreBook | None, proposals: Sequence[LoreEntry]) -> LoreBook:
    """``book`` with the proposals added; a learnt entry of the same title is replaced,
    an authored one (no sources) is kept and the proposal skipped."""
    current = list(book.entries) if book else []
    by_title = {entry.title: i for i, entry in enumerate(current)}
    for proposal in proposals:
        at = by_title.get(proposal.title)
        if at is None:
            by_title[proposal.title] = len(current)
            current.append(proposal)
        elif current[at].sources:
            current[at] = proposal
    return replace(book, entries=tuple(current)) if book else LoreBook(tuple(current))


# --8<-- [start:forget_chat]
def forget_chat(book: LoreBook, chat_id: str) -> tuple[LoreBook, list[str]]:
    """``book`` without ``chat_id`` as a source; returns the titles removed because only it supported them."""
    kept: list[LoreEntry] = []
    removed: list[str] = []
    for entry in book.entries:
        if chat_id not in entry.sources:
            kept.append(entry)
            continue
        left = tuple(c for c in entry.sources if c != chat_id)
        if left:
            kept.append(replace(entry, sources=left))
        else:
            removed.append(entry.title)
    return replace(book, entries=tuple(kept)), removed
# --8<-- [end:forget_chat]
