"""A stand-in side model for the examples: hand-written, rule-made replies, NOT model output.

No capable chat model runs where these examples are tested, so the summaries, recaps and
the handbook they produce are placeholders that have the right shape (the five summary
sections, a recap's title and sections, the merge's two marked documents) and say on
their first line that no model wrote them. Their completions carry
``provenance="scripted"``. Swap in ``OpenAIModel(model=...)`` for real output.
"""

from __future__ import annotations

import re

from liyuan import Completion, FunctionModel, ModelRequest

PLACEHOLDER = "（示范占位：按规则拼出的文字，不是模型输出）"

SUMMARY_SECTIONS = ("前情提要", "人物", "承诺与伏笔", "事实账", "当前场景")
RECAP_SECTIONS = ("剧情脉络", "人物与关系", "既定事实", "未了之事", "用户的玩法偏好")
RESIDENT_HEADING = "# 往局记忆（同一世界更早的几局）"


def _summary(request: ModelRequest) -> str:
    turns = request.messages[-1].content.count("\n\n") + 1
    body = [f"## {name}\n- {PLACEHOLDER}这里本该是「{name}」一节；被压缩的对话约 {turns} 段。"
            for name in SUMMARY_SECTIONS]
    return "\n\n".join(body)


def _recap(request: ModelRequest) -> str:
    match = re.search(r'chat-name="([^"]*)"', request.messages[-1].content)
    name = match.group(1) if match else "这一局"
    sections = [f"## {name_}\n- {PLACEHOLDER}" for name_ in RECAP_SECTIONS]
    return "\n\n".join([f"# {name}：示范复盘", *sections])


def _merge(request: ModelRequest) -> str:
    """Keep the handbook's blocks, replace or add the changed chats', drop the deleted ones."""
    prompt = request.messages[-1].content
    handbook = re.search(r"<handbook>\n(.*?)\n</handbook>", prompt, re.S)
    blocks = {m.group(1): m.group(0).strip()
              for m in re.finditer(r"# 局：[^\n]*（([A-Za-z0-9_-]+)）\n.*?来源：局/\1\.md", handbook.group(1), re.S)
              } if handbook else {}
    deleted = re.search(r"<deleted-chats>\n(.*?)</deleted-chats>", prompt, re.S)
    for chat_id in re.findall(r"局/([A-Za-z0-9_-]+)\.md", deleted.group(1) if deleted else ""):
        blocks.pop(chat_id, None)
    for chat_id, name, text in re.findall(r'<recap chat-id="([^"]+)" chat-name="([^"]*)">\n(.*?)\n</recap>',
                                          prompt, re.S):
        title = text.strip().splitlines()[0].lstrip("# ")
        blocks[chat_id] = f"# 局：{name}（{chat_id}）\n- {title}\n来源：局/{chat_id}.md"
    lines = [f"- {block.splitlines()[1][2:]} [局:{chat_id}]" for chat_id, block in sorted(blocks.items())]
    resident = "\n".join([RESIDENT_HEADING, PLACEHOLDER, *lines])
    return "\n".join(["===== 记忆.md =====", PLACEHOLDER, "", *(blocks[k] + "\n" for k in sorted(blocks)),
                      "===== 常驻摘要.md =====", resident])


def demo_side_model() -> FunctionModel:
    """The stand-in: answers ``summary``, ``recap`` and ``merge`` requests by rule."""
    writers = {"summary": _summary, "recap": _recap, "merge": _merge}

    def answer(request: ModelRequest) -> Completion:
        return Completion(text=writers[request.purpose](request), provenance="scripted")

    return FunctionModel(answer)
