"""Issue 36 item 3: a chat's lane keeps one thread for its turns, and an idle lane does not hold up the exit."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from liyuan import Card, Completion, FunctionModel
from liyuan.app.activity import LANE_IDLE_S

ROOT = Path(__file__).resolve().parents[3]


def test_turns_do_not_start_a_thread_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    real_start = threading.Thread.start

    def counting(thread: threading.Thread) -> None:
        started.append(thread.name)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", counting)
    with Card.open(tmp_path / "雾港", user_name="阿简", char_name="林溯", auto_sync=False,
                   side_model=FunctionModel(lambda _r: Completion("（脚本回复）"))) as card:
        chat = card.chat("jA")
        for i in range(20):
            chat.prepare(f"第{i}拍。")
            chat.record(f"回应{i}。")
            assert chat.flush(10)  # the lane drains between turns, as with a user who reads the reply
    assert started.count("liyuan-jA") == 1, started  # before: one thread per turn (20)


def test_an_idle_lane_does_not_hold_up_the_end_of_the_program(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from liyuan import Card, Completion, FunctionModel\n"
        "card = Card.open(sys.argv[1], user_name='阿简', char_name='林溯', auto_sync=False,\n"
        "                 side_model=FunctionModel(lambda _r: Completion('（脚本回复）')))\n"
        "chat = card.chat('jA')\n"
        "chat.prepare('第一拍。')\n"
        "chat.record('回应。')\n"
        "assert chat.flush(10)\n"
        "print('done')  # no close: the lane's thread idles\n"
    )
    # The bound is far below the lane's idle wait: an exit that waited for it would time out.
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "雾港")], cwd=ROOT, capture_output=True,
                          text=True, timeout=LANE_IDLE_S / 5, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr
