"""The memory seam's contract, on both backends: the card folder's files and PostgreSQL.

Each test runs once per backend (``store`` fixture). What only one backend does is tested
apart: a write lock that is a transaction (PostgreSQL, below); symlinks, torn temp files
and the swap that puts an editor's save back (files: ``tests/liyuan/card``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from liyuan.card.files import MemoryFiles
from liyuan.card.housekeeping import HISTORY_KEEP
from liyuan.card.layout import CardLayout
from liyuan.card.memstore import MemoryStore
from liyuan.clock import counter_ids, fixed_clock
from liyuan.errors import MemoryFileError, StateError, StorageError, UnsafePathError
from liyuan.storage import CardStorage

BACKENDS = ["files", "postgres"]
ROOT = Path(__file__).resolve().parents[3]


_OPENED: dict[int, CardStorage] = {}
"""The storage object behind each store :func:`_open` gave out (closed by :func:`_close`)."""


def _open(backend: str, card: Path, dsn: str | None, scope: str = "卡") -> MemoryStore:
    """The card's memory as its storage object gives it, on ``backend``."""
    if backend == "files":
        storage = CardStorage.folder(card)
    else:
        assert dsn is not None
        storage = CardStorage.postgres(dsn, scope=scope)
    store = storage.memory_store(CardLayout(card), clock=fixed_clock(), ids=counter_ids("h"))
    _OPENED[id(store)] = storage
    return store


def _close(store: MemoryStore) -> None:
    storage = _OPENED.pop(id(store), None)
    if storage is not None:
        storage.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else None
    opened = _open(request.param, tmp_path / "卡", dsn)
    yield opened
    _close(opened)


def test_a_document_reads_back_as_written_and_a_missing_one_is_none(store: MemoryStore) -> None:
    handbook = store.layout.handbook
    assert store.read_text(handbook) is None and store.read_bytes(handbook) is None
    assert not store.exists(handbook) and store.stamp(handbook) is None
    store.write_text(handbook, "# 手册\n- 小满怕黑\n")
    assert store.read_text(handbook) == "# 手册\n- 小满怕黑\n" and store.exists(handbook)
    assert store.read_bytes(handbook) == "# 手册\n- 小满怕黑\n".encode()
    first = store.stamp(handbook)
    store.write_text(handbook, "# 手册\n- 小满不怕黑了\n")
    assert store.stamp(handbook) not in (None, first)
    store.delete(handbook)
    store.delete(handbook)  # a missing document is fine
    assert store.read_text(handbook) is None


def test_text_is_read_with_plain_newlines_and_bad_utf8_is_an_error_not_a_gap(store: MemoryStore) -> None:
    store.restore({"记忆.md": "一\r\n二\r三\n".encode(), "常驻摘要.md": b"\xff\xfe bad"})
    assert store.read_text(store.layout.handbook) == "一\n二\n三\n"
    with pytest.raises(MemoryFileError):
        store.read_text(store.layout.resident)


def test_replace_writes_only_over_what_the_change_read(store: MemoryStore) -> None:
    path = store.layout.recap_path("jA")
    assert store.replace_text(path, "第一版\n", None)  # created: it was missing
    assert not store.replace_text(path, "抢先\n", None)  # not missing any more
    assert not store.replace_text(path, "第二版\n", "别的内容\n")  # a stale read
    assert store.read_text(path) == "第一版\n"
    assert store.replace_text(path, "第二版\n", "第一版\n")
    assert store.read_text(path) == "第二版\n"
    store.delete(path)
    assert not store.replace_text(path, "第三版\n", "第二版\n")  # deleted meanwhile is a change too
    assert store.read_text(path) is None


def test_recaps_are_the_valid_ids_of_局_minus_the_forgotten(store: MemoryStore) -> None:
    layout = store.layout
    for chat_id, text in (("jB", "乙"), ("jA", "甲"), ("jC", "丙")):
        store.write_text(layout.recap_path(chat_id), text)
    store.restore({"局/笔记.txt": b"not a recap", "局/bad id.md": b"x", "局/sub/jD.md": b"x"})
    assert store.recap_texts() == {"jA": "甲", "jB": "乙", "jC": "丙"}
    assert list(store.recap_texts(forgotten={"jB"})) == ["jA", "jC"]


