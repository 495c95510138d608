"""Which lore entries a turn activates, and what of them fits: 【相关设定】 and 【设定集索引】.

Rules, one by one (each has its test):

- Scanned text: the user's new words (depth 0), then the kept turns newest first, one
  segment per turn (user words and reply); an entry scans ``scan_turns`` turns back
  (default :data:`~liyuan.lore.model.DEFAULT_SCAN_TURNS`, the 6 verbatim turns). Each
  message is scanned as ``name: message``, as SillyTavern does, so a key that is the
  character's (or the user's) name finds that one's own messages.
- An enabled entry is active when it is ``constant``, or one of its keys occurs in its
  window and its secondary keys pass its ``logic``. A key written ``/pattern/flags`` is a
  regex (its flags decide the case); every other key is a plain word, matched as a
  substring (casefolded unless ``case_sensitive``); with ``whole_word`` a one-word key
  ending in a Latin letter or digit must not touch another one there; CJK keys and keys
  of several words match anywhere.
- Recursion (on unless the book says ``recursion_steps: 0``): the content of what was
  just activated is scanned as well, for at most ``recursion_steps`` further steps
  (capped at 10). An entry
  with ``recursive: false`` is never activated this way; one with ``prevent_recursion``
  never activates others.
- Order: constant entries first, then higher ``priority``, then higher ``order`` (as
  SillyTavern keeps its highest ``order`` under the budget), then the book's own order.
- Budget (the lore share, :func:`lore_share_chars`): 【相关设定】 takes whole entries in
  that order; the first entry that does not fit, and every one after it, is cut: listed
  in :attr:`LoreReport.cut`, never dropped silently, and its title goes first into the
  index. 【设定集索引】 lists the titles of the other enabled entries with what is left,
  at most :data:`~liyuan.lore.model.LORE_INDEX_MAX_CHARS`, cut at a title.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain

from liyuan.lore.match import KeyHits, LoreIndex, RegexClock
from liyuan.lore.model import LOGICS, LORE_INDEX_MAX_CHARS, MAX_RECURSION_STEPS, Logic, LoreEntry
from liyuan.lore.report import LoreBlocks, LoreCut, LoreHit, LoreReport
from liyuan.lore.rules import NO_PLACE, TurnPlace, choose_in_groups, roll
from liyuan.text import utf16_len

__all__ = [
    "DEFAULT_LORE_SHARE",
    "activate_entries",
    "fit_lore",
    "lore_for_turn",
    "lore_share_chars",
    "turn_segments",
]

DEFAULT_LORE_SHARE = 0.4
"""The lore blocks' share of the per-turn envelope (``MemoryConfig.budget_chars``, 4300):
1720 characters. More than the resident summary's own cap (1200, 28 %), because lore is the
layer that is never compressed; less than half, so the in-session summary and the ledger
keep most of the envelope. The resident summary yields to what lore takes, as it yields
to the other blocks."""


def lore_share_chars(budget_chars: int, share: float = DEFAULT_LORE_SHARE) -> int:
    """Characters 【相关设定】 and 【设定集索引】 may take together this turn."""
    return max(0, int(budget_chars * share))


def turn_segments(items: Sequence[tuple[str, str]], new_words: str, turns: int,
                  names: tuple[str, str] = ("", "")) -> list[str]:
    """The scanned text, newest first: the new words, then up to ``turns`` kept turns.

    Args:
        items: The kept history as ``(role, text)``, oldest first, without the new words.
        new_words: The user's message this turn answers.
        turns: How many turns back to go (a turn starts at a user item).
        names: The user's and the character's name: each message is scanned as
            ``name: message`` (an empty name: the message alone).
    """
    def said(role: str, text: str) -> str:
        name = names[0] if role == "user" else names[1]
        return f"{name}: {text}" if name and text else text

    segments = [said("user", new_words)]
    current: list[str] = []
    for role, text in reversed(items):
        if len(segments) > turns:
            break
        current.insert(0, said(role, text))
        if role == "user":
            segments.append("\n".join(current))
            current = []
    if current and len(segments) <= turns:
        segments.append("\n".join(current))  # an opening reply before the first user turn
    return segments


def _logic_passes(logic: Logic, present: Sequence[bool]) -> bool:
    if not present:
        return True
    if logic == "and_any":
        return any(present)
    if logic == "and_all":
        return all(present)
    if logic == "not_any":
        return not any(present)
    return not all(present)


def _where(depth: int) -> str:
    return "新消息" if depth == 0 else f"前第 {depth} 轮"


class _Activation:
    def __init__(self, index: LoreIndex, segments: Sequence[str], clock: RegexClock) -> None:
        self.index = index
        self.segments = segments
        self.clock = clock
        self.hits: KeyHits = index.scan(segments)
        self.found: dict[int, LoreHit] = {}
        self.lore_texts: list[tuple[str, str]] = []

    def check(self, number: int, step: int) -> LoreHit | None:
        """The entry's hit when a primary key is found and its secondary keys pass its logic."""
        index, entry, hits = self.index, self.index.entries[number], self.hits
        within = index.depth[number]
        regex_primary = index.patterns.get(number, ([], []))[0]
        texts = self._texts(number, step) if number in index.patterns else []
        why = None
        for key_id, key in index.primary[number]:
            first = hits.depth.get(key_id)
            if index.found(hits, key_id, within, entry.whole_word):
                why = f"关键词「{key}」（{_where(first or 0)}）"
                break
            if step and any(index.text_found(key_id, t, f, entry.whole_word) for t, f in self.lore_texts):
                why = f"递归第 {step} 步：关键词「{key}」在已激活的设定里"
                break
        if why is None:
            written = next((k for k, p in regex_primary if any(self.clock.search(p, t) for t in texts)), None)
            if written is None:
                return None
            why = f"正则「{written}」" if not step else f"递归第 {step} 步：正则「{written}」"
        present = self.secondary(number, texts)
        if not _logic_passes(entry.logic, present):
            return None
        if present:
            why += f"，次要关键词{LOGICS[entry.logic]}"
        return LoreHit(entry.title, why, step)

    def _texts(self, number: int, step: int) -> list[str]:
        within = self.index.depth[number]
        return ["\n".join(self.segments[:within + 1])] + ([t for t, _ in self.lore_texts] if step else [])

    def secondary(self, number: int, texts: Sequence[str]) -> list[bool]:
        """Whether each secondary key (plain, then regex) is present."""
        index, entry = self.index, self.index.entries[number]
        within = index.depth[number]
        present = [index.found(self.hits, k, within, entry.whole_word)
                   or any(index.text_found(k, t, f, entry.whole_word) for t, f in self.lore_texts)
                   for k in index.secondary[number]]
        return present + [any(self.clock.search(p, t) for t in texts) for p in index.patterns.get(number, ([], []))[1]]

    def score(self, number: int, step: int) -> int:
        """SillyTavern's group score: primary keys found, plus the secondary ones under a positive logic."""
        index, entry = self.index, self.index.entries[number]
        within, texts = index.depth[number], self._texts(number, step)
        whole = entry.whole_word
        primary = sum(1 for key_id, _ in index.primary[number] if index.found(self.hits, key_id, within, whole)
                      or any(index.text_found(key_id, t, f, whole) for t, f in self.lore_texts))
        patterns = index.patterns.get(number, ([], []))[0]
        primary += sum(1 for _, p in patterns if any(self.clock.search(p, t) for t in texts))
        present = self.secondary(number, texts)
        if present and (entry.logic == "and_any" or (entry.logic == "and_all" and all(present))):
            return primary + sum(present)
        return primary

    def add(self, numbers: Sequence[int]) -> None:
        for number in numbers:
            entry: LoreEntry = self.index.entries[number]
            if not entry.prevent_recursion and entry.content.strip():
                self.lore_texts.append((entry.content, entry.content.casefold()))


