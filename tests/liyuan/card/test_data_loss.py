"""Nothing lost: aggregates kept in .history before every overwrite, orphan temp files
cleaned, a damaged manifest stops the sync instead of being read as empty (issue 14, part 0).

Every recap and merge reply here is a hand-written stand-in (ScriptedModel /
FunctionModel), not model output.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from liyuan.card import manual as card_manual
from liyuan.card.files import MemoryFiles, sha256_text
from liyuan.card.housekeeping import HISTORY_KEEP
from liyuan.card.layout import CardLayout
from liyuan.card.manifest import Manifest, ManualState, RecapRecord, load_manifest
from liyuan.card.repair import repair_manifest
from liyuan.errors import ManifestError, VersionConflict
from liyuan.model import FunctionModel, ModelRequest, ScriptedModel

from .test_fixtures import RECAP_B, memory, merge_reply, recap, user_text, write_chat


def _recap_or_merge(
    handbook: str = "# 局：甲（jA）\n- 一\n来源：局/jA.md", resident: str = "# 往局记忆（同一世界更早的几局）\n- 一",
    plot: str = "- 一",
) -> Callable[[ModelRequest], str]:
    def fn(request: ModelRequest) -> str:
        if request.purpose == "recap":
            return recap("甲局", plot) if "甲" in user_text(request) else RECAP_B
        return merge_reply(handbook, resident)
    return fn


def _history(card: Path, suffix: str) -> list[str]:
    folder = card / "记忆" / ".history"
    return sorted(p.read_text(encoding="utf-8") for p in folder.glob(f"*{suffix}")) if folder.is_dir() else []


def test_merge_keeps_the_previous_aggregates_in_history(tmp_path: Path) -> None:
    write_chat(tmp_path, "jA", [("user", "甲的第1拍。"), ("assistant", "好。")])
    first = _recap_or_merge("# 局：甲（jA）\n- 第一版\n来源：局/jA.md", "# 往局记忆（同一世界更早的几局）\n- 第一版")
    memory(tmp_path, FunctionModel(first)).sync()
    assert _history(tmp_path, "-记忆.md") == []  # nothing was overwritten yet
    write_chat(tmp_path, "jA", [("user", "甲的第2拍。"), ("assistant", "好。")])
    second = _recap_or_merge("# 局：甲（jA）\n- 第二版\n来源：局/jA.md",
                             "# 往局记忆（同一世界更早的几局）\n- 第二版", "- 二")
    memory(tmp_path, FunctionModel(second)).sync()
    assert "第二版" in (tmp_path / "记忆" / "记忆.md").read_text(encoding="utf-8")
    assert _history(tmp_path, "-记忆.md") == ["# 局：甲（jA）\n- 第一版\n来源：局/jA.md\n"]
    assert _history(tmp_path, "-常驻摘要.md") == ["# 往局记忆（同一世界更早的几局）\n- 第一版\n"]


def test_history_keeps_the_last_n_copies_of_each_document(tmp_path: Path) -> None:
    layout = CardLayout(tmp_path)
    files = MemoryFiles(layout)
    for n in range(HISTORY_KEEP + 5):
        files.write_text(layout.handbook, f"第{n}版\n")
        files.backup_copy(layout.handbook)
    files.write_text(layout.resident, "常驻\n")
    files.backup_copy(layout.resident)
    kept = _history(tmp_path, "-记忆.md")
    assert len(kept) == HISTORY_KEEP  # the oldest five were pruned
    assert f"第{HISTORY_KEEP + 4}版\n" in kept and "第0版\n" not in kept and "第4版\n" not in kept
    assert _history(tmp_path, "-常驻摘要.md") == ["常驻\n"]  # pruning counts per document


def test_sync_removes_orphan_temp_files_of_a_crashed_write(tmp_path: Path) -> None:
    write_chat(tmp_path, "jA", [("user", "甲的第1拍。"), ("assistant", "好。")])
    memory(tmp_path, FunctionModel(_recap_or_merge())).sync()
    orphans = [tmp_path / "记忆" / ".记忆.md.k2j_9xq.tmp", tmp_path / "记忆" / "局" / ".jA.md.abc123.tmp",
               tmp_path / "记忆" / ".清单.json.zz9.tmp"]
    for path in orphans:
        path.write_text("写到一半", encoding="utf-8")
    mine = tmp_path / "记忆" / "笔记.tmp"  # not the shape of our temp files: left alone
    mine.write_text("用户自己的", encoding="utf-8")
    notes: list[str] = []
    assert memory(tmp_path, ScriptedModel(), on_activity=notes.append).sync().merged == "no-change"
    assert not any(p.exists() for p in orphans) and mine.exists()
    assert any("清理了 3 个" in n for n in notes)


# -- a damaged manifest ---------------------------------------------------------------


def _manifest_with_everything() -> str:
    return Manifest(
        {"jA": RecapRecord("s1.jsonl:10:1", "2026-01-01", "ab" * 20), "jB": RecapRecord("s1.jsonl:9:1", "2026-01-01")},
        "2026-01-02", ManualState(["card:handbook", "card:recap:jA"], ["jB"], {}, True, False, 3, []),
    ).to_json()


def _damaged_card(card: Path, kind: str) -> bytes:
    write_chat(card, "jA", [("user", "甲的第1拍。"), ("assistant", "好。")])
    write_chat(card, "jB", [("user", "乙的第1拍。"), ("assistant", "好。")])  # forgotten for good
    mem = card / "记忆"
    (mem / "局").mkdir(parents=True)
    (mem / "局" / "jA.md").write_text("手改过的复盘\n", encoding="utf-8")
    (mem / "记忆.md").write_text("手写的手册\n", encoding="utf-8")
    good = _manifest_with_everything().encode("utf-8")
    damaged = {
        "flipped-byte": good.replace(b'"recaps": {', b'"recaps": ['),
        "truncated": good[: len(good) // 2],
        "version-2": good.replace(b'"version": 1', b'"version": 2'),
        "invalid-utf8": good.replace(b'"jB"', b'"j\xff"', 1),
        "deep-nesting": b'{"version": 1, "recaps": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        "huge-number": b'{"version": 1, "recaps": {}, "mergedAt": ' + b"9" * 5000 + b"}",
    }[kind]
    (mem / ".清单.json").write_bytes(damaged)
    return damaged


KINDS = ["flipped-byte", "truncated", "version-2", "invalid-utf8", "deep-nesting", "huge-number"]


def _snapshot(card: Path) -> dict[str, bytes]:
    # The two empty lock files the sync opens are bookkeeping, not memory.
    return {str(p.relative_to(card)): p.read_bytes() for p in sorted(card.rglob("*"))
            if p.is_file() and p.suffix != ".lock"}


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_manifest_stops_the_sync_and_changes_nothing(tmp_path: Path, kind: str) -> None:
    _damaged_card(tmp_path, kind)
    before = _snapshot(tmp_path)
    model = ScriptedModel()
    notes: list[str] = []
    with pytest.raises(ManifestError, match="清单") as caught:
        memory(tmp_path, model, on_activity=notes.append).sync()
    assert "repair_manifest" in str(caught.value)
    assert model.calls == []  # nothing recapped, nothing merged: jB stays forgotten
    assert _snapshot(tmp_path) == before  # not even a backup: the file stays where it is
    assert any("清单" in n and "损坏" in n for n in notes)
    with pytest.raises(ManifestError):
        load_manifest(MemoryFiles(CardLayout(tmp_path)))
    with pytest.raises(ManifestError):  # the hard path stops too: it would save an empty manifest
        memory(tmp_path, model).change_memory(card_manual.HANDBOOK_REF, sha256_text("手写的手册\n"), "新的")


def test_repair_keeps_the_damaged_file_and_salvages_what_it_still_says(tmp_path: Path) -> None:
    damaged = _damaged_card(tmp_path, "flipped-byte")
    repair = repair_manifest(MemoryFiles(CardLayout(tmp_path)))
    assert repair.kept_at is not None and repair.kept_at.read_bytes() == damaged
    assert repair.kept_at.parent == tmp_path / "记忆" / ".history"
    manifest = load_manifest(MemoryFiles(CardLayout(tmp_path)))
    assert manifest.forgotten() == {"jB"}
    assert manifest.is_protected("card:handbook") and manifest.is_protected("card:recap:jA")
    assert manifest.manual is not None and manifest.manual.aggregate_pinned
    assert repair.unknown == []
    # The sync runs again, and the forgotten chat and the hand edits stay as they were.
    model = ScriptedModel()
    memory(tmp_path, model).sync()
    assert model.calls == []
    assert not (tmp_path / "记忆" / "局" / "jB.md").exists()
    assert (tmp_path / "记忆" / "局" / "jA.md").read_text(encoding="utf-8") == "手改过的复盘\n"
    assert (tmp_path / "记忆" / "记忆.md").read_text(encoding="utf-8") == "手写的手册\n"


def test_repair_of_a_truncated_manifest_fails_closed(tmp_path: Path) -> None:
    _damaged_card(tmp_path, "truncated")  # the manual part is gone: who was forgotten is unknown
    repair = repair_manifest(MemoryFiles(CardLayout(tmp_path)))
    assert set(repair.unknown) == {"forgottenChats", "protectedRefs", "aggregatePinned"}
    manifest = load_manifest(MemoryFiles(CardLayout(tmp_path)))
    # Unknown: a chat with sessions and no recap counts as forgotten, every document on
    # disk counts as a hand edit and merging stays pinned. Sync then overwrites nothing.
    assert manifest.forgotten() == {"jB"} and repair.assumed_forgotten == ["jB"]
    assert manifest.is_protected("card:handbook") and manifest.is_protected("card:recap:jA")
    assert manifest.manual is not None and manifest.manual.aggregate_pinned
    model = FunctionModel(lambda r: recap("甲", "- 甲") if r.purpose == "recap" else merge_reply())
    memory(tmp_path, model).sync()
    assert model.calls == []
    assert (tmp_path / "记忆" / "局" / "jA.md").read_text(encoding="utf-8") == "手改过的复盘\n"
    assert not (tmp_path / "记忆" / "局" / "jB.md").exists()


def test_repair_of_a_healthy_or_missing_manifest_changes_nothing(tmp_path: Path) -> None:
    files = MemoryFiles(CardLayout(tmp_path))
    assert repair_manifest(files).kept_at is None
    (tmp_path / "记忆").mkdir()
    (tmp_path / "记忆" / ".清单.json").write_text(_manifest_with_everything(), encoding="utf-8")
    assert repair_manifest(files).kept_at is None
    assert (tmp_path / "记忆" / ".清单.json").read_text(encoding="utf-8") == _manifest_with_everything()


def test_a_flipped_byte_that_still_parses_is_caught_by_the_checksum(tmp_path: Path) -> None:
    _damaged_card(tmp_path, "flipped-byte")
    path = tmp_path / "记忆" / ".清单.json"
    path.write_text(_manifest_with_everything().replace('"jB"', '"jC"'), encoding="utf-8")  # still valid JSON
    with pytest.raises(ManifestError, match="校验和"):
        memory(tmp_path, ScriptedModel()).sync()
    repair = repair_manifest(MemoryFiles(CardLayout(tmp_path)))
    assert set(repair.unknown) == {"forgottenChats", "protectedRefs", "aggregatePinned"}
    manifest = load_manifest(MemoryFiles(CardLayout(tmp_path)))
    assert {"jB", "jC"} <= manifest.forgotten()  # what it said, plus the fail-closed guess
    model = ScriptedModel()
    memory(tmp_path, model).sync()
    assert model.calls == [] and not (tmp_path / "记忆" / "局" / "jB.md").exists()


def test_a_cut_branch_is_reported_by_the_sync_and_the_summary_still_reaches_the_recap(tmp_path: Path) -> None:
    tree = write_chat(tmp_path, "jA", [("user", "甲的第1拍。"), ("assistant", "好。")] * 3)
    tree.append_custom("rp-summary", {"summary": "前情：甲在东门。", "coversThroughId": tree.leaf_id,
                                      "turns": 3, "chars": 30})
    for n in range(4):
        tree.append_message("user", f"甲的第{n + 4}拍。")
        tree.append_message("assistant", "好。")
    path = tmp_path / "对话" / "jA" / "会话" / "s1.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[10] = b'{"xd":"??","parentI' + lines[10][20:]  # the id and the link are unreadable
    path.write_bytes(b"\n".join(lines))
    prompts: list[str] = []
    notes: list[str] = []

    def fn(request: ModelRequest) -> str:
        prompts.append(user_text(request))
        return recap("甲局", "- 一") if request.purpose == "recap" else merge_reply()

    memory(tmp_path, FunctionModel(fn), on_activity=notes.append).sync()
    assert "前情：甲在东门。" in prompts[0]  # the summary before the damaged line is still used
    assert any("损坏" in n and "按文件顺序" in n for n in notes)


# -- a hand edit made in an editor (no lock) right before a write ------------------------


class EditorAtBackup(MemoryFiles):
    """An editor saves ``target`` just as the code backs it up, right before overwriting it."""

    def __init__(self, layout: CardLayout, target: Path, text: str) -> None:
        super().__init__(layout)
        self.target, self.text, self.armed = target, text, True

    def backup_copy(self, path: Path) -> Path | None:
        copied = super().backup_copy(path)
        if self.armed and path == self.target:
            self.armed = False
            path.write_text(self.text, encoding="utf-8")
        return copied


def test_an_editor_save_right_before_the_merge_write_wins(tmp_path: Path) -> None:
    write_chat(tmp_path, "jA", [("user", "甲的第1拍。"), ("assistant", "好。")])
    memory(tmp_path, FunctionModel(_recap_or_merge())).sync()
    write_chat(tmp_path, "jA", [("user", "甲的第2拍。"), ("assistant", "好。")])
    layout = CardLayout(tmp_path)
    notes: list[str] = []
    new = _recap_or_merge("# 局：甲（jA）\n- 新\n来源：局/jA.md", plot="- 二")
    mem = memory(tmp_path, FunctionModel(new), on_activity=notes.append)
    mem.files = EditorAtBackup(layout, layout.handbook, "编辑器里手改的手册\n")
    assert mem.sync().merged == "skipped"
    assert layout.handbook.read_text(encoding="utf-8") == "编辑器里手改的手册\n"
    assert any("写入前被改动" in n for n in notes)


def test_an_editor_save_right_before_a_hand_path_write_wins(tmp_path: Path) -> None:
    layout = CardLayout(tmp_path)
    MemoryFiles(layout).write_text(layout.handbook, "原来的手册\n")
    mem = memory(tmp_path, ScriptedModel())
    mem.files = EditorAtBackup(layout, layout.handbook, "编辑器里手改的手册\n")
    with pytest.raises(VersionConflict):
        mem.change_memory(card_manual.HANDBOOK_REF, sha256_text("原来的手册\n"), "通过工具改的手册")
    assert layout.handbook.read_text(encoding="utf-8") == "编辑器里手改的手册\n"
