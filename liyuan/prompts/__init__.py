"""Prompt templates: Jinja2 files in this folder, rendered strictly.

Every prompt sentence lives in a ``*.j2`` file here, so a prompt change is a one-file
diff and the docs can include the template itself. Rendering uses ``StrictUndefined``:
a missing variable is an error, never an empty string. Everything that varies between
runs (names, language, texts) is passed in explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import jinja2

from ..model import ChatMessage, ModelRequest

__all__ = ["Prompt", "render", "template_path"]


@cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("liyuan", "prompts"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render(name: str, /, **variables: object) -> str:
    """Render ``liyuan/prompts/<name>`` with ``variables``; trailing whitespace is trimmed."""
    return _env().get_template(name).render(**variables).rstrip()


def template_path(name: str) -> str:
    """Repository-relative path of a template, for records and docs."""
    return f"liyuan/prompts/{name}"


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered two-part prompt and where it came from."""

    purpose: str
    """``summary``, ``recap``, ``merge``, ``discussion``, ``agent-summary`` ..."""
    system: str
    user: str
    system_template: str
    """Template file name of the system part (under ``liyuan/prompts/``)."""
    user_template: str
    max_tokens: int = 4096

    def request(self) -> ModelRequest:
        """The model request: system message, then the user text."""
        return ModelRequest(
            messages=(ChatMessage("system", self.system), ChatMessage("user", self.user)),
            purpose=self.purpose,
            max_tokens=self.max_tokens,
        )

    def as_text(self) -> str:
        """Human-readable form for artifacts: role headers, then each part."""
        return f"===== system =====\n{self.system}\n\n===== user =====\n{self.user}\n"
