"""Damaged session lines: what a skipped line still tells, and how its branch is kept whole.

A session file is append-only and never rewritten, so a damaged line (a flipped byte, a
torn write glued to the next line, a hostile line) stays forever. Skipping it is not
enough: every later entry names its parent by id, and the entry that named the skipped
one would start a new root, detaching everything before it (the active summary with it).

:func:`salvage_link` reads the ``id`` and ``parentId`` a skipped line still holds (the
writer puts them first, so they usually survive damage further along the line).
:func:`bridge` then decides, for every id that kept entries name as parent but that no
kept entry has:

- ``link-recovered``: exactly one skipped line names that id and its parent: the link is
  certain. A placeholder takes the lost entry's place (its content is gone).
- ``branch-cut``: the evidence is not unambiguous (the id or the parent is unreadable,
  or several lines claim it). The placeholder is attached to the nearest earlier entry in
  file order, which is where an append-only writer attaches unless the user rewound, so
  the summary and the story before it stay on the branch; the guess is reported loudly
  (a problem of this kind, :meth:`~liyuan.session.tree.SessionTree.branch_breaks`).

An entry that is kept but has lost its ``parentId`` key (a flipped byte inside the key
leaves valid JSON) is damage too, never a new root: :func:`near_miss_link` reads the link
from the damaged key (``link-recovered``), else the entry hangs under the entry before it
in the file (``branch-cut``), see :func:`liyuan.session.loader.read_entries`.

Pure functions on plain data; :func:`liyuan.session.loader.read_entries` uses them.
"""

from __future__ import annotations

import bisect
import heapq
import json
import re
from dataclasses import dataclass

__all__ = [
    "PROBLEM_KINDS",
    "Bridge",
    "SessionProblem",
    "Skipped",
    "bridge",
    "describe",
    "encodable",
    "near_miss_link",
    "salvage_link",
]

PROBLEM_KINDS = (
    "bad-line",
    "torn-tail",
    "not-entry",
    "duplicate-id",
    "link-recovered",
    "branch-cut",
    "newer-version",
    "missing-lines",
)
"""Every kind of :class:`SessionProblem`:

- ``bad-line``: not valid UTF-8 or JSON (or nested too deep, or a number too long); skipped.
- ``torn-tail``: the last line is incomplete (a write cut off); skipped.
- ``not-entry``: valid JSON but not an entry (no id or type, wrong field types, an id
  that cannot be written back as UTF-8); skipped.
- ``duplicate-id``: an id seen before; skipped (the first wins).
- ``link-recovered``: a skipped line's place on the branch was recovered with certainty.
- ``branch-cut``: a skipped or missing line's place was guessed from file order.
- ``newer-version``: the header names a version this liyuan does not know: read what
  can be read, never append.
- ``missing-lines``: a store that numbers its lines (PostgreSQL) lacks some of them (a
  row deleted by hand); the rest is read as it stands.
"""


class SessionProblem(str):
    """A Chinese note about one line (``name:line: ...``) that also says what kind it is.

    A ``str``, so existing callers that show or compare notes keep working.
    """

    kind: str
    """One of :data:`PROBLEM_KINDS`."""
    line: int
    """1-based line number in the file (0 when not about one line)."""
    entry_id: str | None
    """For ``link-recovered`` and ``branch-cut``: the id whose place was recovered or guessed."""

    def __new__(cls, text: str, kind: str, line: int = 0, entry_id: str | None = None) -> SessionProblem:
        problem = super().__new__(cls, text)
        problem.kind = kind
        problem.line = line
        problem.entry_id = entry_id
        return problem


_UNKNOWN = object()
_STRING = r'"((?:[^"\\]|\\.)*)"'
_ID_RE = re.compile(r'"id"\s*:\s*' + _STRING)
_PARENT_RE = re.compile(r'"parentId"\s*:\s*(?:null|' + _STRING + ")")


