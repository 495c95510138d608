"""The session seam's contract, on both backends: the card folder's files and PostgreSQL.

Each test runs once per backend (``sessions`` fixture). What only one backend can do is
tested apart: a stale append refused (PostgreSQL; two file logs on one machine do not
see each other), torn lines and fsync (files: ``tests/liyuan/session``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from liyuan import Card
from liyuan.card.layout import CardLayout
from liyuan.card.sessions import FileSessions, SessionStore
from liyuan.clock import counter_ids, fixed_clock
from liyuan.errors import SessionConflictError
from liyuan.session.tree import SessionTree
from liyuan.storage import CardStorage

BACKENDS = ["files", "postgres"]


@pytest.fixture(params=BACKENDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CardStorage]:
    """The card's storage object on each backend: the contract runs against what a card is given."""
    opened = CardStorage.folder(tmp_path / "卡") if request.param == "files" \
        else CardStorage.postgres(request.getfixturevalue("postgres_dsn"), scope="卡")
    yield opened
    opened.close()


@pytest.fixture
def sessions(storage: CardStorage) -> SessionStore:
    return storage.sessions


def _tree(sessions: SessionStore, chat: str = "a", name: str = "001.jsonl") -> SessionTree:
    return SessionTree(log=sessions.log(chat, name), session_id=f"{chat}-1", clock=fixed_clock(),
                       ids=counter_ids(f"{chat}{name}-"))


def test_appended_entries_read_back_the_same(sessions: SessionStore) -> None:
    tree = _tree(sessions)
    tree.append_message("user", "伞呢？")
    reply = tree.append_message("assistant", "在门后。\n（换行和「引号」）")
    tree.append_custom("rp-state", {"location": "茶馆"})
    again = _tree(sessions)
    assert again.entries() == tree.entries() and again.leaf_id == tree.leaf_id
    assert again.get(reply.id) is not None and again.get(reply.id).text == "在门后。\n（换行和「引号」）"  # type: ignore[union-attr]
    assert sessions.chat_ids() == ["a"] and sessions.names("a") == ["001.jsonl"]


def test_a_branch_after_navigating_is_kept(sessions: SessionStore) -> None:
    tree = _tree(sessions)
    first = tree.append_message("user", "第一句")
    tree.append_message("assistant", "第一版回复")
    tree.navigate(first.id)  # a reroll
    second = tree.append_message("assistant", "第二版回复")
    again = _tree(sessions)
    assert [e.text for e in again.branch()] == ["第一句", "第二版回复"]
    assert [e.text for e in again.branch(second.id)] == ["第一句", "第二版回复"]
    assert len(again) == 3


def test_the_mark_moves_with_every_append_and_heads_tell_sessions_apart(sessions: SessionStore) -> None:
    assert sessions.mark("a") == "" and sessions.heads("a") == {}
    tree = _tree(sessions)
    marks = {sessions.mark("a")}
    for text in ("一", "二", "三"):
        tree.append_message("user", text)
        marks.add(sessions.mark("a"))
    assert len(marks) == 4  # every append moved it
    heads = sessions.heads("a")
    assert list(heads) == ["001.jsonl"] and sessions.kept("a", heads)
    assert not sessions.kept("a", {}) and not sessions.kept("a", {"001.jsonl": b"another head"})
    _tree(sessions, name="002.jsonl").append_message("user", "第二个窗口")
    assert sessions.names("a") == ["001.jsonl", "002.jsonl"] and sessions.kept("a", heads)


def test_the_content_of_a_session_is_readable_without_opening_it(sessions: SessionStore) -> None:
    assert sessions.read("a", "001.jsonl") is None
    tree = _tree(sessions)
    tree.append_message("user", "只读")
    content = sessions.read("a", "001.jsonl")
    assert content is not None and list(content.entries) == [e.id for e in tree]


def test_a_card_on_the_backend_plays_reopens_and_deletes_a_chat(storage: CardStorage, tmp_path: Path) -> None:
    sessions = storage.sessions
    card = Card.open(tmp_path / "卡", storage=storage, background=False, auto_sync=False,
                     clock=fixed_clock(), ids=counter_ids("x-"))
    chat = card.chat("a", greeting="（手写开场白）雨下大了。")
    chat.prepare("伞呢？")
    chat.record("（手写回复）在门后。")
    card.close()
    again = Card.open(tmp_path / "卡", storage=storage, background=False, auto_sync=False,
                      clock=fixed_clock(), ids=counter_ids("y-"))
    assert again.chat_ids() == ["a"]
    texts = [e.text for e in again.chat("a").tree.branch()]
    assert texts == ["（手写开场白）雨下大了。", "伞呢？", "（手写回复）在门后。"]
    assert again.delete_chat("a") and again.chat_ids() == [] and sessions.names("a") == []
    again.close()


def test_an_imported_chat_lands_in_the_backend(storage: CardStorage, tmp_path: Path) -> None:
    sessions = storage.sessions
    source = tmp_path / "chat.jsonl"
    source.write_text("\n".join(json.dumps(m, ensure_ascii=False) for m in [
        {"user_name": "你", "character_name": "小满"},
        {"name": "你", "is_user": True, "mes": "你好"},
        {"name": "小满", "is_user": False, "mes": "（导入的回复）你好呀"},
    ]) + "\n", encoding="utf-8")
    card = Card.open(tmp_path / "卡", storage=storage, background=False, auto_sync=False)
    chat = card.import_chat(source, "imported")
    assert [e.text for e in chat.tree.branch() if e.type == "message"][-2:] == ["你好", "（导入的回复）你好呀"]
    assert sessions.names("imported") == ["001.jsonl"]
    card.close()
    content = sessions.read("imported", "001.jsonl")
    assert content is not None
    assert [e.text for e in content.entries.values() if e.type == "message"][-1] == "（导入的回复）你好呀"


