"""Root-to-leaf paths through the tree, and the immutable view of one that readers get.

Invariant: :func:`branch_to` never loops (a ``parentId`` cycle ends the walk) and a
:class:`BranchView` never changes after it is handed out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import islice
from typing import overload

from liyuan.session.entries import Entry

__all__ = ["BranchView", "branch_to"]


def branch_to(entries: Mapping[str, Entry], leaf_id: str | None) -> list[Entry]:
    """Walk ``parentId`` from ``leaf_id`` to the root; return root-to-leaf.

    A cycle or a dangling parent ends the walk where it is detected.
    """
    path: list[Entry] = []
    seen: set[str] = set()
    current = leaf_id
    while current is not None and current not in seen:
        entry = entries.get(current)
        if entry is None:
            break
        seen.add(current)
        path.append(entry)
        current = entry.parent_id
    path.reverse()
    return path


class BranchView(Sequence[Entry]):
    """An immutable root-to-leaf snapshot of a branch, sharing storage with the tree.

    Taking one costs O(1) however long the branch is. It stays valid and unchanged
    whatever the tree does afterwards, because the list it reads is only ever appended
    to past the snapshot's length. Slicing returns a new ``list``; equality compares
    entries with any list, tuple or view.
    """

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[Entry], length: int | None = None) -> None:
        self._items = items
        self._length = len(items) if length is None else length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step == 1:
                return self._items[start:max(start, stop)]
            return [self._items[i] for i in range(start, stop, step)]
        position = index + self._length if index < 0 else index
        if not 0 <= position < self._length:
            raise IndexError("branch index out of range")
        return self._items[position]

    def __iter__(self) -> Iterator[Entry]:
        return islice(self._items, self._length)

    def __reversed__(self) -> Iterator[Entry]:
        # Entries past the snapshot's length (appended later) are skipped, not copied.
        return islice(reversed(self._items), len(self._items) - self._length, None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (BranchView, list, tuple)):
            return NotImplemented
        return len(other) == self._length and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to lists, so unhashable like them

    def __repr__(self) -> str:
        return f"BranchView({list(self)!r})"
