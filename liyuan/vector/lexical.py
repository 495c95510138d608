"""Lexical retrieval: Chinese-aware tokenizers and a small Okapi BM25 index.

Invariants (pure, no I/O):

- A tokenizer maps text to a list of terms; the same text always gives the same terms.
- :class:`BM25Index` is immutable after construction; :meth:`BM25Index.scores` returns
  one non-negative score per document, 0 for documents sharing no term with the query.
- Term ids only ever grow: a vocabulary shared across indexes stays valid for all.

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

Both treat a word of plain Latin letters the same way (:func:`latin_term`): lowercased,
dropped when it is an English stopword (:data:`ENGLISH_STOPWORDS`), else reduced to its
Snowball English stem (``PyStemmer``), so ``drowned`` finds ``drown`` and the ``what
did the`` of a question matches nothing. On the bench's English chat (``python -m
harness bench``) it took object queries from 0.750 to 1.000 recall@5, while paraphrase
queries lost the matches they had made on little words alone (0.583 to 0.333); on a
larger public English benchmark (issue 15) it took BM25 from 0.44 to 0.53 per turn.
CJK runs, digits and words in other scripts are left exactly as before. PyStemmer (C)
gives the same stems as the pure-Python ``snowballstemmer`` about 100x faster; ``bm25s``
with its own tokenizer scored 0.750 against our 0.722 on that chat (it won three queries, two on words such as
``from``/``up`` that its shorter stopword list keeps; we won two) and answered a query
6x slower (0.25 ms against 0.04 ms at 5,000 chunks). The remedies tried next for
paraphrases (terms of the turns before a chunk, pseudo-relevance feedback, WordNet
expansion) gained at most 0.056 on English and were not shipped:
``harness/bench/lexical.py`` reruns them.
"""

from __future__ import annotations

import importlib
import logging
import math
import operator
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache, partial
from typing import Any

import numpy as np
import numpy.typing as npt

from liyuan.errors import ConfigError
from liyuan.vector.requires import install_hint

__all__ = [
    "ENGLISH_STOPWORDS",
    "BM25Index",
    "Encoded",
    "Tokenizer",
    "bigram_terms",
    "encode_terms",
    "get_tokenizer",
    "has_cjk",
    "jieba_terms",
    "latin_term",
]

Tokenizer = Callable[[str], list[str]]

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_TERM_RUNS = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>[^\W_{_CJK}]+)")


_HAS_CJK = re.compile(f"[{_CJK}]")

_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom whose why will
with would you your yours yourself yourselves
s t d ll m re ve don didn doesn isn wasn weren aren hasn haven hadn won wouldn shouldn couldn can
"""
ENGLISH_STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())
"""English function words that carry no topic: dropped from lexical terms.

Written for this project: pronouns, articles, auxiliaries, prepositions and
conjunctions, plus the pieces an apostrophe leaves (``s``, ``t``, ``ll``, ``don`` ...).
Question words are in it too: a recalled chunk should match the question's subject,
not its form (see issue 15: the form is what the weak lists matched).
"""

_STEMMER_LOCK = threading.Lock()
_STEMMER: Any = None


def _stemmer() -> Any:
    global _STEMMER
    with _STEMMER_LOCK:
        if _STEMMER is None:
            try:
                module = importlib.import_module("Stemmer")
            except ImportError as exc:
                raise ConfigError(f"英文词干提取需要 PyStemmer（vector 附加依赖）：{install_hint('vector')}") from exc
            _STEMMER = module.Stemmer("english")
        return _STEMMER


@lru_cache(maxsize=1 << 16)
def latin_term(word: str) -> str | None:
    """The lexical term of one lowercased word: ``None`` for an English stopword, the
    Snowball English stem for plain Latin letters, the word itself otherwise (digits,
    other scripts)."""
    if not (word.isascii() and word.isalpha()):
        return word
    if word in ENGLISH_STOPWORDS:
        return None
    stem: str = _stemmer().stemWord(word)
    return stem


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds any Han, kana or hangul character."""
    return _HAS_CJK.search(text) is not None


_INERT = "\u3400-\u4dbf\u4e00-\u9fff"
"""CJK unified ideographs (and extension A): NFKC leaves each as it is, and none takes part
in a composition, so NFKC of a text equals NFKC of the pieces between them, joined with
them (checked for every one of them by ``tests/liyuan/vector/test_tokenize_fast.py``)."""
_NOT_INERT = re.compile(f"[^{_INERT}]+")
_nfkc_piece = lru_cache(maxsize=1 << 14)(partial(unicodedata.normalize, "NFKC"))


def _nfkc_repl(match: re.Match[str]) -> str:
    return _nfkc_piece(match.group())


def nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, several times faster on Chinese text.

    CPython's NFKC costs about 0.3 µs a character once a text holds one character it
    changes (a full-width comma will do), a third of a cold keyword load (issue 36).
    Only the pieces between ideographs can change; each is short, and most recur
    (punctuation), so they come from a cache.
    """
    if text.isascii():
        return text
    return _NOT_INERT.sub(_nfkc_repl, text)


def bigram_terms(text: str) -> list[str]:
    """Character bigrams of CJK runs plus :func:`latin_term` of every other word."""
    terms: list[str] = []
    extend, append = terms.extend, terms.append
    for run, word in _TERM_RUNS.findall(nfkc(text).lower()):
        if run:
            # map(add, run, run[1:]) builds the bigrams about 30% faster than slicing.
            extend(map(operator.add, run, run[1:]) if len(run) > 1 else (run,))
        else:
            term = latin_term(word)
            if term is not None:
                append(term)
    return terms


_JIEBA_LOCK = threading.Lock()
_JIEBA: Any = None


def jieba_terms(text: str) -> list[str]:
    """jieba search-mode words (letters, digits and CJK only; punctuation dropped),
    Latin words through :func:`latin_term`."""
    global _JIEBA
    with _JIEBA_LOCK:
        if _JIEBA is None:
            module = importlib.import_module("jieba")
            module.setLogLevel(logging.WARNING)
            module.initialize()
            _JIEBA = module
    words = _JIEBA.lcut_for_search(nfkc(text).lower())
    terms: list[str] = []
    for word in words:
        match = _TERM_RUNS.fullmatch(word)
        if match is None:
            continue
        term = word if match.lastgroup == "cjk" else latin_term(word)
        if term is not None:
            terms.append(term)
    return terms


def get_tokenizer(name: str) -> Tokenizer:
    """``bigram`` or ``jieba``."""
    if name == "jieba":
        return jieba_terms
    if name == "bigram":
        return bigram_terms
    raise ValueError(f"未知的分词方式：{name!r}")


Encoded = tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]
"""A document as ``(term ids, term counts)`` over a shared vocabulary."""


def encode_terms(terms: Sequence[str], vocabulary: dict[str, int]) -> Encoded:
    """Count ``terms`` and map them to ids, growing ``vocabulary`` as needed (new terms
    get the next ids in the order they first occur)."""
    counts = Counter(terms)
    missing = [term for term in counts if term not in vocabulary]
    if missing:
        vocabulary.update(zip(missing, range(len(vocabulary), len(vocabulary) + len(missing)), strict=True))
    ids = np.fromiter(map(vocabulary.__getitem__, counts), dtype=np.int32, count=len(counts))
    return ids, np.fromiter(counts.values(), dtype=np.float32, count=len(counts))


class BM25Index:
    """Okapi BM25 over documents encoded against a shared vocabulary.

    Postings are stored column-wise, sorted by term id (like a CSR matrix), so a build
    is a concatenation and one sort, and documents encoded once can be reused by every
    later index (the store keeps them across snapshots).

    Args:
        documents: One encoded document per position (see :func:`encode_terms`).
        vocabulary: The term-to-id map the documents were encoded with. It may grow
            after the build; ids the index has not seen simply score nothing.
        k1: Term-frequency saturation.
        b: Length normalisation.
    """

    def __init__(self, documents: Sequence[Encoded], vocabulary: dict[str, int], *,
                 k1: float = 1.2, b: float = 0.75) -> None:
        self.size = len(documents)
        self._vocabulary = vocabulary
        self._k1 = k1
        lengths = np.array([float(c.sum()) for _, c in documents], dtype=np.float32)
        average = float(lengths.mean()) if self.size and lengths.sum() > 0 else 1.0
        # Per-document denominator part that does not depend on the term: k1 * (1 - b + b * dl / avgdl).
        self._norm = (k1 * (1 - b + b * lengths / average)).astype(np.float32)
        width = len(vocabulary)
        if documents:
            term_ids = np.concatenate([ids for ids, _ in documents])
            freqs = np.concatenate([c for _, c in documents])
            owners = np.repeat(np.arange(self.size, dtype=np.int64), [len(ids) for ids, _ in documents])
        else:
            term_ids, freqs, owners = (np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros(0, np.int64))
        order = np.argsort(term_ids, kind="stable")
        self._docs = owners[order]
        self._freqs = freqs[order]
        self._starts = np.searchsorted(term_ids[order], np.arange(width + 1))

    def scores(self, query_terms: Sequence[str]) -> npt.NDArray[np.float32]:
        """BM25 score of every document for the (deduplicated) query terms."""
        out = np.zeros(self.size, dtype=np.float32)
        for term in dict.fromkeys(query_terms):
            term_id = self._vocabulary.get(term)
            if term_id is None or term_id + 1 >= len(self._starts):
                continue
            start, end = int(self._starts[term_id]), int(self._starts[term_id + 1])
            if end == start:
                continue
            idf = math.log(1 + (self.size - (end - start) + 0.5) / ((end - start) + 0.5))
            docs, freqs = self._docs[start:end], self._freqs[start:end]
            # Each document appears once per term, so fancy-index += is safe.
            out[docs] += idf * freqs * (self._k1 + 1) / (freqs + self._norm[docs])
        return out
