"""MkDocs hook: reference sections generated from the code (docstrings, constants, fields).

A page asks for a generated block with one directive line (an HTML comment, so the source
page still reads as Markdown)::

    <!-- 源码: doc liyuan.session.entries -->
    <!-- 源码: consts liyuan.card.layout MEMORY_DIR MANIFEST_FILE -->
    <!-- 源码: fields liyuan.session.state.Ledger -->

- ``doc``: the module's docstring, its reST inline markup turned into Markdown (````x````
  and ``:func:`x``` become ```x```, a ``::`` paragraph's indented block becomes a code
  block), in a ``quote`` admonition titled with the module's file.
- ``consts``: a list of the named module constants and their values.
- ``fields``: a table of a dataclass's fields: name, type, and the attribute docstring.

Invariant: every name a directive gives must exist; a missing module, constant or field,
or a module without a docstring, is a build error. So the reference cannot describe a
file format the code no longer has.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import textwrap
from itertools import pairwise
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

__all__ = ["consts_table", "doc_block", "fields_table", "on_page_markdown", "render", "rst_to_markdown",
           "two_column_list"]

_DIRECTIVE = re.compile(r"^<!-- 源码: (?P<kind>doc|consts|fields) (?P<args>[^>]+?) -->$", re.MULTILINE)
_ROLE = re.compile(r":(?:func|mod|class|data|meth|attr|exc):`~?(?P<name>[^`]+)`")
_LITERAL = re.compile(r"``(?P<code>[^`]+?)``")


def _inline(text: str) -> str:
    text = _ROLE.sub(lambda m: f"`{m.group('name')}`", text)
    return _LITERAL.sub(lambda m: f"`{m.group('code')}`", text)


_LISTING_ROW = re.compile(r"^(?P<name>\S+(?:, \S+)*) {2,}(?P<note>\S.*)$")


def two_column_list(block: str) -> list[str] | None:
    """A literal block laid out as two columns (a name, spaces, a note) as a Markdown list.

    Aligned columns only line up in a monospace font whose CJK glyphs are exactly two Latin
    cells wide, which a reader's machine may not have; a list reads the same everywhere and
    wraps on a phone. ``None`` when the block is not such a listing (three rows at least).
    """
    rows = [_LISTING_ROW.match(line.strip()) for line in block.splitlines() if line.strip()]
    if len(rows) < 3 or not all(rows):
        return None
    return [f"- `{m['name']}`：{m['note']}" for m in rows if m]


def rst_to_markdown(doc: str) -> str:
    """The subset of reST our docstrings use, as Markdown."""
    lines = inspect.cleandoc(doc).splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.rstrip().endswith("::"):
            out.append(_inline(line.rstrip()[:-1]))
            index += 1
            block: list[str] = []
            while index < len(lines) and (not lines[index].strip() or lines[index].startswith((" ", "\t"))):
                block.append(lines[index])
                index += 1
            while block and not block[-1].strip():
                block.pop()
            body = textwrap.dedent("\n".join(b for b in block)).strip("\n")
            listing = two_column_list(body)
            out += ["", *listing, ""] if listing else ["", "```text", body, "```", ""]
            continue
        out.append(_inline(line))
        index += 1
    return "\n".join(out).strip()


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ValueError(f"没有这个模块：{name}") from error


def doc_block(module_name: str, root: Path) -> str:
    """A module docstring as a quote admonition titled with its file."""
    module = _module(module_name)
    if not module.__doc__:
        raise ValueError(f"{module_name} 没有模块说明")
    path = Path(inspect.getfile(module)).resolve()
    rel = path.relative_to(root.resolve()).as_posix() if path.is_relative_to(root.resolve()) else path.name
    body = textwrap.indent(rst_to_markdown(module.__doc__), "    ")
    return f'!!! quote "源码里的说明 · {rel}（代码注释，英文）"\n\n{body}\n'


def consts_table(module_name: str, names: list[str]) -> str:
    """A list of module constants and their values (a list wraps on a phone; a table would not)."""
    module = _module(module_name)
    rows = [f"`{module_name}` 里的常量：", ""]
    for name in names:
        if not hasattr(module, name):
            raise ValueError(f"{module_name} 里没有常量 {name}")
        value = getattr(module, name)
        shown = " · ".join(f"`{v}`" for v in value) if isinstance(value, tuple) else f"`{value}`"
        rows.append(f"- `{name}` = {shown}")
    return "\n".join(rows) + "\n"


def _attribute_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (a string right after an annotated assignment) of a class."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for first, second in pairwise(body):
        if (isinstance(first, ast.AnnAssign) and isinstance(first.target, ast.Name)
                and isinstance(second, ast.Expr) and isinstance(second.value, ast.Constant)
                and isinstance(second.value.value, str)):
            docs[first.target.id] = " ".join(second.value.value.split())
    return docs


def fields_table(path: str) -> str:
    """A table of a dataclass's fields: name, type, attribute docstring."""
    module_name, _, class_name = path.rpartition(".")
    cls = getattr(_module(module_name), class_name, None)
    if cls is None or not dataclasses.is_dataclass(cls):
        raise ValueError(f"{path} 不是一个 dataclass")
    docs = _attribute_docs(cls)  # type: ignore[arg-type]
    rows = ["| 字段 | 类型 | 说明（代码注释） |", "|---|---|---|"]
    for field in dataclasses.fields(cls):
        kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
        rows.append(f"| `{field.name}` | `{kind}` | {_inline(docs.get(field.name, ''))} |")
    return "\n".join(rows) + "\n"


def render(markdown: str, root: Path) -> str:
    """Replace every directive line with its generated block."""

    def one(match: re.Match[str]) -> str:
        args = match.group("args").split()
        kind = match.group("kind")
        if kind == "doc" and len(args) == 1:
            return doc_block(args[0], root)
        if kind == "consts" and len(args) >= 2:
            return consts_table(args[0], args[1:])
        if kind == "fields" and len(args) == 1:
            return fields_table(args[0])
        raise ValueError(f"看不懂的源码指令：{match.group(0)}")

    return _DIRECTIVE.sub(one, markdown)


def on_page_markdown(markdown: str, /, *, page: Any, config: Any, files: Any, **_: Any) -> str:
    """MkDocs event: runs before Markdown sees the page."""
    root = Path(config["config_file_path"]).resolve().parent
    try:
        return render(markdown, root)
    except ValueError as error:
        raise PluginError(f"{page.file.src_uri}: {error}") from error
