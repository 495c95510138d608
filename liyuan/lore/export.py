"""Writing a lore book and its card back out: ``character_book`` (Card V2/V3), SillyTavern
World Info, and the card as JSON or PNG.

Invariants:

- Every field the import reads (:mod:`liyuan.lore.cards`) is written back from the entry,
  in the form SillyTavern reads it: keys as written (``/pattern/flags`` stays a regex, a
  bare key a plain word), ``order`` as ``insertion_order`` / ``order``, the logic of the
  secondary keys, whole words, case, recursion flags, the scan depth in messages (turns
  × 2), the book's recursion. Macros (``{{char}}``, ``{{user}}``) come back as written:
  the stored book keeps them. Decorators go back on top of the content.
- Everything else is the entry's ``extra`` as it came, so importing what was exported
  (:mod:`liyuan.lore.cards`) gives an equal book; this holds as well after a hand edit of
  ``设定集.yaml`` or :meth:`~liyuan.app.card.Card.adopt_lore`, since no field the import
  reads is kept twice. Not carried: ``recursion_steps`` other than 0 or the import's
  default (a card says only whether it recurses).
- A book read from one format and written to the other moves the fields SillyTavern keeps
  under ``extensions`` in a card (``probability``, ``group`` ...) to their World Info names
  and back, as SillyTavern's own converters do.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

from liyuan.lore.model import Logic, LoreBook, LoreEntry, regex_key

__all__ = ["SOURCES_FIELD", "book_to_character_book", "book_to_world_info", "card_json", "card_png"]

SOURCES_FIELD = "liyuan_sources"
"""A learnt entry's source chats (:attr:`LoreEntry.sources`): under ``extensions`` in a card,
top-level in World Info; read back by the import."""
_LOGIC_NUMBER: dict[Logic, int] = {"and_any": 0, "not_all": 1, "not_any": 2, "and_all": 3}
_PRIVATE = ("decorators", "unusable_keys", "unusable_secondary_keys")
"""``extra`` fields liyuan adds itself (not a field of either format)."""
EXT_OF_WI: dict[str, str] = {
    "position": "position", "displayIndex": "display_index", "probability": "probability",
    "useProbability": "useProbability", "depth": "depth", "group": "group", "groupOverride": "group_override",
    "groupWeight": "group_weight", "delayUntilRecursion": "delay_until_recursion",
    "useGroupScoring": "use_group_scoring", "automationId": "automation_id", "role": "role",
    "vectorized": "vectorized", "sticky": "sticky", "cooldown": "cooldown", "delay": "delay",
}
"""World Info field → its name under a card entry's ``extensions`` (SillyTavern's own mapping)."""


def _messages(turns: int | None) -> int | None:
    return None if turns is None else turns * 2


def _content(entry: LoreEntry) -> str:
    decorators = entry.extra.get("decorators")
    if isinstance(decorators, list) and decorators:
        return "\n".join(str(d) for d in decorators) + "\n" + entry.content
    return entry.content


def _keys(entry: LoreEntry, field: str) -> list[str]:
    found = entry.extra.get(f"unusable_{field}")
    return list(getattr(entry, field)) + (list(found) if isinstance(found, list) else [])


def _card_entry(entry: LoreEntry) -> dict[str, Any]:
    rest = {k: v for k, v in entry.extra.items() if k not in _PRIVATE}
    ext = dict(rest.pop("extensions", None) or {})
    if "uid" in rest:  # a World Info entry written as a card entry
        for wi_name, ext_name in EXT_OF_WI.items():
            if wi_name in rest and ext_name not in ext:
                ext[ext_name] = rest.pop(wi_name)
        rest["id"] = rest.pop("uid")
    out: dict[str, Any] = {"keys": list(entry.keys) + (list(entry.extra.get("unusable_keys") or []))}
    out |= rest
    out["name" if "comment" in rest else "comment"] = entry.title
    out["content"] = _content(entry)
    secondary = _keys(entry, "secondary_keys")
    if entry.secondary_keys or entry.extra.get("unusable_secondary_keys"):
        out["selective"], out["secondary_keys"] = True, secondary
    else:
        out["selective"] = False
    out |= {"enabled": entry.enabled, "constant": entry.constant, "insertion_order": entry.order,
            "case_sensitive": entry.case_sensitive}
    if entry.priority:
        out["priority"] = entry.priority
    out["use_regex"] = any(regex_key(k) for k in out["keys"] + secondary)  # SillyTavern reads the key's form
    if entry.sources:
        ext[SOURCES_FIELD] = list(entry.sources)
    ext |= {"selectiveLogic": _LOGIC_NUMBER[entry.logic], "match_whole_words": entry.whole_word,
            "scan_depth": _messages(entry.scan_turns), "exclude_recursion": not entry.recursive,
            "prevent_recursion": entry.prevent_recursion, "case_sensitive": entry.case_sensitive}
    out["extensions"] = ext
    return out


def book_to_character_book(book: LoreBook) -> dict[str, Any]:
    """The book as a card's ``character_book`` (Card V2/V3, also ``lorebook_v3``'s ``data``)."""
    out: dict[str, Any] = dict(book.extra)
    for wi_only in ("originalData",):
        out.pop(wi_only, None)
    if book.name:
        out["name"] = book.name
    if book.description:
        out["description"] = book.description
    out["scan_depth"] = book.scan_turns * 2
    out["recursive_scanning"] = book.recursion_steps > 0
    out.setdefault("extensions", {})
    out["entries"] = [_card_entry(entry) for entry in book.entries]
    return out


def _wi_entry(entry: LoreEntry, uid: int) -> dict[str, Any]:
    rest = {k: v for k, v in entry.extra.items() if k not in _PRIVATE}
    ext = rest.pop("extensions", None)
    if isinstance(ext, dict):  # a card entry written as a World Info entry
        for card_only in ("id", "name", "comment", "secondary_keys", "position"):
            rest.pop(card_only, None)
        for wi_name, ext_name in EXT_OF_WI.items():
            if ext_name in ext and wi_name not in rest:
                rest[wi_name] = ext[ext_name]
    out: dict[str, Any] = {"uid": rest.pop("uid", uid), "key": list(entry.keys) + list(
        entry.extra.get("unusable_keys") or [])}
    secondary = _keys(entry, "secondary_keys")
    unused = rest.pop("keysecondary", None)
    out["keysecondary"] = secondary if secondary else (unused or [])
    out["comment"] = entry.title
    out["content"] = _content(entry)
    out["selective"] = bool(secondary) or not unused
    if entry.sources:
        out[SOURCES_FIELD] = list(entry.sources)
    out |= {"selectiveLogic": _LOGIC_NUMBER[entry.logic], "constant": entry.constant, "disable": not entry.enabled,
            "order": entry.order, "caseSensitive": entry.case_sensitive, "matchWholeWords": entry.whole_word,
            "excludeRecursion": not entry.recursive, "preventRecursion": entry.prevent_recursion,
            "scanDepth": _messages(entry.scan_turns)}
    return out | rest


def book_to_world_info(book: LoreBook) -> dict[str, Any]:
    """The book as a SillyTavern World Info file (``{"entries": {"0": {...}}}``)."""
    entries = [_wi_entry(entry, number) for number, entry in enumerate(book.entries)]
    extra = {k: v for k, v in book.extra.items() if k not in ("extensions", "token_budget", "scan_depth",
                                                               "recursive_scanning")}
    return {**extra, "entries": {str(entry["uid"]): entry for entry in entries}}


def card_json(data: dict[str, Any] | None, book: LoreBook | None, *, spec: str, name: str) -> dict[str, Any]:
    """A Card V2 (``spec="chara_card_v2"``) or V3 JSON: the stored card's fields, the book as it is now.

    Args:
        data: The imported card as stored (``角色卡.json``), or ``None`` for a card made here.
        book: The lore book (``None``: the card goes out without one).
        spec: ``chara_card_v2`` or ``chara_card_v3``.
        name: The character's name when there is no stored card.
    """
    stored = data.get("data") if isinstance(data, dict) and isinstance(data.get("data"), dict) else data
    inner: dict[str, Any] = dict(stored) if isinstance(stored, dict) else {}
    defaults: dict[str, Any] = {"name": name, "description": "", "personality": "", "scenario": "", "first_mes": "",
                                "mes_example": "", "creator_notes": "", "system_prompt": "",
                                "post_history_instructions": "", "alternate_greetings": [], "tags": [], "creator": "",
                                "character_version": "", "extensions": {}}
    if spec == "chara_card_v3":
        defaults |= {"group_only_greetings": []}
    inner = defaults | inner
    inner.pop("character_book", None)
    if book is not None:
        inner["character_book"] = book_to_character_book(book)
    version = "3.0" if spec == "chara_card_v3" else "2.0"
    return {"spec": spec, "spec_version": version, "data": inner}


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def card_png(cards: dict[str, dict[str, Any]]) -> bytes:
    """A 1×1 grey PNG carrying each card as a ``tEXt`` chunk (``chara``: V2, ``ccv3``: V3), JSON in base64.

    The import keeps a card's JSON, not its picture: the image is a placeholder.
    """
    body = _chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)) + _chunk(b"IDAT", zlib.compress(b"\x00\x80"))
    for keyword, card in cards.items():
        text = base64.b64encode(json.dumps(card, ensure_ascii=False).encode("utf-8"))
        body += _chunk(b"tEXt", keyword.encode("latin-1") + b"\0" + text)
    return b"\x89PNG\r\n\x1a\n" + body + _chunk(b"IEND", b"")
