"""Card and lore book files written here, from the specs (original content, in Chinese)."""

from __future__ import annotations

import base64
import io
import json
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(text_chunks: dict[str, bytes] | None = None, *, padding: int = 0) -> bytes:
    """A 1×1 grey PNG with the given tEXt chunks (before IEND); ``padding`` adds an ancillary chunk."""
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    body = chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00\x80"))
    if padding:
        body += chunk(b"zzZz", b"\0" * padding)
    for keyword, text in (text_chunks or {}).items():
        body += chunk(b"tEXt", keyword.encode("latin-1") + b"\0" + text)
    return b"\x89PNG\r\n\x1a\n" + body + chunk(b"IEND", b"")


def b64(card: dict[str, Any]) -> bytes:
    return base64.b64encode(json.dumps(card, ensure_ascii=False).encode("utf-8"))


def book_entries() -> list[dict[str, Any]]:
    return [
        {"keys": ["雾港"], "content": "雾港终年起雾，{{char}}在这里长大。", "extensions": {"color": "灰"},
         "enabled": True, "insertion_order": 10, "name": "雾港", "comment": "地名", "id": 1,
         "selective": False, "secondary_keys": ["灯塔"], "position": "before_char"},
        {"keys": ["灯塔"], "content": "灯塔每夜亮到三更。", "extensions": {}, "enabled": True,
         "insertion_order": 20, "selective": True, "secondary_keys": ["雾"], "constant": False},
        {"keys": ["{{user}}"], "content": "@@scan_depth 4\n@@additional_keys 信\n{{user}}是新来的邮差。",
         "extensions": {}, "enabled": True, "insertion_order": 30, "comment": "邮差"},
    ]


def v2_card() -> dict[str, Any]:
    return {
        "spec": "chara_card_v2", "spec_version": "2.0",
        "data": {
            "name": "林溯", "description": "雾港灯塔的守夜人。", "personality": "寡言", "scenario": "雾夜",
            "first_mes": "（{{char}}提着灯）{{user}}，你迟到了。", "mes_example": "",
            "creator_notes": "", "system_prompt": "", "post_history_instructions": "",
            "alternate_greetings": ["<BOT>没回头：进来吧，<user>。"], "tags": ["雾港"], "creator": "梨园",
            "character_version": "1", "extensions": {"talkativeness": "0.4"},
            "character_book": {"name": "雾港设定", "scan_depth": 4, "recursive_scanning": True,
                               "extensions": {}, "entries": book_entries()},
        },
    }


def v3_card() -> dict[str, Any]:
    card = v2_card()
    card["spec"], card["spec_version"] = "chara_card_v3", "3.0"
    data = card["data"]
    data.update(nickname="阿溯", group_only_greetings=[], creation_date=0, modification_date=0,
                assets=[{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}])
    for entry in data["character_book"]["entries"]:
        entry["use_regex"] = False
    return card


def charx(card: dict[str, Any] | None, extra: dict[str, bytes] | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        if card is not None:
            archive.writestr("card.json", json.dumps(card, ensure_ascii=False))
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return out.getvalue()


def world_info() -> dict[str, Any]:
    return {"entries": {
        "0": {"uid": 0, "key": ["渡口"], "keysecondary": ["夜"], "comment": "渡口", "content": "渡口夜里不开船。",
              "constant": False, "selective": True, "selectiveLogic": 2, "order": 100, "position": 0,
              "disable": False, "excludeRecursion": False, "preventRecursion": False, "probability": 100,
              "useProbability": True, "depth": 4, "scanDepth": None, "caseSensitive": None,
              "matchWholeWords": None, "group": ""},
        "1": {"uid": 1, "key": ["/\\d+号船/"], "keysecondary": [], "comment": "船号", "content": "船号是单数的去西岸。",
              "constant": False, "selective": True, "selectiveLogic": 0, "order": 50, "disable": False},
        "2": {"uid": 2, "key": [], "comment": "常识", "content": "这里的人用铜钱。", "constant": True,
              "order": 200, "disable": False},
        "3": {"uid": 3, "key": ["旧事"], "comment": "停用", "content": "不会出现。", "disable": True},
    }}


def write(folder: Path, name: str, data: bytes | dict[str, Any]) -> Path:
    path = folder / name
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data, ensure_ascii=False).encode("utf-8"))
    return path


def st_entry(uid: int, keys: list[str], content: str, *, order: int = 100, comment: str = "",
             secondary: list[str] | None = None, **ext: Any) -> dict[str, Any]:
    """One ``character_book`` entry exactly as SillyTavern's card exporter writes it
    (``convertWorldInfoToCharacterBook``): ``use_regex: true`` on every entry, no ``priority``,
    the World Info fields under ``extensions``; ``ext`` overrides those extensions."""
    extensions: dict[str, Any] = {
        "position": 0, "exclude_recursion": False, "display_index": uid, "probability": 100,
        "useProbability": True, "depth": 4, "selectiveLogic": 0, "group": "", "group_override": False,
        "group_weight": 100, "prevent_recursion": False, "delay_until_recursion": False, "scan_depth": None,
        "match_whole_words": None, "use_group_scoring": False, "case_sensitive": None, "automation_id": "",
        "role": 0, "vectorized": False, "sticky": None, "cooldown": None, "delay": None}
    extensions.update(ext)
    return {"id": uid, "keys": keys, "secondary_keys": secondary or [], "comment": comment or keys[0],
            "content": content, "constant": False, "selective": True, "insertion_order": order, "enabled": True,
            "position": "before_char", "use_regex": True, "extensions": extensions}


def st_card(entries: list[dict[str, Any]], name: str = "Seraphina", **book: Any) -> dict[str, Any]:
    """A V2 card as SillyTavern exports it, carrying ``entries`` as its book (no ``recursive_scanning``)."""
    return {
        "name": name, "description": "", "personality": "", "scenario": "", "first_mes": "Hello, {{user}}.",
        "mes_example": "", "creatorcomment": "", "avatar": "none", "talkativeness": "0.5", "fav": False,
        "tags": [], "spec": "chara_card_v2", "spec_version": "2.0",
        "data": {
            "name": name, "description": "", "personality": "", "scenario": "", "first_mes": "Hello, {{user}}.",
            "mes_example": "", "creator_notes": "", "system_prompt": "", "post_history_instructions": "",
            "tags": [], "creator": "", "character_version": "", "alternate_greetings": [],
            "extensions": {"talkativeness": "0.5", "fav": False, "world": "book",
                           "depth_prompt": {"prompt": "", "depth": 4, "role": "system"}},
            "character_book": {"entries": entries, "name": "book", **book},
        },
        "create_date": "2024-9-28 @12h 00m 00s 000ms",
    }
