"""The vector-memory configuration file: read strictly, written atomically, never a key.

The schema is :mod:`liyuan.vector.config`; this module is its JSON file
(``vector-memory.json`` by convention, the format in that module's docstring).

Invariants:

- A missing file means the defaults.
- Counts in the file are clamped to their documented ranges, never rejected (the
  ranges are :class:`~liyuan.vector.config.VectorConfig`'s, which refuses them when
  built in code); ``fusion_weights`` are rejected when wrong.
- A file that is not valid JSON, a field of the wrong type, a key the file format does
  not have (a typo such as ``enabeld``, at any level: it is named in the message) or a
  number that is not finite (``1e400``, ``NaN``, ``Infinity``) is a
  :class:`~liyuan.errors.ConfigError` with a Chinese message naming the file; the file
  is left untouched. The same holds for a dict given to :func:`config_from_dict`.
- Saving is atomic (temp file in the same folder, fsync, ``os.replace``).
- No key is ever written to the file: the ``openai`` section names the environment
  variable that holds it. A key found in an older file (``openai.api_key``) is still
  read and used, but :func:`save_config` drops it, and :func:`public_config` only masks it.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from liyuan.errors import ConfigError
from liyuan.fileio import atomic_write_text
from liyuan.vector.config import (
    EMBEDDER_NAMES,
    EXTERNAL,
    LEGACY_DEFAULT_BASE_URL,
    LEXICAL_TOKENIZERS,
    MASKED_KEY,
    MAX_CHUNKS,
    MIN_CHUNKS,
    RECALL_MODES,
    OpenAIEmbedConfig,
    StoreConfig,
    VectorConfig,
    copy_weights,
    default_stores,
    weights_from,
)

__all__ = ["config_from_dict", "config_to_dict", "load_config", "public_config", "save_config"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What ``openai.api_key_env`` must look like: a variable's name, never a key."""


_TOP_KEYS = ("enabled", "search_top_k", "inject_on_turn", "embedder", "e5_threads", "recall_mode",
             "lexical_tokenizer", "fusion_weights", "openai", "stores")
"""Every key :func:`config_to_dict` writes (a test keeps the two equal)."""


def _known_keys(raw: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    if unknown := "、".join(f"{where}{key}" for key in raw if key not in known):
        raise ConfigError(f"向量记忆配置里没有这些设置项：{unknown}（可用的是 {'、'.join(known)}）")


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def _typed(raw: dict[str, Any], key: str, kind: type, default: Any, where: str) -> Any:
    value = raw.get(key, default)
    # bool is an int in Python; a JSON true must not pass as a number or vice versa.
    if kind is int and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ConfigError(f"{where}.{key} 应为数字，实际是 {value!r}")
    if kind is int and isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}.{key} 应为有限的数字，实际是 {value!r}")
    if kind is not int and not isinstance(value, kind):
        raise ConfigError(f"{where}.{key} 类型不对：{value!r}")
    return int(value) if kind is int else value


