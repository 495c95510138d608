"""梨园记忆 (liyuan memory): layered memory for long role-play chats.

"The earlier, the harder it is compressed": the last 6 turns verbatim; older turns
compacted into a five-section relay summary replayed as one 【前情提要】 message;
optional vector memory of the trimmed text; a lore book that is never compressed
(【相关设定】 and 【设定集索引】, imported from character cards); cross-session card memory (recaps merged
into a handbook and a resident summary under a shared budget); forgetting by source.

An app needs only what this module exports::

    from liyuan import Card, OpenAIModel

    side = OpenAIModel(model="qwen-plus")
    card = Card.open(
        "cards/雾港", side_model=side,
        user_name="阿简", char_name="林溯",
    )
    chat = card.chat("jA")
    # send turn.messages to your model
    turn = chat.prepare("我把伞递给她。")
    # memory work runs in the background
    chat.record(reply_text)

The packages below hold the parts, one per section of the design: :mod:`liyuan.session`,
:mod:`liyuan.story`, :mod:`liyuan.context`, :mod:`liyuan.lore`, :mod:`liyuan.card`,
:mod:`liyuan.vector`, :mod:`liyuan.discussion`; where a card is kept (its folder, or PostgreSQL
for several app servers: ``Card.open(path, storage=CardStorage.postgres(dsn, scope=...))``) is
:mod:`liyuan.storage`.
"""

from __future__ import annotations

import logging as _logging

from liyuan.app import Activity, AsyncCard, AsyncChat, Card, Chat, Turn
from liyuan.card.sync import CardMemory, SyncOutcome
from liyuan.compaction import CompactionOutcome
from liyuan.config import MemoryConfig
from liyuan.errors import (
    CardImportError,
    CardIncomplete,
    ConfigError,
    LiyuanError,
    LoreError,
    MemoryFileError,
    ModelError,
    ModelOutputError,
    StateError,
    StorageConflict,
    StorageDamaged,
    StorageError,
    StorageRefused,
    StorageUnavailable,
    TreeError,
    VersionConflict,
)
from liyuan.lore import LoreBook, LoreEntry
from liyuan.model import (
    ChatMessage,
    ChatModel,
    Completion,
    FunctionModel,
    ModelRequest,
    OpenAIModel,
    ScriptedModel,
    Usage,
)
from liyuan.session.imports import ChatImportError
from liyuan.session.state import Character, Ledger
from liyuan.storage import CardStorage
from liyuan.vector.config import VectorConfig

__version__ = "0.2.0"

# The library never prints: without this, Python's last-resort handler writes a background
# error's traceback to stderr. An app that configures logging sees the records as usual.
_logging.getLogger("liyuan").addHandler(_logging.NullHandler())

__all__ = [
    "Activity",
    "AsyncCard",
    "AsyncChat",
    "Card",
    "CardImportError",
    "CardIncomplete",
    "CardMemory",
    "CardStorage",
    "Character",
    "Chat",
    "ChatImportError",
    "ChatMessage",
    "ChatModel",
    "CompactionOutcome",
    "Completion",
    "ConfigError",
    "FunctionModel",
    "Ledger",
    "LiyuanError",
    "LoreBook",
    "LoreEntry",
    "LoreError",
    "MemoryConfig",
    "MemoryFileError",
    "ModelError",
    "ModelOutputError",
    "ModelRequest",
    "OpenAIModel",
    "ScriptedModel",
    "StateError",
    "StorageConflict",
    "StorageDamaged",
    "StorageError",
    "StorageRefused",
    "StorageUnavailable",
    "SyncOutcome",
    "TreeError",
    "Turn",
    "Usage",
    "VectorConfig",
    "VersionConflict",
    "__version__",
]
