"""The endpoint embedder: any OpenAI-compatible ``POST {base_url}/embeddings``.

Invariants:

- Refused while :data:`liyuan.model.ALLOW_MODEL_REQUESTS` is false.
- A failed request is a :class:`~liyuan.errors.ModelError` naming the endpoint (without
  user, password or query) and where the key came from; its text never holds the key
  or the URL's credentials, and it chains no SDK error (:mod:`liyuan.endpoint`).
- One batch never takes longer than its deadline, whatever the server does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from liyuan import model as _model
from liyuan.endpoint import redact, safe_url, url_secrets, within
from liyuan.errors import ConfigError, ModelError
from liyuan.runner import TIMED_OUT
from liyuan.vector.config import DEFAULT_KEY_ENV
from liyuan.vector.embed import Matrix, normalise_rows

__all__ = ["DEFAULT_EMBED_DEADLINE_S", "OpenAIEmbedder"]


DEFAULT_EMBED_DEADLINE_S = 300.0
"""Total wall time of one batch sent to an embeddings endpoint (:class:`OpenAIEmbedder`).

Above the SDK's own worst case for a server that answers slowly but steadily (three
attempts of up to 60 s each, plus its short backoff); a server that trickles bytes,
which no per-read timeout catches, is cut off here instead of holding the store's
worker forever."""


class OpenAIEmbedder:
    """An OpenAI-compatible ``POST {base_url}/embeddings`` endpoint via the openai SDK.

    The key and the endpoint follow the environment unless given: the key comes from
    the variable named ``api_key_env`` (default ``OPENAI_API_KEY``), the endpoint from
    ``OPENAI_BASE_URL``, else api.openai.com. Both are read when the first request is
    made. With no key at all, ``not-needed`` is sent (local servers ignore it); a
    refusal then names the variable that was empty.

    Args:
        model: The embedding model id.
        base_url: Endpoint root (``.../v1``); ``None`` reads ``OPENAI_BASE_URL``.
        api_key: An explicit key (e.g. from an older configuration file); wins over
            the environment.
        api_key_env: Name of the environment variable holding the key.
        http_client: An ``httpx2.Client`` (tests pass one with a ``MockTransport``).
        batch_size: Texts per request.
        timeout: Seconds per wait for the server (connect, each read).
        deadline: Total seconds of one batch's request, the SDK's retries included
            (:data:`DEFAULT_EMBED_DEADLINE_S`). A server that trickles bytes never trips
            ``timeout``; at the deadline the call fails with ``超过总时限`` and our own
            connection is closed, so the worker thread ends too.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = DEFAULT_KEY_ENV,
        http_client: Any = None,
        batch_size: int = 128,
        timeout: float = 60.0,
        deadline: float = DEFAULT_EMBED_DEADLINE_S,
    ) -> None:
        if not model:
            raise ConfigError("没有指定嵌入模型（openai.model）")
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self._api_key = api_key or None
        self._http_client = http_client
        self._batch = max(1, batch_size)
        self._timeout = timeout
        self.deadline = deadline
        self._client: Any = None
        self._key_origin = ""

    @property
    def label(self) -> str:
        return f"openai:{self.model}"

    def _sdk(self) -> Any:
        if self._client is None:
            from openai import OpenAI

            key = self._api_key
            if key:
                self._key_origin = "配置文件里的旧密钥"
            else:
                key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
                self._key_origin = (f"环境变量 {self.api_key_env}" if key else
                                    f"环境变量 {self.api_key_env or '（未指定）'} 为空，发送的是占位密钥")
            base_url = self.base_url or os.environ.get("OPENAI_BASE_URL") or None
            kwargs: dict[str, Any] = {"api_key": key or "not-needed", "base_url": base_url,
                                      "timeout": self._timeout, "max_retries": 2}
            if self._http_client is not None:
                kwargs["http_client"] = self._http_client
            self._client = OpenAI(**kwargs)
        return self._client

    def _scrub(self, text: object) -> str:
        # The key of any length, and the user and password a base_url may carry.
        key = getattr(self._client, "api_key", "") or ""
        return redact(text, [key, self._api_key, *url_secrets(self.base_url),
                             *url_secrets(getattr(self._client, "base_url", ""))])

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not _model.ALLOW_MODEL_REQUESTS:
            raise ModelError("真实模型请求已被禁止（liyuan.model.ALLOW_MODEL_REQUESTS = False）")
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        rows: list[list[float]] = []
        for start in range(0, len(texts), self._batch):
            batch = list(texts[start : start + self._batch])
            outcome = within(self.deadline, partial(self._request, batch), self._abandon,
                             name="liyuan-embed-call")
            if outcome is TIMED_OUT:
                raise ModelError(f"嵌入请求超过总时限 {self.deadline:g} 秒")
            if isinstance(outcome, BaseException):
                raise outcome
            rows += outcome
        widths = {len(r) for r in rows}
        if len(widths) != 1 or 0 in widths:
            raise ModelError(f"嵌入接口返回的向量维度不一致：{sorted(widths)}")
        return normalise_rows(np.asarray(rows, dtype=np.float32))

    def _abandon(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._http_client is None:
            client.close()  # our own connection: closing it ends the worker's read at once

    def _request(self, batch: list[str]) -> list[list[float]]:
        import openai

        client = self._sdk()
        # Where the request went and where the key came from (never the key): a refused
        # request must say enough to fix the configuration.
        # The error is built inside the except block but raised after it, so it chains no
        # SDK error (whose text and request may hold the key or the URL's password).
        where = f"{safe_url(str(client.base_url).rstrip('/'))}/embeddings；密钥来自{self._key_origin}"
        failure: ModelError | None = None
        try:
            response = client.embeddings.create(
                model=self.model, input=batch[0] if len(batch) == 1 else batch, encoding_format="float"
            )
        except openai.APIStatusError as exc:
            failure = ModelError(f"嵌入请求失败：HTTP {exc.status_code}（{where}）")
        except openai.OpenAIError as exc:
            failure = ModelError(f"嵌入请求失败：{self._scrub(exc)}（{where}）")
        except (ValueError, TypeError, AttributeError, KeyError) as exc:  # a reply the SDK cannot read
            failure = ModelError(f"嵌入接口的回复无法解读（{type(exc).__name__}：{self._scrub(exc)}；{where}）")
        if failure is not None:
            raise failure
        try:
            data = sorted(getattr(response, "data", None) or [], key=lambda d: d.index)
        except (TypeError, AttributeError) as exc:
            failure = ModelError(f"嵌入接口的回复格式不对（{type(exc).__name__}）")
        if failure is not None:
            raise failure
        if len(data) != len(batch):
            raise ModelError(f"嵌入接口返回了 {len(data)} 个向量，应为 {len(batch)} 个")
        return [list(d.embedding) for d in data]
