"""A lore book (设定集) and its entries, as liyuan stores and activates them.

Invariants:

- A :class:`LoreEntry` is validated on construction: a title, text fields that are text,
  keys without blanks, a logic among :data:`LOGICS`, a scan depth that is ``None`` or
  between 0 and :data:`MAX_SCAN_TURNS`. A key is a regular expression only when written
  ``/pattern/flags`` (:func:`regex_key`, SillyTavern's rule); one that does not compile is
  refused here, so a book that loads never holds one. Every other key is a plain word.
- Fields liyuan does not use are kept in ``extra`` (a card's ``extensions``, its
  decorators, fields of other front ends), never dropped: export gives them back.
- :meth:`LoreEntry.to_dict` writes only what differs from the defaults, so the file a
  person edits stays short; :func:`entry_from_dict` reads it back to an equal entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import regex

from liyuan.errors import LoreError

__all__ = [
    "DEFAULT_RECURSION_STEPS",
    "DEFAULT_SCAN_TURNS",
    "LOGICS",
    "LORE_INDEX_MAX_CHARS",
    "MAX_RECURSION_STEPS",
    "MAX_SCAN_TURNS",
    "Logic",
    "LoreBook",
    "LoreEntry",
    "book_from_dict",
    "compile_key",
    "entry_from_dict",
    "regex_key",
    "slash_key",
    "substitute_macros",
]

DEFAULT_SCAN_TURNS = 6
"""Turns scanned for keys besides the user's new words: the 6 turns every compaction
keeps verbatim (``KEEP_RECENT_TURNS``). The window never depends on where the last
compaction fell (up to 36 turns can be uncovered just before one), and a name the
model still reads word for word keeps its lore in view."""
MAX_SCAN_TURNS = 1000
"""Upper bound of any scan depth (a typo of 10⁹ turns must not scan a whole chat)."""
MAX_RECURSION_STEPS = 10
"""Hard cap on recursion steps, whatever the file says: a chain of 11 entries, each naming
the next, is followed to its end (authors build chains of 7); a hostile book stops here."""
DEFAULT_RECURSION_STEPS = MAX_RECURSION_STEPS
"""Recursion is on unless the book says otherwise, as in a fresh SillyTavern (which recurses
until nothing new is found; here up to the cap)."""
LORE_INDEX_MAX_CHARS = 2000
"""The original's cap on 【设定集索引】 (``LORE_INDEX_MAX_CHARS``)."""

Logic = Literal["and_any", "and_all", "not_any", "not_all"]
"""How secondary keys filter a primary match (SillyTavern's four): with at least one /
all of them present, or with none / not all of them present."""
LOGICS: dict[str, str] = {"and_any": "且含任一", "and_all": "且全含", "not_any": "且都不含", "not_all": "且不全含"}
"""Each logic with its Chinese name (as the activation log shows it)."""


_MACRO = regex.compile(r"\{\{\s*(char|user)\s*\}\}|<(char|bot|user)>", regex.IGNORECASE)


def substitute_macros(text: str, char: str, user: str) -> str:
    """``{{char}}`` / ``<char>`` / ``<bot>`` and ``{{user}}`` / ``<user>`` (any case) replaced by the names.

    The stored book keeps the macros (export gives them back as written); a turn reads the
    book with them replaced (:class:`liyuan.lore.match.LoreIndex`)."""
    def one(match: regex.Match[str]) -> str:
        return user if (match.group(1) or match.group(2)).lower() == "user" else char
    return _MACRO.sub(one, text) if ("{" in text or "<" in text) else text


_SLASH_FORM = regex.compile(r"^/([\s\S]+?)/([gimsuy]*)$")
_UNESCAPED_SLASH = regex.compile(r"(?:^|[^\\])/")
_FLAGS = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL}
"""JavaScript's flags with a meaning for one search; ``g``, ``u`` and ``y`` change nothing here
(the ``regex`` module is Unicode-aware without ``u``; a key is searched once, anywhere)."""


def regex_key(key: str) -> tuple[str, str] | None:
    """``(pattern, flags)`` when ``key`` is written ``/pattern/flags``, else ``None`` (a plain word).

    The rule is SillyTavern's: the whole key between two slashes, flags among ``gimsuy``,
    no unescaped ``/`` inside the pattern.
    """
    found = _SLASH_FORM.match(key)
    if found is None or _UNESCAPED_SLASH.search(found.group(1)):
        return None
    return found.group(1), found.group(2)


def slash_key(pattern: str, case_sensitive: bool) -> str:
    """A raw pattern written as a ``/…/flags`` key (``i`` unless case-sensitive)."""
    return "/" + regex.sub(r"(?<!\\)/", r"\\/", pattern) + "/" + ("" if case_sensitive else "i")


