"""What a card tells the app when its own files need attention (issue 26, items 11 and 12).

Every recap and merge reply here is a hand-written stand-in (FunctionModel), not model output.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from liyuan import FunctionModel, ModelRequest
from liyuan.card.prompts import HANDBOOK_MARK, RESIDENT_MARK

from .cards import open_card

RECAP = ("# 雾港初见\n\n## 剧情脉络\n- 阿简在雾港遇见林溯。\n\n## 人物与关系\n- 林溯：守灯人。\n\n"
         "## 既定事实\n- 港口有灯塔。\n\n## 未了之事\n- 无\n\n## 用户的玩法偏好\n- 无")
MERGE = (f"{HANDBOOK_MARK}\n# 局：雾港初见（jA）\n- 阿简遇见林溯\n来源：局/jA.md\n"
         f"{RESIDENT_MARK}\n# 往局记忆（同一世界更早的几局）\n\n- 阿简遇见林溯 [局:jA]\n")


def side(request: ModelRequest) -> str:
    return RECAP if request.purpose == "recap" else MERGE


def test_a_damaged_manifest_names_the_exact_call_in_the_error_and_the_activity_line(tmp_path: Path) -> None:
    with open_card(tmp_path, side_model=FunctionModel(side)) as card:
        chat = card.chat("jA")
        chat.prepare("我上岸了。")
        chat.record("林溯提着灯。")
        first = card.sync()
        assert first is not None and first.merged == "ok"
        manifest = card.path / "记忆" / ".清单.json"
        data = bytearray(manifest.read_bytes())
        data[len(data) // 2] ^= 0x01  # one flipped bit: still refused, never guessed
        manifest.write_bytes(bytes(data))
        card.activity.clear()
        out = card.sync()
        assert out is not None and len(out.errors) == 1
        assert "card.repair_manifest()" in out.errors[0]
        lines = [a.text for a in card.activity if "card.repair_manifest()" in a.text]
        assert lines and any(a.kind == "error" for a in card.activity if a.text in lines)
        repair = card.repair_manifest()  # the call the error names exists on the card
        assert repair.kept_at is not None and repair.kept_at.is_file()
        again = card.sync()
        assert again is not None and again.errors == []


# -- issue 26, item 11: a kill mid-import ----------------------------------------------
# Before: the killed import's full-size temporary file stayed, and chat_ids() listed the
# phantom chat folder holding it (21 after 35 kills), never cleaned.

IMPORT_CHILD = r"""
import sys, time
from liyuan.session.imports import reader
original = reader.write_messages
def stalled(tree, messages, fmt, *, on_progress=None):
    def held():
        for index, message in enumerate(messages):
            if index == 200:
                print("midway", flush=True)
                time.sleep(60)
            yield message
    return original(tree, held(), fmt, on_progress=on_progress)
reader.write_messages = stalled
from liyuan import Card
Card.open(sys.argv[1], background=False).import_chat(sys.argv[2], "jK")
"""


def _kill_mid_import(card_dir: Path, source: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", IMPORT_CHILD, str(card_dir), str(source)],
                            stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"midway"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def test_a_kill_mid_import_leaves_nothing_once_the_card_is_opened_again(tmp_path: Path) -> None:
    with open_card(tmp_path, side_model=FunctionModel(side), background=False) as card:
        card.chat("jA").prepare("我上岸了。")
        card_dir = card.path
    source = tmp_path / "big.txt"
    source.write_text("".join(f"小满：第{i}句。\n\n阿明：好的{i}。\n\n" for i in range(600)), encoding="utf-8")
    _kill_mid_import(card_dir, source)
    sessions = card_dir / "对话" / "jK" / "会话"
    left = [p.name for p in sessions.iterdir()]
    assert len(left) == 1 and ".importing-" in left[0]  # what the kill left: a temp file, a phantom chat
    with open_card(tmp_path, side_model=FunctionModel(side), background=False) as card:
        assert card.chat_ids() == ["jA"]
        assert not (card_dir / "对话" / "jK").exists()
        assert any("导入" in a.text and "临时文件" in a.text for a in card.activity)
        card.import_chat(source, "jK")  # the id is free again
        assert card.chat_ids() == ["jA", "jK"]


def test_an_import_still_running_in_a_live_process_is_left_alone(tmp_path: Path) -> None:
    with open_card(tmp_path, side_model=FunctionModel(side), background=False) as card:
        card_dir = card.path
    sessions = card_dir / "对话" / "jL" / "会话"
    sessions.mkdir(parents=True)
    running = sessions / f".001.jsonl.importing-{os.getpid()}-{threading.get_ident()}"
    running.write_text('{"type":"session","version":1,"id":"x"}\n', encoding="utf-8")
    with open_card(tmp_path, side_model=FunctionModel(side), background=False):
        assert running.is_file()  # its owner is alive: never removed under it
