"""A page that cites a test as its evidence cites one that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_a_page_cites_is_defined() -> None:
    defined = {m.group(1) for path in (ROOT / "tests").rglob("test_*.py")
               for m in re.finditer(r"^def (test_\w+)", path.read_text(encoding="utf-8"), re.M)}
    cited = {(page.name, name) for page in (ROOT / "docs").glob("*.md")
             for name in re.findall(r"`(test_\w+)`", page.read_text(encoding="utf-8"))}
    assert cited, "the pages cite tests (docs/app.md#errors)"
    assert sorted(c for c in cited if c[1] not in defined) == []
