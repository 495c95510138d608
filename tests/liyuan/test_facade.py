"""The public surface: what `import liyuan` exports is complete, sorted and documented."""

from __future__ import annotations

import inspect

import pytest

import liyuan
from liyuan import ConfigError, MemoryConfig, VectorConfig

PUBLIC = [name for name in liyuan.__all__ if name != "__version__"]


def test_all_is_sorted_and_every_name_exists() -> None:
    assert liyuan.__all__ == sorted(liyuan.__all__, key=lambda n: (n.startswith("_"), n))
    for name in liyuan.__all__:
        assert hasattr(liyuan, name), name


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_and_its_public_methods_have_docstrings(name: str) -> None:
    obj = getattr(liyuan, name)
    assert inspect.getdoc(obj), f"{name} has no docstring"
    if inspect.isclass(obj) and not issubclass(obj, BaseException):
        for attr, member in vars(obj).items():
            if attr.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property | classmethod)):
                continue
            target = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            assert inspect.getdoc(target), f"{name}.{attr} has no docstring"


def test_every_error_derives_from_the_one_base() -> None:
    errors = [getattr(liyuan, n) for n in PUBLIC if inspect.isclass(getattr(liyuan, n))
              and issubclass(getattr(liyuan, n), BaseException)]
    assert len(errors) == 17  # LoreError and CardImportError joined with the lore layer, StateError with issue 21,
    # the storage family (StorageError, its four kinds, CardIncomplete) with issue 34
    assert all(issubclass(e, liyuan.LiyuanError) for e in errors)


@pytest.mark.parametrize(("changes", "field"), [
    ({"keep": 0}, "keep"),
    ({"keep": True}, "keep"),
    ({"every_n_turns": -1}, "every_n_turns"),
    ({"min_chars": 1.5}, "min_chars"),
    ({"budget_chars": -1}, "budget_chars"),
    ({"language": ""}, "language"),
    ({"recall_timeout_s": 0}, "recall_timeout_s"),
    ({"recall_timeout_s": float("nan")}, "recall_timeout_s"),
    ({"discussion_window": 1000}, "discussion_window"),
    ({"vector": {"enabled": True}}, "vector"),
])
def test_bad_settings_are_refused_naming_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        MemoryConfig(**changes)  # type: ignore[arg-type]


def test_defaults_are_the_seeds() -> None:
    config = MemoryConfig()
    assert (config.keep, config.every_n_turns, config.min_chars, config.budget_chars) == (6, 30, 2000, 4300)
    assert config.vector.enabled is False and config.recall_timeout_s == 5 and config.discussion_window == 0


def test_settings_from_a_mapping_refuse_unknown_keys_and_read_nested_vector_settings() -> None:
    config = MemoryConfig.from_dict({"keep": 4, "vector": {"enabled": True, "embedder": "hash"}})
    assert config.keep == 4 and config.vector == VectorConfig(enabled=True, embedder="hash")
    with pytest.raises(ConfigError, match="kep"):
        MemoryConfig.from_dict({"kep": 4})
    with pytest.raises(ConfigError):
        MemoryConfig.from_dict({"vector": {"embedder": "nope"}})
