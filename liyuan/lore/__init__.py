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

from liyuan.lore.model import LoreBook, LoreEntry
from liyuan.lore.report import LoreHit, LoreReport
from liyuan.lore.store import LORE_FILE, load_book, parse_book, save_book

__all__ = [
    "LORE_FILE",
    "LoreBook",
    "LoreEntry",
    "LoreHit",
    "LoreReport",
    "load_book",
    "parse_book",
    "save_book",
]
