"""Reading a session file in one pass: a small record per entry, each body parsed when read.

Invariants:

- One loader for every reader of session files (:func:`read_entries` on bytes,
  :func:`read_session_file` on a file it streams): what is kept, skipped and reported
  is decided line by line exactly as the format says (see :mod:`liyuan.session.entries`).
- Opening keeps per entry only what navigation needs: its id, parent id and type, and
  (answered without parsing) ``role``, ``customType`` and ``mode``, plus where its line
  lies. The rest of a body is parsed from that line with :mod:`json` when it is first
  read (:class:`LazyBody`) and kept from then on, so a long chat costs memory for the
  entries the app reads (the live tail), not for the whole file, and a lazily read body
  equals the one an eager parse gives.
- A line's place never changes: the file is append-only, so the byte offset recorded at
  open stays right after any number of appends. A line that no longer holds its entry
  (the file was rewritten behind the tree's back) is refused (:class:`~liyuan.errors.TreeError`).
"""

from __future__ import annotations

import gc
import io
import json
import threading
import weakref
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, NamedTuple

# orjson checks a line and finds its navigation fields about four times faster than the
# standard parser, which on a 100,000-turn chat is most of an open (issue 24). It is only
# the first look: a line it refuses is judged by json exactly as before, and bodies are
# parsed by json, so what is kept and what is read never depends on which parser ran.
import orjson

from liyuan.errors import TreeError
from liyuan.session.damage import SessionProblem, Skipped, bridge, describe, encodable, near_miss_link, salvage_link
from liyuan.session.entries import DAMAGED_ENTRY_TYPE, SESSION_VERSION, Entry

__all__ = ["LazyBody", "SessionContent", "read_entries", "read_session_file"]

_MISSING: Any = object()
"""A shortcut field the line does not have."""
_PARSE: Any = object()  # a shortcut field of another type than a string or null: answered by parsing
_NOTED_AT = {"role": 1, "customType": 2, "mode": 3}  # where LazyBody.get finds what it answers unparsed
_DEEP = 400
"""Lines with this many brackets are judged by json alone: how deep each parser may nest
differs (orjson stops at 1024, json at Python's recursion limit)."""


class _Source:
    """The bytes lazy bodies read their lines from: a file's bytes, or the open file."""

    __slots__ = ("__weakref__", "_file", "_lock", "_raw", "name")

    def __init__(self, name: str, raw: bytes | None = None, file: IO[bytes] | None = None) -> None:
        self.name = name
        self._raw = raw
        self._file = file
        self._lock = threading.Lock()
        if file is not None:
            weakref.finalize(self, file.close)

    def read(self, offset: int) -> bytes:
        """The line that starts at ``offset`` (to its newline, or the end of the bytes)."""
        if self._raw is not None:
            end = self._raw.find(b"\n", offset)
            return self._raw[offset:] if end < 0 else self._raw[offset:end + 1]
        assert self._file is not None
        try:
            with self._lock:
                self._file.seek(offset)
                return self._file.readline()
        except (OSError, ValueError) as exc:
            raise TreeError(f"无法读取会话文件 {self.name} 的第 {offset} 字节处：{exc}") from exc


class LazyBody(Mapping[str, Any]):
    """An entry's body, parsed from its line when first read (then kept).

    ``get("role")``, ``get("customType")`` and ``get("mode")`` are answered from what
    the open noted, without parsing, which is what lets a whole-branch scan (the story
    view of a recap) stay cheap. Equal to the ``dict`` an eager parse gives.
    """

    __slots__ = ("_id", "_noted", "_parsed", "_source", "offset")

    def __init__(self, source: _Source, offset: int, entry_id: str, noted: tuple[Any, ...]) -> None:
        self._source = source
        self.offset = offset
        """Where the line starts; it ends at its newline (no length kept: 5 MB less at 100,000 turns)."""
        self._id = entry_id
        self._noted = noted
        """``(type, role, customType, mode)`` of the line, see :func:`_noted`."""
        self._parsed: dict[str, Any] | None = None

    def _body(self) -> dict[str, Any]:
        parsed = self._parsed
        if parsed is None:
            line = self._source.read(self.offset)
            try:
                obj = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):
                obj = None
            if not isinstance(obj, dict) or obj.get("id") != self._id:
                raise TreeError(f"会话文件 {self._source.name} 在打开后被改写了：第 {self.offset} 字节处"
                                f"不再是条目 {self._id!r}（会话文件只能追加）")
            parsed = {k: v for k, v in obj.items() if k not in ("id", "parentId", "type")}
            self._parsed = parsed
        return parsed

    def get(self, key: str, default: Any = None) -> Any:
        if self._parsed is None:
            at = _NOTED_AT.get(key)
            if at is not None:
                noted = self._noted[at]
                if noted is _MISSING:
                    return default
                if noted is not _PARSE:
                    return noted
        return self._body().get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self._body()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._body())

    def __len__(self) -> int:
        return len(self._body())

    def __repr__(self) -> str:
        return repr(self._body())


