"""The side model: one method, messages in, text and usage out.

Every model the memory code talks to implements :class:`ChatModel`. Three ship here:

- :class:`ScriptedModel`: replies written in advance (by hand), in order or per purpose.
  Its completions carry ``provenance="scripted"``: no model wrote them.
- :class:`FunctionModel`: a Python function decides the reply (tests, fault injection).
- :class:`OpenAIModel`: any OpenAI-compatible Chat Completions endpoint.

Real requests are refused while :data:`ALLOW_MODEL_REQUESTS` is ``False``; the test
suite sets it so, and a live test opts back in.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol

from liyuan._completion import (
    ChatMessage,
    Completion,
    ModelRequest,
    Role,
    Usage,
    completion_from_response,
    require_finished,
    split_reasoning,
    usage_fields,
)
from liyuan.endpoint import PLACEHOLDER_KEY, redact, safe_url, url_secrets, within
from liyuan.errors import ConfigError, ModelError, ModelOutputError
from liyuan.runner import TIMED_OUT
from liyuan.text import has_lone_surrogate, replace_lone_surrogates

__all__ = [
    "ALLOW_MODEL_REQUESTS",
    "DEFAULT_DEADLINE_S",
    "ChatMessage",
    "ChatModel",
    "Completion",
    "FunctionModel",
    "MaxTokensParam",
    "ModelRequest",
    "OpenAIModel",
    "Role",
    "ScriptedModel",
    "Usage",
    "cut_off_note",
    "request",
    "require_finished",
    "side_call",
    "split_reasoning",
    "texts",
    "usage_fields",
]

ALLOW_MODEL_REQUESTS = True
"""When False, :class:`OpenAIModel` refuses to send anything (set by the test suite)."""


class ChatModel(Protocol):
    """Anything that can answer a :class:`ModelRequest`."""

    def complete(self, request: ModelRequest) -> Completion:
        """Answer the request or raise :class:`~liyuan.errors.ModelError`."""
        ...


def side_call(model: ChatModel, request: ModelRequest) -> Completion:
    """Ask the side model; every way it can fail comes back as a :class:`ModelError`.

    This is the one place the memory code calls :meth:`ChatModel.complete`, and it decides
    which exceptions are the model's failure:

    - Caught: every :class:`Exception` raised *inside* ``model.complete()``. The model
      object is an adapter at the edge (an SDK, a transport, a local runtime, a test
      double); a ``TimeoutError``, ``ConnectionResetError``, ``RuntimeError`` or
      ``UnicodeEncodeError`` from it is the model failing, and the caller turns it into
      a ``failed`` outcome with an activity line. It becomes a :class:`ModelError` naming
      the original type; the original is not chained (an SDK error may carry a key).
    - Not caught: :class:`BaseException` that is not an ``Exception``
      (``KeyboardInterrupt``, ``SystemExit``), and anything raised by our own code
      before or after the call (building the prompt, validating, writing): a
      ``TypeError`` of ours must surface in tests, not pass for a flaky model.
    - Refused: a reply holding a lone surrogate (``'\\ud83c'``) in its text, reasoning,
      model id or finish reason. No UTF-8 file can store it, so it is malformed:
      :class:`~liyuan.errors.ModelOutputError`, and nothing is written.

    Error texts never carry a lone surrogate themselves (they end up in activity lines
    and in the session tree).

    Raises:
        ModelError: The call failed (``ModelOutputError`` for a malformed reply).
    """
    failure: ModelError | None = None
    try:
        completion = model.complete(request)
    except ModelError as exc:
        text = str(exc)
        if not has_lone_surrogate(text):
            raise
        failure = ModelError(replace_lone_surrogates(text))
    except Exception as exc:  # see the docstring: the model's failure, by design
        detail = replace_lone_surrogates(str(exc))
        failure = ModelError(f"{type(exc).__name__}" + (f"：{detail}" if detail else ""))
    if failure is not None:
        raise failure  # outside the except block: no chained original
    fields = (completion.text, completion.reasoning, completion.model, completion.provenance,
              completion.finish_reason)
    if any(has_lone_surrogate(value) for value in fields):
        raise ModelOutputError("回复里有孤立的代理项字符（无法存成 UTF-8），按格式错误拒收")
    return completion


class ScriptedModel:
    """Replies written in advance. Records every request in :attr:`calls`.

    Args:
        replies: Either a sequence (served in order to any purpose) or a mapping from
            purpose to a sequence (served in order per purpose). An item may be a
            string, a :class:`Completion`, or an exception instance to raise.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        replies: Sequence[str | Completion | BaseException]
        | Mapping[str, Sequence[str | Completion | BaseException]] = (),
    ) -> None:
        self._queue: deque[str | Completion | BaseException] = deque()
        self._by_purpose: dict[str, deque[str | Completion | BaseException]] = {}
        if isinstance(replies, Mapping):
            self._by_purpose = {k: deque(v) for k, v in replies.items()}
        else:
            self._queue = deque(replies)
        self.calls: list[ModelRequest] = []
        """Every request received, in order."""

    def enqueue(self, *replies: str | Completion | BaseException, purpose: str | None = None) -> None:
        """Add replies to the general queue or to one purpose's queue."""
        target = self._queue if purpose is None else self._by_purpose.setdefault(purpose, deque())
        target.extend(replies)

    def complete(self, request: ModelRequest) -> Completion:
        """The next scripted reply for this purpose (or the general queue); :class:`ModelError` when none is left."""
        self.calls.append(request)
        queue = self._by_purpose.get(request.purpose)
        if not queue:
            queue = self._queue
        if not queue:
            raise ModelError(f"脚本回复已用完（用途 {request.purpose!r}）")
        item = queue.popleft()
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, Completion):
            return item
        answer, reasoning = split_reasoning(item)
        return Completion(text=answer, reasoning=reasoning, provenance="scripted")


