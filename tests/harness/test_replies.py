"""Reply files: provenance is mandatory, recorded replies are tied to the request they answered."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.running.recorder import MissingReply, Recorder, ReplayBackend, ScriptedBackend
from harness.running.replies import Reply, ReplyBook, StaleReply, call_key, request_json, request_sha256
from harness.running.scenario import ScenarioError
from liyuan.errors import ModelError
from liyuan.model import request


def ask(user: str = "对话原文") -> object:
    return request("summary", "你是场记。", user, max_tokens=4096)


def recorded(key: str, user: str = "对话原文") -> Reply:
    req = ask(user)
    return Reply(key=key, text="## 前情提要\n……", provenance="model:m-1", model="m-1",
                 parameters={"temperature": 0}, request=request_json(req), request_sha256=request_sha256(req),
                 usage={"prompt_tokens": 10, "completion_tokens": 5}, latency_ms=12)


def test_call_keys() -> None:
    assert call_key("compact-jA", "summary", 1) == "compact-jA:summary"
    assert call_key("play-1", "summary", 2) == "play-1:summary#2"


def test_hash_changes_with_any_part_of_the_request() -> None:
    base = request_sha256(ask())
    assert base == request_sha256(ask())
    assert base != request_sha256(ask("对话原文。"))
    assert base != request_sha256(request("summary", "你是书记。", "对话原文"))
    assert base != request_sha256(request("summary", "你是场记。", "对话原文", max_tokens=100))


def test_book_round_trip(tmp_path: Path) -> None:
    book = ReplyBook("demo")
    book.add(Reply("a:summary", "第一行\n第二行\n", "scripted", note="人工撰写"))
    book.add(recorded("b:recap"))
    path = tmp_path / "demo.yaml"
    path.write_text(book.dump(), encoding="utf-8")
    assert "text: |" in path.read_text(encoding="utf-8")  # block scalar, readable
    loaded = ReplyBook.load(path)
    assert loaded.replies == book.replies
    assert loaded.get("a:summary").scripted
    assert not loaded.get("b:recap").scripted


@pytest.mark.parametrize(("entry", "message"), [
    ({"text": "x"}, "provenance 必须是 scripted"),
    ({"provenance": "gpt", "text": "x"}, "provenance 必须是 scripted"),
    ({"provenance": "model:m", "text": "x"}, "必须带 request_sha256"),
    ({"provenance": "scripted"}, "缺少 text"),
    ({"provenance": "scripted", "text": "x", "colour": 1}, "未知字段 colour"),
])
def test_malformed_reply_files(tmp_path: Path, entry: dict[str, object], message: str) -> None:
    import yaml

    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump({"scenario": "demo", "replies": {"k": entry}}, allow_unicode=True),
                    encoding="utf-8")
    with pytest.raises(ScenarioError, match=message):
        ReplyBook.load(path)


def test_scripted_replies_are_served_by_key_regardless_of_prompt() -> None:
    book = ReplyBook("demo", {"s1:summary": Reply("s1:summary", "摘要正文", "scripted")})
    recorder = Recorder(ScriptedBackend(book))
    recorder.begin_step("s1")
    completion = recorder.complete(ask("完全不同的 prompt"))
    assert completion.text == "摘要正文"
    assert completion.provenance == "scripted"
    assert recorder.calls[0].key == "s1:summary"
    assert recorder.fatal is None


def test_missing_reply_is_fatal_even_if_the_caller_swallows_it() -> None:
    recorder = Recorder(ScriptedBackend(ReplyBook("demo", path="sim/replies/demo.yaml")))
    recorder.begin_step("s1")
    with pytest.raises(MissingReply, match="没有 s1:summary 的回复"):
        recorder.complete(ask())
    assert isinstance(recorder.fatal, MissingReply)
    assert recorder.calls[0].error is not None


def test_scripted_error_reply_raises_a_model_error_but_is_not_fatal() -> None:
    book = ReplyBook("demo", {"s1:summary": Reply("s1:summary", "", "scripted", error="429 太多请求")})
    recorder = Recorder(ScriptedBackend(book))
    recorder.begin_step("s1")
    with pytest.raises(ModelError, match="429"):
        recorder.complete(ask())
    assert recorder.fatal is None


def test_recorded_reply_is_served_for_the_same_request() -> None:
    recorder = Recorder(ReplayBackend(ReplyBook("demo", {"s1:summary": recorded("s1:summary")})))
    recorder.begin_step("s1")
    completion = recorder.complete(ask())
    assert completion.provenance == "model:m-1"
    assert completion.usage is not None and completion.usage.prompt_tokens == 10


def test_recorded_reply_is_stale_when_the_prompt_changed() -> None:
    recorder = Recorder(ReplayBackend(ReplyBook("demo", {"s1:summary": recorded("s1:summary")})))
    recorder.begin_step("s1")
    with pytest.raises(StaleReply) as info:
        recorder.complete(ask("对话原文，多了一句"))
    message = str(info.value)
    assert "已过期" in message and "s1:summary" in message
    assert "-对话原文" in message and "+对话原文，多了一句" in message
    assert isinstance(recorder.fatal, StaleReply)
