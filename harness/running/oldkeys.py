"""Scenario files written before the harness said "turn": their old keys, read and named.

The harness once called a turn a "beat" (the site always said 轮). Scenario files still
written that way load unchanged: ``chats.<id>.beats``, a ``rewind`` step's ``beat`` and a
gold fact's or scene's ``beat`` are read as ``turns`` / ``turn``, and one warning names the
file and every key to rename. This module is the only place in the harness that knows the
old word.

Invariant: a file that writes both the old and the new key of the same place fails with a
Chinese message naming the file and the field; nothing is silently dropped.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, MutableMapping
from typing import Any

from liyuan.errors import ConfigError

__all__ = ["OldScenarioKeyWarning", "upgrade_old_keys"]

_OLD_CHAT_KEY, _NEW_CHAT_KEY = "beats", "turns"
_OLD_KEY, _NEW_KEY = "beat", "turn"
_GOLD_PARTS = ("facts", "never_said", "scenes")


class OldScenarioKeyWarning(UserWarning):
    """A scenario file uses a key the harness renamed; it was read under the new name."""


def _rename(data: Any, old: str, new: str, where: str, label: str, renamed: list[str]) -> None:
    if not isinstance(data, MutableMapping) or old not in data:
        return
    if new in data:
        raise ConfigError(f"{label}: {where}: 同时写了旧键 {old} 和新键 {new}，只留 {new}")
    data[new] = data.pop(old)
    renamed.append(f"{where}.{old} → {new}")


def upgrade_old_keys(data: Any, label: str) -> Any:
    """Read the old keys of a parsed scenario file under their new names, in place.

    Args:
        data: The file's top-level YAML value (left alone when not a mapping).
        label: How the file is named in messages (a repository-relative path).

    Returns:
        ``data``, with every old key moved to its new name; an
        :class:`OldScenarioKeyWarning` names the file and the keys when there were any.

    Raises:
        ConfigError: A place has both the old and the new key.
    """
    if not isinstance(data, Mapping):
        return data
    renamed: list[str] = []
    chats = data.get("chats")
    if isinstance(chats, Mapping):
        for chat_id, chat in chats.items():
            _rename(chat, _OLD_CHAT_KEY, _NEW_CHAT_KEY, f"chats.{chat_id}", label, renamed)
    steps = data.get("steps")
    if isinstance(steps, list):
        for i, step in enumerate(steps):
            _rename(step, _OLD_KEY, _NEW_KEY, f"steps[{i}]", label, renamed)
    gold = data.get("gold")
    if isinstance(gold, Mapping):
        for part in _GOLD_PARTS:
            items = gold.get(part)
            if isinstance(items, list):
                for i, item in enumerate(items):
                    _rename(item, _OLD_KEY, _NEW_KEY, f"gold.{part}[{i}]", label, renamed)
    if renamed:
        shown = "；".join(renamed[:5]) + (f"；另有 {len(renamed) - 5} 处" if len(renamed) > 5 else "")
        warnings.warn(f"{label}: 用了旧键名 {_OLD_CHAT_KEY} / {_OLD_KEY}，已按新键名 {_NEW_CHAT_KEY} / {_NEW_KEY} "
                      f"读入，请在文件里改过来（{shown}）", OldScenarioKeyWarning, stacklevel=3)
    return data