def test_history_keeps_the_newest_copies_of_each_document(store: MemoryStore) -> None:
    layout = store.layout
    for n in range(HISTORY_KEEP + 5):
        store.write_text(layout.handbook, f"第{n}版\n")
        assert store.backup_copy(layout.handbook) is not None
    store.write_text(layout.resident, "常驻\n")
    store.backup_copy(layout.resident)
    history = {rel: data for rel, data in store.snapshot().items() if rel.startswith(".history/")}
    handbook_copies = sorted(data.decode() for rel, data in history.items() if rel.endswith("-记忆.md"))
    assert len(handbook_copies) == HISTORY_KEEP
    assert set(handbook_copies) == {f"第{n}版\n" for n in range(5, HISTORY_KEEP + 5)}  # the oldest five went
    assert [data for rel, data in history.items() if rel.endswith("-常驻摘要.md")] == ["常驻\n".encode()]
    assert store.backup_copy(layout.recap_path("jZ")) is None  # nothing to copy


def test_a_content_copy_is_made_once_and_a_move_empties_the_place(store: MemoryStore) -> None:
    layout = store.layout
    store.write_text(layout.manifest, "{坏的清单")
    first = store.backup_once(layout.manifest)
    assert first is not None and store.backup_once(layout.manifest) == first
    store.write_text(layout.resident, "要退场的常驻摘要\n")
    assert store.move_to_history(layout.resident) is not None
    assert store.read_text(layout.resident) is None and store.move_to_history(layout.resident) is None
    history = [data for rel, data in store.snapshot().items() if rel.startswith(".history/")]
    assert sorted(history) == sorted(["{坏的清单".encode(), "要退场的常驻摘要\n".encode()])


def test_the_input_stamp_moves_with_any_input_and_only_then(store: MemoryStore) -> None:
    layout = store.layout
    store.write_text(layout.recap_path("jA"), "甲\n")
    stamp = store.input_stamp()
    assert store.input_stamp() == stamp
    store.backup_copy(layout.recap_path("jA"))  # .history is no input
    assert store.input_stamp() == stamp
    for change in (lambda: store.write_text(layout.recap_path("jB"), "乙\n"),
                   lambda: store.write_text(layout.handbook, "手册\n"),
                   lambda: store.write_text(layout.manifest, "{}"),
                   lambda: store.delete(layout.recap_path("jA"))):
        change()
        assert store.input_stamp() != stamp
        stamp = store.input_stamp()


def test_a_path_outside_the_memory_is_refused(store: MemoryStore, tmp_path: Path) -> None:
    with pytest.raises(UnsafePathError):
        store.read_text(tmp_path / "别处.md")
    with pytest.raises(UnsafePathError):
        store.write_text(tmp_path / "别处.md", "不该写")
    assert not (tmp_path / "别处.md").exists()


SNAPSHOT = {
    "记忆.md": "# 手册\n- 小满怕黑\n来源：局/jA.md\n".encode(),
    "常驻摘要.md": "# 往局记忆\r\n\r\n- CRLF 原样保留\r\n".encode(),
    "局/jA.md": "# 甲\n".encode(),
    "局/jB.md": b"\xff not utf-8, kept as bytes",
    ".\u6e05\u5355.json": b'{"version": 2}',
    ".history/20260101T000000-h1-\u8bb0\u5fc6.md": "旧手册\n".encode(),
}