# --8<-- [start:activate]
def activate_entries(index: LoreIndex, segments: Sequence[str], clock: RegexClock | None = None,
                     place: TurnPlace = NO_PLACE, dropped: list[tuple[str, str]] | None = None,
                     sticky: frozenset[int] = frozenset(), cooling: frozenset[int] = frozenset(),
                     ) -> list[tuple[int, LoreHit]]:
    """The active entries (book positions and why), constant first, then by rank.

    Args:
        index: The book, indexed.
        segments: :func:`turn_segments`.
        clock: The regex time budget of this turn (a fresh one by default).
        place: Where the turn is (the seed of its rolls, the counts :mod:`~liyuan.lore.rules` reads).
        dropped: Receives ``(title, why)`` for each entry that matched but did not come in
            (its probability, its inclusion group).
        sticky: Entries still in from an earlier turn (``sticky``): in whatever their keys say.
        cooling: Entries on ``cooldown``: out unless sticky (:mod:`liyuan.lore.timed`).
    """
    run = _Activation(index, segments, clock or RegexClock())
    rules = index.rules
    levels = sorted({rules[number].recursion_level for number in index.delayed})
    level = levels.pop(0) if levels else 0
    failed: set[int] = set(cooling - sticky)
    candidates: set[int] = set()
    for key_id in run.hits.depth:
        candidates.update(index.primary_of_key.get(key_id, ()))
    candidates.update(index.patterns)
    step = 0
    while True:
        hits: dict[int, LoreHit] = {}
        if step == 0:
            hits |= {n: LoreHit(index.entries[n].title, "常驻") for n in index.constant
                     if rules[n].allowed(place, 0) and n not in failed}
            hits |= {n: LoreHit(index.entries[n].title, "粘住（sticky，前几轮激活的还没到期）") for n in sticky
                     if index.entries[n].enabled}
        for number in sorted(candidates - run.found.keys() - failed - hits.keys()):
            if (step and not index.entries[number].recursive) or not rules[number].allowed(place, step, level):
                continue
            hit = run.check(number, step)
            if hit is not None:
                hits[number] = hit
        new = sorted(hits, key=index.rank)
        if index.has_rules:
            held = [n for n in new if n in sticky]
            taken = {group for number in (*run.found, *held) for group in rules[number].groups}
            def score(number: int, at: int = step) -> int:
                return run.score(number, at)
            new, fallen = choose_in_groups([n for n in new if n not in sticky], rules, index.orders, taken, place,
                                           score)
            for number, why in fallen.items():
                failed.add(number)
                if dropped is not None:
                    dropped.append((index.entries[number].title, why))
            for number in [n for n in new if rules[n].probability < 100]:
                if roll(place, number, "probability") >= rules[number].probability:
                    new.remove(number)
                    failed.add(number)
                    if dropped is not None:
                        dropped.append((index.entries[number].title, f"概率 {rules[number].probability:g}% 没中"))
            new = sorted([*held, *new], key=index.rank)
        run.found |= {number: hits[number] for number in new}
        step += 1
        before = len(run.lore_texts)
        run.add(new)
        if len(run.lore_texts) == before:  # nothing new to scan: open the next delayed level, if any
            if not levels:
                break
            level = levels.pop(0)
        if step > min(index.book.recursion_steps, MAX_RECURSION_STEPS):
            break
        candidates = {n for n in index.delayed if n not in run.found and n not in failed}
        for text, _ in run.lore_texts[before:]:
            for key_id in index.keys_in(text):
                candidates.update(index.primary_of_key.get(key_id, ()))
        candidates.update(index.patterns)
    return sorted(run.found.items(), key=lambda item: index.rank(item[0]))
