"""What an import will write, checked whole before anything is written.

Invariant: :func:`check_import` returns only when every file an import writes can be
written: the card's JSON and the lore book's YAML are built in memory and encoded as
UTF-8 first. Whatever would fail half way is a :class:`~liyuan.errors.CardImportError`
that names the field (``data.description``, ``entries.0.extensions``):

- a lone surrogate (the legal JSON escape ``"\\ud800"``) in any text or key, which no
  UTF-8 file can hold;
- a field nested deeper than :data:`MAX_FIELD_DEPTH` (the writers recurse once a level).

Walked iteratively, so the check itself never runs out of stack.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from liyuan.errors import CardImportError
from liyuan.lore.cards import ImportedCard
from liyuan.lore.store import dump_book
from liyuan.text import has_lone_surrogate

__all__ = ["MAX_FIELD_DEPTH", "check_import", "find_unwritable"]

MAX_FIELD_DEPTH = 64
"""Deepest nesting an imported field may have (a card's own fields need about 6)."""


def find_unwritable(data: Any) -> str | None:
    """Why ``data`` cannot be stored, naming the first field at fault; ``None`` when it can."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_FIELD_DEPTH:
            return f"字段 {_short(path)} 嵌套超过 {MAX_FIELD_DEPTH} 层"
        if isinstance(value, str):
            if has_lone_surrogate(value):
                return (f"字段 {_short(path) or '（整个文件）'} 里有单独的代理字符（\\ud800 这类转义），"
                        "存不成 UTF-8 文本")
        elif isinstance(value, Mapping):
            for key, item in reversed(list(value.items())):
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and has_lone_surrogate(key):
                    return f"字段 {_short(path) or '（顶层）'} 里有个字段名带单独的代理字符（\\ud800 这类转义）"
                stack.append((item, where, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in reversed(list(enumerate(value))))
    return None


def _short(path: str) -> str:
    return path if len(path) <= 120 else path[:120] + "…"


def check_import(card: ImportedCard) -> None:
    """Refuse ``card`` unless every file its import writes can be written.

    Raises:
        CardImportError: The field at fault is named; nothing was written.
    """
    problem = find_unwritable(card.data)
    if problem is not None:
        raise CardImportError(f"{problem}，没有导入")
    try:
        if card.book is not None:
            dump_book(card.book).encode("utf-8")
        if card.is_card:
            json.dumps(card.data, ensure_ascii=False, indent=2).encode("utf-8")
    except (UnicodeEncodeError, RecursionError, ValueError) as exc:
        problem = find_unwritable(card.book.to_dict()) if card.book is not None else None
        raise CardImportError(f"{problem or '导入的内容写不成文件'}（{type(exc).__name__}），没有导入") from None
