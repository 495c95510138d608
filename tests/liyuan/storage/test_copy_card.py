"""A whole card moves between the card folder and PostgreSQL (issue 22): sessions, chat
names, recaps, handbook, resident summary, manifest and ``.history/``.

Every recap and merge reply here is hand-written (a scripted stand-in): no model wrote them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from liyuan import Card
from liyuan.card import manual as card_manual
from liyuan.card.layout import CardLayout
from liyuan.card.lock import SYNC_LOCK_FILE, WRITE_LOCK_FILE
from liyuan.clock import counter_ids, fixed_clock
from liyuan.errors import CardIncomplete, SessionConflictError, StateError
from liyuan.model import FunctionModel
from liyuan.storage import CardStorage, copy_card
from tests.liyuan.card.test_fixtures import CHAR, USER, two_chat_model, user_text

ROOT = Path(__file__).resolve().parents[3]




def _open(path: Path, model: FunctionModel, storage: CardStorage | None = None) -> Card:
    return Card.open(path, side_model=model, user_name=USER, char_name=CHAR, background=False,
                     auto_sync=False, clock=fixed_clock(), ids=counter_ids("e"), storage=storage)


def _play(card: Card, chat_id: str, who: str, turns: int) -> None:
    chat = card.chat(chat_id, title=f"{who}的一局")
    for n in range(turns):
        chat.prepare(f"{who}的第{n}拍")
        chat.record(f"（脚本回复）{who}的第{n}拍之后")


@pytest.fixture
def played(tmp_path: Path) -> Path:
    """A card folder with two chats, a sync, and a hand edit of the handbook (so ``.history/`` has a copy)."""
    folder = tmp_path / "原卡"
    with _open(folder, two_chat_model()) as card:
        _play(card, "jA", "甲", 3)
        _play(card, "jB", "乙", 2)
        outcome = card.sync()
        assert outcome is not None and outcome.recapped == ["jA", "jB"] and outcome.merged == "ok"
        doc = card.memory.read_memory(card_manual.HANDBOOK_REF)
        assert doc is not None
        card.memory.change_memory(card_manual.HANDBOOK_REF, doc[1], doc[0] + "\n- 手工补的一条（手写）\n")
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    skip = {SYNC_LOCK_FILE, WRITE_LOCK_FILE}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name not in skip}


@pytest.fixture
def postgres(postgres_dsn: str) -> Iterator[list[CardStorage]]:
    opened: list[CardStorage] = []
    yield opened
    for each in opened:
        each.close()


def test_a_card_goes_to_postgres_and_back_byte_for_byte(played: Path, tmp_path: Path, postgres_dsn: str,
                                                        postgres: list[CardStorage]) -> None:
    before = _files(played)
    assert any(rel.startswith("记忆/.history/") for rel in before) and "记忆/记忆.md" in before
    assert "对话/jA/meta.json" in before
    postgres.append(CardStorage.postgres(postgres_dsn, scope="搬家"))
    there = copy_card(CardStorage.folder(played), postgres[0], restamp=False)
    assert there.sessions == 2 and there.documents == sum(rel.startswith("记忆/") for rel in before)
    copy_card(postgres[0], CardStorage.folder(tmp_path / "回来"), restamp=False)
    assert _files(tmp_path / "回来") == before


def test_a_moved_card_pays_for_no_recap_and_keeps_its_chat_names(played: Path, tmp_path: Path,
                                                                  postgres_dsn: str,
                                                                  postgres: list[CardStorage]) -> None:
    postgres.append(CardStorage.postgres(postgres_dsn, scope="搬家"))
    moved = copy_card(CardStorage.folder(played), postgres[0])
    assert moved.restamped == ["jA", "jB"]
    model = two_chat_model()
    other_server = tmp_path / "另一台服务器"  # an empty folder: nothing of the card is on this machine
    with _open(other_server, model, postgres[0]) as card:
        outcome = card.sync()
        assert outcome is not None and outcome.recapped == [] and model.calls == []  # nothing paid again
        assert card.resident_summary() == CardStorage.folder(played).memory.read_text(
            CardStorage.folder(played).memory.layout.resident).strip()  # type: ignore[union-attr]
        _play(card, "jA", "甲", 1)  # a new turn on the other server
        assert card.sync().recapped == ["jA"]  # type: ignore[union-attr]
    recap_calls = [c for c in model.calls if c.purpose == "recap"]
    assert len(recap_calls) == 1 and 'chat="甲的一局"' in user_text(recap_calls[0])  # its name came along
    assert not any((other_server / "对话").rglob("*.jsonl")) and not (other_server / "记忆").exists()


def test_a_copy_never_overwrites_memory_the_target_has(played: Path, postgres_dsn: str,
                                                       postgres: list[CardStorage]) -> None:
    postgres.append(CardStorage.postgres(postgres_dsn, scope="已有"))
    target = postgres[0]
    target.memory.write_text(target.memory.layout.handbook, "目标自己的手册\n")
    with pytest.raises(StateError):
        copy_card(CardStorage.folder(played), target)
    assert target.memory.snapshot() == {"记忆.md": "目标自己的手册\n".encode()}
    assert target.sessions.chat_ids() == []  # nothing of the card was copied
    copy_card(CardStorage.folder(played), CardStorage.folder(played.parent / "第一份"))
    with pytest.raises(SessionConflictError):
        copy_card(CardStorage.folder(played), CardStorage.folder(played.parent / "第一份"))


def _vector_card(path: Path, storage: CardStorage | None = None, ids: str = "v") -> Card:
    from liyuan import MemoryConfig, VectorConfig

    return Card.open(path, config=MemoryConfig(vector=VectorConfig(enabled=True, embedder="hash")), user_name=USER,
                     char_name=CHAR, background=False, clock=fixed_clock(), ids=counter_ids(ids), auto_sync=False,
                     storage=storage)


PLACES = ["东门的茶摊", "北礁的灯塔", "码头的石阶", "老梨树下", "城西的当铺", "渡口的白帆", "灯室的铜铃", "雪夜的客栈"]


def test_vector_memory_moves_with_the_card_and_recalls_the_same(tmp_path: Path, postgres_dsn: str,
                                                                postgres: list[CardStorage]) -> None:
    folder = tmp_path / "原卡"
    with _vector_card(folder) as card:
        chat = card.chat("jA", greeting="雾很大。")
        for i, place in enumerate(PLACES):
            chat.prepare(f"第{i}天，我们去{place}看看。")
            chat.record(f"（脚本回复）第{i}天林溯带你到了{place}，" + "那里的风很冷，她讲了一段旧事。" * 3)
    postgres.append(CardStorage.postgres(postgres_dsn, scope="向量搬家"))
    moved = copy_card(CardStorage.folder(folder), postgres[0])
    assert moved.chunks > 0
    copy_card(postgres[0], CardStorage.folder(tmp_path / "回来"))  # and back out to a folder

    def ask(card: Card) -> list[str]:
        with card:
            return [m.content for m in card.chat("jA").prepare("还记得北礁的灯塔吗？").messages]

    on_files = ask(_vector_card(folder, ids="q"))
    on_postgres = ask(_vector_card(tmp_path / "另一台服务器", CardStorage.postgres(postgres_dsn, scope="向量搬家"),
                                   ids="q"))  # the card closes the storage it was given
    back = ask(_vector_card(tmp_path / "回来", ids="q"))
    assert any("【剧情记忆】" in m and "北礁的灯塔" in m for m in on_files)  # recall ran on the original
    assert on_postgres == on_files and back == on_files


def test_a_deleted_chat_s_recap_is_gone_for_good_before_its_sessions_go(played: Path, postgres_dsn: str,
                                                                       postgres: list[CardStorage],
                                                                       tmp_path: Path) -> None:
    """On PostgreSQL the recap's deletion is committed before the sessions are dropped, as on
    files (recap first): a process dying in between forgets the chat instead of keeping the
    memory of a chat that no longer exists."""
    postgres.append(CardStorage.postgres(postgres_dsn, scope="删局"))
    copy_card(CardStorage.folder(played), postgres[0])
    storage = CardStorage.postgres(postgres_dsn, scope="删局")
    sessions = storage.sessions
    seen: list[bool] = []
    real = sessions.drop

    def drop(chat_id: str) -> None:  # what another server sees at the moment the sessions go
        with CardStorage.postgres(postgres_dsn, scope="删局") as watcher:
            files = watcher.memory_store(CardLayout(tmp_path))
            seen.append(files.exists(files.layout.recap_path(chat_id)))
        real(chat_id)

    sessions.drop = drop  # type: ignore[method-assign]
    with Card.open(tmp_path / "服务器", storage=storage, background=False, auto_sync=False) as card:
        assert card.delete_chat("jA")
    assert seen == [False]  # already committed as gone


_COPIER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    import liyuan.storage.copy as copy_module
    from liyuan.storage import CardStorage, copy_card

    def stalled(source, target):  # the sessions are in; the process is killed before the memory
        print("sessions copied", flush=True)
        time.sleep(120)

    copy_module.copy_memory = stalled
    source, kind, target = sys.argv[2:5]
    copy_card(CardStorage.folder(source),
              CardStorage.folder(target) if kind == "folder" else CardStorage.postgres(target, scope="半张"))
""")


