"""``sticky`` and ``cooldown`` (issue 35 item 4): timers read back from the branch itself.

SillyTavern keeps these timers in the chat's metadata, written as turns are generated. Here
nothing is written: the timers of a turn are worked out from the branch it stands on, by
playing the lore activation of the turns before it again (the same text, names and seeded
rolls as when they were sent). So a replay, a reroll and an edit (a new branch) read them
back the same way, and the session tree stays the one record.

Rules, in messages as SillyTavern counts them (the user's new message included):

- An entry with ``sticky`` N that comes in at a turn with M messages stays in while the
  chat has fewer than M + N messages: it comes in whatever its keys, its probability and
  its inclusion group say.
- An entry with ``cooldown`` N that comes in cannot come in again while the chat has fewer
  than M + N messages (a sticky one stays in meanwhile); when a sticky one ends, its
  cooldown starts from there.
- SPEC_V3's ``@@keep_activate_after_match`` keeps an entry in once it came in at an earlier
  turn, ``@@dont_activate_after_match`` keeps it out from then on.
- Only the last :data:`TIMER_TURNS_BACK` turns are played again (a bound on the work per
  turn); a timer longer than that, or a match further back, is not seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from liyuan.lore.match import LoreIndex
from liyuan.lore.rules import TurnPlace

__all__ = ["TIMER_TURNS_BACK", "Said", "Timers", "timers_for_turn", "turn_place"]

TIMER_TURNS_BACK = 25
"""At most this many earlier turns are played again to work out the timers."""

Said = tuple[str, str | None, str, str]
"""A message on the branch: its id, its parent's id, its role (``user`` / ``assistant``), its text."""


@dataclass
class Timers:
    """The timers running at one turn (book positions to the message count they end at)."""

    sticky: dict[int, int] = field(default_factory=dict)
    cooldown: dict[int, int] = field(default_factory=dict)
    matched: set[int] = field(default_factory=set)
    """Entries that came in at an earlier turn (for the two ``…_after_match`` decorators)."""

    def at(self, messages: int, lengths: Sequence[tuple[int, int]]) -> tuple[frozenset[int], frozenset[int]]:
        """The sticky and cooling entries at ``messages``; ended stickies start their cooldown."""
        for number, end in list(self.sticky.items()):
            if messages >= end:
                del self.sticky[number]
                if lengths[number][1]:
                    self.cooldown[number] = messages + lengths[number][1]
        for number, end in list(self.cooldown.items()):
            if messages >= end:
                del self.cooldown[number]
        return frozenset(self.sticky), frozenset(self.cooldown)

    def came_in(self, numbers: Sequence[int], messages: int, lengths: Sequence[tuple[int, int]]) -> None:
        """Start the timers of the entries that came in at ``messages``."""
        self.matched.update(numbers)
        for number in numbers:
            sticky, cooldown = lengths[number]
            if sticky and number not in self.sticky:
                self.sticky[number] = messages + sticky
            if cooldown and number not in self.cooldown:
                self.cooldown[number] = messages + cooldown


def lengths_of(index: LoreIndex) -> list[tuple[int, int]]:
    """Each entry's ``(sticky, cooldown)`` in messages (0: none)."""
    return [(rules.sticky, rules.cooldown) for rules in index.rules]


def turn_place(said: Sequence[Said], new_words: bool, anchor: str) -> TurnPlace:
    """The place of a turn after ``said`` (``new_words``: the user's message is not among them)."""
    replies = sum(1 for _, _, role, _ in said if role == "assistant")
    return TurnPlace(anchor, len(said) + new_words, replies)


def timers_for_turn(index: LoreIndex, said: Sequence[Said], names: tuple[str, str], now: int,
                    play: Any) -> tuple[frozenset[int], frozenset[int]]:
    """The entries sticky and cooling at this turn, worked out from the turns before it.

    Args:
        index: The book.
        said: The messages on the branch before this turn's user message, oldest first.
        names: The user's and the character's name.
        now: This turn's message count (the new message included).
        play: ``play(items, new_words, place, sticky, cooldown) -> list[int]``: one turn's
            activation (the numbers that came in), as the turn itself runs it.
    """
    if not index.has_timers:
        return frozenset(), frozenset()
    lengths = lengths_of(index)
    timers = Timers()
    keep = {n for n, rules in enumerate(index.rules) if rules.after_match == "keep"}
    drop = {n for n, rules in enumerate(index.rules) if rules.after_match == "drop"}

    def running(messages: int) -> tuple[frozenset[int], frozenset[int]]:
        sticky, cooldown = timers.at(messages, lengths)
        return sticky | (timers.matched & keep), cooldown | (timers.matched & drop)

    starts = [i for i, (_, _, role, _) in enumerate(said) if role == "user"][-TIMER_TURNS_BACK:]
    for start in starts:
        _id, parent, _role, text = said[start]
        place = turn_place(said[:start], True, parent or "")
        sticky, cooldown = running(place.messages)
        items = [(role, body) for _, _, role, body in said[:start]]
        timers.came_in(play(items, text, place, sticky, cooldown), place.messages, lengths)
    return running(now)
