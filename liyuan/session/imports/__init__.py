"""Importing chats people already have: SillyTavern, OpenAI-format logs, transcripts.

:func:`read_chat` parses a file into an :class:`ImportedChat` (messages, swipes on
them, provenance); :func:`import_chat` streams a file into a new session tree, writing
nothing unless the whole file reads. Every problem is a :class:`ChatImportError` that
names the line and the field. The formats are described in
:mod:`liyuan.session.imports.formats`; the tree's shape in
:mod:`liyuan.session.imports.reader`.
"""

from __future__ import annotations

from liyuan.session.imports.model import (
    FORMATS,
    ChatImportError,
    ChatSource,
    ImportedChat,
    ImportedMessage,
    safe_chat_id,
    safe_folder_name,
)
from liyuan.session.imports.reader import (
    IMPORT_TEMP_MARK,
    ChatReader,
    import_chat,
    read_chat,
    remove_dead_import_temps,
    write_messages,
)

__all__ = [
    "FORMATS",
    "IMPORT_TEMP_MARK",
    "ChatImportError",
    "ChatReader",
    "ChatSource",
    "ImportedChat",
    "ImportedMessage",
    "import_chat",
    "read_chat",
    "remove_dead_import_temps",
    "safe_chat_id",
    "safe_folder_name",
    "write_messages",
]
