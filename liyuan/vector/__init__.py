"""Vector memory (optional, off by default): details the relay summary drops.

When enabled, the original text a compaction covers is archived into a per-chat store
before the summary lands, finished beats are ingested every few beats, and every beat
recalls up to five chunks for the user's raw words, injected as 【剧情记忆】 lines right
after 【设定集索引】. Recall is hybrid (embedding cosine fused with BM25 over Chinese
bigrams and stemmed English words, weighted by the query's script),
branch-aware (chunks of an abandoned branch never show) and bounded (5 s).

Invariant of the package: nothing here runs unless ``VectorConfig.enabled`` is true,
and nothing here can fail or hold up a beat (see :func:`recall_for_beat` and
:func:`ingest_for_beat`). The names below are imported on first use, so the
configuration (:mod:`liyuan.vector.config`) and the ``liyuan`` facade work without the
``vector`` extra installed; a name that needs it, asked for without it, is a
:class:`~liyuan.errors.ConfigError` naming the extra.

Typical wiring::

    config = load_config(folder / "vector-memory.json")
    memory = VectorMemory(config, SqliteChunkStore(folder / "向量记忆.sqlite"))
    run_compaction(..., archive=bounded_archive(memory))
    lines = recall_for_beat(memory, user_text, branch_ids_of(tree.branch()))
    ingest_for_beat(memory, reply_text, node_id=reply.id, branch_ids=branch_ids_of(tree.branch()))
    Injection(state_text, recall_lines=lines, ...)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from liyuan.errors import ConfigError
from liyuan.vector.requires import install_hint

if TYPE_CHECKING:
    from liyuan.vector.chunking import condense, split_text_chunks
    from liyuan.vector.config import (
        EXTERNAL,
        NARRATIVE,
        StoreConfig,
        VectorConfig,
        load_config,
        public_config,
        save_config,
        scope_id,
    )
    from liyuan.vector.e5 import E5Embedder
    from liyuan.vector.embed import Embedder, HashEmbedder, SemanticEmbedder
    from liyuan.vector.factory import make_embedder
    from liyuan.vector.lexical import BM25Index, bigram_terms
    from liyuan.vector.memory import VectorMemory
    from liyuan.vector.openai_embed import OpenAIEmbedder
    from liyuan.vector.recall import (
        INGEST_TIMEOUT_S,
        RECALL_TIMEOUT_S,
        bounded_archive,
        branch_ids_of,
        format_recall_lines,
        ingest_for_beat,
        recall_for_beat,
    )
    from liyuan.vector.results import Hit, IngestResult, SearchReport
    from liyuan.vector.search import on_current_branch
    from liyuan.vector.store import Chunk, SqliteChunkStore
    from liyuan.vector.tools import ToolResult, read_tool, search_tool

_HOMES = {
    "BM25Index": "lexical",
    "Chunk": "store",
    "E5Embedder": "e5",
    "EXTERNAL": "config",
    "Embedder": "embed",
    "HashEmbedder": "embed",
    "Hit": "results",
    "INGEST_TIMEOUT_S": "recall",
    "IngestResult": "results",
    "NARRATIVE": "config",
    "OpenAIEmbedder": "openai_embed",
    "RECALL_TIMEOUT_S": "recall",
    "SearchReport": "results",
    "SemanticEmbedder": "embed",
    "SqliteChunkStore": "store",
    "StoreConfig": "config",
    "ToolResult": "tools",
    "VectorConfig": "config",
    "VectorMemory": "memory",
    "bigram_terms": "lexical",
    "bounded_archive": "recall",
    "branch_ids_of": "recall",
    "condense": "chunking",
    "format_recall_lines": "recall",
    "ingest_for_beat": "recall",
    "load_config": "config",
    "make_embedder": "factory",
    "on_current_branch": "search",
    "public_config": "config",
    "read_tool": "tools",
    "recall_for_beat": "recall",
    "save_config": "config",
    "scope_id": "config",
    "search_tool": "tools",
    "split_text_chunks": "chunking",
}
"""Each exported name and the submodule that defines it."""

__all__ = [
    "EXTERNAL",
    "INGEST_TIMEOUT_S",
    "NARRATIVE",
    "RECALL_TIMEOUT_S",
    "BM25Index",
    "Chunk",
    "E5Embedder",
    "Embedder",
    "HashEmbedder",
    "Hit",
    "IngestResult",
    "OpenAIEmbedder",
    "SearchReport",
    "SemanticEmbedder",
    "SqliteChunkStore",
    "StoreConfig",
    "ToolResult",
    "VectorConfig",
    "VectorMemory",
    "bigram_terms",
    "bounded_archive",
    "branch_ids_of",
    "condense",
    "format_recall_lines",
    "ingest_for_beat",
    "load_config",
    "make_embedder",
    "on_current_branch",
    "public_config",
    "read_tool",
    "recall_for_beat",
    "save_config",
    "scope_id",
    "search_tool",
    "split_text_chunks",
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
                          f"{install_hint('vector')}") from exc
    value = getattr(module, name)
    globals()[name] = value
    return value
