"""The library never prints, and a listener that closes the card or waits for a sync is refused (issue 37)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from liyuan import Activity, Card, Completion, FunctionModel, MemoryConfig, ModelRequest, StateError

ROOT = Path(__file__).resolve().parents[3]


def test_a_failed_background_sync_prints_nothing_to_stderr(tmp_path: Path) -> None:
    """Item 9: the library's logger has a NullHandler, so Python's last-resort handler never prints."""
    script = textwrap.dedent(f"""
        from liyuan import Card, Completion, FunctionModel
        from liyuan.card.sync import CardMemory

        def broken(self):
            raise RuntimeError("同步坏了")

        CardMemory.sync = broken
        seen = []
        card = Card.open({str(tmp_path / "雾港")!r}, side_model=FunctionModel(lambda r: Completion("x")),
                         on_activity=seen.append)
        card.chat("jA")
        outcome = card.sync()
        card.close(10)
        assert outcome is not None and outcome.errors, outcome
        assert any(a.kind == "error" and "同步坏了" in a.text for a in seen), seen
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
    assert done.stderr == ""


def _card_whose_listener_calls(tmp_path: Path, call: str) -> tuple[Card, list[BaseException | str], threading.Event]:
    got: list[BaseException | str] = []
    finished = threading.Event()
    holder: list[Card] = []

    def listener(activity: Activity) -> None:
        if activity.kind != "sync" or finished.is_set():
            return
        try:
            card = holder[0]
            if call == "close":
                card.close()
            else:
                card.sync(wait=True)
            got.append("returned")
        except BaseException as exc:
            got.append(exc)
        finally:
            finished.set()

    side = FunctionModel(lambda request: Completion("一段脚本写的复盘（不是模型输出）"))
    card = Card.open(tmp_path / "雾港", side_model=side, user_name="阿简", char_name="林溯", on_activity=listener)
    holder.append(card)
    return card, got, finished


def _one_sync_line(card: Card) -> None:
    chat = card.chat("jA")  # entering it syncs in the background
    chat.prepare("我把伞递给她。")
    chat.record("她没接。")
    card.sync(wait=False)


def test_closing_the_card_inside_the_listener_is_refused_not_hung(tmp_path: Path) -> None:
    """Item 7: card.close() from on_activity on the sync worker used to wait for its own job forever."""
    card, got, finished = _card_whose_listener_calls(tmp_path, "close")
    _one_sync_line(card)
    assert finished.wait(20), "the listener's close() never returned"
    assert len(got) == 1 and isinstance(got[0], StateError), got
    assert "on_activity" in str(got[0])
    assert card.close(20)


def test_waiting_for_a_sync_inside_the_listener_is_refused_not_hung(tmp_path: Path) -> None:
    card, got, finished = _card_whose_listener_calls(tmp_path, "sync")
    _one_sync_line(card)
    assert finished.wait(20), "the listener's sync(wait=True) never returned"
    assert len(got) == 1 and isinstance(got[0], StateError), got
    assert card.close(20)


def test_a_chat_flush_inside_the_listener_on_the_chats_lane_is_refused(tmp_path: Path) -> None:
    got: list[BaseException | str] = []
    finished = threading.Event()
    chats: list[object] = []

    def listener(activity: Activity) -> None:
        if activity.kind != "compact" or finished.is_set() or threading.current_thread().name != "liyuan-jA":
            return
        try:
            chats[0].flush()  # type: ignore[attr-defined]
            got.append("returned")
        except BaseException as exc:
            got.append(exc)
        finally:
            finished.set()

    def side(request: ModelRequest) -> Completion:
        raise RuntimeError("旁路模型坏了")

    card = Card.open(tmp_path / "雾港", side_model=FunctionModel(side), user_name="阿简", char_name="林溯",
                     on_activity=listener, auto_sync=False, config=MemoryConfig(every_n_turns=2, min_chars=0))
    chat = card.chat("jA")
    chats.append(chat)
    for i in range(12):
        chat.prepare(f"第{i}拍。" + "雾" * 200)
        chat.record(f"回应{i}。" + "雾" * 200)
    assert finished.wait(20), "the listener's flush() never returned"
    assert len(got) == 1 and isinstance(got[0], StateError), got
    assert card.close(20)
