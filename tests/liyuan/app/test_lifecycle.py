"""The facade under concurrency and across its lifecycle: races, stale handles, closing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from liyuan import Card
from liyuan.app.chat import Chat

from .test_chat import open_card


def test_two_threads_opening_the_same_chat_share_one_chat_object(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    card = open_card(tmp_path)
    opened = Card._open_chat
    calls: list[str] = []
    second = threading.Event()

    def slow_open(self: Card, chat_id: str, user_name: str, char_name: str, greeting: str | None) -> Chat:
        calls.append(chat_id)
        if len(calls) == 1:
            second.wait(0.5)  # racy code lets the second thread in meanwhile; a guarded one never does
        else:
            second.set()
        return opened(self, chat_id, user_name, char_name, greeting)

    monkeypatch.setattr(Card, "_open_chat", slow_open)
    got: list[Chat] = []
    threads = [threading.Thread(target=lambda: got.append(card.chat("jA"))) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert len(got) == 2 and got[0] is got[1]
        assert calls == ["jA"]  # one session tree, one lane for the file
    finally:
        card.close()
