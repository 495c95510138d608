"""Artifacts are byte-stable, scrubbed of secrets, and compared file by file."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.running.artifacts import REDACTED, ArtifactSet, canonical_json, compare_trees, normalize_text


def test_normalize_text() -> None:
    assert normalize_text("a\r\nb\rc") == "a\nb\nc\n"
    assert normalize_text("a\n\n\n") == "a\n"


def test_canonical_json_is_sorted_unescaped_indented() -> None:
    assert canonical_json({"b": 1, "a": "中"}) == '{\n  "a": "中",\n  "b": 1\n}\n'


def test_paths_must_stay_inside(tmp_path: Path) -> None:
    artifacts = ArtifactSet()
    for bad in ("/etc/x", "../x", "a/../../x"):
        with pytest.raises(ValueError, match="相对路径"):
            artifacts.add_text(bad, "x")
    artifacts.add_text("txt/a.txt", "x")
    with pytest.raises(ValueError, match="同一个文件"):
        artifacts.add_text("txt/a.txt", "y")


def test_secrets_are_scrubbed_before_writing(tmp_path: Path) -> None:
    artifacts = ArtifactSet(secrets=("sk-secret-value-123", "abc"))
    artifacts.add_json("out/x.json", {"note": "key sk-secret-value-123 leaked", "short": "abc"})
    artifacts.write(tmp_path)
    text = (tmp_path / "out" / "x.json").read_text(encoding="utf-8")
    assert "sk-secret-value-123" not in text and REDACTED in text
    assert '"short": "abc"' in text  # too short to be a key: left alone
    assert artifacts.scrubbed == ["out/x.json"]


def test_write_leaves_unchanged_files_alone(tmp_path: Path) -> None:
    artifacts = ArtifactSet()
    artifacts.add_text("txt/a.txt", "一")
    assert len(artifacts.write(tmp_path)) == 1
    assert artifacts.write(tmp_path) == []
    assert (tmp_path / "txt" / "a.txt").read_bytes() == "一\n".encode()


def test_compare_trees_reports_changed_new_and_leftover(tmp_path: Path) -> None:
    (tmp_path / "txt").mkdir()
    (tmp_path / "txt" / "same.txt").write_text("同\n", encoding="utf-8")
    (tmp_path / "txt" / "changed.txt").write_text("旧的一行\n", encoding="utf-8")
    (tmp_path / "txt" / "old.txt").write_text("没人再写\n", encoding="utf-8")
    fresh = {"txt/same.txt": "同\n".encode(), "txt/changed.txt": "新的一行\n".encode(),
             "txt/added.txt": "新文件\n".encode()}
    diffs = {d.path: d for d in compare_trees(tmp_path, fresh, orphan_dirs=("txt",))}
    assert set(diffs) == {"txt/changed.txt", "txt/added.txt", "txt/old.txt"}
    assert diffs["txt/changed.txt"].status == "changed"
    assert "-旧的一行" in diffs["txt/changed.txt"].diff and "+新的一行" in diffs["txt/changed.txt"].diff
    assert diffs["txt/added.txt"].status == "new"
    assert diffs["txt/old.txt"].status == "missing"
