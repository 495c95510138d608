"""Tool-side access to the vector memory (``memory_search`` / ``memory_read``).

Invariant: a tool call never raises into the agent. Its result says which of three
things happened, so an agent can tell them apart: the memory is off (``disabled``),
the search worked and found nothing (``ok`` with no hits), or something broke
(``is_error``). Reading an unknown or off-branch reference is an error, not an empty
text.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from liyuan.errors import LiyuanError
from liyuan.vector.memory import SEARCH_TOOL_TOP, VectorMemory
from liyuan.vector.results import SearchReport

__all__ = ["ToolResult", "read_tool", "search_tool"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call returns to the agent."""

    text: str
    is_error: bool = False
    report: SearchReport | None = None


_STATUS = {"ok": "正常", "disabled": "已停用", "error": "出错"}


def search_tool(memory: VectorMemory, query: str, *, branch_ids: Collection[str] | None,
                top_k: int = SEARCH_TOOL_TOP) -> ToolResult:
    """Search every store; report each store's status and the hits with references."""
    if not query.strip():
        return ToolResult("检索词为空", is_error=True)
    report = memory.search_report(query, branch_ids=branch_ids, top_k=top_k)
    names = {sid: memory.config.stores[sid].name for sid in report.status}
    lines = [f"{names[sid]}：{_STATUS[st]}" + (f"（{report.errors[sid]}）" if sid in report.errors else "")
             for sid, st in report.status.items()]
    if report.hits:
        lines.append("")
        lines += [f"[{hit.ref}] 【{hit.title}】{hit.text.strip()}" for hit in report.hits]
    elif all(st == "ok" for st in report.status.values()):
        lines.append("没有找到相关记忆")
    broken = any(st == "error" for st in report.status.values())
    return ToolResult("\n".join(lines), is_error=broken, report=report)


def read_tool(memory: VectorMemory, ref: str, *, branch_ids: Collection[str] | None) -> ToolResult:
    """The full text behind a reference from :func:`search_tool`."""
    try:
        text = memory.read_chunk(ref, branch_ids)
    except LiyuanError as exc:
        return ToolResult(str(exc), is_error=True)
    if text is None:
        return ToolResult(f"找不到这条记忆（{ref}），或它属于已离开的分支", is_error=True)
    return ToolResult(text)
