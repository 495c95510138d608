"""The recording model: every side-model call of a run passes through here.

Invariant: each call becomes exactly one :class:`CallRecord` (request, reply or error,
usage, latency, provenance), in call order, attributed to the running step. The reply
comes from one backend: scripted replies (by key), recorded replies (by key and request
hash) or a live model. A missing or stale reply is a *harness* failure: it is kept in
:attr:`Recorder.fatal` so the runner stops the scenario even when the memory code
catches the model error (compaction turns model errors into a ``failed`` outcome).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from liyuan.errors import ModelError
from liyuan.model import ChatModel, Completion, ModelRequest

from .replies import Reply, ReplyBook, StaleReply, call_key, request_json, request_sha256

__all__ = [
    "Backend",
    "CallRecord",
    "LiveBackend",
    "MissingReply",
    "Recorder",
    "ReplayBackend",
    "ScriptedBackend",
]


class MissingReply(ModelError):
    """The reply file has no reply for a call the scenario makes."""


class Backend(Protocol):
    """Where replies come from."""

    kind: str
    """``scripted``, ``replay`` or ``live``."""

    def answer(self, key: str, request: ModelRequest) -> Completion:
        """Answer one call or raise :class:`~liyuan.errors.ModelError`."""
        ...

    def parameters_for(self, key: str) -> dict[str, Any]:
        """Sampling parameters behind the answer to ``key`` (for the record)."""
        ...


def _completion(reply: Reply) -> Completion:
    if reply.error is not None:
        raise ModelError(reply.error)
    usage = None
    if reply.usage:
        from liyuan.model import Usage

        usage = Usage(int(reply.usage.get("prompt_tokens", 0)), int(reply.usage.get("completion_tokens", 0)))
    return Completion(text=reply.text.strip(), usage=usage, model=reply.model,
                      provenance=reply.provenance, reasoning=reply.reasoning,
                      latency_ms=reply.latency_ms, finish_reason=reply.finish_reason)


@dataclass
class ScriptedBackend:
    """Hand-written replies, served by call key."""

    book: ReplyBook
    kind: str = "scripted"

    def answer(self, key: str, request: ModelRequest) -> Completion:
        reply = self.book.get(key)
        if reply is None:
            raise MissingReply(f"{self.book.path or self.book.scenario}: 没有 {key} 的回复"
                               f"（用途 {request.purpose}）；请在回复文件里补上这一条")
        return _completion(reply)

    def parameters_for(self, key: str) -> dict[str, Any]:
        return {}


@dataclass
class ReplayBackend:
    """Replies recorded from a real model, served only for the same request."""

    book: ReplyBook
    kind: str = "replay"

    def answer(self, key: str, request: ModelRequest) -> Completion:
        reply = self.book.get(key)
        if reply is None:
            raise MissingReply(f"{self.book.path}: 录制里没有 {key}；请重新录制")
        reply.check_request(request)
        return _completion(reply)

    def parameters_for(self, key: str) -> dict[str, Any]:
        reply = self.book.get(key)
        return dict(reply.parameters) if reply is not None else {}


@dataclass
class LiveBackend:
    """A real model (any :class:`~liyuan.model.ChatModel`)."""

    model: ChatModel
    model_id: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    """Sampling parameters applied by the model object (temperature ...), for the record."""
    kind: str = "live"

    def answer(self, key: str, request: ModelRequest) -> Completion:
        return self.model.complete(request)

    def parameters_for(self, key: str) -> dict[str, Any]:
        return dict(self.parameters)


@dataclass
class CallRecord:
    """One side-model call as the artifacts show it."""

    key: str
    step: str
    purpose: str
    request: dict[str, Any]
    request_sha256: str
    text: str | None = None
    reasoning: str = ""
    provenance: str = ""
    model: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] | None = None
    latency_ms: int = 0
    finish_reason: str = ""
    error: str | None = None

    def to_json(self, *, stable: bool) -> dict[str, Any]:
        """Record for ``sim/out``; ``stable`` drops the wall-clock latency."""
        reply: dict[str, Any] | None = None
        if self.text is not None:
            reply = {"text": self.text, "provenance": self.provenance}
            if self.model:
                reply["model"] = self.model
            if self.reasoning:
                reply["reasoning"] = self.reasoning
            if self.usage is not None:
                reply["usage"] = self.usage
            if self.finish_reason:
                reply["finish_reason"] = self.finish_reason
            if not stable:
                reply["latency_ms"] = self.latency_ms
        data: dict[str, Any] = {
            "key": self.key,
            "purpose": self.purpose,
            "request": {
                "system": self.part("system"),
                "user": self.part("user"),
                "max_tokens": self.request["max_tokens"],
                "temperature": self.request["temperature"],
            },
            "request_sha256": self.request_sha256,
            "reply": reply,
        }
        if self.parameters:
            data["parameters"] = self.parameters
        if self.error is not None:
            data["error"] = self.error
        return data

    def part(self, role: str) -> str:
        """The request's ``system`` or ``user`` text (several messages joined by a blank line)."""
        return "\n\n".join(m["content"] for m in self.request["messages"] if m["role"] == role)

    def as_reply(self) -> Reply:
        """The call as a recorded reply (for the run folder's reply file)."""
        return Reply(
            key=self.key, text=self.text or "", provenance=self.provenance or "scripted",
            error=self.error if self.text is None else None, model=self.model,
            parameters=self.parameters, request=self.request, request_sha256=self.request_sha256,
            usage=self.usage, latency_ms=self.latency_ms, reasoning=self.reasoning,
            finish_reason=self.finish_reason,
        )


