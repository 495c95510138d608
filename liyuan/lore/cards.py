"""Reading the cards and lore books people already have into a :class:`ImportedCard`.

Accepted (detected from the content, not the file name): Character Card V3
(``chara_card_v3``) and V2 (``chara_card_v2``), V1 (the flat card), each as JSON, PNG or
CHARX (:mod:`liyuan.lore.containers`); a standalone ``lorebook_v3`` export; a
SillyTavern World Info file (``{"entries": {...}}``).

Mapping, from the specifications:

- Greetings: ``first_mes``, then ``alternate_greetings``, in order.
- ``{{char}}`` (the ``nickname`` if the card has one, else the ``name``), ``{{user}}``,
  and ``<char>`` / ``<bot>`` / ``<user>`` are substituted, case-insensitively, in the
  greetings; the lore book keeps them as written (a turn substitutes them,
  :class:`~liyuan.lore.match.LoreIndex`), so an export gives them back.
- Every entry field the import reads is taken out of the entry's ``extra`` (export writes
  it back from the entry, :mod:`liyuan.lore.export`); what is left is kept as it came.
- Keys, on every path, by SillyTavern's rule: a key written ``/pattern/flags`` is a regex
  (its flags honoured), every other key a plain word; ``use_regex`` changes nothing (kept).
  A ``/…/`` key that does not compile is left out of the entry, kept in its ``extra``
  (``unusable_keys``) and named in the import report; the import goes on.
- Lore entry: ``keys``, ``content``, ``enabled``, ``constant``, ``case_sensitive``,
  ``priority``, ``insertion_order`` (our ``order``); ``secondary_keys`` only when
  ``selective``. The title is ``name``, else ``comment``, else the first key.
  Decorators (``@@...`` lines at the top of the content) are taken off the content and
  kept; ``@@activate``, ``@@dont_activate``, ``@@scan_depth``, ``@@additional_keys`` and
  ``@@exclude_keys`` are honoured. Every other field is kept in ``extra``.
- Scan depths count messages in the specs and turns here: ``ceil(messages / 2)``.
  Recursion is on (:data:`RECURSION_ON_IMPORT` steps) unless the book says
  ``recursive_scanning: false``: a fresh SillyTavern recurses, and its exporter never
  writes the field.
- SillyTavern World Info: ``key``, ``keysecondary`` with ``selectiveLogic`` (0 AND ANY,
  1 NOT ALL, 2 NOT ANY, 3 AND ALL), ``comment`` as the title, ``order`` (higher first,
  as a card's ``insertion_order``), ``disable``, ``excludeRecursion``, ``preventRecursion``,
  ``scanDepth``, ``caseSensitive``, ``matchWholeWords``.

A regex key that does not compile, or that runs out of time on the probe texts
(:func:`probe_regex`), is refused with the entry named: such a key would run for seconds.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import regex

from liyuan.errors import CardImportError, LoreError
from liyuan.lore.compat import ImportNote, field_notes, summary_lines
from liyuan.lore.containers import Container, read_container
from liyuan.lore.model import (
    DEFAULT_SCAN_TURNS,
    MAX_RECURSION_STEPS,
    MAX_SCAN_TURNS,
    Logic,
    LoreBook,
    LoreEntry,
    compile_key,
    substitute_macros,
)

__all__ = ["MAX_ENTRIES", "RECURSION_ON_IMPORT", "ImportedCard", "card_from_json", "card_greetings",
           "char_of", "probe_regex", "read_card"]

MAX_ENTRIES = 200_000
"""A lore book with more entries than this is refused."""
RECURSION_ON_IMPORT = MAX_RECURSION_STEPS
"""Recursion steps an imported book gets unless it says ``recursive_scanning: false``."""
PROBE_TIMEOUT_S = 0.02
_PROBE_LENGTH = 3000

_ST_LOGIC: dict[int, Logic] = {0: "and_any", 1: "not_all", 2: "not_any", 3: "and_all"}


@dataclass(frozen=True)
class ImportedCard:
    """What a card or lore book file holds, in liyuan's terms."""

    kind: str
    """``chara_card_v3``, ``chara_card_v2``, ``chara_card_v1``, ``lorebook_v3`` or ``sillytavern_world_info``."""
    container: Container
    name: str
    """The character's name (empty for a lore book alone)."""
    greetings: tuple[str, ...]
    book: LoreBook | None
    data: dict[str, Any]
    """The file's JSON as read, every field kept (stored as ``角色卡.json`` for cards)."""
    notes: tuple[ImportNote, ...] = ()
    """The import report: what was done with each entry's fields."""

    def report_lines(self) -> list[str]:
        """The import report, one Chinese line per note."""
        return [note.line() for note in self.notes]

    def report_summary(self) -> list[str]:
        """The import report by field: one line each, with how many entries and the first few titles."""
        return summary_lines(self.notes)

    @property
    def is_card(self) -> bool:
        """A character card (not a lore book alone)."""
        return self.kind.startswith("chara_card")


