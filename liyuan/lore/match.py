"""Finding a lore book's keys in text fast: the keyword index.

A turn scans a few thousand characters against a book that may hold 100,000 entries.
Testing every key with ``in`` costs time in proportion to the book; this index costs
time in proportion to the text instead:

- Every plain key is filed under its first two characters (a one-character key under
  its character) and its length, as written (case-sensitive entries) or casefolded.
- A scan takes the set of two-character pieces of the text and keeps those that file
  keys; at each place such a piece occurs, it looks up the text of each filed length.
  So the work grows with the places where some key could start, not with the book: a
  book whose 100,000 keys all begin with the same two characters costs a look-up per
  length at each place those two characters occur.
- Text is scanned segment by segment, newest first (the user's new words, then each
  kept turn); a key is recorded at the first segment that holds it, its *depth*.

Regex keys (written ``/pattern/flags``) are not indexed: each is searched with a time bound (the ``regex`` module's
``timeout``), and all regex searches of a turn share :data:`REGEX_TURN_BUDGET_S`. A key
that runs out of time counts as not found and is reported.

Whole words: a one-word key whose first (last) character is a letter or digit of an
alphabetic script must not have such a character right before (after) it in the text.
CJK keys have no such check (there are no spaces between words): "雾港" is found in
"雾港城"; nor have keys of several words (SillyTavern finds "red dragon" in "red dragons").
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import regex

from liyuan.errors import LoreError
from liyuan.lore.model import LoreBook, LoreEntry, compile_key, substitute_macros
from liyuan.lore.rules import rules_of

__all__ = ["REGEX_KEY_TIMEOUT_S", "REGEX_TURN_BUDGET_S", "KeyHits", "LoreIndex", "RegexClock", "is_word_char"]

REGEX_KEY_TIMEOUT_S = 0.02
"""At most this long for one regex search."""
REGEX_TURN_BUDGET_S = 0.05
"""All regex searches of one turn together; the rest are skipped and reported."""


def is_word_char(ch: str) -> bool:
    """A letter or digit of an alphabetic script (Latin, Greek, Cyrillic ...), not CJK."""
    return ch.isalnum() and ord(ch) < 0x2E80


@dataclass(frozen=True)
class _Key:
    text: str
    """As matched: casefolded unless case-sensitive."""
    case_sensitive: bool
    word_start: bool
    """Needs a word boundary before it (starts with a Latin letter or digit)."""
    word_end: bool


def _occurs_as_word(key: _Key, text: str) -> bool:
    start = text.find(key.text)
    while start >= 0:
        end = start + len(key.text)
        before_ok = not key.word_start or start == 0 or not is_word_char(text[start - 1])
        after_ok = not key.word_end or end == len(text) or not is_word_char(text[end])
        if before_ok and after_ok:
            return True
        start = text.find(key.text, start + 1)
    return False


@dataclass
class RegexClock:
    """The time left for this turn's regex searches."""

    budget_s: float = REGEX_TURN_BUDGET_S
    spent_s: float = 0.0
    timeouts: list[str] = field(default_factory=list)
    """Patterns that ran out of time (counted as not found)."""
    skipped: int = 0
    """Searches not run because the turn's budget was spent."""

    def search(self, pattern: regex.Pattern[str], text: str) -> bool:
        """Whether ``pattern`` occurs in ``text`` (a timeout or a spent budget: not found, recorded)."""
        left = self.budget_s - self.spent_s
        if left <= 0:
            self.skipped += 1
            return False
        started = time.perf_counter()
        try:
            return pattern.search(text, timeout=min(REGEX_KEY_TIMEOUT_S, left)) is not None
        except TimeoutError:
            self.timeouts.append(pattern.pattern)
            return False
        finally:
            self.spent_s += time.perf_counter() - started


