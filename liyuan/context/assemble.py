"""Context assembly: the messages sent to the model for one role-play turn.

Invariants of :func:`build_context`:

- At most one leading user message carries the summaries; it opens with
  :data:`SUMMARY_OPENING`, then the in-session summary, then the resident summary.
- Entries covered by the active summary do not appear at all (they are sliced away by
  :func:`liyuan.story.history.rebuild_history`, not subtracted).
- The summary message stands alone, never merged with the kept history: it is one
  message a reader (and the model) can point at. After it, same-role neighbours are
  merged with a blank line, so the kept history and the tail alternate roles.
- The last message is the user's: the tail holds the injection block and, last of all,
  the user's own words. The list never ends with an assistant message (no prefill).
- Each block heading appears once at most: the same heading inside story text, a
  summary or a recalled chunk is made inert (:func:`inert_block_headings`), so the app's
  model sees one 【前情提要】 opening and one 【世界状态】 block.

:func:`prepare_turn` is the one way to assemble a turn: it also fits the resident summary
to the budget it shares with the in-session summary, ledger, roster and lore, reading the
branch's history once, and keeps the turn's record. :func:`build_context` is its last step
alone (no budget), for tests and for the docs that show the order of the messages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from liyuan.context.budget import (
    RESIDENT_MIN_USEFUL_CHARS,
    fit_resident_summary,
    other_chars_for,
    resident_allowance,
)
from liyuan.context.inputs import AppBlocks, TurnSettings
from liyuan.context.pins import Pin, lore_left, pins_text
from liyuan.context.record import (
    BlockRecord,
    BudgetCut,
    HistoryCut,
    PinRecord,
    TurnRecord,
    WithheldRecord,
    block,
    estimate,
)
from liyuan.context.window import history_window
from liyuan.lore.activate import lore_for_turn, lore_share_chars, replay_turn
from liyuan.lore.match import LoreIndex
from liyuan.lore.report import LoreReport
from liyuan.lore.rules import NO_PLACE, TurnPlace
from liyuan.lore.timed import Said, timers_for_turn, turn_place
from liyuan.model import ChatMessage
from liyuan.session.entries import Entry, is_message
from liyuan.story.history import ActiveSummary, History, HistoryItem, history_of_tail, rebuild_history, story_tail
from liyuan.story.stale import REWRITE_UNTIL_KEY, rewrite_goal, stale_summaries
from liyuan.text import utf16_len

__all__ = ["BLOCK_NAMES", "SUMMARY_OPENING", "Injection", "PreparedTurn", "build_context",
           "inert_block_headings", "prepare_turn"]

SUMMARY_OPENING = "【前情提要】以下是更早剧情的接力摘要，是既定事实："
"""Fixed first sentence of the summary message; the system prompt defines the tag."""

BLOCK_NAMES = ("前情提要", "世界状态", "登场名录", "相关设定", "设定集索引", "剧情记忆")
"""The names of the blocks this module writes as ``【name】``."""
_BLOCK_HEADING_RE = re.compile(r"【(\s*(?:" + "|".join(BLOCK_NAMES) + r")\s*)】")


def inert_block_headings(text: str) -> str:
    """``text`` with every ``【世界状态】``-style heading of ours written ``［世界状态］``.

    Story text, summaries and recalled chunks are material: a message or a chunk that
    holds ``【世界状态】`` on a line of its own, or starts with the 【前情提要】 opening,
    must not read as a second block. Other 【…】 (a chunk's title, an aside) and text
    without such a heading come back unchanged.
    """
    if "【" not in text:
        return text
    return _BLOCK_HEADING_RE.sub(lambda m: f"［{m.group(1)}］", text)


@dataclass(frozen=True)
class Injection:
    """The per-turn data block placed right before the user's words.

    Blocks appear in the original's order: 【世界状态】, 【登场名录】, 【相关设定】,
    【设定集索引】, 【剧情记忆】, then any ``extra`` blocks (author's end note, language
    line ...), each separated by a blank line. Empty blocks are left out. The texts of the
    first five are material: a block heading inside them is made inert (:func:`inert_block_headings`);
    ``extra`` blocks are the caller's own and sent as given.
    """

    state_text: str
    """The ledger as :func:`liyuan.session.state.format_state` writes it."""
    roster: str = ""
    """The 【登场名录】 index (:func:`liyuan.session.state.format_roster`)."""
    lore_index: str = ""
    """Titles of the lore book, already cut to its budget."""
    recall_lines: Sequence[str] = ()
    """Vector-memory hits, one ``- ...`` line each."""
    extra: Sequence[str] = ()
    """Further complete blocks, appended in order."""
    lore_text: str = ""
    """【相关设定】: the full text of the activated lore entries, already fitted."""

    def blocks(self) -> list[tuple[str, str]]:
        """``(kind, text)`` of each non-empty block, in order (kinds of :data:`~liyuan.context.record.BLOCK_TITLES`)."""
        blocks: list[tuple[str, str]] = []
        if self.state_text.strip():
            blocks.append(("state", f"【世界状态】\n{inert_block_headings(self.state_text.strip())}"))
        if self.roster.strip():
            blocks.append(("roster", f"【登场名录】\n{inert_block_headings(self.roster.strip())}"))
        # --8<-- [start:lore_blocks]
        if self.lore_text.strip():  # lore is material too: a heading inside an entry is made inert
            blocks.append(("lore", f"【相关设定】\n{inert_block_headings(self.lore_text.strip())}"))
        if self.lore_index.strip():
            blocks.append(("lore_index", f"【设定集索引】\n{inert_block_headings(self.lore_index.strip())}"))
        # --8<-- [end:lore_blocks]
        # --8<-- [start:recall_block]
        recall = [inert_block_headings(line.strip()) for line in self.recall_lines if line.strip()]
        if recall:  # no hits, no block: an empty 【剧情记忆】 would only invite invention
            blocks.append(("recall", "【剧情记忆】\n" + "\n".join(recall)))
        # --8<-- [end:recall_block]
        blocks.extend(("extra", block.strip()) for block in self.extra if block.strip())
        return blocks

    def render(self) -> str:
        """The injection text; empty when every block is empty."""
        return "\n\n".join(text for _kind, text in self.blocks())


def _merge(messages: list[ChatMessage]) -> list[ChatMessage]:
    merged: list[ChatMessage] = []
    for msg in messages:
        if merged and merged[-1].role == msg.role:
            merged[-1] = ChatMessage(msg.role, f"{merged[-1].content}\n\n{msg.content}")
        else:
            merged.append(msg)
    return merged


# --8<-- [start:build_context]
def _assemble(history: History, user_text: str, resident_summary: str | None,
              injection: Injection | str) -> list[ChatMessage]:
    # Story text and summaries are material: no block heading of ours survives in them.
    items = [HistoryItem(item.role, inert_block_headings(item.text)) for item in history.items]
    if user_text.strip():
        items.append(HistoryItem("user", inert_block_headings(user_text.strip())))
    # The last user item becomes the tail so the user's words come after the data block.
    tail_user = items.pop().text if items and items[-1].role == "user" else ""
    summaries = [inert_block_headings(s.strip()) for s in (history.summary, resident_summary) if s and s.strip()]
    body = [ChatMessage(item.role, item.text) for item in items]
    block = injection.render() if isinstance(injection, Injection) else injection.strip()
    tail = "\n\n".join(part for part in (block, tail_user) if part)
    if tail:
        body.append(ChatMessage("user", tail))
    body = _merge(body)
    while body and body[-1].role == "assistant":
        body.pop()  # no prefill: the model must never be asked to continue its own reply
    if not summaries or not body:
        return body
    return [ChatMessage("user", "\n\n".join([SUMMARY_OPENING, *summaries])), *body]
# --8<-- [end:build_context]


def build_context(
    branch: Sequence[Entry],
    user_text: str,
    *,
    resident_summary: str | None = None,
    injection: Injection | str = "",
) -> list[ChatMessage]:
    """Assemble the messages for one turn (system prompt not included).

    The assembly step alone: the resident summary is sent as given, nothing is budgeted
    and nothing recorded. A turn is assembled by :func:`prepare_turn`, which fits the
    resident summary and the lore first; this step is what it ends with.

    Args:
        branch: The persisted branch, root to leaf.
        user_text: The new user message; empty on a regenerate, where the branch
            already ends with the user's message.
        resident_summary: The card's cross-session summary, already fitted, if any.
        injection: The data block for the tail (an :class:`Injection` or ready text).

    Returns:
        Summary message (if any summary exists), kept history, then the tail.
    """
    return _assemble(rebuild_history(branch), user_text, resident_summary, injection)


@dataclass(frozen=True)
class PreparedTurn:
    """One assembled turn and what went into it (see :func:`prepare_turn`)."""

    messages: list[ChatMessage]
    """The messages to send (system prompt not included)."""
    summary: str | None
    """The branch's in-session relay summary, if any."""
    resident: str | None
    """The resident summary as sent: fitted to the envelope, or ``None`` when dropped."""
    injection: Injection
    """The tail's data block."""
    record: TurnRecord
    """What was sent, block by block, with sizes, sources and the budget's cuts."""
    lore: LoreReport | None = None
    """What the lore book did this turn (activated, included, cut), when the card has one."""


def _resident_cut(stored: str | None, sent: str | None, other: int, budget_chars: int) -> BudgetCut | None:
    if not stored or not stored.strip() or sent == stored:
        return None  # nothing stored, or sent whole
    allowance = resident_allowance(other, budget_chars)
    before = len(stored.strip())
    if sent is None:
        return BudgetCut("dropped", f"其他块占 {other} 字，余量 {allowance} 字不到 {RESIDENT_MIN_USEFUL_CHARS} 字，"
                                    "常驻摘要整段不送", before)
    return BudgetCut("trimmed", f"余量 {allowance} 字（共用 {budget_chars} 字、其他块占 {other} 字），"
                                f"从 {before} 字按段落截到 {len(sent)} 字", before)


def _lore_cut(lore: LoreReport | None) -> BudgetCut | None:
    if lore is None or not lore.cut:
        return None
    titles = "、".join(f"「{cut.title}」" for cut in lore.cut)
    before = lore.text_chars + sum(cut.chars for cut in lore.cut)
    return BudgetCut("trimmed", f"设定集份额 {lore.share_chars} 字，已激活的 {titles} 放不下，"
                                "整条截掉、只在索引里列标题", before)


def _record(view: Sequence[Entry], active: ActiveSummary | None, history: History, user_text: str,
            resident_stored: str | None, resident: str | None, other: int, injection: Injection,
            messages: Sequence[ChatMessage], budget_chars: int, lore: LoreReport | None = None, skip: int = 0,
            history_cut: HistoryCut | None = None, pins: Sequence[Pin] = ()) -> TurnRecord:
    live = (view[active.cut:] if active else view)[skip:]
    kept = [e for e in live if is_message(e) and e.role in ("user", "assistant") and e.text.strip()]
    tail: list[Entry] = []
    if not user_text.strip():  # the user's words are already on the branch: its last user run is the tail
        while kept and kept[-1].role == "user":
            tail.insert(0, kept.pop())
    items = list(history.items)
    tail_text = user_text.strip()
    if not tail_text and items and items[-1].role == "user":
        tail_text = items.pop().text
    blocks: list[BlockRecord] = []
    if history.summary and history.summary.strip():
        blocks.append(block("summary", history.summary.strip(), [f"entry:{view[active.index].id}"] if active else []))
    cut = _resident_cut(resident_stored, resident, other, budget_chars)
    if resident or cut is not None:
        blocks.append(block("resident", (resident or "").strip(), cut=cut))
    if items:
        # Each kept turn is a message of its own: sizes per turn (tokens remembered, the same
        # turns come back turn after turn), added up.
        chars = sum(len(i.text) for i in items)
        cut_turns = None if history_cut is None else \
            BudgetCut("trimmed", history_cut.reason(), chars + history_cut.dropped_chars)
        blocks.append(BlockRecord("history", chars, sum(estimate(i.text) for i in items),
                                  tuple(f"entry:{e.id}" for e in kept), cut_turns))
    pinned = [f"pin:{p.id}" for p in pins]
    blocks += [block(kind, text, pinned if kind == "lore" else (), cut=_lore_cut(lore) if kind == "lore" else None)
               for kind, text in injection.blocks()]
    if tail_text:
        blocks.append(block("user", tail_text, [f"entry:{e.id}" for e in tail]))
    blocks.append(_framing(history, resident, items, injection, tail_text, messages))
    return TurnRecord(tuple(blocks), len(messages), sum(b.chars for b in blocks), sum(b.tokens for b in blocks),
                      budget_chars, history_cut, pins=tuple(PinRecord(p.id, p.scope, len(p.text)) for p in pins))


_SEPARATOR = "\n\n"


def _framing(history: History, resident: str | None, items: Sequence[HistoryItem], injection: Injection,
             tail_text: str, messages: Sequence[ChatMessage]) -> BlockRecord:
    """What :func:`_assemble` adds between the blocks: the opening sentence and the blank lines.

    Every message is its parts joined by :data:`_SEPARATOR` (the summary message: the opening
    and each summary; a merged message: its turns; the tail: the data blocks and the words),
    so ``parts - messages`` separators were written.
    """
    summaries = sum(1 for s in (history.summary, resident) if s and s.strip())
    opening = summaries > 0 and bool(messages) and messages[0].content.startswith(SUMMARY_OPENING)
    parts = (1 + summaries if opening else 0) + len(items) + len(injection.blocks()) + (1 if tail_text else 0)
    separators = max(parts - len(messages), 0)
    chars = (len(SUMMARY_OPENING) if opening else 0) + separators * len(_SEPARATOR)
    tokens = (estimate(SUMMARY_OPENING) if opening else 0) + separators * estimate(_SEPARATOR)
    return BlockRecord("framing", chars, tokens)


def _lore_place(branch: Sequence[Entry], user_text: str, lore: LoreIndex,
                names: tuple[str, str]) -> tuple[TurnPlace, tuple[frozenset[int], frozenset[int]]]:
    """Where a turn stands on its branch (the seed of the lore rolls: the entry it answers after,
    the same for a preview, the turn and its reroll) and the lore timers running there.
    A book without such rules costs no walk of the branch."""
    if not (lore.has_rules or lore.has_timers):
        return NO_PLACE, (frozenset(), frozenset())
    said: list[Said] = [(e.id, e.parent_id, e.role or "", e.text) for e in branch
                        if e.type == "message" and e.role in ("user", "assistant")]
    new = bool(user_text.strip())
    anchor = branch[-1].id if branch else ""
    if not new and said and said[-1][2] == "user":
        anchor = said[-1][1] or ""
        said = said[:-1]
    place = turn_place(said, True, anchor)
    timers = timers_for_turn(lore, said, names, place.messages, replay_turn(lore, names))
    return place, timers


def prepare_turn(
    branch: Sequence[Entry],
    user_text: str,
    settings: TurnSettings | None = None,
    *,
    blocks: AppBlocks,
    resident_summary: str | None = None,
    recall_lines: Sequence[str] = (),
    lore: LoreIndex | None = None,
    pins: Sequence[Pin] = (),
) -> PreparedTurn:
    """Assemble one role-play turn, resident summary fitted to the shared budget.

    The one way to assemble a turn (:class:`liyuan.Chat` calls it): reads the branch's
    history once; the in-session summary, the ledger text, the roster and the lore take
    their share of the envelope first (:func:`liyuan.context.budget.other_chars_for`), and
    the resident summary gets what is left
    (:func:`liyuan.context.budget.fit_resident_summary`): cut at a paragraph, or dropped.

    Args:
        branch: The persisted branch, root to leaf.
        user_text: The new user message (empty on a regenerate).
        settings: The names, the envelope and its lore share, the history bound
            (:class:`~liyuan.context.inputs.TurnSettings`; default: the defaults, no names).
        blocks: The ledger, roster, lore index and further blocks the app gives
            (:class:`~liyuan.context.inputs.AppBlocks`).
        resident_summary: The card's resident summary as stored, unfitted.
        recall_lines: Vector-memory hits, one ``- ...`` line each.
        lore: The card's lore book, indexed: the kept turns and the new words activate its
            entries (【相关设定】) and its titles fill 【设定集索引】, within the lore share of
            the envelope. A lore index given as text replaces the book's index. What lore
            sends counts into the envelope before the resident summary.
        pins: Pinned facts (:mod:`liyuan.context.pins`): sent whole, first in 【相关设定】, out
            of the lore share before the book's entries; the record's ``pins`` lists them.
    """
    settings = settings or TurnSettings()
    names, budget_chars = settings.names, settings.budget_chars
    state_text, roster, lore_index = blocks.state_text, blocks.roster, blocks.lore_index
    view, active = story_tail(branch)
    skip, history_cut = history_window(view[active.cut:] if active else view, settings.history_max_chars)
    history = history_of_tail(view, active, skip)
    pinned = pins_text(pins)
    lore_text, report = "", None
    if lore is not None:
        items = [(item.role, item.text) for item in history.items]
        new_words = user_text.strip()
        if not new_words and items and items[-1][0] == "user":
            new_words = items.pop()[1]
        place, timers = _lore_place(branch, user_text, lore, names)
        share = lore_left(lore_share_chars(budget_chars, settings.lore_share), pinned)
        fitted = lore_for_turn(lore, items, new_words, share, names, place, timers)
        lore_text, report = fitted.text, fitted.report
        lore_index = lore_index if lore_index.strip() else fitted.index
    lore_text = "\n\n".join(part for part in (pinned, lore_text) if part)
    other = other_chars_for(history.summary, state_text, roster) + utf16_len(lore_text) + utf16_len(lore_index)
    resident = fit_resident_summary(resident_summary, other, budget_chars)
    injection = Injection(state_text=state_text, roster=roster, lore_index=lore_index,
                          recall_lines=tuple(recall_lines), extra=tuple(blocks.extra), lore_text=lore_text)
    messages = _assemble(history, user_text, resident, injection)
    record = _record(view, active, history, user_text, resident_summary, resident, other, injection, messages,
                     budget_chars, report, skip, history_cut, pins)
    record = replace(record, withheld=withheld_record(branch, view, active))
    return PreparedTurn(messages, history.summary, resident, injection, record, report)



def withheld_record(branch: Sequence[Entry], view: Sequence[Entry],
                    active: ActiveSummary | None) -> WithheldRecord | None:
    """What an edit or deletion keeps out of this turn (``turn.record.withheld``): the stale
    summaries, the revised messages, how far the relay's rewrite has still to go."""
    stale = stale_summaries(branch)
    live = view[active.cut:] if active else view
    goal = rewrite_goal(branch, live, view[active.index].data.get(REWRITE_UNTIL_KEY) if active else None)
    if not stale and goal is None:
        return None
    revised = dict.fromkeys(target for item in stale.values() for target in item.targets)
    return WithheldRecord(tuple(f"entry:{key}" for key in stale), tuple(f"entry:{key}" for key in revised),
                          f"entry:{live[goal].id}" if goal is not None else None)
