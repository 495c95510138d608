"""Vector memory (optional, off by default): details the relay summary drops.

When enabled, the original text a compaction covers is archived into a per-chat store
before the summary lands, finished turns are ingested every few turns, and every turn
recalls up to five chunks for the user's raw words, injected as 【剧情记忆】 lines right
after 【设定集索引】. Recall is hybrid (embedding cosine fused with BM25 over Chinese
bigrams and stemmed English words, weighted by the query's script),
branch-aware (chunks of an abandoned branch never show) and bounded (5 s).

Invariant of the package: nothing here runs unless ``VectorConfig.enabled`` is true,
and nothing here can fail or hold up a turn (see :func:`recall_for_turn` and
:func:`ingest_for_turn`). The names below are imported on first use, so the
configuration (:mod:`liyuan.vector.config`) and the ``liyuan`` facade work without the
``vector`` extra installed; a name that needs it, asked for without it, is a
:class:`~liyuan.errors.ConfigError` naming the extra.

An app turns it on with ``MemoryConfig(vector=VectorConfig(enabled=True))`` and
:class:`liyuan.Chat` does the rest. Without the facade::

    config = load_config(folder / "vector-memory.json")
    memory = VectorMemory(config, SqliteChunkStore(folder / "向量记忆.sqlite"))
    hits = memory.search("灯塔的钥匙")

With the ``postgres`` extra, the chunks of many chats can live in one PostgreSQL database
instead, with the rest of the card: ``Card.open(path, storage=CardStorage.postgres(conninfo,
scope=card_id))`` (:mod:`liyuan.storage`); both backends satisfy
:class:`~liyuan.vector.chunkstore.ChunkStore` and rank alike.

The per-turn wiring :class:`liyuan.Chat` uses (bounded recall and ingest, the archive a
compaction writes) is in :mod:`liyuan.vector.recall`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from liyuan.errors import ConfigError
from liyuan.vector.requires import install_hint as _install_hint

if TYPE_CHECKING:
    from liyuan.vector.chunkstore import ChunkStore, ChunkStores
    from liyuan.vector.config import StoreConfig, VectorConfig
    from liyuan.vector.config_file import load_config, save_config
    from liyuan.vector.e5 import E5Embedder
    from liyuan.vector.embed import Embedder, HashEmbedder, SemanticEmbedder
    from liyuan.vector.memory import VectorMemory
    from liyuan.vector.openai_embed import OpenAIEmbedder
    from liyuan.vector.results import Hit, SearchReport
    from liyuan.vector.store import SqliteChunkStore

_HOMES = {
    "ChunkStore": "chunkstore",
    "ChunkStores": "chunkstore",
    "E5Embedder": "e5",
    "Embedder": "embed",
    "HashEmbedder": "embed",
    "Hit": "results",
    "OpenAIEmbedder": "openai_embed",
    "SearchReport": "results",
    "SemanticEmbedder": "embed",
    "SqliteChunkStore": "store",
    "StoreConfig": "config",
    "VectorConfig": "config",
    "VectorMemory": "memory",
    "load_config": "config_file",
    "save_config": "config_file",
}
"""Each exported name and the submodule that defines it."""

__all__ = [
    "ChunkStore",
    "ChunkStores",
    "E5Embedder",
    "Embedder",
    "HashEmbedder",
    "Hit",
    "OpenAIEmbedder",
    "SearchReport",
    "SemanticEmbedder",
    "SqliteChunkStore",
    "StoreConfig",
    "VectorConfig",
    "VectorMemory",
    "load_config",
    "save_config",
]


_EXTRA_MODULES = {"numpy": "numpy", "Stemmer": "PyStemmer", "jieba": "jieba"}
"""Modules of the ``vector`` extra that the submodules import, and their package names."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'liyuan.vector' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"liyuan.vector.{home}")
    except ModuleNotFoundError as exc:
        if exc.name not in _EXTRA_MODULES:
            raise
        raise ConfigError(f"liyuan.vector.{name} 需要 {_EXTRA_MODULES[exc.name]}（vector 附加依赖）："
                          f"{_install_hint('vector')}") from exc
    value = getattr(module, name)
    globals()[name] = value
    return value
