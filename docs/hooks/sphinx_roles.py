"""Griffe extension: the reST markup of liyuan's docstrings, rendered by mkdocstrings.

The docstrings are Google style with reST inline markup (``:func:`x```, ``:class:`~a.B```,
``text::`` followed by an indented literal block). mkdocstrings renders Markdown, so
without this extension the API reference prints the roles as raw text. Instead of
rewriting every docstring, the reference converts them when griffe loads the package:

- a role becomes an mkdocs-autorefs cross-reference to the name it resolves to in the
  docstring's own scope (``~`` shows only the last component, as in Sphinx). It is
  marked ``optional``: a name with no entry on any page (a private helper) is shown as code,
  not as a broken link or a build warning;
- ``text::`` plus its indented block becomes ``text:`` plus a fenced code block (Python if
  it parses as Python, else text), so the example is highlighted like every other block;
  a block laid out as two columns (a name, spaces, a note) becomes a list instead, since
  columns holding CJK text only line up where the monospace font has CJK glyphs.

Registered in ``mkdocs.yml`` under the Python handler's ``extensions``. The conversion is
pure (:func:`convert`), so it is tested without a build.
"""

from __future__ import annotations

import ast
import html
import re
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

from griffe import Extension, Object

__all__ = ["ROLE", "SphinxRoles", "convert", "literal_blocks"]

ROLE = re.compile(r":(?:py:)?(?P<kind>func|mod|class|data|meth|attr|exc|obj|const):`(?P<target>[^`]+)`")


def _title(target: str, kind: str) -> str:
    shown = target.removeprefix("~")
    if target.startswith("~"):
        shown = shown.rsplit(".", 1)[-1]
    shown = shown.removeprefix(".")
    return f"{shown}()" if kind in ("func", "meth") and not shown.endswith(")") else shown


def convert(text: str, resolve: Callable[[str], str | None]) -> str:
    """Replace every role in ``text`` by a cross-reference (``resolve`` maps a name to its path)."""

    def one(match: re.Match[str]) -> str:
        target = match.group("target").strip()
        explicit = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^>]+)>", target)  # :meth:`title <target>`
        if explicit:
            target = explicit.group("target").strip()
        name = target.removeprefix("~").removeprefix(".").removesuffix("()")
        path = resolve(name) or name
        title = html.escape(explicit.group("title") if explicit else _title(target, match.group("kind")))
        return f'<autoref identifier="{html.escape(path)}" optional><code>{title}</code></autoref>'

    return literal_blocks(ROLE.sub(one, text))


_LISTING_ROW = re.compile(r"^(?P<name>\S+(?:, \S+)*) {2,}(?P<note>\S.*)$")


def _language(code: str) -> str:
    try:
        ast.parse(code)
    except SyntaxError:
        return "text"
    return "python"


def literal_blocks(text: str) -> str:
    """``para::`` + indented block → ``para:`` + fenced block (``::`` alone on a line is dropped)."""
    lines = text.splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.rstrip().endswith("::"):
            out.append(line)
            index += 1
            continue
        indent = len(line) - len(line.lstrip())
        head = line.rstrip()[:-2].rstrip()
        if head.strip():
            out.append(head + ":")
        index += 1
        block: list[str] = []
        while index < len(lines) and (not lines[index].strip()
                                      or len(lines[index]) - len(lines[index].lstrip()) > indent):
            block.append(lines[index])
            index += 1
        while block and not block[-1].strip():
            block.pop()
        code = textwrap.dedent("\n".join(block)).strip("\n")
        pad = " " * indent
        rows = [_LISTING_ROW.match(c.strip()) for c in code.splitlines() if c.strip()]
        if len(rows) >= 3 and all(rows):  # name, spaces, note: a list, not columns that CJK misaligns
            out += ["", *(f"{pad}- `{m['name']}`: {m['note']}" for m in rows if m), ""]
            continue
        out += ["", f"{pad}```{_language(code)}", *(pad + c if c else c for c in code.splitlines()), f"{pad}```", ""]
    return "\n".join(out)


def _walk(obj: Object) -> Iterator[Object]:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)  # type: ignore[arg-type]


def _resolver(obj: Object) -> Callable[[str], str | None]:
    def resolve(name: str) -> str | None:
        if name.startswith(obj.package.name + ".") or name == obj.package.name:
            return name
        head, _, rest = name.partition(".")
        scope: Object | None = obj
        while scope is not None:
            try:
                found = scope.resolve(head)
            except Exception:  # griffe raises NameResolutionError; anything else: not found here
                scope = scope.parent
                continue
            return f"{found}.{rest}" if rest else found
        return None

    return resolve


class SphinxRoles(Extension):
    """Convert reST roles and literal blocks in every docstring of a loaded package."""

    def on_package(self, *, pkg: Any, **kwargs: Any) -> None:
        for obj in _walk(pkg):
            if obj.docstring is not None:
                obj.docstring.value = convert(obj.docstring.value, _resolver(obj))
