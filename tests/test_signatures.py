"""One settings object (issue 40): no public callable of liyuan takes more than 8 parameters
besides the settings it reads.

Every public module of ``liyuan`` (no part of its name starts with ``_``) is imported and
each public name it defines is measured with :func:`inspect.signature`: functions, the
``__init__`` of classes and their public methods. ``self``/``cls`` do not count, nor does
a parameter annotated with one of the settings types (:data:`SETTINGS`): a setting added
there reaches every function that reads them without touching a signature.

Records are not measured: a dataclass's generated ``__init__`` lists its fields (a
:class:`~liyuan.config.MemoryConfig` has one per setting); what is measured is code that
takes its inputs as arguments.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import liyuan

if TYPE_CHECKING:
    from liyuan.config import MemoryConfig

MAX_PARAMETERS = 8

SETTINGS = ("MemoryConfig", "VectorConfig", "CompactionSettings", "SyncSettings", "TurnSettings")
"""The settings types (annotations are strings: ``from __future__ import annotations``)."""


def public_modules() -> Iterator[str]:
    yield "liyuan"
    for info in pkgutil.walk_packages(liyuan.__path__, "liyuan."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            yield info.name


def counted(fn: Callable[..., Any]) -> int:
    """Parameters of ``fn`` besides ``self``/``cls`` and one annotated with a settings type."""
    params = list(inspect.signature(fn).parameters.values())
    return sum(1 for p in params
               if p.name not in ("self", "cls")
               and not any(str(p.annotation).split("|")[0].strip() == name for name in SETTINGS))


def callables(module_name: str) -> Iterator[tuple[str, Callable[..., Any]]]:
    module = importlib.import_module(module_name)
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module_name:
            continue
        if inspect.isfunction(obj):
            yield f"{module_name}.{name}", obj
        elif inspect.isclass(obj):
            if not dataclasses.is_dataclass(obj) and "__init__" in vars(obj):
                yield f"{module_name}.{name}.__init__", vars(obj)["__init__"]
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if isinstance(member, staticmethod | classmethod):
                    member = member.__func__
                if inspect.isfunction(member):
                    yield f"{module_name}.{name}.{attr}", member


def too_many(limit: int = MAX_PARAMETERS) -> dict[str, int]:
    return {name: n for module in public_modules() for name, fn in callables(module)
            if (n := counted(fn)) > limit}


def test_counting_sees_a_long_signature_and_skips_the_settings() -> None:
    def long(a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int, i: int) -> None: ...

    def settled(a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int, config: MemoryConfig) -> None: ...

    assert counted(long) == 9
    assert counted(settled) == 8


def test_the_walk_finds_the_facade() -> None:
    names = {name for module in public_modules() for name, _ in callables(module)}
    assert {"liyuan.app.card.Card.__init__", "liyuan.app.chat.Chat.prepare",
            "liyuan.story.compact.run_compaction"} <= names


def test_no_public_callable_takes_more_than_eight_parameters_besides_the_settings() -> None:
    assert too_many() == {}


if __name__ == "__main__":  # pragma: no cover
    for name, n in sorted(too_many().items()):
        print(n, name)

