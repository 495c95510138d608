"""One home per name: no name is listed in the ``__all__`` of two modules of ``liyuan``.

Read from the source with :mod:`ast`. A package's ``__init__`` re-exporting its own modules'
names is its public namespace, not a second home; two plain modules listing the same name
are (a re-export kept after a split, or two different things under one name).

:data:`COMPATIBILITY` holds at most three re-exports kept on purpose, each with its reason.
:data:`STILL_TWO_HOMES` is what was left when this test was written (issue 40, item 1): it
may only shrink. A new name with two homes fails, and so does a listed name that has one
home now (take it off the list).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIYUAN = ROOT / "liyuan"

COMPATIBILITY: dict[str, str] = {}
"""``name`` -> why two modules export it on purpose (at most three)."""

STILL_TWO_HOMES = frozenset({
    "ChatMessage", "Completion", "ModelRequest", "Role", "Usage", "require_finished", "split_reasoning",
    "usage_fields",
})
"""Names with two homes when the list was made; each one removed is a split's leftover gone."""


def homes(root: Path = LIYUAN) -> dict[str, list[str]]:
    """Every name listed in the ``__all__`` of more than one plain (non-package) module, with those modules."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.Assign):
                continue
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                for name in ast.literal_eval(node.value):
                    found[name].append(module)
    return {name: modules for name, modules in found.items() if len(modules) > 1}


def test_the_check_sees_a_name_in_two_modules(tmp_path: Path) -> None:
    package = tmp_path / "liyuan"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('__all__ = ["Card"]\n', encoding="utf-8")
    (package / "a.py").write_text('__all__ = ["Card", "write"]\n', encoding="utf-8")
    (package / "sub" / "__init__.py").write_text('__all__ = ["write"]\n', encoding="utf-8")
    (package / "sub" / "b.py").write_text('__all__ = ["write"]\n', encoding="utf-8")
    assert homes(package) == {"write": ["liyuan.a", "liyuan.sub.b"]}


def test_no_new_name_has_two_homes_and_the_old_ones_only_go() -> None:
    found = homes()
    new = {name: modules for name, modules in found.items()
           if name not in STILL_TWO_HOMES and name not in COMPATIBILITY}
    assert new == {}, f"这些名字在两个模块的 __all__ 里（只留一个家）：{new}"
    gone = sorted(STILL_TWO_HOMES - set(found))
    assert gone == [], f"这些名字已经只有一个家了，从 STILL_TWO_HOMES 里删掉：{gone}"
    assert len(COMPATIBILITY) <= 3 and all(len(why) >= 20 for why in COMPATIBILITY.values())


def test_one_atomic_write_text() -> None:
    assert "atomic_write_text" not in homes()
    defined = [path.relative_to(ROOT).as_posix() for path in sorted(LIYUAN.rglob("*.py"))
               if any(isinstance(n, ast.FunctionDef) and n.name == "atomic_write_text"
                      for n in ast.parse(path.read_text(encoding="utf-8")).body)]
    assert defined == ["liyuan/fileio.py"]
