"""Tokenizing many texts at once for the ``bigram`` tokenizer, with numpy (issue 36).

A cold keyword load tokenizes every chunk of a store: 5,000 at the default cap, 50,000
at the maximum. Through :func:`~liyuan.vector.lexical.bigram_terms` every bigram becomes
a Python string and every text goes through CPython's NFKC (about 0.3 µs a character
once a text holds a full-width comma), which was most of the load. Here a batch of
texts is one array of code points, NFKC and lower-casing a look-up per distinct
character wherever that is exact, a bigram one integer, and only distinct terms and
the words outside CJK runs become strings.

Invariant: :func:`encode_bigrams` gives each text the terms and counts of
``encode_terms(bigram_terms(t), vocabulary)`` (in term-id order instead of first
occurrence, which no index reads) and grows the vocabulary exactly as that loop would
(checked on random texts by ``tests/liyuan/vector/test_bulk_terms.py``); where NFKC is
not character by character (combining marks, Hangul jamo, a Greek capital sigma, a
character that becomes several) the batch goes through :func:`~liyuan.vector.lexical.nfkc`
text by text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from liyuan.vector.lexical import _CJK, Encoded, latin_term, nfkc

__all__ = ["encode_bigrams"]

_CJK_RANGES = [(int(low, 16), int(high, 16)) for low, high in re.findall(r"\\u(\w{4})-\\u(\w{4})", _CJK)]
"""The ranges of ``_CJK`` as code points (low, high), both ends included."""
_BATCH = 256
"""Texts encoded at once by :func:`encode_bigrams` (bounds its scratch arrays to a few MB)."""


def encode_bigrams(texts: Sequence[str], vocabulary: dict[str, int]) -> list[Encoded]:
    """``[encode_terms(bigram_terms(t), vocabulary) for t in texts]``, with numpy: the same
    terms and counts per text (each text's in term-id order) and the same vocabulary.

    A cold keyword load tokenizes every chunk of a store, and making each bigram a Python
    string was most of it (issue 36): here a batch of texts is one array of code points,
    a bigram one integer, and only distinct terms and words outside CJK runs become strings.
    """
    out: list[Encoded] = []
    for start in range(0, len(texts), _BATCH):
        out.extend(_encode_batch(texts[start:start + _BATCH], vocabulary))
    return out


COMPOSING_RANGES = ((0x0000, 0x3100), (0xFB00, 0xFC00), (0x11000, 0x12000), (0x1D100, 0x1D200))
"""Where the canonical decompositions into two characters are (Unicode 14, which CPython
3.11's ``unicodedata`` has; ``tests/liyuan/vector/test_bulk_terms.py`` checks that none
lies elsewhere, so a newer table that adds one fails that test instead of this module)."""


@lru_cache(maxsize=1)
def _composing() -> frozenset[int]:
    """Code points that take part in a canonical composition (either side; Hangul jamo
    and syllables compose by rule): next to these, NFKC is not character by character."""
    pairs = [int(part, 16) for low, high in COMPOSING_RANGES for point in range(low, high)
             if len(parts := unicodedata.decomposition(chr(point)).split()) == 2 and not parts[0].startswith("<")
             for part in parts]
    return frozenset([*pairs, *range(0x1100, 0x1200), *range(0xA960, 0xA980), *range(0xD7B0, 0xD800),
                      *range(0xAC00, 0xD7A4)])


@lru_cache(maxsize=1 << 16)
def _one_point(point: int) -> int:
    """What ``NFKC(c).lower()`` makes of the character ``c`` on its own, when that holds
    in any text: one character, no composition or reordering with its neighbours and no
    final-sigma rule. ``-1`` otherwise."""
    char = chr(point)
    normal = unicodedata.normalize("NFKC", char)
    composing = _composing()
    if any(ord(c) in composing or unicodedata.combining(c) or c == "\u03a3" for c in char + normal):
        return -1
    lowered = normal.lower()
    return ord(lowered) if len(lowered) == 1 else -1


@lru_cache(maxsize=1)
def _tables() -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int8]]:
    """Per code point, filled as points are first met (``-2``: not yet): what :func:`_one_point`
    makes of it, and its kind (``1`` in a CJK run, ``2`` in a word, ``0`` neither)."""
    return np.full(0x110000, -2, dtype=np.int32), np.full(0x110000, -2, dtype=np.int8)


def _kind(point: int) -> int:
    if any(low <= point <= high for low, high in _CJK_RANGES):
        return 1
    return 2 if chr(point).isalnum() else 0  # re's [^\W_] is str.isalnum()


def _looked_up(table: npt.NDArray[Any], points: npt.NDArray[np.int64], fill: Callable[[int], int]) -> npt.NDArray[Any]:
    found = table[points]
    unknown = found == -2
    if unknown.any():  # concurrent fills write the same values
        for point in np.unique(points[unknown]).tolist():
            table[point] = fill(point)
        found = table[points]
    return found


def _points(texts: Sequence[str]) -> tuple[npt.NDArray[np.int64], list[int], str]:
    """``"\\0".join(nfkc(t).lower() for t in texts)`` as code points and as a string, with
    each text's end (where its NUL is) in it."""
    joined = "\0".join(texts)
    points = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int64)
    mapped = _looked_up(_tables()[0], points, _one_point).astype(np.int64)
    if mapped.size == 0 or mapped.min() >= 0:  # character by character: one look-up
        joined = mapped.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
        return mapped, np.cumsum([len(t) + 1 for t in texts]).tolist(), joined
    parts = [nfkc(t).lower() for t in texts]
    joined = "\0".join(parts)
    points = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int64)
    return points, np.cumsum([len(t) + 1 for t in parts]).tolist(), joined


