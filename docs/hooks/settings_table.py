"""MkDocs hook: settings lists generated from the dataclasses that hold the settings.

A line ``<!-- 设置表: path/to/module.py:ClassName -->`` on a page becomes a Markdown
list with one item per field of that dataclass: name, type, default, the Chinese
description from the module's ``DESCRIPTIONS_ZH`` (keyed ``Class.field``) and the attribute
docstring, all read from the source with ``ast``. Nobody copies a default or a description
by hand, so the page cannot drift from the code. A marker naming a missing file or class,
or a field without a Chinese description, fails the build.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

__all__ = ["descriptions_zh", "on_page_markdown", "settings_rows", "settings_table"]

ROOT = Path(__file__).resolve().parents[2]
_MARKER = re.compile(r"^<!-- 设置表: (?P<path>[\w/.-]+\.py):(?P<cls>\w+) -->$", re.M)


def _default(value: ast.expr | None) -> str:
    if value is None:
        return "（必填）"
    if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field":
        for keyword in value.keywords:
            if keyword.arg == "default_factory":
                return f"{ast.unparse(keyword.value)}()"
            if keyword.arg == "default":
                return ast.unparse(keyword.value)
    return ast.unparse(value)


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    return {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


_ROLE = re.compile(r":(?:func|mod|class|data|meth|attr|exc):`~?(?:[\w.]*\.)?(?P<name>[^`.]+)`")
_LITERAL = re.compile(r"``(?P<code>[^`]+?)``")


def _markdown(doc: str) -> str:
    """A docstring's reST inline markup as Markdown code."""
    return _LITERAL.sub(lambda m: f"`{m['code']}`", _ROLE.sub(lambda m: f"`{m['name']}`", doc))


def descriptions_zh(path: Path) -> dict[str, str]:
    """The module's ``DESCRIPTIONS_ZH`` dict literal (``Class.field`` → Chinese), or ``{}``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign)
                                                                       else None)
        if isinstance(target, ast.Name) and target.id == "DESCRIPTIONS_ZH" and node.value is not None:
            value = ast.literal_eval(node.value)
            if isinstance(value, dict):
                return {str(k): str(v) for k, v in value.items()}
    return {}


def settings_rows(path: Path, class_name: str) -> list[tuple[str, str, str, str]]:
    """``(name, type, default, doc)`` for each annotated field of ``class_name`` in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None:
        raise PluginError(f"设置表：{path} 里没有类 {class_name}")
    constants = _constants(tree)
    for node in tree.body:  # constants imported from other liyuan modules, one level deep
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("liyuan"):
            source = ROOT / Path(*(node.module or "").split(".")).with_suffix(".py")
            if source.is_file():
                theirs = _constants(ast.parse(source.read_text(encoding="utf-8")))
                constants.update({a.asname or a.name: theirs[a.name] for a in node.names if a.name in theirs})
    rows: list[tuple[str, str, str, str]] = []
    body = cls.body
    for index, node in enumerate(body):
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        doc = ""
        following = body[index + 1] if index + 1 < len(body) else None
        if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant) \
                and isinstance(following.value.value, str):
            doc = " ".join(following.value.value.split())
        default = _default(node.value)
        if node.value is not None and isinstance(node.value, ast.Name) and node.value.id in constants:
            default = f"{ast.unparse(constants[node.value.id])}（{node.value.id}）"
        rows.append((node.target.id, ast.unparse(node.annotation), default, doc))
    return rows


def settings_table(path: Path, class_name: str) -> str:
    """The Markdown list for one settings dataclass: a table would not fit a phone's column.

    Raises:
        PluginError: a field has no Chinese description in the module's ``DESCRIPTIONS_ZH``.
    """
    zh = descriptions_zh(path)
    lines = []
    for name, kind, default, doc in settings_rows(path, class_name):
        chinese = zh.get(f"{class_name}.{name}")
        if not chinese:
            raise PluginError(f"设置表：{path.name} 的 DESCRIPTIONS_ZH 里没有 {class_name}.{name} 的中文说明")
        english = f'  \n  <span class="setting-en" lang="en">{_markdown(doc)}</span>' if doc else ""
        lines.append(f"- **`{name}`**：`{kind}`，默认 `{default}`  \n  {chinese}{english}")
    return "\n".join(lines)


def on_page_markdown(markdown: str, **_kwargs: Any) -> str:
    def replace(match: re.Match[str]) -> str:
        path = ROOT / match.group("path")
        if not path.is_file():
            raise PluginError(f"设置表：找不到 {match.group('path')}")
        return settings_table(path, match.group("cls"))

    return _MARKER.sub(replace, markdown)
