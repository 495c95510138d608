"""The library's tests stand on the library alone: nothing under tests/liyuan reaches the harness.

``nox -s libtests`` runs these tests on 3.12 and 3.13 against the installed package, which
ships ``liyuan`` only. Read from the source with :mod:`ast`: every import of a file under
``tests/liyuan`` (and of ``tests/conftest.py``, which pytest loads for them) is followed
through the test helpers it imports (``tests.…``, relative imports), and none may be
``harness`` or a module of it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def _module_file(module: str, root: Path) -> Path | None:
    """The file of a ``tests.…`` module, or ``None`` when it is not one."""
    if module != "tests" and not module.startswith("tests."):
        return None
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path, root: Path) -> list[tuple[str, list[str]]]:
    """Every module ``path`` imports (relative imports resolved), each with the names taken from it."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[:len(parts) - node.level + 1])
                module = f"{anchor}.{node.module}" if node.module else anchor
            else:
                module = node.module or ""
            found.append((module, [a.name for a in node.names]))
    return found


def harness_reached(start: Path, root: Path = ROOT) -> list[str]:
    """The import chains from ``start`` (a file under ``root``) that end in ``harness`` (empty: none)."""
    chains: list[str] = []
    seen: set[Path] = set()
    stack: list[tuple[Path, str]] = [(start, start.relative_to(root).as_posix())]
    while stack:
        path, chain = stack.pop()
        if path in seen:
            continue
        seen.add(path)
        for module, names in _imports(path, root):
            if module == "harness" or module.startswith("harness."):
                chains.append(f"{chain} → {module}")
            # ``from tests.x import helper`` may take a module, not a name
            for target in (module, *(f"{module}.{name}" for name in names)):
                helper = _module_file(target, root)
                if helper is not None and helper not in seen:
                    stack.append((helper, f"{chain} → {target}"))
    return chains


def test_the_check_follows_a_helper_to_the_harness(tmp_path: Path) -> None:
    lib = tmp_path / "tests" / "liyuan"
    lib.mkdir(parents=True)
    (lib / "helper.py").write_text("import json\nfrom harness.bench import latency\n", encoding="utf-8")
    (lib / "other.py").write_text("from liyuan import Card\n", encoding="utf-8")
    (lib / "test_a.py").write_text("from .other import Card\nfrom . import helper\n", encoding="utf-8")
    (lib / "test_b.py").write_text("from tests.liyuan.other import Card\n", encoding="utf-8")
    assert harness_reached(lib / "test_a.py", tmp_path) == [
        "tests/liyuan/test_a.py → tests.liyuan.helper → harness.bench"]
    assert harness_reached(lib / "test_b.py", tmp_path) == []


def test_no_library_test_imports_the_harness() -> None:
    files = [TESTS / "conftest.py", *sorted((TESTS / "liyuan").rglob("*.py"))]
    reached = [chain for path in files for chain in harness_reached(path)]
    assert reached == [], f"tests/liyuan 要只靠库本身（libtests 装的包里没有 harness）：{reached}"
