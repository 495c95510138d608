"""The data a side call carries: messages in, a completion out (no I/O here).

A private module: every name here is exported by :mod:`liyuan.model` (their one public
home, and the ``liyuan`` facade's source); import them from there. It is a file of its
own only to keep :mod:`liyuan.model` within the line budget, and only ``liyuan``'s own
top-level modules import it (``tests/test_one_home.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from liyuan.errors import ConfigError, ModelOutputError

__all__ = [
    "ChatMessage",
    "Completion",
    "ModelRequest",
    "Role",
    "Usage",
    "completion_from_response",
    "require_finished",
    "split_reasoning",
    "usage_fields",
]

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


def usage_fields(usage: Usage | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What a reply entry stores as its ``usage``: the counts and their total, or a mapping as given.

    Raises:
        ConfigError: Neither a :class:`Usage` nor a mapping.
    """
    if usage is None:
        return None
    if isinstance(usage, Usage):
        return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.prompt_tokens + usage.completion_tokens}
    if isinstance(usage, Mapping):
        return dict(usage)
    raise ConfigError(f"usage 应为 Usage 或字典，实际是 {type(usage).__name__}")


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


_THINK_RE = re.compile(r"<think(?:ing)?>(.*?)(?:</think(?:ing)?>|\Z)", re.DOTALL | re.IGNORECASE)


def split_reasoning(text: str) -> tuple[str, str]:
    """Split ``<think>...</think>`` blocks off a reply: ``(answer, reasoning)``.

    An unclosed ``<think>`` swallows the rest of the text: a reply cut off mid-thought
    has no answer.
    """
    reasoning = [m.group(1).strip() for m in _THINK_RE.finditer(text)]
    answer = _THINK_RE.sub("", text)
    return answer.strip(), "\n\n".join(r for r in reasoning if r)


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _usage_of(response: Any) -> Usage | None:
    """The reported usage, or ``None`` when it is missing or malformed (the reply still counts)."""
    raw = getattr(response, "usage", None)
    prompt, completion = _count(getattr(raw, "prompt_tokens", None)), _count(getattr(raw, "completion_tokens", None))
    if prompt is None or completion is None:
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def completion_from_response(response: Any, fallback_model: str, latency_ms: int) -> Completion:
    """The completion in an SDK response; :class:`ModelOutputError` for any shape that is not one."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise ModelOutputError("模型回复里没有 choices")
    msg = getattr(choices[0], "message", None)
    if msg is None:
        raise ModelOutputError("模型回复的 choices[0] 里没有 message")
    content = getattr(msg, "content", None)
    if content is not None and not isinstance(content, str):
        raise ModelOutputError(f"模型回复的 content 不是文本（{type(content).__name__}）")
    answer, reasoning = split_reasoning(content or "")
    extra_reasoning = getattr(msg, "reasoning_content", None) or getattr(msg, "reasoning", None)
    if isinstance(extra_reasoning, str) and extra_reasoning.strip():
        reasoning = "\n\n".join(r for r in (extra_reasoning.strip(), reasoning) if r)
    model_id = getattr(response, "model", None)
    model_id = model_id if isinstance(model_id, str) and model_id else fallback_model
    finish = getattr(choices[0], "finish_reason", None)
    return Completion(
        text=answer,
        usage=_usage_of(response),
        model=model_id,
        provenance=f"model:{model_id}",
        reasoning=reasoning,
        latency_ms=latency_ms,
        finish_reason=finish if isinstance(finish, str) else "",
    )


def require_finished(completion: Completion, what: str) -> None:
    """Refuse a reply that stopped at its token limit (``finish_reason == "length"``).

    Such a reply is cut off mid-sentence even when every required heading made it in
    (the last section is then half a sentence): it is malformed, whatever it looks like.

    Args:
        completion: The reply.
        what: What the reply is, for the message (``摘要``, ``复盘``, ``合并结果``).

    Raises:
        ModelOutputError: With a Chinese reason that says how to fix it.
    """
    if completion.finish_reason == "length":
        raise ModelOutputError(f"{what}停在了 token 上限（finish_reason=length），内容不完整；"
                               "推理模型可能把额度都花在了思考上")
