"""A card's memory documents, wherever they are kept: the seam the sync and the hard path use.

:class:`MemoryStore` is what the card's memory code (:mod:`liyuan.card.sync`,
:mod:`liyuan.card.manual`, :mod:`liyuan.card.manifest`, :mod:`liyuan.card.repair`) needs of
the documents in ``记忆/``: read one, write one, replace one only if it still holds what a
change read, keep copies in ``.history/``, list the recaps, a stamp over every input of a
merge, and the card's two locks (:class:`CardLocks`). Documents are named by their path
in the card's :class:`~liyuan.card.layout.CardLayout`, so the code above the seam is the
same on every backend.

:class:`~liyuan.card.files.MemoryFiles` is the default: the card folder, every write
atomic, every path checked for symlinks, OS file locks. ``liyuan.storage.pgmemory`` keeps
the same documents, byte for byte, in PostgreSQL, with advisory locks.

:meth:`MemoryStore.snapshot` and :meth:`MemoryStore.restore` move a card's whole memory
(``.history/`` included) between backends: what a folder holds is what the database holds.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol

from liyuan.card.layout import CardLayout
from liyuan.clock import Clock, IdFactory

__all__ = ["CardLocks", "MemoryBackend", "MemoryStore", "StoreLock"]


class StoreLock(Protocol):
    """One of a card's locks: excludes other threads of this process and other processes."""

    def acquire(self, blocking: bool = True) -> bool:
        """Take it; with ``blocking=False`` return False at once when it is taken."""
        ...

    def release(self) -> None:
        """Leave once (a re-entrant lock goes when its owner leaves for the last time)."""
        ...

    def reading(self) -> AbstractContextManager[None]:
        """Hold it around a read (a backend may let a read go ahead where it cannot lock)."""
        ...

    def __enter__(self) -> object: ...

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...


@dataclass
class CardLocks:
    """The two locks of one card."""

    run: StoreLock
    """Held for a whole sync, model calls included: one sync of a card at a time, in any process."""
    write: StoreLock
    """Held briefly around every read-decide-write of memory documents; never across a
    model call. Re-entrant."""


class MemoryStore(Protocol):
    """The memory documents of one card (see the module)."""

    layout: CardLayout
    """Names the documents: every path given to a method is inside ``layout.memory_dir``."""

    @property
    def locks(self) -> CardLocks:
        """The card's locks (the same objects for every store of this card in a process)."""
        ...

    def read_text(self, path: Path) -> str | None:
        """The document's text (UTF-8, newlines as ``\\n``), ``None`` when it does not exist.

        Raises:
            MemoryFileError: It exists but cannot be read: unreadable memory must never
                look like deleted memory.
        """
        ...

    def read_bytes(self, path: Path) -> bytes | None:
        """The document's bytes as stored, ``None`` when it does not exist."""
        ...

    def exists(self, path: Path) -> bool:
        """Whether the document exists."""
        ...

    def stamp(self, path: Path, *, after_append: bool = False) -> Hashable | None:
        """Something that changes whenever the document does (cheaper than reading it); ``None``: missing.

        ``after_append``: this thread has just appended a turn's user line and reads the stamp
        for that turn; a backend may answer with the stamp it read in that append's own
        round trip (as fresh as the append), once."""
        ...

    def write_text(self, path: Path, text: str) -> None:
        """Write the document whole; a reader sees the old text or the new one, never a mix."""
        ...

    def replace_text(self, path: Path, text: str, expected: str | None) -> bool:
        """Write ``text`` only if the document still holds ``expected`` (``None``: missing), with
        no window between the check and the write; False (nothing written) when it did not."""
        ...

    def delete(self, path: Path, *, at_once: bool = False) -> None:
        """Remove the document; a missing one is fine.

        ``at_once``: durable when this returns even inside the write lock (a backend whose
        write lock is a transaction commits it apart), for a step whose order against
        another store matters: a deleted chat's recap goes before its sessions. Never for a
        document the same step has written.
        """
        ...

    def recap_texts(self, forgotten: Collection[str] = ()) -> dict[str, str]:
        """Every recap (``局/<valid id>.md``) but the ``forgotten``: ``{chatId: text}``, by chat id."""
        ...

    def input_stamp(self) -> str:
        """A digest over the manifest, the handbook, the resident summary and every recap."""
        ...

    def backup_copy(self, path: Path) -> Path | None:
        """Copy the document into ``.history/`` (older copies of it pruned); ``None``: nothing to copy."""
        ...

    def backup_once(self, path: Path) -> Path | None:
        """Copy the document into ``.history/`` under a name made of its content: once per content."""
        ...

    def move_to_history(self, path: Path) -> Path | None:
        """Move the document into ``.history/``; ``None`` when it does not exist."""
        ...

    def check_paths(self) -> None:
        """Refuse to go on when a document's path is unsafe (files: a symlink).

        Raises:
            UnsafePathError: One is.
        """
        ...

    def remove_orphan_temps(self) -> int:
        """Remove what crashed writes left behind; how many (hold the write lock)."""
        ...

    def snapshot(self) -> dict[str, bytes]:
        """Every document by its path relative to ``记忆/`` (``.history/`` included), bytes as stored."""
        ...

    def restore(self, documents: Mapping[str, bytes]) -> None:
        """Store ``documents`` as :meth:`snapshot` gives them (each written whole; others left alone)."""
        ...



class MemoryBackend(Protocol):
    """Binds the memory documents of one card (a part of :class:`liyuan.storage.CardStorage`)."""

    def bind(self, layout: CardLayout, *, clock: Clock, ids: IdFactory) -> MemoryStore:
        """The store of the card named by ``layout``; ``clock`` and ``ids`` name its ``.history/`` copies."""
        ...