def test_a_batch_of_entries_is_one_write_chained_and_reads_back(sessions: SessionStore) -> None:
    tree = _tree(sessions)
    user = tree.append_message("user", "伞呢？")
    writes: list[bytes] = []
    log = tree.log
    assert log is not None
    real = log.append
    log.append = lambda data: (writes.append(data), real(data))[1]  # type: ignore[method-assign]
    reply, state = tree.extend([("message", {"role": "assistant", "text": "在门后。"}),
                                ("custom", {"customType": "rp-state", "data": {"location": "茶馆"}})])
    assert len(writes) == 1 and writes[0].count(b"\n") == 2  # both lines, one write
    assert (reply.parent_id, state.parent_id, tree.leaf_id) == (user.id, reply.id, state.id)
    again = _tree(sessions)
    assert again.entries() == tree.entries() and [e.id for e in again.branch()] == [user.id, reply.id, state.id]


def test_an_append_after_a_torn_last_line_starts_a_line_of_its_own(sessions: SessionStore) -> None:
    first = _tree(sessions)
    first.append_message("user", "完整的一句")
    whole = sessions.raw("a", "001.jsonl")
    assert whole is not None
    other = "b"  # a chat whose session was copied in with a torn last write
    sessions.log(other, "001.jsonl").create(whole + b'{"type":"message","id":"torn')
    tree = _tree(sessions, chat=other)
    tree.append_message("assistant", "接着写")
    again = _tree(sessions, chat=other)
    assert [e.text for e in again.branch()] == ["完整的一句", "接着写"]  # nothing glued to the fragment
    raw = sessions.raw(other, "001.jsonl")
    assert raw is not None and raw.startswith(whole + b'{"type":"message","id":"torn\n{')


def test_a_stale_batch_is_refused_whole(pg_card: Callable[..., CardStorage]) -> None:
    one, two = pg_card("卡").sessions, pg_card("卡").sessions
    first = SessionTree(log=one.log("a", "001.jsonl"), ids=counter_ids("p-"))
    first.append_message("user", "开头")
    SessionTree(log=two.log("a", "001.jsonl"), ids=counter_ids("q-")).append_message("assistant", "别处先写")
    with pytest.raises(SessionConflictError):
        first.extend([("message", {"role": "assistant", "text": "回复"}), ("custom", {"customType": "rp-state",
                                                                                        "data": {}})])
    assert len(first) == 1
    assert [e.text for e in SessionTree(log=one.log("a", "001.jsonl")).branch()] == ["开头", "别处先写"]
    assert one.raw("a", "001.jsonl") is not None and one.raw("a", "001.jsonl").count(b"\n") == 3  # type: ignore[union-attr]


def test_a_stale_append_is_refused_and_nothing_is_lost(pg_card: Callable[..., CardStorage]) -> None:
    one, two = pg_card("卡").sessions, pg_card("卡").sessions
    first = SessionTree(log=one.log("a", "001.jsonl"), ids=counter_ids("p-"))
    first.append_message("user", "开头")
    second = SessionTree(log=two.log("a", "001.jsonl"), ids=counter_ids("q-"))
    kept = second.append_message("assistant", "另一台服务器先写了这一条")
    with pytest.raises(SessionConflictError, match="别处有了新的内容"):
        first.append_message("assistant", "这一条写不进去")
    assert len(first) == 1  # the refused entry is not in the tree either
    reread = SessionTree(log=one.log("a", "001.jsonl"))
    assert [e.text for e in reread.branch()] == ["开头", "另一台服务器先写了这一条"]
    assert reread.leaf_id == kept.id
    reread.append_message("user", "重新打开后照常写")  # a fresh view appends


def test_scopes_do_not_mix(pg_card: Callable[..., CardStorage]) -> None:
    card_a, card_b = pg_card("甲").sessions, pg_card("乙").sessions
    SessionTree(log=card_a.log("a", "001.jsonl")).append_message("user", "甲卡的话")
    assert card_a.chat_ids() == ["a"] and card_b.chat_ids() == [] and card_b.read("a", "001.jsonl") is None


def test_a_card_s_sessions_go_to_postgres_and_back_byte_for_byte(pg_card: Callable[..., CardStorage],
                                                                  tmp_path: Path) -> None:
    from liyuan.storage.copy import copy_sessions
    files = FileSessions(CardLayout(tmp_path / "原卡"))
    tree = _tree(files, "a")
    first = tree.append_message("user", "第一句")
    tree.append_message("assistant", "（手写回复）回答")
    tree.navigate(first.id)
    tree.append_message("assistant", "（手写回复）重来的回答")
    _tree(files, "a", "002.jsonl").append_message("user", "第二个窗口")
    damaged = files.path("b", "001.jsonl")
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b'{"type":"session","version":1,"id":"b"}\n\xff\xfe not\r json\n'
                        b'{"id":"x","parentId":null,"type":"message","role":"user","text":"\xe5\xa5\xbd"}\n{"id":"torn","par')
    database = pg_card("搬家").sessions
    assert copy_sessions(files, database) == 3
    back = FileSessions(CardLayout(tmp_path / "搬回来"))
    assert copy_sessions(database, back) == 3
    for chat_id, name in (("a", "001.jsonl"), ("a", "002.jsonl"), ("b", "001.jsonl")):
        assert back.path(chat_id, name).read_bytes() == files.path(chat_id, name).read_bytes()
    copied = SessionTree(log=database.log("b", "001.jsonl"))  # damage reads the same from the database
    assert copied.problems == SessionTree(damaged).problems and [e.id for e in copied] == ["x"]
    with pytest.raises(SessionConflictError, match="不覆盖"):
        copy_sessions(files, database, chats=["a"])