def _choice(raw: dict[str, Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    value = raw.get(key, default)
    if value not in allowed:
        raise ConfigError(f"{key} 只能是 {'/'.join(allowed)}，实际是 {value!r}")
    return str(value)


def _store_from(store_id: str, raw: Any, default: StoreConfig | None) -> StoreConfig:
    where = f"stores.{store_id}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} 应为对象")
    _known_keys(raw, ("name", "enabled", "every_n_turns", "max_chunks"), f"{where}.")
    base = default or StoreConfig(store_id)
    low = MIN_CHUNKS.get(store_id, MIN_CHUNKS[EXTERNAL])
    return StoreConfig(
        name=_typed(raw, "name", str, base.name, where) or base.name,
        enabled=_typed(raw, "enabled", bool, base.enabled, where),
        every_n_turns=_clamp(_typed(raw, "every_n_turns", int, base.every_n_turns, where), 0, 1000),
        max_chunks=_clamp(_typed(raw, "max_chunks", int, base.max_chunks, where), low, MAX_CHUNKS),
    )


def _openai_from(raw: dict[str, Any]) -> OpenAIEmbedConfig:
    _known_keys(raw, ("base_url", "api_key_env", "model", "api_key"), "openai.")
    base = OpenAIEmbedConfig()
    base_url = raw.get("base_url")
    if base_url is not None and not isinstance(base_url, str):
        raise ConfigError(f"openai.base_url 应为字符串或 null，实际是 {base_url!r}")
    legacy_key = _typed(raw, "api_key", str, "", "openai")
    key_env = _typed(raw, "api_key_env", str, base.api_key_env, "openai").strip()
    if key_env and not _ENV_NAME.fullmatch(key_env):
        # Never echo the value: a user may have pasted the key itself here.
        raise ConfigError("openai.api_key_env 应为环境变量的名字（如 OPENAI_API_KEY），不是密钥本身")
    base_url = (base_url or "").strip() or None
    if "api_key_env" not in raw and not legacy_key and (base_url or "").rstrip("/") == LEGACY_DEFAULT_BASE_URL:
        base_url = None  # an older file wrote the default URL unasked; let the environment decide
    return OpenAIEmbedConfig(
        base_url=base_url,
        api_key_env=key_env,
        model=_typed(raw, "model", str, base.model, "openai"),
        legacy_api_key=legacy_key.strip(),
    )


def config_from_dict(raw: Any) -> VectorConfig:
    """Validate and clamp a parsed JSON object into a :class:`VectorConfig`."""
    if not isinstance(raw, dict):
        raise ConfigError("向量记忆配置应为 JSON 对象")
    _known_keys(raw, _TOP_KEYS, "")
    defaults = VectorConfig()
    stores = default_stores()
    raw_stores = raw.get("stores", {})
    if not isinstance(raw_stores, dict):
        raise ConfigError("stores 应为对象")
    for store_id, store_raw in raw_stores.items():
        stores[store_id] = _store_from(store_id, store_raw, stores.get(store_id))
    raw_openai = raw.get("openai", {})
    if not isinstance(raw_openai, dict):
        raise ConfigError("openai 应为对象")
    openai = _openai_from(raw_openai)
    return VectorConfig(
        enabled=_typed(raw, "enabled", bool, defaults.enabled, "config"),
        search_top_k=_clamp(_typed(raw, "search_top_k", int, defaults.search_top_k, "config"), 1, 20),
        inject_on_turn=_typed(raw, "inject_on_turn", bool, defaults.inject_on_turn, "config"),
        embedder=_choice(raw, "embedder", EMBEDDER_NAMES, defaults.embedder),  # type: ignore[arg-type]
        e5_threads=_clamp(_typed(raw, "e5_threads", int, defaults.e5_threads, "config"), 1, 64),
        recall_mode=_choice(raw, "recall_mode", RECALL_MODES, defaults.recall_mode),  # type: ignore[arg-type]
        lexical_tokenizer=_choice(raw, "lexical_tokenizer", LEXICAL_TOKENIZERS, defaults.lexical_tokenizer),  # type: ignore[arg-type]
        openai=openai,
        stores=stores,
        fusion_weights=weights_from(raw.get("fusion_weights", {})),
    )


def config_to_dict(config: VectorConfig) -> dict[str, Any]:
    """The JSON object for ``config``; it never holds a key (see the module docstring)."""
    return {
        "enabled": config.enabled,
        "search_top_k": config.search_top_k,
        "inject_on_turn": config.inject_on_turn,
        "embedder": config.embedder,
        "e5_threads": config.e5_threads,
        "recall_mode": config.recall_mode,
        "lexical_tokenizer": config.lexical_tokenizer,
        "fusion_weights": copy_weights(config.fusion_weights),
        "openai": {"base_url": config.openai.base_url, "api_key_env": config.openai.api_key_env,
                   "model": config.openai.model},
        "stores": {
            sid: {"name": s.name, "enabled": s.enabled, "every_n_turns": s.every_n_turns,
                  "max_chunks": s.max_chunks}
            for sid, s in config.stores.items()
        },
    }


def load_config(path: str | os.PathLike[str]) -> VectorConfig:
    """Read the configuration file; defaults when it does not exist.

    Raises:
        ConfigError: Naming the file: not valid JSON (too deep, numbers too long), a wrong
            field type, an unknown key or a number that is not finite.
    """
    file = Path(path)
    if not file.exists():
        return VectorConfig()
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: bad UTF-8, bad JSON, a number too long
        raise ConfigError(f"向量记忆配置文件无法读取（{file}）：{exc}") from exc
    except RecursionError:
        raise ConfigError(f"向量记忆配置文件无法读取（{file}）：JSON 嵌套太深") from None
    try:
        return config_from_dict(raw)
    except ConfigError as exc:
        raise ConfigError(f"向量记忆配置文件有误（{file}）：{exc}") from None


def save_config(path: str | os.PathLike[str], config: VectorConfig) -> None:
    """Write ``config`` atomically as indented UTF-8 JSON (without any key).

    A key read from an older file is not written back: after a save it has to come from
    the environment variable named by ``openai.api_key_env``.
    """
    file = Path(path)
    data = json.dumps(config_to_dict(config), ensure_ascii=False, indent=2) + "\n"
    atomic_write_text(file, data)


def public_config(config: VectorConfig) -> dict[str, Any]:
    """The configuration as shown to a user or a UI.

    Besides the saved fields, ``openai.api_key`` says whether an older file still
    supplies a key (masked) or not (empty); the key itself never appears.
    """
    data = config_to_dict(config)
    data["openai"]["api_key"] = MASKED_KEY if config.openai.legacy_api_key else ""
    return data