class SessionContent(NamedTuple):
    """What :func:`read_entries` found in the bytes of a session file."""

    entries: dict[str, Entry]
    """Every entry kept, by id, in file order (of duplicate ids the first wins)."""
    problems: list[str]
    """A Chinese note per skipped line, ``name:line: ...``; each is a :class:`SessionProblem`
    whose ``kind`` says what happened (see :data:`~liyuan.session.damage.PROBLEM_KINDS`)."""
    torn_tail: bool
    """True when the bytes do not end with a newline: the last write was cut off."""
    session_id: str | None
    """The ``id`` of the ``session`` header (the last one, should there be several)."""
    line_marks: dict[str, list[int]] | None = None
    """When the entries in file order are one branch (the first a root, each other's parent
    the entry before it: a chat never rerolled or rewound, and undamaged), where each custom
    type occurs on it (file-order indices, ascending); ``None`` otherwise. Lets the tree
    index its current branch without walking it again (:class:`~liyuan.session.branch.BranchIndex`)."""
    starts: Sequence[int] = ()
    """Where each kept entry's line starts (its body's ``offset``), in the order of :attr:`entries`."""


def read_entries(raw: bytes, name: str = "") -> SessionContent:
    """Parse a session file's bytes: the one loader, shared by every reader of such files.

    Pure (the caller reads the file). Never fails on content: blank lines are ignored; torn
    or malformed lines (nesting too deep and numbers too long included), lines that are no
    entry (:func:`~liyuan.session.entries.parse_entry`) and duplicate ids are skipped with
    a note; the ``session`` header gives its id, and a version newer than
    :data:`~liyuan.session.entries.SESSION_VERSION` is noted (``newer-version``). When kept
    entries name a parent that was skipped, a :data:`~liyuan.session.entries.DAMAGED_ENTRY_TYPE`
    placeholder takes its place, so the branch stays whole (see :mod:`liyuan.session.damage`).
    An entry without a ``parentId`` key after the first is damage too (a flipped byte in the
    key): relinked from the damaged key, or hung under the entry before it and reported as a
    ``branch-cut``. Bodies read ``raw`` when first used (:class:`LazyBody`).

    Args:
        raw: The whole file.
        name: How the notes name the file (usually its file name).

    Returns:
        The entries, notes, whether the tail is torn, and the header's id.
    """
    return _scan(io.BytesIO(raw), _Source(name, raw=raw), name)


def read_session_file(path: Path) -> SessionContent:
    """:func:`read_entries` of the file at ``path``, read in one streaming pass.

    The file stays open (closed with the last entry that reads it) and bodies read their
    lines from it, so the file's bytes are never all in memory at once.

    Raises:
        OSError: The file cannot be opened or read.
    """
    file = open(path, "rb")  # noqa: SIM115  # kept open for the lazy bodies, closed by _Source
    try:
        return _scan(file, _Source(path.name, file=file), path.name)
    except BaseException:
        file.close()
        raise


_SETTLE_AFTER = 20_000
"""Entries from which a read ends with one full collection. Made with the collector paused,
they all sit in its youngest generation, and were walked three times right after a long open
(to the middle generation, to the oldest, then a full pass: a quarter of a second at 100,000
turns); one collection walks them once and leaves them in the oldest generation."""


