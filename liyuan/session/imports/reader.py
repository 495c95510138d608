"""Importing a chat file: read it as data, or write it into a new session tree.

Invariants:

- Nothing is written unless the whole file reads: :func:`import_chat` makes a first
  pass that only validates and counts, then a second pass that writes through a
  :class:`~liyuan.session.tree.SessionTree` into a temporary file beside the target,
  and links that file into place only when every entry is in. A failure at any point
  leaves no file behind and never touches an existing session (an existing target is
  refused, not overwritten). A process killed mid-import cannot clean up: its temporary
  file (named after its pid) is removed by :func:`remove_dead_import_temps` once that
  process is gone, which :class:`liyuan.Card` calls when it opens the card.
- Both passes stream the file (:mod:`liyuan.session.imports.source`); the importer
  holds one message at a time. The tree it writes holds its entries in memory, as any
  open :class:`SessionTree` does.
- The tree is the chat as the memory reads chats: the greeting is an assistant message
  marked ``greeting`` at the root; each swipe that was not chosen is a sibling of the
  chosen one (a reroll: same parent, appended first), and the chosen one continues the
  main branch; notes (system, narrator, hidden, tool) are ``liyuan-import-note``
  custom entries, which the story view leaves out like other process entries.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from liyuan.clock import Clock, IdFactory, random_ids, system_clock
from liyuan.fileio import fsync_dir
from liyuan.session.entries import IMPORT_NOTE_TYPE
from liyuan.session.imports.formats import Options, Tally, detect_format, parse_messages
from liyuan.session.imports.model import FORMATS, ChatImportError, ChatSource, ImportedChat, ImportedMessage
from liyuan.session.imports.source import MAX_VALUE_CHARS, TextSource
from liyuan.session.tree import SessionTree

__all__ = ["IMPORT_TEMP_MARK", "ChatReader", "import_chat", "read_chat", "remove_dead_import_temps", "write_messages"]

PROGRESS_EVERY = 1000
"""Messages between two progress callbacks."""
IMPORT_TEMP_MARK = ".importing-"
"""An import's temporary file is ``.<target>.importing-<pid>-<thread>`` beside its target."""
_TEMP_RE = re.compile(r"\..+" + re.escape(IMPORT_TEMP_MARK) + r"(\d+)-(\d+)")