def probe_regex(pattern: regex.Pattern[str]) -> bool:
    """True when the pattern stays fast on texts built to make backtracking explode."""
    letters = {ch for ch in pattern.pattern if ch.isalnum()} | {"a", "0", " ", "中", "x"}
    for ch in sorted(letters)[:12]:
        for tail in ("!", "\n", "\u3002"):
            try:
                pattern.search(ch * _PROBE_LENGTH + tail, timeout=PROBE_TIMEOUT_S)
            except TimeoutError:
                return False
    return True


def _turns(messages: Any) -> int | None:
    if isinstance(messages, bool) or not isinstance(messages, int | float) or messages < 0:
        return None
    return min(MAX_SCAN_TURNS, math.ceil(messages / 2))


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [part for part in value.split(",")]
    if not isinstance(value, list):
        return []
    return [str(v).strip() for v in value if isinstance(v, str | int | float) and str(v).strip()]


def _split_decorators(content: str) -> tuple[str, list[str]]:
    lines = content.split("\n")
    decorators: list[str] = []
    while lines and lines[0].startswith("@@"):
        decorators.append(lines.pop(0).strip())
    return "\n".join(lines).strip("\n"), decorators


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return default
    return int(value)


def _bool(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


def _checked(fields: dict[str, Any], where: str) -> LoreEntry:
    try:
        entry = LoreEntry(**fields)
    except LoreError as exc:
        raise CardImportError(f"{where}：{exc}") from None
    for key in (*entry.keys, *entry.secondary_keys):
        pattern = compile_key(key)
        if pattern is not None and not probe_regex(pattern):
            limit = f"{_PROBE_LENGTH} 字跑不完 {PROBE_TIMEOUT_S * 1000:.0f} 毫秒"
            raise CardImportError(f"{where}「{entry.title}」的正则关键词 {key!r} 在测试文本上超时（{limit}，"
                                  "会回溯几秒），没有导入")
    return entry


def _usable(keys: list[str], title: str, field: str, notes: list[ImportNote], extra: dict[str, Any]) -> list[str]:
    """The keys that can be matched; a ``/…/`` key that does not compile is kept aside and noted."""
    usable, unusable = [], []
    for key in keys:
        try:
            compile_key(key)
            usable.append(key)
        except LoreError as exc:
            unusable.append(key)
            notes.append(ImportNote(title, field, "skipped", f"{exc}，这个关键词不用，条目的其余关键词照常"))
    if unusable:
        extra[f"unusable_{field}"] = unusable
    return usable


def _title(rest: dict[str, Any], keys: list[str], number: int) -> str:
    """``name``, else ``comment``, else the first key; the field it came from is taken out of ``rest``."""
    for name in ("name", "comment"):
        value = rest.get(name)
        if isinstance(value, str) and value.strip():
            del rest[name]
            return value.strip()
    rest.pop("comment", None)
    return keys[0] if keys else f"条目 {number}"


def _apply_decorators(fields: dict[str, Any], decorators: list[str]) -> None:
    """What the decorators at the top of the content ask, on top of the entry's fields."""
    for line in decorators:
        name, _, value = line[2:].partition(" ")
        if name == "activate":
            fields["constant"] = True
        elif name == "dont_activate" and "@@activate" not in decorators:
            fields["enabled"] = False
        elif name == "scan_depth" and value.strip().isdigit():
            fields["scan_turns"] = _turns(int(value))
        elif name in ("additional_keys", "exclude_keys") and not fields["secondary_keys"]:
            fields["secondary_keys"] = tuple(_texts(value))
            fields["logic"] = "and_any" if name == "additional_keys" else "not_any"


def _card_entry(raw: Any, number: int, notes: list[ImportNote]) -> LoreEntry:
    """One ``character_book`` entry. Every field read is taken out of ``extra`` (export writes it
    back from the entry), so a hand edit is never contradicted by a stale copy."""
    where = f"设定集第 {number} 条"
    if not isinstance(raw, Mapping):
        raise CardImportError(f"{where} 不是对象")
    rest = dict(raw)
    found = rest.pop("extensions", None)
    ext: dict[str, Any] = dict(found) if isinstance(found, Mapping) else {}
    content, decorators = _split_decorators(str(rest.pop("content", None) or ""))
    keys = _texts(rest.pop("keys", None))
    selective, raw_secondary = rest.pop("selective", None), rest.pop("secondary_keys", None)
    secondary = _texts(raw_secondary) if selective else []
    if raw_secondary and not selective:
        rest["secondary_keys"] = raw_secondary  # kept, unused (selective is off)
    title = _title(rest, keys, number)
    kept: dict[str, Any] = {}
    keys = _usable(keys, title, "keys", notes, kept)
    secondary = _usable(secondary, title, "secondary_keys", notes, kept)
    sensitive = rest.pop("case_sensitive", None)
    rest.pop("use_regex", None)  # read, and replaced by the key's own form (SillyTavern's rule)
    fields: dict[str, Any] = {
        "title": title, "content": content, "keys": tuple(keys), "secondary_keys": tuple(secondary),
        "constant": _bool(rest.pop("constant", None), False), "enabled": _bool(rest.pop("enabled", None), True),
        "order": _int(rest.pop("insertion_order", None), 100), "priority": _int(rest.pop("priority", None), 0),
        "case_sensitive": _bool(sensitive, _bool(ext.get("case_sensitive"), False)),
    }
    if isinstance(logic := ext.pop("selectiveLogic", None), int) and not isinstance(logic, bool) \
            and logic in _ST_LOGIC:
        fields["logic"] = _ST_LOGIC[logic]
    if isinstance(whole := ext.pop("match_whole_words", None), bool):
        fields["whole_word"] = whole
    if (turns := _turns(ext.pop("scan_depth", None))) is not None:
        fields["scan_turns"] = turns
    if isinstance(exclude := ext.pop("exclude_recursion", None), bool):
        fields["recursive"] = not exclude
    if isinstance(prevent := ext.pop("prevent_recursion", None), bool):
        fields["prevent_recursion"] = prevent
    ext.pop("case_sensitive", None)
    fields["sources"] = tuple(_texts(ext.pop("liyuan_sources", None)))
    _apply_decorators(fields, decorators)
    extra = rest | kept
    if ext:
        extra["extensions"] = ext
    if decorators:
        extra["decorators"] = decorators
    fields["extra"] = extra
    notes += [ImportNote(title, name, status, how) for name, status, how in field_notes(raw, decorators)]
    return _checked(fields, where)


_ST_USED = ("key", "keysecondary", "content", "selectiveLogic", "constant", "disable", "order", "caseSensitive",
            "matchWholeWords", "excludeRecursion", "preventRecursion", "scanDepth", "selective")


def _st_entry(raw: Any, number: int, notes: list[ImportNote]) -> LoreEntry:
    """One SillyTavern World Info entry; as :func:`_card_entry`, every field read leaves ``extra``."""
    where = f"世界书第 {number} 条"
    if not isinstance(raw, Mapping):
        raise CardImportError(f"{where} 不是对象")
    rest = {k: v for k, v in raw.items() if k not in _ST_USED}
    keys = _texts(raw.get("key"))
    secondary = _texts(raw.get("keysecondary"))
    if raw.get("selective", True) is False and secondary:
        rest["keysecondary"], secondary = raw.get("keysecondary"), []  # kept, unused
    comment = raw.get("comment")
    title = comment.strip() if isinstance(comment, str) and comment.strip() else \
        (keys[0] if keys else f"条目 {number}")
    rest.pop("comment", None)
    kept: dict[str, Any] = {}
    keys = _usable(keys, title, "keys", notes, kept)
    secondary = _usable(secondary, title, "secondary_keys", notes, kept)
    content, decorators = _split_decorators(str(raw.get("content") or ""))
    fields: dict[str, Any] = {
        "title": title, "content": content,
        "keys": tuple(keys), "secondary_keys": tuple(secondary),
        "logic": _ST_LOGIC.get(_int(raw.get("selectiveLogic"), 0), "and_any"),
        "constant": _bool(raw.get("constant"), False), "enabled": not _bool(raw.get("disable"), False),
        "order": _int(raw.get("order"), 100), "case_sensitive": _bool(raw.get("caseSensitive"), False),
        "whole_word": _bool(raw.get("matchWholeWords"), True),
        "recursive": not _bool(raw.get("excludeRecursion"), False),
        "prevent_recursion": _bool(raw.get("preventRecursion"), False),
    }
    if (turns := _turns(raw.get("scanDepth"))) is not None:
        fields["scan_turns"] = turns
    fields["sources"] = tuple(_texts(rest.pop("liyuan_sources", None)))
    _apply_decorators(fields, decorators)
    fields["extra"] = rest | kept | ({"decorators": decorators} if decorators else {})
    notes += [ImportNote(title, name, status, how) for name, status, how in field_notes(raw, decorators)]
    return _checked(fields, where)


def _entries_list(entries: Any, where: str) -> list[Any]:
    if isinstance(entries, Mapping):
        entries = list(entries.values())
    if not isinstance(entries, list):
        raise CardImportError(f"{where} 的 entries 应为列表或对象")
    if len(entries) > MAX_ENTRIES:
        raise CardImportError(f"{where} 有 {len(entries)} 条，超过上限 {MAX_ENTRIES}")
    return entries


def _card_book(raw: Any, notes: list[ImportNote]) -> LoreBook:
    if not isinstance(raw, Mapping):
        raise CardImportError("character_book 应为对象")
    entries = _entries_list(raw.get("entries") or [], "character_book")
    extra = {k: v for k, v in raw.items() if k not in ("name", "description", "scan_depth", "recursive_scanning",
                                                        "entries") and not (k == "extensions" and v == {})}
    scan = _turns(raw.get("scan_depth"))
    return LoreBook(tuple(_card_entry(e, i, notes) for i, e in enumerate(entries, start=1)),
                    name=str(raw.get("name") or ""), description=str(raw.get("description") or ""),
                    scan_turns=DEFAULT_SCAN_TURNS if scan is None else scan,
                    recursion_steps=0 if raw.get("recursive_scanning") is False else RECURSION_ON_IMPORT,
                    extra=extra)


def card_from_json(raw: Any, container: Container = "json", *, user_name: str = "你") -> ImportedCard:
    """Read a card or lore book already parsed from JSON (see the module docstring).

    Raises:
        CardImportError: Not one of the accepted shapes, or a bad entry.
    """
    if not isinstance(raw, dict):
        raise CardImportError("文件里不是 JSON 对象，认不出是角色卡还是设定集")
    spec = raw.get("spec")
    notes: list[ImportNote] = []
    if spec in ("chara_card_v3", "chara_card_v2"):
        data = raw.get("data")
        if not isinstance(data, dict):
            raise CardImportError(f"{spec} 的 data 应为对象")
        kind = str(spec)
    elif spec == "lorebook_v3":
        book = _card_book(raw.get("data"), notes)
        return ImportedCard("lorebook_v3", container, "", (), book, raw, tuple(notes))
    elif spec is None and isinstance(raw.get("entries"), Mapping | list) and "first_mes" not in raw:
        entries = _entries_list(raw["entries"], "世界书")
        world = LoreBook(tuple(_st_entry(e, i, notes) for i, e in enumerate(entries, start=1)),
                         recursion_steps=RECURSION_ON_IMPORT,
                         extra={k: v for k, v in raw.items() if k != "entries"})
        return ImportedCard("sillytavern_world_info", container, "", (), world, raw, tuple(notes))
    elif spec is None and isinstance(raw.get("name"), str) and ("first_mes" in raw or "description" in raw):
        data, kind = raw, "chara_card_v1"
    else:
        raise CardImportError(f"认不出这个文件：spec 是 {spec!r}（支持 chara_card_v3、chara_card_v2、lorebook_v3、"
                              "V1 角色卡和 SillyTavern 世界书）")
    name = str(data.get("name") or "").strip()
    if not name:
        raise CardImportError("角色卡没有名字（data.name）")
    card_book = _card_book(data["character_book"], notes) if data.get("character_book") else None
    return ImportedCard(kind, container, name, card_greetings(raw, user_name=user_name), card_book, raw, tuple(notes))


def char_of(data: Mapping[str, Any]) -> str:
    """What ``{{char}}`` stands for: the card's ``nickname``, else its ``name``."""
    nickname = data.get("nickname")
    return nickname.strip() if isinstance(nickname, str) and nickname.strip() else str(data.get("name") or "").strip()


def card_greetings(raw: Mapping[str, Any], *, user_name: str = "你") -> tuple[str, ...]:
    """A card's greetings (``first_mes``, then ``alternate_greetings``), macros substituted."""
    data = raw.get("data") if isinstance(raw.get("data"), Mapping) else raw
    assert isinstance(data, Mapping)
    alternates = data.get("alternate_greetings")
    found = [data.get("first_mes"), *(alternates if isinstance(alternates, list) else [])]
    char = char_of(data)
    return tuple(substitute_macros(g.strip(), char, user_name) for g in found if isinstance(g, str) and g.strip())


def read_card(path: str | os.PathLike[str], *, user_name: str = "你") -> ImportedCard:
    """Read a card or lore book file (JSON, PNG, CHARX); nothing is written.

    Args:
        path: The file.
        user_name: What ``{{user}}`` becomes.

    Raises:
        CardImportError: The file cannot be imported; the message says why (and which entry).
    """
    container, raw = read_container(path)
    return card_from_json(raw, container, user_name=user_name)
