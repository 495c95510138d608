"""A session damaged by hand in its storage (issue 34, item 5): reported, and paid for once.

Every recap and merge reply here is hand-written (a scripted stand-in): no model wrote them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from liyuan import Card, CardStorage
from liyuan.clock import counter_ids, fixed_clock
from tests.liyuan.card.test_fixtures import CHAR, USER, two_chat_model


def _storage(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> CardStorage:
    if backend == "files":
        return CardStorage.folder(tmp_path / "卡")
    return request.getfixturevalue("pg_card")("受损")  # type: ignore[no-any-return]


def _delete_first_line(backend: str, storage: CardStorage, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """What a hand does: the session's first line (its header) removed where it is stored."""
    if backend == "files":
        path = tmp_path / "卡" / "对话" / "jA" / "会话" / "001.jsonl"
        data = path.read_bytes()
        path.write_bytes(data[data.index(b"\n") + 1:])
        return
    import psycopg

    with psycopg.connect(request.getfixturevalue("postgres_dsn"), autocommit=True) as db:
        deleted = db.execute("DELETE FROM liyuan_session_lines WHERE scope = '受损' AND chat = 'jA'"
                             " AND session = '001.jsonl' AND seq = 1").rowcount
    assert deleted == 1


@pytest.mark.parametrize("backend", ["files", "postgres"])
def test_a_session_whose_first_line_was_deleted_by_hand_is_recapped_once_not_on_every_sync(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    storage = _storage(backend, tmp_path, request)
    model = two_chat_model()
    lines: list[str] = []
    options = {"side_model": model, "user_name": USER, "char_name": CHAR, "background": False,
               "auto_sync": False, "clock": fixed_clock(), "on_activity": lambda a: lines.append(a.text)}
    with Card.open(tmp_path / "卡", storage=storage, ids=counter_ids("e"), **options) as card:
        for chat_id, who in (("jA", "甲"), ("jB", "乙")):
            chat = card.chat(chat_id, title=f"{who}的一局")
            for n in range(3):
                chat.prepare(f"{who}的第{n}拍")
                chat.record(f"（脚本回复）{who}的第{n}拍之后")
        assert card.sync().recapped == ["jA", "jB"]  # type: ignore[union-attr]
    _delete_first_line(backend, storage, tmp_path, request)
    paid_before, lines[:] = len(model.calls), []
    with Card.open(tmp_path / "卡", storage=storage, ids=counter_ids("f"), **options) as card:
        outcomes = [card.sync() for _ in range(4)]
    paid = [call.purpose for call in model.calls[paid_before:]]
    assert paid.count("recap") == 1, (paid, lines)  # the changed chat once, then never again
    assert outcomes[0].recapped == ["jA"] and all(o.recapped == [] and o.failed == [] for o in outcomes[1:])  # type: ignore[union-attr]
    assert not any("已丢弃" in line for line in lines), lines  # nothing paid for and thrown away
    if backend == "postgres":  # the rows say a line is gone: the sync says so
        assert any("缺了第 1 行" in line and "甲的一局" in line for line in lines), lines
