"""Root-to-leaf paths through the tree, and the immutable view of one that readers get.

Invariant: :func:`branch_to` never loops (a ``parentId`` cycle ends the walk) and a
:class:`BranchView` never changes after it is handed out.

The tree's current branch carries a :class:`BranchIndex`: where each entry sits on it
and where each kind of custom entry occurs, kept as the branch grows, so a view answers
"is this id on the branch?" and "the latest ``rp-state``" in O(1) / O(log n) however long
the chat (:meth:`BranchView.ids`, :meth:`BranchView.latest_custom`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import overload

from liyuan.session.entries import Entry

__all__ = ["BranchIds", "BranchIndex", "BranchView", "Positions", "branch_ids", "branch_to"]


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


class Positions:
    """Entry id to its index on a branch (the table :class:`BranchIndex` shares): a dict,
    over a look-up that answers for the entries a one-branch file was opened with (their
    index is their place in the file). Issue 36: a dict of 300,000 ids and their indices
    was 19 MB of a long chat's open, and a look-up there is one bisection."""

    __slots__ = ("_added", "_base")

    def __init__(self, base: Callable[[str], int | None] | None = None) -> None:
        self._added: dict[str, int] = {}
        self._base = base

    def get(self, entry_id: str) -> int | None:
        found = self._added.get(entry_id)
        return self._base(entry_id) if found is None and self._base is not None else found

    def __setitem__(self, entry_id: str, index: int) -> None:
        self._added[entry_id] = index

    def update(self, pairs: Iterable[tuple[str, int]]) -> None:
        self._added.update(pairs)


class BranchIndex:
    """The lookup tables of one root-to-leaf list the tree keeps (appended to, never edited).

    ``positions`` maps an entry id to its index on a branch. An entry's ancestors never
    change, so its index is the same on every branch that holds it; the table is shared
    by every branch list of a tree, and a lookup is confirmed against the list (an entry
    of a damaged ``parentId`` cycle may sit elsewhere on another walk: then it simply
    reads as absent from the older view). ``marks`` lists, per custom type, the indices
    of such entries on this list, ascending.
    """

    __slots__ = ("items", "marks", "positions")

    def __init__(self, items: list[Entry], positions: Positions,
                 marks: dict[str, list[int]] | None = None) -> None:
        self.items = items
        self.positions = positions
        self.marks: dict[str, list[int]] = {} if marks is None else marks
        if marks is None:
            # _note for each entry, unrolled: a branch of 300,000 entries is indexed at open.
            positions.update(zip([entry.id for entry in items], range(len(items)), strict=True))
            for index, entry in enumerate(items):
                if entry.type == "custom":
                    kind = entry.custom_type
                    if kind:
                        self.marks.setdefault(kind, []).append(index)

    def _note(self, index: int, entry: Entry) -> None:
        self.positions[entry.id] = index
        if entry.type == "custom" and entry.custom_type:
            self.marks.setdefault(entry.custom_type, []).append(index)

    def append(self, entry: Entry) -> None:
        """Extend the list by one entry (its parent is the last one)."""
        self.items.append(entry)
        self._note(len(self.items) - 1, entry)

    def position(self, entry_id: str, length: int) -> int | None:
        """Index of ``entry_id`` among the first ``length`` entries, or ``None``."""
        index = self.positions.get(entry_id)
        if index is None or index >= length or self.items[index].id != entry_id:
            return None
        return index

    def prefix(self, length: int) -> BranchIndex:
        """A new index over a copy of the first ``length`` entries (a move to an ancestor)."""
        marks = {kind: found[:bisect_left(found, length)] for kind, found in self.marks.items()}
        return BranchIndex(self.items[:length], self.positions, marks)


class BranchIds(Collection[str]):
    """The ids of a :class:`BranchView` with an index: membership in O(1), no copy.

    Immutable like the view it comes from (it reads only the view's prefix of the list).
    """

    __slots__ = ("_index", "_length")

    def __init__(self, index: BranchIndex, length: int) -> None:
        self._index = index
        self._length = length

    def __contains__(self, entry_id: object) -> bool:
        return isinstance(entry_id, str) and self._index.position(entry_id, self._length) is not None

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[str]:
        return (entry.id for entry in islice(self._index.items, self._length))

    @property
    def list_key(self) -> object:
        """Identifies the branch list this view reads (the same while the branch only grows)."""
        return self._index

    def places(self, entry_ids: Sequence[str]) -> list[int]:
        """Where each of ``entry_ids`` sits on this view's branch list as it is now (``-1``:
        not on it). The list only grows, so a place found stays right for every later view
        of the same list (:attr:`list_key`); ``0 <= place < len(view)`` is membership."""
        get, items = self._index.positions.get, self._index.items
        size = len(items)
        out = []
        for entry_id in entry_ids:
            at = get(entry_id)
            out.append(at if at is not None and at < size and items[at].id == entry_id else -1)
        return out


def branch_ids(ids: Collection[str] | None) -> Collection[str] | None:
    """``ids`` frozen: a :class:`BranchIds` or ``frozenset`` as is, anything else copied."""
    if ids is None or isinstance(ids, (BranchIds, frozenset)):
        return ids
    return frozenset(ids)


class BranchView(Sequence[Entry]):
    """An immutable root-to-leaf snapshot of a branch, sharing storage with the tree.

    Taking one costs O(1) however long the branch is. It stays valid and unchanged
    whatever the tree does afterwards, because the list it reads is only ever appended
    to past the snapshot's length. Slicing returns a new ``list``; equality compares
    entries with any list, tuple or view.
    """

    __slots__ = ("_index", "_items", "_length")

    def __init__(self, items: list[Entry], length: int | None = None, index: BranchIndex | None = None) -> None:
        self._items = items
        self._length = len(items) if length is None else length
        self._index = index if index is not None and index.items is items else None

    def ids(self) -> Collection[str]:
        """The entry ids on this branch, frozen: O(1) on the tree's current branch, else a copy."""
        if self._index is not None:
            return BranchIds(self._index, self._length)
        return frozenset(entry.id for entry in self)

    def head(self, length: int) -> BranchView:
        """The first ``length`` entries (root side) as a view sharing the same storage: O(1)."""
        return BranchView(self._items, max(0, min(length, self._length)), self._index)

    def latest_custom(self, custom_type: str) -> Entry | None:
        """The last ``custom`` entry of ``custom_type`` on this branch, or ``None``."""
        if self._index is not None:
            found = self._index.marks.get(custom_type, [])
            at = bisect_left(found, self._length)
            return self._items[found[at - 1]] if at else None
        return next((e for e in reversed(self) if e.type == "custom" and e.custom_type == custom_type), None)

    def custom_positions(self, custom_types: Collection[str]) -> list[int] | None:
        """Indices of the ``custom`` entries of ``custom_types`` on this branch, ascending,
        read from the index (``None``: this view has none, scan it instead)."""
        if self._index is None:
            return None
        found: list[int] = []
        for kind in custom_types:
            marks = self._index.marks.get(kind, [])
            found.extend(marks[:bisect_left(marks, self._length)])
        return sorted(found)

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
