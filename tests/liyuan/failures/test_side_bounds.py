"""Size bounds on what a side call is sent and what is kept from it (issue 26, item 8).

Before: a 50 MB message produced a 16.7-million-character summary request; a 10 MB
summary reply was stored and sent again with every later call; a 10 MB recap was passed
on to the merge. Every reply here is a hand-written stand-in (FunctionModel), not model
output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from liyuan.bounds import SIDE_INPUT_MAX_CHARS, keep_newest, keep_oldest, reply_max_chars
from liyuan.card.prompts import RECAP_MAX_TOKENS, validate_recap
from liyuan.discussion.compact import run_discussion_compaction
from liyuan.discussion.messages import DISCUSSION_MAX_TOKENS
from liyuan.errors import ModelOutputError
from liyuan.model import FunctionModel, ModelRequest
from liyuan.session.entries import message
from liyuan.story.compact import CompactionSettings, run_compaction
from liyuan.story.scribe import SUMMARY_MAX_TOKENS
from liyuan.story.view import SUMMARY_ENTRY_TYPE
from tests.liyuan.branches import SUMMARY_REPLY, story_turns, summary, tree_of
from tests.liyuan.card.test_fixtures import memory as card_memory
from tests.liyuan.card.test_fixtures import merge_for, recap, user_text, write_chat

NAMES = {"user_name": "旅人", "char_name": "阿箬"}
HUGE = 3_000_000
"""Characters of one oversized message or reply (a 50 MB one behaves the same, only slower)."""
PROMPT_ROOM = 6000
"""Room for the template's own words around the bounded material."""


def recorder(reply: str) -> tuple[FunctionModel, list[ModelRequest]]:
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return reply

    return FunctionModel(answer), seen


def prompt_chars(request: ModelRequest) -> int:
    return sum(len(m.content) for m in request.messages)


# -- the bounds themselves --------------------------------------------------------------


def test_keep_newest_and_oldest_cut_at_paragraphs_and_count_what_they_left_out() -> None:
    text = "\n\n".join(f"第{i}段" + "云" * 20 for i in range(10))
    newest, dropped = keep_newest(text, 60)
    assert newest.startswith("第8段") and dropped == len(text) - len(newest)
    oldest, cut = keep_oldest(text, 60)
    assert oldest.endswith("第1段" + "云" * 20) and cut == len(text) - len(oldest)
    assert keep_newest("短", 60) == ("短", 0) and keep_oldest("短", 60) == ("短", 0)


# -- story compaction -------------------------------------------------------------------


def test_a_huge_message_gives_a_bounded_summary_request_that_says_what_it_left_out() -> None:
    entries = story_turns(1, 10)
    entries[2] = message("u-2", "a-1", "user", "第2轮用户" + "雾" * HUGE)
    tree = tree_of(entries)
    model, seen = recorder(SUMMARY_REPLY)
    lines: list[str] = []
    outcome = run_compaction(tree, model, CompactionSettings(every_n_turns=3, keep=2, **NAMES),
                             on_activity=lines.append)
    assert outcome.kind == "compacted"
    assert prompt_chars(seen[0]) < SIDE_INPUT_MAX_CHARS + PROMPT_ROOM
    assert "没有放进来" in user_text(seen[0])
    assert any("没有放进来" in line or "没有发" in line for line in lines)
    assert "第8轮回复" in user_text(seen[0])  # the newest covered text is what is sent


def test_a_huge_previous_summary_is_cut_in_the_next_request() -> None:
    old = SUMMARY_REPLY.replace("第一天黄昏", "第一天黄昏" + "旧" * HUGE)
    tree = tree_of([*story_turns(1, 3), summary("s1", "a-3", old, "a-3"), *story_turns(4, 14, "s1")])
    model, seen = recorder(SUMMARY_REPLY)
    run_compaction(tree, model, CompactionSettings(every_n_turns=3, keep=2, **NAMES))
    assert seen and prompt_chars(seen[0]) < SIDE_INPUT_MAX_CHARS + reply_max_chars(SUMMARY_MAX_TOKENS) + PROMPT_ROOM


