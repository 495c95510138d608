"""Errors raised by liyuan.

The tree separates the caller's mistakes from runtime failures::

    LiyuanError
    ├── ConfigError          a caller's mistake: bad argument, bad chat id, bad config file
    ├── StateError           a call the chat or card is not ready for: record() before prepare(),
    │                        nothing to reroll, a closed chat, no side model, a chat that exists
    ├── TreeError            a session file that cannot be used at all (not a bad line: those are skipped)
    │   └── SessionConflictError  another app server appended to the session first (nothing written)
    ├── MemoryFileError      a card-memory file that cannot be read or written safely
    │   ├── VersionConflict  a hand edit raced another change (stale version)
    │   ├── ManifestError    the manifest is damaged: the card's sync stops until it is repaired
    │   ├── UnsafePathError  a memory path goes through a symlink or leaves the card folder
    │   └── LoreError        the card's lore book (设定集.yaml) cannot be read or has a bad entry
    ├── StorageError         where the card's state is kept says no (one family for every backend):
    │   ├── StorageUnavailable  cannot be reached now (server down, connection lost, pool exhausted)
    │   ├── StorageConflict     another writer got there first (SessionConflictError, VersionConflict)
    │   ├── StorageDamaged      what is stored is not what the library left (a half-copied card, ...)
    │   │   └── CardIncomplete  a copy into it did not finish: the card refuses to open
    │   └── StorageRefused      a name or path the storage cannot hold (a lone surrogate, an unwritable folder)
    ├── CardImportError      a character card or lore book file cannot be imported (nothing written)
    └── ModelError           the side model failed: transport, HTTP status, empty or malformed reply
        └── ModelOutputError the model answered, but the answer does not have the required shape
"""

from __future__ import annotations

__all__ = [
    "CardImportError",
    "CardIncomplete",
    "ConfigError",
    "LiyuanError",
    "LoreError",
    "ManifestError",
    "MemoryFileError",
    "ModelError",
    "ModelOutputError",
    "SessionConflictError",
    "StateError",
    "StorageConflict",
    "StorageDamaged",
    "StorageError",
    "StorageRefused",
    "StorageUnavailable",
    "TreeError",
    "UnsafePathError",
    "VersionConflict",
]


class LiyuanError(Exception):
    """Base class of every error liyuan raises on purpose."""


class ConfigError(LiyuanError, ValueError):
    """The caller passed something unusable (an unsafe chat id, an invalid option)."""


class StateError(LiyuanError):
    """The call does not fit the state it finds; nothing was written.

    Unlike :class:`ConfigError` the arguments may be fine: the same call succeeds
    once the state is right (``prepare()`` before ``record()``, a side model
    configured, a reopened chat, ``replace=True`` for an existing lore book).
    """


class TreeError(LiyuanError):
    """A session tree cannot be opened or appended to."""


class MemoryFileError(LiyuanError):
    """A card-memory file cannot be read or written safely."""


class StorageError(LiyuanError):
    """Where the card's state is kept (the card folder, PostgreSQL) refused or failed a call.

    Never raised itself: one of the four below says what happened, on every backend, so
    an app handles them without knowing where the card is kept.
    """


class StorageUnavailable(StorageError, TreeError, MemoryFileError):
    """The storage cannot be reached now: the server is down or restarting, the connection
    was cut, every pooled connection stayed busy past the timeout. The failed call wrote
    nothing (or, for a write already sent, all of it: a later read tells). Retry later;
    the card and its objects recover by themselves once the server answers.

    Also a :class:`TreeError` and a :class:`MemoryFileError`: a session or memory document
    could not be read or written, as those types always said."""


class StorageConflict(StorageError):
    """Another writer (another app server, a hand edit) got there first; nothing of this
    call was written. Read again (``card.reopen``, ``read_memory``) and repeat."""


class StorageDamaged(StorageError, TreeError, MemoryFileError):
    """What is stored is not what the library left there (tables changed by hand, a
    required row missing, a half-finished copy). Nothing was written; the message says
    what is damaged and how to repair or clear it."""


class CardIncomplete(StorageDamaged):
    """A copy into this card did not finish (the process was killed mid-way): the card
    refuses to open rather than open half of it. Run the copy again with
    ``copy_card(..., resume=True)``, or clear the target (:func:`liyuan.storage.clear_card`)."""


class StorageRefused(StorageError, ValueError):
    """A name or path the storage cannot hold: a scope or session name that is not valid
    UTF-8 text (a lone surrogate), a card folder that cannot be created or written.
    Nothing was written; give another name or fix the folder's permissions."""


class SessionConflictError(TreeError, StorageConflict):
    """Another writer (another app server) appended to the session since this tree last
    read or wrote it; the refused entry was not written, and nothing else was lost.

    Reopen the chat (``card.reopen(chat_id)``) to see what the other writer added, then
    repeat the call.
    """


class VersionConflict(MemoryFileError, StorageConflict):
    """A change was based on a stale version of a memory document."""


class ManifestError(MemoryFileError):
    """The manifest ``记忆/.清单.json`` exists but is damaged (bad bytes, bad JSON, unknown version).

    Raised instead of reading it as empty: an empty manifest would drop the forgotten
    chats, the hand-protected documents and the pin. Nothing syncs until
    :func:`liyuan.card.repair.repair_manifest` rebuilds it (the damaged file is kept).
    """


class UnsafePathError(MemoryFileError):
    """A memory path is a symlink, goes through one, or resolves outside the card folder.

    Nothing is read or written there: a card folder may come from someone else.
    """


class LoreError(MemoryFileError):
    """The card's lore book cannot be read or written: bad YAML, a bad entry, an unsafe path.

    The message names the file and the entry; nothing is activated from a book that
    does not read (a half-read book would silently drop entries).
    """


class CardImportError(LiyuanError, ValueError):
    """A character card or lore book file cannot be imported.

    Raised before anything is written: a PNG without a card, broken base64 or JSON, a
    file over the size limit, a zip bomb, a CHARX member that escapes, a regex key that
    would run for seconds.
    """


class ModelError(LiyuanError):
    """The side model could not produce a reply."""


class ModelOutputError(ModelError):
    """The side model replied, but the reply is unusable (empty, missing sections, no marks)."""
