"""The session tree (#compact's ground truth): one append-only JSONL file per session.

Guarantees: the file is only ever appended to (one complete, fsynced line per entry);
loading never crashes on bad lines (they are skipped and reported); a reroll or rewind
moves the leaf, and the next append forks a new branch. The ledger and roster the app
keeps beside the story are read from the same tree (:mod:`liyuan.session.state`).
Chats from elsewhere (SillyTavern, OpenAI-format logs, transcripts) come in through
:mod:`liyuan.session.imports`: :func:`read_chat` as data, :func:`import_chat` as a new tree.
"""

from __future__ import annotations

from liyuan.session.branch import BranchView
from liyuan.session.entries import Entry
from liyuan.session.imports import ChatImportError, import_chat, read_chat
from liyuan.session.state import Character, Ledger
from liyuan.session.tree import SessionTree

__all__ = [
    "BranchView",
    "Character",
    "ChatImportError",
    "Entry",
    "Ledger",
    "SessionTree",
    "import_chat",
    "read_chat",
]
