"""Plumbing shared by the clients of OpenAI-compatible endpoints (chat model, embedder).

Invariants:

- :func:`redact` removes every secret it is given from a text (an API key of any
  length, the user and password of a ``base_url``); :func:`safe_url` writes a URL
  without its user, password and query. Errors of this package are built from such
  texts and raised *outside* the ``except`` block that caught the SDK's error, so
  neither ``__cause__`` nor ``__context__`` holds the raw error: a traceback or
  ``logger.exception`` prints nothing the message does not.
- :func:`within` runs one blocking call with a hard bound on its wall time, even when
  the server keeps the connection busy one byte at a time (which no read timeout
  catches): the call runs in a worker thread, and at the bound the caller gets
  control back and the worker's connection is closed by ``abandon``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import TypeVar
from urllib.parse import unquote, urlsplit

from liyuan.runner import TIMED_OUT, TimedOut, detached
from liyuan.text import replace_lone_surrogates

__all__ = ["PLACEHOLDER_KEY", "redact", "safe_url", "url_secrets", "within"]

T = TypeVar("T")

PLACEHOLDER_KEY = "not-needed"
"""The key sent when none is configured (local servers ignore it); not a secret."""


def url_secrets(url: object) -> list[str]:
    """The credentials a URL carries: ``user:password``, the password, the user (raw and decoded)."""
    if not url:
        return []
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return []
    found: list[str] = []
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    for value in (userinfo, parts.password, parts.username):
        if value:
            found += [value, unquote(value)]
    return found


def safe_url(url: object) -> str:
    """``scheme://host[:port]/path`` of ``url``: no user, password, query or fragment."""
    text = str(url or "")
    try:
        parts = urlsplit(text)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "（无法解析的地址）"
    if not parts.scheme:
        return text.split("?")[0] if "@" not in text else "（地址已隐去）"
    return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"


def redact(text: object, secrets: Iterable[str | None]) -> str:
    """``str(text)`` with every secret replaced by ``***`` (longest first), lone surrogates made safe.

    Keys of every length are redacted: a short key is still a key. Only empty strings
    and the placeholder key are left alone.
    """
    result = str(text)
    for secret in sorted({s for s in secrets if s and s != PLACEHOLDER_KEY}, key=len, reverse=True):
        result = result.replace(secret, "***")
    return replace_lone_surrogates(result)


def within(seconds: float, call: Callable[[], T], abandon: Callable[[], None] | None = None,
           *, name: str = "liyuan-endpoint") -> T | BaseException | TimedOut:
    """Run ``call()`` for at most ``seconds``; return its result, the exception it raised, or
    :data:`~liyuan.runner.TIMED_OUT`.

    Exceptions are returned, not raised, so the caller can turn them into its own error
    outside any ``except`` block. The call runs on a thread of its own
    (:func:`~liyuan.runner.detached`). On time-out ``abandon()`` is called (close the
    connection the worker is reading from: the worker then ends at once instead of
    lingering while a server trickles bytes); the daemon worker is not joined.
    """
    outcome = detached(name, call).wait(seconds)
    if outcome is TIMED_OUT and abandon is not None:
        with contextlib.suppress(Exception):  # best effort: the caller already has its answer
            abandon()
    return outcome
