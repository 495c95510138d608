"""Byte-stable artifacts: every file the harness writes goes through here.

Invariant: the same logical content always yields the same bytes. Text is UTF-8 with
LF line ends and exactly one trailing newline; JSON is ``sort_keys`` +
``ensure_ascii=False`` + ``indent=2`` + trailing newline. Nothing machine-specific
(timestamps, absolute paths, mtimes) is added here, and known secrets are scrubbed
before anything reaches the disk.

An :class:`ArtifactSet` collects files in memory under repository-relative POSIX
paths; :meth:`ArtifactSet.write` puts them under a root atomically, file by file.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from liyuan.fileio import atomic_write_bytes

__all__ = [
    "REDACTED",
    "ArtifactSet",
    "FileDiff",
    "atomic_write",
    "canonical_json",
    "compare_trees",
    "normalize_text",
    "unified",
]

REDACTED = "[已隐去]"


def normalize_text(text: str) -> str:
    """LF line ends, no trailing spaces at the end of the file, exactly one final newline."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.rstrip("\n") + "\n"


def canonical_json(data: Any) -> str:
    """The one JSON spelling used for every artifact."""
    return json.dumps(data, sort_keys=True, ensure_ascii=False, indent=2) + "\n"


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, as every artifact is written."""
    atomic_write_bytes(path, data)


def _check_relative(path: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ValueError(f"产物路径必须是仓库内的相对路径：{path!r}")
    return pure.as_posix()


@dataclass
class ArtifactSet:
    """Files produced by a run, held in memory until written.

    Args:
        secrets: Strings that must never reach a file (API keys). Any occurrence is
            replaced by :data:`REDACTED` and noted in :attr:`scrubbed`.
    """

    secrets: tuple[str, ...] = ()
    files: dict[str, bytes] = field(default_factory=dict)
    scrubbed: list[str] = field(default_factory=list)
    """Paths in which a secret had to be replaced (should stay empty)."""

    def _scrub(self, path: str, text: str) -> str:
        for secret in self.secrets:
            # Short strings would match ordinary words; real keys are long.
            if len(secret) >= 8 and secret in text:
                text = text.replace(secret, REDACTED)
                self.scrubbed.append(path)
        return text

    def add_text(self, path: str, text: str) -> None:
        """Add a text file (normalized)."""
        rel = _check_relative(path)
        if rel in self.files:
            raise ValueError(f"两个步骤写了同一个文件：{rel}")
        self.files[rel] = normalize_text(self._scrub(rel, text)).encode("utf-8")

    def add_json(self, path: str, data: Any) -> None:
        """Add a JSON file in the canonical spelling."""
        self.add_text(path, canonical_json(data))

    def absorb(self, other: ArtifactSet) -> None:
        """Take every file of ``other`` (already normalized and scrubbed); a path both hold is an error."""
        for rel, data in other.files.items():
            if rel in self.files:
                raise ValueError(f"两个步骤写了同一个文件：{rel}")
            self.files[rel] = data
        self.scrubbed.extend(other.scrubbed)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.files))

    def __len__(self) -> int:
        return len(self.files)

    def text(self, path: str) -> str:
        """Content of one file as text."""
        return self.files[path].decode("utf-8")

    def write(self, root: Path) -> list[Path]:
        """Write every file under ``root``; unchanged files are left untouched."""
        written = []
        for rel in self:
            target = root / rel
            data = self.files[rel]
            if target.is_file() and target.read_bytes() == data:
                continue
            atomic_write(target, data)
            written.append(target)
        return written


@dataclass(frozen=True)
class FileDiff:
    """One file that differs between the committed tree and a fresh run."""

    path: str
    status: str
    """``changed``, ``missing`` (committed file absent from the run) or ``new`` (not committed)."""
    diff: str


def unified(old: str, new: str, old_label: str, new_label: str, context: int = 3) -> str:
    """A unified diff of two texts, as one string (empty when equal)."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        fromfile=old_label, tofile=new_label, n=context,
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ 文件末尾没有换行\n")
    return "".join(out)


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def compare_trees(
    expected_root: Path,
    fresh: Mapping[str, bytes],
    *,
    orphan_dirs: Iterable[str] = (),
) -> list[FileDiff]:
    """Compare fresh artifacts with the files committed under ``expected_root``.

    Args:
        expected_root: The repository root holding the committed artifacts.
        fresh: Relative path to bytes, as produced by a run.
        orphan_dirs: Folders whose committed files must all be produced by the run;
            anything else in them is reported as ``missing`` (left over from an old run).
    """
    diffs: list[FileDiff] = []
    for rel in sorted(fresh):
        target = expected_root / rel
        new = fresh[rel].decode("utf-8")
        if not target.is_file():
            diffs.append(FileDiff(rel, "new", unified("", new, f"已提交/{rel}（不存在）", f"重新生成/{rel}")))
            continue
        old = _read(target)
        if old != new:
            diffs.append(FileDiff(rel, "changed", unified(old, new, f"已提交/{rel}", f"重新生成/{rel}")))
    for folder in orphan_dirs:
        base = expected_root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(expected_root).as_posix()
            if path.is_file() and rel not in fresh:
                diffs.append(FileDiff(rel, "missing",
                                      unified(_read(path), "", f"已提交/{rel}", "重新生成（不再产生这个文件）")))
    return diffs
