"""The session tree: an append-only log of entries, a JSONL file by default.

Guarantees:

- The session is only ever appended to, one complete line per entry (how each backend
  keeps that is in :mod:`liyuan.session.log`: a file loops over short writes and fsyncs,
  so a crash leaves at most one torn last line, and the next append starts on a fresh
  line; PostgreSQL commits each append, and refuses one made on a stale view with
  :class:`~liyuan.errors.SessionConflictError`).
- Loading never crashes on bad content: blank lines, torn or malformed lines, entries
  without an id, duplicate ids and unknown shapes are skipped and reported in
  :attr:`SessionTree.problems`. The stored lines are never rewritten.
- A skipped line never detaches the entries before it: its place on the branch is
  recovered from what the line still holds, or guessed from file order and reported as
  a cut (:meth:`SessionTree.branch_breaks`); see :mod:`liyuan.session.damage`.
- A file whose header names a version newer than this liyuan's is read as far as it can
  be, and never appended to (:class:`~liyuan.errors.TreeError`).
- The leaf is the last appended entry unless the caller navigates to an earlier one
  (reroll, rewind); the next append then forks a new branch from there.
- :meth:`SessionTree.branch` returns root-to-leaf and is safe against ``parentId`` cycles.
  The current branch is cached with its index (:class:`~liyuan.session.branch.BranchIndex`):
  an append extends it in O(1), a navigation to an entry on it (reroll, rewind along the
  branch) copies the prefix, any other navigation recomputes it; every
  :class:`BranchView` handed out is an immutable snapshot (the cached list is only ever
  appended to, never changed in place; a navigation starts a new list).

- Opening reads the file once, keeping per entry what navigation needs; a body is parsed
  from its line when first read (:mod:`liyuan.session.loader`), so an open chat holds in
  memory about its file's size, not a multiple of it, and a turn parses only the live tail.

The line format and the entry readers are in :mod:`liyuan.session.entries`.
"""

from __future__ import annotations

import json
import os
import threading
from bisect import bisect_left
from collections.abc import Collection, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from liyuan.clock import Clock, IdFactory, random_ids, system_clock
from liyuan.errors import ConfigError, TreeError
from liyuan.session.branch import BranchIndex, BranchView, Positions, branch_to
from liyuan.session.damage import SessionProblem
from liyuan.session.entries import SESSION_VERSION, Entry
from liyuan.session.loader import LazyBody, SessionContent
from liyuan.session.log import FileSessionLog, SessionLog

__all__ = ["ID_DRAWS", "NewEntry", "SessionTree", "custom_entry", "message_entry"]

ID_DRAWS = 8
"""How often an append draws a new id when the factory gives one the tree already has."""

