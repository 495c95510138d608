"""Issue 36, item 5: the fast tokenizing of a cold keyword load gives exactly the old terms.

:func:`~liyuan.vector.lexical.nfkc` must equal ``unicodedata.normalize("NFKC", ...)`` and
:func:`~liyuan.vector.bulk_terms.encode_bigrams` must give the terms and counts of encoding text
by text, and the same vocabulary, on any text; the Unicode facts they lean on are
checked against the ``unicodedata`` of the Python that runs them.
"""

from __future__ import annotations

import random
import sys
import unicodedata

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from liyuan.vector.bulk_terms import COMPOSING_RANGES, encode_bigrams
from liyuan.vector.lexical import _INERT, bigram_terms, encode_terms, nfkc

# Characters where NFKC, case or runs do something: full-width and compatibility forms,
# combining marks, Hangul jamo and syllables, Greek sigma, ligatures, kana, NUL.
TRICKY = ("一二三四五六七八九十你我他雾港青伞沈怀瑾ＡＢａｂ，。！？、：（）“” 　\t\nabcXYZ0123_-'"
          "ΑΣσςİﬁ①㍿⑴Ⅻ가각\u1100\u1161\u11a8e\u0301\u0308\u0327ｱｶﾞﾟ\u3099が\uf900\u2f00\0é😊𠀀𝐀")


def test_the_inert_ideographs_take_no_part_in_nfkc() -> None:
    assert _INERT == "\u3400-\u4dbf\u4e00-\u9fff"
    in_pairs = {int(part, 16) for point in range(sys.maxunicode + 1)
                if len(parts := unicodedata.decomposition(chr(point)).split()) == 2 and not parts[0].startswith("<")
                for part in parts}
    for point in [*range(0x3400, 0x4DC0), *range(0x4E00, 0xA000)]:
        char = chr(point)
        assert unicodedata.normalize("NFKC", char) == char and not unicodedata.combining(char)
        assert point not in in_pairs and char.lower() == char


def test_every_two_character_canonical_decomposition_lies_in_the_scanned_ranges() -> None:
    outside = [point for point in range(sys.maxunicode + 1)
               if not any(low <= point < high for low, high in COMPOSING_RANGES)
               and len(parts := unicodedata.decomposition(chr(point)).split()) == 2 and not parts[0].startswith("<")]
    assert outside == []


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(TRICKY), max_size=40) | st.text(max_size=40))
def test_nfkc_equals_the_standard_library(text: str) -> None:
    assert nfkc(text) == unicodedata.normalize("NFKC", text)


def _loop(texts: list[str], vocabulary: dict[str, int]) -> list[tuple[np.ndarray, np.ndarray]]:
    return [encode_terms(bigram_terms(text), vocabulary) for text in texts]


def _same(texts: list[str], start: dict[str, int] | None = None) -> None:
    by_loop, in_bulk = dict(start or {}), dict(start or {})
    expected, got = _loop(texts, by_loop), encode_bigrams(texts, in_bulk)
    assert list(in_bulk.items()) == list(by_loop.items())
    assert len(got) == len(expected)
    for (ids, counts), (want_ids, want_counts) in zip(got, expected, strict=True):
        assert ids.dtype == want_ids.dtype and counts.dtype == want_counts.dtype
        # The same terms and counts; in term-id order, which no index depends on.
        assert dict(zip(ids.tolist(), counts.tolist(), strict=True)) == dict(
            zip(want_ids.tolist(), want_counts.tolist(), strict=True))
        assert ids.tolist() == sorted(ids.tolist())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(TRICKY), max_size=30) | st.text(max_size=20), max_size=8),
       st.dictionaries(st.sampled_from(["一二", "雾港", "abc", "1", "x"]), st.just(0), max_size=3))
def test_encode_bigrams_equals_encoding_text_by_text(texts: list[str], known: dict[str, int]) -> None:
    _same(texts, {term: index for index, term in enumerate(known)})


def test_encode_bigrams_equals_the_loop_on_a_store_sized_batch() -> None:
    rng = random.Random(36)
    words = ["雾港码头", "旧城茶馆", "沈怀瑾", "青伞", "，", "。", "“", "”", "（第", "段）", "Sailor", "drowned",
             "the", " ", "42", "ＡＢＣ", "ﬁ", "가각"]
    texts = ["".join(rng.choice(words) for _ in range(rng.randint(0, 60))) for _ in range(700)]
    _same(texts)  # more than one batch, some texts all of one kind, some empty
    _same([*texts[:5], "ΑΣ e\u0301", *texts[5:40]])  # a batch that is not character by character
