"""MkDocs hook: no stray spaces where a Chinese paragraph wraps in the source.

Markdown turns a line break inside a paragraph into a space. Between two Chinese
characters that space shows up in the browser (``……分叉； 旧的回复``), so writers either
keep every paragraph on one very long line or live with the gaps. This hook joins such
lines before Markdown sees the page.

Invariant: a line is joined onto the previous one only when both are prose in the same
block: outside fenced code, the previous line is not a heading, table row, HTML line,
block opener (``!!!``, ``???``, ``===``) or snippet line, the previous line ends with a
CJK character or CJK punctuation, and the next line, after its indentation, starts with
one. Such a next line can never open a Markdown block, so joining it changes spacing only,
never structure. Everything else is left byte for byte.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["join_cjk_lines", "on_page_markdown"]

# CJK ideographs, CJK punctuation, full-width forms, and the quotes Chinese text uses.
_CJK = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef\u2018\u2019\u201c\u201d\u2014\u2026"
_ENDS_CJK = re.compile(f"[{_CJK}]$")
_STARTS_CJK = re.compile(f"^[ \\t]*[{_CJK}]")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_NOT_PROSE = re.compile(r"^[ \t]*(#|\||<|!!!|\?\?\?|===|-{1,}8<-{1,}|\[.*\]:)")


def join_cjk_lines(markdown: str) -> str:
    """Join soft-wrapped lines of Chinese prose (see the module docstring)."""
    out: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            out.append(line)
            continue
        if opened:
            fence = opened.group(1)
            out.append(line)
            continue
        previous = out[-1] if out else ""
        if (
            previous.strip()
            and not _NOT_PROSE.match(previous)
            and not _FENCE.match(previous)
            and _ENDS_CJK.search(previous)
            and _STARTS_CJK.match(line)
        ):
            out[-1] = previous + line.lstrip(" \t")
        else:
            out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown: str, /, *, page: Any, config: Any, files: Any, **_: Any) -> str:
    """MkDocs event: runs before Markdown sees the page."""
    return join_cjk_lines(markdown)
