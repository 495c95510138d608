"""Atomic file replacement, the one way liyuan and the harness write whole files.

Invariant: after :func:`atomic_write_bytes` returns, ``path`` holds exactly ``data``;
if it raises (or the process dies), ``path`` holds exactly what it held before. No
reader ever sees a half-written file. The temp file lives in the same folder (so the
rename cannot cross filesystems), is fsynced before the rename, and the folder is
fsynced after it so the rename itself survives a power cut.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text", "exchange", "fsync_dir"]

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}


def _load_renameat2() -> Callable[..., int] | None:
    try:
        function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not Linux, or a C library without it
        return None
    return function


_renameat2 = _load_renameat2()


def exchange(first: Path, second: Path) -> bool:
    """Swap two existing paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``).

    Afterwards ``first`` names what ``second`` named the instant before, and the other
    way round: nothing is replaced, so nothing a concurrent writer saved can be lost.

    Returns:
        False when this system or filesystem cannot exchange (nothing changed).

    Raises:
        FileNotFoundError: One of the paths does not exist.
        OSError: Any other failure (nothing changed).
    """
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(second))


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort where folders cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, ``os.replace``).

    Raises:
        OSError: The folder cannot be created or the file cannot be written; the old
            file, if any, is left as it was and no temp file remains.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)  # mkstemp makes 0600; these are ordinary, readable files
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` as UTF-8 (line ends kept as given)."""
    atomic_write_bytes(path, text.encode("utf-8"))
