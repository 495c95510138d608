"""One home per name: every name of ``liyuan`` is defined and exported in one module.

Read from the source with :mod:`ast` (issue 40, item 1):

- no name is listed in the ``__all__`` of two plain modules; a package's ``__init__``
  re-exporting its own modules' names is its public namespace, not a second home;
- a plain module's ``__all__`` lists only what it defines (so a re-export of a name whose
  home is a package ``__init__`` counts too);
- an import names a module that defines or exports the name, in ``tests`` and ``docs`` as
  well (mypy refuses the rest);
- no public class or function is defined twice (a protocol named like the class it
  describes, or a copied helper).

A private module (``liyuan/_completion.py``: a name part starting with ``_``) is no home
either: its names are defined there and exported by the one public module beside it that
re-exports them (as httpx keeps ``_models.py`` behind ``httpx``). Only the modules of its own
package import it, so "what may I import" has one answer.

:data:`COMPATIBILITY` holds at most three re-exports kept on purpose, each with its reason
(none today).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIYUAN = ROOT / "liyuan"
IMPORTERS = ("liyuan", "harness", "tests", "examples", "docs")

COMPATIBILITY: dict[str, str] = {}
"""``name`` -> why two modules export it on purpose (at most three)."""


def _module(path: Path, base: Path) -> str:
    return ".".join(path.relative_to(base).with_suffix("").parts)


def _private(module: str) -> bool:
    return any(part.startswith("_") and part != "__init__" for part in module.split("."))


def homes(root: Path = LIYUAN) -> dict[str, list[str]]:
    """Every name listed in the ``__all__`` of more than one public plain (non-package) module."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        module = _module(path, root.parent)
        if path.name == "__init__.py" or _private(module):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.Assign):
                continue
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                for name in ast.literal_eval(node.value):
                    found[name].append(module)
    return {name: modules for name, modules in found.items() if len(modules) > 1}


def borrowed(root: Path = LIYUAN) -> dict[str, list[str]]:
    """Names a public plain module lists in ``__all__`` but imports, each as ``name <- source``.

    A re-export from a private module of the same package is how that module's names get their
    one public home (``liyuan.model`` <- ``liyuan._completion``) and is left out; any other
    re-export is a second home, even when the first is a package's ``__init__`` (which
    :func:`homes` does not count).
    """
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = _module(path, root.parent)
        if path.name == "__init__.py" or _private(module):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        sources = {alias.asname or alias.name: node.module or "" for node in ast.walk(tree)
                   if isinstance(node, ast.ImportFrom) for alias in node.names}
        listed = [name for node in tree.body if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
                  for name in ast.literal_eval(node.value)]
        package = module.rpartition(".")[0]
        odd = [f"{name} <- {sources[name]}" for name in listed if name in sources
               and not (_private(sources[name]) and sources[name].rpartition(".")[0] == package)]
        if odd:
            found[module] = odd
    return found


def private_imports(root: Path = ROOT, dirs: tuple[str, ...] = IMPORTERS) -> list[str]:
    """Imports of a private ``liyuan`` module from outside the package that holds it."""
    offenders: list[str] = []
    for folder in dirs:
        for path in sorted((root / folder).rglob("*.py")):
            package = _module(path, root).rpartition(".")[0]
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                targets: list[str] = []
                if isinstance(node, ast.Import):
                    targets = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names
                                              if (root / node.module.replace(".", "/") / f"{a.name}.py").exists())]
                offenders += [f"{path.relative_to(root).as_posix()}: {target}" for target in targets
                              if target.split(".")[0] == "liyuan" and _private(target)
                              and target.rpartition(".")[0] != package]
    return offenders


