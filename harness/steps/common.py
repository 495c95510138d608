"""Helpers shared by step handlers: prompt text, provenance lines, shared services.

Invariant: services (card memory, vector memory) are created once per scenario run,
inside the run's private work dir, with the run's fixed clock; nothing here touches the
repository.
"""

from __future__ import annotations

import json
from typing import Any

from liyuan.card.files import CHAT_META_FILE

from ..recorder import CallRecord
from ..run_state import ScenarioRun

__all__ = [
    "card_memory",
    "context_label",
    "prompt_label",
    "prompt_text",
    "resident_text",
]

PROMPT_LINE_SCRIPTED = "（完整 prompt，由 liyuan 代码拼出；里面的对话和前文回复都是人工撰写的示范，不是模型输出）"
PROMPT_LINE_LIVE = "（完整 prompt，由 liyuan 代码拼出；里面的对话是人工撰写的剧本）"
CONTEXT_LINE_SCRIPTED = "（组装出的上下文，由 liyuan 代码拼出；里面的对话和摘要都是人工撰写的示范，不是模型输出）"
CONTEXT_LINE_LIVE = "（组装出的上下文，由 liyuan 代码拼出；对话是人工撰写的剧本）"
PROMPT_LINE_IMPORTED = "（完整 prompt，由 liyuan 代码拼出；里面的对话来自导入的聊天记录）"
CONTEXT_LINE_IMPORTED = "（组装出的上下文，由 liyuan 代码拼出；对话来自导入的聊天记录）"
_PLACEHOLDER_TAIL = "；其中的摘要、复盘和记忆是占位回复，不是模型输出）"


def prompt_text(call: CallRecord) -> str:
    """A recorded request as text: the system part, then the user part."""
    parts = []
    for message in call.request["messages"]:
        parts.append(f"===== {message['role']} =====\n{message['content']}")
    return "\n\n".join(parts)


def prompt_label(run: ScenarioRun) -> str:
    """First line of a prompt txt: who wrote what is inside."""
    if run.scenario.source is not None:
        scripted = run.setup.kind == "scripted"
        return PROMPT_LINE_IMPORTED.removesuffix("）") + _PLACEHOLDER_TAIL if scripted else PROMPT_LINE_IMPORTED
    return PROMPT_LINE_SCRIPTED if run.setup.kind == "scripted" else PROMPT_LINE_LIVE


def context_label(run: ScenarioRun) -> str:
    """First line of an assembled-context txt."""
    if run.scenario.source is not None:
        scripted = run.setup.kind == "scripted"
        return CONTEXT_LINE_IMPORTED.removesuffix("）") + _PLACEHOLDER_TAIL if scripted else CONTEXT_LINE_IMPORTED
    return CONTEXT_LINE_SCRIPTED if run.setup.kind == "scripted" else CONTEXT_LINE_LIVE


def card_memory(run: ScenarioRun) -> Any:
    """The card's :class:`liyuan.card.sync.CardMemory`, created on first use.

    Every chat of the scenario gets its folder and ``meta.json`` (its display name), so a
    chat with no sessions (one that exists only as a hand-written recap) still has a name.
    """
    if "card_memory" in run.services:
        return run.services["card_memory"]
    from liyuan.card import CardMemory

    for chat_id, spec in run.scenario.chats.items():
        folder = run.chat_dir(chat_id)
        folder.mkdir(parents=True, exist_ok=True)
        meta = folder / CHAT_META_FILE
        if not meta.exists():
            meta.write_text(json.dumps({"name": spec.name}, ensure_ascii=False) + "\n", encoding="utf-8")
    from liyuan.card.inputs import RECAP_INPUT_MAX_CHARS

    memory = CardMemory(run.card_dir, run.recorder, user_name=run.scenario.user, char_name=run.scenario.char,
                        language=run.scenario.language, clock=run.clock, on_activity=run.on_activity,
                        recap_input_max_chars=run.config("recap_input_max_chars", RECAP_INPUT_MAX_CHARS),
                        merge_recap_max_chars=run.config("merge_recap_max_chars", None))
    run.services["card_memory"] = memory
    return memory


def resident_text(run: ScenarioRun) -> str | None:
    """The card's resident summary as stored (unfitted: :func:`liyuan.context.assemble.assemble_turn` fits it)."""
    memory = run.services.get("card_memory")
    if memory is None:
        return None
    text: str | None = memory.load_resident_summary()
    return text
