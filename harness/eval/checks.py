"""Scorecard checks on text: structure, fact recall, latest scene, abstention.

Invariant: every function here is pure. It takes plain data (texts, facts, numbers) and
returns a frozen result whose ``ok`` is decided only by what it was given; nothing reads
files or calls a model. The adapters in :mod:`harness.eval.scorecard` feed them the
artifacts of a run, and the tests feed them hand-made passing and failing cases.

A gold fact matches a text when every one of its ``match`` groups occurs in it; a group
is a list of alternative spellings (written ``"两桶|2桶"`` in YAML). Texts are compared
after NFKC normalization with all whitespace removed, so full-width and half-width forms
and line wrapping do not decide a match.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from liyuan.card.prompts import (
    HANDBOOK_MARK,
    RECAP_HEADINGS,  # re-exported: the recap's sections after its ``# title`` (reference 8.8)
    RESIDENT_HEADING,
    RESIDENT_MARK,
    parse_merge_result,
)
from liyuan.context.budget import RESIDENT_MAX_CHARS
from liyuan.prompts import echoed_tag
from liyuan.story.scribe import SUMMARY_HEADINGS
from liyuan.text import utf16_len

__all__ = [
    "RECAP_HEADINGS",
    "RESIDENT_SECTIONS",
    "AbstentionResult",
    "Fact",
    "RecallResult",
    "SceneResult",
    "StructureResult",
    "check_abstention",
    "check_latest_scene",
    "check_merge_reply",
    "check_recap_structure",
    "check_resident",
    "check_summary_structure",
    "fact_in",
    "fact_in_normalized",
    "fact_recall",
    "normalize",
    "parse_match",
    "sections",
]

RESIDENT_SECTIONS = ("## 人物与关系现状", "## 既定事实", "## 未了之事")
"""Resident sections with a fixed name; the fourth is ``## <user>的玩法偏好``."""


def normalize(text: str) -> str:
    """NFKC, whitespace removed: the form in which facts are looked up."""
    return "".join(unicodedata.normalize("NFKC", text).split())