# --8<-- [end:activate]


def _block(entry: LoreEntry) -> str:
    return f"「{entry.title.strip()}」\n{entry.content.strip()}"


def fit_lore(index: LoreIndex, active: Sequence[tuple[int, LoreHit]], share_chars: int,
             clock: RegexClock | None = None, dropped: Sequence[tuple[str, str]] = ()) -> LoreBlocks:
    """Fill 【相关设定】 and then 【设定集索引】 within ``share_chars`` (see the module docstring)."""
    # --8<-- [start:fit_lore]
    parts: list[str] = []
    used = 0
    included: list[int] = []
    cut: list[LoreCut] = []
    cut_numbers: list[int] = []
    for number, _hit in active:
        entry = index.entries[number]
        if not entry.content.strip():
            continue  # an empty content adds nothing, as the card spec says
        block = _block(entry)
        cost = utf16_len(block) + (2 if parts else 0)  # the blank line between two entries
        if cut or used + cost > share_chars:
            cut.append(LoreCut(entry.title, utf16_len(block), share_chars - used))  # cut at an entry, reported
            cut_numbers.append(number)
            continue
        parts.append(block)
        used += cost
        included.append(number)
    # The index: cut entries first (they matched), then every other enabled title, by rank.
    room = min(LORE_INDEX_MAX_CHARS, share_chars - used - (2 if parts else 0))
    shown = {*included, *cut_numbers}
    lines: list[str] = []
    index_used = 0
    for number in chain(cut_numbers, (n for n in index.by_rank if n not in shown)):
        line = f"- {index.entries[number].title.strip()}"
        cost = utf16_len(line) + (1 if lines else 0)
        if index_used + cost > room:
            break
        lines.append(line)
        index_used += cost
    # --8<-- [end:fit_lore]
    listed = len(lines)
    report = LoreReport(
        activated=tuple(hit for _, hit in active), included=tuple(index.entries[n].title for n in included),
        cut=tuple(cut), share_chars=share_chars, text_chars=used, index_chars=index_used, index_titles=listed,
        index_left_out=max(0, len(index.by_rank) - len(included) - listed), entries=len(index.entries),
        regex_timeouts=tuple(clock.timeouts) if clock else (), regex_skipped=clock.skipped if clock else 0,
        dropped=tuple(dropped))
    return LoreBlocks("\n\n".join(parts), "\n".join(lines), report)