@pytest.mark.skipif(sys.platform == "win32", reason="kills with SIGKILL")
@pytest.mark.parametrize("kind", ["postgres", "folder"])
def test_a_copy_killed_half_way_refuses_to_open_until_cleared_then_copies_whole(
        played: Path, tmp_path: Path, kind: str, request: pytest.FixtureRequest) -> None:
    """kill -9 in the middle of ``copy_card`` (sessions copied, memory documents not): the
    half card must not open as whole (its first sync would pay for every recap again and
    bring back a forgotten chat); it says how to clear it, and after ``clear()`` the copy
    runs again and the card is whole."""
    dsn = request.getfixturevalue("postgres_dsn") if kind == "postgres" else ""
    where = dsn if kind == "postgres" else str(tmp_path / "半张")
    copier = subprocess.Popen([sys.executable, "-c", _COPIER, str(ROOT), str(played), kind, where],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert copier.stdout is not None and copier.stdout.readline().strip() == "sessions copied"
        os.kill(copier.pid, signal.SIGKILL)
        copier.wait(10)
    finally:
        if copier.poll() is None:
            copier.kill()
            copier.wait(10)
    target = CardStorage.folder(where) if kind == "folder" else CardStorage.postgres(dsn, scope="半张")
    server = Path(where) if kind == "folder" else tmp_path / "服务器"  # a folder card opens where it is
    try:
        assert target.sessions.chat_ids() == ["jA", "jB"]  # half of it is there
        model = two_chat_model()
        with pytest.raises(CardIncomplete, match=r"没有做完的复制.*clear\(\)"):
            _open(server, model, target)
        with pytest.raises(CardIncomplete):  # a second copy over it is refused, saying the same
            copy_card(CardStorage.folder(played), target)
        target.clear()
        assert target.sessions.chat_ids() == [] and target.memory.snapshot() == {}
        copy_card(CardStorage.folder(played), target)
        with _open(server, model, target) as card:
            assert card.chat_ids() == ["jA", "jB"]
            outcome = card.sync()
            assert outcome is not None and outcome.recapped == [] and model.calls == []  # nothing paid again
    finally:
        target.close()