class FunctionModel:
    """A model whose reply is computed by ``fn(request)``. Records :attr:`calls`."""

    __test__ = False

    def __init__(self, fn: Callable[[ModelRequest], str | Completion]) -> None:
        self._fn = fn
        self.calls: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> Completion:
        """Record the request, then answer with ``fn(request)`` (a string is labelled ``scripted``)."""
        self.calls.append(request)
        result = self._fn(request)
        if isinstance(result, Completion):
            return result
        answer, reasoning = split_reasoning(result)
        return Completion(text=answer, reasoning=reasoning, provenance="scripted")


MaxTokensParam = Literal["max_tokens", "max_completion_tokens"]
_MAX_TOKENS_PARAMS: tuple[MaxTokensParam, ...] = ("max_tokens", "max_completion_tokens")
_ERROR_DETAIL_CHARS = 300


def _max_tokens_param(value: str) -> MaxTokensParam:
    for known in _MAX_TOKENS_PARAMS:
        if value == known:
            return known
    raise ConfigError(f"max_tokens_param 只能是 max_tokens 或 max_completion_tokens，收到 {value!r}")


def _max_tokens_param_from_env() -> MaxTokensParam:
    return _max_tokens_param(os.environ.get("LIYUAN_MAX_TOKENS_PARAM", "").strip() or "max_tokens")


DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where the ``openai`` SDK sends requests when neither ``base_url`` nor ``OPENAI_BASE_URL`` is set."""
DEFAULT_DEADLINE_S = 600.0
"""Total wall time of one side call, retries and backoff included (:attr:`OpenAIModel.deadline`).

