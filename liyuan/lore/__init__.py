"""The lore layer (设定集): the card's lore book, activated per turn, never compressed (#23).

Guarantees: the book is a YAML file in the card folder a person can edit
(:mod:`liyuan.lore.store`); each turn the entries the recent text calls up go whole
into 【相关设定】 and the other titles into 【设定集索引】, inside the lore share of the
turn's envelope, cut only at entry boundaries, and every activated entry that did not
fit is reported (:mod:`liyuan.lore.activate`). Cards and lore books people already have
(Character Card V2/V3 as JSON, PNG or CHARX; ``lorebook_v3``; SillyTavern World Info)
are read by :mod:`liyuan.lore.cards`, with a clear error and nothing written on bad input.
"""

from __future__ import annotations

from liyuan.lore.activate import (
    DEFAULT_LORE_SHARE,
    LoreBlocks,
    LoreCut,
    LoreHit,
    LoreReport,
    activate_entries,
    fit_lore,
    lore_for_turn,
    lore_share_chars,
    turn_segments,
)
from liyuan.lore.match import LoreIndex, RegexClock
from liyuan.lore.model import (
    DEFAULT_SCAN_TURNS,
    LORE_INDEX_MAX_CHARS,
    LoreBook,
    LoreEntry,
    book_from_dict,
    entry_from_dict,
)
from liyuan.lore.store import CARD_FILE, LORE_FILE, LoreShelf, dump_book, load_book, parse_book, save_book

__all__ = [
    "CARD_FILE",
    "DEFAULT_LORE_SHARE",
    "DEFAULT_SCAN_TURNS",
    "LORE_FILE",
    "LORE_INDEX_MAX_CHARS",
    "LoreBlocks",
    "LoreBook",
    "LoreCut",
    "LoreEntry",
    "LoreHit",
    "LoreIndex",
    "LoreReport",
    "LoreShelf",
    "RegexClock",
    "activate_entries",
    "book_from_dict",
    "dump_book",
    "entry_from_dict",
    "fit_lore",
    "load_book",
    "lore_for_turn",
    "lore_share_chars",
    "parse_book",
    "save_book",
    "turn_segments",
]
