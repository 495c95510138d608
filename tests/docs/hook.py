"""Load MkDocs hook modules (docs/hooks/ is not a package) for the docs tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
"""Repository root (the snippet base path)."""


def load_hook(name: str = "snippet_titles") -> ModuleType:
    """Import ``docs/hooks/<name>.py`` once, under its own module name."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look the module up while the class is created
    spec.loader.exec_module(module)
    return module
