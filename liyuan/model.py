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
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from liyuan.errors import ConfigError, ModelError, ModelOutputError
from liyuan.text import has_lone_surrogate, replace_lone_surrogates

__all__ = [
    "ALLOW_MODEL_REQUESTS",
    "ChatMessage",
    "ChatModel",
    "Completion",
    "FunctionModel",
    "MaxTokensParam",
    "ModelRequest",
    "OpenAIModel",
    "ScriptedModel",
    "Usage",
    "cut_off_note",
    "request",
    "side_call",
    "split_reasoning",
    "texts",
]

ALLOW_MODEL_REQUESTS = True
"""When False, :class:`OpenAIModel` refuses to send anything (set by the test suite)."""

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One chat message sent to a model."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts reported by the endpoint for one request."""

    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What the memory code asks of the side model."""

    messages: tuple[ChatMessage, ...]
    """System prompt first, then the user text."""
    purpose: str
    """What the call is for: ``summary``, ``recap``, ``merge``, ``discussion`` ..."""
    max_tokens: int = 4096
    """Upper bound on the reply, as the original sets per purpose."""
    temperature: float | None = None
    """Sampling temperature; ``None`` leaves the endpoint's default."""


@dataclass(frozen=True, slots=True)
class Completion:
    """A model's answer (or a scripted stand-in for one)."""

    text: str
    """The reply text, with reasoning already split off."""
    usage: Usage | None = None
    """Token usage when the endpoint reported it."""
    model: str = ""
    """Model id that produced the text; empty for scripted replies."""
    provenance: str = "scripted"
    """``scripted`` for replies no model wrote; ``model:<id>`` for real output."""
    reasoning: str = ""
    """Reasoning text the model emitted (``<think>`` blocks, ``reasoning_content``)."""
    latency_ms: int = 0
    """Wall time of the request; 0 for scripted replies."""
    finish_reason: str = ""
    """Why the endpoint stopped (``stop``, ``length`` ...); empty when unknown. ``length``
    means the reply hit ``max_tokens``: a reasoning model may have spent it all thinking."""


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


_THINK_RE = re.compile(r"<think(?:ing)?>(.*?)(?:</think(?:ing)?>|\Z)", re.DOTALL | re.IGNORECASE)


def split_reasoning(text: str) -> tuple[str, str]:
    """Split ``<think>...</think>`` blocks off a reply: ``(answer, reasoning)``.

    An unclosed ``<think>`` swallows the rest of the text: a reply cut off mid-thought
    has no answer.
    """
    reasoning = [m.group(1).strip() for m in _THINK_RE.finditer(text)]
    answer = _THINK_RE.sub("", text)
    return answer.strip(), "\n\n".join(r for r in reasoning if r)


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


@dataclass
class OpenAIModel:
    """Any OpenAI-compatible Chat Completions endpoint, through the ``openai`` SDK.

    Settings fall back to ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``LIYUAN_MODEL`` and
    ``LIYUAN_MAX_TOKENS_PARAM``. Retries 429, 5xx, timeouts and connection errors with
    exponential backoff. A refused request (4xx) fails at once, with the server's own
    message (key redacted) in the error, so a misconfigured endpoint says what is wrong.
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
    _client: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.model = self.model or os.environ.get("LIYUAN_MODEL", "")
        self.base_url = self.base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.api_key = self.api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
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
        # Endpoints and proxies may echo the key back in an error body; never pass it on.
        text = str(error)
        return text.replace(self.api_key, "***") if self.api_key and len(self.api_key) >= 8 else text

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
        return ModelError(f"模型请求失败{tried}：HTTP {exc.status_code}" + (f"：{text}" if text else ""))

    def complete(self, request: ModelRequest) -> Completion:
        if not ALLOW_MODEL_REQUESTS:
            raise ModelError("真实模型请求已被禁止（liyuan.model.ALLOW_MODEL_REQUESTS = False）")
        import openai

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
        attempt = 0
        while True:
            started = time.perf_counter()
            try:
                response = self._sdk().chat.completions.create(**params)
                break
            except (openai.RateLimitError, openai.InternalServerError) as exc:
                if attempt >= self.max_retries:
                    raise self._status_error(exc, attempt) from exc
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                if attempt >= self.max_retries:
                    raise ModelError(f"模型请求失败（已重试 {attempt} 次）：{self._redact(exc)}") from exc
            except openai.APIStatusError as exc:
                if exc.status_code < 500 or attempt >= self.max_retries:
                    raise self._status_error(exc, attempt) from exc
            except openai.OpenAIError as exc:
                raise ModelError(f"模型请求失败：{self._redact(exc)}") from exc
            self.sleep(self.backoff * (2**attempt))
            attempt += 1
        latency_ms = int((time.perf_counter() - started) * 1000)
        return _completion_from_response(response, self.model, latency_ms)


def _completion_from_response(response: Any, fallback_model: str, latency_ms: int) -> Completion:
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise ModelError("模型回复里没有 choices")
    msg = choices[0].message
    content = msg.content or ""
    answer, reasoning = split_reasoning(content)
    extra_reasoning = getattr(msg, "reasoning_content", None) or getattr(msg, "reasoning", None)
    if isinstance(extra_reasoning, str) and extra_reasoning.strip():
        reasoning = "\n\n".join(r for r in (extra_reasoning.strip(), reasoning) if r)
    usage = None
    if getattr(response, "usage", None) is not None:
        usage = Usage(
            prompt_tokens=int(response.usage.prompt_tokens or 0),
            completion_tokens=int(response.usage.completion_tokens or 0),
        )
    model_id = getattr(response, "model", None) or fallback_model
    finish = getattr(choices[0], "finish_reason", None)
    return Completion(
        text=answer,
        usage=usage,
        model=model_id,
        provenance=f"model:{model_id}",
        reasoning=reasoning,
        latency_ms=latency_ms,
        finish_reason=finish if isinstance(finish, str) else "",
    )


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
