"""Scorecard checks on memory behaviour: forgetting by source, the budget, growth.

Invariant: pure functions of plain data, like :mod:`harness.eval.checks`. The budget
check re-derives the truncation rule from the reference (section 9) on its own instead of
calling :func:`liyuan.context.budget.fit_resident_summary`, so a bug there cannot vouch for
itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from liyuan.context.budget import OMITTED_MARKER, RESIDENT_ENVELOPE_CHARS, RESIDENT_MAX_CHARS, RESIDENT_MIN_USEFUL_CHARS
from liyuan.text import utf16_len, utf16_prefix

from .checks import Fact, fact_in_normalized, normalize

__all__ = [
    "BudgetResult",
    "ForgettingResult",
    "GrowthResult",
    "check_budget",
    "check_forgetting",
    "check_growth",
    "source_tags",
]

_TAG_RE = re.compile(r"\[局[:：]\s*([A-Za-z0-9_-]+)\s*\]")


def source_tags(line: str) -> set[str]:
    """Chat ids of the ``[局:<id>]`` tags on one line."""
    return set(_TAG_RE.findall(line))


def _ratio(hit: int, total: int) -> float | None:
    return round(hit / total, 4) if total else None


@dataclass(frozen=True)
class ForgettingResult:
    """What a merge after deleting chats removed, against what it should have removed."""

    ok: bool
    should_go: tuple[str, ...]
    """Facts present before and supported only by deleted chats."""
    went: tuple[str, ...]
    """Facts present before and absent after."""
    should_stay: tuple[str, ...]
    stayed: tuple[str, ...]
    stale_tags: tuple[str, ...]
    """Kept facts still tagged with a deleted chat on some line."""

    @property
    def precision(self) -> float | None:
        """Of what went, the share that should have gone (``None``: nothing went)."""
        return _ratio(len(set(self.went) & set(self.should_go)), len(self.went))

    @property
    def recall(self) -> float | None:
        """Of what should have gone, the share that went (``None``: nothing was due)."""
        return _ratio(len(set(self.went) & set(self.should_go)), len(self.should_go))

    def to_json(self) -> dict[str, Any]:
        """JSON form for the scorecard."""
        return {
            "ok": self.ok, "precision": self.precision, "recall": self.recall,
            "should_go": list(self.should_go), "went": list(self.went),
            "wrongly_kept": sorted(set(self.should_go) - set(self.went)),
            "wrongly_removed": sorted(set(self.went) - set(self.should_go)),
            "should_stay": list(self.should_stay), "stayed": list(self.stayed),
            "stale_tags": list(self.stale_tags),
        }


def check_forgetting(before: str, after: str, facts: Sequence[Fact], deleted: set[str]) -> ForgettingResult:
    """Forgetting by source, on one memory file before and after the forgetting merge.

    Only facts present ``before`` are judged. A fact whose supporting chats are all in
    ``deleted`` must be gone ``after``; any other must still be there, and no line that
    mentions it may still carry a deleted chat's ``[局:id]`` tag.

    Args:
        before: The handbook (or resident summary) before the merge.
        after: The same file after it.
        facts: Gold facts with their sources (:attr:`Fact.sources`).
        deleted: Ids of the deleted chats.
    """
    before_n, after_n = normalize(before), normalize(after)
    present = [f for f in facts if fact_in_normalized(f, before_n)]
    should_go = tuple(f.id for f in present if f.sources and f.sources <= deleted)
    should_stay = tuple(f.id for f in present if f.id not in should_go)
    went = tuple(f.id for f in present if not fact_in_normalized(f, after_n))
    stayed = tuple(i for i in should_stay if i not in went)
    stale = []
    lines = [(normalize(line), line) for line in after.splitlines()]
    for fact in present:
        if fact.id in stayed and any(fact_in_normalized(fact, norm) and source_tags(line) & deleted
                                     for norm, line in lines):
            stale.append(fact.id)
    ok = set(went) == set(should_go) and not stale
    return ForgettingResult(ok, should_go, went, should_stay, stayed, tuple(stale))


@dataclass(frozen=True)
class BudgetResult:
    """The shared envelope in one assembled context."""

    ok: bool
    total: int
    """Resident (as sent) + in-session summary + ledger + roster, UTF-16 units."""
    allowance: int
    cut: str
    """``none`` (sent whole), ``dropped``, ``paragraph``, ``line``, ``hard``, ``mid-paragraph``, or
    ``absent`` (the card has no resident summary: nothing to cut, the cut is not judged)."""
    problems: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON form for the scorecard."""
        return {"ok": self.ok, "total": self.total, "allowance": self.allowance, "cut": self.cut,
                "problems": list(self.problems)}


def _has_break_from(head: str, sep: str, floor: int) -> bool:
    """True when ``head`` has ``sep`` starting at UTF-16 position >= ``floor``."""
    at = head.rfind(sep)
    return at >= 0 and utf16_len(head[:at]) >= floor


