"""What each package exports: what an app needs, nothing else (issue 21, item 4).

In the manner of httpx's ``test_exported_members``: the public names a package
``__init__`` binds are exactly its ``__all__``, so a name cannot become public by
accident, and a name dropped from ``__all__`` cannot stay reachable by habit. Read from
the source with :mod:`ast` (the vector package imports its names lazily, on first use).
Everything else lives in the package's modules, which the harness and the tests import
by their full path.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "card", "context", "discussion", "lore", "prompts", "session", "storage", "story", "vector")
BEFORE = 242
"""Names the facade and the package ``__init__`` files exported when issue 21 was filed."""


def bound_names(path: Path, *, imports: bool = True) -> set[str]:
    """Public names a module binds at its top level (imports, definitions, assignments).

    Imports inside ``if TYPE_CHECKING:`` count (they declare the lazy names); ``from
    __future__`` does not, nor a name bound with a leading underscore.
    """
    names: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = list(tree.body)
    for node in tree.body:
        if isinstance(node, ast.If):
            nodes += node.body
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__" and imports:
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import) and imports:
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def exported(name: str) -> list[str]:
    return [n for n in importlib.import_module(name).__all__ if n != "__version__"]


@pytest.mark.parametrize("package", ["", *PACKAGES])
def test_a_package_binds_exactly_what_it_exports(package: str) -> None:
    name = f"liyuan.{package}" if package else "liyuan"
    path = ROOT / "liyuan" / package / "__init__.py"
    module = importlib.import_module(name)
    # prompts is a module of its own code: what it imports to work with is not its surface
    bound = bound_names(path, imports=package != "prompts")
    if package == "vector":  # the lazy package: what it needs to load a name is not its surface
        bound -= {"importlib", "TYPE_CHECKING", "Any", "ConfigError"}
        assert set(module._HOMES) == set(module.__all__)
    assert sorted(bound) == sorted(exported(name)), name
    for member in module.__all__:
        assert getattr(module, member) is not None, member  # every export resolves (lazy ones load)
    assert module.__all__ == sorted(module.__all__, key=lambda n: (not n.isupper(), n)), "sorted as ruff sorts"


def test_the_facade_and_the_packages_export_at_most_half_of_what_they_did() -> None:
    total = sum(len(exported(f"liyuan.{p}" if p else "liyuan")) for p in ("", *PACKAGES))
    assert total <= BEFORE // 2, total


def test_what_a_package_exports_is_defined_in_it() -> None:
    # A package re-exports its own modules' names; the facade re-exports the packages'.
    for package in PACKAGES:
        module = importlib.import_module(f"liyuan.{package}")
        for member in module.__all__:
            home = getattr(getattr(module, member), "__module__", None) or ""
            if home.startswith("liyuan"):  # a constant or a typing alias has no liyuan home
                assert home.startswith(f"liyuan.{package}"), (package, member, home)
