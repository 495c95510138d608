"""Whether the browser test may run, and what happens when it cannot: never a quiet skip."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")


def require_chromium(path: Path, environ: Mapping[str, str]) -> None:
    """Return when ``path`` exists; otherwise fail under CI (``CI`` set and not ``false``/``0``)
    and skip with a message saying what did not run and how to get it everywhere else."""
    if path.exists():
        return
    reason = (f"没有找到 Chromium（{path}）：浏览器测试（整站在无头浏览器里的检查）没有运行。"
              "装上 Debian 的 chromium 包（apt-get install chromium，.ci/run 会装）就会跑")
    if environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{reason}；CI={environ['CI']}，这里不许跳过", pytrace=False)
    pytest.skip(reason, allow_module_level=True)