def lore_for_turn(index: LoreIndex, items: Sequence[tuple[str, str]], new_words: str, share_chars: int,
                  names: tuple[str, str] = ("", ""), place: TurnPlace = NO_PLACE,
                  timers: tuple[frozenset[int], frozenset[int]] = (frozenset(), frozenset())) -> LoreBlocks:
    """Activate and fit in one call: what a turn's assembly uses.

    Args:
        index: The card's lore book, indexed.
        items: The kept history as ``(role, text)``, oldest first, without the new words.
        new_words: The user's message.
        share_chars: :func:`lore_share_chars` of the turn's envelope.
        names: The user's and the character's name, put before their messages (:func:`turn_segments`).
        place: Where the turn is on its branch (:class:`~liyuan.lore.rules.TurnPlace`).
        timers: The entries sticky and cooling at this turn (:func:`liyuan.lore.timed.timers_for_turn`).
    """
    clock = RegexClock()
    segments = turn_segments(items, new_words, index.max_depth, names)
    dropped: list[tuple[str, str]] = []
    active = activate_entries(index, segments, clock, place, dropped, *timers)
    return fit_lore(index, active, share_chars, clock, dropped)


def replay_turn(index: LoreIndex, names: tuple[str, str]) -> Callable[..., list[int]]:
    """One earlier turn's activation as :func:`liyuan.lore.timed.timers_for_turn` plays it again."""
    def play(items: Sequence[tuple[str, str]], new_words: str, place: TurnPlace, sticky: frozenset[int],
             cooling: frozenset[int]) -> list[int]:
        segments = turn_segments(items, new_words, index.max_depth, names)
        return [number for number, _ in activate_entries(index, segments, RegexClock(), place, None, sticky, cooling)]
    return play
