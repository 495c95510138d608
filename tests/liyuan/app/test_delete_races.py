"""Deleting a chat while the card's background sync is working on it.

``Card.delete_chat("jA")`` is called while the worker's sync waits on the side model: the
recap call of jA itself, or the merge call. Neither call holds a lock, so the delete goes
through at once; what the sync writes afterwards must not bring jA back. The side model
is a hand-written stand-in, not model output: a recap repeats what the user said (and
keeps its previous recap, as the prompt asks), a merge keeps every chat it was given
except the deleted ones. So what a deleted chat said can only reach memory through a
recap or merge built from it.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from liyuan import Activity, Card, Completion, FunctionModel, ModelRequest
from liyuan.card.files import MemoryFiles
from liyuan.card.layout import CardLayout
from liyuan.card.manifest import load_manifest
from liyuan.card.prompts import HANDBOOK_MARK, RESIDENT_MARK
from liyuan.card.sync import SyncOutcome
from liyuan.clock import counter_ids, fixed_clock

from ..card.test_fixtures import recap, user_text, write_chat

SECRET = "灯塔密信"
"""What the user said in the chat that gets deleted; nothing else says it."""
KEPT = "雪夜梨树"
"""What the user said in jB, which stays."""

_SAID_RE = re.compile(r"^- 说过：(.+)$", re.MULTILINE)
_BLOCK_RE = re.compile(r"^# 局：(\S+?)（\S+?）\n(.*?)^来源：局/\1\.md$", re.MULTILINE | re.DOTALL)
_RECAP_RE = re.compile(r'<recap chat-id="([^"]+)"[^>]*>\n(.*?)\n</recap>', re.DOTALL)
_RESIDENT_RE = re.compile(r"^- (.+) \[局:([^\]]+)\]$", re.MULTILINE)
_DELETED_RE = re.compile(r"^- 局/([^/\s]+)\.md(?:（.*）)?$", re.MULTILINE)


def _said(lines: list[str]) -> str:
    return "\n".join(f"- 说过：{line}" for line in lines)


def _recap_for(request: ModelRequest) -> str:
    """The previous recap's lines, then every user line of the transcript."""
    text = user_text(request)
    chat = re.search(r'<conversation chat="([^"]+)"', text)
    assert chat is not None
    previous = text.split("<previous-recap>", 1)[1].split("</previous-recap>", 1)[0] \
        if "<previous-recap>" in text else ""
    transcript = text.split("</conversation>", 1)[0]
    said = _SAID_RE.findall(previous)
    said += [line for line in re.findall(r"^阿明：(.+)$", transcript, re.MULTILINE) if line not in said]
    return recap(f"{chat.group(1)}的一局", _said(said))


def _honest_merge(request: ModelRequest) -> str:
    """As the merge prompt asks: a block for each recap sent, the cross-chat section and the
    whole resident summary (one line per live chat), without the deleted chats."""
    text = user_text(request)
    said = {c: _SAID_RE.findall(body) for c, body in _BLOCK_RE.findall(text.split("</handbook>", 1)[0])}
    said |= {c: _SAID_RE.findall(body) for c, body in _RECAP_RE.findall(text)}
    resident = {c: words for words, c in _RESIDENT_RE.findall(text.split("</resident>", 1)[0])}
    resident |= {c: "、".join(lines) for c, lines in said.items()}
    if "<deleted-chats>" in text:
        for chat_id in _DELETED_RE.findall(text.split("<deleted-chats>", 1)[1].split("</deleted-chats>", 1)[0]):
            said.pop(chat_id, None)
            resident.pop(chat_id, None)
    blocks = "".join(f"# 局：{c}（{c}）\n{_said(lines)}\n来源：局/{c}.md\n\n" for c, lines in sorted(said.items()))
    shared = "# 人物（跨局）\n- 小满：茶馆帮工。" + "".join(f"[局:{c}]" for c in sorted(resident))
    lines = "\n".join(f"- {words} [局:{c}]" for c, words in sorted(resident.items()))
    return f"{HANDBOOK_MARK}\n{blocks}{shared}\n{RESIDENT_MARK}\n# 往局记忆（同一世界更早的几局）\n\n{lines}\n"


@dataclass
class Gate:
    """Holds the first model call of one purpose (and, for recaps, of one chat) until released."""

    purpose: str
    chat_id: str | None = None
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    armed: bool = False

    def hold(self, request: ModelRequest) -> None:
        if not self.armed or request.purpose != self.purpose:
            return
        if self.chat_id is not None and f'<conversation chat="{self.chat_id}"' not in user_text(request):
            return
        self.armed = False
        self.reached.set()
        assert self.release.wait(10)


def _side_model(gate: Gate) -> FunctionModel:
    def answer(request: ModelRequest) -> Completion:
        gate.hold(request)
        return Completion(_recap_for(request) if request.purpose == "recap" else _honest_merge(request))

    return FunctionModel(answer)


def _turn(card: Path, chat_id: str, words: str) -> None:
    # 001.jsonl: the name Card gives a chat's first session, so a chat reopened under the
    # same id writes a file of the same name.
    write_chat(card, chat_id, [("user", words), ("assistant", "嗯。")], session="001.jsonl")


def _setup(tmp_path: Path, gate: Gate) -> tuple[Path, Card, FunctionModel, list[Activity]]:
    path = tmp_path / "cards" / "雾港"
    _turn(path, "jA", f"{SECRET}一")
    _turn(path, "jB", f"{KEPT}一")
    model, seen = _side_model(gate), list[Activity]()
    card = Card.open(path, side_model=model, user_name="阿明", char_name="小满", clock=fixed_clock(),
                     ids=counter_ids("d-"), on_activity=seen.append)
    return path, card, model, seen