def _encode_batch(texts: Sequence[str], vocabulary: dict[str, int]) -> list[Encoded]:
    if not texts:
        return []
    points, bounds, joined = _points(texts)
    kinds = np.zeros(points.size + 2, dtype=np.int8)  # padded: no run before the first or after the last
    kinds[1:-1] = _looked_up(_tables()[1], points, _kind)
    cjk, word = kinds == 1, kinds == 2
    pair = np.flatnonzero(cjk[1:-1] & cjk[2:])
    single = np.flatnonzero(cjk[1:-1] & ~cjk[:-2] & ~cjk[2:])
    # A bigram is (first << 21) | second, at least 2**21; a single character is itself, below.
    keys = np.concatenate([(points[pair] << 21) | points[pair + 1], points[single]])
    where = np.concatenate([pair, single])
    distinct, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    strings = [chr(k >> 21) + chr(k & 0x1FFFFF) if k >> 21 else chr(k) for k in distinct.tolist()]
    firsts = dict(zip(strings, where[first].tolist(), strict=True))
    word_at: list[int] = []
    word_terms: list[str] = []
    ends = (np.flatnonzero(word[1:-1] & ~word[2:]) + 1).tolist()
    for start, end in zip(np.flatnonzero(word[1:-1] & ~word[:-2]).tolist(), ends, strict=True):
        term = latin_term(joined[start:end])
        if term is not None:
            word_at.append(start)
            word_terms.append(term)
            firsts.setdefault(term, start)
    new = sorted((at, term) for term, at in firsts.items() if term not in vocabulary)
    base = len(vocabulary)
    vocabulary.update((term, base + i) for i, (_, term) in enumerate(new))
    term_ids = np.concatenate([np.array([vocabulary[s] for s in strings], dtype=np.int64)[inverse],
                               np.array([vocabulary[t] for t in word_terms], dtype=np.int64)])
    at = np.concatenate([where, np.array(word_at, dtype=np.int64)])
    docs = np.searchsorted(np.array(bounds, dtype=np.int64), at, side="right")
    # Count each (document, term), in term-id order within a document.
    width = len(vocabulary)
    pairs, counts = np.unique(docs * width + term_ids, return_counts=True)
    cuts = np.searchsorted(pairs // width, np.arange(1, len(texts)))
    return [(ids.astype(np.int32), c.astype(np.float32))
            for ids, c in zip(np.split(pairs % width, cuts), np.split(counts, cuts), strict=True)]
