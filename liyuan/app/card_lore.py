"""A card's character card and lore book (``角色卡.json``, ``设定集.yaml``): the work behind the lore
methods of :class:`~liyuan.app.card.Card`, which holds one :class:`CardLore` and documents them.

Invariants: an import writes nothing unless the whole file reads and everything it
writes can be written (:class:`~liyuan.errors.CardImportError` naming the field
otherwise, :func:`liyuan.lore.importcheck.check_import`); should the card's file still
fail to write, the lore book it came with is put back as it was; the lore book is written atomically
and the next turn uses it; lore learnt from the handbook keeps its source chats, and
deleting a chat removes the learnt entries only it supported (an activity line names them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from liyuan import fileio
from liyuan.app.activity import Activity
from liyuan.card import manual as card_manual
from liyuan.card.manual import HANDBOOK_REF
from liyuan.card.memstore import MemoryStore
from liyuan.errors import ConfigError, MemoryFileError, StateError
from liyuan.lore.cards import ImportedCard, card_greetings, read_card
from liyuan.lore.export import book_to_world_info, card_json, card_png
from liyuan.lore.importcheck import check_import
from liyuan.lore.model import LoreBook, LoreEntry
from liyuan.lore.provenance import adopt, propose_from_handbook
from liyuan.lore.store import LORE_FILE, LoreShelf, load_card_data, save_card_data

__all__ = ["CardLore"]


class CardLore:
    """One card's character card and lore book (see the lore methods of :class:`~liyuan.app.card.Card`).

    Args:
        card_dir: The card folder.
        names: The user's and the character's name the card was opened with.
        shelf: The card's lore book as each turn reads it (shared with its chats).
        files: The card's memory documents (the handbook the lore is learnt from).
        emit: The card's activity listener.
    """

    def __init__(self, card_dir: Path, names: tuple[str, str], shelf: LoreShelf, files: MemoryStore,
                 emit: Callable[[Activity], None]) -> None:
        self.path = card_dir
        self.user_name, self.char_name = names
        self._lore = shelf
        self._files = files
        self._emit = emit

    def import_card(self, path: str | os.PathLike[str], *, replace: bool = False) -> ImportedCard:
        """See :meth:`liyuan.app.card.Card.import_card`."""
        card = read_card(path, user_name=self.user_name)
        check_import(card)  # everything it writes is built and encoded first: all or nothing
        lore_file = self.path / LORE_FILE
        if card.book is not None and not replace and lore_file.exists():
            raise StateError(f"这张卡已经有设定集（{LORE_FILE}）：要用导入的换掉它，传 replace=True")
        before = lore_file.read_bytes() if card.book is not None and lore_file.is_file() else None
        if card.book is not None:
            self._lore.save(card.book)
        if card.is_card:
            try:
                save_card_data(self.path, card.data)
            except BaseException:  # the card did not land: neither does its book
                if card.book is not None:
                    self._lore.restore(before)
                raise
            self._lore.card_replaced()
        for line in card.report_summary():
            self._emit(Activity("lore", line))
        return card

    @property
    def lore(self) -> LoreBook | None:
        """See :attr:`liyuan.app.card.Card.lore`."""
        index = self._lore.index()
        return index.book if index is not None else None

    def save_lore(self, book: LoreBook) -> None:
        """See :meth:`liyuan.app.card.Card.save_lore`."""
        self._lore.save(book)

    def propose_lore(self, *, min_sources: int = 2) -> list[LoreEntry]:
        """See :meth:`liyuan.app.card.Card.propose_lore`."""
        found = card_manual.read_memory(self._files, HANDBOOK_REF)
        return propose_from_handbook(found[0] if found else "", min_sources=min_sources)

    def adopt_lore(self, entries: list[LoreEntry]) -> None:
        """See :meth:`liyuan.app.card.Card.adopt_lore`."""
        self._lore.save(adopt(self.lore, entries))

    def forget_chat(self, chat_id: str) -> None:
        """A chat was deleted: drop the learnt entries only it supported (an activity line names them)."""
        try:
            removed = self._lore.forget_chat(chat_id)
        except MemoryFileError as exc:
            self._emit(Activity("error", f"删掉局 {chat_id} 后没能更新设定集：{exc}"))
            return
        if removed:
            self._emit(Activity("lore", f"设定集：局 {chat_id} 删掉了，只由它支撑的设定也删了："
                                        + "、".join(f"「{t}」" for t in removed)))

    def export_card(self, path: str | os.PathLike[str], *, spec: str = "chara_card_v2") -> Path:
        """See :meth:`liyuan.app.card.Card.export_card`."""
        if spec not in ("chara_card_v2", "chara_card_v3"):
            raise ConfigError(f"spec 只能是 chara_card_v2 或 chara_card_v3，实际是 {spec!r}")
        data, book, target = load_card_data(self.path), self.lore, Path(path)
        card = card_json(data, book, spec=spec, name=self.char_name)
        if target.suffix.lower() == ".png":
            chunks = {"chara": card_json(data, book, spec="chara_card_v2", name=self.char_name)}
            if spec == "chara_card_v3":
                chunks["ccv3"] = card
            fileio.atomic_write_bytes(target, card_png(chunks))
        else:
            fileio.atomic_write_text(target, json.dumps(card, ensure_ascii=False, indent=2) + "\n")
        return target

    def export_lore(self, path: str | os.PathLike[str]) -> Path:
        """See :meth:`liyuan.app.card.Card.export_lore`."""
        book = self.lore
        if book is None:
            raise StateError(f"这张卡没有设定集（{LORE_FILE}），没有可导出的")
        target = Path(path)
        fileio.atomic_write_text(target, json.dumps(book_to_world_info(book), ensure_ascii=False, indent=2) + "\n")
        return target

    def greetings(self) -> tuple[str, ...]:
        """See :meth:`liyuan.app.card.Card.greetings`."""
        try:
            data = load_card_data(self.path)
        except MemoryFileError:
            return ()
        return card_greetings(data, user_name=self.user_name) if data is not None else ()