def _all_memory(path: Path) -> str:
    memory = path / "记忆"
    files = [memory / "记忆.md", memory / "常驻摘要.md", *sorted((memory / "局").glob("*.md"))]
    return "\n".join(p.read_text(encoding="utf-8") for p in files if p.exists())


def _delete_during(gate: Gate, card: Card) -> SyncOutcome:
    gate.armed = True
    card.sync(wait=False)
    assert gate.reached.wait(10)
    assert card.delete_chat("jA") is True  # returns at once: no lock is held across the call
    gate.release.set()
    outcome = card.sync(timeout=10)  # the run under way and the one the delete queued
    assert outcome is not None and outcome.errors == []
    return outcome


def _assert_clean_resync(card: Card, model: FunctionModel, path: Path) -> None:
    before, memory = len(model.calls), _all_memory(path)
    again = card.sync(timeout=10)
    assert again is not None and (again.recapped, again.failed, again.forgotten, again.errors) == ([], [], [], [])
    assert again.merged == "no-change" and model.calls[before:] == [] and _all_memory(path) == memory


def _assert_gone(path: Path, card: Card, model: FunctionModel, seen: list[Activity]) -> None:
    """jA is gone everywhere, jB is intact, nothing went wrong, and a further sync is clean."""
    assert not (path / "记忆" / "局" / "jA.md").exists()
    assert not (path / "对话" / "jA").exists() and card.chat_ids() == ["jB"]
    memory = _all_memory(path)
    assert SECRET not in memory and "[局:jA]" not in memory and "局/jA.md" not in memory
    assert f"{KEPT}一" in (path / "记忆" / "记忆.md").read_text(encoding="utf-8")
    assert f"{KEPT}一" in (path / "记忆" / "常驻摘要.md").read_text(encoding="utf-8")
    manifest = load_manifest(MemoryFiles(CardLayout(path)))
    record = manifest.recaps.get("jA")
    assert record is None or record.merged_hash is None  # not live: nothing left to merge or forget
    assert manifest.manual is None or not manifest.manual.pending
    assert not [a for a in seen if a.kind == "error"]
    _assert_clean_resync(card, model, path)


@pytest.mark.parametrize("merged_before", [False, True], ids=["first-recap", "re-recap-of-merged-chat"])
def test_delete_while_the_recap_of_that_chat_is_pending(tmp_path: Path, merged_before: bool) -> None:
    gate = Gate("recap", "jA")
    path, card, model, seen = _setup(tmp_path, gate)
    try:
        if merged_before:
            assert card.sync(timeout=10) is not None and SECRET in _all_memory(path)
            _turn(path, "jA", f"{SECRET}二")  # jA moved on: the next sync recaps it again
        outcome = _delete_during(gate, card)
        assert "jA" not in outcome.recapped  # its reply came back after the delete and was dropped
        assert any("复盘「jA」已丢弃" in a.text for a in seen)
        _assert_gone(path, card, model, seen)
    finally:
        gate.release.set()
        assert card.close(10)


@pytest.mark.parametrize("merged_before", [False, True], ids=["jA-in-this-merge", "jA-merged-earlier"])
def test_delete_while_the_merge_call_is_pending(tmp_path: Path, merged_before: bool) -> None:
    gate = Gate("merge")
    path, card, model, seen = _setup(tmp_path, gate)
    try:
        if merged_before:
            assert card.sync(timeout=10) is not None and SECRET in _all_memory(path)
            _turn(path, "jB", f"{KEPT}二")  # only jB changes: the merge is given jA's block as it was
        _delete_during(gate, card)
        assert any("合并结果已丢弃" in a.text for a in seen)  # the merge that still held jA
        _assert_gone(path, card, model, seen)
    finally:
        gate.release.set()
        assert card.close(10)


@pytest.mark.parametrize("new_turns", [0, 6], ids=["greeting-only", "played-longer-than-the-old-chat"])
def test_a_chat_reopened_under_the_deleted_id_does_not_inherit_the_pending_recap(
        tmp_path: Path, new_turns: int) -> None:
    gate = Gate("recap", "jA")
    path, card, model, seen = _setup(tmp_path, gate)
    try:
        gate.armed = True
        card.sync(wait=False)
        assert gate.reached.wait(10)
        session = path / "对话" / "jA" / "会话" / "001.jsonl"
        old_size = session.stat().st_size
        assert card.delete_chat("jA") is True
        chat = card.chat("jA", greeting="新的一局开场。")  # the app starts a new chat under the same id
        for i in range(new_turns):
            chat.prepare(f"新局的话{i}。")
            chat.record("嗯。")
        assert (session.stat().st_size > old_size) == bool(new_turns)  # same name; smaller, or larger
        gate.release.set()
        outcome = card.sync(timeout=10)
        assert outcome is not None and outcome.errors == [] and not [a for a in seen if a.kind == "error"]
        memory = _all_memory(path)
        assert SECRET not in memory and f"{KEPT}一" in memory  # the deleted chat's words stay gone
        recap_a = path / "记忆" / "局" / "jA.md"
        if new_turns:
            assert "新局的话5" in recap_a.read_text(encoding="utf-8")  # the new chat's own recap
        else:
            assert not recap_a.exists()
        _assert_clean_resync(card, model, path)
    finally:
        gate.release.set()
        assert card.close(10)
