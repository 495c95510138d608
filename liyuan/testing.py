"""A test double for the side model: rule-made replies of the right shape, NOT a model.

Use it where no model can run (tests, examples, a first try of the library)::

    from liyuan import Card
    from liyuan.testing import placeholder_side_model

    card = Card.open("cards/雾港", side_model=placeholder_side_model())

:func:`placeholder_side_model` answers each side-model request by rule, with a document
of exactly the shape the library's checks demand (the contract a real side model must
meet, see the app page 「接入你的应用」): a relay summary with the five
:data:`~liyuan.story.scribe.SUMMARY_HEADINGS`; a recap with a ``# `` title line and the
five :data:`~liyuan.card.prompts.RECAP_HEADINGS`; a merge with the two documents after
:data:`~liyuan.card.prompts.HANDBOOK_MARK` and :data:`~liyuan.card.prompts.RESIDENT_MARK`,
the handbook keeping one block per chat (its ``来源：局/<id>.md`` line) and the resident
summary opening with :data:`~liyuan.card.prompts.RESIDENT_HEADING`; a discussion summary
as a short list.

Invariants: nothing here is written by a model: every reply carries the label
:data:`PLACEHOLDER` (in each section of a summary or recap, under each mark of a merge)
and ``provenance="scripted"``; the same request gets the same reply. The content is a
placeholder: no fact of the story is in it. Swap in :class:`~liyuan.model.OpenAIModel`
for real summaries.
"""

from __future__ import annotations

import re

from liyuan.card.prompts import HANDBOOK_MARK, RECAP_HEADINGS, RESIDENT_HEADING, RESIDENT_MARK
from liyuan.errors import ModelError
from liyuan.model import Completion, FunctionModel, ModelRequest
from liyuan.story.scribe import SUMMARY_HEADINGS

__all__ = ["PLACEHOLDER", "placeholder_side_model", "placeholder_text"]

PLACEHOLDER = "（示范占位：按规则拼出的文字，不是模型输出）"
"""The label every reply of the test double carries."""

_CHAT_ID = r"[A-Za-z0-9_-]+"


def _summary(prompt: str) -> str:
    turns = prompt.count("\n\n") + 1
    return "\n\n".join(f"{heading}\n- {PLACEHOLDER}这里本该是「{heading[3:]}」一节；被压缩的对话约 {turns} 段。"
                       for heading in SUMMARY_HEADINGS)


def _recap(prompt: str) -> str:
    match = re.search(r'<conversation chat="([^"]*)"', prompt)
    name = match.group(1) if match else "这一局"
    return "\n\n".join([f"# {name}：示范复盘", *(f"{heading}\n- {PLACEHOLDER}" for heading in RECAP_HEADINGS)])


def _merge(prompt: str) -> str:
    """Keep the handbook's chat blocks, replace or add the recapped chats', drop the deleted ones."""
    handbook = re.search(r"<handbook>\n(.*?)\n</handbook>", prompt, re.S)
    blocks = {m.group(1): m.group(0).strip()
              for m in re.finditer(rf"# 局：[^\n]*（({_CHAT_ID})）\n.*?来源：局/\1\.md", handbook.group(1), re.S)
              } if handbook else {}
    deleted = re.search(r"<deleted-chats>\n(.*?)</deleted-chats>", prompt, re.S)
    for chat_id in re.findall(rf"局/({_CHAT_ID})\.md", deleted.group(1) if deleted else ""):
        blocks.pop(chat_id, None)
    for chat_id, name, text in re.findall(r'<recap chat-id="([^"]+)" chat-name="([^"]*)">\n(.*?)\n</recap>',
                                          prompt, re.S):
        title = text.strip().splitlines()[0].lstrip("# ")
        blocks[chat_id] = f"# 局：{name}（{chat_id}）\n- {title}\n来源：局/{chat_id}.md"
    lines = [f"- {blocks[chat_id].splitlines()[1][2:]} [局:{chat_id}]" for chat_id in sorted(blocks)]
    resident = "\n".join([RESIDENT_HEADING, PLACEHOLDER, *lines])
    return "\n".join([HANDBOOK_MARK, PLACEHOLDER, "", *(blocks[k] + "\n" for k in sorted(blocks)),
                      RESIDENT_MARK, resident])


def _discussion(_prompt: str) -> str:
    return f"- {PLACEHOLDER}"


_WRITERS = {"summary": _summary, "recap": _recap, "merge": _merge, "discussion": _discussion}


def placeholder_text(purpose: str, prompt: str) -> str:
    """The test double's reply to a request of ``purpose`` whose last user text is ``prompt``.

    Raises:
        ModelError: A purpose the double does not answer (``summary``, ``recap``,
            ``merge`` and ``discussion`` are answered).
    """
    writer = _WRITERS.get(purpose)
    if writer is None:
        raise ModelError(f"示范占位的旁路模型不回答用途 {purpose!r} 的请求（只回答 {'、'.join(_WRITERS)}）")
    return writer(prompt)


def placeholder_side_model() -> FunctionModel:
    """The test double: answers summary, recap, merge and discussion requests by rule.

    Not a model: every reply is a labelled placeholder (``provenance="scripted"``) that
    passes the library's shape checks, so compaction, recaps and the merge run end to
    end. Its requests are kept in ``.calls``.
    """

    def answer(request: ModelRequest) -> Completion:
        prompt = request.messages[-1].content if request.messages else ""
        return Completion(text=placeholder_text(request.purpose, prompt), provenance="scripted")

    return FunctionModel(answer)
