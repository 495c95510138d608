"""The hard path: read, list, search, change, forget (12.3 cases 2-4), and its crash safety."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from liyuan.card import lock as lock_module
from liyuan.card.files import MemoryFiles, sha256_text
from liyuan.card.lock import WRITE_LOCK_FILE
from liyuan.card.manifest import load_manifest
from liyuan.card.manual import PROTECTED_NOTE, STALE_VERSION_MESSAGE
from liyuan.card.prompts import RESIDENT_HEADING
from liyuan.errors import ConfigError, MemoryFileError, VersionConflict
from liyuan.model import FunctionModel, ModelRequest, ScriptedModel

from .test_fixtures import (
    RECAP_A,
    RECAP_B,
    memory,
    merge_reply,
    recap,
    two_chats,
    user_text,
    write_chat,
)

HANDBOOK_NORTH = "# 局：初来乍到（A）\n- 小满在北门等阿明\n来源：局/A.md"
RESIDENT_NORTH = "# 往局记忆（同一世界更早的几局）\n\n- 小满在北门等阿明 [局:A]"
RECAP_NORTH = recap("小满入城", "- 第一天黄昏，小满入城。\n- 约好在北门再见。")
REBUILT_B = merge_reply("# 局：雪夜（B）\n来源：局/B.md", "# 往局记忆（同一世界更早的几局）")


def _synced(card: Path, *, both: bool = True) -> None:
    if both:
        two_chats(card)
    else:
        write_chat(card, "A", [("user", "进城。"), ("assistant", "好。")], name="初来乍到")

    def fn(request: ModelRequest) -> str:
        if request.purpose == "recap":
            return RECAP_NORTH if "初来乍到" in user_text(request) else RECAP_B
        return merge_reply(HANDBOOK_NORTH, RESIDENT_NORTH)

    out = memory(card, FunctionModel(fn)).sync()
    assert out.merged == "ok"


def test_empty_card_reads_lists_and_searches_nothing(tmp_path: Path) -> None:
    mem = memory(tmp_path, ScriptedModel())
    assert mem.search_memory("东门") == []
    assert mem.list_memory() == []
    assert mem.read_memory("card:handbook") is None
    assert mem.load_resident_summary() is None


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_a_read_only_card_folder_can_still_be_listed_and_searched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    # The lock file of a synced card is removed, and the folder is read-only (simulated:
    # the tests run as root, for whom chmod changes nothing): the lock cannot be made.
    _synced(tmp_path)
    before = memory(tmp_path, ScriptedModel()).list_memory()
    assert len(before) == 4  # handbook, resident, two recaps
    lock = tmp_path / "记忆" / WRITE_LOCK_FILE
    lock.unlink()
    real_open = os.open

    def read_only_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path) == lock:
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(lock_module.os, "open", read_only_open)
    mem = memory(tmp_path, ScriptedModel())
    assert mem.list_memory() == before
    assert mem.search_memory("北门")
    assert not lock.exists()
    with pytest.raises(MemoryFileError, match="锁文件"):  # a write still needs the lock, and says so
        mem.forget_chat_recap("A")


def test_a_lock_file_that_fails_for_another_reason_still_stops_a_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _synced(tmp_path)
    real_open = os.open

    def broken_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path).name == WRITE_LOCK_FILE:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(lock_module.os, "open", broken_open)
    with pytest.raises(MemoryFileError, match="锁文件"):
        memory(tmp_path, ScriptedModel()).list_memory()


def test_unreadable_handbook_raises_instead_of_no_hits(tmp_path: Path) -> None:
    (tmp_path / "记忆" / "记忆.md").mkdir(parents=True)
    mem = memory(tmp_path, ScriptedModel())
    with pytest.raises(MemoryFileError):
        mem.search_memory("东门")
    with pytest.raises(MemoryFileError):
        mem.list_memory()


@pytest.mark.parametrize("ref", ["card:recap:../x", "card:recap:", "card:recap:/etc/passwd", "card:other", "记忆.md"])
def test_bad_refs_are_refused(tmp_path: Path, ref: str) -> None:
    mem = memory(tmp_path, ScriptedModel())
    with pytest.raises(ConfigError):
        mem.read_memory(ref)
    with pytest.raises(ConfigError):
        mem.change_memory(ref, "v", "x")


def test_editing_a_recap_retires_both_aggregates(tmp_path: Path) -> None:
    _synced(tmp_path, both=False)
    mem = memory(tmp_path, ScriptedModel())
    read = mem.read_memory("card:recap:A")
    assert read is not None
    text, version = read
    assert text == RECAP_NORTH + "\n" and version == sha256_text(text)
    mem.change_memory("card:recap:A", version, "# 小满入城\n- 约好在东门再见")
    assert mem.read_memory("card:recap:A") == ("# 小满入城\n- 约好在东门再见\n",
                                                 sha256_text("# 小满入城\n- 约好在东门再见\n"))
    assert not (tmp_path / "记忆" / "记忆.md").exists() and not (tmp_path / "记忆" / "常驻摘要.md").exists()
    history = sorted(p.name for p in (tmp_path / "记忆" / ".history").iterdir())
    assert any(n.endswith("局-A.md") for n in history)
    assert any(n.endswith("记忆.md") for n in history) and any(n.endswith("常驻摘要.md") for n in history)

    with pytest.raises(VersionConflict, match="版本冲突"):
        mem.change_memory("card:recap:A", version, "又一次")
    assert str(VersionConflict(STALE_VERSION_MESSAGE)) == "记忆版本冲突或引用已失效；请重新读取。"
    with pytest.raises(ConfigError):
        mem.change_memory("card:recap:A", sha256_text("# 小满入城\n- 约好在东门再见\n"), "  ")

    current = mem.read_memory("card:recap:A")
    assert current is not None
    mem.change_memory("card:recap:A", current[1], None)
    assert mem.read_memory("card:recap:A") is None
    with pytest.raises(VersionConflict):
        mem.change_memory("card:recap:A", current[1], None)

    write_chat(tmp_path, "A", [("user", "新的一个会话"), ("assistant", "嗯。")], session="s2.jsonl")
    model = ScriptedModel()
    out = memory(tmp_path, model).sync()
    assert model.calls == [] and out.recapped == [] and out.merged == "no-change"
    assert not (tmp_path / "记忆" / "局" / "A.md").exists()
    manual = load_manifest(mem.files).manual
    assert manual is not None and "A" in manual.forgotten_chats and "card:recap:A" in manual.protected_refs


def test_hard_delete_rebuilds_from_the_remaining_recaps(tmp_path: Path) -> None:
    _synced(tmp_path)
    mem = memory(tmp_path, ScriptedModel({"merge": [REBUILT_B]}))
    read = mem.read_memory("card:recap:A")
    assert read is not None
    mem.change_memory("card:recap:A", read[1], None)
    out = mem.sync()
    assert (out.merged, out.forgotten) == ("ok", [])
    merge_input = user_text(mem.model.calls[0])  # type: ignore[attr-defined]
    assert "<handbook>（尚无手册：首次建立）</handbook>" in merge_input  # rebuilt, no model picks entries
    assert "<deleted-chats>" not in merge_input and '<recap chat-id="B"' in merge_input
    assert '<recap chat-id="A"' not in merge_input and "北门" not in merge_input


def test_editing_the_handbook_pins_it(tmp_path: Path) -> None:
    _synced(tmp_path, both=False)
    mem = memory(tmp_path, ScriptedModel())
    assert [h.ref for h in mem.search_memory("北门")] == ["card:handbook", "card:resident", "card:recap:A"]
    read = mem.read_memory("card:handbook")
    assert read is not None
    mem.change_memory("card:handbook", read[1], "用户更正：东门")
    # 12.3 case 4, as changed by review: the handbook answers with the correction and the
    # recap it supersedes is hidden; the resident stays (it is not deleted for good) and
    # says 北门 until merging resumes (see test_pin.py).
    assert [h.ref for h in mem.search_memory("北门")] == ["card:resident"]
    assert [h.ref for h in mem.search_memory("东门")] == ["card:handbook"]
    docs = mem.list_memory()
    assert [(d.ref, d.note) for d in docs] == [("card:handbook", PROTECTED_NOTE), ("card:resident", "")]
    assert docs[0].path == "记忆.md" and docs[0].chars == len("用户更正：东门\n")
    model = ScriptedModel()
    out = memory(tmp_path, model).sync()
    assert model.calls == [] and out.merged == "skipped"
    assert (tmp_path / "记忆" / "记忆.md").read_text(encoding="utf-8") == "用户更正：东门\n"

    # New play is still recapped, the pinned handbook is still never overwritten.
    write_chat(tmp_path, "A", [("user", "去茶馆。"), ("assistant", "好。")])
    model = ScriptedModel({"recap": [RECAP_A]})
    out = memory(tmp_path, model).sync()
    assert (out.recapped, out.merged, len(model.calls)) == (["A"], "skipped", 1)
    assert [d.ref for d in mem.list_memory()] == ["card:handbook", "card:resident", "card:recap:A"]  # changed: visible
    assert (tmp_path / "记忆" / "记忆.md").read_text(encoding="utf-8") == "用户更正：东门\n"


def test_search_scores_and_windows(tmp_path: Path) -> None:
    (tmp_path / "记忆").mkdir()
    (tmp_path / "记忆" / "记忆.md").write_text("甲" * 500 + "北门 旧伞" + "乙" * 2000, encoding="utf-8")
    (tmp_path / "记忆" / "常驻摘要.md").write_text("只有旧伞", encoding="utf-8")
    hits = memory(tmp_path, ScriptedModel()).search_memory("北门 旧伞 梨树", limit=6)
    assert [(h.ref, round(h.score, 2)) for h in hits] == [("card:handbook", 0.67), ("card:resident", 0.33)]
    assert len(hits[0].excerpt) == 1200 and hits[0].excerpt.startswith("甲" * 160 + "北门")
    assert len(memory(tmp_path, ScriptedModel()).search_memory("旧伞", limit=1)) == 1
    assert memory(tmp_path, ScriptedModel()).search_memory("   ") == []


def test_forget_chat_recap(tmp_path: Path) -> None:
    _synced(tmp_path)
    mem = memory(tmp_path, ScriptedModel({"merge": [REBUILT_B]}))
    assert mem.forget_chat_recap("nope") is False
    with pytest.raises(ConfigError):
        mem.forget_chat_recap("../A")
    assert mem.forget_chat_recap("A") is True
    assert not (tmp_path / "记忆" / "局" / "A.md").exists()
    assert not (tmp_path / "记忆" / "记忆.md").exists() and not (tmp_path / "记忆" / "常驻摘要.md").exists()
    assert [d.ref for d in mem.list_memory()] == ["card:recap:B"]
    write_chat(tmp_path, "A", [("user", "还想继续。"), ("assistant", "嗯。")])
    out = mem.sync()
    assert (out.recapped, out.merged, out.forgotten) == ([], "ok", [])
    assert [c.purpose for c in mem.model.calls] == ["merge"]  # type: ignore[attr-defined]


class FailingDelete(MemoryFiles):
    """Crashes on the first file removal (after the manifest was saved)."""

    def __init__(self, base: MemoryFiles) -> None:
        super().__init__(base.layout)
        self.armed = True

    def delete(self, path: Path, *, at_once: bool = False) -> None:
        if self.armed:
            self.armed = False
            raise OSError("模拟崩溃")
        super().delete(path, at_once=at_once)


class FailingWrite(MemoryFiles):
    """Crashes on writing any Markdown file (the manifest still gets written)."""

    def write_text(self, path: Path, text: str) -> None:
        if path.suffix == ".md":
            raise OSError("模拟崩溃")
        super().write_text(path, text)


def test_crash_inside_forget_fails_closed_and_heals(tmp_path: Path) -> None:
    _synced(tmp_path)
    mem = memory(tmp_path, ScriptedModel())
    mem.files = FailingDelete(mem.files)
    with pytest.raises(OSError):
        mem.forget_chat_recap("A")
    assert (tmp_path / "记忆" / "局" / "A.md").exists() and (tmp_path / "记忆" / "记忆.md").exists()
    assert load_manifest(mem.files).manual.pending  # type: ignore[union-attr]
    # Chat A is forgotten for good: a merge reply naming it would be refused (check_merge).
    b_only = merge_reply("# 局：雪夜（B）\n- 雪夜借宿\n来源：局/B.md", RESIDENT_HEADING + "\n\n- 雪夜：借宿。")
    healed = memory(tmp_path, ScriptedModel({"merge": [b_only]}))
    out = healed.sync()
    assert out.merged == "ok"
    merge_input = user_text(healed.model.calls[0])  # type: ignore[attr-defined]
    assert "北门" not in merge_input and "<handbook>（尚无手册：首次建立）</handbook>" in merge_input
    assert not (tmp_path / "记忆" / "局" / "A.md").exists()
    assert load_manifest(healed.files).manual.pending == []  # type: ignore[union-attr]


def test_crash_inside_a_recap_edit_fails_closed_and_heals(tmp_path: Path) -> None:
    _synced(tmp_path)
    mem = memory(tmp_path, ScriptedModel())
    read = mem.read_memory("card:recap:A")
    assert read is not None
    mem.files = FailingWrite(mem.layout)
    with pytest.raises(OSError):
        mem.change_memory("card:recap:A", read[1], "改过的复盘")
    assert (tmp_path / "记忆" / "局" / "A.md").read_text(encoding="utf-8") == RECAP_NORTH + "\n"  # nothing lost
    healed = memory(tmp_path, ScriptedModel({"merge": [merge_reply()]}))
    out = healed.sync()
    assert out.merged == "ok"
    merge_input = user_text(healed.model.calls[0])  # type: ignore[attr-defined]
    assert "<handbook>（尚无手册：首次建立）</handbook>" in merge_input  # stale aggregates were retired
    assert '<recap chat-id="A"' in merge_input and '<recap chat-id="B"' in merge_input