def test_a_whole_memory_goes_to_the_other_backend_and_back_byte_for_byte(
        store: MemoryStore, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    store.restore(SNAPSHOT)
    assert store.snapshot() == SNAPSHOT
    other_backend = "postgres" if isinstance(store, MemoryFiles) else "files"
    dsn = request.getfixturevalue("postgres_dsn") if other_backend == "postgres" else None
    other = _open(other_backend, tmp_path / "另一处", dsn, scope="另一处")
    try:
        other.restore(store.snapshot())
        assert other.snapshot() == SNAPSHOT
        assert other.input_stamp() == store.input_stamp()  # the same inputs, the same stamp on both
        back = _open("files", tmp_path / "回来", None)
        back.restore(other.snapshot())
        assert back.snapshot() == SNAPSHOT
        assert (tmp_path / "回来" / "记忆" / "常驻摘要.md").read_bytes() == SNAPSHOT["常驻摘要.md"]
    finally:
        _close(other)


# -- the locks, across processes ----------------------------------------------------------

_HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from tests.liyuan.storage.test_memory_contract import _open
    backend, card, dsn, kind = sys.argv[2:6]
    lock = getattr(_open(backend, Path(card), dsn or None).locks, kind)
    assert lock.acquire()
    print("held", flush=True)
    time.sleep(120)
""")


@pytest.mark.skipif(sys.platform == "win32", reason="kills with SIGKILL")
@pytest.mark.parametrize("kind", ["run", "write"])
def test_a_lock_excludes_a_spawned_process_and_is_free_after_it_is_killed(
        store: MemoryStore, kind: str, request: pytest.FixtureRequest) -> None:
    backend = "files" if isinstance(store, MemoryFiles) else "postgres"
    dsn = request.getfixturevalue("postgres_dsn") if backend == "postgres" else ""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(ROOT), backend, str(store.layout.card_dir),
                               dsn, kind], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lock = getattr(store.locks, kind)
        assert not lock.acquire(blocking=False)  # the other process has it
        time.sleep(0.2)
        assert not lock.acquire(blocking=False)  # and keeps it while it lives
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        deadline = time.monotonic() + 10
        while not lock.acquire(blocking=False):
            assert time.monotonic() < deadline, "the lock of a killed process was never freed"
            time.sleep(0.02)
        lock.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)


# -- PostgreSQL only: the write lock is a transaction -------------------------------------


def test_on_postgres_a_step_that_fails_under_the_write_lock_leaves_nothing(postgres_dsn: str, tmp_path: Path) -> None:
    storage = CardStorage.postgres(postgres_dsn, scope="卡")
    store = storage.memory_store(CardLayout(tmp_path), clock=fixed_clock(), ids=counter_ids("h"))
    try:
        store.write_text(store.layout.handbook, "原来的手册\n")
        with pytest.raises(RuntimeError), store.locks.write:
            store.backup_copy(store.layout.handbook)
            store.write_text(store.layout.recap_path("jA"), "新复盘\n")
            assert store.read_text(store.layout.recap_path("jA")) == "新复盘\n"  # the holder sees its writes
            raise RuntimeError("a crash between the recap and the manifest")
        assert store.snapshot() == {"记忆.md": "原来的手册\n".encode()}  # no recap, no copy
        with store.locks.write:
            store.write_text(store.layout.recap_path("jA"), "新复盘\n")
        assert store.read_text(store.layout.recap_path("jA")) == "新复盘\n"
    finally:
        storage.close()


def test_on_postgres_a_write_step_whose_statement_failed_is_not_reported_as_written(
        postgres_dsn: str, tmp_path: Path) -> None:
    """A statement that fails inside the write lock's transaction aborts it; leaving the lock
    must say so, not commit in silence (PostgreSQL would turn the COMMIT into a rollback)."""
    storage = CardStorage.postgres(postgres_dsn, scope="卡")
    store = storage.memory_store(CardLayout(tmp_path))
    memory = store.memory  # type: ignore[attr-defined]
    try:
        with pytest.raises(MemoryFileError, match="没有提交"), store.locks.write:
            store.write_text(store.layout.handbook, "写到一半的手册\n")
            with pytest.raises(StorageError):
                memory.run(lambda db: db.execute("SELECT 1/0"))  # caught by the step, as a sync might
        assert store.read_text(store.layout.handbook) is None
        with store.locks.write:  # the lock and its connection are usable again
            store.write_text(store.layout.handbook, "重做的手册\n")
        assert store.read_text(store.layout.handbook) == "重做的手册\n"
        with store.locks.write, pytest.raises(StateError):
            storage.close()  # never behind the holder's back
    finally:
        storage.close()
