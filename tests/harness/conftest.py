"""Fixtures for the harness tests: the repository root, a copy of it, a prompt change."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import jinja2
import pytest

import liyuan.prompts

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def root() -> Path:
    """The real repository root (read-only for tests)."""
    return ROOT


@pytest.fixture
def sim_copy(tmp_path: Path) -> Path:
    """A throwaway root holding a copy of sim/ (scenarios, replies and committed artifacts)."""
    target = tmp_path / "repo"
    for part in ("scenarios", "replies", "out", "turns", "txt", "imports", "cards"):
        shutil.copytree(ROOT / "sim" / part, target / "sim" / part)
    return target


@pytest.fixture
def change_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str, str], None]:
    """Load prompt templates from a temp copy in which one word was changed.

    The real templates are never touched: the loader is pointed at the copy.
    """

    def change(template: str, old: str, new: str) -> None:
        folder = tmp_path / "prompts"
        if not folder.exists():
            shutil.copytree(Path(liyuan.prompts.__file__).parent, folder,
                            ignore=shutil.ignore_patterns("*.py", "__pycache__"))
        path = folder / template
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{template} no longer contains {old!r}"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        env = liyuan.prompts._env().overlay(loader=jinja2.FileSystemLoader(folder))
        monkeypatch.setattr(liyuan.prompts, "_env", lambda: env)

    return change


def completion_body(content: str, model: str = "mock-model-1") -> dict[str, Any]:
    """A Chat Completions response body."""
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366},
    }


class FakeEndpoint:
    """A fake OpenAI-compatible endpoint that answers every request with the same text."""

    def __init__(self, content: str = "（一段不合格式的回复）") -> None:
        self.content = content
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return httpx2.Response(200, json=completion_body(self.content))

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self))
