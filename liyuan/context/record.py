"""The record of one assembled turn: what was sent, block by block, and what the budget did.

Invariants:

- A :class:`TurnRecord` lists every block the turn could carry, in the order the model
  reads them (the in-session summary and the resident summary in the 【前情提要】 message,
  the kept turns, then the tail's data blocks and the user's words); a block that was
  not sent is still listed when the budget dropped it, with the reason.
- Sizes are measured on the text as sent: characters (``len``) and estimated tokens
  (:func:`liyuan.tokens.estimate_tokens`); the record never holds the text itself, so it
  is small enough to keep for every turn.
- The blocks cover the whole turn: what the assembly adds between them (the 【前情提要】
  opening sentence, the blank lines that join blocks and merged messages) is a block of its
  own, ``framing``, so a turn's ``chars`` and ``tokens`` are exactly the sums of its blocks'.
- Sources name where a block came from: ``entry:<id>`` (a session entry: the summary
  entry, the kept messages, the ledger snapshot), ``chunk:<id>`` (a vector chunk),
  ``file:<path>`` (a memory file, relative to the card's memory folder).
- The recall trace (:class:`RecallRecord`, issue 36) says, for every hit in 【剧情记忆】,
  which list found it (keyword / embedding), its rank in each and the fused score, so a
  list that never gets a place is visible on the first turn.
- :meth:`TurnRecord.to_json` is the stable JSON form (``format`` names its version);
  block kinds are open strings, so a new block (say a lore layer's 【相关设定】) adds a
  kind and its title to :data:`BLOCK_TITLES` and one :class:`BlockRecord` per turn,
  and older readers still read the rest. A field added to the form bumps
  :data:`RECORD_FORMAT` and is listed on the site's reference page.

The JSON form, field by field (:meth:`TurnRecord.to_json`, a ``dict`` ready for ``json.dumps``):

- ``format``: :data:`RECORD_FORMAT`, ``liyuan-turn-record/<version>``.
- ``messages``: how many messages were sent (the app's system prompt not counted).
- ``chars``, ``tokens``: the turn's size; exactly the sums of the blocks' ``chars`` and ``tokens``.
- ``budget_chars``: the envelope the resident summary shares (4300 by default).
- ``blocks``: in reading order, each with ``kind`` (a key of :data:`BLOCK_TITLES`), ``title``,
  ``sent`` (whether any of it reached the model), ``chars``, ``tokens``, ``sources`` (a list of
  ``entry:``, ``chunk:``, ``file:`` names; empty where the block has none) and ``budget``
  (``null``, or ``action`` ``trimmed``/``dropped``, ``reason``, ``before_chars``).
- ``history_cut`` (only when turns were left out): ``dropped_turns``, ``dropped_chars``,
  ``kept_turns``, ``limit_chars`` (:class:`HistoryCut`).
- ``recall``: one entry per 【剧情记忆】 hit, in the block's order: ``chunk``, ``store``, ``lists``
  (which lists found it: ``keyword``, ``embedding``), ``keyword_rank``, ``embedding_rank`` (1 = first,
  ``null``: not found by that list), ``score`` (the fused score), ``reserved`` (:class:`RecallRecord`).
- ``pins``: one entry per pinned fact the turn carried, in the order sent (first in 【相关设定】):
  ``id``, ``scope`` (``card`` or ``chat``), ``chars`` (:class:`PinRecord`); the 【相关设定】
  block's ``sources`` name them first as ``pin:<id>``.
- ``withheld`` (only while an edit or deletion of a covered message keeps memory out):
  ``summaries`` (``entry:`` names of the stale summaries left out), ``revised`` (the edited or
  deleted messages that made them stale), ``rewrite_until`` (``entry:`` name of the furthest
  anchor the relay's rewrite has still to reach, or ``null``), ``resident`` (``file:`` name of the
  resident summary when a turn held it back until the card merges the edit, or ``null``)
  (:class:`WithheldRecord`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from liyuan.tokens import estimate_tokens

__all__ = ["BLOCK_TITLES", "ESTIMATES_KEPT", "RECORD_FORMAT", "BlockRecord", "BudgetCut", "HistoryCut", "PinRecord",
           "RecallRecord", "TurnRecord", "WithheldRecord", "block", "estimate"]

RECORD_FORMAT = "liyuan-turn-record/6"
"""The ``format`` of :meth:`TurnRecord.to_json`; a reader refuses a version it does not know.