class SessionTree:
    """An append-only session tree, backed by a JSONL file, another log, or held in memory.

    Args:
        path: The JSONL file (a :class:`~liyuan.session.log.FileSessionLog`), or ``None``.
        log: Another backend's session (:class:`~liyuan.session.log.SessionLog`), instead
            of ``path``; neither: an in-memory tree.
        session_id: Id written into a new file's header.
        clock: Timestamp source for new entries.
        ids: Id source for new entries (a collision is drawn again, see :data:`ID_DRAWS`).
        fsync: Fsync after every append (the crash guarantee above). ``False`` for a
            file that is not a session yet, such as an import's temporary file, whose
            writer fsyncs it once before moving it into place, and for a chat that
            fsyncs once per turn (:meth:`sync`, ``MemoryConfig.durability="turn"``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        session_id: str = "session",
        clock: Clock = system_clock,
        ids: IdFactory = random_ids,
        fsync: bool = True,
        log: SessionLog | None = None,
    ) -> None:
        if path is not None and log is not None:
            raise ConfigError("SessionTree: path 和 log 只能给一个")
        if path is not None:
            log = FileSessionLog(path, fsync=fsync)
        self._log = log
        self.path = log.path if isinstance(log, FileSessionLog) else None
        """The JSONL file of a file-backed tree, else ``None``."""
        self.session_id = session_id
        self._clock = clock
        self._ids = ids
        self._entries: dict[str, Entry] = {}
        """Every entry by id, in file order (entries are only ever added, never removed)."""
        self._leaf: str | None = None
        self._branch: BranchIndex | None = None
        """Root-to-leaf path of the current leaf with its index, or ``None`` until it is next
        needed. Its list is only ever appended to: views handed out read a prefix of it."""
        self._positions = Positions()
        """Entry id to its index on any branch holding it (shared by every cached branch)."""
        self.problems: list[str] = []
        """Human-readable notes on every line skipped while loading."""
        self.lock = threading.RLock()
        """Held by every append and navigation. Hold it to make a check of :attr:`leaf_id`
        and an append one step when another thread may move the leaf (the leaf guard of a
        background compaction)."""
        self._read_only_reason: str | None = None
        """Why appending is refused (a newer file version), or ``None``."""
        if log is not None:
            content = log.read()
            if content is not None:
                self._load(content)
            else:
                header = {"type": "session", "version": SESSION_VERSION, "id": session_id,
                          "timestamp": clock()}
                log.create(_line(header))

    # -- loading -------------------------------------------------------------

    def _load(self, content: SessionContent) -> None:
        self._entries = content.entries
        self.problems.extend(content.problems)
        if content.session_id is not None:
            self.session_id = content.session_id
        self._leaf = next(reversed(self._entries), None)
        if content.line_marks is not None:
            # The file is one branch and the leaf is its end: index it from what the read
            # noted instead of walking 300,000 parent links on the first turn (issue 24),
            # each entry's place found from its line's offset, not kept in a table (issue 36).
            self._positions = Positions(partial(_file_place, self._entries, content.starts))
            self._branch = BranchIndex(list(self._entries.values()), self._positions, content.line_marks)
        newer = [p for p in content.problems if isinstance(p, SessionProblem) and p.kind == "newer-version"]
        if newer:
            self._read_only_reason = newer[0]

    # -- reading -------------------------------------------------------------

    @property
    def log(self) -> SessionLog | None:
        """Where the entries are stored (``None``: in memory only)."""
        return self._log

    @property
    def leaf_id(self) -> str | None:
        """Where the next append attaches."""
        return self._leaf

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries.values())

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._entries

    def get(self, entry_id: str) -> Entry | None:
        """The entry with this id, or ``None``."""
        return self._entries.get(entry_id)

    def entries(self) -> list[Entry]:
        """All entries in file order."""
        return list(self)

    def branch(self, leaf_id: str | None = None) -> BranchView:
        """Root-to-leaf path ending at ``leaf_id`` (default: the current leaf).

        The current branch is cached, so this costs O(1) per turn; another leaf is
        walked from scratch. The result is an immutable snapshot (see :class:`BranchView`).
        """
        with self.lock:
            if leaf_id is not None and leaf_id != self._leaf:
                return BranchView(branch_to(self._entries, leaf_id))
            if self._branch is None:
                self._branch = BranchIndex(branch_to(self._entries, self._leaf), self._positions)
            return BranchView(self._branch.items, index=self._branch)

    def written_branch(self, kinds: tuple[str, ...] = ("branch-cut", "link-recovered")) -> tuple[
            BranchView, list[str]]:
        """The branch to the last entry in file order (what a reader of the file alone
        sees) and the notes of ``kinds`` problems on it; no file read, no copy when the
        leaf is that entry."""
        with self.lock:
            last = next(reversed(self._entries), None)
            branch = self.branch(last) if last is not None else BranchView([])
            on_branch = branch.ids()
            notes: list[str] = [p for p in self.problems
                     if isinstance(p, SessionProblem) and p.kind in kinds and p.entry_id in on_branch]
            return branch, notes

    def branch_breaks(self, leaf_id: str | None = None) -> list[SessionProblem]:
        """The guessed links (``branch-cut`` problems) on the branch ending at ``leaf_id``.

        Empty when the branch is whole as written (or was re-linked with certainty). The
        app should tell the user: the story before such a point is attached by file order.
        """
        on_branch = {entry.id for entry in self.branch(leaf_id)}
        return [p for p in self.problems
                if isinstance(p, SessionProblem) and p.kind == "branch-cut" and p.entry_id in on_branch]

    # -- writing -------------------------------------------------------------

    # --8<-- [start:navigate]
    def navigate(self, entry_id: str | None) -> None:
        """Move the leaf (reroll, rewind). ``None`` means before the first entry."""
        with self.lock:
            if entry_id is not None and entry_id not in self._entries:
                raise TreeError(f"没有这个条目：{entry_id!r}")
            if entry_id != self._leaf:
                # A new list, never a truncation in place: views of the old branch stay valid.
                self._branch = self._prefix_to(entry_id)
            self._leaf = entry_id

    def _prefix_to(self, entry_id: str | None) -> BranchIndex | None:
        """The cached branch cut after ``entry_id`` when it lies on it (a copy), else ``None``."""
        cached = self._branch
        if cached is None:
            return None
        at = -1 if entry_id is None else cached.position(entry_id, len(cached.items))
        return None if at is None else cached.prefix(at + 1)

    def append(self, entry_type: str, **fields: Any) -> Entry:
        """Append an entry as a child of the current leaf and make it the leaf.

        Raises:
            TreeError: The file has a newer version, the entry cannot be encoded as
                UTF-8 (a lone surrogate), or the file cannot be written.
        """
        return self.extend([(entry_type, fields)])[0]

    def extend(self, items: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Entry]:
        """Append several entries, each a child of the one before (the first of the current
        leaf), in one write to the log (a reply and its ledger; on PostgreSQL one statement
        and one round trip, stored whole or not at all). The last becomes the leaf.

        Raises:
            TreeError: As :meth:`append`; the tree then holds none of the batch. A file
                whose write failed part-way (a full disk) may keep the complete lines
                written before the failure, as a single failed write may keep a fragment.
        """
        with self.lock:
            if self._read_only_reason is not None:
                raise TreeError(f"不能往这个会话文件追加：{self._read_only_reason}")
            entries: list[Entry] = []
            parent = self._leaf
            for entry_type, fields in items:
                entry_id = self._fresh_id({entry.id for entry in entries})
                entries.append(Entry(entry_id, parent, entry_type, {"timestamp": self._clock(), **fields}))
                parent = entry_id
            if self._log is not None and entries:
                self._log.append(b"".join(_line(entry.to_json()) for entry in entries))
            for entry in entries:
                self._entries[entry.id] = entry
                if self._branch is not None:
                    # The entry's parent is the old leaf, the cached path's last entry, and its
                    # id is fresh, so the walk from it is exactly the old path plus itself.
                    self._branch.append(entry)
                self._leaf = entry.id
            return entries
    # --8<-- [end:navigate]

    def append_message(self, role: str, text: str, **extra: Any) -> Entry:
        """Append a message (``user``, ``assistant`` or ``toolResult``)."""
        return self.extend([message_entry(role, text, **extra)])[0]

    def append_custom(self, custom_type: str, data: Mapping[str, Any]) -> Entry:
        """Append a custom entry such as ``rp-summary`` or ``rp-state``."""
        return self.extend([custom_entry(custom_type, data)])[0]

    def _fresh_id(self, taken: Collection[str] = ()) -> str:
        """A new id from the factory, drawn again (up to :data:`ID_DRAWS` times) on a collision
        (with an entry of the tree or one of ``taken``)."""
        entry_id = self._ids()
        for _ in range(ID_DRAWS):
            if entry_id not in self._entries and entry_id not in taken:
                return entry_id
            entry_id = self._ids()
        raise TreeError(f"id 工厂连续 {ID_DRAWS + 1} 次给出了重复的 id：{entry_id!r}")

    def sync(self) -> None:
        """Make every append so far durable (a tree built with ``fsync=False`` calls this
        once per turn, ``MemoryConfig.durability="turn"``).

        Raises:
            TreeError: The session cannot be synced.
        """
        if self._log is None:
            return
        with self.lock:
            self._log.sync()


NewEntry = tuple[str, dict[str, Any]]
"""An entry to append: its type and its fields (:meth:`SessionTree.extend`)."""


def message_entry(role: str, text: str, **extra: Any) -> NewEntry:
    """A message to append (``user``, ``assistant`` or ``toolResult``)."""
    return "message", {"role": role, "text": text, **extra}


def custom_entry(custom_type: str, data: Mapping[str, Any]) -> NewEntry:
    """A custom entry to append, such as ``rp-summary`` or ``rp-state``."""
    return "custom", {"customType": custom_type, "data": dict(data)}


def _line(obj: Mapping[str, Any]) -> bytes:
    """One session line, as every backend stores it."""
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TreeError(f"条目含无法编码成 UTF-8 的字符（孤立的代理项），没有写入：{exc}") from exc


def _file_place(entries: Mapping[str, Entry], starts: Sequence[int], entry_id: str) -> int | None:
    """The index in file order of an entry read from the file whose lines start at ``starts``."""
    entry = entries.get(entry_id)
    body = entry.body if entry is not None else None
    if type(body) is not LazyBody:  # appended since the open (or unknown): not read from the file
        return None
    at = bisect_left(starts, body.offset)
    return at if at < len(starts) and starts[at] == body.offset else None