@contextmanager
def _no_collection() -> Iterator[bool]:
    """The cyclic collector paused (then restored as it was): a long file makes one object
    per entry and none of them a cycle, yet every few hundred the collector walked them all
    again, a fifth of a 100,000-turn open."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield paused
    finally:
        if paused:
            gc.enable()


def _strict(line: bytes) -> Any:
    """The reference parse of one line (what decides when orjson refuses it)."""
    return json.loads(line.decode("utf-8"))


def _scan(lines: Iterable[bytes], source: _Source, name: str) -> SessionContent:
    with _no_collection() as paused:
        content = _scan_lines(lines, source, name)
        if paused and len(content.entries) >= _SETTLE_AFTER:
            gc.collect()  # before the collector is back on: no other thread's allocation walks them first
    return content


def _scan_lines(lines: Iterable[bytes], source: _Source, name: str) -> SessionContent:
    entries: dict[str, Entry] = {}
    problems: list[str] = []
    session_id: str | None = None
    numbers, starts = array("q"), array("q")
    """File line and first byte of each kept entry, in the order of ``entries``."""
    skipped: list[Skipped] = []
    unlinked: list[tuple[str, int, tuple[str, str | None] | None]] = []
    common: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    """One ``(type, role, customType, mode)`` tuple for all lines that have the same (see :func:`_noted`)."""
    loads, new_tuple = orjson.loads, tuple.__new__  # Entry(...) built in C (see Entry)
    offset = 0
    line = b""
    last_id: str | None = None
    """The id of the entry kept last (``None`` before the first)."""
    add_number, add_start = numbers.append, starts.append
    marks: dict[str, list[int]] | None = {}
    """See :attr:`SessionContent.line_marks`; ``None`` from the first entry off the line."""
    for number, line in enumerate(lines, start=1):
        start = offset
        size = len(line)
        offset += size
        if line.isspace():  # a line is never empty: it holds at least its newline
            continue
        try:
            obj = loads(line)
            if size >= _DEEP and line.count(b"[") + line.count(b"{") >= _DEEP:
                obj = _strict(line)
        except ValueError:
            try:
                obj = _strict(line)
            except (ValueError, RecursionError):  # bad UTF-8 or JSON, a number too long, too deep
                obj = _MISSING
        except RecursionError:
            obj = _MISSING
        if obj is _MISSING:
            if not line.endswith(b"\n"):  # only the last line can lack it
                problems.append(SessionProblem(f"{name}:{number}: 末行不完整（写入中断），已跳过", "torn-tail", number))
            else:
                problems.append(SessionProblem(f"{name}:{number}: 不是合法 JSON，已跳过", "bad-line", number))
            skipped.append(salvage_link(line.rstrip(b"\n"), number))
            continue
        if type(obj) is not dict:
            entry_id = entry_type = None
        else:
            get = obj.get
            entry_type = get("type")
            if entry_type == "session":
                try:  # the reference parse, so a header's numbers read as they always did
                    head = _strict(line)
                except (ValueError, RecursionError):
                    head = obj
                session_id = _header(head, f"{name}:{number}", number, problems) or session_id
                continue
            entry_id = get("id")
        parent = get("parentId", _MISSING) if entry_id is not None else None
        found = parent is not _MISSING
        if not found:
            parent = None
        # Parsed JSON strings are exactly str, so type() is isinstance() here, only faster.
        if (type(entry_id) is not str or not entry_id or type(entry_type) is not str
                or (parent is not None and type(parent) is not str)
                or not (entry_id.isascii() or encodable(entry_id))
                or (parent is not None and not (parent.isascii() or encodable(parent)))):
            note = f"{name}:{number}: 缺少 id/type 或字段类型不对，已跳过"
            problems.append(SessionProblem(note, "not-entry", number))
            skipped.append(salvage_link(line.rstrip(b"\n"), number))
            continue
        if not found:
            unlinked.append((entry_id, number, near_miss_link(obj, "parentId")))
        if entry_id in entries:
            problems.append(SessionProblem(f"{name}:{number}: id {entry_id!r} 重复，已跳过", "duplicate-id", number))
            continue
        if parent is not None:  # one string for an id, however many children name it
            if parent == last_id:
                parent = last_id
            else:
                marks = None
                known = entries.get(parent)
                if known is not None:
                    parent = known.id
        elif last_id is not None or not found:
            marks = None
        key = (entry_type, get("role", _MISSING), get("customType", _MISSING), get("mode", _MISSING))
        try:
            noted = common[key]
        except KeyError:
            noted = common[key] = _noted(key)
        except TypeError:  # a field of a type that cannot be a key (a list ...): answered by parsing
            noted = _noted(key)
        if marks is not None and noted[0] == "custom" and type(noted[2]) is str and noted[2]:
            marks.setdefault(noted[2], []).append(len(entries))
        body = LazyBody(source, start, entry_id, noted)
        entries[entry_id] = new_tuple(Entry, (entry_id, parent, noted[0], body))
        last_id = entry_id
        add_number(number)
        add_start(start)
    if unlinked:
        marks = None
        _relink(entries, dict(zip(entries, numbers, strict=True)), unlinked, name, problems)
    if marks is None and any(e.parent_id is not None and e.parent_id not in entries for e in entries.values()):
        # (On one line every parent is the entry before it, so none is missing.)
        # Only then is there a place to find (with none missing, bridge() finds nothing).
        _place_bridges(entries, dict(zip(entries, numbers, strict=True)), skipped, name, problems)
    return SessionContent(entries, problems, bool(line) and not line.endswith(b"\n"), session_id, marks, starts)



def _noted(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """``(type, role, customType, mode)`` as a lazy body answers them without parsing: a
    string (one copy shared by every line), null, :data:`_MISSING`, else :data:`_PARSE`."""
    return tuple(value if value is _MISSING or value is None or type(value) is str else _PARSE
                 for value in key)


def _header(obj: dict[str, Any], where: str, number: int, problems: list[str]) -> str | None:
    """The header's id (when usable); notes a version this liyuan does not know."""
    version = obj.get("version", SESSION_VERSION)
    if version != SESSION_VERSION:
        problems.append(SessionProblem(
            f"{where}: 会话文件的版本 {version!r} 不是这个 liyuan 认识的版本 {SESSION_VERSION}："
            "只读取能读懂的条目，不会再往里追加", "newer-version", number))
    sid = obj.get("id")
    return sid if isinstance(sid, str) and encodable(sid) else None


