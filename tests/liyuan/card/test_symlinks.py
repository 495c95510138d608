"""Memory paths replaced by symlinks to outside the card (issue 14, part 4).

Before: with 记忆.md, 常驻摘要.md, 局/, a recap, .history, .清单.json or the whole 记忆/
folder a symlink to a folder outside the card, the library sent outside files to the
model, copied them into .history and wrote outside files. Every reply here is a
hand-written stand-in, not model output.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

from liyuan.card import manual as card_manual
from liyuan.errors import UnsafePathError
from liyuan.model import FunctionModel, ModelRequest

from .test_fixtures import RECAP_A, memory, merge_reply, user_text, write_chat

SECRET = "卡片外面的机密文件"
PATHS = ["记忆.md", "常驻摘要.md", "局", "局/jA.md", ".history", ".清单.json", "记忆", ".sync.lock", ".write.lock"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _card_with_a_link(root: Path, which: str) -> tuple[Path, Path]:
    card, outside = root / "card", root / "outside"
    outside.mkdir()
    write_chat(card, "jA", [("user", "我进城了。"), ("assistant", "小满抬头。")])
    memory(card, FunctionModel(lambda r: RECAP_A if r.purpose == "recap" else merge_reply())).sync()
    (card / "记忆" / ".history").mkdir(exist_ok=True)
    write_chat(card, "jA", [("user", "又来了。"), ("assistant", "好。")])  # work for the next sync
    mem = card / "记忆"
    target = card / "记忆" if which == "记忆" else mem / which
    copy = outside / "x"
    if target.is_dir():
        shutil.copytree(target, copy)
        shutil.rmtree(target)
    else:
        copy.write_bytes(target.read_bytes() if target.exists() else b"")
        target.unlink(missing_ok=True)
    for path in [copy, *copy.rglob("*")] if copy.is_dir() else [copy]:
        if path.is_file() and path.suffix == ".md":
            path.write_text(path.read_text(encoding="utf-8") + SECRET, encoding="utf-8")
    os.symlink(copy, target)
    return card, outside


@pytest.mark.parametrize("which", PATHS)
def test_a_symlinked_memory_path_is_refused_and_nothing_outside_is_touched(tmp_path: Path, which: str) -> None:
    card, outside = _card_with_a_link(tmp_path, which)
    before = _snapshot(outside)
    sent: list[str] = []

    def fn(request: ModelRequest) -> str:
        sent.append(user_text(request))
        return RECAP_A if request.purpose == "recap" else merge_reply()

    notes: list[str] = []
    mem = memory(card, FunctionModel(fn), on_activity=notes.append)
    with pytest.raises(UnsafePathError, match="符号链接"):
        mem.sync()
    assert sent == []  # no model call at all: the card stops before anything is read
    assert any("符号链接" in n for n in notes)
    for call in (mem.list_memory, lambda: mem.read_memory(card_manual.HANDBOOK_REF), mem.load_resident_summary,
                 lambda: mem.search_memory("小满"), lambda: mem.forget_chat_recap("jA"), mem.repair_manifest):
        with contextlib.suppress(UnsafePathError):  # refused, or a read that stays inside
            call()
    assert _snapshot(outside) == before  # nothing written outside
    inside = card / "记忆"
    if not inside.is_symlink():
        copied = [p for p in inside.rglob("*") if p.is_file() and not p.is_symlink()
                  and SECRET in p.read_text(encoding="utf-8", errors="replace")]
        assert copied == []  # nothing from outside copied in (.history included)


@pytest.mark.parametrize("which", ["记忆.md", "局/jA.md", "记忆"])
def test_the_hard_path_refuses_a_symlinked_document(tmp_path: Path, which: str) -> None:
    card, outside = _card_with_a_link(tmp_path, which)
    before = _snapshot(outside)
    mem = memory(card, FunctionModel(lambda r: ""))
    ref = card_manual.recap_ref("jA") if which.startswith("局") else card_manual.HANDBOOK_REF
    with pytest.raises(UnsafePathError):
        mem.read_memory(ref)
    with pytest.raises(UnsafePathError):
        mem.change_memory(ref, "0" * 64, "手改")
    assert _snapshot(outside) == before
