"""Lexical retrieval: Chinese-aware tokenizers and a small Okapi BM25 index.

Invariants (pure, no I/O):

- A tokenizer maps text to a list of terms; the same text always gives the same terms.
- :class:`BM25Index` is immutable after construction; :meth:`BM25Index.scores` returns
  one non-negative score per document, 0 for documents sharing no term with the query.

Why lexical at all: embeddings blur proper nouns (a name the model never saw is just
noise to it), while an exact term match on ``沈怀瑾`` or ``青伞`` is the strongest signal
there is. BM25 is poor at paraphrase, which is where embeddings win; the hybrid in
:mod:`liyuan.vector.search` takes both.

Two tokenizers:

- ``bigram`` (default, zero dependencies): overlapping character bigrams inside runs of
  Han/kana/hangul (a single-character run yields that character), plus whole words of
  letters and digits for everything else. Names of two or three characters become one
  or two bigrams, so they match exactly without a dictionary.
- ``jieba``: jieba's search-mode segmentation (words plus their sub-words); better
  precision on common words, needs the ``jieba`` package and about 3 s to load once.
"""

from __future__ import annotations

import importlib
import logging
import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["BM25Index", "Tokenizer", "bigram_terms", "get_tokenizer", "jieba_terms"]

Tokenizer = Callable[[str], list[str]]

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_TERM_RUNS = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>[^\W_{_CJK}]+)")


def bigram_terms(text: str) -> list[str]:
    """Character bigrams of CJK runs plus whole words of everything else."""
    terms: list[str] = []
    for match in _TERM_RUNS.finditer(unicodedata.normalize("NFKC", text).lower()):
        run = match.group()
        if match.lastgroup == "cjk":
            terms += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
        else:
            terms.append(run)
    return terms


_JIEBA_LOCK = threading.Lock()
_JIEBA: Any = None


def jieba_terms(text: str) -> list[str]:
    """jieba search-mode words (letters, digits and CJK only; punctuation dropped)."""
    global _JIEBA
    with _JIEBA_LOCK:
        if _JIEBA is None:
            module = importlib.import_module("jieba")
            module.setLogLevel(logging.WARNING)
            module.initialize()
            _JIEBA = module
    words = _JIEBA.lcut_for_search(unicodedata.normalize("NFKC", text).lower())
    return [w for w in words if _TERM_RUNS.fullmatch(w)]


def get_tokenizer(name: str) -> Tokenizer:
    """``bigram`` or ``jieba``."""
    if name == "jieba":
        return jieba_terms
    if name == "bigram":
        return bigram_terms
    raise ValueError(f"未知的分词方式：{name!r}")


class BM25Index:
    """Okapi BM25 over pre-tokenized documents.

    Args:
        documents: One term list per document.
        k1: Term-frequency saturation.
        b: Length normalisation.
    """

    def __init__(self, documents: Sequence[Sequence[str]], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.size = len(documents)
        self._k1 = k1
        lengths = np.array([len(d) for d in documents], dtype=np.float32)
        average = float(lengths.mean()) if self.size and lengths.sum() > 0 else 1.0
        # Per-document denominator part that does not depend on the term: k1 * (1 - b + b * dl / avgdl).
        self._norm = (k1 * (1 - b + b * lengths / average)).astype(np.float32)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for index, terms in enumerate(documents):
            for term, count in Counter(terms).items():
                docs, freqs = postings.setdefault(term, ([], []))
                docs.append(index)
                freqs.append(count)
        self._postings: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], float]] = {}
        for term, (docs, freqs) in postings.items():
            df = len(docs)
            idf = math.log(1 + (self.size - df + 0.5) / (df + 0.5))
            self._postings[term] = (np.array(docs, dtype=np.int64), np.array(freqs, dtype=np.float32), idf)

    def scores(self, query_terms: Sequence[str]) -> npt.NDArray[np.float32]:
        """BM25 score of every document for the (deduplicated) query terms."""
        out = np.zeros(self.size, dtype=np.float32)
        for term in dict.fromkeys(query_terms):
            posting = self._postings.get(term)
            if posting is None:
                continue
            docs, freqs, idf = posting
            # Each document appears once per posting list, so fancy-index += is safe.
            out[docs] += idf * freqs * (self._k1 + 1) / (freqs + self._norm[docs])
        return out
