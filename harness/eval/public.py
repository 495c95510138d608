"""Recall on two public sets that chose nothing (``python -m harness eval public``, issue 36).

The sets are stored the way an app stores a chat, through the library's own entry points
(:class:`liyuan.vector.VectorMemory` with the shipped :class:`~liyuan.vector.VectorConfig`),
and searched with :meth:`~liyuan.vector.VectorMemory.search`; no second retriever:

- ``locomo-turn``: each LoCoMo turn is one chunk (``add_manual``); relevant: the evidence turns.
- ``locomo-archive``: each LoCoMo session is archived as a compaction archives the text it
  covers (``archive_compacted``: 600-character chunks overlapping by one turn); a chunk
  counts for every evidence turn whose text it holds.
- ``madial-<zh|en>-<last|history>``: each MADial-Bench memory is one chunk in its user's
  memory; the query is the last utterance or the whole dialogue before the test turn.

Each set is searched with the keyword list alone, e5 alone, today's default, the default
before issue 36 (weighted RRF) and every equal-weight candidate of
:mod:`harness.bench.fusion`. Two figures per cell, both over the top 5: ``hit`` (share of
queries with at least one relevant chunk; the measure of the project's own sets) and
``share`` (relevant chunks found over relevant chunks, averaged; MADial-Bench's own recall@k).

Neither set took part in choosing anything: the default and every constant of the fusion
were chosen on the project's own sets (:mod:`harness.bench.fusion`). The data is not in the
repository (licence, size) and CI cannot fetch it: the committed snapshot ``sim/eval/public``
is the evidence, stamped with the commit of the code and of each data set.

Vectors are cached on disk (``--cache``, not tracked), keyed by embedder, kind and text.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from liyuan.vector import Embedder, SqliteChunkStore, VectorConfig, VectorMemory
from liyuan.vector.chunking import ARCHIVE_CHUNK_CHARS, ARCHIVE_OVERLAP, split_text_chunks
from liyuan.vector.embed import embed_query

from .public_data import Conversation, MadialSet, Question

__all__ = ["CONFIGS", "DiskMemo", "measure_locomo", "measure_madial"]

TOP_K = 5
EQUAL = {"e5": {"cjk": 1.0, "latin": 1.0}}


def _configs() -> list[tuple[str, str, str | None, dict[str, dict[str, float]] | None, int | None]]:
    """``(name, recall mode, fusion, weights, reserved)``; ``None``: the shipped default."""
    from ..bench.fusion import CANDIDATES, OLD_WEIGHTS, candidate_name

    return [("关键词", "lexical", None, None, None), ("e5", "semantic", None, None, None),
            ("默认", "hybrid", None, None, None), ("旧默认", "hybrid", "rrf", OLD_WEIGHTS, 1),
            *((candidate_name(f, r), "hybrid", f, EQUAL, r) for f, r in CANDIDATES)]


CONFIGS = tuple(c[0] for c in _configs())
"""Every configuration measured, in table order."""


class DiskMemo:
    """An embedder that keeps every vector it made in ``folder`` (passages and queries apart)."""

    def __init__(self, inner: Embedder, folder: Path) -> None:
        self.inner = inner
        self.label = inner.label
        self.seconds = 0.0
        self.embedded = 0
        self._file = folder / f"{hashlib.sha1(inner.label.encode()).hexdigest()[:12]}.npz"
        self._seen: dict[str, np.ndarray] = {}
        if self._file.exists():
            with np.load(self._file) as data:
                self._seen = {k: data[k] for k in data.files}

    @staticmethod
    def _key(text: str, query: bool) -> str:
        return hashlib.sha1(f"{'q' if query else 'p'}\0{text}".encode()).hexdigest()

    def fill(self, texts: Iterable[str], query: bool, say: Callable[[str], None] = print) -> None:
        """Embed every text not cached yet, in batches, saving as it goes."""
        missing = list(dict.fromkeys(t for t in texts if self._key(t, query) not in self._seen))
        for start in range(0, len(missing), 64):
            self._rows(missing[start:start + 64], query)
            self.save()
            say(f"  嵌入 {min(start + 64, len(missing))}/{len(missing)}（{'提问' if query else '段落'}）")

    def __len__(self) -> int:
        return len(self._seen)

    def save(self) -> None:
        self._file.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=self._file.parent, suffix=".npz", delete=False) as handle:
            np.savez(handle, **self._seen)  # type: ignore[arg-type]
        Path(handle.name).replace(self._file)

    def _rows(self, texts: Sequence[str], query: bool) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if self._key(t, query) not in self._seen))
        if missing:
            began = time.perf_counter()
            rows = embed_query(self.inner, missing) if query else self.inner.embed(missing)
            self.seconds += time.perf_counter() - began
            self.embedded += len(missing)
            self._seen.update({self._key(t, query): rows[i] for i, t in enumerate(missing)})
        if not texts:
            return self.inner.embed([])
        return np.vstack([self._seen[self._key(t, query)] for t in texts])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(texts, False)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(texts, True)


def _memory(folder: Path, embedder: DiskMemo) -> tuple[VectorMemory, SqliteChunkStore]:
    folder.mkdir(parents=True, exist_ok=True)
    store = SqliteChunkStore(folder / "chunks.sqlite")
    return VectorMemory(VectorConfig(enabled=True, search_top_k=TOP_K), store, embedder), store


def _holder(owners: dict[str, set[str]]) -> Callable[[str], set[str]]:
    return lambda text: owners.get(text, set())


def _score(memory: VectorMemory, holds: Callable[[str], set[str]], questions: Iterable[Question],
           totals: dict[str, list[float]]) -> None:
    """Search every question under every configuration; add ``[hits, share sum, count]`` to ``totals``."""
    base, fusion, reserve = memory.config, memory.fusion, memory.reserve
    questions = list(questions)
    for name, mode, how, weights, places in _configs():
        memory.config = replace(base, recall_mode=mode,  # type: ignore[arg-type]
                                fusion_weights=weights if weights is not None else base.fusion_weights)
        memory.fusion = how if how is not None else fusion  # type: ignore[assignment]
        memory.reserve = places if places is not None else reserve
        row = totals.setdefault(name, [0.0, 0.0, 0.0])
        for question in questions:
            found = set().union(*(holds(h.text) for h in memory.search(question.text, top_k=TOP_K)))
            got = len(found & question.relevant)
            row[0] += got > 0
            row[1] += got / len(question.relevant)
            row[2] += 1
    memory.config, memory.fusion, memory.reserve = base, fusion, reserve


def _result(totals: dict[str, list[float]], documents: int) -> dict[str, Any]:
    count = int(next(iter(totals.values()))[2])
    return {"queries": count, "documents": documents,
            "recall": {name: {"hit": round(h / n, 4), "share": round(s / n, 4)} for name, (h, s, n) in totals.items()}}


def _archive_pieces(session: Sequence[tuple[str, str]]) -> list[str]:
    return split_text_chunks("\n\n".join(text for _id, text in session), ARCHIVE_CHUNK_CHARS, overlap=ARCHIVE_OVERLAP)


def measure_locomo(conversations: Sequence[Conversation], embedder: DiskMemo, folder: Path,
                   say: Callable[[str], None] = print, archive_only: Collection[str] | None = None) -> dict[str, Any]:
    """recall@5 of every configuration on LoCoMo, stored per turn and per archive chunk
    (the archive only for the conversations named in ``archive_only``, when given)."""
    archived = [c for c in conversations if archive_only is None or c.name in archive_only]
    turns = [text for c in conversations for s in c.sessions for _id, text in s]
    pieces = [p for c in archived for s in c.sessions for p in _archive_pieces(s)]
    say(f"LoCoMo：{len(conversations)} 局对话，{len(turns)} 轮，{len(pieces)} 个归档段")
    embedder.fill([*turns, *pieces], query=False, say=say)
    embedder.fill([q.text for c in conversations for q in c.questions], query=True, say=say)
    out: dict[str, Any] = {}
    for storage, chosen in (("turn", conversations), ("archive", archived)):
        totals: dict[str, list[float]] = {}
        documents = 0
        for conversation in chosen:
            memory, store = _memory(folder / f"locomo-{storage}-{conversation.name}", embedder)
            owners: dict[str, set[str]] = {}
            for session in conversation.sessions:
                if storage == "turn":
                    for dia_id, text in session:
                        memory.add_manual(text)
                        owners.setdefault(text.strip(), set()).add(dia_id)
                else:
                    memory.archive_compacted("\n\n".join(text for _id, text in session))
            chunks = [c.text for c in memory.list_chunks()]
            documents += len(chunks)
            if storage == "archive":
                texts = {dia_id: text for session in conversation.sessions for dia_id, text in session}
                owners = {c: {d for d, t in texts.items() if t in c or c in t} for c in chunks}
            _score(memory, _holder(owners), conversation.questions, totals)
            store.close()
        out[f"locomo-{storage}"] = _result(totals, documents) | {"conversations": [c.name for c in chosen]}
        say(f"  locomo-{storage}：{json.dumps(out[f'locomo-{storage}']['recall']['默认'])}")
    return out


def measure_madial(sets: dict[str, MadialSet], embedder: DiskMemo, folder: Path,
                   say: Callable[[str], None] = print) -> dict[str, Any]:
    """recall@5 of every configuration on MADial-Bench, per language and query form."""
    out: dict[str, Any] = {}
    for language, data in sets.items():
        embedder.fill([t for memories in data.memories.values() for t in memories.values()], query=False, say=say)
        embedder.fill([q.text for rows in data.questions.values() for _u, q in rows], query=True, say=say)
        memories, stores = {}, []
        for user, items in data.memories.items():
            memory, store = _memory(folder / f"madial-{language}-{user}", embedder)
            for text in items.values():
                memory.add_manual(text)
            memories[user] = memory
            stores.append(store)
        for form, rows in data.questions.items():
            totals: dict[str, list[float]] = {}
            for user, memory in memories.items():
                owners: dict[str, set[str]] = {}
                for key, text in data.memories[user].items():
                    owners.setdefault(text.strip(), set()).add(key)
                _score(memory, _holder(owners), (q for u, q in rows if u == user), totals)
            out[f"madial-{language}-{form}"] = _result(totals, sum(map(len, data.memories.values())))
            say(f"  madial-{language}-{form}：{json.dumps(out[f'madial-{language}-{form}']['recall']['默认'])}")
        for store in stores:
            store.close()
    return out


SOURCES = {"LoCoMo": ("snap-research/locomo", "data/locomo10.zip：10 局长对话，问题带证据轮", "CC BY-NC 4.0"),
           "MADial-Bench": ("hejunqing/MADial-Bench", "data/ch、data/en：每个用户的记忆库和对话，标了相关记忆",
                            "MIT")}
CACHE = ".cache/public-eval"
"""Where the vectors are kept between runs (not tracked)."""


SAMPLE = 32
"""Texts of each kind embedded afresh (not from the cache) to time the embedder."""


def _embed_timing(inner: Embedder, conversations: Sequence[Conversation],
                  madial: dict[str, MadialSet]) -> dict[str, float]:
    """Milliseconds per text for each kind of text, on :data:`SAMPLE` texts of each, uncached."""
    turns = [text for c in conversations for s in c.sessions for _id, text in s]
    pieces = [p for c in conversations for s in c.sessions for p in _archive_pieces(s)]
    kinds: dict[str, tuple[list[str], bool]] = {
        "LoCoMo 一轮": (turns, False), "LoCoMo 归档段": (pieces, False),
        "LoCoMo 提问": ([q.text for c in conversations for q in c.questions], True),
        "MADial 记忆": ([t for d in madial.values() for m in d.memories.values() for t in m.values()], False),
        "MADial 整段对话提问": ([q.text for d in madial.values() for _u, q in d.questions["history"]], True)}
    out = {}
    for kind, (texts, query) in kinds.items():
        sample = texts[:: max(1, len(texts) // SAMPLE)][:SAMPLE]
        began = time.perf_counter()
        embed_query(inner, sample) if query else inner.embed(sample)
        out[kind] = round((time.perf_counter() - began) * 1000 / len(sample), 1)
    return out


def run_public(root: Path, locomo: Path | None, madial: Path | None, cache: Path | None = None,
               embedder: Embedder | None = None, archive_only: Collection[str] | None = None) -> dict[str, Any]:
    """Measure both sets and write the snapshot ``sim/eval/public`` (stamped); ``archive_only``:
    see :func:`measure_locomo`."""
    from liyuan.errors import ConfigError
    from liyuan.vector import E5Embedder

    from ..bench.stamp import close_stamp, stamp
    from .public_data import load_locomo, load_madial, repo_commit
    from .snapshots import write_snapshot

    if locomo is None or madial is None:
        raise ConfigError("要同时给出 --locomo 和 --madial（两套公开数据的克隆）：快照里两套都要有")
    machine = stamp(root)
    conversations = load_locomo(locomo)
    madial_sets = {lang: load_madial(madial, lang) for lang in ("zh", "en")}
    memo = DiskMemo(embedder or E5Embedder(), cache or root / CACHE)
    timing = _embed_timing(memo.inner, conversations, madial_sets)
    sets: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        sets.update(measure_locomo(conversations, memo, Path(folder), archive_only=archive_only))
        sets.update(measure_madial(madial_sets, memo, Path(folder)))
    commits = {"LoCoMo": repo_commit(locomo if locomo.is_dir() else locomo.parent), "MADial-Bench": repo_commit(madial)}
    data = {"machine": close_stamp(machine), "top_k": TOP_K, "embedder": memo.label, "vectors": len(memo),
            "embedded": memo.embedded, "embed_ms": timing,
            "sources": {name: {"repo": repo, "commit": commits[name], "files": files, "licence": licence}
                        for name, (repo, files, licence) in SOURCES.items()},
            "sets": sets}
    write_snapshot(root, "public", data)
    return data
