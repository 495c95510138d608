"""Committed measurement snapshots: the only source of the figures the site quotes.

A snapshot is a pair in ``sim/eval/``: ``<name>.json``, the measurement with its stamp
(``machine``: commit, time, machine, load; :mod:`harness.bench.stamp`), and ``<name>.md``,
the tables the pages include, rendered from that JSON alone with the stamp on top.

- ``bench``: the per-turn overhead and wall times (``python -m harness eval bench``).
- ``long``, ``stores``, ``latency``, ``recall``, ``fusion``, ``context``:
  ``python -m harness bench --only <name> --snapshot`` (``recall``, ``fusion`` and ``context``
  are deterministic for a given code and model, stamped all the same).
- ``public``: recall on two public sets that chose nothing (``python -m harness eval public
  --locomo PATH --madial PATH``, :mod:`harness.eval.public`); the data is not in the
  repository, so this snapshot is re-rendered by CI but only re-measured where the data is.

Invariant: ``<name>.md`` is :func:`render` of ``<name>.json``, byte for byte;
``python -m harness eval`` re-renders every snapshot and ``--check`` fails when one differs,
so a page that includes the Markdown cannot disagree with the measurement.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["SNAPSHOTS", "render", "snapshot_files", "write_snapshot"]

EVAL_DIR = "sim/eval"


def _renderers() -> dict[str, Callable[[Mapping[str, Any]], str]]:
    from .figures import (
        context_markdown,
        fusion_markdown,
        latency_markdown,
        long_markdown,
        recall_markdown,
        stores_markdown,
    )
    from .public_report import public_markdown
    from .report import bench_markdown

    return {"bench": bench_markdown, "long": long_markdown, "stores": stores_markdown,
            "latency": latency_markdown, "recall": recall_markdown, "fusion": fusion_markdown,
            "context": context_markdown, "public": public_markdown}


SNAPSHOTS = ("bench", "long", "stores", "latency", "recall", "fusion", "context", "public")
"""Every snapshot name, in the order the pages use them."""


def render(name: str, data: Mapping[str, Any]) -> str:
    """The Markdown of snapshot ``name``: the stamp line, then its tables and verdicts."""
    return _renderers()[name](data)


def _json(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def write_snapshot(root: Path, name: str, data: Mapping[str, Any], folder: Path | None = None) -> None:
    """Write ``<name>.json`` and its rendering ``<name>.md`` into ``folder`` (default ``sim/eval/``),
    atomically."""
    from ..running.artifacts import atomic_write

    if "machine" not in data:
        raise ValueError(f"快照 {name} 没有测量戳（machine）")
    folder = root / EVAL_DIR if folder is None else folder
    for path, text in ((folder / f"{name}.json", _json(data)), (folder / f"{name}.md", render(name, data))):
        atomic_write(path, text.encode("utf-8"))
        print(f"写出 {path.as_posix()}")


def snapshot_files(root: Path) -> dict[str, str]:
    """Every committed snapshot's Markdown, re-rendered from its JSON: ``{relative path: text}``."""
    files = {}
    for name in SNAPSHOTS:
        source = root / EVAL_DIR / f"{name}.json"
        if source.exists():
            files[f"{EVAL_DIR}/{name}.md"] = render(name, json.loads(source.read_text(encoding="utf-8")))
    return files
