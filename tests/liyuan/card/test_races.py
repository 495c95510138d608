"""Hard-path calls that race a sync (the reviewer's /tmp/rev/race.py and race2.py as tests).

A forget that lands between the sync loading the manifest and taking its input stamp
must neither be sent through ``<deleted-chats>`` nor bring a forgotten recap back. Every
reply here is a hand-written stand-in (FunctionModel / ScriptedModel), not model output.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from liyuan.card import manual as card_manual
from liyuan.card.files import MemoryFiles, sha1_text
from liyuan.card.layout import CardLayout
from liyuan.card.lock import card_locks
from liyuan.card.manifest import load_manifest, save_manifest
from liyuan.model import FunctionModel, ModelRequest, ScriptedModel

from .test_fixtures import RECAP_A, RECAP_A2, RECAP_B, RESIDENT_2, memory, merge_reply, recap, user_text, write_chat


class LandsAtTheStamp(MemoryFiles):
    """When armed, a hard-path call from another thread arrives as the next input stamp is taken.

    The other thread first tries the card's write lock without waiting. If the lock is
    free, the stamp is being taken outside it: the call lands right there, in the gap.
    If not, the thread waits for the lock like any concurrent caller and the call lands
    once the sync lets go (the model stand-ins below wait for it, so it lands during the
    model call). No sleeps: which case happened is decided before the stamp is taken.
    """

    def __init__(self, layout: CardLayout, action: Callable[[], object]) -> None:
        super().__init__(layout)
        self.action = action
        self.armed = False
        self.thread: threading.Thread | None = None
        self.landed_in_gap: bool | None = None
        self.at_recap_read = False

    def input_stamp(self) -> str:
        if self.armed and not self.at_recap_read:
            self.armed = False
            self._race()
        return super().input_stamp()

    def read_text(self, path: Path) -> str | None:
        # A recap call has no stamp of its own: it is decided from the previous recap,
        # read inside the same critical section. The race lands at that read instead.
        if self.armed and self.at_recap_read and path.parent.name == "局":
            self.armed = False
            self._race()
        return super().read_text(path)

    def _race(self) -> None:
        decided = threading.Event()
        lock = card_locks(self.layout.card_dir).write

        def run() -> None:
            if lock.acquire(blocking=False):
                try:
                    self.action()
                finally:
                    lock.release()
                self.landed_in_gap = True
                decided.set()
                return
            self.landed_in_gap = False
            decided.set()
            self.action()  # takes the write lock itself: waits until the sync releases it

        self.thread = threading.Thread(target=run, name="hard-path")
        self.thread.start()
        assert decided.wait(10)

    def wait_landed(self) -> None:
        if self.thread is not None:
            self.thread.join(10)
            assert not self.thread.is_alive()


J_REPLY = merge_reply("# 局：jA（jA）\n- 小满入城\n来源：局/jA.md", RESIDENT_2)
"""A merge reply naming only chat jA: it stays valid when jB is forgotten (check_merge refuses names
of chats that do not exist or are forgotten)."""


def _two_hand_recaps(card: Path) -> None:
    recaps = card / "记忆" / "局"
    recaps.mkdir(parents=True)
    (recaps / "jA.md").write_text(RECAP_A + "\n", encoding="utf-8")
    (recaps / "jB.md").write_text(RECAP_B + "\n", encoding="utf-8")


@pytest.mark.parametrize("a_changed", [False, True], ids=["nothing-to-merge", "merge-in-flight"])
def test_forget_landing_before_the_merge_stamp_is_not_a_soft_forget(tmp_path: Path, a_changed: bool) -> None:
    _two_hand_recaps(tmp_path)
    prompts: list[str] = []
    files = LandsAtTheStamp(CardLayout(tmp_path), lambda: memory(tmp_path, ScriptedModel()).forget_chat_recap("jB"))

    def fn(request: ModelRequest) -> str:
        files.wait_landed()  # a forget waiting for the lock lands while the model works
        prompts.append(user_text(request))
        return J_REPLY

    mem = memory(tmp_path, FunctionModel(fn))
    mem.files = files
    assert mem.sync().merged == "ok"
    if a_changed:
        (tmp_path / "记忆" / "局" / "jA.md").write_text(RECAP_A2 + "\n", encoding="utf-8")
    files.armed = True
    raced = mem.sync()
    files.wait_landed()
    assert raced.forgotten == [] and raced.merged == ("skipped" if a_changed else "no-change")

    rebuilt = mem.sync()
    assert (rebuilt.merged, rebuilt.forgotten) == ("ok", [])
    last = prompts[-1]
    assert "<handbook>（尚无手册：首次建立）</handbook>" in last  # a rebuild, as the hard path promises
    assert '<recap chat-id="jA"' in last and ("又去了茶馆" if a_changed else "东门遇见阿明") in last
    assert all("<deleted-chats>" not in p for p in prompts)  # jB never went through the soft path
    manifest = load_manifest(mem.files)
    a_text = (tmp_path / "记忆" / "局" / "jA.md").read_text(encoding="utf-8")
    assert manifest.recaps["jA"].merged_hash == sha1_text(a_text)
    assert manifest.recaps["jB"].merged_hash is None and "jB" in manifest.forgotten()
    assert (tmp_path / "记忆" / "记忆.md").exists()  # jA's memory is back in the aggregates
    assert files.landed_in_gap is False  # the stamp is taken under the write lock


def test_forget_landing_before_the_recap_stamp_keeps_the_recap_gone(tmp_path: Path) -> None:
    write_chat(tmp_path, "jA", [("user", "我来了。"), ("assistant", "欢迎。")])
    (tmp_path / "记忆" / "局").mkdir(parents=True)
    recap_a = tmp_path / "记忆" / "局" / "jA.md"
    recap_a.write_text(recap("旧的复盘", "- 旧。") + "\n", encoding="utf-8")
    files = LandsAtTheStamp(CardLayout(tmp_path), lambda: memory(tmp_path, ScriptedModel()).forget_chat_recap("jA"))

    def fn(request: ModelRequest) -> str:
        files.wait_landed()
        return RECAP_A if request.purpose == "recap" else merge_reply()

    mem = memory(tmp_path, FunctionModel(fn))
    mem.files = files
    files.armed = files.at_recap_read = True
    out = mem.sync()
    assert out.recapped == [] and not recap_a.exists()  # the forgotten recap did not come back
    assert "jA" in load_manifest(mem.files).forgotten()
    model = ScriptedModel()
    later = memory(tmp_path, model).sync()
    assert (later.recapped, model.calls) == ([], [])
    assert not recap_a.exists()
    assert files.landed_in_gap is False


class BlindStamp(MemoryFiles):
    """An input stamp that never moves: only the manifest reload can catch a change."""

    def input_stamp(self) -> str:
        return "blind"


@pytest.mark.parametrize("change", ["forget", "edit"])
def test_recap_is_dropped_when_its_chat_was_forgotten_or_protected_during_the_call(
    tmp_path: Path, change: str
) -> None:
    write_chat(tmp_path, "jA", [("user", "我来了。"), ("assistant", "欢迎。")])
    recap_a = tmp_path / "记忆" / "局" / "jA.md"
    recap_a.parent.mkdir(parents=True)
    recap_a.write_text(recap("旧的复盘", "- 旧。") + "\n", encoding="utf-8")
    hand = memory(tmp_path, ScriptedModel())

    def fn(request: ModelRequest) -> str:
        if change == "forget":
            hand.forget_chat_recap("jA")
        else:
            current = hand.read_memory("card:recap:jA")
            assert current is not None
            hand.change_memory("card:recap:jA", current[1], "# 手改的复盘\n- 东门。")
        return RECAP_A

    notes: list[str] = []
    mem = memory(tmp_path, FunctionModel(fn), on_activity=notes.append)
    mem.files = BlindStamp(mem.layout)
    out = mem.sync()
    assert out.recapped == []
    if change == "forget":
        assert not recap_a.exists()
    else:
        assert recap_a.read_text(encoding="utf-8") == "# 手改的复盘\n- 东门。\n"
    assert any("已丢弃" in n for n in notes)


class ElsewhereAtTheStamp(MemoryFiles):
    """A hard-path call from another process arrives just as the next stamp is taken.

    Another process does not share this one's lock, so nothing orders it against the
    sync: only the stamp does (the reviewer's race.py / race2.py, word for word).
    """

    def __init__(self, layout: CardLayout, chat_id: str) -> None:
        super().__init__(layout)
        self.chat_id = chat_id
        self.armed = False
        self.at_recap_read = False

    def input_stamp(self) -> str:
        if self.armed and not self.at_recap_read:
            self.armed = False
            assert card_manual.forget_chat_recap(MemoryFiles(self.layout), self.chat_id)
        return super().input_stamp()

    def read_text(self, path: Path) -> str | None:
        if self.armed and self.at_recap_read and path.parent.name == "局":
            self.armed = False
            assert card_manual.forget_chat_recap(MemoryFiles(self.layout), self.chat_id)
        return super().read_text(path)


def test_forget_from_another_process_at_the_merge_stamp(tmp_path: Path) -> None:
    _two_hand_recaps(tmp_path)
    prompts: list[str] = []

    def fn(request: ModelRequest) -> str:
        prompts.append(user_text(request))
        return J_REPLY

    files = ElsewhereAtTheStamp(CardLayout(tmp_path), "jB")
    mem = memory(tmp_path, FunctionModel(fn))
    mem.files = files
    assert mem.sync().merged == "ok"
    files.armed = True
    out = mem.sync()
    assert (out.merged, out.forgotten) == ("ok", [])  # merged from the manifest after the forget
    assert "<handbook>（尚无手册：首次建立）</handbook>" in prompts[-1]
    assert '<recap chat-id="jA"' in prompts[-1] and "<deleted-chats>" not in prompts[-1]
    assert load_manifest(mem.files).recaps["jA"].merged_hash == sha1_text(RECAP_A + "\n")


def test_forget_from_another_process_at_the_recap_stamp(tmp_path: Path) -> None:
    write_chat(tmp_path, "jA", [("user", "我来了。"), ("assistant", "欢迎。")])
    recap_a = tmp_path / "记忆" / "局" / "jA.md"
    recap_a.parent.mkdir(parents=True)
    recap_a.write_text(recap("旧的复盘", "- 旧。") + "\n", encoding="utf-8")
    model = ScriptedModel({"recap": [RECAP_A]})
    mem = memory(tmp_path, model)
    mem.files = files = ElsewhereAtTheStamp(CardLayout(tmp_path), "jA")
    files.armed = files.at_recap_read = True
    out = mem.sync()
    assert out.recapped == [] and not recap_a.exists()
    assert model.calls == []  # seen before the model was asked: no call wasted on a forgotten chat


def test_merge_waits_while_another_hard_path_still_owes_removals(tmp_path: Path) -> None:
    _two_hand_recaps(tmp_path)
    mem = memory(tmp_path, ScriptedModel({"merge": [J_REPLY, J_REPLY]}))
    assert mem.sync().merged == "ok"

    class HalfDoneElsewhere(MemoryFiles):
        armed = True

        def input_stamp(self) -> str:
            if self.armed:  # another process journals a forget and has not removed anything yet
                self.armed = False
                manifest = load_manifest(self)
                state = manifest.manual_state()
                state.forgotten_chats.append("jB")  # what forget_chat_recap saves first
                for record in manifest.recaps.values():
                    record.merged_hash = None
                state.pending = ["局/jB.md", "记忆.md", "常驻摘要.md"]
                save_manifest(self, manifest)
            return super().input_stamp()

    mem.files = HalfDoneElsewhere(mem.layout)
    assert mem.sync().merged == "skipped"
    assert (tmp_path / "记忆" / "局" / "jB.md").exists()  # its removal is the other side's to finish
    mem.files = MemoryFiles(mem.layout)
    out = mem.sync()  # the journal is finished first, then the rebuild
    assert (out.merged, out.forgotten) == ("ok", []) and not (tmp_path / "记忆" / "局" / "jB.md").exists()
