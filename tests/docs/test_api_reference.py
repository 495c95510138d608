"""The API reference shows every public name of the facade and every public package."""

from __future__ import annotations

import re
from pathlib import Path

import liyuan

PACKAGES = ("session", "story", "context", "lore", "card", "vector", "discussion")


def anchors(page: Path) -> set[str]:
    return set(re.findall(r'id="(liyuan[A-Za-z0-9_.]*)"', page.read_text(encoding="utf-8")))


def test_every_public_name_of_the_facade_has_an_entry(built_site: Path) -> None:
    found = anchors(built_site / "api" / "index.html")
    missing = [n for n in liyuan.__all__ if n != "__version__" and f"liyuan.{n}" not in found]
    assert missing == []


def test_every_package_page_documents_what_the_package_exports(built_site: Path) -> None:
    import importlib

    for name in PACKAGES:
        module = importlib.import_module(f"liyuan.{name}")
        found = anchors(built_site / "api" / name / "index.html")
        missing = [n for n in module.__all__ if f"liyuan.{name}.{n}" not in found]
        assert missing == [], (name, missing)


def test_the_settings_page_has_a_row_for_every_field_with_its_real_default(built_site: Path) -> None:
    from dataclasses import MISSING, fields

    from liyuan import MemoryConfig, VectorConfig

    html = (built_site / "settings" / "index.html").read_text(encoding="utf-8")
    for cls in (MemoryConfig, VectorConfig):
        for f in fields(cls):
            assert f"<code>{f.name}</code>" in html, (cls.__name__, f.name)
    for f in fields(MemoryConfig):
        if f.default is not MISSING and isinstance(f.default, int | float):
            assert re.search(rf"<code>{f.name}</code></strong>：<code>[^<]*</code>，默认 <code>{f.default}\b",
                             html), f.name