def test_a_huge_summary_reply_is_refused_and_not_stored() -> None:
    tree = tree_of(story_turns(1, 10))
    huge = SUMMARY_REPLY.replace("第一天黄昏", "第一天黄昏" + "雾" * HUGE)
    outcome = run_compaction(tree, recorder(huge)[0], CompactionSettings(every_n_turns=3, keep=2, **NAMES))
    assert (outcome.kind, outcome.reason) == ("failed", "invalid-summary")
    assert "远超" in outcome.message
    assert not [e for e in tree.branch() if e.custom_type == SUMMARY_ENTRY_TYPE]
    assert sum(len(str(e.data)) for e in tree.branch() if e.type == "custom") < 10_000  # not kept as a note either


# -- recap and merge --------------------------------------------------------------------


def test_a_huge_recap_reply_is_refused_and_never_reaches_the_merge(tmp_path: Path) -> None:
    write_chat(tmp_path, "A", [("user", "进城。"), ("assistant", "好。")], name="初来乍到")
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return recap("小满入城", "- " + "雾" * HUGE) if request.purpose == "recap" else merge_for("A")

    outcome = card_memory(tmp_path, FunctionModel(answer)).sync()
    assert outcome.failed == ["A"] and [r.purpose for r in seen] == ["recap"]
    assert not (tmp_path / "记忆" / "局" / "A.md").exists()
    with pytest.raises(ModelOutputError, match="远超"):
        validate_recap(recap("小满入城", "- " + "雾" * (reply_max_chars(RECAP_MAX_TOKENS) + 1)))


def test_a_huge_recap_file_on_disk_is_cut_in_the_merge_prompt(tmp_path: Path) -> None:
    write_chat(tmp_path, "A", [("user", "进城。"), ("assistant", "好。")], name="初来乍到")
    folder = tmp_path / "记忆" / "局"
    folder.mkdir(parents=True)
    (folder / "B.md").write_text(recap("雪夜借宿", "- " + "雪" * HUGE), encoding="utf-8")  # written by hand
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return recap("小满入城", "- 进城。") if request.purpose == "recap" else merge_for("A", "B")

    card_memory(tmp_path, FunctionModel(answer)).sync()
    merges = [r for r in seen if r.purpose == "merge"]
    assert merges and prompt_chars(merges[0]) < 3 * reply_max_chars(RECAP_MAX_TOKENS)
    assert "没有放进来" in user_text(merges[0])


# -- discussion compaction --------------------------------------------------------------

DISCUSSION_REPLY = "- 用户要写八章小说。\n- 已写完第一章。"


def discussion(body: int) -> list:  # type: ignore[type-arg]
    out = []
    parent = None
    for i in range(1, 5):
        text = f"第{i}个要求" + ("雾" * body if i == 1 else "")
        out += [message(f"u{i}", parent, "user", text), message(f"a{i}", f"u{i}", "assistant", f"好的{i}。")]
        parent = f"a{i}"
    return out


def test_a_huge_discussion_gives_a_bounded_request_that_says_what_it_left_out() -> None:
    tree = tree_of(discussion(HUGE))
    model, seen = recorder(DISCUSSION_REPLY)
    outcome = run_discussion_compaction(tree, model, context_window=20_000, reserve=4000, keep_recent=10)
    assert outcome.kind == "compacted"
    assert prompt_chars(seen[0]) < SIDE_INPUT_MAX_CHARS + PROMPT_ROOM
    assert "没有放进来" in user_text(seen[0])


def test_a_huge_discussion_summary_is_refused() -> None:
    tree = tree_of(discussion(HUGE))
    reply = "- " + "雾" * (reply_max_chars(DISCUSSION_MAX_TOKENS) + 1)
    outcome = run_discussion_compaction(tree, recorder(reply)[0], context_window=20_000, reserve=4000,
                                        keep_recent=10)
    assert (outcome.kind, outcome.reason) == ("failed", "invalid-summary") and "远超" in outcome.message
