"""The resident summary as each turn reads it: from the card's memory store, re-read only when it changed.

A card hands one :class:`ResidentReader` to every chat it opens: the chat reads the
summary (and whether an edit holds it back) from this reader of the memory layer, so no
chat calls back into its card.

Invariants: the text is read again whenever the document's stamp changed (files: the
inode, size or modification time, which an atomic rewrite, a hand edit or a symlink put
in its place all change); a store that cannot give a stamp is read every time.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable

from liyuan.card.layout import CardLayout
from liyuan.card.memstore import MemoryStore
from liyuan.card.revised import resident_held_back
from liyuan.errors import MemoryFileError

__all__ = ["ResidentReader", "read_resident"]


def read_resident(files: MemoryStore, layout: CardLayout) -> str | None:
    """The resident summary, trimmed; ``None`` when there is none (fit it before sending).

    Raises:
        MemoryFileError: The document exists but cannot be read.
    """
    text = files.read_text(layout.resident)
    if text is None or not text.strip():
        return None
    return text.strip()


class ResidentReader:
    """One card's resident summary for its chats' turns (one reader per card, shared)."""

    def __init__(self, files: MemoryStore, layout: CardLayout) -> None:
        self._files = files
        self._layout = layout
        self._cache: tuple[Hashable | None, str | None] | None = None
        self.file = layout.resident.relative_to(layout.memory_dir).as_posix()
        """The document's name under ``记忆/`` (a turn's record cites it)."""

    def read(self, after_append: bool = False) -> str | None:
        """The summary as stored; ``after_append``: a turn's, its user line just appended
        (see :meth:`~liyuan.card.memstore.MemoryStore.stamp`)."""
        try:
            key = self._files.stamp(self._layout.resident, after_append=after_append)
        except MemoryFileError:
            return read_resident(self._files, self._layout)
        cached = self._cache
        if cached is not None and cached[0] == key:
            return cached[1]
        text = read_resident(self._files, self._layout)
        self._cache = (key, text)
        return text

    def held_back(self, chat_id: str, revisions: Collection[str]) -> bool:
        """Whether the summary may still hold text an edit of ``chat_id`` took back
        (:func:`liyuan.card.revised.resident_held_back`)."""
        return resident_held_back(self._files, chat_id, revisions)
