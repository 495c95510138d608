"""The SillyTavern fields that decide whether a matched entry really comes in (issue 35 item 4):
probability, inclusion groups, ``delay_until_recursion``, ``delay``, and the SPEC_V3
decorators ``@@activate_only_after`` / ``@@activate_only_every``.

Invariants:

- The fields are read where the import left them (the entry's ``extra``: top level in a
  World Info entry, under ``extensions`` in a card entry; decorators from ``decorators``),
  so the book and its export do not change; :func:`rules_of` reads them each time a book
  is indexed.
- Every chance is a seeded roll (:func:`roll`): the same chat at the same place of the same
  branch gives the same choice, so a replay is byte-stable and a reroll of a turn rolls
  the same; a different branch or a later turn rolls anew. SillyTavern rolls
  ``Math.random()`` instead.
- Counts come from the branch (:class:`TurnPlace`): ``delay`` counts the chat's messages
  (the new one included) as SillyTavern does; the two decorators count the character's
  messages as SPEC_V3 says.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from liyuan.lore.model import LoreEntry

__all__ = ["DEFAULT_WEIGHT", "NO_PLACE", "EntryRules", "TurnPlace", "choose_in_groups", "roll", "rules_of"]

DEFAULT_WEIGHT = 100
"""An inclusion group's weight when the entry gives none (SillyTavern's)."""


@dataclass(frozen=True)
class TurnPlace:
    """Where in the chat a turn is: the seed of its rolls and the counts the rules read."""

    anchor: str = ""
    """The id of the branch's last entry (the turn is built on it): the seed of the rolls."""
    messages: int = 0
    """Messages on the branch, the user's new one included."""
    replies: int = 0
    """The character's messages on the branch (its greeting included)."""


NO_PLACE = TurnPlace()
"""A turn with no branch behind it (the rolls' seed is empty, every count 0)."""


@dataclass(frozen=True)
class EntryRules:
    """What one entry asks beyond its keys (defaults: nothing)."""

    probability: float = 100.0
    """Chance in percent that a match comes in (100: always)."""
    groups: tuple[str, ...] = ()
    group_override: bool = False
    group_weight: float = DEFAULT_WEIGHT
    recursion_level: int = 0
    """``delay_until_recursion``: 0 off; n: only in a recursion step once level n is open
    (level 1 with the first recursion step; each further level opens a step of its own
    when a step finds nothing new, as SillyTavern does)."""
    delay: int = 0
    """Not before the chat has this many messages."""
    only_after: int = 0
    """``@@activate_only_after``: not before this many character messages."""
    only_every: int = 0
    """``@@activate_only_every``: only when the character's message count is a multiple of it."""
    scoring: bool = False
    """``use_group_scoring``: in its group, it falls when another member found more keys."""
    after_match: str = ""
    """``keep`` (``@@keep_activate_after_match``) or ``drop`` (``@@dont_activate_after_match``)."""
    sticky: int = 0
    """Messages it stays in once it came in (:mod:`liyuan.lore.timed`)."""
    cooldown: int = 0
    """Messages it stays out once it came in (or once its sticky time ended)."""

    @property
    def plain(self) -> bool:
        """Nothing beyond the keys: no rule to check."""
        return self == _PLAIN

    def allowed(self, place: TurnPlace, step: int, level: int = 1) -> bool:
        """Whether the entry may come in at this place and recursion step (before any roll);
        ``level``: the ``delay_until_recursion`` level open at this step."""
        if self.delay and place.messages < self.delay:
            return False
        if self.only_after and place.replies < self.only_after:
            return False
        if self.only_every and place.replies % self.only_every:
            return False
        return not (self.recursion_level and (step == 0 or self.recursion_level > level))


_PLAIN = EntryRules()