def _relink(entries: dict[str, Entry], line_of: dict[str, int],
            unlinked: list[tuple[str, int, tuple[str, str | None] | None]], name: str, problems: list[str]) -> None:
    """Give a parent to every entry whose ``parentId`` key is gone (a flipped byte in the key).

    Every writer puts ``parentId`` on every entry (``null`` for a root), so an entry without
    it is damage, never a new root: read as one, it would cut every earlier entry off the
    branch. A lone key one character off (``parentID``) still holds the link; otherwise the
    entry hangs under the entry before it in the file, reported as a cut. The first entry
    of a file has nothing before it and stays a root.
    """
    order = list(entries)
    position = {entry_id: index for index, entry_id in enumerate(order)}
    for entry_id, number, found in unlinked:
        entry = entries.get(entry_id)
        if entry is None or line_of.get(entry_id) != number:
            continue  # a duplicate id's line, skipped already
        body = dict(entry.body)
        if found is not None:
            key, parent = found
            del body[key]
            problem = SessionProblem(
                f"{name}:{number}: 字段名 parentId 损坏成了 {key!r}，按它的值接在 {parent!r} 之后",
                "link-recovered", number, entry_id)
        else:
            index = position[entry_id]
            if index == 0:
                continue
            parent = order[index - 1]
            problem = SessionProblem(
                f"{name}:{number}: 分支在这里断了：{entry_id!r} 缺少 parentId，已按文件顺序接到 {parent!r} 之后，"
                "前文（包括前情提要）因此保留；如果这里曾经回退或重写过，这个接法可能不对",
                "branch-cut", number, entry_id)
        entries[entry_id] = Entry(entry_id, parent, entry.type, body)
        problems.append(problem)


def _place_bridges(
    entries: dict[str, Entry], line_of: dict[str, int], skipped: list[Skipped], name: str, problems: list[str]
) -> None:
    parents = {entry_id: entry.parent_id for entry_id, entry in entries.items()}
    links = bridge(parents, line_of, skipped)
    if not links:
        return
    # Placeholders go where their line was, so file order (and so the leaf: the last
    # entry) is what it would have been without the damage.
    placed = {link.entry_id: Entry(link.entry_id, link.parent, DAMAGED_ENTRY_TYPE, {"line": link.line})
              for link in links}
    ordered = sorted([*entries.values(), *placed.values()], key=lambda entry: line_of[entry.id])
    entries.clear()
    entries.update((entry.id, entry) for entry in ordered)
    problems.extend(describe(link, name) for link in links)
