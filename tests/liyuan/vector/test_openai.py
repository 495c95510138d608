"""The OpenAI-compatible embedder, against a mock transport (no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import pytest

from liyuan.errors import ModelError
from liyuan.vector import OpenAIEmbedder, SqliteChunkStore, VectorConfig, VectorMemory
from liyuan.vector.config import OpenAIEmbedConfig
from liyuan.vector.factory import make_embedder


def fake_vector(text: str) -> list[float]:
    # Deterministic, text-dependent, deliberately not unit length.
    return [float(len(text)), float(sum(map(ord, text)) % 97), 3.0]


def client(seen: list[dict[str, Any]], *, status: int = 200, drop: int = 0) -> httpx2.Client:
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        seen.append({"url": str(request.url), "body": body, "auth": request.headers.get("authorization")})
        if status != 200:
            return httpx2.Response(status, json={"error": {"message": "boom"}})
        inputs = [body["input"]] if isinstance(body["input"], str) else body["input"]
        rows = [{"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(inputs)]
        rows = list(reversed(rows))[drop:]  # out of order on purpose
        return httpx2.Response(200, json={"object": "list", "model": body["model"], "data": rows,
                                          "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    return httpx2.Client(transport=httpx2.MockTransport(handler))


@pytest.mark.usefixtures("allow_model_requests")
def test_rows_are_sorted_by_index_and_normalised() -> None:
    seen: list[dict[str, Any]] = []
    embedder = OpenAIEmbedder("bge-m3", base_url="http://embed.test/v1", api_key="k", http_client=client(seen))
    vectors = embedder.embed(["玉佩", "东门外的石阶"])
    expected = np.array([fake_vector("玉佩"), fake_vector("东门外的石阶")], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected)
    assert seen[0]["url"] == "http://embed.test/v1/embeddings"
    assert seen[0]["body"]["model"] == "bge-m3" and seen[0]["body"]["input"] == ["玉佩", "东门外的石阶"]
    assert seen[0]["auth"] == "Bearer k"
    assert embedder.label == "openai:bge-m3"


@pytest.mark.usefixtures("allow_model_requests")
def test_single_input_is_sent_as_a_string_and_batches_split() -> None:
    seen: list[dict[str, Any]] = []
    embedder = OpenAIEmbedder("m", base_url="http://embed.test/v1", http_client=client(seen), batch_size=2)
    assert embedder.embed(["一"]).shape == (1, 3)
    assert seen[0]["body"]["input"] == "一"
    assert embedder.embed(["一", "二", "三"]).shape == (3, 3)
    assert [len(s["body"]["input"]) for s in seen[1:]] == [2, 1]


@pytest.mark.usefixtures("allow_model_requests")
def test_count_mismatch_and_http_errors_are_model_errors() -> None:
    short = OpenAIEmbedder("m", base_url="http://embed.test/v1", http_client=client([], drop=1))
    with pytest.raises(ModelError, match="应为 2 个"):
        short.embed(["一", "二"])
    failing = OpenAIEmbedder("m", base_url="http://embed.test/v1", http_client=client([], status=401))
    with pytest.raises(ModelError, match="401"):
        failing.embed(["一"])


def test_refused_while_model_requests_are_blocked() -> None:
    seen: list[dict[str, Any]] = []
    embedder = OpenAIEmbedder("m", base_url="http://embed.test/v1", http_client=client(seen))
    with pytest.raises(ModelError, match="禁止"):
        embedder.embed(["玉佩"])
    assert seen == []


@pytest.mark.usefixtures("allow_model_requests")
def test_memory_on_the_endpoint_labels_its_chunks(tmp_path: Path) -> None:
    config = VectorConfig(enabled=True, embedder="openai",
                          openai=OpenAIEmbedConfig(base_url="http://embed.test/v1", model="bge-m3"))
    embedder = make_embedder(config, http_client=client([]))
    memory = VectorMemory(config, SqliteChunkStore(tmp_path / "c.sqlite"), embedder)
    memory.import_text("青梧是镇北那棵老树的名字。")
    (chunk,) = memory.list_chunks()
    assert chunk.embedder == "openai:bge-m3"
    assert memory.search("青梧")[0].text == "青梧是镇北那棵老树的名字。"


def test_a_failing_endpoint_fails_the_write_loudly_and_the_recall_quietly(tmp_path: Path) -> None:
    from liyuan.vector.recall import recall_for_turn

    config = VectorConfig(enabled=True, embedder="openai")
    memory = VectorMemory(config, SqliteChunkStore(tmp_path / "c.sqlite"), make_embedder(config))
    with pytest.raises(ModelError):
        memory.import_text("青梧是镇北那棵老树的名字。")
    assert memory.store.count() == 0
    warnings: list[str] = []
    assert recall_for_turn(memory, "青梧", None, warn=warnings.append) == []
    assert "出错" in warnings[0]


# -- key and endpoint come from the environment (review finding 1) ----------------------


@pytest.fixture
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MY_EMBED_KEY"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.usefixtures("allow_model_requests")
def test_the_default_config_follows_openai_base_url_and_key(no_openai_env: pytest.MonkeyPatch) -> None:
    no_openai_env.setenv("OPENAI_BASE_URL", "http://local-embed.test/v1")
    no_openai_env.setenv("OPENAI_API_KEY", "env-key-0123456789")
    seen: list[dict[str, Any]] = []
    embedder = make_embedder(VectorConfig(embedder="openai"), http_client=client(seen))
    embedder.embed(["玉佩"])
    assert seen[0]["url"] == "http://local-embed.test/v1/embeddings"
    assert seen[0]["auth"] == "Bearer env-key-0123456789"


@pytest.mark.usefixtures("allow_model_requests")
def test_a_named_key_variable_and_a_legacy_key(no_openai_env: pytest.MonkeyPatch) -> None:
    no_openai_env.setenv("MY_EMBED_KEY", "mine-0123456789")
    no_openai_env.setenv("OPENAI_API_KEY", "not-this-one")
    seen: list[dict[str, Any]] = []
    named = OpenAIEmbedConfig(base_url="http://embed.test/v1", api_key_env="MY_EMBED_KEY", model="m")
    make_embedder(VectorConfig(embedder="openai", openai=named), http_client=client(seen)).embed(["一"])
    assert seen[-1]["auth"] == "Bearer mine-0123456789"
    # A key an older file still carries goes with that file's endpoint and wins.
    legacy = OpenAIEmbedConfig(base_url="http://embed.test/v1", model="m", legacy_api_key="sk-old-0123456789")
    make_embedder(VectorConfig(embedder="openai", openai=legacy), http_client=client(seen)).embed(["一"])
    assert seen[-1]["auth"] == "Bearer sk-old-0123456789"


@pytest.mark.usefixtures("allow_model_requests")
def test_a_refused_endpoint_is_visible_in_recall_and_search(
    tmp_path: Path, no_openai_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from liyuan.vector.recall import recall_for_turn

    no_openai_env.setenv("OPENAI_BASE_URL", "http://local-embed.test/v1")
    config = VectorConfig(enabled=True, embedder="openai", recall_mode="semantic")
    memory = VectorMemory(config, SqliteChunkStore(tmp_path / "c.sqlite"),
                          make_embedder(config, http_client=client([], status=401)))
    warnings: list[str] = []
    assert recall_for_turn(memory, "青梧在哪里", None, warn=warnings.append) == []
    assert len(warnings) == 1 and "401" in warnings[0] and "OPENAI_API_KEY" in warnings[0]
    assert "http://local-embed.test/v1/embeddings" in warnings[0]

    report = memory.search_report("青梧在哪里")
    assert report.hits == [] and set(report.status.values()) == {"error"}
    assert all("401" in message for message in report.errors.values())

    with caplog.at_level("WARNING"):
        assert recall_for_turn(memory, "青梧在哪里", None) == []  # no callback: logged, not dropped
    assert any("401" in r.getMessage() for r in caplog.records)


@pytest.mark.usefixtures("allow_model_requests")
def test_errors_never_carry_the_key(no_openai_env: pytest.MonkeyPatch) -> None:
    no_openai_env.setenv("OPENAI_API_KEY", "sk-very-secret-0123456789")
    embedder = OpenAIEmbedder("m", base_url="http://embed.test/v1", http_client=client([], status=403))
    with pytest.raises(ModelError) as caught:
        embedder.embed(["一"])
    assert "403" in str(caught.value) and "环境变量 OPENAI_API_KEY" in str(caught.value)
    assert "sk-very-secret" not in str(caught.value)