def encodable(text: str) -> bool:
    """True when ``text`` can be written as UTF-8 (no lone surrogate such as ``\\ud800``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_string(body: str) -> str | None:
    try:
        value = json.loads(f'"{body}"')
    except ValueError:
        return None
    return value if isinstance(value, str) and value and encodable(value) else None


def near_miss_link(obj: dict[str, object], key: str) -> tuple[str, str | None] | None:
    """``(damaged key, value)`` when exactly one key of ``obj`` is ``key`` with one character changed.

    The value must be a usable id (a non-empty string that can be written as UTF-8) or
    ``null``; anything else, or several such keys, gives ``None``.
    """
    found: list[tuple[str, str | None]] = []
    for name, value in obj.items():
        if len(name) != len(key) or name == key or sum(a != b for a, b in zip(name, key, strict=True)) != 1:
            continue
        if value is None or (isinstance(value, str) and value and encodable(value)):
            found.append((name, value))
    return found[0] if len(found) == 1 else None


@dataclass
class Skipped:
    """What a skipped line still tells about its place in the tree."""

    line: int
    entry_id: str | None
    """The id the line names, or ``None`` when unreadable."""
    parent: str | object | None
    """The parent it names (``None`` for a root), or :data:`_UNKNOWN` when unreadable."""
    used: bool = False

    @property
    def parent_known(self) -> bool:
        """True when the line's ``parentId`` could be read (a root's ``null`` included)."""
        return self.parent is not _UNKNOWN


def salvage_link(line: bytes, number: int) -> Skipped:
    """The first ``"id"`` and ``"parentId"`` a damaged line still holds, read by pattern."""
    text = line.decode("utf-8", errors="replace")
    id_match = _ID_RE.search(text)
    parent_match = _PARENT_RE.search(text)
    entry_id = _json_string(id_match.group(1)) if id_match else None
    parent: str | object | None = _UNKNOWN
    if parent_match is not None:
        parent = None if parent_match.group(1) is None else _json_string(parent_match.group(1)) or _UNKNOWN
    return Skipped(number, entry_id, parent)


@dataclass(frozen=True)
class Bridge:
    """A placeholder to insert: ``entry_id`` hangs under ``parent``, decided as ``kind``."""

    entry_id: str
    parent: str | None
    line: int
    kind: str


def bridge(parents: dict[str, str | None], line_of: dict[str, int], skipped: list[Skipped]) -> list[Bridge]:
    """Placeholders that give every missing parent a place (see the module docstring).

    Runs in O((n + k) log n) for n entries and k missing parents.

    Args:
        parents: ``id -> parentId`` of every kept entry, in file order.
        line_of: ``id -> line number`` of every kept entry.
        skipped: What each skipped line still tells, in file order.

    Returns:
        The placeholders in the order decided; ``parents`` and ``line_of`` are extended.
    """
    queue: list[tuple[int, str]] = []
    first_child: dict[str, int] = {}
    for entry_id, parent in parents.items():
        if parent is not None and parent not in parents:
            first_child[parent] = min(first_child.get(parent, line_of[entry_id]), line_of[entry_id])
    queue = [(line, target) for target, line in first_child.items()]
    heapq.heapify(queue)
    by_id: dict[str, list[Skipped]] = {}
    for item in skipped:
        if item.entry_id is not None:
            by_id.setdefault(item.entry_id, []).append(item)
    lines = sorted((line, entry_id) for entry_id, line in line_of.items())
    made: list[Bridge] = []
    while queue:
        child_line, target = heapq.heappop(queue)
        if target in parents:
            continue
        named = [s for s in by_id.get(target, ()) if not s.used]
        if len(named) == 1 and named[0].parent_known:
            found = named[0]
            found.used = True
            parent = found.parent if isinstance(found.parent, str) else None
            link = Bridge(target, parent, found.line, "link-recovered")
        else:
            link = _guess(parents, lines, skipped, target, child_line)
        parents[target] = link.parent
        line_of[target] = link.line
        bisect.insort(lines, (link.line, target))
        made.append(link)
        if link.parent is not None and link.parent not in parents:
            heapq.heappush(queue, (link.line, link.parent))
    return made


def _guess(parents: dict[str, str | None], lines: list[tuple[int, str]], skipped: list[Skipped],
           target: str, child_line: int) -> Bridge:
    # The nearest unused skipped line before the child is the likeliest place of the lost
    # entry; its parent is taken from it when readable and present, else from file order.
    index = bisect.bisect_left([s.line for s in skipped], child_line)
    at = next((s for s in reversed(skipped[:index]) if not s.used and s.entry_id in (None, target)), None)
    if at is not None:
        at.used = True
    line = at.line if at is not None else child_line
    if at is not None and isinstance(at.parent, str) and at.parent in parents:
        return Bridge(target, at.parent, line, "branch-cut")
    position = bisect.bisect_left(lines, (line, ""))
    parent = lines[position - 1][1] if position > 0 else None
    return Bridge(target, parent, line, "branch-cut")


def describe(link: Bridge, name: str) -> SessionProblem:
    """The Chinese note of one placeholder, as a :class:`SessionProblem` of its kind."""
    where = f"{name}:{link.line}"
    if link.kind == "link-recovered":
        text = (f"{where}: 这一行损坏，但还认得出它的 id {link.entry_id!r} 和它接在 {link.parent!r} 之后："
                "分支已接上，这一条的内容丢失")
    else:
        text = (f"{where}: 分支在这里断了：读不出 {link.entry_id!r} 接在哪一条后面，已按文件顺序接到 "
                f"{link.parent!r} 之后，前文（包括前情提要）因此保留；如果这里曾经回退或重写过，这个接法可能不对")
    return SessionProblem(text, link.kind, link.line, link.entry_id)
