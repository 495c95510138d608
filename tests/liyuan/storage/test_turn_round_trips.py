"""What one turn costs on PostgreSQL, counted: statements sent and pooled connections
borrowed (issue 34: the per-turn cost within twice the folder's).

A statement is counted where psycopg sends it (``Cursor.execute``, which
``Connection.execute`` calls; ``executemany`` too), on the thread that plays the turn: each
is one round trip to the server on an autocommit connection outside a pipeline (the pool's
own thread, opening a connection in the background, is not the turn's). Every reply here is hand-written (a
scripted stand-in): no model wrote them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from liyuan import Card, CardStorage, Ledger
from liyuan.clock import counter_ids

psycopg = pytest.importorskip("psycopg")


@dataclass
class Counted:
    statements: int = 0
    borrowed: int = 0


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counted]:
    """Count the statements every psycopg cursor sends and the connections the card's pool lends."""
    from liyuan.storage.pgdb import PostgresDatabase

    counted = Counted()
    turn_thread = threading.get_ident()
    execute, executemany, getconn = psycopg.Cursor.execute, psycopg.Cursor.executemany, PostgresDatabase.getconn

    def counted_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        counted.statements += threading.get_ident() == turn_thread
        return execute(self, *args, **kwargs)

    def counted_executemany(self: Any, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        params = list(params_seq)
        counted.statements += len(params) if threading.get_ident() == turn_thread else 0
        return executemany(self, query, params, **kwargs)

    def counted_getconn(self: Any) -> Any:
        counted.borrowed += threading.get_ident() == turn_thread
        return getconn(self)

    with monkeypatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", counted_execute)
        patch.setattr(psycopg.Cursor, "executemany", counted_executemany)
        patch.setattr(PostgresDatabase, "getconn", counted_getconn)
        yield counted


def _card(storage: CardStorage, path: Path) -> Card:
    return Card.open(path, storage=storage, background=False, auto_sync=False, ids=counter_ids("t"))


def test_a_turn_on_postgres_is_two_round_trips_and_two_borrows(
        pg_card: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``prepare`` + ``record`` with a ledger, the resident summary present: the user line
    (which brings the resident summary's stamp back with it) and the reply with its ledger."""
    storage = pg_card("回合")
    storage.memory.write_text(storage.memory.layout.resident, "（手写）林溯守着灯塔。\n")
    with _card(storage, tmp_path / "卡") as card:
        chat = card.chat("j1", greeting="（手写开场白）雾很大。")
        for warm in range(6):  # psycopg prepares a statement the fifth time a connection sends it
            chat.prepare(f"热身{warm}")
            chat.record(f"（手写回复）热身{warm}。", ledger=Ledger.from_dict({"地点": "灯塔"}))
        per_turn: list[tuple[int, int]] = []
        for n in range(5):
            with counting(monkeypatch) as counted:
                turn = chat.prepare(f"第{n}次追问：那把青伞是谁留下的？")
                chat.record(f"（手写回复）第{n}次：伞是林溯的。", ledger=Ledger.from_dict({"地点": "灯塔"}))
            assert turn.resident is not None and "林溯守着灯塔" in turn.resident
            per_turn.append((counted.statements, counted.borrowed))
    assert per_turn == [(2, 2)] * 5


def test_a_resident_summary_another_server_wrote_is_in_the_very_next_turn_and_preview(
        pg_card: Any, tmp_path: Path) -> None:
    """The stamp that rides with the user line is read in that statement, so a resident
    summary another server committed before it is in that turn; a preview (no user line
    written) and a reroll (the user line already there) read the stamp anew, not the one
    that came with the last append."""
    storage, other = pg_card("新鲜"), pg_card("新鲜")
    resident = other.memory.layout.resident
    other.memory.write_text(resident, "（手写）第一版常驻摘要。\n")
    with _card(storage, tmp_path / "卡") as card:
        chat = card.chat("j1", greeting="（手写开场白）雾很大。")
        assert "第一版" in (chat.prepare("第一问").resident or "")
        chat.record("（手写回复）第一问。")
        for n, text in enumerate(("第二版", "第三版", "第四版")):
            other.memory.write_text(resident, f"（手写）{text}常驻摘要。\n")  # another server, between turns
            assert f"{text}常驻摘要" in (chat.preview("只是看看").resident or "")
            other.memory.write_text(resident, f"（手写）{text}之后又改了。\n")
            assert f"{text}之后又改了" in (chat.prepare(f"第{n}次追问").resident or "")
            chat.record(f"（手写回复）第{n}次。")
        other.memory.write_text(resident, "（手写）重来之前改的。\n")
        assert "重来之前改的" in (chat.reroll().resident or "")  # no user line written: read anew
        other.memory.delete(resident)
        assert chat.preview("只是看看").resident is None
        assert chat.prepare("最后一问").resident is None
