"""A long session file leaves its entries in the collector's oldest generation (issue 36).

The loader pauses the cyclic collector while it makes one object per entry. Left at that,
every entry sat in the youngest generation and the collector walked them all three times
in the first moments after the open (young to middle, middle to old, then a full pass):
about a quarter of a second at 100,000 turns, inside the first ``prepare()``. A long open
now ends with one full collection, made while the collector is still paused, and a short
one (below ``_SETTLE_AFTER`` entries) makes none.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

from liyuan.session.entries import SESSION_VERSION
from liyuan.session.loader import _SETTLE_AFTER, read_session_file


def _session(path: Path, entries: int) -> Path:
    lines = [json.dumps({"type": "session", "version": SESSION_VERSION, "id": "s", "timestamp": "t"})]
    parent = None
    for n in range(entries):
        role = "user" if n % 2 == 0 else "assistant"
        lines.append(json.dumps({"id": f"e{n}", "parentId": parent, "type": "message", "timestamp": "t",
                                 "role": role, "text": f"第{n}句"}, ensure_ascii=False))
        parent = f"e{n}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def test_a_long_open_leaves_no_entry_in_the_young_generation(tmp_path: Path) -> None:
    path = _session(tmp_path / "long.jsonl", _SETTLE_AFTER + 5_000)
    before = _full_collections()
    content = read_session_file(path)
    young = gc.get_count()[0]
    assert len(content.entries) == _SETTLE_AFTER + 5_000
    assert gc.isenabled()
    assert _full_collections() == before + 1
    assert young < 1_000, f"{young} objects left in the youngest generation"


def test_a_short_open_makes_no_full_collection(tmp_path: Path) -> None:
    path = _session(tmp_path / "short.jsonl", 500)
    before = _full_collections()
    read_session_file(path)
    assert gc.isenabled()
    assert _full_collections() == before
