"""Where a session's lines live: the seam between the session tree and its storage.

A :class:`SessionLog` is one session: an append-only sequence of JSON lines, the
``session`` header first. :class:`~liyuan.session.tree.SessionTree` reads it once and
appends to it; what the lines mean (entries, damage, branches) is the tree's and the
loader's business, never the log's, so every backend is read by the same loader and
gives the same tree.

Two backends: :class:`FileSessionLog`, a JSONL file (the default, today's format), and
``liyuan.storage.pgsessions.PostgresSessionLog``, rows of a PostgreSQL table shared by
several app servers.

Invariants every log keeps:

- Lines are only ever added at the end, each a complete line ending in ``\\n``; a line
  once stored is never changed, so the bytes read back are the bytes appended.
- :meth:`SessionLog.append` stores all of its lines or none of them as far as a later
  read can tell (a file may keep a torn fragment, which the loader skips and reports).
- An append made on an out-of-date view of the session is refused with
  :class:`~liyuan.errors.SessionConflictError` where the backend can tell (PostgreSQL:
  another writer appended since this log last read or wrote); nothing is written then.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, runtime_checkable

from liyuan.errors import TreeError
from liyuan.session.loader import SessionContent, read_session_file

__all__ = ["FileSessionLog", "SessionLog"]


@runtime_checkable
class SessionLog(Protocol):
    """One session's lines (see the module docstring for what every log guarantees)."""

    @property
    def name(self) -> str:
        """How notes about damaged lines name this session (a file name: ``001.jsonl``)."""
        ...

    def read(self) -> SessionContent | None:
        """Every line, through the one loader; ``None`` when the session does not exist yet.

        Raises:
            TreeError: The session exists but cannot be read.
        """
        ...

    def create(self, header: bytes) -> None:
        """Start the session with its header line.

        Raises:
            TreeError: It cannot be written.
        """
        ...

    def append(self, data: bytes) -> None:
        """Add complete lines at the end.

        Raises:
            SessionConflictError: Another writer appended since this log last read or wrote
                (nothing was written).
            TreeError: They cannot be written.
        """
        ...

    def sync(self) -> None:
        """Make every append so far durable (a log whose appends are durable does nothing).

        Raises:
            TreeError: It cannot.
        """
        ...


class FileSessionLog:
    """A session as a JSONL file: appended with ``O_APPEND``, fsynced per append unless
    ``fsync=False`` (then once per :meth:`sync`).

    A crash leaves at most one torn last line. After an append that failed part-way,
    the next one starts on a fresh line, so the fragment is skipped on reload and costs
    no later entry.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._mid_line = False
        """True when the file ends inside a line (a torn write, or a failed append)."""

    @property
    def name(self) -> str:
        return self.path.name

    def read(self) -> SessionContent | None:
        if not self.path.exists():
            return None
        try:
            content = read_session_file(self.path)
        except OSError as exc:
            raise TreeError(f"无法读取会话文件 {self.path}: {exc}") from exc
        # The next append must start on a fresh line, or it would glue itself onto the
        # torn fragment and both would be lost. The newline goes out with that append,
        # so merely reading (say, a read-only copy) never writes.
        self._mid_line = content.torn_tail
        return content

    def create(self, header: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.append(header)

    def append(self, data: bytes) -> None:
        if self._mid_line:
            data = b"\n" + data
        written = 0
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                # os.write may legally take fewer bytes than offered (a signal, a full
                # pipe-like target): keep writing the rest until the line is complete.
                while written < len(data):
                    count = os.write(fd, data[written:])
                    if count <= 0:
                        raise OSError(f"os.write 没有写入任何字节（已写 {written}/{len(data)}）")
                    written += count
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            if written:
                self._mid_line = not data[:written].endswith(b"\n")
            raise TreeError(f"无法追加会话文件 {self.path}: {exc}") from exc
        self._mid_line = False

    def sync(self) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise TreeError(f"无法同步会话文件 {self.path}: {exc}") from exc
