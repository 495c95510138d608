"""What 梨园 does with each SillyTavern / Card V2-V3 lore field and decorator: the import report
(issue 35 item 4) and the compatibility table on the site are both this table.

Statuses: ``obeyed`` (照做: means what it means in SillyTavern), ``approximated`` (近似: obeyed in
梨园's terms, the note says how), ``kept`` (保留未照做: kept for export, not obeyed, the note
says why), ``not_applicable`` (不适用: has no meaning in 梨园's layout, the note says why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DECORATORS", "FIELDS", "ImportNote", "Status", "field_notes", "status_word", "summary_lines"]

Status = Literal["obeyed", "approximated", "kept", "not_applicable"]

_WORD = {"obeyed": "照做", "approximated": "近似", "kept": "保留未照做", "not_applicable": "不适用", "skipped": "跳过"}

FIELDS: dict[str, tuple[Status, str]] = {
    "keys": ("obeyed", "写成 /模式/标志 的是正则，其余是普通词；单个英文词整词匹配，中文和多词关键词按子串"),
    "secondary_keys": ("obeyed", "selective 为真时按 selectiveLogic 过滤"),
    "selective": ("obeyed", "为假时次要关键词保留不用"),
    "selectiveLogic": ("obeyed", "且含任一、且不全含、且都不含、且全含"),
    "content": ("obeyed", "整条放进【相关设定】，开头的 @@ 装饰行拿掉"),
    "comment": ("obeyed", "做标题（卡里先看 name）"),
    "name": ("obeyed", "做标题"),
    "constant": ("obeyed", "常驻"),
    "enabled": ("obeyed", "为假时不激活"),
    "disable": ("obeyed", "为真时不激活"),
    "insertion_order": ("obeyed", "大的先放，预算不够先截小的（和 SillyTavern 的 order 一样）"),
    "order": ("obeyed", "大的先放，预算不够先截小的"),
    "priority": ("obeyed", "比 order 先看，大的先放"),
    "case_sensitive": ("obeyed", "普通关键词区分大小写；正则看自己的 i 标志"),
    "caseSensitive": ("obeyed", "同 case_sensitive"),
    "match_whole_words": ("approximated", "英文等拼音文字整词；中文关键词前后不看边界（中文不分词）"),
    "matchWholeWords": ("approximated", "同 match_whole_words"),
    "use_regex": ("kept", "SillyTavern 导出的每条都写 true、却按普通词匹配；梨园看关键词本身是不是 /…/ 形式"),
    "scan_depth": ("approximated", "按轮算：消息数除以 2 向上取整；0 只看新消息"),
    "scanDepth": ("approximated", "同 scan_depth"),
    "exclude_recursion": ("obeyed", "不被别的条目的正文递归激活"),
    "excludeRecursion": ("obeyed", "同 exclude_recursion"),
    "prevent_recursion": ("obeyed", "自己的正文不递归激活别的条目"),
    "preventRecursion": ("obeyed", "同 prevent_recursion"),
    "delay_until_recursion": ("obeyed", "只在递归步激活；数字是递归层级"),
    "delayUntilRecursion": ("obeyed", "同 delay_until_recursion"),
    "probability": ("approximated", "按概率放进来；掷骰子用这一轮在分支上的位置做种子，重放、重来结果相同"),
    "useProbability": ("obeyed", "为假时不掷骰子"),
    "group": ("approximated", "同一组一轮只放一条；按权重抽签用这一轮的位置做种子"),
    "group_override": ("obeyed", "组里优先：order 最大的那条胜出"),
    "groupOverride": ("obeyed", "同 group_override"),
    "group_weight": ("approximated", "组内抽签的权重（种子同 group）"),
    "groupWeight": ("approximated", "同 group_weight"),
    "use_group_scoring": ("obeyed", "组内按命中的关键词数打分，分低的先出局，再按优先和权重选"),
    "useGroupScoring": ("obeyed", "同 use_group_scoring"),
    "sticky": ("approximated", "按消息数计时，计时从这一分支之前的轮次重算（最多往回 25 轮），不另存"),
    "cooldown": ("approximated", "同 sticky 的计时方式"),
    "delay": ("obeyed", "这一局消息数不到这个数时不激活"),
    "position": ("not_applicable", "梨园只有一个放设定的位置：末端的【相关设定】"),
    "depth": ("not_applicable", "梨园不把设定插进历史消息里"),
    "role": ("not_applicable", "【相关设定】在末端的用户消息里，没有单独的角色"),
    "vectorized": ("not_applicable", "梨园的向量记忆召回的是剧情，不用来激活设定"),
    "automation_id": ("not_applicable", "SillyTavern 的快速回复自动化"),
    "automationId": ("not_applicable", "同 automation_id"),
    "display_index": ("not_applicable", "SillyTavern 编辑器里的显示顺序"),
    "displayIndex": ("not_applicable", "同 display_index"),
    "addMemo": ("not_applicable", "SillyTavern 编辑器里的开关"),
    "characterFilter": ("not_applicable", "设定集属于一张卡，不按角色筛选"),
    "id": ("not_applicable", "编号，导出时带回"),
    "uid": ("not_applicable", "编号，导出时带回"),
}
"""Entry fields, by their name in a card entry, its ``extensions`` or a World Info entry."""

DECORATORS: dict[str, tuple[Status, str]] = {
    "@@activate": ("obeyed", "常驻"),
    "@@dont_activate": ("obeyed", "不激活"),
    "@@scan_depth": ("approximated", "同 scan_depth，按轮算"),
    "@@additional_keys": ("obeyed", "没有次要关键词时当作「且含任一」的次要关键词"),
    "@@exclude_keys": ("obeyed", "没有次要关键词时当作「且都不含」的次要关键词"),
    "@@activate_only_after": ("obeyed", "角色的消息数（开场白算一条）不到这个数时不激活"),
    "@@activate_only_every": ("obeyed", "角色的消息数是这个数的倍数时才激活"),
    "@@keep_activate_after_match": ("approximated", "之前的轮次里激活过就一直放进来；只看这条分支最近 25 轮"),
    "@@dont_activate_after_match": ("approximated", "之前的轮次里激活过就不再放；只看这条分支最近 25 轮"),
    "@@is_greeting": ("kept", "没有实现（梨园记着开场白，但不按它筛设定）"),
    "@@depth": ("not_applicable", "同 depth"),
    "@@instruct_depth": ("not_applicable", "同 depth"),
    "@@reverse_depth": ("not_applicable", "同 depth"),
    "@@reverse_instruct_depth": ("not_applicable", "同 depth"),
    "@@instruct_scan_depth": ("not_applicable", "梨园是聊天，按轮数扫描，不按 token 数"),
    "@@role": ("not_applicable", "同 role"),
    "@@position": ("not_applicable", "同 position"),
    "@@ignore_on_max_context": ("not_applicable", "预算不够时按顺序整条截掉并报告，每条都一样"),
}
"""SPEC_V3 decorators (lines at the top of ``content``)."""

_ALWAYS = {"keys", "key", "content", "comment", "name", "id", "uid", "display_index", "displayIndex"}
"""Fields every entry has: no note (they mean the same everywhere or nothing)."""
_DEFAULTS: dict[str, Any] = {
    "selective": True, "selectiveLogic": 0, "constant": False, "enabled": True, "disable": False,
    "insertion_order": 100, "order": 100, "priority": 0, "case_sensitive": False, "caseSensitive": False,
    "match_whole_words": True, "matchWholeWords": True, "exclude_recursion": False, "excludeRecursion": False,
    "prevent_recursion": False, "preventRecursion": False, "delay_until_recursion": False,
    "delayUntilRecursion": False, "probability": 100, "useProbability": True, "group": "", "group_override": False,
    "groupOverride": False, "group_weight": 100, "groupWeight": 100, "use_group_scoring": False,
    "useGroupScoring": False, "sticky": 0, "cooldown": 0, "delay": 0, "position": 0, "depth": 4, "role": 0,
    "vectorized": False, "use_regex": False, "automation_id": "", "automationId": "", "addMemo": False,
    "characterFilter": None,
}
"""Values that ask for nothing (a field at its default gets no note)."""


def _asks(name: str, value: Any) -> bool:
    if value is None or value == [] or value == {}:
        return False
    if name == "position" and value in ("before_char", "after_char"):
        return bool(value == "after_char")
    return not (name in _DEFAULTS and value == _DEFAULTS[name] and type(value) is type(_DEFAULTS[name]))


def field_notes(raw: Mapping[str, Any], decorators: list[str]) -> list[tuple[str, Status, str]]:
    """``(field, status, how)`` for each field and decorator of one raw entry that asks for something."""
    found = raw.get("extensions")
    fields = {**raw, **(found if isinstance(found, Mapping) else {})}
    fields.pop("extensions", None)
    notes = [(name, *FIELDS[name]) for name, value in fields.items()
             if name in FIELDS and name not in _ALWAYS and _asks(name, value)]
    for line in decorators:
        name = line.split(" ", 1)[0].lstrip("@")
        status, how = DECORATORS.get(f"@@{name}", ("kept", "梨园不认识这个装饰，保留未照做"))
        notes.append((f"@@{name}", status, how))
    return notes


def status_word(status: str) -> str:
    """The status in Chinese (as the import report and the site write it)."""
    return _WORD[status]


@dataclass(frozen=True)
class ImportNote:
    """What the import did with one field of one entry."""

    entry: str
    field: str
    status: Literal["obeyed", "approximated", "kept", "not_applicable", "skipped"]
    """As :mod:`liyuan.lore.compat` says (``kept``: kept for export, not obeyed), or ``skipped``."""
    how: str
    """Chinese: how it is obeyed or approximated, why it is not, what was left out."""

    def line(self) -> str:
        """The note as one Chinese line."""
        return f"「{self.entry}」{self.field}：{status_word(self.status)}，{self.how}"


def summary_lines(notes: Sequence[ImportNote]) -> list[str]:
    """The import report by field: one line each, with how many entries and the first few titles."""
    by_field: dict[tuple[str, str, str], list[str]] = {}
    for note in notes:
        by_field.setdefault((note.field, note.status, note.how), []).append(note.entry)
    return [f"导入设定集：{field} {status_word(status)}（{how}），{len(titles)} 条："
            + "、".join(f"「{t}」" for t in titles[:5]) + ("……" if len(titles) > 5 else "")
            for (field, status, how), titles in by_field.items()]