Versions (each adds to the one before; the site's reference page lists every field):

- ``/1``: totals and blocks; ``chars`` counted the separators no block held.
- ``/2``: the ``framing`` block, so ``chars`` and ``tokens`` are the sums of the blocks'.
- ``/3``: ``history_cut``, present only when the verbatim history's bound
  (``MemoryConfig.history_max_chars``) left the oldest turns out.
- ``/4``: ``recall``, the recall trace; the 【剧情记忆】 block's ``sources`` name its chunks.
- ``/5``: ``pins``, the pinned facts the turn carried; the 【相关设定】 block's ``sources`` name them.
- ``/6``: ``withheld``, present only while an edit or deletion keeps summaries out of the
  turn (issue 38).
"""

BLOCK_TITLES: dict[str, str] = {
    "summary": "本局摘要（【前情提要】）",
    "resident": "往局常驻摘要（【前情提要】）",
    "history": "保留的原文轮次",
    "state": "【世界状态】",
    "roster": "【登场名录】",
    "lore": "【相关设定】",
    "lore_index": "【设定集索引】",
    "recall": "【剧情记忆】",
    "extra": "附加块",
    "user": "用户这一轮的话",
    "framing": "开头句与分隔（【前情提要】开头句、块与块之间的空行）",
}
"""Block kind to its Chinese title, in the order the model reads them."""


@dataclass(frozen=True, slots=True)
class BudgetCut:
    """What the shared budget did to a block."""

    action: Literal["trimmed", "dropped"]
    """``trimmed``: cut at a paragraph to fit; ``dropped``: not sent at all."""
    reason: str
    """One Chinese sentence with the numbers (the allowance, the sizes)."""
    before_chars: int
    """The block's size before the budget touched it."""


@dataclass(frozen=True, slots=True)
class BlockRecord:
    """One block of a turn."""

    kind: str
    """A key of :data:`BLOCK_TITLES` (or a kind a later layer adds)."""
    chars: int
    """Characters as sent (0 when dropped)."""
    tokens: int
    """Estimated tokens as sent."""
    sources: tuple[str, ...] = ()
    """``entry:<id>``, ``chunk:<id>`` or ``file:<path>``, in the block's order."""
    cut: BudgetCut | None = None
    """What the budget did, or ``None`` when the block went out whole."""
    title: str = ""
    """Shown name; default: :data:`BLOCK_TITLES` for the kind."""

    @property
    def sent(self) -> bool:
        """Whether any of the block reached the model."""
        return self.cut is None or self.cut.action != "dropped"

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form of the block."""
        return {
            "kind": self.kind,
            "title": self.title or BLOCK_TITLES.get(self.kind, self.kind),
            "sent": self.sent,
            "chars": self.chars,
            "tokens": self.tokens,
            "sources": list(self.sources),
            "budget": None if self.cut is None else {"action": self.cut.action, "reason": self.cut.reason,
                                                     "before_chars": self.cut.before_chars},
        }


ESTIMATES_KEPT = 2048
"""How many token estimates :func:`estimate` remembers (a digest and a count each: about 100 bytes)."""
_estimates: OrderedDict[bytes, int] = OrderedDict()
_estimates_guard = threading.Lock()


def estimate(text: str) -> int:
    """:func:`liyuan.tokens.estimate_tokens`, remembered: a summary, the resident summary
    and the kept turns come back unchanged turn after turn.

    Remembered by a 16-byte digest of the text, never the text itself: a closed chat's
    1 MB turn must not stay in memory because its size was once measured.
    """
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    with _estimates_guard:
        found = _estimates.get(key)
        if found is not None:
            _estimates.move_to_end(key)
            return found
    tokens = estimate_tokens(text)
    with _estimates_guard:
        _estimates[key] = tokens
        if len(_estimates) > ESTIMATES_KEPT:
            _estimates.popitem(last=False)
    return tokens


def block(kind: str, text: str, sources: Sequence[str] = (), *, cut: BudgetCut | None = None,
          title: str = "") -> BlockRecord:
    """The record of a block sent as ``text`` (empty text: a dropped block, when ``cut`` says so)."""
    return BlockRecord(kind, len(text), estimate(text) if text else 0, tuple(sources), cut, title)


@dataclass(frozen=True, slots=True)
class HistoryCut:
    """Whole turns the verbatim history's bound left out of a turn (oldest first)
    (:func:`liyuan.context.window.history_window`, ``MemoryConfig.history_max_chars``)."""

    dropped_turns: int
    """Turns left out (each from a user message up to the next)."""
    dropped_chars: int
    """Their characters (an opening greeting before the first turn included)."""
    kept_turns: int
    """Turns sent, the user's new words included."""
    limit_chars: int
    """The bound in force."""

    def reason(self) -> str:
        """One Chinese sentence with the numbers."""
        return (f"逐字历史超过 {self.limit_chars} 字：略去最早的 {self.dropped_turns} 轮（{self.dropped_chars} 字），"
                f"送最近的 {self.kept_turns} 轮")

    def to_json(self) -> dict[str, int]:
        """The stable JSON form."""
        return {"dropped_turns": self.dropped_turns, "dropped_chars": self.dropped_chars,
                "kept_turns": self.kept_turns, "limit_chars": self.limit_chars}


@dataclass(frozen=True, slots=True)
class RecallRecord:
    """One hit of the turn's 【剧情记忆】 and how recall found it (in the block's order)."""

    chunk: str
    """``chunk:<id>``."""
    store: str
    """Which store of the chat's vector memory holds the chunk (the story archive or the imported history)."""
    keyword_rank: int | None
    """Its place in the keyword (BM25) list (1 = first); ``None``: not found by it."""
    embedding_rank: int | None
    """Its place in the embedding list; ``None``: not found by it."""
    score: float
    """The fused score the hits are ordered by."""
    reserved: bool = False
    """It holds a place reserved for a list's first hits rather than one its score won."""

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form of one hit's trace."""
        found = [name for name, rank in (("keyword", self.keyword_rank), ("embedding", self.embedding_rank))
                 if rank is not None]
        return {"chunk": self.chunk, "store": self.store, "lists": found, "keyword_rank": self.keyword_rank,
                "embedding_rank": self.embedding_rank, "score": round(self.score, 6), "reserved": self.reserved}


@dataclass(frozen=True, slots=True)
class PinRecord:
    """One pinned fact a turn carried (sent whole: a pin is never cut)."""

    id: str
    """The pin's id (``p1`` ...)."""
    scope: str
    """``card`` (every chat of the card) or ``chat`` (this chat)."""
    chars: int
    """Characters of its text as sent."""

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form."""
        return {"id": self.id, "scope": self.scope, "chars": self.chars}


@dataclass(frozen=True, slots=True)
class WithheldRecord:
    """What an edit or deletion keeps out of a turn until the relay is rewritten (issue 38)."""

    summaries: tuple[str, ...]
    """``entry:<id>`` of each stale summary left out (it covered a revised message)."""
    revised: tuple[str, ...]
    """``entry:<id>`` of the edited or deleted messages that made them stale."""
    rewrite_until: str | None
    """``entry:<id>``: the furthest anchor the rewrite has still to cover (``None``: none left)."""
    resident: str | None = None
    """``file:<path>`` of the resident summary when it was held back (merged before an edit of
    this chat that the card has not merged yet), else ``None``."""

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form."""
        return {"summaries": list(self.summaries), "revised": list(self.revised), "rewrite_until": self.rewrite_until,
                "resident": self.resident}


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """Every block of one assembled turn, and the turn's totals."""

    blocks: tuple[BlockRecord, ...]
    messages: int
    """How many messages were sent (the app's system prompt not counted)."""
    chars: int
    """Characters of all messages together: the sum of the blocks' ``chars``."""
    tokens: int
    """Estimated tokens: the sum of the blocks' ``tokens``."""
    budget_chars: int
    """The envelope the resident summary shares with the summary, ledger and roster."""
    history_cut: HistoryCut | None = None
    """The oldest turns the verbatim history's bound left out, or ``None`` when it sent
    every turn since the summary (in :meth:`to_json` the key is then absent)."""
    recall: tuple[RecallRecord, ...] = ()
    """The recall trace: one entry per hit in 【剧情记忆】, in its order (empty: no recall)."""
    pins: tuple[PinRecord, ...] = ()
    """The pinned facts the turn carried, in the order sent (empty: none)."""
    withheld: WithheldRecord | None = None
    """Summaries an edit or deletion keeps out until the relay is rewritten (``None``: none;
    in :meth:`to_json` the key is then absent)."""

    def of(self, kind: str) -> tuple[BlockRecord, ...]:
        """The blocks of one kind (``extra`` may have several)."""
        return tuple(b for b in self.blocks if b.kind == kind)

    def with_sources(self, kind: str, sources: Sequence[str]) -> TurnRecord:
        """A copy whose blocks of ``kind`` name ``sources`` (a caller that knows more adds it)."""
        return replace(self, blocks=tuple(replace(b, sources=tuple(sources)) if b.kind == kind else b
                                          for b in self.blocks))

    def with_recall(self, trace: Sequence[RecallRecord]) -> TurnRecord:
        """A copy carrying the recall trace (and the recall block's sources, the hits' chunks)."""
        return replace(self.with_sources("recall", [r.chunk for r in trace]), recall=tuple(trace))

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form: ``format``, totals, the blocks in reading order, the recall trace."""
        return {
            "format": RECORD_FORMAT,
            "messages": self.messages,
            "chars": self.chars,
            "tokens": self.tokens,
            "budget_chars": self.budget_chars,
            "blocks": [b.to_json() for b in self.blocks],
            **({"history_cut": self.history_cut.to_json()} if self.history_cut is not None else {}),
            "recall": [r.to_json() for r in self.recall],
            "pins": [p.to_json() for p in self.pins],
            **({"withheld": self.withheld.to_json()} if self.withheld is not None else {}),
        }
