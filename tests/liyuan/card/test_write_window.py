"""An editor save landing inside a sync's final write (issue 26, item 2).

Before: the merge checked the handbook, then renamed its new text over it; a save between
the two was overwritten, and the backup had been taken before it, so the edit was in
neither 记忆.md nor .history/ (1 in 160 at normal speed, 3 in 60 on a slow disk). Here
the save is made to land exactly there: while the new text is fsynced, after every check.
Every recap and merge reply is a hand-written stand-in (FunctionModel), not model output.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from liyuan import fileio
from liyuan.card import manual as card_manual
from liyuan.card.files import sha256_text
from liyuan.card.layout import CardLayout
from liyuan.errors import VersionConflict
from liyuan.model import FunctionModel, ModelRequest, ScriptedModel

from .test_fixtures import RECAP_B, memory, merge_reply, recap, user_text, write_chat

EDIT = "编辑器里刚保存的手改版本\n"


def _replies(plot: str, handbook: str) -> Callable[[ModelRequest], str]:
    def fn(request: ModelRequest) -> str:
        if request.purpose == "recap":
            return recap("甲局", plot) if "甲" in user_text(request) else RECAP_B
        return merge_reply(handbook, "# 往局记忆（同一世界更早的几局）\n- 一")
    return fn


def _save(path: Path, style: str) -> None:
    if style == "rename":  # most editors: a new file renamed over the old one
        fresh = path.with_name(path.name + ".editor")
        fresh.write_text(EDIT, encoding="utf-8")
        os.replace(fresh, path)
    else:  # some editors write in place
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(EDIT)


def _arm(monkeypatch: pytest.MonkeyPatch, target: Path, style: str) -> list[str]:
    """Save ``target`` in an editor the first time a temp file for it is fsynced."""
    fired: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        real(fd)
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        if not fired and target.name in name and name.endswith(".tmp"):
            fired.append(name)
            _save(target, style)

    monkeypatch.setattr(os, "fsync", fsync)
    return fired


def _card(tmp_path: Path) -> CardLayout:
    write_chat(tmp_path, "jA", [("user", "甲的第1拍。"), ("assistant", "好。")])
    first = FunctionModel(_replies("- 一", "# 局：甲（jA）\n- 一\n来源：局/jA.md"))
    assert memory(tmp_path, first).sync().merged == "ok"
    write_chat(tmp_path, "jA", [("user", "甲的第2拍。"), ("assistant", "好。")])
    return CardLayout(tmp_path)


def _everywhere(layout: CardLayout) -> list[str]:
    return [p.read_text(encoding="utf-8") for p in layout.memory_dir.rglob("*") if p.is_file()]


@pytest.mark.parametrize("swap", ["exchange", "no exchange"])
@pytest.mark.parametrize("style", ["rename", "in place"])
def test_an_editor_save_during_the_merge_write_is_never_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str, swap: str) -> None:
    if swap == "no exchange":  # a system without renameat2: the displaced file is caught by a hard link
        monkeypatch.setattr(fileio, "_renameat2", None)
    layout = _card(tmp_path)
    notes: list[str] = []
    mem = memory(tmp_path, FunctionModel(_replies("- 二", "# 局：甲（jA）\n- 新\n来源：局/jA.md")),
                 on_activity=notes.append)
    fired = _arm(monkeypatch, layout.handbook, style)
    out = mem.sync()
    assert fired  # the save landed inside the write
    assert layout.handbook.read_text(encoding="utf-8") == EDIT  # the edit wins, as before any check
    assert out.merged == "skipped" and any("写入前被改动" in n for n in notes)
    assert EDIT in _everywhere(layout)


@pytest.mark.parametrize("style", ["rename", "in place"])
def test_an_editor_save_during_a_recap_write_is_never_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str) -> None:
    layout = _card(tmp_path)
    recap_path = layout.recap_path("jA")
    mem = memory(tmp_path, FunctionModel(_replies("- 二", "# 局：甲（jA）\n- 新\n来源：局/jA.md")))
    fired = _arm(monkeypatch, recap_path, style)
    out = mem.sync()
    assert fired
    assert recap_path.read_text(encoding="utf-8") == EDIT
    assert out.failed == ["jA"]


@pytest.mark.parametrize("style", ["rename", "in place"])
def test_an_editor_save_during_a_hand_path_write_is_never_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str) -> None:
    layout = _card(tmp_path)
    mem = memory(tmp_path, ScriptedModel())
    read = mem.read_memory(card_manual.HANDBOOK_REF)
    assert read is not None
    _arm(monkeypatch, layout.handbook, style)
    with pytest.raises(VersionConflict):
        mem.change_memory(card_manual.HANDBOOK_REF, read[1], "通过工具改的手册")
    assert layout.handbook.read_text(encoding="utf-8") == EDIT


def test_a_write_with_nothing_in_between_keeps_no_extra_copy(tmp_path: Path) -> None:
    layout = _card(tmp_path)
    before = sorted(p.name for p in layout.history_dir.iterdir()) if layout.history_dir.is_dir() else []
    mem = memory(tmp_path, FunctionModel(_replies("- 二", "# 局：甲（jA）\n- 新\n来源：局/jA.md")))
    assert mem.sync().merged == "ok"
    after = sorted(p.name for p in layout.history_dir.iterdir())
    assert len(after) - len(before) == 2  # one backup per aggregate, as before: no stray copies
    assert not [p for p in layout.memory_dir.rglob("*") if p.name.endswith(".tmp") or ".staged." in p.name]
    assert sha256_text(layout.handbook.read_text(encoding="utf-8")) != sha256_text(EDIT)