@dataclass
class KeyHits:
    """Where the plain keys occur: key id to the first segment holding it."""

    segments: Sequence[str]
    folded: Sequence[str]
    depth: dict[int, int] = field(default_factory=dict)
    """Substring occurrence (the whole-word check is separate)."""
    _word_depth: dict[int, int | None] = field(default_factory=dict)


def _with_names(entry: LoreEntry, user: str, char: str) -> LoreEntry:
    """The entry with its macros replaced by the names (as it was, if that would make it invalid)."""
    if not any(("{" in text or "<" in text) for text in (entry.title, entry.content, *entry.keys,
                                                          *entry.secondary_keys)):
        return entry
    def sub(text: str) -> str:
        return substitute_macros(text, char, user)
    try:
        return replace(entry, title=sub(entry.title), content=sub(entry.content), keys=tuple(map(sub, entry.keys)),
                       secondary_keys=tuple(map(sub, entry.secondary_keys)))
    except LoreError:
        return entry


class LoreIndex:
    """A book with its keys filed for scanning (see the module docstring). Immutable once built.

    ``book`` is the book as stored (macros as written); ``entries`` are its entries as a turn
    reads them, ``{{char}}`` / ``{{user}}`` replaced by ``names`` (user, character) when given.
    """

    def __init__(self, book: LoreBook, names: tuple[str, str] | None = None) -> None:
        self.book = book
        self.names = names
        self.entries: tuple[LoreEntry, ...] = book.entries if names is None else \
            tuple(_with_names(entry, *names) for entry in book.entries)
        self.keys: list[_Key] = []
        self._key_ids: dict[tuple[str, bool], int] = {}
        self._by_pair: tuple[dict[str, dict[int, dict[str, int]]], dict[str, dict[int, dict[str, int]]]] = ({}, {})
        """Folded (case-insensitive) and as-written (case-sensitive) keys by their first two characters."""
        self._single = [False, False]
        """Whether any one-character key is filed (folded, as written)."""
        self.primary_of_key: dict[int, list[int]] = {}
        """Key id to the entries that use it as a primary key (plain keys only)."""
        self.primary: list[tuple[tuple[int, str], ...]] = []
        """Each entry's plain primary keys: key id and the key as written."""
        self.secondary: list[tuple[int, ...]] = []
        self.patterns: dict[int, tuple[list[tuple[str, regex.Pattern[str]]], list[regex.Pattern[str]]]] = {}
        """Entries with ``/…/`` keys: their compiled primary (with the key as written) and secondary keys."""
        self.constant: list[int] = []
        self.depth: list[int] = []
        """Each entry's scan depth in turns."""
        for number, entry in enumerate(self.entries):
            self.depth.append(book.scan_turns if entry.scan_turns is None else entry.scan_turns)
            if not entry.enabled:
                self.primary.append(())
                self.secondary.append(())
                continue
            if entry.constant:
                self.constant.append(number)
            compiled = {key: compile_key(key) for key in (*entry.keys, *entry.secondary_keys)}
            regex_primary = [(key, found) for key in entry.keys if (found := compiled[key]) is not None]
            regex_secondary = [found for key in entry.secondary_keys if (found := compiled[key]) is not None]
            if regex_primary or regex_secondary:
                self.patterns[number] = (regex_primary, regex_secondary)
            primary = tuple((self._file(key, entry), key) for key in entry.keys if compiled[key] is None)
            for key_id, _key in primary:
                self.primary_of_key.setdefault(key_id, []).append(number)
            self.primary.append(primary)
            self.secondary.append(tuple(self._file(key, entry) for key in entry.secondary_keys
                                        if compiled[key] is None))
        self.rules = [rules_of(entry) for entry in self.entries]
        """Each entry's probability, groups, delays (:mod:`liyuan.lore.rules`)."""
        self.has_rules = any(not rules.plain for rules in self.rules)
        self.has_timers = any(rules.sticky or rules.cooldown or rules.after_match for rules in self.rules)
        self.delayed = [n for n, rules in enumerate(self.rules) if rules.recursion_level and self.entries[n].enabled]
        """Enabled entries held back until a recursion step (``delay_until_recursion``)."""
        self.orders = [entry.order for entry in self.entries]
        self.max_depth = max(self.depth, default=0)
        ranked = sorted(range(len(self.entries)), key=self.rank)
        self.by_rank: tuple[int, ...] = tuple(i for i in ranked if self.entries[i].enabled)
        """Enabled entries in activation order (the order of the index as well)."""

    def rank(self, number: int) -> tuple[int, int, int, int]:
        """Sort key: constant first, then higher priority, then higher order, then book position."""
        entry = self.entries[number]
        return (0 if entry.constant else 1, -entry.priority, -entry.order, number)

    def _file(self, key: str, entry: LoreEntry) -> int:
        text = key if entry.case_sensitive else key.casefold()
        ident = (text, entry.case_sensitive)
        found = self._key_ids.get(ident)
        if found is not None:
            return found
        key_id = len(self.keys)
        one_word = not any(ch.isspace() for ch in text)
        self.keys.append(_Key(text, entry.case_sensitive, one_word and is_word_char(text[0]),
                              one_word and is_word_char(text[-1])))
        self._key_ids[ident] = key_id
        self._single[entry.case_sensitive] |= len(text) == 1
        self._by_pair[entry.case_sensitive].setdefault(text[:2], {}).setdefault(len(text), {})[text] = key_id
        return key_id

    def scan(self, segments: Sequence[str]) -> KeyHits:
        """Every plain key that occurs in ``segments`` (newest first), with its first segment."""
        hits = KeyHits(segments, [s.casefold() for s in segments])
        depth = hits.depth
        for number, (raw, folded) in enumerate(zip(segments, hits.folded, strict=True)):
            for sensitive, text in ((False, folded), (True, raw)):
                table = self._by_pair[sensitive]
                if not table or not text:
                    continue
                if len(table) * 8 < len(text):  # few pieces filed: look for each of them (C speed)
                    present: Iterable[str] = [piece for piece in table if piece in text]
                else:  # many: take the text's own pieces (the last one is a single character)
                    pieces = {text[i:i + 2] for i in range(len(text))}
                    if self._single[sensitive]:
                        pieces.update(text)
                    present = pieces & table.keys()
                for piece in present:
                    by_length = table[piece]
                    place = text.find(piece)
                    while place >= 0:
                        for length, keys in by_length.items():
                            key_id = keys.get(text[place:place + length])
                            if key_id is not None and key_id not in depth:
                                depth[key_id] = number
                        place = text.find(piece, place + 1)
        return hits

    def found(self, hits: KeyHits, key_id: int, within: int, whole_word: bool) -> bool:
        """Whether the key occurs in the first ``within + 1`` segments (as a whole word if asked)."""
        first = hits.depth.get(key_id)
        if first is None or first > within:
            return False
        key = self.keys[key_id]
        if not whole_word or not (key.word_start or key.word_end):
            return True
        if key_id not in hits._word_depth:
            texts = hits.segments if key.case_sensitive else hits.folded
            hits._word_depth[key_id] = next(
                (n for n in range(first, len(texts)) if _occurs_as_word(key, texts[n])), None)
        word = hits._word_depth[key_id]
        return word is not None and word <= within

    def text_found(self, key_id: int, text: str, folded: str, whole_word: bool) -> bool:
        """Whether the key occurs in one extra text (recursion: activated content)."""
        key = self.keys[key_id]
        target = text if key.case_sensitive else folded
        if key.text not in target:
            return False
        return not whole_word or not (key.word_start or key.word_end) or _occurs_as_word(key, target)

    def keys_in(self, text: str) -> set[int]:
        """Key ids occurring (as substrings) in one text; a one-segment :meth:`scan`."""
        return set(self.scan([text]).depth)
