"""Reply files: the side-model replies a scenario consumes, with provenance.

Invariant: every reply says who wrote it. ``provenance: scripted`` means written by
hand for the demonstration (no model wrote it); ``provenance: model:<id>`` means a real
model produced it, and then the entry also carries the model id, the parameters, the
request it answered (``request``) and that request's sha256 (``request_sha256``).

Replies are keyed by call: ``<step id>:<purpose>`` for the first call of a purpose in a
step, ``<step id>:<purpose>#2`` for the second, and so on. Scripted replies are served
by key alone. Recorded replies are served only when the new request hashes to the
recorded ``request_sha256``; otherwise :class:`StaleReply` carries the prompt diff.

File shape (``sim/replies/<scenario>.yaml`` or ``sim/runs/<model>/replies/<scenario>.yaml``)::

    scenario: walkthrough
    replies:
      compact-jA:summary:
        provenance: scripted
        note: 人工撰写的示范，不是模型输出
        text: |
          ## 前情提要
          ...
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from liyuan.errors import ModelError
from liyuan.model import ChatMessage, ModelRequest

from .artifacts import unified
from .scenario import ScenarioError

__all__ = [
    "Reply",
    "ReplyBook",
    "StaleReply",
    "call_key",
    "dump_yaml",
    "request_from_json",
    "request_json",
    "request_sha256",
]

_REPLY_KEYS = {"provenance", "note", "text", "error", "model", "parameters", "request",
               "request_sha256", "usage", "latency_ms", "reasoning", "finish_reason"}


def call_key(step_id: str, purpose: str, n: int) -> str:
    """Key of the ``n``-th (1-based) call of ``purpose`` within a step."""
    return f"{step_id}:{purpose}" if n == 1 else f"{step_id}:{purpose}#{n}"


def request_json(request: ModelRequest) -> dict[str, Any]:
    """The request as plain data (what the hash covers and the records show)."""
    return {
        "purpose": request.purpose,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }


def request_from_json(data: Mapping[str, Any]) -> ModelRequest:
    """Inverse of :func:`request_json`."""
    return ModelRequest(
        messages=tuple(ChatMessage(m["role"], m["content"]) for m in data.get("messages", [])),
        purpose=str(data.get("purpose", "")),
        max_tokens=int(data.get("max_tokens", 4096)),
        temperature=data.get("temperature"),
    )


# --8<-- [start:request_sha256]
def request_sha256(request: ModelRequest) -> str:
    """sha256 of the canonical JSON of the request: any change to a prompt changes it."""
    blob = json.dumps(request_json(request), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
# --8<-- [end:request_sha256]


def prompt_diff(old: ModelRequest, new: ModelRequest, label: str) -> str:
    """Unified diff of two requests, message by message."""
    parts = []
    for i in range(max(len(old.messages), len(new.messages))):
        a = old.messages[i] if i < len(old.messages) else None
        b = new.messages[i] if i < len(new.messages) else None
        either = b if b is not None else a
        role = either.role if either is not None else "?"
        parts.append(unified(a.content if a else "", b.content if b else "",
                             f"录制时/{label}/{role}", f"现在/{label}/{role}"))
    if old.max_tokens != new.max_tokens or old.temperature != new.temperature:
        parts.append(f"参数：录制时 max_tokens={old.max_tokens} temperature={old.temperature}；"
                     f"现在 max_tokens={new.max_tokens} temperature={new.temperature}\n")
    return "".join(parts)


class StaleReply(ModelError):
    """A recorded reply answered a different request than the one made now."""

    def __init__(self, key: str, diff: str) -> None:
        super().__init__(f"录制的回复已过期：{key} 的 prompt 变了，需要重新录制（下面是 prompt 的差异）\n{diff}")
        self.key = key
        self.diff = diff


@dataclass(frozen=True)
class Reply:
    """One side-model reply and where it came from."""

    key: str
    text: str
    provenance: str
    """``scripted`` (hand-written) or ``model:<id>``."""
    note: str = ""
    error: str | None = None
    """Scripted failure: the call raises a model error with this message."""
    model: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    request: Mapping[str, Any] | None = None
    request_sha256: str | None = None
    usage: Mapping[str, int] | None = None
    latency_ms: int = 0
    reasoning: str = ""
    finish_reason: str = ""
    """Why the model stopped (``stop``, ``length`` ...), as the endpoint said; empty if unknown."""

    @property
    def scripted(self) -> bool:
        """True when no model wrote this reply."""
        return self.provenance == "scripted"

    # --8<-- [start:check_request]
    def check_request(self, request: ModelRequest) -> None:
        """Raise :class:`StaleReply` when a recorded reply answered another request."""
        if self.scripted or self.request_sha256 is None:
            return
        if request_sha256(request) == self.request_sha256:
            return
        old = request_from_json(self.request) if self.request else ModelRequest((), request.purpose)
        raise StaleReply(self.key, prompt_diff(old, request, self.key))
    # --8<-- [end:check_request]

    def to_json(self) -> dict[str, Any]:
        """Plain data for the YAML file (empty fields left out)."""
        data: dict[str, Any] = {"provenance": self.provenance}
        for name in ("note", "model", "error", "request_sha256", "reasoning", "finish_reason"):
            value = getattr(self, name)
            if value:
                data[name] = value
        if self.parameters:
            data["parameters"] = dict(self.parameters)
        if self.usage:
            data["usage"] = dict(self.usage)
        if self.latency_ms:
            data["latency_ms"] = self.latency_ms
        data["text"] = self.text
        if self.request is not None:
            data["request"] = dict(self.request)
        return data


@dataclass
class ReplyBook:
    """All replies of one scenario."""

    scenario: str
    replies: dict[str, Reply] = field(default_factory=dict)
    path: str = ""

    def get(self, key: str) -> Reply | None:
        """The reply for a call key, or ``None``."""
        return self.replies.get(key)

    def add(self, reply: Reply) -> None:
        """Add or replace one reply."""
        self.replies[reply.key] = reply

    def dump(self) -> str:
        """The YAML text of the book (keys in insertion order, block scalars for text)."""
        data = {"scenario": self.scenario,
                "replies": {k: r.to_json() for k, r in self.replies.items()}}
        return dump_yaml(data)

    @classmethod
    def load(cls, path: Path, *, label: str | None = None) -> ReplyBook:
        """Read a reply file; a missing file is an empty book.

        Raises:
            ScenarioError: The file breaks the shape described in the module docstring.
        """
        where = label or path.name
        if not path.exists():
            return cls(scenario=path.stem, path=where)
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ScenarioError(f"{where}: YAML 语法错误：{exc}") from exc
        if not isinstance(raw, dict) or not isinstance(raw.get("replies", {}), dict):
            raise ScenarioError(f"{where}: 应该是 scenario + replies 映射")
        book = cls(scenario=str(raw.get("scenario", path.stem)), path=where)
        for key, entry in (raw.get("replies") or {}).items():
            book.add(_reply(where, str(key), entry))
        return book


def _reply(where: str, key: str, entry: Any) -> Reply:
    here = f"{where}: replies.{key}"
    if not isinstance(entry, dict):
        raise ScenarioError(f"{here}: 应该是映射")
    unknown = sorted(set(entry) - _REPLY_KEYS)
    if unknown:
        raise ScenarioError(f"{here}: 未知字段 {', '.join(unknown)}")
    provenance = entry.get("provenance")
    if provenance != "scripted" and not (isinstance(provenance, str) and provenance.startswith("model:")):
        raise ScenarioError(f"{here}: provenance 必须是 scripted（人工撰写）或 model:<模型 id>")
    text = entry.get("text", "")
    error = entry.get("error")
    if not isinstance(text, str) or (not text.strip() and error is None):
        raise ScenarioError(f"{here}: 缺少 text（或用 error 演示一次失败的调用）")
    if provenance != "scripted" and not entry.get("request_sha256"):
        raise ScenarioError(f"{here}: 模型录制的回复必须带 request_sha256")
    return Reply(
        key=key, text=text, provenance=provenance, note=str(entry.get("note", "")),
        error=str(error) if error is not None else None, model=str(entry.get("model", "")),
        parameters=dict(entry.get("parameters") or {}), request=entry.get("request"),
        request_sha256=entry.get("request_sha256"), usage=entry.get("usage"),
        latency_ms=int(entry.get("latency_ms", 0)), reasoning=str(entry.get("reasoning", "")),
        finish_reason=str(entry.get("finish_reason", "")),
    )


class _Dumper(yaml.SafeDumper):
    pass


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        # Block scalars keep multi-line Chinese text readable and diffable.
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str_representer)


def dump_yaml(data: Any) -> str:
    """YAML for humans: UTF-8 text, insertion order, block scalars, no line folding."""
    text: str = yaml.dump(data, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=10_000)
    return text
