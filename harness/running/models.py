"""Which model answers a run, where its artifacts go, and how the run is labelled.

Invariant: only scripted runs write to ``sim/out`` and ``sim/txt``. Any run with a real
model (``openai:<name>``, ``local``) writes to ``sim/runs/<slug>/`` and records every
call there; a replay of such a folder writes back into the same folder. API keys are
handed to the artifact writer as secrets and never recorded; endpoints are recorded
without credentials.

Model specs: ``scripted`` (default), ``openai:<name>`` (base URL and key from
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``), ``local`` (Gemma 3 270M base on llama.cpp,
a plumbing run), ``replay:<run folder>`` (recorded replies, stale when a prompt changed).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from liyuan.errors import ConfigError
from liyuan.model import ChatModel, OpenAIModel

from .artifacts import ArtifactSet
from .placeholder import PLACEHOLDER_LINE, PlaceholderBackend
from .recorder import Backend, LiveBackend, Recorder, ReplayBackend, ScriptedBackend
from .replies import ReplyBook
from .scenario import Scenario

__all__ = ["ModelSetup", "open_setup", "slug_for"]


def slug_for(name: str) -> str:
    """Folder-safe name of a model id (``openai:gpt-4o`` -> ``openai-gpt-4o``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "model"


def safe_endpoint(url: str | None) -> str:
    """An endpoint for the record: scheme, host and path only (no user, password, query)."""
    if not url:
        return "（SDK 默认）"
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    if host in ("127.0.0.1", "localhost", "::1"):
        port = ""  # loopback ports are random per run
    return f"{parts.scheme}://{host}{port}{parts.path}"


@dataclass
class ModelSetup:
    """How one run gets its replies and where it writes."""

    spec: str
    kind: str
    """``scripted``, ``replay`` or ``live``."""
    label: str
    """Short description for progress lines."""
    out_rel: str
    """Output base relative to the repository root."""
    model_id: str = ""
    plumbing: bool = False
    """A run that only proves the plumbing (the local base model): never evidence of quality."""
    secrets: tuple[str, ...] = ()
    live: LiveBackend | None = None
    replay_dir: Path | None = None
    endpoint: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    folder: str = ""
    """The run folder's home in the repository (``sim/runs/<slug>``), as README and run.json name it."""
    scenario_status: dict[str, Any] = field(default_factory=dict)

    @property
    def stable(self) -> bool:
        """Scripted records carry no wall-clock latency (byte-stable artifacts)."""
        return self.kind == "scripted"

    @property
    def tolerate_failures(self) -> bool:
        """A real model may fail a step; that is a finding to record, not a harness error."""
        return self.kind != "scripted"

    def backend_for(self, scenario: Scenario, root: Path) -> Backend:
        """The reply source for one scenario."""
        if self.kind == "scripted":
            path = root / "sim" / "replies" / f"{scenario.name}.yaml"
            if scenario.source is not None and not path.exists():
                return PlaceholderBackend(scenario.name)  # an imported chat: nobody wrote its replies
            return ScriptedBackend(ReplyBook.load(path, label=f"sim/replies/{scenario.name}.yaml"))
        if self.kind == "replay":
            assert self.replay_dir is not None
            path = self.replay_dir / "replies" / f"{scenario.name}.yaml"
            if not path.exists():
                raise ConfigError(f"{path}: 这个录制里没有场景 {scenario.name}")
            return ReplayBackend(ReplyBook.load(path, label=f"{self.out_rel}/replies/{scenario.name}.yaml"))
        assert self.live is not None
        return self.live

    def describe(self, scenario: Scenario | None = None) -> dict[str, Any]:
        """The ``model`` field of every ``out/*.json`` (of ``scenario``'s, when given)."""
        if self.kind == "scripted" and scenario is not None and scenario.source is not None:
            return {"kind": "scripted", "note": PLACEHOLDER_LINE.strip("（）")}
        if self.kind == "scripted":
            return {"kind": "scripted",
                    "note": "回复来自 sim/replies/<场景>.yaml：人工撰写的示范，不是模型输出"}
        data: dict[str, Any] = {"kind": "model", "model": self.model_id, "spec": self.spec,
                                "endpoint": self.endpoint, "parameters": self.parameters,
                                "plumbing_run": self.plumbing}
        if self.plumbing:
            data["note"] = "管线演示（plumbing run）：只证明真实模型这条路走得通，不是质量证据"
        return data

    def after_scenario(self, scenario: Scenario, recorder: Recorder, artifacts: ArtifactSet) -> None:
        """Model runs keep the recording (with request hashes) beside the outputs."""
        if self.kind == "scripted":
            return
        book = ReplyBook(scenario=scenario.name)
        for call in recorder.calls:
            book.add(call.as_reply())
        artifacts.add_text(f"replies/{scenario.name}.yaml", book.dump())
        self.scenario_status[scenario.name] = {
            "calls": len(recorder.calls),
            "errors": sum(1 for c in recorder.calls if c.error),
            "prompt_tokens": sum((c.usage or {}).get("prompt_tokens", 0) for c in recorder.calls),
            "completion_tokens": sum((c.usage or {}).get("completion_tokens", 0) for c in recorder.calls),
            "latency_ms": sum(c.latency_ms for c in recorder.calls),
        }


@contextmanager
def open_setup(spec: str, root: Path, *, model: ChatModel | None = None,
               temperature: float | None = None) -> Iterator[ModelSetup]:
    """Build the setup for a model spec; a local server lives as long as the context.

    Args:
        spec: ``scripted``, ``openai:<name>``, ``local`` or ``replay:<folder>``.
        root: The repository root.
        model: Use this model object for ``openai:<name>`` (tests pass one with a mock transport).
        temperature: Sampling temperature for ``openai:<name>`` (``local`` always uses 0).

    Raises:
        ConfigError: Unknown spec, or missing model settings.
    """
    if spec == "scripted":
        yield ModelSetup(spec, "scripted", "脚本回复（人工撰写）", "sim")
        return
    if spec.startswith("replay:"):
        folder = Path(spec.removeprefix("replay:"))
        folder = folder if folder.is_absolute() else root / folder
        info_path = folder / "run.json"
        if not info_path.is_file():
            raise ConfigError(f"{info_path}: 不是录制目录（缺少 run.json）")
        info = json.loads(info_path.read_text(encoding="utf-8"))
        rel = folder.relative_to(root).as_posix() if folder.is_relative_to(root) else folder.as_posix()
        yield ModelSetup(str(info.get("spec", spec)), "replay", f"重放 {rel}", rel,
                         model_id=str(info.get("model", "")), plumbing=bool(info.get("plumbing_run")),
                         replay_dir=folder, endpoint=str(info.get("endpoint", "")),
                         parameters=dict(info.get("parameters") or {}), folder=str(info.get("folder") or rel))
        return
    if spec.startswith("openai:"):
        name = spec.removeprefix("openai:")
        if not name:
            raise ConfigError("openai:<模型名> 里缺少模型名")
        chat_model = model or OpenAIModel(model=name, temperature=temperature)
        api_key = getattr(chat_model, "api_key", None) or os.environ.get("OPENAI_API_KEY") or ""
        base_url = getattr(chat_model, "base_url", None) or os.environ.get("OPENAI_BASE_URL")
        params: dict[str, Any] = {"temperature": temperature}
        yield ModelSetup(spec, "live", f"openai:{name}", f"sim/runs/{slug_for('openai-' + name)}",
                         model_id=name, secrets=tuple(s for s in (api_key,) if s and s != "not-needed"),
                         live=LiveBackend(chat_model, name, params), endpoint=safe_endpoint(base_url),
                         parameters=params)
        return
    if spec == "local":
        from .local import CHAT_FORMAT, LOCAL_MODEL_ID, LOCAL_SLUG, LOCAL_TIMEOUT_S, LocalServer

        with LocalServer() as server:
            local: dict[str, Any] = {"temperature": 0.0, "chat_format": CHAT_FORMAT, "n_ctx": server.n_ctx,
                                     "timeout_s": LOCAL_TIMEOUT_S}
            # A CPU-bound 270M model needs about 330 s for an 8192-token merge reply; the
            # app's 300 s side-call timeout would turn every merge into a timeout instead of
            # showing what the code does with the model's actual output; the total deadline
            # (600 s by default) is raised to match for the same reason.
            chat_model = model or OpenAIModel(model=LOCAL_MODEL_ID, base_url=server.base_url,
                                              api_key="not-needed", temperature=0.0, max_retries=0,
                                              timeout=LOCAL_TIMEOUT_S, deadline=LOCAL_TIMEOUT_S)
            yield ModelSetup(spec, "live", f"local:{LOCAL_MODEL_ID}", f"sim/runs/{LOCAL_SLUG}",
                             model_id=LOCAL_MODEL_ID, plumbing=True,
                             live=LiveBackend(chat_model, LOCAL_MODEL_ID, local),
                             endpoint=safe_endpoint(server.base_url), parameters=local)
        return
    raise ConfigError(f"不认识的模型：{spec!r}（可选：scripted、openai:<模型名>、local、replay:<录制目录>）")
