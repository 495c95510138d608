"""MkDocs hook: what the search index holds, and how a Chinese query is cut.

Two things Material's search plugin cannot be configured to do:

1. Keep code out of the index. The pages include whole prompts, Python sections and JSON
   dumps; indexed, they bury the prose in the results (a query lists previews full of
   code) and tab labels run together (``systemuser``). :func:`exclude_code` marks every
   highlighted block except prompt templates (``language-jinja``: their Chinese wording is
   worth finding), and every tab label row, with ``data-search-exclude``, the attribute the
   plugin honours. The prose that explains a block stays indexed.

2. Cut a Chinese query into whole terms. The search worker segments a Chinese query
   greedily against the index's own terms, but its loop stops one character short of the
   end of the query (``j < query.length``), so a query that is itself an indexed term
   (``前情提要``) is never tried whole: it is cut into ``前情`` and ``提``, and the page lights
   up every word starting with 提. :func:`patch_worker` changes that one comparison to
   ``<=`` in the built worker. The build fails if the pattern is not found, so an upgrade of
   Material that changes the worker is noticed, not silently left unpatched.

Invariant: page HTML changes only by added ``data-search-exclude`` attributes; the worker
changes by exactly one character.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

__all__ = ["exclude_code", "on_page_content", "on_post_build", "patch_worker"]

# Highlighted blocks as pymdownx.highlight writes them (pygments_lang_class: true).
_CODE_BLOCK = re.compile(r'<div class="language-(?!jinja\b)[\w+-]+ highlight"')
_TAB_LABELS = re.compile(r'<div class="tabbed-labels"')
# The query segmentation loop, minified: for(let j=i+1;j<q.length;j++)q.slice(i,j)in index
_SEGMENT_LOOP = re.compile(r"for\(let (\w+)=(\w+)\+1;\1<(\w+)\.length;\1\+\+\)\3\.slice\(\2,\1\)in ")


def exclude_code(html: str) -> str:
    """Mark code blocks (but not prompt templates) and tab label rows as excluded from search."""
    html = _CODE_BLOCK.sub(lambda m: m.group(0) + " data-search-exclude", html)
    return _TAB_LABELS.sub(lambda m: m.group(0) + " data-search-exclude", html)


def patch_worker(source: str) -> str:
    """Let the worker try the whole query as one term (see the module docstring).

    Raises:
        ValueError: the loop is not in the worker exactly once.
    """
    found = _SEGMENT_LOOP.findall(source)
    if len(found) != 1:
        raise ValueError(f"搜索 worker 里找到 {len(found)} 处分词循环（应为 1 处）")
    return _SEGMENT_LOOP.sub(lambda m: m.group(0).replace(f"{m.group(1)}<{m.group(3)}.length",
                                                          f"{m.group(1)}<={m.group(3)}.length"), source)


def on_page_content(html: str, /, *, page: Any, config: Any, files: Any, **_: Any) -> str:
    """MkDocs event: runs before the search plugin indexes the page."""
    return exclude_code(html)


def on_post_build(*, config: Any, **_: Any) -> None:
    """MkDocs event: patch the search worker copied into the built site."""
    workers = sorted(Path(config["site_dir"]).glob("assets/javascripts/workers/search.*.min.js"))
    if len(workers) != 1:
        raise PluginError(f"搜索 worker 应该正好有一个，找到 {len(workers)} 个")
    try:
        patched = patch_worker(workers[0].read_text(encoding="utf-8"))
    except ValueError as error:
        raise PluginError(f"{workers[0].name}: {error}") from error
    workers[0].write_text(patched, encoding="utf-8")