Ten minutes: the longest legitimate side call is a merge of up to 8,192 tokens, which a
CPU-bound local model was measured to need about 330 s for; 600 s leaves room for that
and one retry of a short call, while a hung or trickling server no longer costs up to
1,207 s (300 s x 4 attempts + 7 s of backoff) or, trickling, forever."""


@dataclass
class OpenAIModel:
    """Any OpenAI-compatible Chat Completions endpoint, through the ``openai`` SDK.

    Settings fall back to ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``LIYUAN_MODEL`` and
    ``LIYUAN_MAX_TOKENS_PARAM``. Retries 429, 5xx, timeouts and connection errors with
    exponential backoff. A refused request (4xx) fails at once, with the server's own
    message (key redacted) in the error, so a misconfigured endpoint says what is wrong.

    Every failure is a :class:`~liyuan.errors.ModelError` (a reply the endpoint sent but
    that is not a usable completion: a :class:`~liyuan.errors.ModelOutputError`), whose
    text has the key and the ``base_url``'s user and password redacted and which chains
    no SDK error (see :mod:`liyuan.endpoint`).

    ``timeout`` bounds each wait for the server (connect, each read); ``deadline`` bounds
    the whole call, retries and backoff included, and holds even when the server sends
    one byte at a time: at the deadline the call fails with ``超过总时限`` and, when this
    object made its own HTTP client, the connection is closed. A caller-provided
    ``http_client`` is not closed (it may be shared); its worker thread is left to its
    own ``timeout``.
    """

    model: str = ""
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 300.0
    max_retries: int = 3
    backoff: float = 1.0
    temperature: float | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    http_client: Any = None
    sleep: Callable[[float], None] = time.sleep
    max_tokens_param: MaxTokensParam = field(default_factory=_max_tokens_param_from_env)
    """Name the reply budget is sent under. Newer OpenAI models refuse ``max_tokens`` and
    want ``max_completion_tokens``; most compatible servers only know ``max_tokens``."""
    deadline: float = DEFAULT_DEADLINE_S
    """Seconds one :meth:`complete` may take in all (:data:`DEFAULT_DEADLINE_S`)."""
    _client: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.model = self.model or os.environ.get("LIYUAN_MODEL", "")
        self.base_url = self.base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.api_key = self.api_key or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_KEY
        if not self.model:
            raise ConfigError("没有指定模型：传 model= 或设置 LIYUAN_MODEL")
        self.max_tokens_param = _max_tokens_param(self.max_tokens_param)

    def _sdk(self) -> Any:
        if self._client is None:
            from openai import OpenAI

            kwargs: dict[str, Any] = {
                "api_key": self.api_key,
                "base_url": self.base_url,
                "timeout": self.timeout,
                "max_retries": 0,  # retries are ours: explicit, and testable without sleeping
            }
            if self.http_client is not None:
                kwargs["http_client"] = self.http_client
            self._client = OpenAI(**kwargs)
        return self._client

    def _redact(self, error: object) -> str:
        # Endpoints and proxies may echo the key (or the URL's password) back in an
        # error; never pass either on.
        return redact(error, [self.api_key, *url_secrets(self.base_url)])

    def _where(self) -> str:
        """Where the request went, for error texts: no user, password or query (``safe_url``)."""
        return f"（请求地址：{safe_url(self.base_url or DEFAULT_BASE_URL).rstrip('/')}/chat/completions）"

    def _status_error(self, exc: Any, retried: int) -> ModelError:
        # The server's own words are what a user needs to fix their endpoint ("model not
        # found", "use max_completion_tokens"); the key is redacted, the length capped.
        body = getattr(exc, "body", None)
        detail: object = getattr(exc, "message", "") or ""
        if isinstance(body, Mapping):
            inner = body.get("error")
            detail = inner.get("message", inner) if isinstance(inner, Mapping) else body.get("message", body)
        text = " ".join(self._redact(detail).split())
        if len(text) > _ERROR_DETAIL_CHARS:
            text = text[:_ERROR_DETAIL_CHARS] + "…"
        tried = f"（已重试 {retried} 次）" if retried else ""
        return ModelError(f"模型请求失败{tried}：HTTP {exc.status_code}" + (f"：{text}" if text else "")
                          + self._where())

    def _classify(self, outcome: BaseException, attempt: int) -> tuple[ModelError, bool]:
        """The error for a failed attempt, and whether another attempt may help."""
        import openai

        tried = f"（已重试 {attempt} 次）" if attempt else ""
        if isinstance(outcome, openai.RateLimitError | openai.InternalServerError):
            return self._status_error(outcome, attempt), True
        if isinstance(outcome, openai.APITimeoutError | openai.APIConnectionError):
            return ModelError(f"模型请求失败{tried}：{self._redact(outcome)}{self._where()}"), True
        if isinstance(outcome, openai.APIStatusError):
            return self._status_error(outcome, attempt), outcome.status_code >= 500
        if isinstance(outcome, openai.OpenAIError):
            return ModelError(f"模型请求失败：{self._redact(outcome)}{self._where()}"), False
        # The SDK could not read the response (not JSON, wrong shapes): the endpoint
        # answered, but with nothing usable.
        return ModelOutputError(f"模型接口的回复无法解读（{type(outcome).__name__}：{self._redact(outcome)}）"
                                f"{self._where()}"), False

    def _abandon(self) -> None:
        client, self._client = self._client, None
        if client is not None and self.http_client is None:
            client.close()  # our own connection: closing it ends the worker's read at once

    def complete(self, request: ModelRequest) -> Completion:
        """Send the request to the endpoint, retrying rate limits, 5xx, timeouts and dropped connections."""
        if not ALLOW_MODEL_REQUESTS:
            raise ModelError("真实模型请求已被禁止（liyuan.model.ALLOW_MODEL_REQUESTS = False）")
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            self.max_tokens_param: request.max_tokens,
        }
        temperature = request.temperature if request.temperature is not None else self.temperature
        if temperature is not None:
            params["temperature"] = temperature
        if self.extra_body:
            params["extra_body"] = self.extra_body
        ends = time.monotonic() + self.deadline
        attempt = 0
        while True:
            remaining = ends - time.monotonic()
            started = time.perf_counter()
            create = partial(self._sdk().chat.completions.create, **params,
                             timeout=min(self.timeout, max(remaining, 0.001)))
            outcome = within(remaining, create, self._abandon, name="liyuan-model-call")
            if outcome is TIMED_OUT:
                raise ModelError(f"模型请求超过总时限 {self.deadline:g} 秒（已重试 {attempt} 次）{self._where()}")
            if not isinstance(outcome, BaseException):
                break
            if not isinstance(outcome, Exception):
                raise outcome  # KeyboardInterrupt, SystemExit: not the model's failure
            failure, retry = self._classify(outcome, attempt)
            del outcome  # the SDK error (and its traceback) must not outlive this attempt
            if not retry or attempt >= self.max_retries:
                raise failure
            wait = self.backoff * (2**attempt)
            if time.monotonic() + wait >= ends:
                raise ModelError(f"{failure}；再等 {wait:g} 秒重试会超过总时限 {self.deadline:g} 秒")
            self.sleep(wait)
            attempt += 1
        latency_ms = int((time.perf_counter() - started) * 1000)
        return completion_from_response(outcome, self.model, latency_ms)


def cut_off_note(completion: Completion) -> str:
    """A Chinese note for error lines when the reply stopped at its token limit, else ``""``.

    Without it, a reasoning model that spent its whole budget thinking shows up only as
    "摘要为空" and nobody knows to raise ``max_tokens``.
    """
    if completion.finish_reason != "length":
        return ""
    return "（回复停在了 token 上限：finish_reason=length；推理模型可能把额度都花在了思考上）"


def request(
    purpose: str, system: str, user: str, *, max_tokens: int = 4096
) -> ModelRequest:
    """Build the usual two-message request: a system prompt and one user text."""
    return ModelRequest(
        messages=(ChatMessage("system", system), ChatMessage("user", user)),
        purpose=purpose,
        max_tokens=max_tokens,
    )


def texts(calls: Iterable[ModelRequest]) -> list[str]:
    """The user texts of recorded calls (handy in tests)."""
    return [m.content for c in calls for m in c.messages if m.role == "user"]
