"""The retrieval methods and story sets the benchmarks share (:mod:`harness.bench`).

Each method is one way to run recall (which embedder, which fusion); each story set is a
hand-written chat with labelled questions, per language.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from liyuan.vector import (
    E5Embedder,
    Embedder,
    HashEmbedder,
    SemanticEmbedder,
    SqliteChunkStore,
    StoreConfig,
    VectorConfig,
    VectorMemory,
)
from liyuan.vector.config import EXTERNAL, MAX_CHUNKS, RecallMode
from liyuan.vector.embed import embed_query
from liyuan.vector.search import Fusion

ROOT = Path(__file__).resolve().parents[2]

DATA = ROOT / "harness" / "fixtures" / "data"

STORIES = {"zh": DATA / "bench_story.yaml", "en": DATA / "bench_story_en.yaml", "mixed": DATA / "bench_mixed.yaml",
           "en-chat": DATA / "bench_chat_en.yaml"}
"""Hand-written chats: a Chinese story, an English role-play story, a code-switched chat,
and (issue 25) an English chat between two friends whose answers often lean on the turn
before."""

LANGUAGE_NAMES = {"zh": "中文", "en": "英文", "mixed": "中英混合", "en-chat": "英文对话"}

SAMPLES = ROOT / "tests" / "liyuan" / "data"

TOP_K = 5

@dataclass(frozen=True)
class Method:
    """One retrieval configuration under test."""

    name: str
    mode: RecallMode
    embedder: str  # "hash" | "semantic" | "e5"
    tokenizer: str = "bigram"
    fusion: Fusion | None = None
    """``None``: the library's default for the embedder (:data:`liyuan.vector.config.DEFAULT_FUSIONS`)."""

METHODS = [
    Method("hash", "semantic", "hash"),
    Method("semantic", "semantic", "semantic"),
    Method("lexical", "lexical", "hash"),
    Method("lexical-jieba", "lexical", "hash", "jieba"),
    Method("hybrid", "hybrid", "semantic"),
    Method("hybrid-mix", "hybrid", "semantic", fusion="mix"),
    Method("hybrid-jieba", "hybrid", "semantic", "jieba"),
    Method("hybrid-hash", "hybrid", "hash"),
    Method("e5", "semantic", "e5"),
    Method("hybrid-e5", "hybrid", "e5"),
]
"""``hybrid`` (semantic + BM25 over bigrams, RRF) is the recommended configuration."""

DEFAULT_METHOD = "hybrid-e5"
"""The method that matches the shipped default configuration (its misses are printed)."""

E5_LATENCY_MAX = 5000
"""e5 embeds about 15 chunks a second here: the 50,000-chunk row would take an hour."""
LATENCY_METHODS = ("hybrid", "hybrid-hash", "hybrid-e5")

class Memo:
    """An embedder that remembers every text it embedded (passages and queries apart):
    the recall tables embed the same story and queries for many methods and weights."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.label = inner.label
        self._seen: dict[tuple[bool, str], np.ndarray] = {}

    def _rows(self, texts: Sequence[str], query: bool) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if (query, t) not in self._seen))
        if missing:
            rows = embed_query(self.inner, missing) if query else self.inner.embed(missing)
            self._seen.update({(query, t): rows[i] for i, t in enumerate(missing)})
        return np.vstack([self._seen[(query, t)] for t in texts]) if texts else self.inner.embed([])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(texts, False)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(texts, True)

_EMBEDDERS: dict[str, Embedder] = {}
_MEMOS: dict[str, Memo] = {}


def embedder(name: str) -> Embedder:
    """One shared instance per kind (the semantic model loads once)."""
    if name not in _EMBEDDERS:
        _EMBEDDERS[name] = {"semantic": SemanticEmbedder, "e5": E5Embedder}.get(name, HashEmbedder)()
    return _EMBEDDERS[name]

def memo(name: str) -> Memo:
    """The remembering wrapper of :func:`embedder` (for the recall tables, not the latency)."""
    if name not in _MEMOS:
        _MEMOS[name] = Memo(embedder(name))
    return _MEMOS[name]

def memory_for(folder: Path, method: Method, *, max_chunks: int = 5000, remember: bool = False) -> VectorMemory:
    """An enabled memory whose external store holds the chunks under test."""
    config = VectorConfig(
        enabled=True, search_top_k=TOP_K, embedder=method.embedder,  # type: ignore[arg-type]
        recall_mode=method.mode, lexical_tokenizer=method.tokenizer,  # type: ignore[arg-type]
        stores={EXTERNAL: StoreConfig("额外数据库", True, 0, min(max_chunks, MAX_CHUNKS))},
    )
    store = SqliteChunkStore(folder / f"{method.name}.sqlite")
    chosen = memo(method.embedder) if remember else embedder(method.embedder)
    return VectorMemory(config, store, chosen, fusion=method.fusion)

def story_chunks(story: dict[str, Any]) -> dict[str, int]:
    """The chunks a story stores, in order (each turn's user line, if any, then its turn),
    each mapped to the turn it is (1-based), or 0 for a user's line, which answers nothing."""
    turns: list[str] = story["turns"]
    users: list[str | None] = story.get("user_turns") or [None] * len(turns)
    return {text: answer for user, (number, turn) in zip(users, enumerate(turns, 1), strict=True)
            for text, answer in ((user, 0), (turn, number)) if text}


def load_story(language: str = "zh") -> dict[str, Any]:
    """The hand-written story of ``language`` (see :data:`STORIES`) and its labelled queries."""
    data: dict[str, Any] = yaml.safe_load(STORIES[language].read_text(encoding="utf-8"))
    return data
