"""Pins (置顶): facts kept verbatim in every later turn of a chat, or of every chat of a card.

Kept beside the card's other files as ``置顶.json`` (the card folder, whatever the storage of
its sessions): never in the session tree and never in a memory document, so no compaction,
recap, merge or edit of a turn can take one away. A turn reads them afresh (a hand edit of the
file counts from the next turn) and sends them first in 【相关设定】 (:mod:`liyuan.context.pins`).

Invariants:

- The file is written atomically, one whole new version per change; a symlink in its
  place is refused (:class:`~liyuan.errors.UnsafePathError`) before anything is read or written.
- A pin that would make a turn's pins pass their share is refused with a
  :class:`~liyuan.errors.ConfigError` and nothing is written; a pin is never cut.
- A file that does not read (a bad hand edit) raises :class:`~liyuan.errors.MemoryFileError`
  naming it on ``pin``/``unpin``; a turn then goes without pins and says so in an ``error``
  activity line (the file is left as it is for the user to mend).
- Ids ``p1``, ``p2`` ... are never reused on a card (the file keeps the next number).
- Deleting a chat removes its pins (:meth:`PinBook.forget_chat`).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from liyuan import fileio
from liyuan.config import MemoryConfig
from liyuan.context.pins import Pin, check_fits, pin_share_chars, pins_text
from liyuan.errors import MemoryFileError, StateError, UnsafePathError
from liyuan.text import utf16_len

__all__ = ["PINS_FORMAT", "PIN_FILE", "PinBook", "pin_share"]

PIN_FILE = "置顶.json"
PINS_FORMAT = "liyuan-pins/1"


class PinBook:
    """The card's pins file, read when it changed and written whole (one per card)."""

    def __init__(self, card_dir: Path) -> None:
        self.path = card_dir / PIN_FILE
        self._lock = threading.Lock()
        self._seen: tuple[tuple[int, int] | None, tuple[Pin, ...], int] | None = None

    def _stamp(self) -> tuple[int, int] | None:
        if self.path.is_symlink():
            raise UnsafePathError(f"{PIN_FILE} 是符号链接，已拒绝读写：{self.path}（请换成卡片文件夹里的普通文件）")
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def _load(self) -> tuple[tuple[Pin, ...], int]:
        stamp = self._stamp()
        if self._seen is not None and self._seen[0] == stamp:
            return self._seen[1], self._seen[2]
        pins: tuple[Pin, ...] = ()
        next_number = 1
        if stamp is not None:
            pins, next_number = _parse(self.path)
        self._seen = (stamp, pins, next_number)
        return pins, next_number

    def _save(self, pins: tuple[Pin, ...], next_number: int) -> None:
        data: dict[str, Any] = {"format": PINS_FORMAT, "next": next_number,
                                "pins": [{"id": p.id, "scope": p.scope, **({"chat": p.chat} if p.chat else {}),
                                          "text": p.text} for p in pins]}
        self._stamp()  # a symlink is refused before the write
        fileio.atomic_write_text(self.path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")
        self._seen = (self._stamp(), pins, next_number)

    def carried(self, chat_id: str | None) -> tuple[Pin, ...]:
        """What a turn of ``chat_id`` carries: the card's pins, then the chat's (``None``: the card's alone)."""
        with self._lock:
            pins, _ = self._load()
        return tuple(p for p in pins if p.scope == "card") + tuple(p for p in pins if p.chat == chat_id and chat_id)

    def add(self, text: str, *, chat_id: str | None, share_chars: int) -> Pin:
        """Pin ``text`` for one chat (``chat_id``) or the whole card (``None``); refused when it does not fit."""
        with self._lock:
            pins, next_number = self._load()
            card = [p for p in pins if p.scope == "card"]
            if chat_id is None:  # it joins every chat's turns: the fullest chat decides
                chats = {p.chat for p in pins if p.scope == "chat"}
                fullest = max(([p for p in pins if p.chat == c] for c in chats),
                              key=lambda group: utf16_len(pins_text(group)), default=[])
                fact = check_fits(text, [*card, *fullest], share_chars, "整张卡每一局的轮次里")
            else:
                fact = check_fits(text, [*card, *(p for p in pins if p.chat == chat_id)], share_chars,
                                  f"局 {chat_id} 的轮次里")
            pin = Pin(f"p{next_number}", fact, "chat" if chat_id else "card", chat_id or "")
            self._save((*pins, pin), next_number + 1)
            return pin

    def remove(self, pin_id: str, *, chat_id: str | None) -> bool:
        """Remove a pin of this chat (``chat_id``) or of the card (``None``); False when there is none."""
        with self._lock:
            pins, next_number = self._load()
            found = next((p for p in pins if p.id == pin_id), None)
            if found is None:
                return False
            if (found.chat or None) != chat_id:
                owner = "整张卡的置顶：用 card.unpin()" if found.scope == "card" else f"局 {found.chat} 的置顶"
                raise StateError(f"置顶 {pin_id} 是{owner}，这里删不了")
            self._save(tuple(p for p in pins if p.id != pin_id), next_number)
            return True

    def forget_chat(self, chat_id: str) -> list[Pin]:
        """Remove a deleted chat's pins; returns them."""
        with self._lock:
            pins, next_number = self._load()
            gone = [p for p in pins if p.chat == chat_id]
            if gone:
                self._save(tuple(p for p in pins if p.chat != chat_id), next_number)
            return gone


def _parse(path: Path) -> tuple[tuple[Pin, ...], int]:
    def bad(why: str) -> MemoryFileError:
        return MemoryFileError(f"{PIN_FILE} 读不了：{why}（文件原样留着，请改好它；改好之前各轮不带置顶）")

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(str(exc)) from exc
    if not isinstance(data, dict) or data.get("format") != PINS_FORMAT or not isinstance(data.get("pins"), list):
        raise bad(f"应为 format 是 {PINS_FORMAT}、带 pins 列表的对象")
    pins: list[Pin] = []
    for n, item in enumerate(data["pins"], 1):
        ok = isinstance(item, dict) and isinstance(item.get("id"), str) and isinstance(item.get("text"), str) \
            and item.get("text", "").strip() and item.get("scope") in ("card", "chat") \
            and (item.get("scope") == "card" or (isinstance(item.get("chat"), str) and item.get("chat")))
        if not ok:
            raise bad(f"第 {n} 条置顶要有 id、text、scope（card 或 chat；chat 还要有 chat）")
        pins.append(Pin(item["id"], item["text"].strip(), item["scope"], item.get("chat", "") or ""))
    next_number = data.get("next", len(pins) + 1)
    if isinstance(next_number, bool) or not isinstance(next_number, int) or next_number < 1:
        raise bad("next 应为正整数")
    return tuple(pins), next_number


def pin_share(config: MemoryConfig) -> int:
    """The characters every pin a chat's turns carry may take together (``pin_share`` of the envelope)."""
    return pin_share_chars(config.budget_chars, config.pin_share, config.lore_share)
