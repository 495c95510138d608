"""Keeping a card's memory folder safe and tidy: the path guard, history pruning, orphan temp files.

- :func:`check_inside` refuses a memory path that is a symlink, passes through one below
  the card folder, or resolves outside it. A card folder may come from someone else (a
  shared card archive): its memory must never make liyuan read or write elsewhere.
- :func:`prune_history` keeps the newest :data:`HISTORY_KEEP` copies of each document
  in ``.history/`` and removes older ones, so backups before every overwrite stay bounded.
- :func:`remove_orphan_temps` removes the temp files a crash in the middle of an atomic
  write (:mod:`liyuan.fileio`) leaves behind. Call it only under the card's write lock,
  where no other writer of this card can be between its temp file and its rename.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from liyuan.errors import MemoryFileError, UnsafePathError

__all__ = ["HISTORY_KEEP", "check_inside", "prune_history", "remove_orphan_temps"]

HISTORY_KEEP = 20
"""Copies of each memory document kept in ``.history/`` (older ones are pruned)."""

# fileio's temp names: "." + target name + "." + mkstemp's random part + ".tmp".
_TEMP_RE = re.compile(r"\..+\.[A-Za-z0-9_]+\.tmp")


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
        raise UnsafePathError(f"记忆路径不在卡片文件夹里，已拒绝读写：{path}") from None
    if ".." in relative.parts:
        raise UnsafePathError(f"记忆路径含“..”，已拒绝读写：{path}")
    current = card_dir
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            raise UnsafePathError(
                f"记忆路径是符号链接，已拒绝读写：{current}（卡片里的记忆文件和文件夹不能指向别处，"
                "请换成普通文件或文件夹）"
            )
    return path


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


def remove_orphan_temps(folders: list[Path]) -> int:
    """Remove fileio's leftover temp files (``.<name>.<random>.tmp``) in ``folders``.

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
