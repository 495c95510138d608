"""Pinned facts (置顶) as a turn carries them: verbatim, first in 【相关设定】, inside the envelope.

Invariants:

- A pin is sent whole or refused when it is made (:func:`check_fits`); the assembly never
  cuts one. Should the settings shrink after pins were made, the turn still sends them
  whole and says so (:func:`over_share`), it does not drop them.
- Pins come out of the lore share first (they are constant lore of the card or the chat):
  :func:`lore_left` is what the lore book's entries and index may still take, so the
  envelope (``MemoryConfig.budget_chars``) holds as before and the resident summary
  yields to pins as it yields to lore.
- The pins' share is ``pin_share`` of the envelope, never more than the lore share.
- Sizes are UTF-16 units (:func:`liyuan.text.utf16_len`), as every budget here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from liyuan.errors import ConfigError
from liyuan.text import utf16_len

__all__ = ["DEFAULT_PIN_SHARE", "PIN_HEADING", "Pin", "check_fits", "lore_left", "over_share", "pin_share_chars",
           "pins_text"]

DEFAULT_PIN_SHARE = 0.1
"""The pins' share of the envelope: 430 of 4300 characters, a quarter of the lore share
(0.4); a handful of one-line facts, so pins cannot crowd the lore book out."""

PIN_HEADING = "「置顶」"
"""The title the pins carry inside 【相关设定】 (a lore entry's title is written the same way)."""

Scope = Literal["card", "chat"]


@dataclass(frozen=True, slots=True)
class Pin:
    """One pinned fact."""

    id: str
    """``p1``, ``p2`` ... in the order they were made (never reused on the card)."""
    text: str
    """The fact, verbatim (outer blank space removed)."""
    scope: Scope
    """``card``: every chat of the card; ``chat``: one chat's turns."""
    chat: str = ""
    """The chat of a ``chat`` pin; empty for a card pin."""


def pins_text(pins: Sequence[Pin]) -> str:
    """The pins as 【相关设定】 opens with them: the title, then one ``- `` line per pin."""
    if not pins:
        return ""
    return PIN_HEADING + "\n" + "\n".join(f"- {pin.text}" for pin in pins)


def pin_share_chars(budget_chars: int, pin_share: float, lore_share: float) -> int:
    """Characters every pin a turn carries may take together."""
    return max(0, int(budget_chars * min(pin_share, lore_share)))


def lore_left(lore_chars: int, pinned: str) -> int:
    """What the lore book may still take of its share once the pins are in (the blank line between counted)."""
    return max(0, lore_chars - utf16_len(pinned) - (2 if pinned else 0))


def over_share(pins: Sequence[Pin], share_chars: int) -> int:
    """How far the pins pass their share (0 when they fit): the settings shrank after they were made."""
    return max(0, utf16_len(pins_text(pins)) - share_chars)


def check_fits(text: str, carried: Sequence[Pin], share_chars: int, where: str) -> str:
    """The new pin's text, or a :class:`ConfigError` that says why it is refused (never cut).

    Args:
        text: The fact as given.
        carried: The pins a turn carries with it already (of the card and of the chat; for a
            card pin, those of the chat that carries the most).
        share_chars: :func:`pin_share_chars`.
        where: Which turns carry it, for the message.
    """
    fact = text.strip() if isinstance(text, str) else ""
    if not fact:
        raise ConfigError("置顶的内容不能为空")
    after = utf16_len(pins_text([*carried, Pin("", fact, "card")]))
    if after > share_chars:
        used = utf16_len(pins_text(carried))
        raise ConfigError(f"置顶放不下：这条 {utf16_len(fact)} 字，{where}已有置顶共 {used} 字，加上它（连标题）"
                          f"{after} 字，超过置顶的份额 {share_chars} 字（budget_chars × pin_share）；"
                          "置顶不截断：先 unpin 别的、写短一些，或调大 pin_share")
    return fact
