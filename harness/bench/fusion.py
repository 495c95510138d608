"""How the default fusion was chosen (``python -m harness bench --only fusion``, issue 36).

No weight per language is fitted to the project's own queries (issue 36: the English e5
weight, fitted to 10 on these sets where e5 is strong, let anything in e5's top 50
outrank every hit only the keyword list found, on data it was never tuned on). The
candidates all weigh the two lists alike: reciprocal rank fusion (``rrf``) or min-max
normalised scores (``mix``), each with 1 to 3 places reserved for each list's first
hits. The procedure is leave-one-set-out cross-validation over the four sets of
:data:`harness.bench.methods.STORIES` (labelled and held-out queries together): the
candidate with the most hits on three sets (ties: fewer reserved places, then ``rrf``)
is scored on the fourth, which took no part in choosing it. The default is the
candidate the same rule picks on all four. Printed per set: keyword alone, e5 alone,
the old default (weighted RRF, e5 3 on Chinese and 10 on English, one reserved place),
every candidate, each fold's choice.

No public set takes part in the choice. The two public conversational-memory sets
(LoCoMo, MADial-Bench) are measured afterwards, held out, by ``python -m harness eval
public`` (:mod:`harness.eval.public`, snapshot ``sim/eval/public``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from .methods import STORIES, TOP_K, Method, load_story, memory_for, story_chunks

__all__ = ["CANDIDATES", "OLD_WEIGHTS", "candidate_name", "fusion_table", "print_fusion"]

CANDIDATES: tuple[tuple[str, int], ...] = tuple((f, r) for f in ("rrf", "mix") for r in (1, 2, 3))
"""``(fusion, reserved places per list)``, every one with equal weights."""
OLD_WEIGHTS = {"e5": {"cjk": 3.0, "latin": 10.0}}
"""The default before issue 36 (fitted per script on these sets)."""


def candidate_name(fusion: str, reserve: int) -> str:
    return f"{fusion}·等权·保留{reserve}"


def fusion_table(folder: Path) -> dict[str, Any]:
    """Hits per set and configuration, and the cross-validated choice (see the module docstring)."""
    rows: dict[str, dict[str, list[int]]] = {}
    for language in STORIES:
        story = load_story(language)
        index = story_chunks(story)
        memory = memory_for(folder / f"fusion-{language}", Method("hybrid-e5", "hybrid", "e5"), remember=True)
        for text in index:
            memory.add_manual(text)
        base = memory.config
        queries = [*story["queries"], *(story.get("heldout_queries") or [])]
        configs: list[tuple[str, str, str, dict[str, dict[str, float]], int]] = [
            ("关键词", "lexical", "rrf", base.fusion_weights, 1),
            ("e5", "semantic", "rrf", base.fusion_weights, 1),
            ("旧默认", "hybrid", "rrf", OLD_WEIGHTS, 1),
            *((candidate_name(f, r), "hybrid", f, {"e5": {"cjk": 1.0, "latin": 1.0}}, r) for f, r in CANDIDATES),
        ]
        for name, mode, fusion, weights, reserve in configs:
            memory.config = replace(base, recall_mode=mode, fusion_weights=weights)  # type: ignore[arg-type]
            memory.fusion, memory.reserve = fusion, reserve  # type: ignore[assignment]
            hits = sum(any(b in [index[h.text] for h in memory.search(q["q"], top_k=TOP_K)] for b in q["turns"])
                       for q in queries)
            rows.setdefault(language, {})[name] = [hits, len(queries)]
    names = [candidate_name(f, r) for f, r in CANDIDATES]

    def best(sets: list[str]) -> str:  # ties: fewer reserved places, then rrf (the order of CANDIDATES)
        return max(names, key=lambda n: (sum(rows[s][n][0] for s in sets), -names.index(n)))

    folds = {held: best([s for s in STORIES if s != held]) for held in STORIES}
    return {"top_k": TOP_K, "sets": rows, "folds": folds, "chosen": best(list(STORIES))}


def print_fusion(table: dict[str, Any]) -> None:
    """Recall@5 per set (labelled and held-out queries together) and the choice of each fold."""
    print(f"\n融合方式的选择：每套题 recall@{table['top_k']}（标注题和留出题合在一起），"
          "留一套交叉验证（在另外三套上挑，在这一套上量）")
    for language, row in table["sets"].items():
        n = next(iter(row.values()))[1]
        chosen = table["folds"][language]
        cells = "；".join(f"{name} {hits / total:.3f}" for name, (hits, total) in row.items())
        print(f"  {language}（{n} 题）：{cells}")
        print(f"    这一套留出时，另外三套挑中「{chosen}」，在这一套上 {row[chosen][0] / row[chosen][1]:.3f}；"
              f"关键词 {row['关键词'][0] / n:.3f}，e5 {row['e5'][0] / n:.3f}")
    print(f"  四套一起挑：「{table['chosen']}」")
