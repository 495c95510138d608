"""MkDocs hook: 模版 titles generated from the lines a snippet actually includes.

Invariant: after :func:`on_page_markdown`, every code fence whose source title is exactly
``模版`` carries the title ``模版 · <path>:<start>-<end>`` (``<path>:<line>`` for one line),
where ``start..end`` are the 1-based line numbers, in the file on disk, of the lines that
``pymdownx.snippets`` includes for that fence's single ``--8<--`` line. Nobody types those
numbers, so they cannot drift from the code.

The hook also refuses, with a build error, any snippet line on any page that would render
nothing or silently clamp: a missing file, a missing or unterminated named section, an empty
section, or a line range that reaches past the end of the file. ``check_paths`` in
pymdownx.snippets catches the first two only; the rest render as an empty block with exit 0.

Highlighted lines are generated the same way. A 模版 fence may carry ``hl="<text>|<text>"``:
each ``|``-separated text names the lines that carry the point, and the hook replaces the
attribute with ``hl_lines="..."`` (pymdownx.highlight), numbering every included line that
contains one of the texts. A text that matches no included line is a build error, so a
highlight cannot silently drift off the code it points at. A hand-typed ``hl_lines`` on a
模版 fence is refused for the same reason.

Supported snippet specs (the subset our pages use): ``path``, ``path:name`` and
``path:start:end``. A hand-typed ``模版 · ...`` title is an error: titles come from here.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

__all__ = [
    "TEMPLATE_TITLE",
    "Include",
    "IncludeError",
    "format_title",
    "highlight_lines",
    "iter_snippet_lines",
    "on_page_markdown",
    "resolve",
    "rewrite_titles",
]

TEMPLATE_TITLE = "模版"
"""The source title that asks for a generated ``模版 · path:start-end`` title."""

# Same shape as pymdownx.snippets' inline form: optional indent, the marker, a quoted path.
_SNIPPET_LINE = re.compile(r"""^(?P<indent>[ \t]*)-{1,}8<-{1,}[ \t]+(?P<q>["'])(?P<spec>.+?)(?P=q)[ \t]*$""")
# A section marker as pymdownx.snippets recognises it, anywhere on a line (comment syntax varies).
_SECTION_MARKER = re.compile(r"(?i)(?<!;)-{1,}8<-{1,}[ \t]+\[[ \t]*(start|end)[ \t]*:[ \t]*([a-z][-_0-9a-z]*)[ \t]*\]")
_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_TITLE_ATTR = re.compile(r"""title=(?P<q>["'])(?P<title>.*?)(?P=q)""")
_HL_ATTR = re.compile(r"""(?<![-_\w])hl=(?P<q>["'])(?P<texts>.*?)(?P=q)""")
_SECTION_NAME = re.compile(r"(?i)^[a-z][-_0-9a-z]*$")


class IncludeError(ValueError):
    """A snippet spec that would render nothing, render something else, or cannot be titled."""


@dataclass(frozen=True, slots=True)
class Include:
    """What one snippet spec includes, located in its file."""

    spec: str
    """The spec as written on the page, e.g. ``liyuan/story/compact.py:plan_compaction``."""
    path: str
    """Repository-relative path of the included file."""
    start: int
    """1-based number of the first included line."""
    end: int
    """1-based number of the last included line (inclusive)."""
    lines: tuple[str, ...]
    """The included lines as rendered: section markers removed, dedented."""

    @property
    def span(self) -> str:
        """``path:start-end``, or ``path:line`` for a single line."""
        if self.start == self.end:
            return f"{self.path}:{self.start}"
        return f"{self.path}:{self.start}-{self.end}"


def format_title(include: Include) -> str:
    """The generated title of a 模版 block: ``模版 · path:start-end``."""
    return f"{TEMPLATE_TITLE} · {include.span}"


def highlight_lines(include: Include, texts: str) -> list[int]:
    """1-based numbers of the included lines that contain any of the ``|``-separated ``texts``.

    Raises:
        IncludeError: a text is empty or matches no included line.
    """
    wanted = texts.split("|")
    numbers: set[int] = set()
    for text in wanted:
        if not text.strip():
            raise IncludeError(f"片段 {include.spec!r}：hl 里有空的一项")
        hits = [n for n, line in enumerate(include.lines, start=1) if text in line]
        if not hits:
            raise IncludeError(f"片段 {include.spec!r}：hl 要高亮的 {text!r} 不在引入的行里")
        numbers.update(hits)
    return sorted(numbers)


def _is_marker(line: str) -> bool:
    return "8<-" in line and _SECTION_MARKER.search(line) is not None


def _split_spec(spec: str) -> tuple[str, str | None, tuple[int, int] | None]:
    """Split ``path[:name | :start:end]``; the path itself never contains a colon here."""
    parts = spec.split(":")
    if len(parts) == 1:
        return spec, None, None
    if len(parts) == 2 and _SECTION_NAME.match(parts[1]):
        return parts[0], parts[1], None
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return parts[0], None, (int(parts[1]), int(parts[2]))
    raise IncludeError(f"不支持的片段写法：{spec!r}（只用 path、path:节名 或 path:起:止）")


def _dedent(lines: list[str]) -> tuple[str, ...]:
    # pymdownx.snippets dedents sections and ranges with textwrap when dedent_subsections is on.
    return tuple(textwrap.dedent("\n".join(lines)).split("\n"))


def resolve(spec: str, root: Path) -> Include:
    """Locate what ``--8<-- "spec"`` includes, relative to the repository ``root``.

    Args:
        spec: ``path`` (whole file), ``path:name`` (a named section) or ``path:start:end``.
        root: the snippet base path (the repository root).

    Returns:
        The include with its 1-based line span and its rendered lines.

    Raises:
        IncludeError: the file or section is missing, a section is unterminated or empty,
            a range is inverted or reaches past the end of the file, or nothing would render.
    """
    rel, section, span = _split_spec(spec)
    file = (root / rel).resolve()
    if not file.is_relative_to(root.resolve()):
        raise IncludeError(f"片段 {spec!r} 指向仓库之外")
    if not file.is_file():
        raise IncludeError(f"片段 {spec!r} 的文件不存在：{rel}")
    all_lines = file.read_text(encoding="utf-8").splitlines()

    if section is not None:
        start_at = end_at = None
        for index, line in enumerate(all_lines):
            match = _SECTION_MARKER.search(line) if "8<-" in line else None
            if match is None or match.group(2) != section:
                continue
            if match.group(1).lower() == "start" and start_at is None:
                start_at = index
            elif match.group(1).lower() == "end" and start_at is not None:
                end_at = index
                break
        if start_at is None:
            raise IncludeError(f"片段 {spec!r}：{rel} 里没有 [start:{section}] 标记")
        if end_at is None:
            raise IncludeError(f"片段 {spec!r}：{rel} 里 [start:{section}] 没有对应的 [end:{section}]")
        kept = [i for i in range(start_at + 1, end_at) if not _is_marker(all_lines[i])]
        if not kept:
            raise IncludeError(f"片段 {spec!r} 的内容为空")
        # A nested section's marker on the first or last line never renders: the span
        # runs from the first to the last line that does.
        first, last = kept[0] + 1, kept[-1] + 1
        lines = _dedent([all_lines[i] for i in kept])
    elif span is not None:
        first, last = span
        if first < 1 or last < first:
            raise IncludeError(f"片段 {spec!r}：行号范围无效")
        if last > len(all_lines):
            raise IncludeError(f"片段 {spec!r}：{rel} 只有 {len(all_lines)} 行，范围越界")
        lines = _dedent(all_lines[first - 1 : last])
    else:
        first, last = 1, len(all_lines)
        # A whole-file include drops section marker lines and is not dedented.
        lines = tuple(line for line in all_lines if not _is_marker(line))

    if not any(line.strip() for line in lines):
        raise IncludeError(f"片段 {spec!r} 的内容为空")
    return Include(spec=spec, path=rel, start=first, end=last, lines=lines)


def iter_snippet_lines(markdown: str) -> Iterator[str]:
    """Yield the spec of every inline snippet line of a page, in page order."""
    for line in markdown.split("\n"):
        match = _SNIPPET_LINE.match(line)
        if match is not None:
            yield match.group("spec")


def _fence_body(lines: list[str], open_index: int, fence: str) -> int:
    """Index of the line closing the fence opened at ``open_index``."""
    char, size = fence[0], len(fence)
    for index in range(open_index + 1, len(lines)):
        stripped = lines[index].strip()
        if stripped and set(stripped) == {char} and len(stripped) >= size:
            return index
    raise IncludeError(f"第 {open_index + 1} 行的代码块没有结束")


def rewrite_titles(markdown: str, root: Path) -> str:
    """Give every ``title="模版"`` fence its generated title; check every snippet line.

    Args:
        markdown: page source.
        root: the snippet base path (the repository root).

    Returns:
        The page source with generated titles.

    Raises:
        IncludeError: a snippet line would render badly (see :func:`resolve`), a 模版 fence
            holds anything but exactly one snippet line, or a title was typed by hand.
    """
    # Every snippet line is checked, not only those in 模版 fences; the fences reuse these.
    resolved: dict[str, Include] = {}
    for spec in iter_snippet_lines(markdown):
        if spec not in resolved:
            resolved[spec] = resolve(spec, root)

    lines = markdown.split("\n")
    index = 0
    while index < len(lines):
        opened = _FENCE_OPEN.match(lines[index])
        if opened is None:
            index += 1
            continue
        close = _fence_body(lines, index, opened.group("fence"))
        title = _TITLE_ATTR.search(opened.group("info"))
        if title is not None and title.group("title").startswith(f"{TEMPLATE_TITLE} ·"):
            raise IncludeError(f"第 {index + 1} 行：模版标题不能手写，只写 title=\"{TEMPLATE_TITLE}\"")
        if title is not None and title.group("title") == TEMPLATE_TITLE:
            body = [line for line in lines[index + 1 : close] if line.strip()]
            specs = [m.group("spec") for m in map(_SNIPPET_LINE.match, body) if m is not None]
            if len(body) != 1 or len(specs) != 1:
                raise IncludeError(f"第 {index + 1} 行：模版代码块里只能有一行 --8<-- 片段")
            include = resolved[specs[0]]  # a fence body line is a page line
            info = opened.group("info")
            if "hl_lines=" in info:
                raise IncludeError(f"第 {index + 1} 行：模版的高亮行不能手写 hl_lines，用 hl=\"要高亮的文字\"")
            info = info[: title.start()] + f'title="{format_title(include)}"' + info[title.end() :]
            marked = _HL_ATTR.search(info)
            if marked is not None:
                numbers = " ".join(str(n) for n in highlight_lines(include, marked.group("texts")))
                info = info[: marked.start()] + f'hl_lines="{numbers}"' + info[marked.end() :]
            lines[index] = f"{opened.group('indent')}{opened.group('fence')}{info}"
        index = close + 1
    return "\n".join(lines)


def on_page_markdown(markdown: str, /, *, page: Any, config: Any, files: Any, **_: Any) -> str:
    """MkDocs event: runs before Markdown (and so before pymdownx.snippets) sees the page."""
    root = Path(config["config_file_path"]).resolve().parent
    try:
        return rewrite_titles(markdown, root)
    except IncludeError as error:
        raise PluginError(f"{page.file.src_uri}: {error}") from error
