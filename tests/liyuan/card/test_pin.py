"""A hand-edited aggregate pins merging; the other aggregate stays; resume_merging() lifts the pin.

Every recap and merge reply here is hand-written (ScriptedModel / FunctionModel), not model output.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from liyuan.card.manifest import load_manifest
from liyuan.model import FunctionModel, ModelRequest, ScriptedModel

from .test_fixtures import RECAP_A2, RECAP_B, memory, merge_reply, recap, two_chats, user_text, write_chat

HANDBOOK_NORTH = "# 局：初来乍到（A）\n- 小满在北门等阿明\n来源：局/A.md"
RESIDENT_NORTH = "# 往局记忆（同一世界更早的几局）\n\n- 小满在北门等阿明 [局:A]"
RECAP_NORTH = recap("小满入城", "- 第一天黄昏，小满入城。\n- 约好在北门再见。")
HANDBOOK_EAST = "# 局：初来乍到（A）\n- 小满在东门等阿明\n来源：局/A.md"
RESIDENT_EAST = "# 往局记忆（同一世界更早的几局）\n\n- 小满在东门等阿明 [局:A]"
FILES = {"card:handbook": "记忆.md", "card:resident": "常驻摘要.md"}


def _synced(card: Path) -> None:
    two_chats(card)

    def fn(request: ModelRequest) -> str:
        if request.purpose == "recap":
            return RECAP_NORTH if "初来乍到" in user_text(request) else RECAP_B
        return merge_reply(HANDBOOK_NORTH, RESIDENT_NORTH)

    assert memory(card, FunctionModel(fn)).sync().merged == "ok"


def _mem(card: Path) -> Path:
    return card / "记忆"


def _edit(card: Path, ref: str, text: str) -> None:
    mem = memory(card, ScriptedModel())
    read = mem.read_memory(ref)
    assert read is not None
    mem.change_memory(ref, read[1], text)


@pytest.mark.parametrize(("edited", "kept"), [("card:handbook", "card:resident"), ("card:resident", "card:handbook")])
def test_hand_edit_keeps_the_other_aggregate_through_later_syncs(tmp_path: Path, edited: str, kept: str) -> None:
    _synced(tmp_path)
    kept_path = _mem(tmp_path) / FILES[kept]
    kept_before = kept_path.read_bytes()
    _edit(tmp_path, edited, "用户更正：东门")
    assert kept_path.read_bytes() == kept_before  # left in place, byte for byte
    history = list((_mem(tmp_path) / ".history").iterdir())
    assert sorted(p.name.split("-", 2)[2] for p in history) == sorted(FILES.values())  # both copied
    assert any(p.read_bytes() == kept_before for p in history)

    write_chat(tmp_path, "A", [("user", "去茶馆吧。"), ("assistant", "好。")])
    notes: list[str] = []
    model = ScriptedModel({"recap": [RECAP_A2]})
    mem = memory(tmp_path, model, on_activity=notes.append)
    out = mem.sync()
    assert (out.recapped, out.merged, [c.purpose for c in model.calls]) == (["A"], "skipped", ["recap"])
    assert "记忆已手工固定：自动合并暂停，1 局的改动等着并入（resume_merging() 可恢复）" in notes
    assert kept_path.read_bytes() == kept_before
    assert (_mem(tmp_path) / FILES[edited]).read_text(encoding="utf-8") == "用户更正：东门\n"
    expected = RESIDENT_NORTH if kept == "card:resident" else "用户更正：东门"
    assert mem.load_resident_summary() == expected  # new chats still get cross-session memory
    assert memory(tmp_path, ScriptedModel()).sync().merged == "skipped"  # still pinned
    assert mem.load_resident_summary() == expected


def test_resume_merging_merges_from_the_hand_edit_and_forgets_what_was_deleted_meanwhile(tmp_path: Path) -> None:
    _synced(tmp_path)
    _edit(tmp_path, "card:handbook", "用户更正：东门")
    write_chat(tmp_path, "A", [("user", "去茶馆吧。"), ("assistant", "好。")])
    pinned = memory(tmp_path, ScriptedModel({"recap": [RECAP_A2]}))
    assert pinned.sync().merged == "skipped"
    assert pinned.delete_chat("B") is True  # a soft delete while merging is paused

    notes: list[str] = []
    model = ScriptedModel({"merge": [merge_reply(HANDBOOK_EAST, RESIDENT_EAST)]})
    mem = memory(tmp_path, model, on_activity=notes.append)
    assert mem.resume_merging() is True
    assert "已恢复自动合并：下次同步以手改过的记忆为底重新合并" in notes
    assert mem.resume_merging() is False  # not paused any more
    out = mem.sync()
    assert (out.merged, out.forgotten) == ("ok", ["B"])
    merge_input = user_text(model.calls[0])
    assert "<handbook>\n用户更正：东门\n</handbook>" in merge_input  # the hand edit is the base
    assert f"<resident>\n{RESIDENT_NORTH}\n</resident>" in merge_input
    assert "<deleted-chats>\n- 局/B.md\n</deleted-chats>" in merge_input
    assert '<recap chat-id="A"' in merge_input and "第二天去了茶馆" in merge_input
    assert (_mem(tmp_path) / "记忆.md").read_text(encoding="utf-8") == HANDBOOK_EAST + "\n"
    assert mem.load_resident_summary() == RESIDENT_EAST
    manual = load_manifest(mem.files).manual
    assert manual is not None
    assert (manual.aggregate_pinned, manual.merge_requested, manual.protected_refs) == (False, False, [])
    assert manual.superseded_recaps == {}
    assert [(d.ref, d.note) for d in mem.list_memory()] == [
        ("card:handbook", ""), ("card:resident", ""), ("card:recap:A", "")]

    quiet = ScriptedModel()
    assert memory(tmp_path, quiet).sync().merged == "no-change" and quiet.calls == []


def test_resume_with_nothing_new_merges_once_and_retries_a_failed_merge(tmp_path: Path) -> None:
    _synced(tmp_path)
    _edit(tmp_path, "card:resident", "# 往局记忆（同一世界更早的几局）\n\n- 用户更正：东门")
    mem = memory(tmp_path, ScriptedModel())
    assert mem.sync().merged == "skipped"
    assert mem.resume_merging() is True

    model = ScriptedModel({"merge": ["这不是合并结果", merge_reply(HANDBOOK_EAST, RESIDENT_EAST)]})
    retry = memory(tmp_path, model)
    assert retry.sync().merged == "failed"
    assert retry.sync().merged == "skipped" and len(model.calls) == 1  # the same inputs: not paid again (issue 37)
    assert retry.resume_merging() is True  # asked for once more
    assert retry.sync().merged == "ok"  # the request survived the failed attempt
    merge_input = user_text(model.calls[1])
    assert "<recap " not in merge_input and "<deleted-chats>" not in merge_input
    assert "<resident>\n# 往局记忆（同一世界更早的几局）\n\n- 用户更正：东门\n</resident>" in merge_input
    # nothing to merge: no block is sent (the code keeps A's), only the count of the kept ones
    assert "<handbook>\n\n</handbook>" in merge_input and "另有 1 局的块" in merge_input
    assert len(model.calls) == 2
    assert retry.sync().merged == "no-change" and len(model.calls) == 2


def test_resume_keeps_hand_edited_recaps_protected(tmp_path: Path) -> None:
    _synced(tmp_path)
    _edit(tmp_path, "card:recap:B", recap("雪夜借宿（手改）", "- 雪夜里阿明借宿。"))
    model = ScriptedModel({"merge": [merge_reply(HANDBOOK_NORTH, RESIDENT_NORTH)]})
    assert memory(tmp_path, model).sync().merged == "ok"  # the rebuild after a recap edit
    _edit(tmp_path, "card:handbook", "用户更正：东门")
    mem = memory(tmp_path, ScriptedModel({"merge": [merge_reply(HANDBOOK_EAST, RESIDENT_EAST)]}))
    assert mem.resume_merging() is True
    manual = load_manifest(mem.files).manual
    assert manual is not None and manual.protected_refs == ["card:recap:B"]
    write_chat(tmp_path, "B", [("user", "又下雪了。"), ("assistant", "嗯。")])
    out = mem.sync()
    assert (out.recapped, out.merged) == ([], "ok")  # B's hand-edited recap is never rewritten


# -- issue 26, item 6: a handbook hand-edited without source lines ----------------------
# Before: after resume_merging() the merge sent the hand-edited handbook and no recap
# (none had changed); a reply can only hold a chat's block (来源：局/<id>.md) for a chat
# it was given, so every reply was refused for having none, and every later sync paid
# for the same refused merge again.


def _blocks_for_what_it_was_given(calls: list[str]) -> FunctionModel:
    """A stand-in merge that, like a model, writes a block only for the recaps it was sent."""
    def fn(request: ModelRequest) -> str:
        text = user_text(request)
        calls.append(request.purpose)
        given = re.findall(r'<recap chat-id="([^"]+)"', text)
        blocks = "\n\n".join(f"# 局：{c}\n- 东门\n来源：局/{c}.md" for c in given)
        handbook = f"用户更正：东门\n\n{blocks}" if blocks else "用户更正：东门"
        return merge_reply(handbook, RESIDENT_EAST)
    return FunctionModel(fn)


def test_a_handbook_edited_without_source_lines_merges_again_after_resume(tmp_path: Path) -> None:
    _synced(tmp_path)
    _edit(tmp_path, "card:handbook", "用户更正：东门")  # every 来源：局/… line gone
    calls: list[str] = []
    notes: list[str] = []
    mem = memory(tmp_path, _blocks_for_what_it_was_given(calls), on_activity=notes.append)
    assert mem.resume_merging() is True
    outcomes = [mem.sync().merged for _ in range(3)]
    assert outcomes == ["ok", "no-change", "no-change"]  # merged once, then nothing more to pay for
    assert calls == ["merge"]
    handbook = (_mem(tmp_path) / "记忆.md").read_text(encoding="utf-8")
    assert "用户更正：东门" in handbook and "来源：局/A.md" in handbook and "来源：局/B.md" in handbook
    assert any("来源" in n and "全部" in n for n in notes)  # said what it did about it
