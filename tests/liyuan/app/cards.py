"""The card the app tests open: 雾港 under ``<root>/cards``, played by 阿简 with 林溯.

One helper instead of a copy per test file: a fixed clock and counter ids (``e-0001`` …)
unless the test passes its own; every other option goes to :meth:`liyuan.Card.open` as given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from liyuan.app import Card
from liyuan.clock import counter_ids, fixed_clock


def open_card(root: Path, **options: Any) -> Card:
    """Open (or create) the test card under ``root``."""
    options.setdefault("clock", fixed_clock())
    options.setdefault("ids", counter_ids("e-"))
    return Card.open(root / "cards" / "雾港", user_name="阿简", char_name="林溯", **options)
