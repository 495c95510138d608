"""Issue 14, item 2: a malformed reply of any kind changes no memory file and no tree entry.

Every reply here is hand-written to look like a way a model goes wrong (an echo of
the prompt, a double fence, a change list instead of full texts ...); no model wrote it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from liyuan.card.prompts import HANDBOOK_MARK, RESIDENT_HEADING, RESIDENT_MARK
from liyuan.context.budget import OMITTED_MARKER, RESIDENT_MAX_CHARS
from liyuan.discussion.compact import run_discussion_compaction
from liyuan.model import Completion, FunctionModel, ModelRequest
from liyuan.story.compact import CompactionSettings, run_compaction
from liyuan.text import utf16_len
from tests.liyuan.branches import SUMMARY_REPLY, story_turns, tree_of
from tests.liyuan.card.test_fixtures import RECAP_A, RECAP_A2, RECAP_B, RESIDENT_1, memory, two_chats, write_chat
from tests.liyuan.discussion.test_compact import tree_with, turns

Reply = str | Completion | Callable[[ModelRequest], str | Completion]


def answer(reply: Reply) -> Callable[[ModelRequest], str | Completion]:
    return reply if callable(reply) else (lambda _r: reply)


def system_echo(request: ModelRequest) -> str:
    return request.messages[0].content


def chatty_echo(request: ModelRequest) -> str:
    return "好的，我先把要求重复一遍：\n\n" + request.messages[0].content + "\n\n明白了。"


def fenced_echo(request: ModelRequest) -> str:
    return "```markdown\n" + request.messages[0].content + "\n```"


# -- relay summary -----------------------------------------------------------------------


@pytest.mark.parametrize("reply", [
    system_echo, chatty_echo, fenced_echo,
    Completion(text=SUMMARY_REPLY.rsplit("\n", 1)[0] + "\n第", finish_reason="length"),
], ids=["echo", "chatty-echo", "fenced-echo", "cut-off"])
def test_a_malformed_summary_appends_no_summary(reply: Reply) -> None:
    tree = tree_of(story_turns(1, 40))
    before = [e.id for e in tree.entries()]
    outcome = run_compaction(tree, FunctionModel(answer(reply)), CompactionSettings(user_name="旅人", char_name="阿箬"))
    assert outcome.kind == "failed" and outcome.reason == "invalid-summary"
    added = [e for e in tree.entries() if e.id not in before]
    assert [e.custom_type for e in added] == ["rp-compact-failed"]  # only the failure note


def test_a_summary_that_quotes_one_instruction_phrase_is_still_accepted() -> None:
    # One shared phrase is not an echo: only a reply carrying several instruction lines is.
    reply = SUMMARY_REPLY + "\n（只记对话里真正发生过的事）"
    tree = tree_of(story_turns(1, 40))
    outcome = run_compaction(tree, FunctionModel(lambda _r: reply),
                             CompactionSettings(user_name="旅人", char_name="阿箬"))
    assert outcome.kind == "compacted"


# -- recap --------------------------------------------------------------------------------


@pytest.mark.parametrize("reply", [
    "```markdown\n```markdown\n" + RECAP_A + "\n```\n```",
    "```\n```\n" + RECAP_A + "\n```\n```",
    "~~~\n```markdown\n" + RECAP_A + "\n```\n~~~",
    "好的：\n```markdown\n```\n" + RECAP_A + "\n```\n```\n以上。",
    system_echo, chatty_echo,
    Completion(text=RECAP_A + "\n- 还有一件", finish_reason="length"),
], ids=["double-fence", "double-plain", "tilde-around-backticks", "chatty-double", "echo", "chatty-echo", "cut-off"])
def test_a_malformed_recap_writes_no_recap(tmp_path: Path, reply: Reply) -> None:
    two_chats(tmp_path)
    notes: list[str] = []
    model = FunctionModel(lambda r: answer(reply)(r) if r.purpose == "recap" else "不该合并")
    outcome = memory(tmp_path, model, on_activity=notes.append).sync()
    assert (outcome.recapped, outcome.failed) == ([], ["A", "B"])
    assert not (tmp_path / "记忆" / "局").exists() or not list((tmp_path / "记忆" / "局").iterdir())
    assert any(n.startswith("复盘「初来乍到」失败：") for n in notes)


def test_a_recap_in_one_fence_still_lands(tmp_path: Path) -> None:
    two_chats(tmp_path)
    model = FunctionModel(lambda r: "```markdown\n" + RECAP_A + "\n```" if r.purpose == "recap" else merge(
        HANDBOOK_AB, RESIDENT_1))
    assert memory(tmp_path, model).sync().recapped == ["A", "B"]


# -- merge --------------------------------------------------------------------------------

BLOCK_A = "# 局：初来乍到（A）\n- 小满入城，在东门遇见阿明。\n- 城东有茶馆。\n来源：局/A.md"
BLOCK_B = "# 局：雪夜（B）\n- 雪夜里阿明在老梨树下借宿。\n来源：局/B.md"
CROSS = "# 人物（跨局）\n" + "\n".join(f"- 小满的第{i}条事实，写得足够长以便占些篇幅。 [局:A][局:B]" for i in range(12))
HANDBOOK_AB = f"{BLOCK_A}\n\n{BLOCK_B}\n\n{CROSS}"


def merge(handbook: str, resident: str) -> str:
    return f"{HANDBOOK_MARK}\n{handbook}\n{RESIDENT_MARK}\n{resident}\n"


def merged_card(card: Path) -> tuple[bytes, bytes]:
    """A card with both chats merged once, then chat A continued (so the next sync merges again)."""
    two_chats(card)
    recaps = {"初来乍到": RECAP_A, "雪夜": RECAP_B}
    model = FunctionModel(lambda r: next(v for k, v in recaps.items() if f'chat="{k}"' in r.messages[1].content)
                          if r.purpose == "recap" else merge(HANDBOOK_AB, RESIDENT_1))
    assert memory(card, model).sync().merged == "ok"
    write_chat(card, "A", [("user", "去茶馆吧。"), ("assistant", "好。")])
    return aggregates(card)


def aggregates(card: Path) -> tuple[bytes, bytes]:
    return ((card / "记忆" / "记忆.md").read_bytes(), (card / "记忆" / "常驻摘要.md").read_bytes())


def merge_again(card: Path, reply: Reply) -> tuple[str, list[str]]:
    notes: list[str] = []
    model = FunctionModel(lambda r: RECAP_A2 if r.purpose == "recap" else answer(reply)(r))
    outcome = memory(card, model, on_activity=notes.append).sync()
    return outcome.merged, notes


LONG_RESIDENT = RESIDENT_HEADING + "\n\n" + "\n\n".join(f"- 第{i}条：" + "长" * 85 for i in range(16))

MALFORMED_MERGES: dict[str, Reply] = {
    "no-resident-heading": merge(HANDBOOK_AB, "## 既定事实\n- 小满住在城东 [局:A]"),
    "cut-off": Completion(text=merge(HANDBOOK_AB, RESIDENT_1)[:-12], finish_reason="length"),
    "change-list": merge("- 新增：小满去了茶馆 [局:A]\n- 修改：无", RESIDENT_HEADING + "\n- 新增：茶馆 [局:A]"),
    "unchanged-marks": merge("（无改动）", "（同上）"),
    "unknown-tag": merge(HANDBOOK_AB + "\n- 新人物出场 [局:zz9]", RESIDENT_1),
    "unknown-tag-in-resident": merge(HANDBOOK_AB, RESIDENT_1 + "\n- 鬼影 [局:ghost]"),
    "unknown-source": merge(HANDBOOK_AB + "\n\n# 局：幻影（x）\n- 无中生有\n来源：局/x.md", RESIDENT_1),
    "one-megabyte": merge(HANDBOOK_AB + "\n" + "填" * 1_000_000, RESIDENT_1),
    "lost-most-content": merge(f"{BLOCK_A}\n\n# 人物（跨局）\n- 小满 [局:A]", RESIDENT_1),
    "echo": system_echo,
}


@pytest.mark.parametrize("reply", list(MALFORMED_MERGES.values()), ids=list(MALFORMED_MERGES))
def test_a_malformed_merge_changes_no_aggregate(tmp_path: Path, reply: Reply) -> None:
    before = merged_card(tmp_path)
    manifest = json.loads((tmp_path / "记忆" / ".清单.json").read_text(encoding="utf-8"))
    status, notes = merge_again(tmp_path, reply)
    assert status == "failed"
    assert aggregates(tmp_path) == before
    after = json.loads((tmp_path / "记忆" / ".清单.json").read_text(encoding="utf-8"))
    assert after.get("mergedAt") == manifest.get("mergedAt")  # the merge is owed, retried next sync
    assert any(n.startswith("合并记忆失败：") for n in notes)


def test_a_well_formed_merge_still_lands(tmp_path: Path) -> None:
    merged_card(tmp_path)
    handbook = HANDBOOK_AB.replace("- 城东有茶馆。", "- 城东有茶馆。\n- 第二天去了茶馆。")
    status, _ = merge_again(tmp_path, merge(handbook, RESIDENT_1))
    assert status == "ok"
    assert "第二天去了茶馆" in aggregates(tmp_path)[0].decode()


def test_a_reply_that_writes_only_the_changed_block_keeps_the_others(tmp_path: Path) -> None:
    """Issue 37: the reply writes the blocks of the recaps it was sent and the cross-chat
    sections; the code keeps every other block where it was (once refused as a lost block)."""
    merged_card(tmp_path)
    block = BLOCK_A.replace("- 城东有茶馆。", "- 城东有茶馆。\n- 第二天去了茶馆。")
    status, _ = merge_again(tmp_path, merge(f"{block}\n\n{CROSS}", RESIDENT_1))
    assert status == "ok"
    assert aggregates(tmp_path)[0].decode() == f"{block}\n\n{BLOCK_B}\n\n{CROSS}\n"


def test_a_deletion_explains_a_lost_block(tmp_path: Path) -> None:
    merged_card(tmp_path)
    (tmp_path / "记忆" / "局" / "B.md").unlink()  # chat B's recap is gone: the merge must forget it
    status, _ = merge_again(tmp_path, merge(f"{BLOCK_A}\n\n# 人物（跨局）\n- 小满：茶馆帮工 [局:A]",
                                            RESIDENT_HEADING + "\n\n- 初来乍到：小满入城。"))
    assert status == "ok"
    assert "来源：局/B.md" not in aggregates(tmp_path)[0].decode()


def test_a_merge_that_keeps_a_deleted_chats_block_is_refused(tmp_path: Path) -> None:
    before = merged_card(tmp_path)
    (tmp_path / "记忆" / "局" / "B.md").unlink()
    status, _ = merge_again(tmp_path, merge(HANDBOOK_AB, RESIDENT_1))
    assert status == "failed" and aggregates(tmp_path) == before


def test_an_overlong_resident_is_cut_at_a_paragraph_not_refused(tmp_path: Path) -> None:
    merged_card(tmp_path)
    assert utf16_len(LONG_RESIDENT) > 1_400
    status, notes = merge_again(tmp_path, merge(HANDBOOK_AB, LONG_RESIDENT))
    assert status == "ok"
    stored = aggregates(tmp_path)[1].decode().rstrip("\n")
    assert utf16_len(stored) <= RESIDENT_MAX_CHARS
    assert stored.endswith(OMITTED_MARKER)
    kept = stored.removesuffix(OMITTED_MARKER)
    assert LONG_RESIDENT.startswith(kept) and LONG_RESIDENT[len(kept):].startswith("\n\n")  # a paragraph cut
    assert any("常驻摘要超出" in n for n in notes)


# -- discussion ---------------------------------------------------------------------------


@pytest.mark.parametrize("reply", [
    system_echo, chatty_echo,
    Completion(text="- 用户要求每章一万字。\n- 已写完 001", finish_reason="length"),
], ids=["echo", "chatty-echo", "cut-off"])
def test_a_malformed_discussion_summary_appends_nothing(reply: Reply) -> None:
    tree = tree_with(turns(1, 4))
    size = len(tree)
    outcome = run_discussion_compaction(tree, FunctionModel(answer(reply)), context_window=50_000,
                                        keep_recent=15_000)
    assert outcome.kind == "failed" and outcome.reason == "invalid-summary"
    assert len(tree) == size
