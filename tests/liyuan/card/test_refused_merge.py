"""A refused merge is never paid for twice on the same inputs (issue 37, items 4 and 5).

Every recap and merge reply here is hand-written (FunctionModel), not model output.
"""

from __future__ import annotations

from pathlib import Path

from liyuan.card.manifest import load_manifest
from liyuan.model import FunctionModel, ModelRequest

from .test_fixtures import RECAP_A, RECAP_A2, RECAP_B, memory, merge_for, merge_reply, two_chats, user_text, write_chat
from .test_pin import _edit

HAND_EDITED = "# 我自己整理的手册\n- 小满在东门等阿明。\n- 阿明在老梨树下借过宿。"


def _model(calls: list[str], handbook_reply: str | None = None) -> FunctionModel:
    def answer(request: ModelRequest) -> str:
        calls.append(request.purpose)
        if request.purpose == "recap":
            text = user_text(request)
            if "茶馆" in text or "雪停" in text:  # the chat moved on: its recap changes
                return RECAP_A2 if "初来乍到" in text else RECAP_B.replace("借宿。", "借宿，雪停了。")
            return RECAP_A if "初来乍到" in text else RECAP_B
        if handbook_reply is not None:  # a model that keeps the hand edit as it is: no chat blocks
            return merge_reply(handbook_reply, "# 往局记忆（同一世界更早的几局）\n\n- 小满在东门等阿明。")
        return merge_for("A", "B")

    return FunctionModel(answer)


def test_a_handbook_edited_without_source_lines_pays_for_one_refused_merge_not_one_per_sync(tmp_path: Path) -> None:
    two_chats(tmp_path)
    calls: list[str] = []
    assert memory(tmp_path, _model(calls)).sync().merged == "ok"
    _edit(tmp_path, "card:handbook", HAND_EDITED)
    notes: list[str] = []
    mem = memory(tmp_path, _model(calls, HAND_EDITED), on_activity=notes.append)
    assert mem.resume_merging() is True
    calls.clear()
    outcomes = [mem.sync().merged for _ in range(4)]
    assert calls.count("merge") == 1, f"{calls.count('merge')} merges paid for in 4 syncs on the same inputs"
    assert outcomes == ["failed", "skipped", "skipped", "skipped"]
    said = "\n".join(notes)
    assert "来源：局/" in said and "不再重复请求" in said  # what is wrong, and what to do
    # A change of the inputs (here a chat grows) is worth one more try.
    write_chat(tmp_path, "A", [("user", "去茶馆吧。"), ("assistant", "好。")])
    mem.sync()
    assert calls.count("merge") == 2


def test_a_refused_merge_is_not_repeated_and_a_good_reply_clears_the_refusal(tmp_path: Path) -> None:
    two_chats(tmp_path)
    calls: list[str] = []
    bad = memory(tmp_path, _model(calls, "（无改动）"))
    assert bad.sync().merged == "failed"
    assert bad.sync().merged == "skipped" and calls.count("merge") == 1
    write_chat(tmp_path, "B", [("user", "雪停了。"), ("assistant", "梨树下的屋亮了灯。")], name="雪夜")
    good = memory(tmp_path, _model(calls))
    assert good.sync().merged == "ok" and calls.count("merge") == 2
    assert load_manifest(good.files).refused_merge is None
    assert good.sync().merged == "no-change" and calls.count("merge") == 2
