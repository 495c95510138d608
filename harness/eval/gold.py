"""Gold facts: what a scenario declares its story says (and never says), for the scorecard.

A scenario YAML may carry a ``gold:`` block (documented in ``docs/eval.md``)::

    gold:
      facts:        # said in the story; turn 0 is the greeting, no turn: a hand-written recap
        - {id: oil, chat: jA, turn: 1, kind: fact, section: 事实账, text: 灯油只剩两桶, match: [灯油, 两桶|2桶]}
        - {id: lamp-rule, chat: jA, also: [jB], turn: 1, text: …, match: [灯室, 陪|在场]}
      never_said:   # nobody said these; no artifact may contain them
        - {id: ghost, text: 灯塔闹鬼, match: [闹鬼]}
      scenes:       # where and when the story is, from the turn each scene begins
        - {id: kitchen, chat: jA, turn: 1, text: 一楼厨房, match: [厨房]}

Invariant: :func:`load_gold` either returns a complete, self-consistent :class:`Gold`
(unique ids, known chats, non-empty match groups, sections among the five) or raises
:class:`GoldError` naming the file and the field; a scenario without the block has an
empty gold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from liyuan.errors import ConfigError
from liyuan.story.scribe import SUMMARY_HEADINGS

from ..running.oldkeys import upgrade_old_keys
from .checks import Fact, parse_match

__all__ = ["Gold", "GoldError", "ScenarioFile", "load_gold", "load_scenario", "load_scenarios", "parse_gold"]

_SECTIONS = tuple(h.removeprefix("## ") for h in SUMMARY_HEADINGS)
_KEYS = {"id", "chat", "turn", "kind", "section", "text", "match", "also"}


class GoldError(ConfigError):
    """A malformed ``gold:`` block; the message names the file and the field."""


@dataclass(frozen=True)
class Gold:
    """A scenario's gold facts."""

    facts: tuple[Fact, ...] = ()
    never_said: tuple[Fact, ...] = ()
    scenes: tuple[Fact, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.facts or self.never_said or self.scenes)

    def facts_of(self, chats: set[str] | frozenset[str]) -> tuple[Fact, ...]:
        """Facts first said in one of ``chats``."""
        return tuple(f for f in self.facts if f.chat in chats)

    def scenes_of(self, chat: str) -> tuple[Fact, ...]:
        """The scenes of one chat."""
        return tuple(s for s in self.scenes if s.chat == chat)


def _fact(raw: Any, where: str, chats: Sequence[str], *, needs_chat: bool) -> Fact:
    if not isinstance(raw, Mapping):
        raise GoldError(f"{where}: 应该是映射（id、text、match …）")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise GoldError(f"{where}: 未知字段 {', '.join(map(str, unknown))}（可用：{'、'.join(sorted(_KEYS))}）")
    fact_id, text, match = raw.get("id"), raw.get("text"), raw.get("match")
    if not isinstance(fact_id, str) or not fact_id.strip():
        raise GoldError(f"{where}.id: 应该是非空字符串")
    if not isinstance(text, str) or not text.strip():
        raise GoldError(f"{where}.text: 应该写明这条事实说的是什么")
    if not isinstance(match, list) or not all(isinstance(m, str) for m in match) or not parse_match(match):
        raise GoldError(f"{where}.match: 应该是非空的字符串列表（每项用 | 分隔同义写法）")
    chat = raw.get("chat")
    if needs_chat and chat not in chats:
        raise GoldError(f"{where}.chat: 没有这个局：{chat!r}（已定义：{'、'.join(chats)}）")
    if not needs_chat and chat is not None:
        raise GoldError(f"{where}.chat: 从没说过的事不属于哪一局，不要写 chat")
    turn = raw.get("turn")
    if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool) or turn < 0):
        raise GoldError(f"{where}.turn: 应该是 0（开场白）或正整数")
    section = raw.get("section")
    if section is not None and section not in _SECTIONS:
        raise GoldError(f"{where}.section: 应该是五节之一：{'、'.join(_SECTIONS)}")
    also = raw.get("also") or []
    if not isinstance(also, list) or any(a not in chats or a == chat for a in also):
        raise GoldError(f"{where}.also: 应该列出另外支撑这条事实的局（已定义：{'、'.join(chats)}）")
    kind = raw.get("kind", "fact")
    return Fact(fact_id, text.strip(), parse_match(match), chat=chat, turn=turn,
                kind=kind if isinstance(kind, str) else "fact", section=section, also=tuple(also))


def parse_gold(raw: Any, chats: Sequence[str], where: str = "gold") -> Gold:
    """Validate a ``gold:`` block (already parsed from YAML) against the scenario's chats."""
    if raw is None:
        return Gold()
    if not isinstance(raw, Mapping):
        raise GoldError(f"{where}: 应该是映射（facts、never_said、scenes）")
    unknown = sorted(set(raw) - {"facts", "never_said", "scenes"})
    if unknown:
        raise GoldError(f"{where}: 未知字段 {', '.join(map(str, unknown))}（可用：facts、never_said、scenes）")
    parts: dict[str, tuple[Fact, ...]] = {}
    for key in ("facts", "never_said", "scenes"):
        items = raw.get(key) or []
        if not isinstance(items, list):
            raise GoldError(f"{where}.{key}: 应该是列表")
        parts[key] = tuple(_fact(item, f"{where}.{key}[{i}]", chats, needs_chat=key != "never_said")
                           for i, item in enumerate(items))
    for fact in parts["scenes"]:
        if fact.turn is None:
            raise GoldError(f"{where}.scenes（{fact.id}）.turn: 场景要写从第几轮开始")
    seen: set[str] = set()
    for fact in (*parts["facts"], *parts["never_said"], *parts["scenes"]):
        if fact.id in seen:
            raise GoldError(f"{where}: id {fact.id!r} 重复")
        seen.add(fact.id)
    return Gold(parts["facts"], parts["never_said"], parts["scenes"])


class ScenarioFile(NamedTuple):
    """A scenario file read once: its YAML data and its validated gold."""

    data: Mapping[str, Any]
    gold: Gold


def load_scenario(path: Path, label: str | None = None) -> ScenarioFile:
    """Read a scenario file once: its data and its ``gold:`` block (empty when it has none).

    Raises:
        GoldError: The file cannot be read, is not a mapping, or the block is malformed.
    """
    name = label or path.name
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise GoldError(f"{name}: 读不了场景文件：{exc}") from exc
    if not isinstance(data, Mapping):
        raise GoldError(f"{name}: 场景文件的顶层应该是映射")
    try:
        data = upgrade_old_keys(data, name)
    except ConfigError as exc:
        raise GoldError(str(exc)) from exc
    chats = data.get("chats") or {}
    gold = parse_gold(data.get("gold"), list(chats) if isinstance(chats, Mapping) else [], f"{name}: gold")
    return ScenarioFile(data, gold)


def load_gold(path: Path, label: str | None = None) -> Gold:
    """The ``gold:`` block of a scenario file (empty when it has none).

    Raises:
        GoldError: The file cannot be read or the block is malformed.
    """
    return load_scenario(path, label).gold


def load_scenarios(root: Path) -> dict[str, ScenarioFile]:
    """Every ``sim/scenarios/*.yaml`` under ``root``, by name, each read once.

    Raises:
        GoldError: As :func:`load_scenario`, for the first bad file.
    """
    return {path.stem: load_scenario(path, f"sim/scenarios/{path.name}")
            for path in sorted((root / "sim" / "scenarios").glob("*.yaml"))}
