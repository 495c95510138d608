"""Replacing a memory document only if it still holds what a change was based on, with no window.

A check followed by a rename leaves a window: an editor's save landing between the two
is overwritten, and a backup taken before the check does not hold it either. Here the new
text is staged beside the file, swapped in atomically (:func:`liyuan.fileio.exchange`),
and only then is what it displaced compared with the expected text. When it differs (a
save landed), the swap is undone, so the save is back in place, and every displaced text
that is not ours is also kept in ``.history/``. Where the system cannot swap, the
displaced file is caught by a hard link in ``.history/`` before the rename instead.

A staged text is named ``.<id>.staged.<name>`` (:data:`STAGED_MARK`); one a crash left
behind is removed with the other orphan temp files when the next sync starts.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Protocol

from liyuan import fileio
from liyuan.errors import MemoryFileError

__all__ = ["STAGED_MARK", "SwapFolder", "as_read", "replace_text"]


class SwapFolder(Protocol):
    """The folder a text is staged in and swapped into: what :func:`replace_text` needs.

    The card folder's :class:`liyuan.card.files.MemoryFiles` is what passes here (tests
    subclass it to inject crashes and slow disks).
    """

    def safe(self, path: Path) -> Path: ...
    def new_id(self) -> str: ...
    def write_text(self, path: Path, text: str) -> None: ...
    def history_path(self, path: Path) -> Path: ...
    def keep_displaced(self, path: Path, data: bytes) -> None: ...

STAGED_MARK = ".staged."
"""Part of the name a new text is staged under beside its file."""


def as_read(data: bytes) -> str | None:
    """``data`` decoded as the memory files are read (UTF-8, universal newlines); ``None``: not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def replace_text(files: SwapFolder, path: Path, text: str, expected: str | None) -> bool:
    """Write ``text`` to ``path`` only if it still holds ``expected`` (``None``: missing); see the module.

    The staged text is written through ``files.write_text`` (the adapter's one write, where
    tests inject crashes and slow disks).

    Returns:
        False when ``path`` did not hold ``expected``: nothing of ``text`` stays.

    Raises:
        MemoryFileError: The file cannot be staged, swapped or compared.
    """
    files.safe(path)
    staged = files.safe(path.with_name(f".{files.new_id()}{STAGED_MARK}{path.name}"))
    files.write_text(staged, text)
    try:
        if expected is None:
            try:
                os.link(staged, path)  # fails if the file appeared meanwhile: never overwrites
            except FileExistsError:
                return False
            fileio.fsync_dir(path.parent)
            return True
        return _swap_in(files, path, staged, text, expected)
    except OSError as exc:
        raise MemoryFileError(f"无法写入记忆文件 {path}：{exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)


def _swap_in(files: SwapFolder, path: Path, staged: Path, text: str, expected: str) -> bool:
    try:
        swapped = fileio.exchange(staged, path)
    except FileNotFoundError:
        return False  # deleted meanwhile: that is a change too
    if not swapped:
        return _link_then_rename(files, path, staged, expected)
    fileio.fsync_dir(path.parent)
    displaced = staged.read_bytes()  # what path named the instant before the swap
    if as_read(displaced) == expected:
        return True
    files.keep_displaced(path, displaced)
    fileio.exchange(staged, path)  # undo: the save is back; staged holds ours (or a newer save)
    fileio.fsync_dir(path.parent)
    back = staged.read_bytes()
    if back != text.encode("utf-8"):
        files.keep_displaced(path, back)
    return False


def _link_then_rename(files: SwapFolder, path: Path, staged: Path, expected: str) -> bool:
    """Without an atomic exchange: catch the old file by a hard link in ``.history/``, then rename."""
    caught = files.history_path(path)
    caught.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(path, caught)
    except FileNotFoundError:
        return False
    os.replace(staged, path)
    displaced = caught.read_bytes()
    if as_read(displaced) == expected:
        caught.unlink()
        fileio.fsync_dir(path.parent)
        return True
    fileio.atomic_write_bytes(path, displaced)  # put the save back (a copy stays in .history)
    return False
