"""Vector memory (optional, off by default): details the relay summary drops.

When enabled, the original text a compaction covers is archived into a per-chat store
before the summary lands, finished beats are ingested every few beats, and every beat
recalls up to five chunks for the user's raw words, injected as 【剧情记忆】 lines right
after 【设定集索引】. Recall is hybrid (embedding cosine fused with BM25 over Chinese
bigrams and stemmed English words, weighted by the query's script),
branch-aware (chunks of an abandoned branch never show) and bounded (5 s).

Invariant of the package: nothing here runs unless ``VectorConfig.enabled`` is true,
and nothing here can fail a beat (see :func:`recall_for_beat`).

Typical wiring::

    config = load_config(folder / "vector-memory.json")
    memory = VectorMemory(config, SqliteChunkStore(folder / "向量记忆.sqlite"))
    run_compaction(..., archive=memory.archive_compacted)
    lines = recall_for_beat(memory, user_text, branch_ids_of(tree.branch()))
    Injection(state_text, recall_lines=lines, ...)
"""

from __future__ import annotations

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
from liyuan.vector.embed import Embedder, HashEmbedder, OpenAIEmbedder, SemanticEmbedder, make_embedder
from liyuan.vector.lexical import BM25Index, bigram_terms
from liyuan.vector.memory import Hit, IngestResult, SearchReport, VectorMemory
from liyuan.vector.recall import RECALL_TIMEOUT_S, branch_ids_of, format_recall_lines, recall_for_beat
from liyuan.vector.search import on_current_branch
from liyuan.vector.store import Chunk, SqliteChunkStore
from liyuan.vector.tools import ToolResult, read_tool, search_tool

__all__ = [
    "EXTERNAL",
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
    "branch_ids_of",
    "condense",
    "format_recall_lines",
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
