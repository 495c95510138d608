"""One storage object per backend (issue 34): what a card is given, what it closes, how
many server connections it holds, and the one error family its parts raise.

Every reply here is hand-written (a scripted stand-in): no model wrote them.
"""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

import pytest

from liyuan import Card, CardStorage, MemoryConfig, VectorConfig
from liyuan.clock import counter_ids, fixed_clock
from liyuan.errors import ConfigError, StorageRefused, StorageUnavailable, TreeError

ROOT = Path(__file__).resolve().parents[3]
BACKEND_CLASSES = {"FileSessions", "PostgresSessions", "MemoryFiles", "PostgresMemory", "PostgresMemoryFiles",
                   "FolderChunkStores", "PostgresChunkStores", "SqliteChunkStore", "PostgresChunkStore",
                   "FolderMemory", "PostgresDatabase"}


def test_nothing_above_the_seam_asks_which_backend_it_has() -> None:
    """No ``isinstance`` on a backend class in the facade or in ``copy_card``: a third
    backend must not silently take a fallback branch."""
    files = [*sorted((ROOT / "liyuan" / "app").glob("*.py")), ROOT / "liyuan" / "storage" / "copy.py"]
    asked: list[str] = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
                named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)} | \
                        {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
                asked += [f"{path.name}:{node.lineno} {name}" for name in named & BACKEND_CLASSES]
    assert asked == []


def test_no_postgres_code_under_vector_and_storage_imports_no_app() -> None:
    from tests.test_imports import graph

    edges = graph()
    vector_pg = sorted(name for name, targets in edges.items() if name.startswith("liyuan.vector")
                       and any(t.split(".")[0] in ("psycopg", "psycopg_pool", "pgvector")
                               or t.startswith("liyuan.storage.pg") for t in targets))
    assert vector_pg == [] and not list((ROOT / "liyuan" / "vector").glob("pg*.py"))
    upward = sorted(f"{name} -> {t}" for name, targets in edges.items() if name.startswith("liyuan.storage")
                    for t in targets if t.startswith("liyuan.app"))
    assert upward == []


def _play(card: Card, chat_id: str) -> None:
    chat = card.chat(chat_id, greeting="（手写开场白）雾很大。")
    chat.prepare(f"{chat_id}：那把青伞是谁留下的？")
    chat.record(f"（手写回复）{chat_id}：伞是林溯的。" + "她说起了灯塔的旧事。" * 5)


def test_the_card_folder_is_the_default_and_the_same_object_opens_it(tmp_path: Path) -> None:
    with Card.open(tmp_path / "卡", background=False, auto_sync=False) as card:
        _play(card, "jA")
    storage = CardStorage.folder(tmp_path / "卡")
    with Card.open(storage=storage, background=False, auto_sync=False) as again:  # no path: the storage's folder
        assert again.chat_ids() == ["jA"] and again.path == tmp_path / "卡"
    assert storage.sessions.names("jA") == ["001.jsonl"]
    with pytest.raises(ConfigError, match="不是同一个"):
        Card.open(tmp_path / "别的卡", storage=storage)
    with pytest.raises(ConfigError, match="要给出卡目录"):
        Card.open()


def _connections(dsn: str, application: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        row = db.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                         (application,)).fetchone()
    return int(row[0]) if row else 0


def _connections_gone(dsn: str, application: str, within: float = 2.0) -> bool:
    """Whether the server lists none of ``application``'s connections within ``within`` seconds: a
    backend leaves ``pg_stat_activity`` a moment after its client closed the socket, not at once."""
    deadline = time.monotonic() + within
    while _connections(dsn, application) != 0:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_fifty_open_chats_hold_no_more_connections_than_the_pool_and_closing_the_card_frees_them(
        postgres_dsn: str, tmp_path: Path) -> None:
    """A PostgreSQL card with vector memory on and 50 chats open, their background work
    running: the server sees at most the pool's default size (and the sync lock's one more,
    10 in all) however many chats there are, and none once the card is closed."""
    from psycopg.conninfo import make_conninfo

    from liyuan.storage.pgdb import DEFAULT_POOL_SIZE

    application = "liyuan-fifty-chats"
    dsn = make_conninfo(postgres_dsn, application_name=application)
    storage = CardStorage.postgres(dsn, scope="五十局")
    peak = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _connections(postgres_dsn, application))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        config = MemoryConfig(vector=VectorConfig(enabled=True, embedder="hash"))
        with Card.open(tmp_path / "卡", storage=storage, config=config, auto_sync=False, ids=counter_ids("e"),
                       clock=fixed_clock()) as card:
            for n in range(50):
                _play(card, f"chat{n:02d}")
            assert card.flush(120)
            assert len(card.chat_ids()) == 50
            sync = card.memory.files.locks.run  # the sync lock's connection is the one apart from the pool
            with sync:
                peak = max(peak, _connections(postgres_dsn, application))
            held_open = _connections(postgres_dsn, application)
        assert _connections_gone(postgres_dsn, application)  # the card closed its storage
    finally:
        done.set()
        watcher.join()
        storage.close()
    assert DEFAULT_POOL_SIZE + 1 <= 10
    assert 2 <= peak <= DEFAULT_POOL_SIZE + 1, peak
    assert held_open <= DEFAULT_POOL_SIZE + 1