def _cut_kind(original: str, sent: str, allowance: int) -> tuple[str, list[str]]:
    if not sent.endswith(OMITTED_MARKER):
        return "mid-paragraph", ["截断后的常驻摘要没有以「余下内容因篇幅略」结尾"]
    kept = sent[: -len(OMITTED_MARKER)]
    if not original.startswith(kept):
        return "mid-paragraph", ["截断后的常驻摘要不是原文的开头部分"]
    rest = original[len(kept):].lstrip(" \t")
    head = utf16_prefix(original, allowance - utf16_len(OMITTED_MARKER))
    if rest.startswith("\n\n"):
        return "paragraph", []
    # The rule falls back to a line break, then to a hard cut, only when the head has no
    # better break at or after the 200th character.
    if _has_break_from(head, "\n\n", RESIDENT_MIN_USEFUL_CHARS):
        return "mid-paragraph", ["有段落边界可用，却没有截在段落边界"]
    if rest.startswith("\n"):
        return "line", []
    if _has_break_from(head, "\n", RESIDENT_MIN_USEFUL_CHARS):
        return "mid-paragraph", ["有换行可用，却截在了一行中间"]
    return "hard", []


def check_budget(summary: str | None, state_text: str, roster: str,
                 resident_original: str | None, resident_sent: str | None) -> BudgetResult:
    """Check one assembled context against the shared 4300-character envelope.

    Args:
        summary: The in-session relay summary sent this turn, if any.
        state_text: The ledger text (without its 【世界状态】 label).
        roster: The roster text (without its label).
        resident_original: The card's resident summary as stored, if any.
        resident_sent: What the context actually carries of it (``None``: dropped).

    Returns:
        ``ok`` when the four blocks fit the envelope, the resident stays within its
        allowance, and any cut is the one the rule prescribes: whole when it fits,
        dropped below 200 characters, else at the last paragraph break (a line break or
        a hard cut only when the head offers no paragraph break at or after character 200).
    """
    other = utf16_len(summary or "") + utf16_len(state_text) + utf16_len(roster)
    allowance = min(RESIDENT_MAX_CHARS, RESIDENT_ENVELOPE_CHARS - other)
    sent_chars = utf16_len(resident_sent or "")
    total = other + sent_chars
    problems: list[str] = []
    cut = "none"
    original = resident_original if resident_original and resident_original.strip() else None
    if original is None:
        cut = "absent"
        if resident_sent:
            problems.append("卡上没有常驻摘要，上下文里却有一份")
    elif utf16_len(original) <= allowance:
        if resident_sent != original:
            problems.append("常驻摘要放得下，却没有原样送出")
    elif allowance < RESIDENT_MIN_USEFUL_CHARS:
        cut = "dropped"
        if resident_sent is not None:
            problems.append(f"余量只有 {allowance} 字（不到 {RESIDENT_MIN_USEFUL_CHARS}），常驻摘要应该整段不送")
    elif resident_sent is None:
        cut = "dropped"
        problems.append(f"余量 {allowance} 字够用，常驻摘要却被整段丢掉")
    else:
        cut, found = _cut_kind(original, resident_sent, allowance)
        problems.extend(found)
    if resident_sent and sent_chars > allowance:
        problems.append(f"常驻摘要送出 {sent_chars} 字，超过余量 {allowance} 字")
    if total > RESIDENT_ENVELOPE_CHARS:
        problems.append(f"四块合计 {total} 字，超过 {RESIDENT_ENVELOPE_CHARS} 字的共用预算")
    return BudgetResult(not problems, total, allowance, cut, tuple(problems))


@dataclass(frozen=True)
class GrowthResult:
    """Summary length over successive compactions of one chat."""

    summary_chars: tuple[int, ...]
    covered_chars: tuple[int, ...]
    """Characters of transcript covered in total by each summary (cumulative)."""
    compression: tuple[float, ...]
    """summary / covered, per compaction."""
    snowball: bool
    """Every compaction made the summary longer, and the last is over twice the first."""
    max_share_of_envelope: float
    """Longest summary / 4300: how much of the shared budget the summary alone takes."""

    def to_json(self) -> dict[str, Any]:
        """JSON form for the scorecard."""
        return {"summary_chars": list(self.summary_chars), "covered_chars": list(self.covered_chars),
                "compression": list(self.compression), "snowball": self.snowball,
                "max_share_of_envelope": self.max_share_of_envelope}


def check_growth(summaries: Sequence[str], covered_this_time: Sequence[int]) -> GrowthResult:
    """Growth and compression over successive compactions.

    Args:
        summaries: Each compaction's summary, in order (each merges the previous one).
        covered_this_time: Characters of transcript each compaction covered anew.
    """
    if len(summaries) != len(covered_this_time):
        raise ValueError("summaries and covered_this_time differ in length")
    lengths = tuple(utf16_len(s.strip()) for s in summaries)
    covered: list[int] = []
    for chars in covered_this_time:
        covered.append((covered[-1] if covered else 0) + chars)
    compression = tuple(round(n / c, 4) if c else 0.0 for n, c in zip(lengths, covered, strict=True))
    growing = len(lengths) >= 2 and all(b > a for a, b in pairwise(lengths))
    snowball = growing and lengths[-1] > 2 * lengths[0]
    share = round(max(lengths, default=0) / RESIDENT_ENVELOPE_CHARS, 4)
    return GrowthResult(lengths, tuple(covered), compression, snowball, share)
