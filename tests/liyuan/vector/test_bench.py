"""The recall benchmark's data and entry point (numbers are printed by ``nox -s bench``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import bench
from harness.bench import latency as bench_latency


def test_story_has_enough_beats_and_labelled_queries() -> None:
    story = bench.load_story()
    beats = story["beats"]
    assert len(beats) >= 60 and len(set(beats)) == len(beats)
    assert all(len(b) >= 30 for b in beats)  # real sentences, not fragments
    for key, minimum in (("queries", 30), ("heldout_queries", 10)):
        queries = story[key]
        assert len(queries) >= minimum
        assert {q["kind"] for q in queries} == {"name", "object", "paraphrase"}
        assert all(q["beats"] and all(1 <= b <= len(beats) for b in q["beats"]) for q in queries)


@pytest.mark.parametrize("language", ["zh", "en"])
def test_name_and_object_queries_share_a_word_with_their_answer(language: str) -> None:
    # Labels are checked, not trusted: a name/object query must literally overlap its beat.
    story = bench.load_story(language)
    from liyuan.vector.lexical import bigram_terms

    for q in story["queries"] + story["heldout_queries"]:
        if q["kind"] == "paraphrase":
            continue
        terms = set(bigram_terms(q["q"]))
        assert any(terms & set(bigram_terms(story["beats"][b - 1])) for b in q["beats"]), q["q"]


@pytest.mark.parametrize("language", ["en", "mixed"])
def test_other_languages_have_labelled_queries(language: str) -> None:
    story = bench.load_story(language)
    beats, turns = story["beats"], story.get("user_turns") or []
    assert len(beats) >= 20 and len(set(beats + turns)) == len(beats) + len(turns)
    assert not turns or len(turns) == len(beats)
    assert len(story["queries"]) >= 20
    every = story["queries"] + story.get("heldout_queries", [])
    assert all(q["beats"] and all(1 <= b <= len(beats) for b in q["beats"]) for q in every)
    if language == "en":  # held out like the Chinese set: judged on queries nothing was chosen on
        assert len(story["heldout_queries"]) >= 10
        assert {q["kind"] for q in story["heldout_queries"]} == {"name", "object", "paraphrase"}


def test_synthetic_chunks_are_deterministic_and_distinct() -> None:
    first = bench_latency.synthetic_texts(300)
    assert first == bench_latency.synthetic_texts(300) and len(set(first)) == 300
    assert bench_latency.synthetic_texts(50)[:10] == first[:10]


def test_bench_writes_token_and_recall_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the zero-dependency methods, to keep the suite fast; the full set runs in nox -s bench.
    monkeypatch.setattr(bench, "METHODS", [m for m in bench.METHODS if m.embedder == "hash"])
    assert bench.main(["--only", "tokens", "--only", "recall", "--out", str(tmp_path)]) == 0
    tokens = json.loads((tmp_path / "tokens.json").read_text(encoding="utf-8"))
    assert [r["sample"] for r in tokens["rows"]] == ["tokens_zh.txt", "tokens_en.txt", "tokens_mixed.txt"]
    assert all(abs(r["estimate_error"]) <= 0.2 for r in tokens["rows"])
    recall = json.loads((tmp_path / "recall.json").read_text(encoding="utf-8"))
    assert set(recall["languages"]) == {"zh", "en", "mixed"}
    for language in recall["languages"].values():
        assert set(language["methods"]) == {m.name for m in bench.METHODS}
        for sets in language["methods"].values():
            assert 0.0 <= sets["labelled"]["recall_at_5"] <= 1.0


def test_quick_recall_uses_only_the_methods_that_load_no_model(tmp_path: Path) -> None:
    table = bench.recall_table(tmp_path, bench.QUICK_METHODS)
    for language in table["languages"].values():
        assert set(language["methods"]) == set(bench.QUICK_METHODS)