def test_a_closed_storage_opens_again_on_the_next_call(pg_card: object) -> None:
    storage = pg_card("再开")  # type: ignore[operator]
    storage.sessions.set_meta("jA", b'{"name": "\xe7\x94\xb2"}\n')
    storage.close()
    assert storage.sessions.meta("jA") == b'{"name": "\xe7\x94\xb2"}\n'


def test_a_server_that_does_not_answer_is_unavailable_not_a_config_error(tmp_path: Path) -> None:
    storage = CardStorage.postgres("postgresql://nobody@127.0.0.1:9/none?connect_timeout=2", scope="卡")
    with pytest.raises(StorageUnavailable) as caught:
        Card.open(tmp_path / "卡", storage=storage)
    assert not isinstance(caught.value, ConfigError)
    assert isinstance(caught.value, TreeError)  # what callers of a session caught before, still caught


def test_a_lone_surrogate_in_a_scope_or_session_name_is_refused_by_the_family(pg_card: object) -> None:
    with pytest.raises(StorageRefused, match="代理码位"):
        CardStorage.postgres("postgresql://nowhere/none", scope="卡\udc80")
    storage = pg_card("卡")  # type: ignore[operator]
    with pytest.raises(StorageRefused, match="代理码位"):
        storage.sessions.log("jA", "00\ud8001.jsonl")
    with pytest.raises(StorageRefused):
        storage.sessions.names("j\udc80")
    assert storage.sessions.chat_ids() == []  # nothing was written, the storage still works


def test_a_card_folder_that_cannot_be_made_is_refused_by_the_family(tmp_path: Path) -> None:
    blocker = tmp_path / "一个文件"
    blocker.write_text("不是文件夹", encoding="utf-8")
    for path in (blocker, blocker / "卡"):
        with pytest.raises(StorageRefused, match="不是文件夹"):
            Card.open(path)
        with pytest.raises(StorageRefused, match="不是文件夹"):
            CardStorage.folder(path)


def test_a_connection_borrowed_before_a_close_goes_back_to_its_own_pool(pg_card: object) -> None:
    """Closing while a call still holds a connection (a background write) must neither
    break that call nor hand its connection to the next pool."""
    storage = pg_card("借出")  # type: ignore[operator]
    db = storage.database
    borrowed = db.getconn()
    storage.close()  # the pool goes; the borrowed connection is still in use
    assert storage.sessions.chat_ids() == []  # a new pool opens on the next call
    db.putconn(borrowed)  # returned after the close: closed, not given to the new pool
    assert borrowed.closed
    assert storage.sessions.chat_ids() == []


def test_a_server_stopped_and_started_again_fails_at_once_then_recovers_without_a_restart(tmp_path: Path) -> None:
    """A server of its own, stopped mid-play for a while: each call fails at once with
    StorageUnavailable (no wait on the pool), and the first turn after the server is back
    succeeds within a second, on the same card (nothing reopened but the chat)."""
    import os
    import subprocess

    from liyuan.storage.devserver import PostgresUnavailable, start_postgres
    from tests.liyuan.vector.postgres import refuse

    try:
        server = start_postgres()
    except PostgresUnavailable as exc:
        refuse(str(exc), os.environ)
        return

    def ctl(*args: str) -> None:
        done = subprocess.run([str(server.pg_ctl), "-D", str(server.data), *args], capture_output=True, text=True,
                              check=False, timeout=60, **server.run_as)
        assert done.returncode == 0, done.stderr

    try:
        port = server.dsn.rsplit(":", 1)[1].split("/")[0]
        with Card.open(tmp_path / "卡", storage=CardStorage.postgres(server.dsn, scope="停机"), background=False,
                       auto_sync=False, ids=counter_ids("e")) as card:
            chat = card.chat("jA")
            chat.prepare("停机之前")
            chat.record("（手写回复）好。")
            ctl("-m", "fast", "stop")
            for _ in range(3):
                began = time.monotonic()
                with pytest.raises(StorageUnavailable):
                    card.chat("jA").prepare("停机时")
                assert time.monotonic() - began < 2.0  # at once, not after the pool's timeout
            ctl("-l", str(server.data / "server.log"), "-w", "-o",
                f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={server.data}", "start")
            began = time.monotonic()
            chat = card.reopen("jA")
            chat.prepare("回来之后")
            chat.record("（手写回复）回来了。")
            assert time.monotonic() - began < 1.0
            texts = [e.text for e in card.reopen("jA").tree.branch()]
            assert texts == ["停机之前", "（手写回复）好。", "回来之后", "（手写回复）回来了。"]  # no loss, no fork
    finally:
        server.stop()