class Recorder:
    """A :class:`~liyuan.model.ChatModel` that records every call of a run.

    Args:
        backend: Where replies come from.
        on_call: Progress callback, given each finished record.
    """

    def __init__(self, backend: Backend, *, on_call: Callable[[CallRecord], None] | None = None) -> None:
        self.backend = backend
        self.calls: list[CallRecord] = []
        self.fatal: ModelError | None = None
        """The first missing or stale reply; the runner aborts the scenario on it."""
        self._on_call = on_call
        self._step = "setup"
        self._counts: Counter[str] = Counter()

    def begin_step(self, step_id: str) -> None:
        """Attribute the following calls to ``step_id``."""
        self._step = step_id
        self._counts = Counter()

    def step_calls(self, step_id: str, purpose: str | None = None) -> list[CallRecord]:
        """The calls made during one step (for one purpose, if given), in order."""
        return [c for c in self.calls if c.step == step_id and purpose in (None, c.purpose)]

    def complete(self, request: ModelRequest) -> Completion:
        self._counts[request.purpose] += 1
        key = call_key(self._step, request.purpose, self._counts[request.purpose])
        record = CallRecord(key=key, step=self._step, purpose=request.purpose,
                            request=request_json(request), request_sha256=request_sha256(request))
        record.parameters = self.backend.parameters_for(key)
        started = time.perf_counter()
        try:
            completion = self.backend.answer(key, request)
        except ModelError as exc:
            record.error = str(exc)
            record.latency_ms = int((time.perf_counter() - started) * 1000)
            if isinstance(exc, MissingReply | StaleReply) and self.fatal is None:
                self.fatal = exc
            self._finish(record)
            raise
        record.text = completion.text
        record.reasoning = completion.reasoning
        record.finish_reason = completion.finish_reason
        record.provenance = completion.provenance
        record.model = completion.model
        if completion.usage is not None:
            record.usage = {"prompt_tokens": completion.usage.prompt_tokens,
                            "completion_tokens": completion.usage.completion_tokens}
        record.latency_ms = completion.latency_ms or int((time.perf_counter() - started) * 1000)
        self._finish(record)
        return completion

    def _finish(self, record: CallRecord) -> None:
        self.calls.append(record)
        if self._on_call is not None:
            self._on_call(record)
