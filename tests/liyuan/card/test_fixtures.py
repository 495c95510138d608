"""Builders shared by the card-memory tests (no tests here).

Every recap and merge reply below is hand-written for the tests: no model wrote them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from liyuan.card import CardMemory
from liyuan.card.inputs import SyncSettings
from liyuan.card.prompts import HANDBOOK_MARK, RESIDENT_MARK
from liyuan.clock import counter_ids, fixed_clock
from liyuan.model import ChatModel, FunctionModel, ModelRequest
from liyuan.session.tree import SessionTree

USER = "阿明"
CHAR = "小满"

# Hand-written stand-ins for model output (scripted, not model-written).


def recap(title: str, plot: str, preference: str = "无") -> str:
    """A hand-written recap with the title line and all five sections."""
    return (f"# {title}\n\n## 剧情脉络\n{plot}\n\n## 人物与关系\n- 小满：茶馆帮工。\n\n"
            f"## 既定事实\n- 城东有茶馆。\n\n## 未了之事\n- 无\n\n## 用户的玩法偏好\n- {preference}")


RECAP_A = recap("小满入城", "- 第一天黄昏，小满入城，在东门遇见阿明。")
RECAP_A2 = recap("小满入城，又去了茶馆", "- 小满入城。\n- 第二天去了茶馆。")
RECAP_B = recap("雪夜借宿", "- 雪夜里阿明在老梨树下借宿。", "喜欢慢节奏的日常对话")
HANDBOOK_1 = "# 局：初来乍到（A）\n- 小满入城\n来源：局/A.md\n\n# 人物（跨局）\n- 小满：茶馆帮工 [局:A][局:B]"
RESIDENT_1 = "# 往局记忆（同一世界更早的几局）\n\n## 既定事实\n- 小满住在城东 [局:A]\n\n- 初来乍到：小满入城。"
HANDBOOK_2 = "# 局：初来乍到（A）\n- 小满入城\n来源：局/A.md"
RESIDENT_2 = "# 往局记忆（同一世界更早的几局）\n\n- 初来乍到：小满入城。"


def merge_reply(handbook: str = HANDBOOK_1, resident: str = RESIDENT_1) -> str:
    """A well-formed (hand-written) merge reply."""
    return f"{HANDBOOK_MARK}\n{handbook}\n{RESIDENT_MARK}\n{resident}\n"


def merge_for(*chat_ids: str, note: str = "一") -> str:
    """A hand-written merge reply with one block per chat (the merge check wants them)."""
    blocks = "\n\n".join(f"# 局：{c}（{c}）\n- {note}\n来源：局/{c}.md" for c in chat_ids)
    lines = "\n".join(f"- {c}：{note} [局:{c}]" for c in chat_ids)
    return merge_reply(blocks, f"# 往局记忆（同一世界更早的几局）\n\n{lines}")


def write_chat(
    card: Path,
    chat_id: str,
    turns: Sequence[tuple[str, str]],
    *,
    name: str | None = None,
    session: str = "s1.jsonl",
) -> SessionTree:
    """Create (or extend) a chat's session file with ``(role, text)`` messages."""
    chat_dir = card / "对话" / chat_id
    if name is not None:
        chat_dir.mkdir(parents=True, exist_ok=True)
        (chat_dir / "meta.json").write_text(json.dumps({"name": name}, ensure_ascii=False), encoding="utf-8")
    path = chat_dir / "会话" / session
    tree = SessionTree(path, session_id=session, clock=fixed_clock(), ids=counter_ids(f"{chat_id}-{session}-"))
    if len(tree):
        # Continue the id sequence of an existing file.
        tree = SessionTree(path, session_id=session, clock=fixed_clock(),
                           ids=counter_ids(f"{chat_id}-{session}-more{len(tree)}-"))
    for role, text in turns:
        tree.append_message(role, text)
    return tree


def two_chats(card: Path) -> None:
    """Chats A 初来乍到 and B 雪夜, one turn each."""
    write_chat(card, "A", [("assistant", "（开场）城门口。"), ("user", "我进城了。"), ("assistant", "小满抬头。")],
               name="初来乍到")
    write_chat(card, "B", [("user", "雪好大。"), ("assistant", "老梨树下有间屋。")], name="雪夜")


def memory(card: Path, model: ChatModel, **kwargs: object) -> CardMemory:
    """A CardMemory with fixed names, clock and ids."""
    return CardMemory(card, model, SyncSettings(USER, CHAR), clock=fixed_clock(),
                      ids=counter_ids("t"), **kwargs)  # type: ignore[arg-type]


def user_text(request: ModelRequest) -> str:
    return next(m.content for m in request.messages if m.role == "user")


def system_text(request: ModelRequest) -> str:
    return next(m.content for m in request.messages if m.role == "system")


def two_chat_model() -> FunctionModel:
    """A scripted side model (not a model) for a card of two chats, 甲 (jA) and 乙 (jB): a
    recap per chat, one merge of both."""
    def reply(request: ModelRequest) -> str:
        if request.purpose == "recap":
            chat = "甲" if "甲的" in user_text(request) else "乙"
            return recap(f"{chat}局", f"- {chat}局里的事。")
        return merge_for("jA", "jB")
    return FunctionModel(reply)
