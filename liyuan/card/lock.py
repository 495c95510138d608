"""A card's locks, across threads and processes: an OS file lock on a file in ``记忆/``.

A web server and a background worker, or two browser tabs served by two processes, may
sync or edit the same card at once. Each :class:`CardLock` pairs a thread lock (threads
of one process) with an exclusive OS lock on a lock file in the card's memory folder
(other processes): ``fcntl.flock`` on Linux and macOS, ``msvcrt.locking`` on Windows.
The OS drops the lock when its process dies, so a crash never leaves a card locked.
The standard library is enough here; the ``filelock`` package would add a dependency
for the same two system calls.

Invariants: the file lock is taken when a thread first enters and released when it last
leaves (re-entrant locks count their depth), and its file descriptor is closed then, so
a process forked while no lock is held inherits none. The lock file is an empty file
that is never read; it is opened without following a symlink.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from liyuan.card.housekeeping import check_inside
from liyuan.card.layout import CardLayout
from liyuan.card.memstore import CardLocks
from liyuan.errors import MemoryFileError

__all__ = ["SYNC_LOCK_FILE", "WRITE_LOCK_FILE", "CardLock", "card_locks"]

SYNC_LOCK_FILE = ".sync.lock"
"""Held for a whole sync (model calls included): one sync of a card at a time."""
WRITE_LOCK_FILE = ".write.lock"
"""Held briefly around every read-decide-write of memory files; never across a model call."""

_READ_ONLY_ERRORS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
"""Why a lock file could not be made in a folder this process may only read."""

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _lock(fd: int, blocking: bool) -> bool:
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                return True
            except OSError:
                if not blocking:
                    return False
                time.sleep(0.05)

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(fd: int, blocking: bool) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class CardLock:
    """A lock that excludes other threads of this process and other processes.

    Args:
        card_dir: The card folder (the lock file's path is checked against it).
        path: The lock file, inside ``card_dir/记忆``.
        reentrant: Whether the owning thread may enter again (then it leaves as often).
    """

    def __init__(self, card_dir: Path, path: Path, *, reentrant: bool) -> None:
        self._card_dir = card_dir
        self.path = path
        self._thread_lock: threading.Lock | threading.RLock = threading.RLock() if reentrant else threading.Lock()
        self._depth = 0
        self._fd: int | None = None

    def _open(self) -> int:
        check_inside(self._card_dir, self.path)
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, flags, 0o644)
        except OSError as exc:
            raise MemoryFileError(f"无法打开卡片的锁文件 {self.path}：{exc}") from exc

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock; with ``blocking=False`` return False at once when it is taken."""
        if not self._thread_lock.acquire(blocking):
            return False
        if self._depth == 0:
            try:
                fd = self._open()
            except BaseException:
                self._thread_lock.release()
                raise
            try:
                got = _lock(fd, blocking)
            except BaseException:
                os.close(fd)
                self._thread_lock.release()
                raise
            if not got:
                os.close(fd)
                self._thread_lock.release()
                return False
            self._fd = fd
        self._depth += 1
        return True

    def release(self) -> None:
        """Leave once; the file lock goes when the owner leaves for the last time."""
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                _unlock(fd)
            finally:
                os.close(fd)
        self._thread_lock.release()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the lock around a read, as ``with lock:`` does, except in a memory folder
        this process may not write (a read-only mount or permissions): there the lock
        file cannot be made, and the read goes ahead without it instead of failing. A read
        changes nothing; at worst it sees another writer's change half done."""
        try:
            self.acquire()
        except MemoryFileError as exc:
            cause = exc.__cause__
            if not (isinstance(cause, OSError) and cause.errno in _READ_ONLY_ERRORS):
                raise
            yield
            return
        try:
            yield
        finally:
            self.release()

    def __enter__(self) -> CardLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


_LOCKS: dict[Path, CardLocks] = {}
"""The locks of every card this process has locked, keyed by the card's resolved folder.

Process-wide, not owned by a card object, because what they guard is the card's folder
and the OS file lock is held per process: every object that touches one card (each
:class:`~liyuan.card.sync.CardMemory`, and the sync worker builds a fresh one per run;
two :class:`~liyuan.app.Card` objects opened on the same folder) must meet on the same
:class:`CardLock`. With a lock object each, two threads of this process would not
exclude each other through the thread lock, and a re-entrant write lock entered through
a second object would wait on its own file lock forever. Lifetime: the process. An
entry is two small objects and holds no file descriptor while its lock is not held,
so entries are never removed (a removed entry could be replaced while still held).
"""
_LOCKS_GUARD = threading.Lock()


def card_locks(card_dir: Path) -> CardLocks:
    """The locks of one card (the same objects for every path spelling, in this process).

    Both are OS file locks in ``记忆/`` as well (see :mod:`liyuan.card.lock`), so
    they exclude other processes too.
    """
    key = card_dir.resolve()
    with _LOCKS_GUARD:
        if key not in _LOCKS:
            memory_dir = CardLayout(key).memory_dir
            _LOCKS[key] = CardLocks(
                run=CardLock(key, memory_dir / SYNC_LOCK_FILE, reentrant=False),
                write=CardLock(key, memory_dir / WRITE_LOCK_FILE, reentrant=True),
            )
        return _LOCKS[key]
