"""The vector-memory config file refuses what it does not know (issues 26 item 10, 28 item 1).

Before: ``load_config`` ignored unknown keys (``{"enabeld": true}`` gave a disabled
config with no error, while ``MemoryConfig.from_dict`` refused them), and ``1e400`` or
``NaN`` in a count raised ``OverflowError`` / ``ValueError`` instead of ``ConfigError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from liyuan.config import MemoryConfig
from liyuan.errors import ConfigError
from liyuan.vector.config import EXTERNAL, StoreConfig, VectorConfig
from liyuan.vector.config_file import config_from_dict, load_config


@pytest.mark.parametrize(("data", "key"), [
    ({"enabeld": True}, "enabeld"),
    ({"enabled": True, "serach_top_k": 3}, "serach_top_k"),
    ({"openai": {"modle": "bge-m3"}}, "openai.modle"),
    ({"stores": {"narrative": {"every_n_turn": 1}}}, "stores.narrative.every_n_turn"),
])
def test_an_unknown_key_is_refused_and_named(tmp_path: Path, data: dict[str, object], key: str) -> None:
    path = tmp_path / "vector-memory.json"
    text = json.dumps(data)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as caught:
        load_config(path)
    assert "vector-memory.json" in str(caught.value)  # which file, too
    assert path.read_text(encoding="utf-8") == text
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        MemoryConfig.from_dict({"vector": data})


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("field", ["search_top_k", "stores.narrative.max_chunks", "stores.external.every_n_turns",
                                   "fusion_weights.e5.cjk"])
def test_a_non_finite_number_is_a_config_error(tmp_path: Path, number: str, field: str) -> None:
    *parents, leaf = field.split(".")
    text = "".join(f'{{"{p}": ' for p in parents) + f'{{"{leaf}": {number}}}' + "}" * len(parents)
    path = tmp_path / "vector-memory.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=leaf):
        load_config(path)
    with pytest.raises(ConfigError, match=leaf):
        config_from_dict(json.loads(text))  # a caller's own dict with inf/nan in it


def test_the_known_keys_still_load(tmp_path: Path) -> None:
    path = tmp_path / "vector-memory.json"
    path.write_text(json.dumps({"enabled": True, "search_top_k": 3, "inject_on_turn": False, "embedder": "hash",
                                "recall_mode": "lexical", "lexical_tokenizer": "bigram",
                                "fusion_weights": {"hash": {"cjk": 0.4}},
                                "openai": {"base_url": None, "api_key_env": "K", "model": "m", "api_key": ""},
                                "stores": {"notes": {"name": "笔记", "enabled": True, "every_n_turns": 0,
                                                     "max_chunks": 300}}}), encoding="utf-8")
    config = load_config(path)
    assert (config.enabled, config.search_top_k, config.store("notes").max_chunks) == (True, 3, 300)


def test_the_loader_knows_every_key_the_writer_writes() -> None:
    """A new setting written by config_to_dict but unknown to the strict loader would make
    every saved config unreadable (a merge of two branches did exactly that)."""
    from liyuan.vector.config import VectorConfig
    from liyuan.vector.config_file import _TOP_KEYS, config_to_dict

    assert set(_TOP_KEYS) == set(config_to_dict(VectorConfig()))


@pytest.mark.parametrize(("build", "named"), [
    (lambda: VectorConfig(search_top_k=-5), "search_top_k"),
    (lambda: VectorConfig(search_top_k=True), "search_top_k"),
    (lambda: VectorConfig(e5_threads=0), "e5_threads"),
    (lambda: VectorConfig(enabled=1), "enabled"),  # type: ignore[arg-type]
    (lambda: VectorConfig(embedder="bert"), "embedder"),  # type: ignore[arg-type]
    (lambda: VectorConfig(recall_mode="fuzzy"), "recall_mode"),  # type: ignore[arg-type]
    (lambda: VectorConfig(fusion_weights={"hash": {"cjk": 1.0}}), "hash"),
    (lambda: VectorConfig(stores={EXTERNAL: StoreConfig("额外数据库", True, 0, 50)}), "max_chunks"),
    (lambda: StoreConfig("剧情数据库", True, -1, 5000), "every_n_turns"),
    (lambda: StoreConfig("剧情数据库", True, 3, 50001), "max_chunks"),
])
def test_a_config_built_in_code_refuses_what_the_file_would_clamp(build: Callable[[], object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        build()


def test_what_the_file_loader_builds_is_always_valid_for_the_constructor() -> None:
    # The loader clamps; the constructor then accepts its result (both ends of every range).
    low = config_from_dict({"search_top_k": -5, "e5_threads": 0,
                            "stores": {"narrative": {"max_chunks": 1}, "x": {"max_chunks": 1}}})
    high = config_from_dict({"search_top_k": 99, "e5_threads": 999, "stores": {"narrative": {"max_chunks": 10**9}}})
    assert (low.search_top_k, low.e5_threads, low.store("narrative").max_chunks, low.store("x").max_chunks) \
        == (1, 1, 20, 100)
    assert (high.search_top_k, high.e5_threads, high.store("narrative").max_chunks) == (20, 64, 50000)
