"""The side-model client against a mock transport, and the scripted doubles."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from liyuan.errors import ConfigError, ModelError
from liyuan.model import (
    ChatMessage,
    Completion,
    FunctionModel,
    ModelRequest,
    OpenAIModel,
    ScriptedModel,
    request,
    split_reasoning,
    texts,
)

SECRET = "sk-test-very-secret-key-123"


def reply(content: str, **message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "side-model-1",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content, **message}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 34, "total_tokens": 154},
    }


class Endpoint:
    """A fake Chat Completions endpoint: serves queued (status, body) pairs, records requests."""

    def __init__(self, *responses: tuple[int, dict[str, Any]]) -> None:
        self.responses = list(responses)
        self.requests: list[httpx2.Request] = []

    def __call__(self, req: httpx2.Request) -> httpx2.Response:
        self.requests.append(req)
        status, body = self.responses.pop(0)
        return httpx2.Response(status, json=body)

    def model(self, **kwargs: Any) -> tuple[OpenAIModel, list[float]]:
        sleeps: list[float] = []
        client = httpx2.Client(transport=httpx2.MockTransport(self))
        model = OpenAIModel(model="side-model-1", base_url="http://side.test/v1", api_key=SECRET,
                            http_client=client, sleep=sleeps.append, **kwargs)
        return model, sleeps


ERROR = {"error": {"message": f"bad key {SECRET}", "type": "x"}}


def ask() -> ModelRequest:
    return request("summary", "系统", "用户的话", max_tokens=321)


def test_usage_text_and_request_body(allow_model_requests: None) -> None:
    endpoint = Endpoint((200, reply("<think>先理一理</think>\n## 前情提要\n正文")))
    model, sleeps = endpoint.model()
    completion = model.complete(ask())
    assert completion.text == "## 前情提要\n正文"
    assert completion.reasoning == "先理一理"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (120, 34)
    assert completion.model == "side-model-1" and completion.provenance == "model:side-model-1"
    assert sleeps == []
    [sent] = endpoint.requests
    assert sent.url.path == "/v1/chat/completions"
    body = json.loads(sent.content)
    assert body["messages"] == [{"role": "system", "content": "系统"}, {"role": "user", "content": "用户的话"}]
    assert body["max_tokens"] == 321 and body["model"] == "side-model-1"
    assert sent.headers["authorization"] == f"Bearer {SECRET}"


def test_reasoning_field_is_split_off(allow_model_requests: None) -> None:
    model, _ = Endpoint((200, reply("答案", reasoning_content="推理过程"))).model()
    completion = model.complete(ask())
    assert (completion.text, completion.reasoning) == ("答案", "推理过程")


def test_retries_429_then_succeeds(allow_model_requests: None) -> None:
    endpoint = Endpoint((429, ERROR), (503, ERROR), (200, reply("好了")))
    model, sleeps = endpoint.model(backoff=0.5)
    assert model.complete(ask()).text == "好了"
    assert len(endpoint.requests) == 3
    assert sleeps == [0.5, 1.0]


def test_gives_up_after_max_retries(allow_model_requests: None) -> None:
    endpoint = Endpoint(*[(429, ERROR)] * 3)
    model, sleeps = endpoint.model(max_retries=2)
    with pytest.raises(ModelError) as info:
        model.complete(ask())
    assert len(endpoint.requests) == 3 and len(sleeps) == 2
    assert "已重试 2 次" in str(info.value)
    assert SECRET not in str(info.value)


def test_400_is_not_retried_and_hides_the_key(allow_model_requests: None) -> None:
    endpoint = Endpoint((400, ERROR), (200, reply("不该到这里")))
    model, sleeps = endpoint.model()
    with pytest.raises(ModelError) as info:
        model.complete(ask())
    assert len(endpoint.requests) == 1 and sleeps == []
    assert "HTTP 400" in str(info.value)
    assert SECRET not in str(info.value)
    assert SECRET not in repr(model)


def test_a_refusal_carries_the_servers_own_message(allow_model_requests: None) -> None:
    said = {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                 "Use 'max_completion_tokens' instead.", "type": "invalid_request_error"}}
    model, _ = Endpoint((400, said)).model()
    with pytest.raises(ModelError) as info:
        model.complete(ask())
    assert str(info.value).startswith("模型请求失败：HTTP 400：Unsupported parameter: 'max_tokens'")
    assert "max_completion_tokens" in str(info.value)
    model, _ = Endpoint((404, {"message": f"no model here ({SECRET})" + "。" * 1000})).model()
    with pytest.raises(ModelError) as info:
        model.complete(ask())
    assert "HTTP 404：no model here (***)" in str(info.value) and SECRET not in str(info.value)
    assert len(str(info.value)) < 400  # capped: a huge error page does not flood the activity line


def test_max_tokens_param_names_the_budget(allow_model_requests: None, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = Endpoint((200, reply("好")), (200, reply("好")), (200, reply("好")))
    model, _ = endpoint.model(max_tokens_param="max_completion_tokens")
    model.complete(ask())
    body = json.loads(endpoint.requests[-1].content)
    assert body["max_completion_tokens"] == 321 and "max_tokens" not in body
    monkeypatch.setenv("LIYUAN_MAX_TOKENS_PARAM", "max_completion_tokens")
    model, _ = endpoint.model()
    assert model.max_tokens_param == "max_completion_tokens"
    model, _ = endpoint.model(max_tokens_param="max_tokens")  # an explicit argument wins over the env
    model.complete(ask())
    assert json.loads(endpoint.requests[-1].content)["max_tokens"] == 321
    monkeypatch.setenv("LIYUAN_MAX_TOKENS_PARAM", "max_new_tokens")
    with pytest.raises(ConfigError, match="max_completion_tokens"):
        endpoint.model()
    with pytest.raises(ConfigError):
        endpoint.model(max_tokens_param="tokens")


def test_finish_reason_is_recorded(allow_model_requests: None) -> None:
    spent = reply("", reasoning_content="想了很久" * 100)
    spent["choices"][0]["finish_reason"] = "length"
    model, _ = Endpoint((200, reply("好")), (200, spent)).model()
    assert model.complete(ask()).finish_reason == "stop"
    completion = model.complete(ask())
    assert completion.text == "" and completion.finish_reason == "length"
    assert Completion("脚本").finish_reason == ""


def test_connection_errors_are_retried(allow_model_requests: None) -> None:
    attempts: list[int] = []

    def flaky(req: httpx2.Request) -> httpx2.Response:
        attempts.append(1)
        if len(attempts) < 3:
            raise httpx2.ConnectError(f"refused {SECRET}", request=req)
        return httpx2.Response(200, json=reply("通了"))

    sleeps: list[float] = []
    model = OpenAIModel(model="m", base_url="http://side.test/v1", api_key=SECRET, sleep=sleeps.append,
                        http_client=httpx2.Client(transport=httpx2.MockTransport(flaky)))
    assert model.complete(ask()).text == "通了"
    assert len(attempts) == 3 and sleeps == [1.0, 2.0]
    attempts.clear()
    model.max_retries = 1
    with pytest.raises(ModelError) as info:
        model.complete(ask())
    assert SECRET not in str(info.value) and len(attempts) == 2


def test_empty_choices_is_a_model_error(allow_model_requests: None) -> None:
    body = reply("x")
    body["choices"] = []
    model, _ = Endpoint((200, body)).model()
    with pytest.raises(ModelError, match="choices"):
        model.complete(ask())


def test_refused_when_requests_are_blocked() -> None:
    endpoint = Endpoint((200, reply("不该到这里")))
    model, _ = endpoint.model()
    with pytest.raises(ModelError, match="禁止"):
        model.complete(ask())
    assert endpoint.requests == []


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError):
        OpenAIModel()
    monkeypatch.setenv("LIYUAN_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.test/v1")
    model = OpenAIModel()
    assert (model.model, model.base_url) == ("env-model", "http://env.test/v1")


def test_split_reasoning() -> None:
    assert split_reasoning("<think>a</think>b<thinking>c</thinking>d") == ("bd", "a\n\nc")
    assert split_reasoning("答<think>没想完") == ("答", "没想完")
    assert split_reasoning("无推理") == ("无推理", "")


def test_scripted_model_in_order_and_by_purpose() -> None:
    model = ScriptedModel({"summary": ["摘要"], "recap": [Completion("复盘")]})
    model.enqueue("通用")
    assert model.complete(ask()).text == "摘要"
    assert model.complete(ask()).text == "通用"
    recap = ModelRequest((ChatMessage("user", "x"),), "recap")
    assert model.complete(recap).text == "复盘"
    with pytest.raises(ModelError, match="用完"):
        model.complete(ask())
    assert texts(model.calls) == ["用户的话", "用户的话", "x", "用户的话"]
    assert model.complete is not None and all(c.purpose for c in model.calls)


def test_scripted_replies_are_labelled_scripted() -> None:
    assert ScriptedModel(["<think>x</think>答"]).complete(ask()) == Completion("答", reasoning="x")
    assert FunctionModel(lambda r: r.purpose).complete(ask()).provenance == "scripted"
    with pytest.raises(ModelError):
        ScriptedModel([ModelError("429")]).complete(ask())


@pytest.mark.parametrize("failure", ["refused", "unreachable", "timeout"])
def test_a_failed_request_names_the_url_it_tried_without_credentials(allow_model_requests: None,
                                                                       failure: str) -> None:
    def server(req: httpx2.Request) -> httpx2.Response:
        if failure == "unreachable":
            raise httpx2.ConnectError("connection refused", request=req)
        if failure == "timeout":
            raise httpx2.ReadTimeout("slow", request=req)
        return httpx2.Response(404, json={"error": {"message": "model not found"}})

    model = OpenAIModel(model="m", base_url="http://user42:pa55@side.test:8080/v1?token=x", api_key=SECRET,
                        max_retries=1, sleep=lambda _s: None, deadline=60,
                        http_client=httpx2.Client(transport=httpx2.MockTransport(server)))
    with pytest.raises(ModelError) as info:
        model.complete(ask())
    message = str(info.value)
    assert "http://side.test:8080/v1/chat/completions" in message, message
    assert "pa55" not in message and "token=x" not in message and SECRET not in message
