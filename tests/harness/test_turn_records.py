"""Every committed turn record (sim/turns/) is whole: its blocks add up to the turn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from liyuan.context.record import BLOCK_TITLES, RECORD_FORMAT

ROOT = Path(__file__).resolve().parents[2]


def _records(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        if str(value.get("format", "")).startswith("liyuan-turn-record/"):
            yield value
        for item in value.values():
            yield from _records(item)
    elif isinstance(value, list):
        for item in value:
            yield from _records(item)


def test_every_committed_turn_record_adds_up() -> None:
    records = [r for path in sorted((ROOT / "sim" / "turns").glob("*.json"))
               for r in _records(json.loads(path.read_text(encoding="utf-8")))]
    assert len(records) >= 100
    for record in records:
        assert record["format"] == RECORD_FORMAT
        blocks = record["blocks"]
        assert record["chars"] == sum(b["chars"] for b in blocks), record
        assert record["tokens"] == sum(b["tokens"] for b in blocks), record
        assert [b["kind"] for b in blocks].count("framing") == 1
        assert all(b["kind"] in BLOCK_TITLES for b in blocks)