def _alive(pid: int) -> bool:
    """True unless process ``pid`` certainly does not exist (on this machine)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else (or cannot tell): never remove under it
    return True


def remove_dead_import_temps(folder: Path) -> int:
    """Remove the temporary files imports left in ``folder`` when their process died (a kill).

    A file whose process is still alive is an import under way and is left alone (a pid
    reused since only delays the cleanup). Symlinks and folders are never touched; a
    missing folder is fine. Returns how many were removed.

    Raises:
        OSError: The folder cannot be listed or a file cannot be removed.
    """
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return 0
    for entry in entries:
        match = _TEMP_RE.fullmatch(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False) or _alive(int(match.group(1))):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder / entry.name)
            removed += 1
    return removed


class ChatReader:
    """One chat file, read in streaming passes.

    Args:
        path: The file.
        format: ``sillytavern``, ``openai`` or ``transcript``; ``None`` guesses from the
            file's start.
        user_name: Transcript only: the speaker who is the user.
        conversation: OpenAI only: which conversation of the file (1-based).
        max_value_chars: Longest line or JSON value accepted.

    Raises:
        ChatImportError: An unknown format, or an empty or unreadable file.
    """

    def __init__(self, path: str | os.PathLike[str], format: str | None = None, *,
                 user_name: str | None = None, conversation: int = 1,
                 max_value_chars: int = MAX_VALUE_CHARS) -> None:
        self._text = TextSource(path, max_value_chars=max_value_chars)
        if format is not None and format not in FORMATS:
            raise ChatImportError(f"不认识的格式 {format!r}（可用：{'、'.join(FORMATS)}）")
        self.format = format or detect_format(self._text)
        self.options = Options(user_name=user_name or None, conversation=conversation)
        self.source: ChatSource | None = None
        """What the last complete pass found."""

    def messages(self) -> Iterator[ImportedMessage]:
        """Every message of the chat, in file order (one streaming pass).

        Raises:
            ChatImportError: On the first line that cannot be read.
        """
        tally = Tally()
        yield from parse_messages(self._text, self.format, self.options, tally)
        self.source = ChatSource(
            format=self.format, sha256=self._text.sha256, messages=tally.messages, swipes=tally.swipes,
            notes=tally.notes, user_name=tally.user_name, char_name=tally.char_name,
            conversations=tally.conversations, conversation=self.options.conversation,
        )

    def scan(self) -> ChatSource:
        """Read the whole file once, keeping nothing but counts: is it importable?"""
        for _ in self.messages():
            pass
        assert self.source is not None
        return self.source


def read_chat(path: str | os.PathLike[str], format: str | None = None, *,
              user_name: str | None = None, conversation: int = 1) -> ImportedChat:
    """Parse a chat file into data: its messages (swipes on them) and its provenance.

    Holds the whole chat in memory; :func:`import_chat` streams instead.

    Raises:
        ChatImportError: With the line and field of the first problem.
    """
    reader = ChatReader(path, format, user_name=user_name, conversation=conversation)
    messages = tuple(reader.messages())
    assert reader.source is not None
    return ImportedChat(reader.source, messages)


def write_messages(tree: SessionTree, messages: Iterable[ImportedMessage], fmt: str, *,
                   on_progress: Callable[[int], None] | None = None) -> int:
    """Append messages to ``tree`` as described in the module docstring; returns how many."""
    count = 0
    for message in messages:
        count += 1
        if on_progress is not None and count % PROGRESS_EVERY == 0:
            on_progress(count)
        origin = {"format": fmt, "line": message.line}
        if message.role == "note":
            data: dict[str, Any] = {"kind": message.note_kind, "role": message.note_role, "name": message.name,
                                    "text": message.text, "source": origin}
            if message.swipes:
                data.update(swipes=list(message.swipes), swipeId=message.chosen)
            tree.append_custom(IMPORT_NOTE_TYPE, data)
            continue
        extra: dict[str, Any] = {"imported": origin}
        if message.name:
            extra["name"] = message.name
        if message.greeting:
            extra["greeting"] = True
        if message.thinking:
            extra["thinking"] = message.thinking
        if message.swipes:
            parent = tree.leaf_id
            for index, text in message.alternatives:
                tree.append_message(message.role, text, swipe=index, **extra)
                tree.navigate(parent)
            extra["swipe"] = message.chosen
        tree.append_message(message.role, message.text, **extra)
    return count


def import_chat(reader: ChatReader, session_path: str | os.PathLike[str], *, session_id: str = "imported",
                clock: Clock = system_clock, ids: IdFactory = random_ids,
                on_progress: Callable[[int], None] | None = None) -> ChatSource:
    """Import a chat file into a new session tree file.

    Args:
        reader: The chat file (SillyTavern JSONL, OpenAI JSON/JSONL, or a transcript) and
            how to read it: ``ChatReader(path, format, user_name=..., conversation=...)``.
        session_path: The session file to create; must not exist.
        session_id: Id written into the session header.
        clock: Timestamps of the new entries.
        ids: Ids of the new entries.
        on_progress: Called with the number of messages written so far, every 1000.

    Returns:
        The chat's provenance (format, sha256, counts, the names the chat holds).

    Raises:
        ChatImportError: The file cannot be imported (line and field named), or the
            session file exists already. Nothing is written in either case.
    """
    target = Path(session_path)
    if target.exists():
        raise ChatImportError(f"会话文件 {target.name} 已经存在：导入只写新文件，不改已有的会话")
    source = reader.scan()
    created = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    # One temporary file per process and thread: two imports into one target never share it.
    temp = target.with_name(f".{target.name}{IMPORT_TEMP_MARK}{os.getpid()}-{threading.get_ident()}")
    try:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()  # a leftover of an import that died; never a session
        # The temporary file is no session until it is linked into place: one fsync of the
        # whole file before the link gives the same guarantee as one per entry, at a
        # fraction of the cost (5,000 messages: about 9 s of fsyncs on a disk otherwise).
        tree = SessionTree(temp, session_id=session_id, clock=clock, ids=ids, fsync=False)
        write_messages(tree, reader.messages(), source.format, on_progress=on_progress)
        if reader.source is None or reader.source.sha256 != source.sha256:
            raise ChatImportError("文件在导入过程中被改动了，请重新导入")
        fd = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        lost: ChatImportError | None = None
        try:
            os.link(temp, target)  # fails if the target appeared meanwhile: never overwrites
        except FileExistsError:
            lost = ChatImportError(f"会话文件 {target.name} 已经存在：导入只写新文件，不改已有的会话")
        if lost is not None:
            raise lost  # outside the except block: the OS error is no part of the story
        temp.unlink()
        fsync_dir(target.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        for folder in created:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return source
