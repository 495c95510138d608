"""MkDocs hook: the evidence on the pages, shown the way the seed shows it.

1. **Removed lines are marked.** In a before/after pair written as
   ``<div class="grid compare diff" markdown>`` holding two fences, each with one
   ``--8<--`` line, the left fence gets ``hl_lines`` naming every line of its file that the
   right file no longer has (blank lines aside). The marks come from the two artifacts, so
   they cannot drift from them; a pair whose left side loses nothing is a build error (the
   pair would claim a removal it does not show).
2. **Raw artifacts are files, not page text.** Every ``sim/out/*.json`` is published as a
   file of the site at the same path (``sim/out/memory.json``), so a page links to the JSON
   instead of inlining hundreds of kilobytes of highlighted dump.

Invariant: page Markdown changes only by the added ``hl_lines`` attribute.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

__all__ = ["RAW_DIRS", "mark_removed", "on_files", "on_page_markdown", "removed_lines"]

ROOT = Path(__file__).resolve().parents[2]
RAW_DIRS = ("sim/out",)
"""Folders whose JSON files are published as downloadable files."""

_PAIR = re.compile(r'<div class="grid compare diff" markdown>\n(?P<body>.*?)\n</div>', re.S)
_FENCE = re.compile(r'^(?P<open>```[^\n]*)\n--8<-- "(?P<path>[^"]+)"\n```', re.M)


def removed_lines(before: str, after: str) -> list[int]:
    """1-based numbers of the non-blank lines of ``before`` that ``after`` does not contain."""
    kept = {line.strip() for line in after.splitlines()}
    return [n for n, line in enumerate(before.splitlines(), 1) if line.strip() and line.strip() not in kept]


def mark_removed(markdown: str, root: Path = ROOT) -> str:
    """Add ``hl_lines`` for the removed lines to the left fence of every diff pair."""

    def pair(match: re.Match[str]) -> str:
        fences = list(_FENCE.finditer(match.group("body")))
        if len(fences) != 2:
            raise ValueError("对照（grid compare diff）里应该正好有两个引用片段的代码块")
        left, right = ((root / f.group("path")).read_text(encoding="utf-8") for f in fences)
        gone = removed_lines(left, right)
        if not gone:
            raise ValueError(f"{fences[0].group('path')} 的行在 {fences[1].group('path')} 里都还在：没有可标的删除")
        first = fences[0]
        marked = f'{first.group("open")} hl_lines="{" ".join(map(str, gone))}"'
        body = match.group("body")
        body = body[:first.start("open")] + marked + body[first.end("open"):]
        return match.group(0).replace(match.group("body"), body)

    return _PAIR.sub(pair, markdown)


def on_page_markdown(markdown: str, /, *, page: Any, config: Any, files: Any, **_: Any) -> str:
    """MkDocs event: runs before Markdown (and the snippets extension) sees the page."""
    try:
        return mark_removed(markdown)
    except (OSError, ValueError) as error:
        raise PluginError(f"{page.file.src_uri}: {error}") from error


def on_files(files: Files, /, *, config: Any) -> Files:
    """MkDocs event: publish the raw artifacts as files at their repository paths."""
    for folder in RAW_DIRS:
        for path in sorted((ROOT / folder).glob("*.json")):
            files.append(File(f"{folder}/{path.name}", src_dir=str(ROOT), dest_dir=config["site_dir"],
                              use_directory_urls=config["use_directory_urls"]))
    return files
