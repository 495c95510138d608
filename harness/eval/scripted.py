"""The scripted summariser: a labelled, rule-made stand-in for the side model (no model is involved).

Invariant: its reply is a pure function of the request text, carries :data:`SCRIPTED_LABEL`
and says what it covered; it condenses nothing, so nothing measured with it says how good
a summary is.
"""

from __future__ import annotations

import re

from liyuan.model import FunctionModel, ModelRequest

__all__ = ["SCRIPTED_LABEL", "scripted_summariser"]

SCRIPTED_LABEL = "（脚本摘要：按规则从压缩请求的文字拼出，不是模型输出）"

_CONVERSATION_RE = re.compile(r"<conversation>\n(.*?)\n</conversation>", re.DOTALL)
_PREVIOUS_RE = re.compile(r"<previous-summary>\n(.*?)\n</previous-summary>", re.DOTALL)


def scripted_summariser(user_name: str, char_name: str) -> FunctionModel:
    """A stand-in summariser: a deterministic summary made by rule from the request.

    It counts the covered blocks and characters, quotes the start of the first and last
    block, and takes the scene from the ledger lines; it condenses nothing. Its replies
    carry :data:`SCRIPTED_LABEL` and ``provenance="scripted"``.
    """

    def reply(request: ModelRequest) -> str:
        user = "\n\n".join(m.content for m in request.messages if m.role == "user")
        match = _CONVERSATION_RE.search(user)
        conversation = match.group(1) if match else ""
        blocks = [b for b in conversation.split("\n\n") if b.strip()]
        previous = _PREVIOUS_RE.search(user)
        merged = f"；并入此前摘要 {len(previous.group(1))} 字" if previous else ""
        first = blocks[0][:30] if blocks else ""
        last = blocks[-1][:30] if blocks else ""
        scope = f"覆盖 {len(blocks)} 段、{len(conversation)} 字{merged}"
        if request.purpose == "summary":
            when = next((ln for ln in user.splitlines() if ln.startswith("时间：")), "时间：（账本没有记）")
            where = next((ln for ln in user.splitlines() if ln.startswith("地点：")), "地点：（账本没有记）")
            return (f"## 前情提要\n- {SCRIPTED_LABEL}{scope}。\n- 开头：{first}…\n- 结尾：{last}…\n\n"
                    f"## 人物\n- {user_name}、{char_name}（脚本摘要不提炼人物）\n\n"
                    f"## 承诺与伏笔\n- （脚本摘要不提炼伏笔）\n\n## 事实账\n- （脚本摘要不抄账本）\n\n"
                    f"## 当前场景\n- {when}；{where}")
        return (f"## Goal\n- {SCRIPTED_LABEL}{scope}。\n\n## Progress\n### Done\n- 开头：{first}…\n\n"
                f"## Critical Context\n- 结尾：{last}…")

    return FunctionModel(reply)
