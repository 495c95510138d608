"""The session tree (#compact's ground truth): one append-only JSONL file per session.

Guarantees: the file is only ever appended to (one complete, fsynced line per entry);
loading never crashes on bad lines (they are skipped and reported); a reroll or rewind
moves the leaf, and the next append forks a new branch. The ledger and roster the app
keeps beside the story are read from the same tree (:mod:`liyuan.session.state`).
Chats from elsewhere (SillyTavern, OpenAI-format logs, transcripts) come in through
:mod:`liyuan.session.imports`: :func:`read_chat` as data, :func:`import_chat` as a new tree.
"""

from __future__ import annotations

from liyuan.session.branch import BranchView, branch_to
from liyuan.session.damage import PROBLEM_KINDS
from liyuan.session.entries import (
    DAMAGED_ENTRY_TYPE,
    IMPORT_NOTE_TYPE,
    SESSION_VERSION,
    Entry,
    SessionContent,
    SessionProblem,
    args_json,
    custom,
    is_message,
    last_usage,
    message,
    parse_entry,
    read_entries,
    thinking,
    tool_calls,
    usage_tokens,
)
from liyuan.session.imports import (
    ChatImportError,
    ChatReader,
    ChatSource,
    ImportedChat,
    ImportedMessage,
    import_chat,
    read_chat,
    safe_chat_id,
)
from liyuan.session.state import (
    EMPTY_STATE_TEXT,
    STATE_ENTRY_TYPE,
    Character,
    Ledger,
    format_roster,
    format_state,
    state_from_branch,
)
from liyuan.session.tree import (
    SessionTree,
)

__all__ = [
    "DAMAGED_ENTRY_TYPE",
    "EMPTY_STATE_TEXT",
    "IMPORT_NOTE_TYPE",
    "PROBLEM_KINDS",
    "SESSION_VERSION",
    "STATE_ENTRY_TYPE",
    "BranchView",
    "Character",
    "ChatImportError",
    "ChatReader",
    "ChatSource",
    "Entry",
    "ImportedChat",
    "ImportedMessage",
    "Ledger",
    "SessionContent",
    "SessionProblem",
    "SessionTree",
    "args_json",
    "branch_to",
    "custom",
    "format_roster",
    "format_state",
    "import_chat",
    "is_message",
    "last_usage",
    "message",
    "parse_entry",
    "read_chat",
    "read_entries",
    "safe_chat_id",
    "state_from_branch",
    "thinking",
    "tool_calls",
    "usage_tokens",
]