def compile_key(key: str) -> regex.Pattern[str] | None:
    """The compiled regex of a ``/pattern/flags`` key; ``None`` for a plain key.

    Without ``i`` the regex is case-sensitive, whatever the entry's ``case_sensitive`` says
    (as in SillyTavern: the flags decide).

    Raises:
        LoreError: The key is written as a regex but does not compile.
    """
    parsed = regex_key(key)
    if parsed is None:
        return None
    pattern, flags = parsed
    options = 0
    for flag in flags:
        options |= _FLAGS.get(flag, 0)
    try:
        return regex.compile(pattern, options)
    except (regex.error, ValueError, OverflowError) as exc:
        raise LoreError(f"正则关键词写错了：{_shown(key)}（{exc}）") from None
    except RecursionError:  # nested hundreds deep: the compiler recurses once per level
        raise LoreError(f"正则关键词嵌套太深，编译不了：{_shown(key)}") from None


def _shown(pattern: str) -> str:
    """A key as an error message shows it: at most 60 characters of it."""
    return repr(pattern) if len(pattern) <= 60 else f"{pattern[:60]!r}…（共 {len(pattern)} 字）"


@dataclass(frozen=True)
class LoreEntry:
    """One entry of a lore book."""

    title: str
    """Shown in 【设定集索引】 and as the entry's heading in 【相关设定】."""
    content: str = ""
    """The full text 【相关设定】 carries when the entry is activated (an empty one adds nothing)."""
    keys: tuple[str, ...] = ()
    """Primary keys: any one of them in the scanned text activates the entry."""
    secondary_keys: tuple[str, ...] = ()
    """Filter keys, combined by ``logic``; none: no filter."""
    logic: Logic = "and_any"
    constant: bool = False
    """Always active (still subject to ``enabled`` and the budget)."""
    enabled: bool = True
    order: int = 100
    """Higher first, among entries of equal priority (SillyTavern's ``order``, a card's
    ``insertion_order``): under a tight budget the lowest order is cut first."""
    priority: int = 0
    """Higher first, before ``order`` (SPEC_V3 ``priority``); the budget cuts from the end."""
    case_sensitive: bool = False
    whole_word: bool = True
    """A one-word key whose end is a Latin letter or digit must not touch another one there
    ("Ann" is not found in "Anna"); CJK keys and keys of several words match as substrings."""
    scan_turns: int | None = None
    """This entry's scan depth in turns (``None``: the book's); 0 scans the new words only."""
    recursive: bool = True
    """May be activated by the content of other activated entries (when the book recurses)."""
    prevent_recursion: bool = False
    """Its own content never activates other entries."""
    sources: tuple[str, ...] = ()
    """Chats this entry was learnt from (proposed from the handbook); empty for authored lore."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Fields liyuan does not use, kept for export."""

    def __post_init__(self) -> None:
        if not isinstance(self.title, str) or not self.title.strip():
            raise LoreError("设定条目缺少标题（title）")
        where = f"设定「{self.title}」"
        if not isinstance(self.content, str):
            raise LoreError(f"{where} 的 content 应为文本")
        for name in ("keys", "secondary_keys", "sources"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(isinstance(k, str) and k.strip() for k in value):
                raise LoreError(f"{where} 的 {name} 应为非空文本的列表")
        if self.logic not in LOGICS:
            raise LoreError(f"{where} 的 logic 只能是 {'、'.join(LOGICS)}，实际是 {self.logic!r}")
        for name in ("constant", "enabled", "case_sensitive", "whole_word", "recursive",
                     "prevent_recursion"):
            if not isinstance(getattr(self, name), bool):
                raise LoreError(f"{where} 的 {name} 应为 true 或 false")
        for name in ("order", "priority"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise LoreError(f"{where} 的 {name} 应为整数")
        if self.scan_turns is not None and (not isinstance(self.scan_turns, int) or isinstance(self.scan_turns, bool)
                                            or not 0 <= self.scan_turns <= MAX_SCAN_TURNS):
            raise LoreError(f"{where} 的 scan_turns 应为 0 到 {MAX_SCAN_TURNS} 的整数")
        if not isinstance(self.extra, Mapping):
            raise LoreError(f"{where} 的 extra 应为映射")
        for key in (*self.keys, *self.secondary_keys):
            try:
                compile_key(key)
            except LoreError as exc:
                raise LoreError(f"{where}：{exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """The entry as the lore file stores it: only fields that differ from the defaults."""
        data: dict[str, Any] = {"title": self.title}
        for f in fields(self):
            if f.name in ("title", "extra"):
                continue
            value = getattr(self, f.name)
            if value != f.default:
                data[f.name] = list(value) if isinstance(value, tuple) else value
        if self.extra:
            data["extra"] = dict(self.extra)
        return data


_ENTRY_FIELDS = {f.name for f in fields(LoreEntry)}


def _text_list(value: Any, where: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise LoreError(f"{where} 的 {name} 应为文本列表")
    out = []
    for item in value:
        if not isinstance(item, str | int | float) or isinstance(item, bool):
            raise LoreError(f"{where} 的 {name} 应为文本列表，其中有 {item!r}")
        if str(item).strip():
            out.append(str(item).strip())
    return tuple(out)


def entry_from_dict(data: Any, where: str = "设定条目") -> LoreEntry:
    """Read one entry as :meth:`LoreEntry.to_dict` writes it (a hand edit included).

    Raises:
        LoreError: Not a mapping, an unknown field, or a field of the wrong kind.
    """
    if not isinstance(data, Mapping):
        raise LoreError(f"{where} 应为映射（title、keys、content ……）")
    unknown = sorted(str(k) for k in data if k not in _ENTRY_FIELDS and k != "regex")
    if unknown:
        raise LoreError(f"{where} 有不认识的字段：{'、'.join(unknown)}（不用的字段请放进 extra）")
    title = data.get("title")
    values: dict[str, Any] = {k: v for k, v in data.items() if k not in ("keys", "secondary_keys", "sources", "regex")}
    values["title"] = str(title).strip() if isinstance(title, str | int | float) and not isinstance(title, bool) \
        else title
    shown = f"{where}「{values['title']}」" if isinstance(values["title"], str) else where
    for name in ("keys", "secondary_keys", "sources"):
        values[name] = _text_list(data.get(name), shown, name)
    if data.get("regex") is True:  # an older file: every key of the entry was a raw pattern
        sensitive = data.get("case_sensitive") is True
        for name in ("keys", "secondary_keys"):
            values[name] = tuple(k if regex_key(k) else slash_key(k, sensitive) for k in values[name])
    elif data.get("regex") not in (None, False):
        raise LoreError(f"{shown} 的 regex 应为 true 或 false")
    if values.get("content") is None:
        values["content"] = ""
    values.setdefault("extra", {})
    if values["extra"] is None:
        values["extra"] = {}
    try:
        return LoreEntry(**values)
    except LoreError as exc:
        raise LoreError(f"{where}：{exc}") from None


@dataclass(frozen=True)
class LoreBook:
    """A card's lore book: its entries and how they are scanned."""

    entries: tuple[LoreEntry, ...] = ()
    name: str = ""
    description: str = ""
    """For the person editing the book; never sent to the model."""
    scan_turns: int = DEFAULT_SCAN_TURNS
    """Default scan depth in turns (an entry's ``scan_turns`` overrides it)."""
    recursion_steps: int = DEFAULT_RECURSION_STEPS
    """How many times activated content may activate further entries (0: never; capped at 10)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Book-level fields liyuan does not use (``extensions``, ``token_budget`` ...), kept."""

    def __post_init__(self) -> None:
        if not isinstance(self.entries, tuple) or not all(isinstance(e, LoreEntry) for e in self.entries):
            raise LoreError("设定集的 entries 应为设定条目的列表")
        if not isinstance(self.scan_turns, int) or isinstance(self.scan_turns, bool) \
                or not 0 <= self.scan_turns <= MAX_SCAN_TURNS:
            raise LoreError(f"设定集的 scan_turns 应为 0 到 {MAX_SCAN_TURNS} 的整数")
        if not isinstance(self.recursion_steps, int) or isinstance(self.recursion_steps, bool) \
                or not 0 <= self.recursion_steps <= MAX_RECURSION_STEPS:
            raise LoreError(f"设定集的 recursion_steps 应为 0 到 {MAX_RECURSION_STEPS} 的整数")
        if not isinstance(self.name, str) or not isinstance(self.description, str):
            raise LoreError("设定集的 name 和 description 应为文本")

    def to_dict(self) -> dict[str, Any]:
        """The book as the lore file stores it."""
        data: dict[str, Any] = {}
        if self.name:
            data["name"] = self.name
        if self.description:
            data["description"] = self.description
        data["scan_turns"] = self.scan_turns
        data["recursion_steps"] = self.recursion_steps
        if self.extra:
            data["extra"] = dict(self.extra)
        data["entries"] = [entry.to_dict() for entry in self.entries]
        return data


def book_from_dict(data: Any, where: str = "设定集") -> LoreBook:
    """Read a book as :meth:`LoreBook.to_dict` writes it.

    Raises:
        LoreError: The data does not have that shape; the message names the entry.
    """
    if data is None:
        return LoreBook()
    if not isinstance(data, Mapping):
        raise LoreError(f"{where} 应为映射（name、scan_turns、entries ……）")
    unknown = sorted(str(k) for k in data if k not in ("name", "description", "scan_turns", "recursion_steps",
                                                       "extra", "entries"))
    if unknown:
        raise LoreError(f"{where} 有不认识的字段：{'、'.join(unknown)}")
    raw_entries = data.get("entries") or []
    if not isinstance(raw_entries, Sequence) or isinstance(raw_entries, str):
        raise LoreError(f"{where} 的 entries 应为列表")
    entries = tuple(entry_from_dict(item, f"{where} 第 {i} 条") for i, item in enumerate(raw_entries, start=1))
    return LoreBook(entries=entries, name=str(data.get("name") or ""), description=str(data.get("description") or ""),
                    scan_turns=data.get("scan_turns", DEFAULT_SCAN_TURNS),
                    recursion_steps=data.get("recursion_steps", DEFAULT_RECURSION_STEPS),
                    extra=data.get("extra") or {})
