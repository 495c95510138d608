"""What a card tells the app when its own files need attention (issue 26, items 11 and 12).

Every recap and merge reply here is a hand-written stand-in (FunctionModel), not model output.
"""

from __future__ import annotations

from pathlib import Path

from liyuan import Card, FunctionModel, ModelRequest
from liyuan.card.prompts import HANDBOOK_MARK, RESIDENT_MARK
from liyuan.clock import counter_ids, fixed_clock

RECAP = ("# 雾港初见\n\n## 剧情脉络\n- 阿简在雾港遇见林溯。\n\n## 人物与关系\n- 林溯：守灯人。\n\n"
         "## 既定事实\n- 港口有灯塔。\n\n## 未了之事\n- 无\n\n## 用户的玩法偏好\n- 无")
MERGE = (f"{HANDBOOK_MARK}\n# 局：雾港初见（jA）\n- 阿简遇见林溯\n来源：局/jA.md\n"
         f"{RESIDENT_MARK}\n# 往局记忆（同一世界更早的几局）\n\n- 阿简遇见林溯 [局:jA]\n")


def side(request: ModelRequest) -> str:
    return RECAP if request.purpose == "recap" else MERGE


def open_card(root: Path, **options: object) -> Card:
    options.setdefault("clock", fixed_clock())
    options.setdefault("ids", counter_ids("e-"))
    return Card.open(root / "cards" / "雾港", user_name="阿简", char_name="林溯",  # type: ignore[arg-type]
                     side_model=FunctionModel(side), **options)


def test_a_damaged_manifest_names_the_exact_call_in_the_error_and_the_activity_line(tmp_path: Path) -> None:
    with open_card(tmp_path) as card:
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
