"""Issue 14, item 7: secrets stay out of tracebacks; bad endpoint replies and slow servers are ModelErrors.

Endpoints here are httpx2 mock transports and, for the deadline, a real HTTP server on
127.0.0.1 that sends one byte at a time (bounded: it stops after a few seconds or as soon
as the client goes away). Every reply body is hand-written; no model wrote it.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from liyuan.errors import ModelError, ModelOutputError
from liyuan.model import DEFAULT_DEADLINE_S, OpenAIModel, request
from liyuan.vector.openai_embed import DEFAULT_EMBED_DEADLINE_S, OpenAIEmbedder
from tests.liyuan.card.test_fixtures import memory, two_chats

KEY = "sk-test-very-secret-key-123"
SHORT_KEY = "k3y"
PASSWORD = "pw-very-secret"


def shown(exc: BaseException) -> str:
    """Everything a traceback or ``logger.exception`` would print."""
    return "".join(traceback.format_exception(exc))


def handler_model(handler: Callable[[httpx2.Request], httpx2.Response], *, key: str = KEY,
                  base_url: str = "http://side.test/v1", **kwargs: Any) -> OpenAIModel:
    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    return OpenAIModel(model="side-model-1", base_url=base_url, api_key=key, http_client=client,
                       sleep=lambda _s: None, **kwargs)


def ask() -> Any:
    return request("summary", "系统", "用户的话")


# -- secrets --------------------------------------------------------------------------


@pytest.mark.parametrize("key", [KEY, SHORT_KEY], ids=["long-key", "short-key"])
def test_an_echoed_key_is_in_no_part_of_the_traceback(allow_model_requests: None, key: str) -> None:
    body = {"error": {"message": f"invalid api key: {key}", "type": "auth"}}
    model = handler_model(lambda _r: httpx2.Response(401, json=body), key=key)
    with pytest.raises(ModelError) as info:
        model.complete(ask())
    assert "HTTP 401" in str(info.value)
    assert key not in shown(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_a_transport_error_naming_the_key_and_password_leaks_neither(allow_model_requests: None) -> None:
    def refuse(req: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError(f"cannot reach {req.url} with key {KEY}")

    model = handler_model(refuse, base_url=f"http://bob:{PASSWORD}@side.test/v1", max_retries=1)
    with pytest.raises(ModelError) as info:
        model.complete(ask())
    text = shown(info.value)
    assert KEY not in text and PASSWORD not in text


@pytest.mark.parametrize("status", [401, 0], ids=["refused", "unreachable"])
def test_embedder_errors_carry_no_credentials_of_the_base_url(allow_model_requests: None, status: int) -> None:
    def answer(req: httpx2.Request) -> httpx2.Response:
        if not status:
            raise httpx2.ConnectError(f"cannot connect to {req.url} ({PASSWORD})")
        return httpx2.Response(status, json={"error": {"message": f"bad credentials bob:{PASSWORD}"}})

    embedder = OpenAIEmbedder("emb-1", base_url=f"http://bob:{PASSWORD}@emb.test/v1", api_key=KEY,
                              http_client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    with pytest.raises(ModelError) as info:
        embedder.embed(["一段文字"])
    text = shown(info.value)
    assert PASSWORD not in text and KEY not in text and "bob:" not in text
    assert "emb.test" in str(info.value)  # still says where the request went


# -- malformed endpoint replies -------------------------------------------------------


GOOD: dict[str, Any] = {
    "id": "c1", "object": "chat.completion", "created": 0, "model": "side-model-1",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "好"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def altered(change: Callable[[dict[str, Any]], object]) -> bytes:
    body = copy.deepcopy(GOOD)
    change(body)
    return json.dumps(body).encode()


BAD_BODIES = {
    "not-json": b"{not json",
    "html": b"<html>502 Bad Gateway</html>",
    "message-null": altered(lambda b: b["choices"][0].update(message=None)),
    "list-content": altered(lambda b: b["choices"][0]["message"].update(content=[{"type": "text", "text": "好"}])),
    "choices-string": altered(lambda b: b.update(choices="x")),
    "no-choices": altered(lambda b: b.update(choices=[])),
}


def serving(body: bytes) -> Callable[[httpx2.Request], httpx2.Response]:
    return lambda _r: httpx2.Response(200, content=body, headers={"content-type": "application/json"})


@pytest.mark.parametrize("body", list(BAD_BODIES.values()), ids=list(BAD_BODIES))
def test_a_malformed_endpoint_reply_is_a_model_output_error(allow_model_requests: None, body: bytes) -> None:
    with pytest.raises(ModelOutputError):
        handler_model(serving(body)).complete(ask())


@pytest.mark.parametrize("usage", [{"prompt_tokens": "many", "completion_tokens": None}, "lots",
                                   {"prompt_tokens": -5, "completion_tokens": 2}], ids=["text", "string", "negative"])
def test_bad_usage_is_dropped_and_the_reply_kept(allow_model_requests: None, usage: object) -> None:
    completion = handler_model(serving(altered(lambda b: b.update(usage=usage)))).complete(ask())
    assert completion.text == "好" and completion.usage is None


def test_a_malformed_endpoint_reply_fails_one_recap_not_the_sync(allow_model_requests: None, tmp_path: Path) -> None:
    two_chats(tmp_path)
    outcome = memory(tmp_path, handler_model(serving(BAD_BODIES["message-null"]))).sync()
    assert (outcome.recapped, outcome.failed, outcome.merged) == ([], ["A", "B"], "no-change")


# -- the total deadline ----------------------------------------------------------------


class TrickleServer:
    """An HTTP server on 127.0.0.1 that answers every request one byte per ``gap`` seconds.

    ``silent=True`` sends nothing at all. Each connection stops by itself after
    ``limit`` seconds, or at once when the client goes away.
    """

    def __init__(self, *, gap: float = 0.05, limit: float = 6.0, silent: bool = False) -> None:
        self.gap, self.limit, self.silent = gap, limit, silent
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.requests = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _addr = self.sock.accept()
            except TimeoutError:
                continue
            self.requests += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        body = json.dumps(GOOD).encode()
        data = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
        started = time.monotonic()
        with conn:
            conn.settimeout(0.5)
            try:
                conn.recv(65536)
                for byte in data:
                    if self.stop.is_set() or time.monotonic() - started > self.limit:
                        return
                    if not self.silent:
                        conn.sendall(bytes([byte]))
                    time.sleep(self.gap)
            except OSError:
                return  # the client went away

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2.0)
        self.sock.close()


@pytest.fixture
def trickle() -> Iterator[TrickleServer]:
    server = TrickleServer()
    yield server
    server.close()


@pytest.fixture
def silent() -> Iterator[TrickleServer]:
    server = TrickleServer(silent=True)
    yield server
    server.close()


def loopback_model(server: TrickleServer, **kwargs: Any) -> OpenAIModel:
    return OpenAIModel(model="side-model-1", base_url=server.url, api_key=KEY, sleep=lambda _s: None, **kwargs)


def test_a_server_trickling_bytes_is_cut_off_at_the_deadline(allow_model_requests: None,
                                                              trickle: TrickleServer) -> None:
    # Each byte arrives well within the 2 s read timeout: only a total deadline stops this.
    model = loopback_model(trickle, timeout=2.0, deadline=1.0)
    started = time.monotonic()
    with pytest.raises(ModelError, match="总时限") as info:
        model.complete(ask())
    assert time.monotonic() - started < 2.0
    assert KEY not in shown(info.value)


def test_retries_do_not_extend_the_deadline(allow_model_requests: None, silent: TrickleServer) -> None:
    model = loopback_model(silent, timeout=0.4, deadline=1.0, max_retries=5, backoff=0.01)
    started = time.monotonic()
    with pytest.raises(ModelError):
        model.complete(ask())
    assert time.monotonic() - started < 1.8
    assert 1 <= silent.requests <= 4


def test_a_backoff_that_would_pass_the_deadline_gives_up_at_once(allow_model_requests: None) -> None:
    sleeps: list[float] = []
    model = handler_model(lambda _r: httpx2.Response(503, json={"error": {"message": "忙"}}),
                          deadline=5.0, backoff=10.0)
    model.sleep = sleeps.append
    with pytest.raises(ModelError, match="总时限"):
        model.complete(ask())
    assert sleeps == []


def test_the_default_deadline_is_stated() -> None:
    model = OpenAIModel(model="m")
    assert model.deadline == DEFAULT_DEADLINE_S == 600.0


def test_an_embeddings_server_trickling_bytes_is_cut_off_at_the_deadline(allow_model_requests: None,
                                                                         trickle: TrickleServer) -> None:
    embedder = OpenAIEmbedder("emb-1", base_url=trickle.url, api_key=KEY, timeout=2.0, deadline=1.0)
    started = time.monotonic()
    with pytest.raises(ModelError, match="总时限") as info:
        embedder.embed(["雾港的灯"])
    assert time.monotonic() - started < 2.0
    assert KEY not in shown(info.value)
    # Our own connection was closed at the deadline, so the worker's read ends too.
    until = time.monotonic() + 3.0
    while any(t.name == "liyuan-embed-call" for t in threading.enumerate()) and time.monotonic() < until:
        time.sleep(0.05)
    assert not any(t.name == "liyuan-embed-call" for t in threading.enumerate())


def test_the_embedder_deadline_is_per_batch_and_stated() -> None:
    assert OpenAIEmbedder("m").deadline == DEFAULT_EMBED_DEADLINE_S == 300.0
