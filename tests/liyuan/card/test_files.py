"""Card-memory files: chat ids, atomic writes, manifest, fingerprints, stamp (12.2 case 6)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from liyuan.card.files import MemoryFiles, read_text_optional, write_memory_file
from liyuan.card.layout import CardLayout, validate_chat_id
from liyuan.card.manifest import Manifest, ManualState, RecapRecord, finish_pending, load_manifest, save_manifest
from liyuan.card.manual import list_memory, search_memory
from liyuan.card.sessions import FileSessions, chat_name, session_heads, sessions_kept, source_mark_of
from liyuan.errors import ConfigError, ManifestError, MemoryFileError

BAD_IDS = ["", "../x", "..", ".", "/etc/passwd", "a/b", "a\\b", "局一", "ａ", "a b", "abc\n", "a.md", "x" * 129]


@pytest.mark.parametrize("chat_id", BAD_IDS)
def test_bad_chat_ids_are_refused_in_chinese(chat_id: str) -> None:
    with pytest.raises(ConfigError, match="局 id"):
        validate_chat_id(chat_id)


@pytest.mark.parametrize("chat_id", ["A", "jA", "20260907", "a_b-C9", "x" * 128])
def test_good_chat_ids_pass(chat_id: str) -> None:
    assert validate_chat_id(chat_id) == chat_id


def test_layout_never_builds_a_path_from_a_bad_id(tmp_path: Path) -> None:
    layout = CardLayout(tmp_path / "card")
    for bad in ("../x", str(tmp_path / "abs"), ""):
        with pytest.raises(ConfigError):
            layout.recap_path(bad)
        with pytest.raises(ConfigError):
            layout.chat_dir(bad)
    assert layout.recap_path("jA") == tmp_path / "card" / "记忆" / "局" / "jA.md"
    assert layout.sessions_dir("jA") == tmp_path / "card" / "对话" / "jA" / "会话"


def test_chat_listing_skips_folders_that_are_not_chat_ids(tmp_path: Path) -> None:
    layout = CardLayout(tmp_path)
    for name in ("B", "A", "笔记", "a b"):
        (tmp_path / "对话" / name).mkdir(parents=True)
    (tmp_path / "对话" / "file.txt").write_text("x", encoding="utf-8")
    assert layout.chat_ids() == ["A", "B"]


def test_chat_name_from_meta_else_id(tmp_path: Path) -> None:
    layout = CardLayout(tmp_path)
    (tmp_path / "对话" / "A").mkdir(parents=True)
    (tmp_path / "对话" / "A" / "meta.json").write_text('{"name": " 初来乍到 "}', encoding="utf-8")
    (tmp_path / "对话" / "B").mkdir(parents=True)
    (tmp_path / "对话" / "B" / "meta.json").write_text("{broken", encoding="utf-8")
    sessions = FileSessions(layout)
    assert chat_name(sessions, "A") == "初来乍到"
    assert chat_name(sessions, "B") == "B"
    assert chat_name(sessions, "C") == "C"


def test_atomic_write_replaces_whole_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "记忆" / "记忆.md"
    write_memory_file(path, "旧\n")
    write_memory_file(path, "新的全文\n")
    assert path.read_text(encoding="utf-8") == "新的全文\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["记忆.md"]


def test_atomic_write_failure_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    write_memory_file(path, "旧\n")
    (tmp_path / "blocker").write_text("x", encoding="utf-8")
    with pytest.raises(MemoryFileError, match="无法写入"):
        write_memory_file(tmp_path / "blocker" / "b.md", "x")  # parent is a file
    assert path.read_text(encoding="utf-8") == "旧\n"


def test_reading_distinguishes_missing_from_unreadable(tmp_path: Path) -> None:
    assert read_text_optional(tmp_path / "nope.md") is None
    (tmp_path / "dir.md").mkdir()
    with pytest.raises(MemoryFileError):
        read_text_optional(tmp_path / "dir.md")
    (tmp_path / "bad.md").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(MemoryFileError):
        read_text_optional(tmp_path / "bad.md")


def test_recap_texts_lists_our_recaps_through_read_text(tmp_path: Path) -> None:
    layout = CardLayout(tmp_path)
    reads: list[str] = []

    class Counting(MemoryFiles):
        def read_text(self, path: Path) -> str | None:
            reads.append(path.name)
            return super().read_text(path)

    files = Counting(layout)
    assert files.recap_texts() == {}  # no 局/ yet: no recaps, not an error
    for name, text in [("B.md", "乙\n"), ("A.md", "甲\n"), ("E.md", "  \n"), ("F.md", "忘\n"),
                       ("笔记.md", "不是复盘"), ("A.txt", "x")]:
        write_memory_file(layout.recaps_dir / name, text)
    found = files.recap_texts({"F"})
    assert list(found.items()) == [("A", "甲\n"), ("B", "乙\n"), ("E", "  \n")]  # sorted; blank kept
    assert reads == ["A.md", "B.md", "E.md"]


def test_unlistable_recap_folder_raises_everywhere_instead_of_looking_empty(tmp_path: Path) -> None:
    # Deliberate: an unreadable 局/ used to make list_memory look empty while the merge
    # raised. Unreadable memory must never look like deleted memory, on any path.
    layout = CardLayout(tmp_path)
    files = MemoryFiles(layout)
    write_memory_file(layout.handbook, "手册：东门\n")
    layout.recaps_dir.write_text("局 应该是文件夹", encoding="utf-8")  # listing it fails
    with pytest.raises(MemoryFileError, match="无法列出复盘目录"):
        files.recap_texts()
    with pytest.raises(MemoryFileError, match="无法列出复盘目录"):
        list_memory(files)
    with pytest.raises(MemoryFileError, match="无法列出复盘目录"):
        search_memory(files, "东门")


def test_listing_and_searching_read_the_manifest_once(tmp_path: Path) -> None:
    layout = CardLayout(tmp_path)
    reads: list[Path] = []

    class Counting(MemoryFiles):
        def read_text(self, path: Path) -> str | None:
            reads.append(path)
            return super().read_text(path)

        def read_bytes(self, path: Path) -> bytes | None:
            reads.append(path)
            return super().read_bytes(path)

    files = Counting(layout)
    save_manifest(files, Manifest())
    write_memory_file(layout.handbook, "手册：东门\n")
    write_memory_file(layout.recap_path("A"), "复盘：东门\n")
    assert [d.ref for d in list_memory(files)] == ["card:handbook", "card:recap:A"]
    assert reads.count(layout.manifest) == 1
    reads.clear()
    assert len(search_memory(files, "东门")) == 2
    assert reads.count(layout.manifest) == 1


def _sessions_with(tmp_path: Path, name: str, text: str) -> tuple[Path, Path]:
    """A sessions folder holding one session file and a non-session file beside it."""
    sessions = tmp_path / "会话"
    sessions.mkdir()
    (sessions / name).write_text(text, encoding="utf-8")
    (sessions / "notes.txt").write_text("ignored", encoding="utf-8")
    return sessions, sessions / name


def test_source_mark_is_stable_and_moves_with_mtime_and_size(tmp_path: Path) -> None:
    sessions, f = _sessions_with(tmp_path, "2026-01-01.jsonl", '{"type":"session"}\n')
    first = source_mark_of(sessions)
    assert first == source_mark_of(sessions)
    assert first.startswith("2026-01-01.jsonl:") and "notes" not in first
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    moved = source_mark_of(sessions)
    assert moved != first
    with open(f, "a", encoding="utf-8") as handle:
        handle.write("{}\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # same mtime, new size
    assert source_mark_of(sessions) not in (first, moved)
    (sessions / "2026-01-02.jsonl").write_text("", encoding="utf-8")
    assert "|" in source_mark_of(sessions)
    assert source_mark_of(tmp_path / "missing") == ""


def test_session_heads_survive_appends_but_not_a_chat_made_again(tmp_path: Path) -> None:
    sessions, f = _sessions_with(tmp_path, "001.jsonl", '{"type":"session","id":"jA-001"}\n{"id":"e1","text":"灯塔"}\n')
    heads = session_heads(sessions)
    assert list(heads) == ["001.jsonl"]
    with open(f, "a", encoding="utf-8") as handle:
        handle.write('{"id":"e2"}\n' * 2000)  # the chat goes on, past the head's length
    (sessions / "002.jsonl").write_text("{}\n", encoding="utf-8")  # and opens another session
    assert sessions_kept(sessions, heads)
    # Deleted and started again under the same id: same file name, longer, other first entry.
    f.write_text('{"type":"session","id":"jA-001"}\n{"id":"n1","text":"新局"}\n' + "{}\n" * 100, encoding="utf-8")
    assert not sessions_kept(sessions, heads)
    f.unlink()
    assert not sessions_kept(sessions, heads)
    assert session_heads(tmp_path / "missing") == {} and not sessions_kept(sessions, {})


def test_manifest_round_trip_and_format(tmp_path: Path) -> None:
    files = MemoryFiles(CardLayout(tmp_path))
    manifest = Manifest(
        recaps={"B": RecapRecord("m2", "", None), "A": RecapRecord("m1", "2026-01-01T00:00:00+00:00", "abc")},
        merged_at="2026-01-01T00:01:00+00:00",
        manual=ManualState(protected_refs=["card:handbook"], forgotten_chats=["C"], aggregate_pinned=True,
                           epoch=2, pending=["记忆.md"]),
    )
    save_manifest(files, manifest)
    text = (tmp_path / "记忆" / ".清单.json").read_text(encoding="utf-8")
    assert text.endswith("}\n") and '  "version": 1' in text
    assert text.index('"A"') < text.index('"B"')  # chats in id order
    assert "mergedHash" not in json.loads(text)["recaps"]["B"]
    assert load_manifest(files) == manifest


@pytest.mark.parametrize("text", ["{not json", '{"version": 2, "recaps": {}}', '{"version": 1}', "[]"])
def test_unusable_manifest_is_refused_not_read_as_empty(tmp_path: Path, text: str) -> None:
    files = MemoryFiles(CardLayout(tmp_path))
    path = tmp_path / "记忆" / ".清单.json"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    for _ in range(3):  # read-only callers load the manifest on every call: no copies pile up
        with pytest.raises(ManifestError, match="已损坏"):
            load_manifest(files)
        with pytest.raises(ManifestError):
            list_memory(files)
        with pytest.raises(ManifestError):
            search_memory(files, "东门")
    assert path.read_text(encoding="utf-8") == text and not (tmp_path / "记忆" / ".history").exists()


def test_hand_edited_manifest_cannot_name_paths_outside_the_card(tmp_path: Path) -> None:
    raw = {
        "version": 1,
        "recaps": {"../x": {"sourceMark": "", "recapAt": "", "mergedHash": "h"}, "A": {"sourceMark": 3}},
        "manual": {"forgottenChats": ["../y", "B"], "pending": ["../../etc/passwd", "局/../x.md", "局/A.md",
                                                                  "常驻摘要.md"],
                   "supersededRecaps": {"/abs": "v"}, "epoch": True},
    }
    manifest = Manifest.from_json(json.dumps(raw))
    assert manifest is not None
    assert list(manifest.recaps) == ["A"] and manifest.recaps["A"].source_mark == ""
    assert manifest.manual is not None
    assert manifest.manual.forgotten_chats == ["B"]
    assert manifest.manual.pending == ["局/A.md", "常驻摘要.md"]
    assert manifest.manual.superseded_recaps == {} and manifest.manual.epoch == 0


def test_journal_deletes_recaps_and_moves_aggregates(tmp_path: Path) -> None:
    layout = CardLayout(tmp_path)
    files = MemoryFiles(layout)
    write_memory_file(layout.recap_path("A"), "复盘\n")
    write_memory_file(layout.handbook, "手册\n")
    manifest = Manifest(manual=ManualState(pending=["局/A.md", "记忆.md", "常驻摘要.md"]))
    assert finish_pending(files, manifest) is True
    assert not layout.recap_path("A").exists() and not layout.handbook.exists()
    moved = list(layout.history_dir.iterdir())
    assert len(moved) == 1 and moved[0].name.endswith("记忆.md") and moved[0].read_text(encoding="utf-8") == "手册\n"
    assert load_manifest(files).manual == ManualState()
    assert finish_pending(files, load_manifest(files)) is False


def test_input_stamp_moves_with_every_memory_file(tmp_path: Path) -> None:
    layout = CardLayout(tmp_path)
    files = MemoryFiles(layout)
    stamps = {files.input_stamp()}
    for path, text in [(layout.manifest, "{}"), (layout.handbook, "手册"), (layout.resident, "常驻"),
                       (layout.recap_path("A"), "复盘")]:
        write_memory_file(path, text)
        stamps.add(files.input_stamp())
    write_memory_file(layout.recap_path("A"), "改过的复盘")
    edited = files.input_stamp()
    stamps.add(edited)
    assert len(stamps) == 6
    layout.recap_path("A").unlink()
    assert files.input_stamp() != edited
    # Files outside memory (sessions, history) do not count.
    before = files.input_stamp()
    (tmp_path / "对话").mkdir()
    write_memory_file(layout.history_dir / "x.md", "旧")
    assert files.input_stamp() == before