def reached_through(root: Path = ROOT, dirs: tuple[str, ...] = IMPORTERS) -> list[str]:
    """``from liyuan.x import name`` where ``liyuan.x`` neither defines ``name`` nor lists it in ``__all__``.

    mypy (strict, no implicit re-export) refuses these in ``liyuan``, ``harness`` and
    ``examples``; this also reads ``tests`` and ``docs``, which mypy does not check.
    """
    offered: dict[str, set[str]] = {}
    for path in sorted((root / "liyuan").rglob("*.py")):
        module = _module(path, root).removesuffix(".__init__")
        names: set[str] = {_module(sub, root).removesuffix(".__init__").rpartition(".")[2]
                           for sub in path.parent.glob("*") if path.name == "__init__.py"
                           and (sub.suffix == ".py" or (sub / "__init__.py").exists())}
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
                if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value:
                    names.update(ast.literal_eval(node.value))
        offered[module] = names
    found: list[str] = []
    for folder in dirs:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and not node.level and node.module in offered:
                    found += [f"{path.relative_to(root).as_posix()}: {node.module}.{alias.name}"
                              for alias in node.names if alias.name not in offered[node.module]]
    return found


def definitions(root: Path = LIYUAN) -> dict[str, list[str]]:
    """Public classes and functions defined at the top of more than one module."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) \
                    and not node.name.startswith("_"):
                found[node.name].append(_module(path, root.parent))
    return {name: modules for name, modules in found.items() if len(modules) > 1}


def test_the_checks_see_a_second_home(tmp_path: Path) -> None:
    package = tmp_path / "liyuan"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": '__all__ = ["Card"]\n',
        "a.py": '__all__ = ["write"]\nclass Files: ...\n',
        "_impl.py": '__all__ = ["Card", "Impl"]\n',
        "c.py": '__all__ = ["Files", "Impl"]\nfrom liyuan._impl import Impl\nfrom liyuan.a import Files\n',
        "sub/__init__.py": '__all__ = ["write"]\n',
        "sub/b.py": ('__all__ = ["Card", "write"]\nfrom liyuan._impl import Card\nfrom liyuan import _impl\n'
                     "class Files: ...\n"),
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    assert homes(package) == {"write": ["liyuan.a", "liyuan.sub.b"]}
    assert borrowed(package) == {"liyuan.c": ["Files <- liyuan.a"], "liyuan.sub.b": ["Card <- liyuan._impl"]}
    assert private_imports(tmp_path, ("liyuan",)) == ["liyuan/sub/b.py: liyuan._impl"] * 2
    assert definitions(package) == {"Files": ["liyuan.a", "liyuan.sub.b"]}
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("from liyuan.c import Files, Impl\nfrom liyuan.a import Files\n"
                                             "from liyuan.sub import b, write\nfrom liyuan.a import Card\n",
                                             encoding="utf-8")
    assert reached_through(tmp_path, ("tests",)) == ["tests/t.py: liyuan.a.Card"]


def test_no_name_has_two_homes() -> None:
    found = homes()
    assert {name: modules for name, modules in found.items() if name not in COMPATIBILITY} == {}, \
        "这些名字在两个模块的 __all__ 里（只留一个家）"
    assert sorted(COMPATIBILITY) == sorted(name for name in COMPATIBILITY if name in found), \
        "兼容名单里的名字已经只有一个家了，从名单里删掉"
    assert len(COMPATIBILITY) <= 3 and all(len(why) >= 20 for why in COMPATIBILITY.values())


def test_a_module_exports_only_what_it_defines() -> None:
    assert {module: names for module, names in borrowed().items()
            if any(name.partition(" ")[0] not in COMPATIBILITY for name in names)} == {}


def test_a_private_module_is_imported_only_beside_it() -> None:
    assert private_imports() == []


def test_every_import_names_a_home_or_a_public_namespace() -> None:
    assert reached_through() == []


def test_no_two_classes_or_functions_share_a_public_name() -> None:
    """A protocol named like the class it describes, or a second copy of a helper, reads as one thing."""
    assert definitions() == {}


def test_one_atomic_write_text() -> None:
    assert "atomic_write_text" not in homes()
    defined = [path.relative_to(ROOT).as_posix() for path in sorted(LIYUAN.rglob("*.py"))
               if any(isinstance(n, ast.FunctionDef) and n.name == "atomic_write_text"
                      for n in ast.parse(path.read_text(encoding="utf-8")).body)]
    assert defined == ["liyuan/fileio.py"]
