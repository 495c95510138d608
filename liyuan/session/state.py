"""The ledger (账本): world state kept beside the story, and its text forms.

The ledger is written by the app's scribe after each turn as an ``rp-state`` custom entry
on the session tree; updating it is out of scope here (the harness scripts it). This
module reads the latest snapshot on a branch and renders it:

- :func:`format_state`: the 【世界状态】 text, also given to the summariser and the
  recap writer as 【工具账本快照】. An empty ledger renders as ``（尚无记录）``.
- :func:`format_roster`: the 【登场名录】 index, capped so it cannot grow without bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from liyuan.session.branch import BranchView
from liyuan.session.entries import Entry

__all__ = [
    "EMPTY_STATE_TEXT",
    "STATE_ENTRY_TYPE",
    "Character",
    "Ledger",
    "format_roster",
    "format_state",
    "latest_state_entry",
    "state_from_branch",
]

STATE_ENTRY_TYPE = "rp-state"
EMPTY_STATE_TEXT = "（尚无记录）"
ROSTER_MAX_CHARACTERS = 100
ROSTER_MAX_ITEMS = 100
ROSTER_MAX_EVENTS = 60
ROSTER_BLURB_CHARS = 30


@dataclass(frozen=True, slots=True)
class Character:
    """One character as the ledger tracks them."""

    name: str
    affinity: int | None = None
    """好感, toward the user's character."""
    status: str = ""
    note: str = ""
    blurb: str = ""
    """One-line description for the roster."""


@dataclass(frozen=True, slots=True)
class Ledger:
    """World state at one point of the story."""

    time: str = ""
    location: str = ""
    characters: tuple[Character, ...] = ()
    items: tuple[str, ...] = ()
    flags: Mapping[str, str] = field(default_factory=dict)
    threads: tuple[str, ...] = ()
    """Open plot threads (剧情线)."""
    events: tuple[str, ...] = ()
    """Notable past events, listed in the roster."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ledger:
        """Read a ledger from its JSON form; unknown or ill-typed fields are ignored."""

        def text(value: Any) -> str:
            return value if isinstance(value, str) else ""

        def texts(value: Any) -> tuple[str, ...]:
            if not isinstance(value, list):
                return ()
            return tuple(v for v in value if isinstance(v, str) and v.strip())

        characters = []
        for raw in data.get("characters") or []:
            if not isinstance(raw, Mapping) or not text(raw.get("name")):
                continue
            affinity = raw.get("affinity")
            characters.append(
                Character(
                    name=text(raw.get("name")),
                    affinity=affinity if isinstance(affinity, int) else None,
                    status=text(raw.get("status")),
                    note=text(raw.get("note")),
                    blurb=text(raw.get("blurb")),
                )
            )
        flags_raw = data.get("flags")
        flags = (
            {str(k): str(v) for k, v in flags_raw.items()} if isinstance(flags_raw, Mapping) else {}
        )
        return cls(
            time=text(data.get("time")),
            location=text(data.get("location")),
            characters=tuple(characters),
            items=texts(data.get("items")),
            flags=flags,
            threads=texts(data.get("threads")),
            events=texts(data.get("events")),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form, the inverse of :meth:`from_dict`."""
        return {
            "time": self.time,
            "location": self.location,
            "characters": [
                {k: v for k, v in (("name", c.name), ("affinity", c.affinity), ("status", c.status),
                                   ("note", c.note), ("blurb", c.blurb)) if v not in ("", None)}
                for c in self.characters
            ],
            "items": list(self.items),
            "flags": dict(self.flags),
            "threads": list(self.threads),
            "events": list(self.events),
        }

    def is_empty(self) -> bool:
        """True when nothing has been recorded."""
        return not (self.time or self.location or self.characters or self.items
                    or self.flags or self.threads)


def format_state(ledger: Ledger | None) -> str:
    """The ledger as lines of ``标签：值``; ``（尚无记录）`` when empty."""
    if ledger is None or ledger.is_empty():
        return EMPTY_STATE_TEXT
    lines: list[str] = []
    if ledger.time:
        lines.append(f"时间：{ledger.time}")
    if ledger.location:
        lines.append(f"地点：{ledger.location}")
    for c in ledger.characters:
        parts = []
        if c.affinity is not None:
            parts.append(f"好感 {c.affinity}")
        if c.status:
            parts.append(f"状态：{c.status}")
        if c.note:
            parts.append(f"备注：{c.note}")
        lines.append(f"{c.name}：{'；'.join(parts)}" if parts else c.name)
    if ledger.items:
        lines.append(f"物品：{'、'.join(ledger.items)}")
    for key, value in ledger.flags.items():
        lines.append(f"{key}：{value}")
    if ledger.threads:
        lines.append("剧情线：" + " ".join(f"「{t}」" for t in ledger.threads))
    return "\n".join(lines)


def format_roster(ledger: Ledger | None) -> str:
    """The 【登场名录】 index: characters with a short blurb, items, events; capped."""
    if ledger is None:
        return ""
    lines: list[str] = []
    people = ledger.characters[:ROSTER_MAX_CHARACTERS]
    if people:
        shown = []
        for c in people:
            blurb = c.blurb[:ROSTER_BLURB_CHARS]
            shown.append(f"{c.name}（{blurb}）" if blurb else c.name)
        lines.append("人物：" + "、".join(shown))
    if ledger.items:
        lines.append("物品：" + "、".join(ledger.items[:ROSTER_MAX_ITEMS]))
    if ledger.events:
        lines.append("事件：" + "；".join(ledger.events[:ROSTER_MAX_EVENTS]))
    return "\n".join(lines)


def state_from_branch(branch: Sequence[Entry]) -> Ledger | None:
    """The latest ``rp-state`` snapshot on the branch, or ``None`` (see :func:`latest_state_entry`)."""
    latest = latest_state_entry(branch)
    return Ledger.from_dict(latest.data) if latest is not None else None


def latest_state_entry(branch: Sequence[Entry]) -> Entry | None:
    """The latest ``rp-state`` entry on the branch, or ``None``.

    On the tree's current branch (a :class:`~liyuan.session.branch.BranchView`) this is a
    look-up in the branch's index, whatever the branch's length; on a list, a scan back.
    """
    found: Entry | None
    if isinstance(branch, BranchView):
        found = branch.latest_custom(STATE_ENTRY_TYPE)
    else:
        found = next((e for e in reversed(branch) if e.type == "custom" and e.custom_type == STATE_ENTRY_TYPE), None)
    return found