def parse_match(spec: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """``["灯油", "两桶|2桶"]`` -> ``(("灯油",), ("两桶", "2桶"))``; empty parts dropped."""
    groups = []
    for item in spec:
        alternatives = tuple(normalize(a) for a in item.split("|") if normalize(a))
        if alternatives:
            groups.append(alternatives)
    return tuple(groups)


@dataclass(frozen=True)
class Fact:
    """A gold fact (or a never-said one) that a scenario declares."""

    id: str
    text: str
    """What the fact says, for people reading the scorecard."""
    match: tuple[tuple[str, ...], ...]
    """Every group must occur; any alternative of a group will do (see :func:`parse_match`)."""
    chat: str | None = None
    """The chat where it is said (``None`` for never-said facts)."""
    turn: int | None = None
    """The turn that first says it (0: the greeting); ``None`` when the chat has no session."""
    kind: str = "fact"
    """``name``, ``object``, ``holder``, ``promise``, ``thread``, ``fact`` ..."""
    section: str | None = None
    """The summary section it belongs in (heading without ``## ``), if any."""
    also: tuple[str, ...] = ()
    """Other chats that support the same fact (forgetting keeps it while one remains)."""

    @property
    def sources(self) -> frozenset[str]:
        """Every chat that supports the fact."""
        return frozenset(({self.chat} if self.chat else set()) | set(self.also))


def fact_in(fact: Fact, text: str) -> bool:
    """True when every match group of ``fact`` occurs in ``text``."""
    return fact_in_normalized(fact, normalize(text)) if fact.match else False


def fact_in_normalized(fact: Fact, haystack: str) -> bool:
    """:func:`fact_in` on a text already passed through :func:`normalize`.

    For callers that look many facts up in one text: they normalise it once.
    """
    return bool(fact.match) and all(any(alt in haystack for alt in group) for group in fact.match)


def sections(text: str, prefix: str = "## ") -> dict[str, str]:
    """Body of each heading that starts with ``prefix`` (heading text without the prefix).

    A repeated heading keeps its first body; text before the first heading is dropped.
    """
    out: dict[str, str] = {}
    current: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(prefix) and not stripped.startswith(prefix + "#"):
            if current is not None and current not in out:
                out[current] = "\n".join(body).strip()
            current, body = stripped[len(prefix):].strip(), []
        elif current is not None:
            body.append(line)
    if current is not None and current not in out:
        out[current] = "\n".join(body).strip()
    return out


# -- structure -------------------------------------------------------------------


@dataclass(frozen=True)
class StructureResult:
    """Whether a document has the required headings, once each, in order, with content."""

    ok: bool
    problems: tuple[str, ...]
    """Chinese, one per problem found; empty when ``ok``."""
    chars: int = 0
    """Length in UTF-16 units (as the app measures)."""

    def to_json(self) -> dict[str, Any]:
        """JSON form for the scorecard."""
        return {"ok": self.ok, "problems": list(self.problems), "chars": self.chars}


def _headings_in_order(text: str, headings: Sequence[str]) -> list[str]:
    lines = [line.strip() for line in text.splitlines()]
    problems: list[str] = []
    positions: list[int] = []
    for heading in headings:
        found = [i for i, line in enumerate(lines) if line == heading]
        if not found:
            problems.append(f"缺少小节「{heading}」")
        elif len(found) > 1:
            problems.append(f"小节「{heading}」出现了 {len(found)} 次")
        else:
            positions.append(found[0])
    if not problems:
        if positions != sorted(positions):
            problems.append("小节顺序不对")
        else:
            ends = [*positions[1:], len(lines)]
            for heading, start, end in zip(headings, positions, ends, strict=True):
                body = [line for line in lines[start + 1:end] if line]
                if not body:
                    problems.append(f"小节「{heading}」没有内容")
    return problems


def check_summary_structure(text: str) -> StructureResult:
    """The relay summary: the five sections of :data:`liyuan.story.scribe.SUMMARY_HEADINGS`."""
    problems = _headings_in_order(text, SUMMARY_HEADINGS) if text.strip() else ["摘要为空"]
    return StructureResult(not problems, tuple(problems), utf16_len(text.strip()))


def check_recap_structure(text: str) -> StructureResult:
    """A recap: a one-line ``# title`` first, then the five :data:`RECAP_HEADINGS` in order."""
    stripped = text.strip()
    if not stripped:
        return StructureResult(False, ("复盘为空",), 0)
    problems = []
    first = stripped.splitlines()[0].strip()
    if not first.startswith("# ") or not first[2:].strip():
        problems.append("第一行应该是「# 一句话概括这一局」")
    problems.extend(_headings_in_order(stripped, RECAP_HEADINGS))
    return StructureResult(not problems, tuple(problems), utf16_len(stripped))


def check_resident(text: str, user_name: str) -> StructureResult:
    """The resident summary: heading line, four sections, at most 1200 characters."""
    stripped = text.strip()
    if not stripped:
        return StructureResult(False, ("常驻摘要为空",), 0)
    problems = []
    if stripped.splitlines()[0].strip() != RESIDENT_HEADING:
        problems.append(f"第一行应该是「{RESIDENT_HEADING}」")
    problems.extend(_headings_in_order(stripped, (*RESIDENT_SECTIONS, f"## {user_name}的玩法偏好")))
    chars = utf16_len(stripped)
    if chars > RESIDENT_MAX_CHARS:
        problems.append(f"常驻摘要 {chars} 字，超过上限 {RESIDENT_MAX_CHARS} 字")
    return StructureResult(not problems, tuple(problems), chars)


def check_merge_reply(text: str, chat_ids: Iterable[str]) -> StructureResult:
    """A merge reply the library accepts, with a block per chat whose recap it was sent.

    Whether the reply splits is decided by :func:`liyuan.card.prompts.parse_merge_result`
    itself, so the check cannot pass a reply the library refuses; the detailed reasons
    below only explain a refusal.

    Args:
        text: The reply as the model returned it.
        chat_ids: The chats whose recaps the merge was sent: each needs its block
            (``# 局：…（id）``) and its ``来源：局/<id>.md`` line in the reply's handbook
            part (the code keeps the blocks of the other chats).
    """
    chars = utf16_len(text.strip())
    parsed = parse_merge_result(text)
    if parsed is None:
        return StructureResult(False, tuple(_merge_refusal(text, chat_ids)), chars)
    problems = _missing_chats(parsed[0], chat_ids)
    return StructureResult(not problems, tuple(problems), chars)


def _missing_chats(handbook: str, chat_ids: Iterable[str]) -> list[str]:
    lines = [line.strip() for line in handbook.splitlines()]
    problems = []
    for chat_id in chat_ids:
        if not any(line.startswith("# 局：") and f"（{chat_id}）" in line for line in lines):
            problems.append(f"手册里没有局 {chat_id} 的块")
        if f"来源：局/{chat_id}.md" not in handbook:
            problems.append(f"手册里缺少「来源：局/{chat_id}.md」")
    return problems


def _merge_refusal(text: str, chat_ids: Iterable[str]) -> list[str]:
    """Why :func:`parse_merge_result` refused ``text``, in Chinese (never empty)."""
    lines = [line.strip() for line in text.strip().splitlines()]
    handbook_at = [i for i, line in enumerate(lines) if line == HANDBOOK_MARK]
    resident_at = [i for i, line in enumerate(lines) if line == RESIDENT_MARK]
    if len(handbook_at) != 1 or len(resident_at) != 1:
        return ["两个标记行（记忆.md、常驻摘要.md）应该各出现一次"]
    if resident_at[0] < handbook_at[0]:
        return ["常驻摘要的标记出现在手册之前"]
    handbook = "\n".join(lines[handbook_at[0] + 1:resident_at[0]]).strip()
    resident = "\n".join(lines[resident_at[0] + 1:]).strip()
    problems = []
    if not handbook:
        problems.append("手册部分是空的")
    if not resident:
        problems.append("常驻摘要部分是空的")
    tag = echoed_tag(handbook) or echoed_tag(resident)
    if tag is not None:
        problems.append(f"回复里抄了提示词的标签 {tag}：这是把输入照抄回来，不是合并结果")
    if not problems:
        problems.append("合并回复拆不出手册和常驻摘要")
    return [*problems, *_missing_chats(handbook, chat_ids)]


# -- facts -------------------------------------------------------------------------


@dataclass(frozen=True)
class RecallResult:
    """Which expected facts a text contains, overall and in their own section."""

    expected: tuple[str, ...]
    found: tuple[str, ...]
    missing: tuple[str, ...]
    per_section: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """Section name -> (facts found in that section, facts that belong there)."""
    misplaced: tuple[str, ...] = ()
    """Facts present in the text but not in the section they belong in."""

    @property
    def recall(self) -> float | None:
        """Found / expected; ``None`` when nothing was expected."""
        return len(self.found) / len(self.expected) if self.expected else None

    def to_json(self) -> dict[str, Any]:
        """JSON form for the scorecard."""
        return {
            "expected": len(self.expected), "found": list(self.found), "missing": list(self.missing),
            "recall": None if self.recall is None else round(self.recall, 4),
            "per_section": {k: {"found": f, "expected": e} for k, (f, e) in self.per_section.items()},
            "misplaced": list(self.misplaced),
        }


def fact_recall(facts: Sequence[Fact], text: str, *, by_section: bool = False) -> RecallResult:
    """How many of ``facts`` occur in ``text``.

    Args:
        facts: The facts this text is expected to hold (the caller filters by coverage).
        text: A summary, recap, handbook or resident summary.
        by_section: Also score each fact that names a ``section`` inside that section
            (``## <section>`` of ``text``).
    """
    haystack = normalize(text)
    found = tuple(f.id for f in facts if fact_in_normalized(f, haystack))
    missing = tuple(f.id for f in facts if f.id not in found)
    per_section: dict[str, tuple[int, int]] = {}
    misplaced: list[str] = []
    if by_section:
        bodies = {name: normalize(body) for name, body in sections(text).items()}
        for fact in facts:
            if fact.section is None:
                continue
            hit = fact_in_normalized(fact, bodies.get(fact.section, ""))
            got, want = per_section.get(fact.section, (0, 0))
            per_section[fact.section] = (got + int(hit), want + 1)
            if not hit and fact.id in found:
                misplaced.append(fact.id)
    return RecallResult(tuple(f.id for f in facts), found, missing, per_section, tuple(misplaced))


@dataclass(frozen=True)
class SceneResult:
    """Which scene the 当前场景 section names."""

    ok: bool
    verdict: str
    """``latest`` (names the latest scene), ``earlier`` (only an earlier one), ``none``."""
    expected: str | None
    """Id of the latest scene the covered transcript reaches."""
    named: tuple[str, ...]
    """Ids of every scene whose match occurs in the section."""

    def to_json(self) -> dict[str, Any]:
        """JSON form for the scorecard."""
        return {"ok": self.ok, "verdict": self.verdict, "expected": self.expected, "named": list(self.named)}


def check_latest_scene(section_text: str, scenes: Sequence[Fact], covered_turn: int) -> SceneResult:
    """Does the 当前场景 section follow the latest scene of the covered transcript?

    Args:
        section_text: Body of ``## 当前场景``.
        scenes: The chat's scenes, each a :class:`Fact` whose ``turn`` is where it begins.
        covered_turn: The last turn the summary covers (0: only the greeting).

    Returns:
        ``ok`` when the latest scene that began at or before ``covered_turn`` is named.
        Naming an earlier scene as well (``从厨房上到灯室``) is fine; naming only an
        earlier one is the regression the five-section prompt warns about.
    """
    reached = sorted((s for s in scenes if s.turn is not None and s.turn <= covered_turn),
                     key=lambda s: s.turn or 0)
    haystack = normalize(section_text)
    named = tuple(s.id for s in scenes if fact_in_normalized(s, haystack))
    if not reached:
        return SceneResult(False, "none", None, named)
    latest = reached[-1]
    if latest.id in named:
        return SceneResult(True, "latest", latest.id, named)
    earlier = {s.id for s in reached[:-1]}
    verdict = "earlier" if earlier & set(named) else "none"
    return SceneResult(False, verdict, latest.id, named)


@dataclass(frozen=True)
class AbstentionResult:
    """Never-said facts that showed up anyway."""

    ok: bool
    violations: tuple[tuple[str, str], ...]
    """(fact id, artifact name) for every never-said fact found in an artifact."""

    def to_json(self) -> dict[str, Any]:
        """JSON form for the scorecard."""
        return {"ok": self.ok, "violations": [{"fact": f, "artifact": a} for f, a in self.violations]}


def check_abstention(never_said: Sequence[Fact], artifacts: Mapping[str, str]) -> AbstentionResult:
    """None of ``never_said`` may occur in any of ``artifacts`` (name -> text)."""
    normalized = {name: normalize(text) for name, text in artifacts.items()}
    violations = tuple((f.id, name) for name, text in sorted(normalized.items())
                       for f in never_said if fact_in_normalized(f, text))
    return AbstentionResult(not violations, violations)
