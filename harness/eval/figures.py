"""Markdown of the measurement snapshots the site quotes (long series, stores, recall latency)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..bench.stamp import stamp_line

__all__ = ["latency_markdown", "long_markdown", "stores_markdown"]


def long_markdown(data: Mapping[str, Any]) -> str:
    return stamp_line(data["machine"]) + "\n"


def stores_markdown(data: Mapping[str, Any]) -> str:
    return stamp_line(data["machine"]) + "\n"


def latency_markdown(data: Mapping[str, Any]) -> str:
    return stamp_line(data["machine"]) + "\n"
