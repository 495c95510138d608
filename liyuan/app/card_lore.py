"""The lore side of a :class:`~liyuan.app.card.Card`: import a card, read and edit its lore book.

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
from liyuan.card.manual import HANDBOOK_REF
from liyuan.card.sync import CardMemory
from liyuan.errors import ConfigError, MemoryFileError, StateError
from liyuan.lore.cards import ImportedCard, card_greetings, read_card
from liyuan.lore.export import book_to_world_info, card_json, card_png
from liyuan.lore.importcheck import check_import
from liyuan.lore.model import LoreBook, LoreEntry
from liyuan.lore.provenance import adopt, propose_from_handbook
from liyuan.lore.store import LORE_FILE, LoreShelf, load_card_data, save_card_data

__all__ = ["CardLore"]


class CardLore:
    """Mixed into :class:`~liyuan.app.card.Card` (which sets these attributes)."""

    path: Path
    user_name: str
    char_name: str
    _lore: LoreShelf
    _emit: Callable[[Activity], None]

    @property
    def memory(self) -> CardMemory:  # provided by Card
        raise NotImplementedError

    def import_card(self, path: str | os.PathLike[str], *, replace: bool = False) -> ImportedCard:
        """Bring in a character card (V3/V2/V1 as JSON, PNG or CHARX) or a lore book
        (``lorebook_v3``, SillyTavern World Info); see :mod:`liyuan.lore.cards`.

        A card is kept whole as ``角色卡.json`` (unknown fields too) and gives new chats
        their greeting; its ``character_book`` (or the lore book) becomes ``设定集.yaml``.
        What became of each field is in the result's ``notes`` (one activity line per field).

        Args:
            path: The file.
            replace: Replace a lore book the card already has (it is refused otherwise).

        Returns:
            What was read (name, greetings, lore book, the JSON).

        Raises:
            CardImportError: The file cannot be imported (the message says why); nothing is written.
            StateError: The card has a lore book already and ``replace`` is False; nothing is written.
        """
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
        """The card's lore book as stored (``设定集.yaml``), or ``None``.

        Raises:
            LoreError: The file does not read (the message names the entry).
        """
        index = self._lore.index()
        return index.book if index is not None else None

    def save_lore(self, book: LoreBook) -> None:
        """Replace the card's lore book (written atomically; the next turn uses it)."""
        self._lore.save(book)

    def propose_lore(self, *, min_sources: int = 2) -> list[LoreEntry]:
        """Lore entries learnt from the handbook's stable lines, each with its source chats.

        Nothing is written: pass the ones you want to :meth:`adopt_lore`. Deleting a chat
        later removes an adopted entry that only that chat supported.
        """
        found = self.memory.read_memory(HANDBOOK_REF)
        return propose_from_handbook(found[0] if found else "", min_sources=min_sources)

    def adopt_lore(self, entries: list[LoreEntry]) -> None:
        """Add proposed entries to the lore book (a learnt entry of the same title is replaced,
        an entry a person wrote is kept)."""
        self._lore.save(adopt(self.lore, entries))

    def _forget_lore(self, chat_id: str) -> None:
        try:
            removed = self._lore.forget_chat(chat_id)
        except MemoryFileError as exc:
            self._emit(Activity("error", f"删掉局 {chat_id} 后没能更新设定集：{exc}"))
            return
        if removed:
            self._emit(Activity("lore", f"设定集：局 {chat_id} 删掉了，只由它支撑的设定也删了："
                                        + "、".join(f"「{t}」" for t in removed)))

    def export_card(self, path: str | os.PathLike[str], *, spec: str = "chara_card_v2") -> Path:
        """Write the card with its lore book as it is now, in the form SillyTavern reads
        (:mod:`liyuan.lore.export`): JSON, or PNG when ``path`` ends in ``.png`` (``tEXt``
        ``chara``, and ``ccv3`` as well for V3; the picture is a 1×1 placeholder).

        Args:
            path: Where to write (replaced atomically).
            spec: ``chara_card_v2`` or ``chara_card_v3``.

        Raises:
            ConfigError: An unknown ``spec``.
            LoreError: The lore book does not read.
        """
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
        """Write the lore book as a SillyTavern World Info file (replaced atomically).

        Raises:
            StateError: The card has no lore book.
        """
        book = self.lore
        if book is None:
            raise StateError(f"这张卡没有设定集（{LORE_FILE}），没有可导出的")
        target = Path(path)
        fileio.atomic_write_text(target, json.dumps(book_to_world_info(book), ensure_ascii=False, indent=2) + "\n")
        return target

    def greetings(self) -> tuple[str, ...]:
        """The imported card's greetings (``first_mes``, then the alternates); empty if none."""
        try:
            data = load_card_data(self.path)
        except MemoryFileError:
            return ()
        return card_greetings(data, user_name=self.user_name) if data is not None else ()
