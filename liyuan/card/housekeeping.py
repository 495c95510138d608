"""Keeping a card's memory folder safe and tidy: the path guard, history pruning, orphan temp files.

- :func:`check_inside` refuses a memory path that is a symlink, passes through one below
  the card folder, or resolves outside it. A card folder may come from someone else (a
  shared card archive): its memory must never make liyuan read or write elsewhere.
- :func:`remove_inside` removes a folder of the card (a chat) recursively, opening every
  folder on the way relative to its parent and never following a symlink, so even a link
  swapped in after :func:`check_inside` ran cannot make it remove anything outside.
- :func:`prune_history` keeps the newest :data:`HISTORY_KEEP` copies of each document
  in ``.history/`` and removes older ones, so backups before every overwrite stay bounded.
- :func:`remove_orphan_temps` removes the temp files a crash in the middle of an atomic
  write (:mod:`liyuan.fileio`) leaves behind. Call it only under the card's write lock,
  where no other writer of this card can be between its temp file and its rename.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from pathlib import Path

from liyuan.errors import MemoryFileError, UnsafePathError

__all__ = ["HISTORY_KEEP", "check_inside", "is_temp_name", "prune_history", "remove_inside", "remove_orphan_temps"]

HISTORY_KEEP = 20
"""Copies of each memory document kept in ``.history/`` (older ones are pruned)."""

# fileio's temp names: "." + target name + "." + mkstemp's random part + ".tmp".
# MemoryFiles.replace_text's staged texts: "." + id + ".staged." + target name.
_TEMP_RE = re.compile(r"\..+\.[A-Za-z0-9_]+\.tmp|\.[^.]+\.staged\..+")


def check_inside(card_dir: Path, path: Path) -> Path:
    """Return ``path`` if it stays inside ``card_dir`` without passing any symlink.

    Every component from ``card_dir`` down to ``path`` is checked with ``lstat`` (a
    missing component is fine: it will be created as a plain folder or file). The card
    folder itself may be a symlink: the user chose where the card lives.

    Raises:
        UnsafePathError: ``path`` is outside ``card_dir``, climbs with ``..``, or a
            component below ``card_dir`` is a symlink.
    """
    try:
        relative = path.relative_to(card_dir)
    except ValueError:
        raise UnsafePathError(f"路径不在卡片文件夹里，已拒绝读写：{path}") from None
    if ".." in relative.parts:
        raise UnsafePathError(f"路径含“..”，已拒绝读写：{path}")
    current = card_dir
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            raise UnsafePathError(_LINK_MESSAGE.format(current))
    return path


_LINK_MESSAGE = ("卡片里的路径是符号链接，已拒绝读写：{}（卡片里的对话、记忆文件和文件夹不能指向别处，"
                 "请换成普通文件或文件夹）")
_NO_FOLLOW = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)


def remove_inside(card_dir: Path, parts: tuple[str, ...]) -> bool:
    """Remove ``card_dir/<parts...>`` recursively without ever leaving the card.

    Each folder on the way is opened relative to the one before with ``O_NOFOLLOW``,
    and the last one is removed by :func:`shutil.rmtree` relative to its parent's
    descriptor (which removes a tree without following any symlink inside it). The card
    folder itself may be a symlink, as in :func:`check_inside`.

    Returns:
        False when the path does not exist.

    Raises:
        UnsafePathError: A component is a symlink (nothing is removed).
        OSError: The removal failed part-way.
    """
    if not parts or any(part in ("", ".", "..") or "/" in part for part in parts):
        raise UnsafePathError(f"路径不合法，已拒绝删除：{parts!r}")
    if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - platforms without *at calls
        path = check_inside(card_dir, card_dir.joinpath(*parts))
        if not path.exists():
            return False
        shutil.rmtree(path)
        return True
    try:
        fd = os.open(card_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except FileNotFoundError:
        return False
    current = card_dir
    try:
        for index, part in enumerate(parts):
            current = current / part
            try:
                mode = os.lstat(part, dir_fd=fd).st_mode
            except FileNotFoundError:
                return False
            if stat.S_ISLNK(mode):
                raise UnsafePathError(_LINK_MESSAGE.format(current))
            if index == len(parts) - 1:
                break
            try:
                inner = os.open(part, _NO_FOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link or a file meanwhile
                    raise UnsafePathError(_LINK_MESSAGE.format(current)) from exc
                raise
            os.close(fd)
            fd = inner
        if stat.S_ISDIR(mode):
            shutil.rmtree(parts[-1], dir_fd=fd)  # refuses a symlink in its place, follows none inside
        else:
            os.unlink(parts[-1], dir_fd=fd)
        return True
    finally:
        os.close(fd)


def prune_history(history_dir: Path, suffix: str, keep: int = HISTORY_KEEP) -> int:
    """Remove all but the newest ``keep`` files in ``history_dir`` whose name ends with ``suffix``.

    Newest by modification time, then by name. Returns how many were removed.

    Raises:
        MemoryFileError: The folder cannot be listed or a file cannot be removed.
    """
    try:
        copies = [p for p in history_dir.iterdir() if p.name.endswith(suffix) and p.is_file()]
        copies.sort(key=lambda p: (p.stat().st_mtime_ns, p.name))
        old = copies[:-keep] if keep > 0 else copies
        for path in old:
            path.unlink()
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise MemoryFileError(f"无法清理备份目录 {history_dir}：{exc}") from exc
    return len(old)


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is one an atomic write or a staged replace gives its temp file."""
    return _TEMP_RE.fullmatch(name) is not None


def remove_orphan_temps(folders: list[Path]) -> int:
    """Remove leftover temp files (``.<name>.<random>.tmp``, ``.<id>.staged.<name>``) in ``folders``.

    Symlinks and folders are never touched; a missing folder is fine. Returns the count.

    Raises:
        MemoryFileError: A folder cannot be listed or a temp file cannot be removed.
    """
    removed = 0
    for folder in folders:
        try:
            names = [entry.name for entry in os.scandir(folder)
                     if _TEMP_RE.fullmatch(entry.name) and entry.is_file(follow_symlinks=False)]
            for name in names:
                os.unlink(folder / name)
                removed += 1
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise MemoryFileError(f"无法清理残留的临时文件（{folder}）：{exc}") from exc
    return removed
