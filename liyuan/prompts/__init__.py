"""Prompt templates: Jinja2 files in this folder, rendered strictly.

Every prompt sentence lives in a ``*.j2`` file here, so a prompt change is a one-file
diff and the docs can include the template itself. Rendering uses ``StrictUndefined``:
a missing variable is an error, never an empty string. Everything that varies between
runs (names, language, texts) is passed in explicitly.
"""

from __future__ import annotations

from functools import cache

import jinja2

__all__ = ["render", "template_path"]


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
