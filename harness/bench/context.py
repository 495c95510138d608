"""Context for chunks, measured (issue 25, ``python -m harness bench --only context``).

An answer often sits in a turn that leans on the one before ("Why not, I'll give it a
go" answers an invitation to a pottery class). Each story set is stored in five ways
and searched with the keyword list alone and with the shipped default:

- ``turn``: one chunk per turn (how the recall table stores it).
- ``turn+embed-context``: one chunk per turn, but its vector is computed from the turn
  before and the turn together (the text, and so the keyword list, is the turn alone).
- ``turn+overlap``: one chunk per turn that repeats the turn before.
- ``archive``: the turns as a compaction archives them (``名字：正文`` paragraphs packed
  into 600-character chunks, :func:`liyuan.vector.chunking.split_text_chunks`).
- ``archive+overlap``: the same with a one-turn overlap (the shipped archive).

A query counts as recalled when one of the five results holds the text of a turn
labelled as its answer, so a chunk holding several turns may answer several queries:
compare rows of the same storage, and mind that overlap stores more characters.

Invariant: measures and reports; nothing here changes how liyuan recalls.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from liyuan.vector.chunking import ARCHIVE_CHUNK_CHARS, split_text_chunks
from liyuan.vector.chunkstore import NewChunk
from liyuan.vector.config import EXTERNAL

from .methods import DEFAULT_METHOD, METHODS, STORIES, TOP_K, load_story, memory_for, story_chunks

STORAGES = ("turn", "turn+embed-context", "turn+overlap", "archive", "archive+overlap")
CONTEXT_METHODS = ("lexical", DEFAULT_METHOD)


def _turns(story: dict[str, Any]) -> list[tuple[str, int]]:
    """Every stored turn in order with the turn it is (0 for a user's line)."""
    return list(story_chunks(story).items())


def _speaker_text(text: str, answer: int, story: dict[str, Any]) -> str:
    if story.get("speakers"):
        return text  # already "Name: words"
    return f"{'用户' if answer == 0 else '旁白'}：{text}"


def stored_chunks(story: dict[str, Any], storage: str) -> list[tuple[str, str, set[int]]]:
    """``(text, text to embed, turns it holds)`` per chunk for one storage."""
    turns = _turns(story)
    if storage.startswith("archive"):
        paragraphs = [_speaker_text(t, a, story) for t, a in turns]
        overlap = 1 if storage.endswith("overlap") else 0
        out = []
        for chunk in split_text_chunks("\n\n".join(paragraphs), ARCHIVE_CHUNK_CHARS, overlap=overlap):
            holds = {a for p, (_t, a) in zip(paragraphs, turns, strict=True) if p in chunk}
            out.append((chunk, chunk, holds))
        return out
    out = []
    for i, (text, answer) in enumerate(turns):
        before = turns[i - 1][0] if i else ""
        if storage == "turn+overlap" and before:
            joined = f"{before}\n\n{text}"
            out.append((joined, joined, {answer, turns[i - 1][1]}))
        elif storage == "turn+embed-context" and before:
            out.append((text, f"{before}\n\n{text}", {answer}))
        else:
            out.append((text, text, {answer}))
    return out


def _recall(memory: Any, holds: dict[str, set[int]], queries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    by_kind: dict[str, list[bool]] = {}
    for query in queries:
        found: set[int] = set()
        for hit in memory.search(query["q"], top_k=TOP_K):
            found |= holds.get(hit.text, set())
        by_kind.setdefault(query["kind"], []).append(bool(found & set(query["turns"])))
    every = [ok for oks in by_kind.values() for ok in oks]
    return {"recall_at_5": sum(every) / len(every) if every else 0.0,
            "by_kind": {k: sum(v) / len(v) for k, v in by_kind.items()}}


def context_table(folder: Path, storages: Sequence[str] = STORAGES,
                  methods: Sequence[str] = CONTEXT_METHODS) -> dict[str, Any]:
    """recall@5 per story, query set, storage and method."""
    by_name = {m.name: m for m in METHODS}
    stories: dict[str, Any] = {}
    for language in STORIES:
        story = load_story(language)
        sets = {"labelled": story["queries"], "heldout": story.get("heldout_queries") or []}
        rows: dict[str, Any] = {}
        for storage in storages:
            chunks = stored_chunks(story, storage)
            rows[storage] = {"chunks": len(chunks), "chars": sum(len(c[0]) for c in chunks)}
            for name in methods:
                memory = memory_for(folder / f"context-{language}-{storage}", by_name[name], remember=True)
                vectors = memory.embedder.embed([c[1] for c in chunks])
                memory.store.add([NewChunk(EXTERNAL, text, vectors[i], memory.embedder.label, "manual")
                                  for i, (text, _e, _h) in enumerate(chunks)], max_chunks=5000)
                holds = {text: h for text, _e, h in chunks}
                rows[storage][name] = {s: _recall(memory, holds, qs) for s, qs in sets.items() if qs}
        stories[language] = rows
    return {"top_k": TOP_K, "methods": list(methods), "stories": stories}


def print_context(table: dict[str, Any]) -> None:
    """One line per story, storage and query set: recall@5 of each method."""
    methods = table["methods"]
    print(f"\n段落的上下文（recall@{table['top_k']}；结果里含答案那一轮的原文就算召回）")
    print(f"{'故事/题':<18}{'存法':<22}{'段数':>6}{'字数':>8}" + "".join(f"{m:>12}" for m in methods))
    for language, rows in table["stories"].items():
        for storage, row in rows.items():
            for set_name in row[methods[0]]:
                cells = "".join(f"{row[m][set_name]['recall_at_5']:>12.3f}" for m in methods)
                print(f"{language + '/' + set_name[:4]:<18}{storage:<22}{row['chunks']:>6}{row['chars']:>8}{cells}")
