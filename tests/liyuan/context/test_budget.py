"""The shared budget: fit_resident_summary (reference 9, acceptance 12.2 case 10)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liyuan.context.budget import (
    OMITTED_MARKER,
    RESIDENT_ENVELOPE_CHARS,
    RESIDENT_MAX_CHARS,
    RESIDENT_MIN_USEFUL_CHARS,
    fit_resident_summary,
    other_chars_for,
    resident_allowance,
)
from liyuan.text import utf16_len

LONG = "# 往局记忆" + "\n\n" + "第一段。" * 400 + "\n\n" + "第二段。" * 400


def test_constants_match_the_reference() -> None:
    assert (RESIDENT_MAX_CHARS, RESIDENT_ENVELOPE_CHARS, RESIDENT_MIN_USEFUL_CHARS) == (1200, 4300, 200)
    assert OMITTED_MARKER == "\n（……余下内容因篇幅略）"
    assert len(OMITTED_MARKER) == 13


def test_short_text_is_unchanged() -> None:
    text = "# 往局记忆（同一世界更早的几局）\n\n- 小满住在城东。"
    assert fit_resident_summary(text, 0) == text
    # Exactly filling the envelope still fits, even with an allowance far below 200.
    assert fit_resident_summary(text, RESIDENT_ENVELOPE_CHARS - len(text)) == text


def test_long_text_is_cut_with_the_marker() -> None:
    fitted = fit_resident_summary(LONG, 0)
    assert fitted is not None
    assert len(fitted) <= 1200
    assert fitted.endswith(OMITTED_MARKER)
    assert fitted.startswith("# 往局记忆")


def test_long_text_is_dropped_when_little_is_left() -> None:
    assert fit_resident_summary(LONG, 4300) is None
    assert fit_resident_summary(LONG, 4150) is None  # allowance 150 < 200


def test_nothing_in_nothing_out() -> None:
    assert fit_resident_summary(None, 0) is None
    assert fit_resident_summary("  \n", 0) is None


def test_cut_prefers_the_last_paragraph_break() -> None:
    paragraphs = ["甲" * 150, "乙" * 150, "丙" * 150, "丁" * 150]
    text = "\n\n".join(paragraphs)
    fitted = fit_resident_summary(text, RESIDENT_ENVELOPE_CHARS - 400)  # allowance 400
    assert fitted == "\n\n".join(paragraphs[:2]) + OMITTED_MARKER


def test_cut_falls_back_to_a_line_break_then_to_the_whole_head() -> None:
    text = "\n".join(["甲" * 250, "乙" * 250])
    fitted = fit_resident_summary(text, RESIDENT_ENVELOPE_CHARS - 400)
    assert fitted == "甲" * 250 + OMITTED_MARKER
    # A paragraph break before character 200 is not a usable cut point.
    text = "甲" * 50 + "\n\n" + "乙" * 600
    fitted = fit_resident_summary(text, RESIDENT_ENVELOPE_CHARS - 400)
    assert fitted == text[: 400 - len(OMITTED_MARKER)] + OMITTED_MARKER
    assert fitted is not None and len(fitted) == 400


def test_seed_example_ledger_3900_then_4200() -> None:
    resident = "# 往局记忆（同一世界更早的几局）\n\n" + "\n\n".join(f"- 第{i}条：" + "事" * 40 for i in range(20))
    cut = fit_resident_summary(resident, 3900)
    assert cut is not None and len(cut) <= 400 and cut.endswith(OMITTED_MARKER)
    assert resident.startswith(cut[: -len(OMITTED_MARKER)])
    assert fit_resident_summary(resident, 4200) is None


def test_lengths_are_utf16_units_and_emoji_are_never_split() -> None:
    text = "😀" * 700  # 1400 UTF-16 units, 700 code points
    fitted = fit_resident_summary(text, 0)
    assert fitted is not None and fitted.endswith(OMITTED_MARKER)
    kept = fitted[: -len(OMITTED_MARKER)]
    assert kept == "😀" * 593  # 1187 units available, an emoji takes 2: one unit stays unused
    assert utf16_len(fitted) == 1199
    assert other_chars_for("😀", "", "") == 2


def test_other_chars_counts_the_three_texts_without_labels() -> None:
    assert other_chars_for("摘要", "时间：清晨", "人物：小满") == 2 + 5 + 5
    assert other_chars_for(None, "", "") == 0
    assert resident_allowance(0) == 1200
    assert resident_allowance(4000) == 300
    assert resident_allowance(5000) == -700


_alphabet = st.sampled_from([*"甲乙丙丁往局记忆。，ab \n", "😀", "𠀋"]) | st.characters(codec="utf-8")


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet=_alphabet, max_size=2500), other=st.integers(min_value=-500, max_value=6000))
def test_never_over_the_allowance(text: str, other: int) -> None:
    allowance = resident_allowance(other)
    fitted = fit_resident_summary(text, other)
    if not text.strip():
        assert fitted is None
        return
    if utf16_len(text) <= allowance:
        assert fitted == text
        return
    if allowance < RESIDENT_MIN_USEFUL_CHARS:
        assert fitted is None
        return
    assert fitted is not None
    assert utf16_len(fitted) <= allowance
    assert fitted.endswith(OMITTED_MARKER)
    kept = fitted[: -len(OMITTED_MARKER)]
    assert text.startswith(kept)  # only the tail is dropped; nothing is rewritten
