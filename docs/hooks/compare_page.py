"""MkDocs hook: the 「模型对比」 page, generated at build time from every run folder.

Invariant: the page lists exactly the folders that exist when the site is built: the
scripted run (``sim/``) and every ``sim/runs/<model>/`` with an ``out/`` folder; nobody
keeps a list of runs. Each run is labelled from its own ``run.json`` (the scripted one as
hand-written), so a plumbing run is named as such on the page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["MARKER", "build", "on_page_markdown"]

MARKER = "<!-- compare:runs -->"
"""Where the generated comparison goes in ``docs/compare.md``."""


def _intro(runs: list[Any]) -> list[str]:
    recorded = [r for r in runs if r.info]
    if not recorded:
        return ['!!! info "sim/runs/ 里还没有录制"', "",
                "    现在只有脚本回复（人工撰写的示范）。照上面的命令录一次，重新构建，这里就多出一列。", ""]
    if all(r.plumbing for r in recorded):
        names = "、".join(f"`{r.path}`" for r in recorded)
        return ['!!! warning "目前只有管线演示，不是质量证据"', "",
                f"    {names} 是一次管线演示（plumbing run）：小基础模型经真实的 HTTP 路径回答，"
                "只证明这条路走得通，它的回复和分数不代表任何摘要质量。", "",
                "    要看真正的模型，照上面的命令录你自己的端点，重新构建。", ""]
    return []


def build(root: Path) -> str:
    """The generated part of the page, from every run folder under ``root``."""
    from harness.compare import compare_markdown, load_run, run_folders

    runs = [load_run(folder, root) for folder in run_folders(root)]
    return "\n".join(_intro(runs)) + "\n" + compare_markdown(runs, site=True)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace :data:`MARKER` with the comparison of every run folder."""
    if MARKER not in markdown:
        return markdown
    root = Path(config["config_file_path"]).resolve().parent
    return markdown.replace(MARKER, build(root))
