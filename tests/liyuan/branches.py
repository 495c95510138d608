"""Branch fixtures shared by the memory-core tests (the upstream test's shape).

A turn ``i`` is a user message ``u-i`` followed by an assistant reply ``a-i``. Bodies are
800 "云" characters by default, so ten turns serialize to well over the 2000-char floor.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from liyuan.clock import counter_ids, fixed_clock
from liyuan.session.entries import Entry, custom, message
from liyuan.session.tree import SessionTree
from liyuan.story.view import SUMMARY_ENTRY_TYPE

BODY = "云" * 800


def story_turn(i: int, parent: str | None, body: str = BODY) -> list[Entry]:
    """``u-i`` (user) and ``a-i`` (assistant) chained after ``parent``."""
    return [
        message(f"u-{i}", parent, "user", f"第{i}轮用户"),
        message(f"a-{i}", f"u-{i}", "assistant", f"第{i}轮回复{body}"),
    ]


def story_turns(start: int, stop: int, parent: str | None = None, body: str = BODY) -> list[Entry]:
    """Turns ``start`` .. ``stop`` inclusive, chained after ``parent``."""
    out: list[Entry] = []
    for i in range(start, stop + 1):
        out.extend(story_turn(i, out[-1].id if out else parent, body))
    return out


def summary(entry_id: str, parent: str | None, text: str, covers: str) -> Entry:
    """An ``rp-summary`` entry ``{summary, coversThroughId}``."""
    return custom(entry_id, parent, SUMMARY_ENTRY_TYPE, {"summary": text, "coversThroughId": covers})


def chain(*parts: Iterable[Entry]) -> list[Entry]:
    """Concatenate pieces (their parent ids are only informative here)."""
    return [e for part in parts for e in part]


def tree_of(entries: Iterable[Entry], path: str | os.PathLike[str] | None = None) -> SessionTree:
    """A linear tree holding ``entries`` with their ids; later appends get ``n0001``, ..."""
    entries = list(entries)
    names = iter([e.id for e in entries])
    extra = counter_ids("n")
    tree = SessionTree(path, ids=lambda: next(names, None) or extra(), clock=fixed_clock())
    for e in entries:
        tree.append(e.type, **dict(e.body))
    return tree


SUMMARY_REPLY = """## 前情提要
第一天黄昏，旅人走进茶馆。

## 人物
阿箬：话少，称旅人为「客官」。

## 承诺与伏笔
- 阿箬答应明早带路。

## 事实账
旅人带着一把旧伞。第一天。

## 当前场景
第一天夜里，茶馆里，阿箬正在收拾碗筷。"""
"""A hand-written five-section reply (served by ScriptedModel: no model wrote it)."""


class Recording(Sequence[Entry]):
    """A branch that remembers the lowest index anything read."""

    def __init__(self, items: Sequence[Entry]) -> None:
        self.items = list(items)
        self.lowest = len(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.items))
            touched = range(start, stop, step)
            if touched:
                self.lowest = min(self.lowest, min(touched))
            return self.items[index]
        self.lowest = min(self.lowest, index % len(self.items))
        return self.items[index]

    def __iter__(self) -> Iterator[Entry]:
        self.lowest = 0
        return iter(self.items)

    def __reversed__(self) -> Iterator[Entry]:
        for index in range(len(self.items) - 1, -1, -1):
            self.lowest = min(self.lowest, index)
            yield self.items[index]
