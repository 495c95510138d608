"""The sync a card starts on entering a chat waits for that chat's first turn (issue 36).

Entering a chat syncs the card in the background (the seed). On a long chat that sync
reads the whole chat for its recap while the app assembles the chat's first turn, and the
two shared one interpreter: the first ``prepare()`` after opening a 100,000-turn chat took
about twice as long. Now the entry sync starts once the chat's first turn is assembled,
or :data:`~liyuan.card.worker.ENTRY_SYNC_WAIT_S` after entering when no turn comes; an
explicit :meth:`~liyuan.Card.sync` or :meth:`~liyuan.Card.flush` starts it at once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import liyuan.card.worker
from liyuan import Card, Completion, FunctionModel, ModelRequest

REPLY = "（脚本写的复盘，不是模型输出）"


def _played_card(root: Path) -> Path:
    """A card whose chat jA has one turn and no recap yet: its next sync calls the side model."""
    with Card.open(root / "雾港", user_name="阿简", char_name="林溯", auto_sync=False) as card:
        chat = card.chat("jA")
        chat.prepare("我把伞递给她。")
        chat.record("她没接，只是看着雨。")
    return root / "雾港"


def _watched_model() -> tuple[FunctionModel, threading.Event]:
    called = threading.Event()

    def answer(request: ModelRequest) -> Completion:
        called.set()
        return Completion(REPLY)

    return FunctionModel(answer), called


def test_entering_a_chat_syncs_only_after_its_first_turn_is_assembled(tmp_path: Path) -> None:
    side, called = _watched_model()
    with Card.open(_played_card(tmp_path), side_model=side, user_name="阿简", char_name="林溯") as card:
        chat = card.chat("jA")
        assert not called.wait(0.5), "the entry sync started before the chat's first turn"
        chat.prepare("她终于开口了吗？")
        assert called.wait(20), "the entry sync never started after the first turn"


def test_an_entered_chat_that_takes_no_turn_is_synced_after_the_wait(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(liyuan.card.worker, "ENTRY_SYNC_WAIT_S", 0.3)
    side, called = _watched_model()
    with Card.open(_played_card(tmp_path), side_model=side, user_name="阿简", char_name="林溯") as card:
        card.chat("jA")
        assert called.wait(20), "the entry sync never started without a turn"


@pytest.mark.parametrize("call", ["sync", "flush"])
def test_an_explicit_sync_or_flush_starts_the_waiting_entry_sync_at_once(tmp_path: Path, call: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(liyuan.card.worker, "ENTRY_SYNC_WAIT_S", 120.0)
    side, called = _watched_model()
    with Card.open(_played_card(tmp_path), side_model=side, user_name="阿简", char_name="林溯") as card:
        card.chat("jA")
        started = time.monotonic()
        if call == "sync":
            outcome = card.sync(timeout=60)
            assert outcome is not None and "jA" in outcome.recapped + outcome.failed
        else:
            assert card.flush(60)
        assert called.is_set()
        assert time.monotonic() - started < 60
