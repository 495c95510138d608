"""The import graph: no circle in liyuan/ or harness/, and the core never imports harness.

Edges are read from the source with :mod:`ast` (nothing is imported), at module level
and inside functions alike. A package ``__init__`` that re-exports its own submodules is
not a circle by itself; between liyuan's subpackages the imports must go one way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("liyuan", "harness")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def imported(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """Modules of ``known`` that ``path`` imports at module level or inside functions."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets.add(mod)
            targets.update(f"{mod}.{alias.name}" for alias in node.names)
    edges: set[str] = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            edges.add(target)
    return edges


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(path, name, known) for name, path in known.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``edges`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def without_own_reexports(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Drop a package's edges to its own submodules (re-exports), keep everything else."""
    return {name: {t for t in targets if not t.startswith(name + ".")} for name, targets in edges.items()}


def test_find_cycle_finds_a_planted_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(package: str) -> None:
    edges = graph()
    mine = {n: {t for t in ts if t.split(".")[0] == package} for n, ts in edges.items() if n.split(".")[0] == package}
    cycle = find_cycle(without_own_reexports(mine))
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_packages_form_layers() -> None:
    """Between liyuan's subpackages the imports go one way (a circle of packages is a circle too)."""
    edges = graph()
    packages: dict[str, set[str]] = {}
    for name, targets in edges.items():
        if not name.startswith("liyuan."):
            continue
        src = ".".join(name.split(".")[:2])
        for target in targets:
            dst = ".".join(target.split(".")[:2])
            if target.startswith("liyuan.") and dst != src:
                packages.setdefault(src, set()).add(dst)
    cycle = find_cycle(packages)
    assert cycle is None, "package circle: " + " -> ".join(cycle or [])


def test_core_never_imports_harness() -> None:
    offenders = sorted(name for name, targets in graph().items()
                       if name.split(".")[0] == "liyuan" and any(t.split(".")[0] == "harness" for t in targets))
    assert offenders == []


def test_harness_uses_no_private_name_of_liyuan() -> None:
    """The harness drives liyuan as an app would: no ``_private`` names of the library."""
    offenders: list[str] = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("liyuan"):
                offenders += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
                offenders += [f"{path.relative_to(ROOT)}: {node.module}" for part in (node.module or "").split(".")
                              if part.startswith("_")]
    assert offenders == []


MAX_MODULE_LINES = 400
"""The budget of one module. A module past it gets split, unless it is named below."""

OVER_BUDGET: dict[str, tuple[int, str]] = {
    "liyuan.app.card": (480, "the facade an app reads top to bottom: opening (one storage object), chats, sync, "
                              "the history-bound and storage checks, lifecycle in one class; a chat it opens is "
                              "handed its pins, its clock and the edit hold-back of the resident summary (issue 38)"),
    "liyuan.app.chat": (445, "edit and delete (issue 38) are two public methods of the chat an app holds, each a "
                             "thin call into liyuan.app.edits; hiding them behind a mixin would scatter the facade"),
    "liyuan.vector.memory": (460, "one class owns the store's write path (checked embedding, eviction notices, "
                                  "archive batches); a split would pass its private state around"),
}
"""Named exceptions to the budget (issue 21): the ceiling each may not pass, and why a split hurts more."""


def test_no_module_is_over_its_line_budget() -> None:
    """Small modules that each do one thing; past the budget a module is split or named in OVER_BUDGET."""
    lines = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()}
    over = {name: n for name, n in lines.items() if n > OVER_BUDGET.get(name, (MAX_MODULE_LINES, ""))[0]}
    assert over == {}
    stale = sorted(name for name in OVER_BUDGET if lines.get(name, 0) <= MAX_MODULE_LINES)
    assert stale == [], "back under the budget: take it off the list"


def test_only_the_lore_store_reads_yaml_and_the_wheel_ships_liyuan_alone() -> None:
    """YAML in the library is the lore book's file format (``设定集.yaml``, edited by hand),
    read and written in one module; everything else YAML is the harness's (extra ``harness``).
    The wheel holds liyuan only."""
    import tomllib

    readers = sorted(name for name, path in modules().items() if name.split(".")[0] == "liyuan"
                     for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                     if (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "yaml" for a in node.names))
                     or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "yaml"))
    assert readers == ["liyuan.lore.store"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert any(dep.lower().startswith("pyyaml") for dep in project["project"]["dependencies"])
    assert any(dep.lower().startswith("pyyaml") for dep in project["project"]["optional-dependencies"]["harness"])
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["liyuan*"]