def _number(value: Any, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return default
    return float(value)


def _decorator(entry: LoreEntry, name: str) -> int:
    decorators = entry.extra.get("decorators")
    for line in decorators if isinstance(decorators, list) else []:
        found, _, value = str(line)[2:].partition(" ")
        if found == name and value.strip().isdigit():
            return int(value.strip())
    return 0


def _after_match(entry: LoreEntry) -> str:
    decorators = entry.extra.get("decorators")
    found = {str(line).strip() for line in decorators} if isinstance(decorators, list) else set()
    if "@@keep_activate_after_match" in found:
        return "keep"
    return "drop" if "@@dont_activate_after_match" in found else ""


def rules_of(entry: LoreEntry) -> EntryRules:
    """The entry's rules, from its ``extra`` (World Info names first, then a card's ``extensions``)."""
    extra = entry.extra
    found = extra.get("extensions")
    ext: Mapping[str, Any] = found if isinstance(found, Mapping) else {}

    def field(wi_name: str, ext_name: str) -> Any:
        return extra[wi_name] if wi_name in extra else ext.get(ext_name)

    use = field("useProbability", "useProbability")
    probability = _number(field("probability", "probability"), 100.0) if use is not False else 100.0
    group = field("group", "group")
    groups = tuple(g.strip() for g in group.split(",") if g.strip()) if isinstance(group, str) else ()
    level = field("delayUntilRecursion", "delay_until_recursion")
    recursion_level = 1 if level is True else max(0, int(_number(level, 0)))
    rules = EntryRules(
        probability=min(100.0, max(0.0, probability)), groups=groups,
        group_override=field("groupOverride", "group_override") is True,
        group_weight=abs(_number(field("groupWeight", "group_weight"), DEFAULT_WEIGHT)),
        recursion_level=recursion_level, delay=max(0, int(_number(field("delay", "delay"), 0))),
        scoring=field("useGroupScoring", "use_group_scoring") is True,
        sticky=max(0, int(_number(field("sticky", "sticky"), 0))),
        cooldown=max(0, int(_number(field("cooldown", "cooldown"), 0))),
        only_after=_decorator(entry, "activate_only_after"), only_every=_decorator(entry, "activate_only_every"),
        after_match=_after_match(entry))
    return _PLAIN if rules == _PLAIN else rules


def roll(place: TurnPlace, number: int, what: str) -> float:
    """A number in ``[0, 100)`` fixed by the turn's place, the entry and what is rolled for."""
    digest = hashlib.sha256(f"{place.anchor}\0{number}\0{what}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * 100


def choose_in_groups(new: Sequence[int], rules: Sequence[EntryRules], order: Sequence[int],
                     taken_groups: set[str], place: TurnPlace,
                     score: Callable[[int], int] | None = None) -> tuple[list[int], dict[int, str]]:
    """The entries of ``new`` that survive their inclusion groups, and why each other one fell.

    A group already represented this turn takes no other entry; among several new entries of
    one group, a ``use_group_scoring`` one that found fewer keys than the best falls first
    (``score``), then the ``group_override`` one of highest order wins, else one is drawn by weight.
    """
    by_group: dict[str, list[int]] = {}
    for number in new:
        for group in rules[number].groups:
            by_group.setdefault(group, []).append(number)
    fallen: dict[int, str] = {}
    for group, members in by_group.items():
        alive = [n for n in members if n not in fallen]
        if group in taken_groups:
            fallen |= {n: f"组「{group}」本轮已有条目" for n in alive}
            continue
        if score is not None and any(rules[n].scoring for n in alive):
            scores = {n: score(n) for n in alive}
            best = max(scores.values())
            fallen |= {n: f"组「{group}」里别的条目命中的关键词更多" for n in alive
                       if rules[n].scoring and scores[n] < best}
            alive = [n for n in alive if n not in fallen]
        if len(alive) <= 1:
            continue
        override = [n for n in alive if rules[n].group_override]
        if override:
            winner = max(override, key=lambda n: (order[n], -n))
        else:
            total = sum(rules[n].group_weight for n in alive)
            point = roll(place, min(alive), f"group:{group}") / 100 * total
            winner, running = alive[-1], 0.0
            for n in alive:
                running += rules[n].group_weight
                if point < running:
                    winner = n
                    break
        fallen |= {n: f"组「{group}」里选了别的条目" for n in alive if n != winner}
    return [n for n in new if n not in fallen], fallen
