"""Issue 36, item 5: the first recall after opening a chat returns what a warm recall returns.

A store of more than :data:`~liyuan.vector.postings.BULK` chunks loads its keyword index
in a thread of its own after the open. The first recall used to rank by the vectors
alone while that load ran, so the first turn after opening a long chat recalled other
hits than every turn after it. The load is held back here until the recall has seen it
pending, so the test does not depend on how fast this machine tokenizes.

It lives beside the harness tests because it builds its long chat and its full store with
the bench's builders (``harness.bench.longchat``), and ``tests/liyuan`` stands on the
library alone.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from harness.bench.longchat import CHAR, USER, build_chat, fill_store, memory_config, replies_on_branch
from harness.eval.scripted import scripted_summariser
from liyuan import Card
from liyuan.app.recall import recall_trace
from liyuan.clock import counter_ids
from liyuan.vector.index import Snapshot
from liyuan.vector.postings import BULK, PostingLog
from liyuan.vector.recall import branch_ids_of, format_recall_lines

QUERY = "第37个夜里在旧城茶馆见过谁"


def _card(tmp_path: Path) -> Path:
    card_dir = tmp_path / "卡"
    path, _ids = build_chat(card_dir, "long", 60, ledger=True)
    fill_store(card_dir, "long", memory_config(True).vector, BULK + 400, replies_on_branch(path))
    return card_dir


@pytest.mark.slow
def test_the_first_recall_after_opening_equals_a_warm_recall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    card_dir = _card(tmp_path)
    gate = threading.Event()
    pending_seen = threading.Event()
    append = PostingLog._append
    pending = Snapshot.lexical_pending

    def held_append(self: PostingLog, fresh: Any) -> None:
        if len(fresh) > BULK:  # the cold load of the whole store, on the warm thread
            assert gate.wait(30), "the test never let the keyword load go on"
        append(self, fresh)

    def seen_pending(self: Snapshot, tokenizer: str) -> bool:
        answer = pending(self, tokenizer)
        if answer:  # the recall met the load under way: let it finish now
            pending_seen.set()
            gate.set()
        return answer

    monkeypatch.setattr(PostingLog, "_append", held_append)
    monkeypatch.setattr(Snapshot, "lexical_pending", seen_pending)
    with Card.open(card_dir, side_model=scripted_summariser(USER, CHAR), config=memory_config(True),
                   user_name=USER, char_name=CHAR, ids=counter_ids("t-")) as card:
        chat = card.chat("long")
        first = chat.prepare(QUERY)
        gate.set()
        assert pending_seen.is_set(), "the first recall did not meet the keyword load under way"
        assert chat.vector is not None
        card.flush()
        memory = chat.vector
        tokenizer = memory.config.lexical_tokenizer
        memory.warm()
        assert not memory.store.snapshot().lexical_pending(tokenizer)
        warm = memory.recall_for_turn(QUERY, branch_ids_of(chat.branch()))
    assert first.record is not None and first.recall
    assert list(first.recall) == format_recall_lines(warm)
    assert list(first.record.recall) == recall_trace(warm)
    assert any(entry.keyword_rank is not None for entry in first.record.recall)  # the keyword list took part
