"""Issue 38 items 1-2: an edited or deleted turn takes back what was built from it, through every layer.

A 40-turn chat whose second reply states a fact (the code word 青鸾) has been compacted
several times, archived into vector memory, recapped and merged into the handbook and the
resident summary. Then ``chat.edit`` changes that reply (the code word becomes 白鹭) or
``chat.delete`` removes it. One test per layer checks that the old fact is gone from it
(after the card has settled: the rewrite of the relay landed and a sync ran) and, for an
edit, that the new one reaches it.

The side model is scripted (no model wrote any of its replies): it carries every code word
it is shown into what it writes, the way a careful summariser keeps every fact. So an old
fact can leave a layer only if the code stops showing it to the model.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from liyuan import Card, Completion, FunctionModel, MemoryConfig, ModelRequest
from liyuan.app.chat import Chat
from liyuan.card.prompts import HANDBOOK_MARK, RECAP_HEADINGS, RESIDENT_HEADING, RESIDENT_MARK
from liyuan.clock import counter_ids, fixed_clock
from liyuan.session.entries import Entry
from liyuan.story.scribe import SUMMARY_HEADINGS
from liyuan.vector.config import VectorConfig

OLD, NEW = "青鸾", "白鹭"
FACT = re.compile(r"暗号是(青鸾|白鹭|黄雀)")
SCRIPTED = "（测试脚本写的，不是模型输出）"
# settle_turns=0: the rewrite runs right after the change (an edit waits for the window like a swipe).
CONFIG = MemoryConfig(every_n_turns=6, keep=2, settle_turns=0, vector=VectorConfig(enabled=True, embedder="hash"))
TURNS = 40


def _facts(text: str) -> list[str]:
    return list(dict.fromkeys(f"暗号是{word}" for word in FACT.findall(text)))


def _answer(request: ModelRequest) -> Completion:
    """Scripted side model: every code word of the request goes into its reply."""
    prompt = request.messages[-1].content
    facts = "\n".join(f"- {fact}" for fact in _facts(prompt)) or "- 无"
    if request.purpose == "summary":
        text = "\n\n".join(f"{heading}\n- {SCRIPTED}\n{facts}" for heading in SUMMARY_HEADINGS)
    elif request.purpose == "recap":
        name = re.search(r'<conversation chat="([^"]*)"', prompt)
        text = "\n\n".join([f"# {name.group(1) if name else '这一局'}：复盘",
                            *(f"{heading}\n- {SCRIPTED}\n{facts}" for heading in RECAP_HEADINGS)])
    elif request.purpose == "merge":
        # Keeps every cross-chat line of the handbook it is shown, adds each recap's facts
        # under that chat's tag, and writes the resident summary from every fact it is shown.
        handbook_in = re.search(r"<handbook>\n(.*?)\n</handbook>", prompt, re.S)
        kept = re.findall(r"^- 暗号是.*\[局:.*$", handbook_in.group(1) if handbook_in else "", re.M)
        blocks, shared = [], list(kept)
        for chat_id, name, recap in re.findall(r'<recap chat-id="([^"]+)" chat-name="([^"]*)">\n(.*?)\n</recap>',
                                               prompt, re.S):
            lines = "\n".join(f"- {fact}" for fact in _facts(recap))
            blocks.append(f"# 局：{name}（{chat_id}）\n- {SCRIPTED}\n{lines}\n来源：局/{chat_id}.md")
            shared += [f"- {fact} [局:{chat_id}]" for fact in _facts(recap)]
        shared_text = "\n".join(dict.fromkeys(shared)) or f"- {SCRIPTED}"
        handbook = "\n\n".join([*blocks, f"# 世界既定事实（跨局）\n{shared_text}"])
        resident = "\n".join([RESIDENT_HEADING, SCRIPTED, facts])
        text = "\n".join([HANDBOOK_MARK, handbook, RESIDENT_MARK, resident])
    else:
        text = f"- {SCRIPTED}"
    return Completion(text, provenance="scripted")


@dataclass
class Played:
    card: Card
    chat: Chat
    fact_reply: Entry
    changed_at: int
    """How many entries the tree held before the change (the change is the next one)."""
    sent: list[str]
    """Every request to the role-play model after the edit, as one text each."""


def _play(chat: Chat, turn: int) -> str:
    prepared = chat.prepare(f"第{turn}轮，阿简问起码头的事。")
    reply = f"第{turn}轮，林溯答道：" + "雾" * 120 + ("暗号是青鸾。" if turn == 2 else "")
    chat.record(reply)
    return "\n".join(m.content for m in prepared.messages)


def _sent_after(played: Played, turns: int) -> None:
    for turn in range(TURNS + 1, TURNS + 1 + turns):
        played.sent.append(_play(played.chat, turn))


@pytest.fixture(params=["edit", "delete"])
def played(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Played]:
    card = Card.open(tmp_path / "cards" / "雾港", user_name="阿简", char_name="林溯",
                     side_model=FunctionModel(_answer), config=CONFIG, background=False, auto_sync=False,
                     clock=fixed_clock(), ids=counter_ids("e-"))
    try:
        other = card.chat("side", title="旁局")  # a second chat keeps its own block in the handbook
        other.prepare("旁局里阿简闲聊。")
        other.record("旁局里林溯说起天气，" + "晴" * 40)
        chat = card.chat("main", title="主局")
        for turn in range(1, TURNS + 1):
            _play(chat, turn)
        fact = next(e for e in chat.branch() if e.role == "assistant" and OLD in e.text)
        card.sync()
        # Preconditions: the old fact is in every layer before the change.
        assert OLD in (chat.summary or "")
        assert any(OLD in c.text for c in chat.vector.list_chunks()) if chat.vector else False
        memory = card.memory.layout
        for path in (memory.recap_path("main"), memory.handbook, memory.resident):
            assert OLD in path.read_text(encoding="utf-8"), path
        changed_at = len(chat.tree)
        if request.param == "edit":
            chat.edit(fact.id, fact.text.replace(OLD, NEW))
        else:
            chat.delete(fact.id)
        played = Played(card, chat, fact, changed_at, [])
        _sent_after(played, 12)  # the relay's rewrite lands over these turns
        card.sync()
        yield played
    finally:
        card.close(10.0)


def _is_edit(played: Played) -> bool:
    return any(e.custom_type == "rp-edit" for e in played.chat.tree)


def test_no_later_request_to_the_role_play_model_holds_the_old_fact(played: Played) -> None:
    assert played.sent
    for text in played.sent:
        assert OLD not in text
    if _is_edit(played):
        assert NEW in played.sent[0]  # the edited fact reaches the model at once
        assert NEW in played.sent[-1]  # and after the rewrite, through the summary
    # the old text stays on record
    assert OLD in played.chat.tree.get(played.fact_reply.id).text  # type: ignore[union-attr]


def test_no_summary_written_or_replayed_after_the_change_holds_the_old_fact(played: Played) -> None:
    chat = played.chat
    assert chat.summary is not None and OLD not in chat.summary
    later = [e for e in chat.tree.entries()[played.changed_at:] if e.custom_type == "rp-summary"]
    assert later, "the relay was rewritten"
    assert all(OLD not in e.data["summary"] for e in later)
    if _is_edit(played):
        assert NEW in chat.summary


def test_no_recall_chunk_holds_the_old_fact(played: Played) -> None:
    vector = played.chat.vector
    assert vector is not None
    chunks = vector.store.chunks()
    assert chunks
    assert [c.text for c in chunks if OLD in c.text] == []
    hits = vector.search("暗号")
    assert all(OLD not in hit.text for hit in hits)
    if _is_edit(played):
        assert any(NEW in c.text for c in chunks)


def _memory_text(played: Played, which: str) -> str:
    layout = played.card.memory.layout
    path = {"recap": layout.recap_path("main"), "handbook": layout.handbook, "resident": layout.resident}[which]
    return path.read_text(encoding="utf-8")


def test_the_recap_no_longer_holds_the_old_fact(played: Played) -> None:
    text = _memory_text(played, "recap")
    assert OLD not in text
    if _is_edit(played):
        assert NEW in text


def test_the_handbook_no_longer_holds_the_old_fact(played: Played) -> None:
    text = _memory_text(played, "handbook")
    assert OLD not in text
    assert "来源：局/side.md" in text  # the other chat's block is kept
    if _is_edit(played):
        assert NEW in text


def test_the_resident_summary_no_longer_holds_the_old_fact(played: Played) -> None:
    text = _memory_text(played, "resident")
    assert OLD not in text
    if _is_edit(played):
        assert NEW in text
